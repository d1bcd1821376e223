"""Orientations identified by a score that is not score-equivalent (nonlinear additive-noise mechanisms).

A linear-Gaussian BIC gives every DAG of a Markov equivalence class the same score, so the orientation of
an edge the class leaves undirected is arbitrary. With nonlinear mechanisms and additive noise the
reverse model does not fit as well in general (Hoyer et al. 2009; Peters et al. 2014, CAM), and the
score itself tells the directions apart. ``score_orientations`` marks an undirected edge as oriented when
reversing it in the fitted DAG raises the total score by more than a threshold.
"""

from __future__ import annotations

import numpy as np

from certkit.causal.search import LocalScore

__all__ = ["score_orientations"]


def _reaches(adjacency: np.ndarray, source: int, target: int, skip: tuple[int, int]) -> bool:
    """A directed path ``source -> ... -> target`` in ``adjacency`` that does not use the edge ``skip``."""
    seen, stack = {source}, [source]
    while stack:
        v = stack.pop()
        for w in np.flatnonzero(adjacency[v]):
            w = int(w)
            if (v, w) == skip or w in seen:
                continue
            if w == target:
                return True
            seen.add(w)
            stack.append(w)
    return False


def score_orientations(
    score: LocalScore, adjacency: np.ndarray, cpdag_matrix: np.ndarray, threshold: float
) -> np.ndarray:
    """The edges ``i -> j`` of ``adjacency``, undirected in ``cpdag_matrix``, that the score orients.

    For such an edge, with parents ``pa`` in ``adjacency``, the reversal changes two local scores:
    $\\Delta = S(j \\mid pa_j \\setminus i) + S(i \\mid pa_i \\cup j) - S(j \\mid pa_j) - S(i \\mid pa_i)$.
    The orientation ``i -> j`` is identified when $\\Delta >$ ``threshold`` (the fitted direction fits
    better by that much). An edge whose reversal would close a directed cycle (another path from ``i``
    to ``j``) is left as it is: the reversal is no DAG to compare with.

    Parameters
    ----------
    score : LocalScore
        The score of the search (lower is better), e.g. ``LatentBIC``.
    adjacency : ndarray (d, d) of int
        The fitted DAG.
    cpdag_matrix : ndarray (d, d) of int
        Its CPDAG (``cpdag``): only edges with both entries 1 are tested.
    threshold : float
        Minimum score increase of the reversal (BIC units, >= 0).

    Returns
    -------
    ndarray (d, d) of bool
        True for each edge ``i -> j`` of ``adjacency`` that the score orients.
    """
    edges = [
        (i, j) for i, j in ((int(a), int(b)) for a, b in zip(*np.nonzero(adjacency)))
        if cpdag_matrix[i, j] and cpdag_matrix[j, i] and not _reaches(adjacency, i, j, (i, j))
    ]
    parents = [set(np.flatnonzero(adjacency[:, v]).tolist()) for v in range(adjacency.shape[0])]
    keys = []
    for i, j in edges:
        keys += [(j, parents[j]), (i, parents[i]), (j, parents[j] - {i}), (i, parents[i] | {j})]
    score.prefetch(keys)
    out = np.zeros(adjacency.shape, dtype=bool)
    for i, j in edges:
        now = score(j, parents[j]) + score(i, parents[i])
        reversed_ = score(j, parents[j] - {i}) + score(i, parents[i] | {j})
        out[i, j] = reversed_ - now > threshold
    return out
