"""Which edge orientations the data identify: the equivalence class of a DAG with its mixing variables.

A DAG is identified from observational data only up to its Markov equivalence class: the skeleton and
the v-structures ($a \\to c \\leftarrow b$ with $a, b$ not adjacent). A mixing variable adds more: it is
an exogenous cause of the nodes it switches, so each $Z_m$ is added to the graph as a source node with
edges $Z_m \\to j$ for every node $j$ of its set. An edge $i \\to j$ into a switched node from a node
that $Z_m$ does not touch then forms the v-structure $Z_m \\to j \\leftarrow i$, and Meek's rules
propagate those orientations. The result (a CPDAG of the augmented graph, restricted to the observed
nodes) holds every orientation shared by all DAGs that have the same skeleton, the same v-structures
and the mixing variables as sources; every other edge is reversed in some member of that class.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from certkit._validation import check_array, check_integer

__all__ = ["cpdag", "identified_orientations"]


def _check_dag(adjacency: Any) -> np.ndarray:
    A = np.asarray(adjacency)
    A = check_array(A.astype(np.int64) if A.dtype == np.bool_ else A, "adjacency", ndim=2)
    d = A.shape[0]
    if A.shape != (d, d):
        raise ValueError(f"adjacency must be square (d, d), got shape {A.shape}")
    if not np.all((A == 0) | (A == 1)):
        raise ValueError("adjacency must hold only 0 and 1 (adjacency[i, j] = 1 for an edge i -> j)")
    A = A.astype(np.int64)
    if np.any(np.diag(A)) or np.any(A & A.T):
        raise ValueError("adjacency must be a DAG: no self-loops and no edge in both directions")
    # Acyclic: repeatedly remove sources.
    indegree, alive = A.sum(axis=0), np.ones(d, dtype=bool)
    for _ in range(d):
        sources = np.flatnonzero(alive & (indegree == 0))
        if sources.size == 0:
            break
        alive[sources] = False
        indegree = indegree - A[sources].sum(axis=0)
    if alive.any():
        raise ValueError("adjacency must be a DAG (acyclic); it has a directed cycle")
    return A


def _meek(directed: np.ndarray, undirected: np.ndarray) -> None:
    """Apply Meek's rules R1-R4 in place until no edge changes (``undirected`` is kept symmetric)."""

    def adjacent(a: int, b: int) -> bool:
        return bool(directed[a, b] or directed[b, a] or undirected[a, b])

    def orient(a: int, b: int) -> None:
        undirected[a, b] = undirected[b, a] = False
        directed[a, b] = True

    changed = True
    while changed:
        changed = False
        for a, b in zip(*np.nonzero(np.triu(undirected))):
            for x, y in ((a, b), (b, a)):
                if not undirected[x, y]:
                    break
                parents_x = np.flatnonzero(directed[:, x])
                parents_y = np.flatnonzero(directed[:, y])
                neighbours_x = np.flatnonzero(undirected[x])
                # R1: c -> x - y with c, y not adjacent.
                r1 = any(not adjacent(c, y) for c in parents_x)
                # R2: x -> c -> y with x - y.
                r2 = any(directed[x, c] for c in parents_y)
                # R3: x - c -> y and x - e -> y with c, e not adjacent.
                r3 = False
                cands = [c for c in neighbours_x if directed[c, y]]
                for i, c in enumerate(cands):
                    if any(not adjacent(c, e) for e in cands[i + 1 :]):
                        r3 = True
                        break
                # R4: x adjacent to c and e, c -> e -> y, c and y not adjacent.
                r4 = False
                for e in parents_y:
                    if e == x or not adjacent(x, e):
                        continue
                    causes = np.flatnonzero(directed[:, e])
                    if any(c != x and adjacent(x, c) and not adjacent(c, y) for c in causes):
                        r4 = True
                        break
                if r1 or r2 or r3 or r4:
                    orient(x, y)
                    changed = True
                    break


def cpdag(adjacency: Any, *, mixing_sets: Sequence[Iterable[int]] = ()) -> np.ndarray:
    """The CPDAG of a DAG with mixing variables as exogenous sources: the orientations it identifies.

    Parameters
    ----------
    adjacency : array-like (d, d) of 0/1
        The DAG, ``adjacency[i, j] = 1`` for ``i -> j``.
    mixing_sets : sequence of iterable of int
        The nodes each mixing variable switches; each becomes a source node pointing into its set.

    Returns
    -------
    ndarray (d, d) of int
        ``out[i, j] = 1, out[j, i] = 0``: the orientation ``i -> j`` is identified;
        ``out[i, j] = out[j, i] = 1``: the edge is undirected (either orientation is consistent).
    """
    A = _check_dag(adjacency)
    d = A.shape[0]
    if isinstance(mixing_sets, (str, bytes)) or not isinstance(mixing_sets, Iterable):
        raise TypeError(f"mixing_sets must be a sequence of node sets, got {type(mixing_sets).__name__}")
    sets = []
    for s in mixing_sets:
        if isinstance(s, (str, bytes)) or not isinstance(s, Iterable):
            raise TypeError(
                f"mixing_sets must be a sequence of node sets (e.g. [{{0, 2}}]), got an entry {s!r}"
            )
        sets.append(sorted({check_integer(v, "mixing_sets", minimum=0, maximum=d - 1) for v in s}))
    D = d + len(sets)
    G = np.zeros((D, D), dtype=bool)
    G[:d, :d] = A.astype(bool)
    for m, s in enumerate(sets):
        G[d + m, s] = True
    skeleton = G | G.T
    directed = np.zeros((D, D), dtype=bool)
    for c in range(D):
        parents = np.flatnonzero(G[:, c])
        for i, a in enumerate(parents):
            for b in parents[i + 1 :]:
                if not skeleton[a, b]:
                    directed[a, c] = directed[b, c] = True
    directed[d:, :] = G[d:, :]  # mixing variables are sources: Z -> j is known
    undirected = skeleton & ~directed & ~directed.T
    _meek(directed, undirected)
    out = directed[:d, :d] | undirected[:d, :d]
    return out.astype(np.int64)


def identified_orientations(adjacency: Any, cpdag_matrix: Any) -> np.ndarray:
    """``out[i, j]`` is True where the DAG's edge ``i -> j`` is directed in ``cpdag_matrix`` (``cpdag``)."""
    A = _check_dag(adjacency)
    C = check_array(cpdag_matrix, "cpdag_matrix", shape=A.shape, dtype=None)
    if not np.all((C == 0) | (C == 1)):
        raise ValueError("cpdag_matrix must hold only 0 and 1 (as returned by cpdag)")
    return (A == 1) & (C == 1) & (C.T == 0)
