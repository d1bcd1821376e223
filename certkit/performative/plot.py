"""Plots of performative bounds: a bound and each of its terms against the share of affected units."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from certkit._plotting import pyplot
from certkit._validation import check_array

__all__ = ["plot_bound_terms"]


def plot_bound_terms(
    shares: Sequence[float],
    bounds: Sequence[Any],
    *,
    ax: Any = None,
    title: str | None = None,
    log_scale: bool = False,
) -> Any:
    """Draw a bound's total and each of its terms against the share of affected units.

    The change-learn trade-off of performative learning: as more units are affected, the performative term
    grows while (for Thm 3.13/3.15) the complexity term shrinks.

    Parameters
    ----------
    shares : sequence of float
        Shares of affected units $m/n$ in $[0, 1]$ (x axis).
    bounds : sequence of BoundResult
        One `certkit.performative.BoundResult` per share, all with the same term names.
    ax : matplotlib Axes, optional
        Where to draw (a new figure is made otherwise).
    title : str, optional
    log_scale : bool, default False
        Logarithmic y axis (useful when the terms differ by orders of magnitude).

    Returns
    -------
    matplotlib.axes.Axes
    """
    x = check_array(shares, "shares", ndim=1)
    if np.any((x < 0) | (x > 1)):
        raise ValueError("shares must lie in [0, 1]")
    if len(bounds) != len(x):
        raise ValueError(f"bounds must have one result per share: got {len(bounds)} for {len(x)} shares")
    names = list(bounds[0].terms)
    if any(list(b.terms) != names for b in bounds):
        raise ValueError("every bound must have the same terms")
    if ax is None:
        _, ax = pyplot().subplots(figsize=(7.0, 3.8), layout="constrained")
    totals = np.array([b.total for b in bounds], dtype=float)
    ax.plot(x, totals, marker="o", markersize=3, linewidth=2.0, color="black", label="total bound")
    for name in names:
        values = np.array([b.terms[name] for b in bounds], dtype=float)
        if log_scale and not np.any(values > 0):
            continue
        ax.plot(x, values, marker="o", markersize=2.5, linewidth=1.2, label=f"{name} term".replace("_", " "))
    if log_scale:
        ax.set_yscale("log")
    ax.set_xlabel("share of units affected (m / n)")
    ax.set_ylabel("bound and its terms")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)  # never over data
    if title:
        ax.set_title(title)
    return ax
