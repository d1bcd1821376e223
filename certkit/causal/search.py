"""TOPIC-style search: a topological order built one source at a time, with pruning and refinement."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from certkit._typing import Progress
from certkit._validation import check_integer, check_nonnegative, check_progress

__all__ = ["LocalScore", "SearchResult", "check_local_score", "refine_parents", "topic_search"]

#: Score differences below this fraction of the scores' magnitude are ties (broken by node index), so
#: that rounding in the score cannot decide between score-equivalent choices.
_TIE = 1e-9

#: Refinement enumerates all parent subsets up to this many parents (greedy removal above).
_MAX_EXHAUSTIVE = 8


class LocalScore(Protocol):
    """A decomposable score ``S(node | parents)``, lower is better, with batch pre-computation."""

    def __call__(self, node: int, parents: Iterable[int]) -> float: ...

    def prefetch(self, keys: Iterable[tuple[int, Iterable[int]]]) -> None: ...


@dataclass(frozen=True)
class SearchResult:
    """Adjacency ``(d, d)`` (``[i, j] = 1`` for ``i -> j``) and the topological order found."""

    adjacency: np.ndarray
    order: tuple[int, ...]


def check_local_score(score: Any, n_nodes: int, what: str) -> None:
    """``score`` is a `LocalScore` (a callable with a ``prefetch`` method) that covers ``n_nodes`` variables
    when it says how many it covers (``score.n_nodes``, as `LatentBIC` does).

    Raises
    ------
    TypeError
        ``score`` is not a `LocalScore`.
    ValueError
        ``n_nodes`` is more than the score covers; the message starts with ``what`` (the argument that
        sets ``n_nodes``).
    """
    if not callable(score) or not callable(getattr(score, "prefetch", None)):
        raise TypeError(
            "score must be a LocalScore (callable as score(node, parents) with a prefetch(keys) method, "
            f"such as LatentBIC), got {type(score).__name__}"
        )
    covered = getattr(score, "n_nodes", None)
    if isinstance(covered, int) and n_nodes > covered:
        raise ValueError(f"{what} is more than the score covers: the score covers {covered} variables")


def _progress_bar(total: int, progress: Progress) -> Any:
    if not progress:
        return None
    from tqdm.auto import tqdm

    # mininterval=0: every step is drawn (a few steps, seconds apart; the default skipped the last ones)
    return tqdm(total=total, desc=progress if isinstance(progress, str) else "causal search", leave=False,
                mininterval=0)


def _next_source(score: LocalScore, candidates: list[int], parents: list[set[int]]) -> int:
    """The candidate best explained as a cause: ``argmin_i max_j (imp[i, j] - imp[j, i])``."""
    if len(candidates) == 1:
        return candidates[0]
    pairs = [(c, e) for c in candidates for e in candidates if c != e]
    score.prefetch([(e, parents[e]) for e in candidates] + [(e, parents[e] | {c}) for c, e in pairs])
    index = {v: i for i, v in enumerate(candidates)}
    imp = np.zeros((len(candidates), len(candidates)))
    for c, e in pairs:
        imp[index[c], index[e]] = score(e, parents[e] | {c}) - score(e, parents[e])
    delta = imp - imp.T
    np.fill_diagonal(delta, -np.inf)
    pressure = delta.max(axis=1)
    scale = max(abs(score(e, parents[e])) for e in candidates)
    return candidates[int(np.flatnonzero(pressure <= pressure.min() + _TIE * (1.0 + scale))[0])]


def _better(new: float, old: float) -> bool:
    """``new`` is lower than ``old`` by more than a tie."""
    return new < old - _TIE * (1.0 + abs(old))


def _add_children(
    score: LocalScore, source: int, remaining: list[int], parents: list[set[int]], max_parents: int | None
) -> None:
    """Add ``source -> v`` for every remaining ``v`` whose score it lowers."""
    targets = [v for v in remaining if max_parents is None or len(parents[v]) < max_parents]
    score.prefetch([(v, parents[v]) for v in targets] + [(v, parents[v] | {source}) for v in targets])
    for v in targets:
        if _better(score(v, parents[v] | {source}), score(v, parents[v])):
            parents[v].add(source)


def _prune(score: LocalScore, node: int, parents: list[set[int]]) -> None:
    """Remove, one at a time, the parent of ``node`` whose removal lowers the score most, while one does."""
    while parents[node]:
        current = score(node, parents[node])
        options = sorted(parents[node])
        score.prefetch([(node, parents[node] - {q}) for q in options])
        scores = [score(node, parents[node] - {q}) for q in options]
        best = int(np.argmin(scores))
        if not _better(scores[best], current):
            return
        parents[node].discard(options[best])


def refine_parents(
    score: LocalScore,
    node: int,
    parents: Iterable[int],
    *,
    threshold: float,
    max_exhaustive: int = _MAX_EXHAUSTIVE,
) -> set[int]:
    """The smallest parent subset whose score is at most ``threshold`` above that of ``parents``.

    Subsets are enumerated by size when there are at most ``max_exhaustive`` parents (ties in size go
    to the lowest score); above that, parents are removed greedily (lowest score first) while the score
    stays within ``threshold`` of the full set's.
    """
    full = sorted(parents)
    if not full:
        return set()
    limit = score(node, full) + threshold
    if len(full) <= max_exhaustive:
        subsets = [s for r in range(len(full) + 1) for s in itertools.combinations(full, r)]
        score.prefetch([(node, s) for s in subsets])
        for r in range(len(full) + 1):
            ok = [(score(node, s), s) for s in itertools.combinations(full, r) if score(node, s) <= limit]
            if ok:
                return set(min(ok)[1])
    kept = set(full)
    while kept:
        options = sorted(kept)
        score.prefetch([(node, kept - {q}) for q in options])
        scores = [score(node, kept - {q}) for q in options]
        best = int(np.argmin(scores))
        if scores[best] > limit:
            break
        kept.discard(options[best])
    return kept


def topic_search(
    score: LocalScore,
    n_nodes: int,
    *,
    max_parents: int | None = None,
    refine_threshold: float | None = 2.0,
    progress: Progress = False,
) -> SearchResult:
    """Greedy topological-order search (TOPIC) under a decomposable score.

    While nodes remain: score every candidate edge ``c -> e`` among them,
    ``imp[c, e] = S(e | pa(e) + c) - S(e | pa(e))``; the next node of the order is
    ``argmin_i max_j (imp[i, j] - imp[j, i])`` (the node whose worst comparison as a cause is best);
    it becomes a parent of every remaining node whose score it lowers (so the graph stays acyclic),
    and its own parents are pruned while removing one lowers its score. Finally each node keeps the
    smallest parent subset whose score is at most ``refine_threshold`` worse (None skips this step).

    Parameters
    ----------
    score : LocalScore
        ``score(node, parents)`` (lower is better) with ``score.prefetch(keys)``.
    n_nodes : int
        Number of nodes (>= 1): ``0 .. n_nodes - 1``, at most the ``score.n_nodes`` variables the
        score covers when it says (as `LatentBIC` does).
    max_parents : int, optional
        Cap on the number of parents of a node during the search (>= 0).
    refine_threshold : float or None
        Score tolerance of the refinement step (>= 0).
    progress : bool or str
        Show a progress bar over the steps of the order.

    Returns
    -------
    SearchResult

    Raises
    ------
    TypeError
        If ``score`` is not a `LocalScore` (a callable with a ``prefetch`` method).
    ValueError
        If ``n_nodes`` exceeds the variables of the score (or the score raises ``IndexError`` for a
        node), or an option is out of range.
    """
    n_nodes = check_integer(n_nodes, "n_nodes", minimum=1)
    check_local_score(score, n_nodes, f"n_nodes={n_nodes}")
    if max_parents is not None:
        max_parents = check_integer(max_parents, "max_parents", minimum=0)
    if refine_threshold is not None:
        refine_threshold = check_nonnegative(refine_threshold, "refine_threshold")
    progress = check_progress(progress)
    try:
        return _topic_search(score, n_nodes, max_parents, refine_threshold, progress)
    except IndexError as exc:
        bad = next((v for v in range(n_nodes) if _raises_index_error(score, v)), None)
        if bad is None:  # not a node out of range: the score's own error
            raise
        raise ValueError(
            f"n_nodes={n_nodes} is more than the score covers: score({bad}, ()) raises IndexError ({exc}) "
            f"for node {bad}; pass at most as many nodes as the score's data has variables"
        ) from exc


def _raises_index_error(score: LocalScore, node: int) -> bool:
    try:
        score(node, ())
    except IndexError:
        return True
    return False


def _topic_search(
    score: LocalScore,
    n_nodes: int,
    max_parents: int | None,
    refine_threshold: float | None,
    progress: Progress,
) -> SearchResult:
    parents: list[set[int]] = [set() for _ in range(n_nodes)]
    candidates = list(range(n_nodes))
    order: list[int] = []
    bar = _progress_bar(n_nodes + (refine_threshold is not None), progress)
    try:
        while candidates:
            source = _next_source(score, candidates, parents)
            order.append(source)
            candidates.remove(source)
            _add_children(score, source, candidates, parents, max_parents)
            _prune(score, source, parents)
            if bar is not None:
                bar.update(1)
        if refine_threshold is not None:
            score.prefetch(
                (node, s)
                for node in range(n_nodes)
                if len(parents[node]) <= _MAX_EXHAUSTIVE
                for r in range(len(parents[node]) + 1)
                for s in itertools.combinations(sorted(parents[node]), r)
            )
            for node in range(n_nodes):
                parents[node] = refine_parents(score, node, parents[node], threshold=refine_threshold)
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    adjacency = np.zeros((n_nodes, n_nodes), dtype=np.int64)
    for node, pa in enumerate(parents):
        adjacency[sorted(pa), node] = 1
    return SearchResult(adjacency=adjacency, order=tuple(order))


def topological_order(adjacency: np.ndarray) -> tuple[int, ...]:
    """A topological order of a DAG (Kahn's algorithm, smallest index first)."""
    indegree = adjacency.sum(axis=0).astype(int)
    ready = sorted(np.flatnonzero(indegree == 0).tolist())
    order = []
    while ready:
        v = ready.pop(0)
        order.append(v)
        for w in np.flatnonzero(adjacency[v]):
            indegree[w] -= 1
            if indegree[w] == 0:
                ready.append(int(w))
                ready.sort()
    if len(order) != adjacency.shape[0]:
        raise RuntimeError("the structure search returned a graph with a cycle")
    return tuple(order)
