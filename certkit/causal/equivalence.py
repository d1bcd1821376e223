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

__all__ = ["MAX_CPDAG_NODES", "check_cpdag_of", "cpdag", "identified_orientations", "orientation_sources"]


#: Largest graph `cpdag` closes (observed nodes plus distinct mixing variables): under a second for any
#: DAG at D = 300, about ten seconds for a complete DAG at D = 1000 (the closure's work is cubic in D).
MAX_CPDAG_NODES = 1000


def _check_dag(adjacency: Any, *, max_nodes: int | None = None) -> np.ndarray:
    """The DAG as a (d, d) bool array; integer and bool input is checked without a float64 copy."""
    A = np.asarray(adjacency)
    if max_nodes is not None and A.ndim == 2 and max(A.shape) > max_nodes:
        raise ValueError(
            f"adjacency has shape {A.shape}; cpdag handles graphs of up to {max_nodes} nodes (its closure "
            "needs cubic work per propagation step)"
        )
    if A.dtype.kind not in "biu":
        A = check_array(A, "adjacency", ndim=2, allow_empty=True)
    elif A.ndim != 2:
        raise ValueError(f"adjacency must be a 2-D array, got shape {A.shape}")
    d = A.shape[0]
    if A.shape != (d, d):
        raise ValueError(f"adjacency must be square (d, d), got shape {A.shape}")
    edges = A == 1
    if not np.all(edges | (A == 0)):
        raise ValueError("adjacency must hold only 0 and 1 (adjacency[i, j] = 1 for an edge i -> j)")
    if np.any(np.diagonal(edges)) or np.any(edges & edges.T):
        raise ValueError("adjacency must be a DAG: no self-loops and no edge in both directions")
    # Acyclic: repeatedly remove sources.
    indegree, alive = edges.sum(axis=0), np.ones(d, dtype=bool)
    for _ in range(d):
        sources = np.flatnonzero(alive & (indegree == 0))
        if sources.size == 0:
            break
        alive[sources] = False
        indegree = indegree - edges[sources].sum(axis=0)
    if alive.any():
        raise ValueError("adjacency must be a DAG (acyclic); it has a directed cycle")
    return edges


def _meek(directed: np.ndarray, undirected: np.ndarray) -> None:
    """Apply Meek's rules R1-R4 in place until no edge changes (``undirected`` is kept symmetric).

    R1 and R2 are applied at once to every undirected edge at a node whose edges changed in the previous
    step (or at a child of one); R3 and R4 are tried, edge by edge, on the edges that a matrix product shows
    could satisfy them, once R1 and R2 orient nothing more. Every rule is sound, so the order of application
    does not change the closure.
    """
    adjacent = directed | directed.T | undirected
    apart = ~adjacent
    np.fill_diagonal(apart, False)
    adjacent_f = adjacent.astype(np.float32)
    dirty = np.arange(directed.shape[0])
    while True:
        xs, ys = _incident_pairs(undirected, dirty)
        new_x, new_y = _meek_r1_r2(directed, apart, xs, ys)
        if new_x.size == 0:
            new = _meek_r3_r4(directed, undirected, adjacent, apart, adjacent_f)
            new_x, new_y = np.nonzero(new)
            if new_x.size == 0:
                return
        undirected[new_x, new_y] = undirected[new_y, new_x] = False
        directed[new_x, new_y] = True
        ends = np.union1d(new_x, new_y)
        dirty = np.union1d(ends, np.flatnonzero(directed[ends].any(axis=0)))


