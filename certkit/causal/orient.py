"""Orientations identified by a score that is not score-equivalent (nonlinear additive-noise mechanisms).

A linear-Gaussian BIC gives every DAG of a Markov equivalence class the same score, so the orientation of
an edge the class leaves undirected is arbitrary. With nonlinear mechanisms and additive noise the
reverse model does not fit as well in general (Hoyer et al. 2009; Peters et al. 2014, CAM), and the
score itself tells the directions apart. ``score_orientations`` marks an undirected edge as oriented when
reversing it raises the total score by more than a threshold, in the member of the class where the edge
is covered (reversing it there gives another member, so the difference measures the direction and not
a change of v-structures).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from certkit._validation import check_nonnegative
from certkit.causal.equivalence import check_cpdag_of
from certkit.causal.search import LocalScore, check_local_score

__all__ = ["covered_parents", "score_orientations"]


def covered_parents(cpdag_matrix: np.ndarray, i: int, j: int) -> frozenset[int] | None:
    """The parents ``D`` of ``i`` in a member of the class where the undirected edge ``i - j`` is
    ``i -> j`` and covered (``pa(i) = D``, ``pa(j) = D + {i}``); None if the CPDAG gives ``i`` and ``j``
    different directed parents (no such member is known; the edge is then not tested).

    In a CPDAG the endpoints of an undirected edge have the same directed parents: a directed parent
    ``a`` of ``i`` alone would either be non-adjacent to ``j`` (Meek's R1 orients ``i -> j``), a child of
    ``j`` (R2 orients ``j -> i``) or joined to ``j`` undirected (a semi-directed cycle, which a CPDAG has
    none of). Orienting the undirected edges from ``i``, then ``j``, along a maximum cardinality search
    gives a member with these parent sets (Andersson et al. 1997); Chickering (1995) reaches it from the
    fitted DAG by covered reversals. The tests check the member against the class enumerated by brute
    force, mixing sets included.
    """
    directed = (cpdag_matrix != 0) & (cpdag_matrix.T == 0)
    parents_i = frozenset(np.flatnonzero(directed[:, i]).tolist())
    return parents_i if parents_i == frozenset(np.flatnonzero(directed[:, j]).tolist()) else None


def score_orientations(score: LocalScore, adjacency: Any, cpdag_matrix: Any, threshold: float) -> np.ndarray:
    """The edges ``i -> j`` of ``adjacency``, undirected in ``cpdag_matrix``, that the score orients.

    Each such edge is tested where it is covered: with ``D = covered_parents(cpdag_matrix, i, j)`` (the
    directed parents that ``i`` and ``j`` share in the CPDAG) the reversal changes two local scores,
    $\\Delta = S(j \\mid D) + S(i \\mid D \\cup j) - S(j \\mid D \\cup i) - S(i \\mid D)$, and the
    orientation ``i -> j`` of ``adjacency`` is identified when $\\Delta >$ ``threshold``. Reversing an
    edge that is not covered would create or destroy a v-structure: its score difference measures
    another independence model, not the direction (on linear-Gaussian data it is large and
    arbitrary). Only the orientation of ``adjacency`` is ever identified; when the reverse fits better
    the edge is left undirected.

    Parameters
    ----------
    score : LocalScore
        The score of the search (lower is better), e.g. ``LatentBIC``, covering at least the ``d`` nodes.
    adjacency : array-like (d, d) of 0/1
        The fitted DAG.
    cpdag_matrix : array-like (d, d) of 0/1
        Its CPDAG (``cpdag(adjacency, mixing_sets=...)``): only edges with both entries 1 are tested.
    threshold : float
        Minimum score increase of the reversal (BIC units, finite, >= 0).

    Returns
    -------
    ndarray (d, d) of bool
        True for each edge ``i -> j`` of ``adjacency`` that the score orients.

    Raises
    ------
    TypeError
        ``score`` is not a `LocalScore`, or ``threshold`` is not a real number.
    ValueError
        ``threshold`` is negative or not finite, ``adjacency`` is not a DAG or has more nodes than the
        score covers, or ``cpdag_matrix`` is not a CPDAG of it (another shape or skeleton, an edge
        directed against it, or an undirected edge Meek's rules orient).
    """
    threshold = check_nonnegative(threshold, "threshold")
    adjacency, cpdag_matrix = check_cpdag_of(adjacency, cpdag_matrix)
    d = adjacency.shape[0]
    check_local_score(score, d, f"adjacency has {d} nodes, which")
    tests = []
    for i, j in zip(*np.nonzero(adjacency)):
        i, j = int(i), int(j)
        shared = covered_parents(cpdag_matrix, i, j) if cpdag_matrix[i, j] and cpdag_matrix[j, i] else None
        if shared is not None:
            tests.append((i, j, shared))
    keys = []
    for i, j, shared in tests:
        keys += [(j, shared | {i}), (i, shared), (j, shared), (i, shared | {j})]
    score.prefetch(keys)
    out = np.zeros(adjacency.shape, dtype=bool)
    for i, j, shared in tests:
        now = score(j, shared | {i}) + score(i, shared)
        out[i, j] = score(j, shared) + score(i, shared | {j}) - now > threshold
    return out
