"""GES (greedy equivalence search, via causal-learn) driven by the latent-aware local score."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np

from certkit._optional import require
from certkit.causal.search import LocalScore

__all__ = ["ges_search"]

_PATCH_LOCK = threading.Lock()


class _CausalLearnScore:
    """causal-learn's local-score interface (higher is better): ``-BIC / 2`` of our score."""

    def __init__(self, score: LocalScore) -> None:
        self._score = score

    def score(self, i: int, parents: list[int]) -> float:
        return -0.5 * self._score(int(i), parents)


@contextlib.contextmanager
def _score_class(module: Any, score: LocalScore) -> Iterator[None]:
    # causal-learn's ges() builds its score object from a fixed list of names; we substitute ours
    # for the duration of the call (under a lock, since the substitution is module-global).
    with _PATCH_LOCK:
        original = module.LocalScoreClass
        module.LocalScoreClass = lambda *args, **kwargs: _CausalLearnScore(score)
        try:
            yield
        finally:
            module.LocalScoreClass = original


def ges_search(score: LocalScore, X: np.ndarray, *, max_parents: int | None = None) -> np.ndarray:
    """Run causal-learn's GES with ``score`` and return one DAG of the equivalence class it finds.

    Parameters
    ----------
    score : LocalScore
        ``score(node, parents)``, lower is better (e.g. ``LatentBIC``).
    X : ndarray (n, d)
        The data (causal-learn only reads its shape here).
    max_parents : int, optional
        Cap on the number of parents.

    Returns
    -------
    ndarray (d, d) of int
        ``A[i, j] = 1`` for ``i -> j``; undirected edges of the CPDAG are oriented by causal-learn's
        ``pdag2dag`` (a consistent extension).
    """
    ges_module = require("causallearn.search.ScoreBased.GES", extra="causal", purpose='search="ges"')
    pdag2dag = require("causallearn.utils.PDAG2DAG", extra="causal", purpose='search="ges"').pdag2dag
    d = X.shape[1]
    with _score_class(ges_module, score):
        record = ges_module.ges(X, score_func="local_score_BIC", maxP=max_parents)
    graph = pdag2dag(record["G"]).graph
    adjacency = np.zeros((d, d), dtype=np.int64)
    for i in range(d):
        for j in range(d):
            if graph[j, i] == 1 and graph[i, j] == -1:
                adjacency[i, j] = 1
    return adjacency
