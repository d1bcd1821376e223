"""``mechanism="auto"``: the linear and the spline fit, each also on the other search's graph, and the
choice between them by total BIC."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["AUTO_MARGIN", "fit_auto"]

#: ``mechanism="auto"`` keeps the spline fit only when its total BIC is lower than the linear fit's by more
#: than this (BIC units; 10 is "very strong" evidence on Kass and Raftery's scale).
AUTO_MARGIN = 10.0

#: A fit of one mechanism, on the search's own graph (None) or on a given (adjacency, order).
FitOne = Callable[[str, "tuple[np.ndarray, tuple[int, ...]] | None"], Any]


def fit_auto(fit_one: FitOne, *, splines: Callable[[], bool]) -> tuple[str, dict[str, Any], int]:
    """The fits of ``mechanism="auto"`` and the one kept.

    The linear fit, then the spline fit when ``splines()`` (the rows and ``search_samples`` hold the
    spline mixtures). Where the two searches found different graphs, a search that missed a better graph
    for one mechanism must not decide the mechanism: the linear mechanisms are also fitted on the spline
    search's graph, and the spline ones on the linear search's graph unless the spline fit already wins,
    each mechanism keeping its lower total BIC. The spline fit is kept when its total BIC is lower than the
    linear one's by more than `AUTO_MARGIN`.

    Parameters
    ----------
    fit_one : callable
        ``fit_one(mechanism, graph)``: a fitted model (``adjacency_``, ``order_``, ``score_``,
        ``n_scores_``) of that mechanism, on its own search's graph (``graph`` None) or on ``graph``.
    splines : callable
        ``splines()``: whether the spline fit is tried (asked after the linear fit, whose errors about the
        parameters come first).

    Returns
    -------
    chosen : str
        The mechanism kept.
    fits : dict
        The best fit of each mechanism tried.
    n_scores : int
        Local scores computed by all the fits.
    """
    fits = {"linear": fit_one("linear", None)}
    if splines():
        fits["spline"] = fit_one("spline", None)
    n_scores = sum(model.n_scores_ for model in fits.values())
    if len(fits) == 2 and not np.array_equal(fits["linear"].adjacency_, fits["spline"].adjacency_):
        graphs = {option: (model.adjacency_, model.order_) for option, model in fits.items()}
        for option, other in (("linear", "spline"), ("spline", "linear")):
            if option == "spline" and fits["spline"].score_ < fits["linear"].score_ - AUTO_MARGIN:
                break
            model = fit_one(option, graphs[other])
            n_scores += model.n_scores_
            # (lower beyond rounding: a score-equivalent graph's total differs in the last bits)
            if model.score_ < fits[option].score_ - 1e-9 * abs(fits[option].score_):
                fits[option] = model
    spline_wins = len(fits) == 2 and fits["spline"].score_ < fits["linear"].score_ - AUTO_MARGIN
    return ("spline" if spline_wins else "linear"), fits, n_scores