def _incident_pairs(undirected: np.ndarray, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Both orientations (x, y) of every undirected edge with an end in ``nodes``, each once."""
    rows, cols = np.nonzero(undirected[nodes])
    ends = nodes[rows]
    D = undirected.shape[0]
    codes = np.unique(np.concatenate([ends * D + cols, cols * D + ends]))
    return codes // D, codes % D


def _meek_r1_r2(
    directed: np.ndarray, apart: np.ndarray, xs: np.ndarray, ys: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The pairs (x, y) among ``(xs, ys)`` that R1 (c -> x - y, c and y not adjacent) or R2 (x -> c -> y)
    orient x -> y, in blocks of about 16 M booleans."""
    block = 2**24 // max(1, directed.shape[0])
    hit = np.zeros(xs.size, dtype=bool)
    for start in range(0, xs.size, block):
        x, y = xs[start:start + block], ys[start:start + block]
        hit[start:start + block] = ((directed[:, x] & apart[:, y]).any(axis=0)
                                    | (directed[x, :] & directed[:, y].T).any(axis=1))
    clash = np.isin(xs[hit] * directed.shape[0] + ys[hit], ys[hit] * directed.shape[0] + xs[hit])
    return xs[hit][~clash], ys[hit][~clash]  # sound rules never orient both ways; guard anyway


def _meek_r3_r4(
    directed: np.ndarray, undirected: np.ndarray, adjacent: np.ndarray, apart: np.ndarray,
    adjacent_f: np.ndarray,
) -> np.ndarray:
    """The edges x - y that R3 or R4 orients x -> y."""
    dir_f = directed.astype(np.float32)
    und_f = undirected.astype(np.float32)
    apart_f = apart.astype(np.float32)
    # R3 needs two neighbours c, e of x, not adjacent to each other, with c -> y and e -> y.
    apart_neighbours = ((und_f @ apart_f) * und_f).sum(axis=1) > 0
    r3_cand = undirected & (und_f @ dir_f >= 2) & apart_neighbours[:, None]
    # R4 needs e -> y with x adjacent to e and to a parent c of e, and c not adjacent to y.
    x_sees_parent = (adjacent_f @ dir_f > 0) & adjacent
    r4_cand = undirected & (x_sees_parent.astype(np.float32) @ dir_f > 0) & (adjacent_f @ apart_f > 0)
    new = np.zeros_like(undirected)
    for x, y in zip(*np.nonzero(r3_cand | r4_cand)):
        if r3_cand[x, y]:
            cands = np.flatnonzero(undirected[x] & directed[:, y])
            if apart[np.ix_(cands, cands)].any():
                new[x, y] = True
                continue
        if r4_cand[x, y]:
            es = np.flatnonzero(directed[:, y] & adjacent[x])
            causes = adjacent[x] & apart[:, y]  # c adjacent to x, not adjacent to y
            if (directed[:, es] & causes[:, None]).any():
                new[x, y] = True
    return new & ~new.T  # sound rules never orient both ways; guard against inconsistent input


def cpdag(
    adjacency: Any, *, mixing_sets: Sequence[Iterable[int]] = (), oriented: Any = None
) -> np.ndarray:
    """The CPDAG of a DAG with mixing variables as exogenous sources: the orientations it identifies.

    Parameters
    ----------
    adjacency : array-like (d, d) of 0/1
        The DAG, ``adjacency[i, j] = 1`` for ``i -> j``.
    mixing_sets : sequence of iterable of int
        The nodes each mixing variable switches; each becomes a source node pointing into its set. Equal sets
        act as one mixing variable.
    oriented : array-like (d, d) of bool, optional
        Edges of the DAG whose orientation is known from elsewhere (e.g. a score that is not
        score-equivalent, ``score_orientations``): directed before Meek's rules propagate.

    Returns
    -------
    ndarray (d, d) of int
        ``out[i, j] = 1, out[j, i] = 0``: the orientation ``i -> j`` is identified;
        ``out[i, j] = out[j, i] = 1``: the edge is undirected (either orientation is consistent).
        A graph of no nodes (shape (0, 0)) gives the empty (0, 0) CPDAG.

    Raises
    ------
    ValueError
        When the DAG and the distinct mixing sets make more than `MAX_CPDAG_NODES` (1000) nodes, before any
        copy of ``adjacency``.
    """
    A = _check_dag(adjacency, max_nodes=MAX_CPDAG_NODES)
    d = A.shape[0]
    if isinstance(mixing_sets, (str, bytes)) or not isinstance(mixing_sets, Iterable):
        raise TypeError(f"mixing_sets must be a sequence of node sets, got {type(mixing_sets).__name__}")
    sets: dict[tuple[int, ...], None] = {}
    for s in mixing_sets:
        if isinstance(s, (str, bytes)) or not isinstance(s, Iterable):
            raise TypeError(
                f"mixing_sets must be a sequence of node sets (e.g. [{{0, 2}}]), got an entry {s!r}"
            )
        key = tuple(sorted({check_integer(v, "mixing_sets", minimum=0, maximum=d - 1) for v in s}))
        sets.setdefault(key)
        if d + len(sets) > MAX_CPDAG_NODES:
            raise ValueError(
                f"mixing_sets has more than {MAX_CPDAG_NODES - d} distinct sets; with the {d} nodes of "
                f"adjacency, cpdag handles up to {MAX_CPDAG_NODES} nodes"
            )
    D = d + len(sets)
    G = np.zeros((D, D), dtype=bool)
    G[:d, :d] = A
    for m, s in enumerate(sets):
        G[d + m, list(s)] = True
    skeleton = G | G.T
    # v-structures a -> c <- b (a, b not adjacent): both edges into c are directed.
    G_f = G.astype(np.float32)
    apart = ~skeleton
    np.fill_diagonal(apart, False)
    directed = G & ((apart.astype(np.float32) @ G_f) > 0)
    directed[d:, :] = G[d:, :]  # mixing variables are sources: Z -> j is known
    if oriented is not None:
        known = check_array(oriented, "oriented", shape=(d, d), dtype=None, allow_empty=True)
        if known.dtype != bool or np.any(known & ~A):
            raise ValueError("oriented must be a (d, d) bool array marking edges of adjacency")
        directed[:d, :d] |= known
    undirected = skeleton & ~directed & ~directed.T
    _meek(directed, undirected)
    out = directed[:d, :d] | undirected[:d, :d]
    return out.astype(np.int64)


def identified_orientations(adjacency: Any, cpdag_matrix: Any) -> np.ndarray:
    """``out[i, j]`` is True where the DAG's edge ``i -> j`` is directed in ``cpdag_matrix`` (``cpdag``).

    ``cpdag_matrix`` must be a CPDAG of the DAG: the same skeleton, no edge directed against the DAG, and
    closed under Meek's rules (they orient none of its undirected edges); a ``ValueError`` naming
    ``cpdag_matrix`` says which edge differs otherwise.
    """
    A, C = check_cpdag_of(adjacency, cpdag_matrix)
    return A & C & ~C.T


def check_cpdag_of(adjacency: Any, cpdag_matrix: Any) -> tuple[np.ndarray, np.ndarray]:
    """The DAG and its CPDAG as (d, d) bool arrays, checked: ``cpdag_matrix`` holds 0 and 1, has the DAG's
    skeleton, directs no edge against it, and Meek's rules orient none of its undirected edges (the
    observed part of ``cpdag(adjacency, mixing_sets=..., oriented=...)`` is closed under them: a rule
    that fires there fires in the graph with the mixing variables too).

    Raises
    ------
    ValueError
        Naming ``adjacency`` (not a DAG) or ``cpdag_matrix`` (not a CPDAG of it) and the first edge that
        differs.
    """
    A = _check_dag(adjacency)
    C = check_array(cpdag_matrix, "cpdag_matrix", shape=A.shape, dtype=None, allow_empty=True)
    if not np.all((C == 0) | (C == 1)):
        raise ValueError("cpdag_matrix must hold only 0 and 1 (as returned by cpdag)")
    C = C == 1
    for what, bad in (("an edge the DAG lacks", (C | C.T) & ~(A | A.T)),
                      ("no edge where the DAG has one", (A | A.T) & ~(C | C.T)),
                      ("the reverse of the DAG's edge", A & C.T & ~C)):
        if bad.any():
            i, j = (int(v) for v in np.argwhere(bad)[0])
            raise ValueError(
                f"cpdag_matrix is not a CPDAG of adjacency: it has {what} between nodes {i} and {j} "
                f"({int(np.triu(bad | bad.T).sum())} such pairs); pass cpdag(adjacency, mixing_sets=...)"
            )
    directed, undirected = C & ~C.T, C & C.T
    closed = directed.copy()
    _meek(closed, undirected.copy())
    if (closed != directed).any():
        i, j = (int(v) for v in np.argwhere(closed & ~directed)[0])
        raise ValueError(
            f"cpdag_matrix is not a CPDAG of adjacency: Meek's rules orient its undirected edge {i} - {j} "
            f"as {i} -> {j} (it is not closed under them); pass cpdag(adjacency, mixing_sets=...)"
        )
    return A, C


def orientation_sources(
    adjacency: np.ndarray,
    identified: np.ndarray,
    mixing_sets: Sequence[Iterable[int]] = (),
    oriented: np.ndarray | None = None,
) -> dict[tuple[int, int], str]:
    """Where each identified orientation ``i -> j`` (``identified``, from ``cpdag``) comes from.

    ``"v-structure"``: ``j`` has another parent not adjacent to ``i``; ``"mixing variable"``: ``j`` is
    switched by a mixing variable that does not switch ``i`` (the latent is a source pointing into ``j``, a
    v-structure with it); ``"spline score"``: oriented by the score (``oriented``, see
    ``score_orientations``); ``"Meek's rules"``: none of these, derived from the others by Meek's rules.
    The first that applies is named.
    """
    A = np.asarray(adjacency) != 0
    adjacent = A | A.T
    sets = [frozenset(int(v) for v in s) for s in mixing_sets]
    out = {}
    for i, j in zip(*np.nonzero(identified)):
        i, j = int(i), int(j)
        others = np.flatnonzero(A[:, j])
        if any(k != i and not adjacent[i, k] for k in others):
            out[i, j] = "v-structure"
        elif any(j in s and i not in s for s in sets):
            out[i, j] = "mixing variable"
        elif oriented is not None and oriented[i, j]:
            out[i, j] = "spline score"
        else:
            out[i, j] = "Meek's rules"
    return out
