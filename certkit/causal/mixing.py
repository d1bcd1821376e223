"""Mixing variables: nodes whose mixture labels share information are switched by the same latent variable."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Sequence

import numpy as np

from certkit._typing import ExecutorArg
from certkit._validation import check_array, check_nonnegative
from certkit.causal.batches import chunk_count, em_work, map_chunks
from certkit.causal.joint import JointMixtureResult, joint_em, joint_parameters
from certkit.causal.score import ScoreSettings
from certkit.causal.spline import NodeDesigns
from certkit.causal.starts import default_starts
from certkit.parallel import single_threaded

__all__ = ["find_mixing_sets"]


def find_mixing_sets(
    labels: np.ndarray, n_components: np.ndarray, *, threshold: float = 0.03
) -> tuple[list[frozenset[int]], np.ndarray, np.ndarray]:
    """Group the nodes with ``K > 1`` into mixing sets from the adjusted mutual information of their labels.

    Two nodes are linked when the adjusted mutual information (mutual information minus its expectation
    under independent labelings, normalised) of their labels exceeds ``threshold``; the connected
    components are the mixing sets (a node linked to none is a singleton set).

    Parameters
    ----------
    labels : ndarray (n, d) of int
        Per-node hard labels.
    n_components : ndarray (d,) of int
        ``K`` per node.
    threshold : float
        Minimum adjusted mutual information for a link.

    Returns
    -------
    sets : list of frozenset
        The mixing sets, ordered by their smallest node.
    group_labels : ndarray (n, len(sets)) of int
        Per set, the labels of its most representative node: the fewest components, then the highest
        total AMI to the others.
    ami : ndarray (d, d)
        Pairwise AMI between the labels of nodes with ``K > 1`` (0 elsewhere).
    """
    labels = check_array(labels, "labels", ndim=2, dtype=int)
    n_components = check_array(n_components, "n_components", ndim=1, dtype=int)
    threshold = check_nonnegative(threshold, "threshold")
    d = labels.shape[1]
    if n_components.shape != (d,):
        raise ValueError(
            f"n_components must hold one K per column of labels ({d}), got shape {n_components.shape}"
        )
    if np.any(n_components < 1):
        raise ValueError(f"n_components must be >= 1 for every node, got {n_components.tolist()}")
    if np.any(labels < 0) or np.any(labels >= n_components):
        raise ValueError("labels must lie in 0 .. n_components[j] - 1 in every column j")
    return _link_sets(labels, n_components, threshold)


def _link_sets(
    labels: np.ndarray, n_components: np.ndarray, threshold: float
) -> tuple[list[frozenset[int]], np.ndarray, np.ndarray]:
    """``find_mixing_sets`` on validated input."""
    from scipy.sparse.csgraph import connected_components
    from sklearn.metrics import adjusted_mutual_info_score

    d = labels.shape[1]
    mixed = [j for j in range(d) if n_components[j] > 1]
    ami = np.zeros((d, d))
    for a, i in enumerate(mixed):
        for j in mixed[a + 1 :]:
            ami[i, j] = ami[j, i] = adjusted_mutual_info_score(labels[:, i], labels[:, j])
    if not mixed:
        return [], np.zeros((labels.shape[0], 0), dtype=np.int64), ami
    link = ami[np.ix_(mixed, mixed)] > threshold
    _, comp = connected_components(link, directed=False)
    groups: dict[int, list[int]] = {}
    for node, c in zip(mixed, comp):
        groups.setdefault(int(c), []).append(node)
    sets = sorted((sorted(g) for g in groups.values()), key=lambda g: g[0])
    representative = [min(g, key=lambda v: (n_components[v], -ami[v, g].sum(), v)) for g in sets]
    group_labels = labels[:, representative].astype(np.int64) if sets else np.zeros((labels.shape[0], 0), int)
    return [frozenset(g) for g in sets], group_labels, ami


#: Most chunks one batch of set fits is split into for the executor (each chunk carries ``X``'s designs).
_MAX_CHUNKS = 32


def _best_batch(
    designs: NodeDesigns,
    parents: Sequence[Sequence[int]],
    settings: ScoreSettings,
    max_groups: int,
    items: Sequence[tuple[tuple[int, ...], dict[int, np.ndarray]]],
) -> list[JointMixtureResult]:
    """``_SetFitter.best`` of each ``(nodes, hints of those nodes)``, in a worker."""
    with single_threaded():  # as in the caller's process (CausalMixtureModel.fit)
        return [_SetFitter(designs, parents, settings, hints, max_groups).best(v) for v, hints in items]


def _fit_batch(
    designs: NodeDesigns, parents: Sequence[Sequence[int]], settings: ScoreSettings, method: str, items: list
) -> list[JointMixtureResult | None]:
    """``_SetFitter.<method>(*item)`` of each item (``warm`` or ``with_groups``), in a worker."""
    fit = getattr(_SetFitter(designs, parents, settings, {}, 1), method)
    with single_threaded():
        return [fit(*item) for item in items]


class _SetFitter:
    """Joint fits of candidate mixing sets, memoised on (nodes, K); every fit is seeded by its nodes.

    ``prefetch_best`` and ``prefetch_warm`` compute a batch of missing fits through ``executor`` when the
    batch is large enough to pay for it (``certkit.causal.batches``; the fits are deterministic, so the
    memo holds the same fits with or without one).
    """

    def __init__(
        self,
        designs: NodeDesigns,
        parents: Sequence[Sequence[int]],
        settings: ScoreSettings,
        hints: dict[int, np.ndarray],
        max_groups: int,
        executor: ExecutorArg = None,
    ) -> None:
        self.designs = designs
        self.X = designs.X
        self.max_groups = max_groups
        self.parents = [tuple(int(p) for p in pa) for pa in parents]
        self.settings = settings
        self.hints = hints  # per node with K > 1 alone: its own responsibilities (n, K_j)
        self.executor = executor
        self.n = self.X.shape[0]
        self._best: dict[frozenset[int], JointMixtureResult] = {}
        # best(nodes) without warm starts, fitted ahead by prefetch_best; read only by such calls, so the
        # memo _best fills in the order of the search's own calls, as without prefetching.
        self._cold: dict[frozenset[int], JointMixtureResult] = {}
        self._warm: dict[tuple[frozenset[int], int], JointMixtureResult | None] = {}

    def _chunks(self, work: float, n_items: int) -> int:
        """Chunks for a batch of ``n_items`` fits of estimated ``work`` (1: run it serially here)."""
        return chunk_count(self.executor, work, n_items, _MAX_CHUNKS)

    def _work(self, nodes: Sequence[int], components: Iterable[int]) -> float:
        """Estimated work of the joint fits of ``nodes`` with these numbers of groups."""
        widths = [self.designs.width(v, self.parents[v]) for v in nodes]
        return em_work(self.n, widths, components, joint=True)

    def prefetch_best(self, node_sets: Iterable[Iterable[int]]) -> None:
        """Fit ahead, through the executor, ``best`` without warm starts of every node set not fitted
        yet (read by ``best`` calls without warm starts) when the batch pays for it; otherwise ``best``
        fits when asked."""
        known = self._best.keys() | self._cold.keys()
        missing = [s for s in dict.fromkeys(tuple(sorted(s)) for s in node_sets) if frozenset(s) not in known]
        groups = range(1, self.max_groups + 1)
        n_chunks = self._chunks(sum(self._work(nodes, groups) for nodes in missing), len(missing))
        if n_chunks == 1:
            return  # best() fits them when the search asks
        items = [(nodes, {v: self.hints[v] for v in nodes if v in self.hints}) for nodes in missing]
        fn = functools.partial(_best_batch, self.designs, self.parents, self.settings, self.max_groups)
        for nodes, fit in zip(missing, map_chunks(fn, items, n_chunks, self.executor)):
            self._cold[frozenset(nodes)] = fit

    def prefetch_warm(self, requests: Iterable[tuple[Sequence[int], Sequence[np.ndarray]]]) -> None:
        """``warm`` of every ``(nodes, starts)`` not fitted yet (the first request of a key wins)."""
        missing: dict[tuple[frozenset[int], int], tuple[tuple[int, ...], Sequence[np.ndarray]]] = {}
        for nodes, starts in requests:
            key = (frozenset(nodes), starts[0].shape[1])
            if key not in self._warm and key not in missing:
                missing[key] = (tuple(sorted(nodes)), starts)
        work = sum(self._work(nodes, [K]) for (_, K), (nodes, _) in missing.items())
        n_chunks = self._chunks(work, len(missing))
        if n_chunks == 1:
            for nodes, starts in missing.values():
                self.warm(nodes, starts)
            return
        fn = functools.partial(_fit_batch, self.designs, self.parents, self.settings, "warm")
        self._warm.update(zip(missing, map_chunks(fn, list(missing.values()), n_chunks, self.executor)))

    def _fits(self, nodes: Sequence[int], K: int) -> bool:
        sizes = [self.designs.width(v, self.parents[v]) for v in nodes]
        return self.n >= max(joint_parameters(K, sizes), K * (max(sizes) + 1))

    def _em(self, nodes: Sequence[int], K: int, starts: Sequence[np.ndarray]) -> JointMixtureResult:
        s = self.settings
        return joint_em(
            self.X, nodes, [self.parents[v] for v in nodes], K, starts,
            max_iter=s.max_iter, tol=s.tol, min_variance=s.min_variance, designs=self.designs,
        )

    def invariant(self, nodes: Sequence[int]) -> JointMixtureResult:
        """``K = 1``: every node's least-squares regression (the BIC of invariant mechanisms)."""
        return self._em(sorted(nodes), 1, [np.ones((self.n, 1))])

    def with_groups(
        self, nodes: Sequence[int], K: int, extra: Sequence[np.ndarray]
    ) -> JointMixtureResult | None:
        """The fit of ``nodes`` (sorted) with ``K`` groups from the default starts and ``extra``
        (seeded by the nodes and ``K``); None when every start loses its groups."""
        s = self.settings
        Y = self.X[:, list(nodes)]
        designs = [self.designs.design(v, self.parents[v], order="F") for v in nodes]
        raw = [self.X[:, list(self.parents[v])] for v in nodes] if s.mechanism == "spline" else None
        rng = np.random.default_rng([s.seed, 17, K, len(nodes), *nodes])
        try:
            return self._em(nodes, K, default_starts(Y, designs, K, s.n_init, rng, extra, regressors=raw))
        except ValueError:  # every start lost its groups: K is too large for the data
            return None

    def best(self, nodes: Iterable[int], warm: Sequence[np.ndarray] = ()) -> JointMixtureResult:
        """The joint fit with the lowest BIC over ``K = 1 .. max_groups`` (greedy in ``K`` if set).

        Where the executor takes the batch, the ``K`` are fitted two at a time (all at once without
        greedy); each fit is seeded by its ``K``, so the choice is the serial one.
        """
        nodes = sorted(nodes)
        key = frozenset(nodes)
        if key in self._best:
            return self._best[key]
        if not warm and key in self._cold:
            self._best[key] = self._cold[key]
            return self._best[key]
        hints = [*warm, *(self.hints[v] for v in nodes if v in self.hints)]
        groups = [K for K in range(2, self.max_groups + 1) if self._fits(nodes, K)]  # a prefix: n bounds K
        extras = [[h for h in hints if h.shape[1] == K] for K in groups]
        n_chunks = self._chunks(self._work(nodes, groups), len(groups))
        if n_chunks == 1:
            fits = (self.with_groups(nodes, K, extra) for K, extra in zip(groups, extras))
        else:
            # greedy: two K at a time (the serial scan fits one K past the best too, so at most one fit
            # more than serially); every K at once otherwise
            wave = 2 if self.settings.greedy_components else len(groups)
            fits = self._in_waves([(nodes, K, extra) for K, extra in zip(groups, extras)], wave, n_chunks)
        best = self.invariant(nodes)
        for fit in fits:
            if fit is None:
                break
            if fit.bic < best.bic:
                best = fit
            elif self.settings.greedy_components:
                break
        self._best[key] = best
        return best

    def _in_waves(self, items: list, size: int, n_chunks: int) -> Iterator[JointMixtureResult | None]:
        """``with_groups(*item)`` of each item, in order, computed through the executor ``size`` items at
        a time (in at most ``n_chunks`` chunks): a wave is fitted only when the one before is read."""
        fn = functools.partial(_fit_batch, self.designs, self.parents, self.settings, "with_groups")
        for start in range(0, len(items), size):
            wave = items[start : start + size]
            yield from map_chunks(fn, wave, min(len(wave), n_chunks), self.executor)

    def warm(self, nodes: Iterable[int], starts: Sequence[np.ndarray]) -> JointMixtureResult | None:
        """A quick fit of ``nodes`` from warm starts of one ``K`` (the candidate moves of the search)."""
        nodes = sorted(nodes)
        K = starts[0].shape[1]
        key = (frozenset(nodes), K)
        if key not in self._warm:
            fit = None
            if self._fits(nodes, K):
                try:
                    fit = self._em(nodes, K, starts)
                except ValueError:  # every start lost its groups
                    pass
            self._warm[key] = fit
        return self._warm[key]


def _total(variables: Sequence[JointMixtureResult], invariant: np.ndarray) -> float:
    grouped = {v for fit in variables for v in fit.nodes}
    rest = sum(bic for v, bic in enumerate(invariant) if v not in grouped)
    return float(sum(fit.bic for fit in variables) + rest)


def _set_search(
    fitter: _SetFitter, seeds: Sequence[Iterable[int]], invariant: np.ndarray, rounds: int
) -> list[JointMixtureResult]:
    """The add / remove / merge search from one seed grouping (see ``form_mixing_variables``)."""
    d = invariant.size
    current: list[JointMixtureResult] = []
    for seed in seeds:
        fit = fitter.best(seed)
        if fit.n_components > 1:
            current.append(fit)
    for _ in range(rounds):
        taken = {v for fit in current for v in fit.nodes}
        # (indices of the sets replaced, nodes of the candidate, its starts, the score it replaces)
        candidates: list[tuple[tuple[int, ...], list[int], list[np.ndarray], float]] = []
        for a, fit in enumerate(current):
            nodes = list(fit.nodes)
            for v in (v for v in range(d) if v not in taken):  # add v to the set
                own = fitter.hints.get(v)
                starts = [fit.responsibilities]
                if own is not None and own.shape[1] == fit.n_components:
                    starts.append(own)
                candidates.append(((a,), [*nodes, v], starts, fit.bic + invariant[v]))
            for v in nodes if len(nodes) > 1 else ():  # v becomes invariant
                candidates.append(((a,), [u for u in nodes if u != v], [fit.responsibilities],
                                   fit.bic - invariant[v]))
            for b in range(a + 1, len(current)):  # one latent for both sets
                other = current[b]
                for start in (fit.responsibilities, other.responsibilities):
                    candidates.append(((a, b), [*nodes, *other.nodes], [start], fit.bic + other.bic))
        fitter.prefetch_warm((nodes, starts) for _, nodes, starts, _ in candidates)
        # (change of the total score, indices of the sets replaced, the candidate fit)
        moves: list[tuple[float, tuple[int, ...], JointMixtureResult]] = []
        for replaced, nodes, starts, before in candidates:
            cand = fitter.warm(nodes, starts)
            if cand is not None:
                moves.append((cand.bic - before, replaced, cand))
        if not moves:
            break
        gain, replaced, cand = min(moves, key=lambda m: m[0])
        if not gain < 0.0:
            break
        refit = fitter.best(cand.nodes, [cand.responsibilities])
        if cand.bic < refit.bic:
            refit = cand
        current = [fit for i, fit in enumerate(current) if i not in replaced]
        if refit.n_components > 1:
            current.append(refit)
    current.sort(key=lambda fit: fit.nodes[0])
    return current


def form_mixing_variables(
    X: np.ndarray,
    parents: Sequence[Sequence[int]],
    starts: Sequence[Sequence[Iterable[int]]],
    settings: ScoreSettings,
    *,
    hints: dict[int, np.ndarray] | None = None,
    max_groups: int | None = None,
    max_rounds: int | None = None,
    executor: ExecutorArg = None,
    designs: NodeDesigns | None = None,
) -> tuple[list[JointMixtureResult], list[JointMixtureResult], float]:
    """Mixing variables by joint fits, grown, pruned and merged while the total BIC decreases.

    Internal to ``CausalMixtureModel.fit``, which validates ``X`` and builds ``parents`` from its DAG;
    the arguments are not checked again here.

    The total score is the joint BIC of every mixing set (one latent per set, see
    ``fit_joint_mixture``) plus the BIC of every other node's invariant (``K = 1``) mechanism.
    From each seed grouping in ``starts`` (its sets fitted jointly with ``K`` by BIC; a set whose best
    ``K`` is 1 dissolves), each round applies the single move that lowers the total score most:

    * add a node outside every set to a set (its mechanism conditioned on that latent; a node whose
      own BIC chose ``K = 1`` can join),
    * remove a node from a set (it becomes invariant),
    * merge two sets into one latent (there is no split move: a set only shrinks by removals, so a
      start that joins two latents can end with one; starts with every node alone avoid that),

    where a candidate is fitted from the current responsibilities, and the changed set is then refitted
    with ``K`` by BIC. A search stops at a fixed point (no move lowers the score) or after
    ``max_rounds`` (default ``4 d``) rounds; the score decreases at every round, so it cannot cycle.
    The result of the start with the lowest total score is returned (the first on ties); the starts
    share their fits (memoised on the node set; every start's first sets are fitted before the searches).

    Parameters
    ----------
    X : ndarray (n, d)
        Validated float64 data.
    parents : sequence of sequence of int
        The parents of every node (the fitted graph).
    starts : sequence of seed groupings
        Each a sequence of disjoint node sets (e.g. ``find_mixing_sets`` on the nodes' own labels, or
        one set of every node).
    settings : ScoreSettings
        EM options, ``max_components`` and the seed.
    hints : dict, optional
        Extra EM starts per node: responsibilities (n, K) of its own mixture.
    max_groups : int, optional
        Largest number of groups of a mixing variable (default ``settings.max_components``).
    max_rounds : int, optional
        Most moves per start (default ``4 d``).
    executor : None, int or executor-like
        Computes each batch of independent fits (every start's first sets, then each round's
        candidate moves) in parallel when the batch is large enough to pay for it
        (``certkit.causal.batches``); the result is the same with or without it. An int opens a pool per
        such batch: pass an open pool to keep one.
    designs : NodeDesigns, optional
        The nodes' designs on ``X`` (cached spline bases); by default built from ``X`` and ``settings``.

    Returns
    -------
    variables : list of JointMixtureResult
        The mixing variables, ordered by their smallest node.
    invariant : list of JointMixtureResult
        Each node's ``K = 1`` fit given its parents (its invariant mechanism and BIC).
    score : float
        The total score of ``variables``.
    """
    d = X.shape[1]
    groups = settings.max_components if max_groups is None else max_groups
    if designs is None:
        designs = NodeDesigns(X, settings.mechanism, settings.n_knots)
    designs.prepare(p for pa in parents for p in pa)  # knots fixed before any worker gets a copy
    fitter = _SetFitter(designs, parents, settings, dict(hints or {}), groups, executor)
    invariant_fits = [fitter.invariant([v]) for v in range(d)]
    invariant = np.array([fit.bic for fit in invariant_fits])
    rounds = 4 * d if max_rounds is None else max_rounds
    fitter.prefetch_best(seed for seeds in starts for seed in seeds)  # every start's first fits at once
    best: list[JointMixtureResult] = []
    best_score = _total(best, invariant)
    for seeds in starts:
        variables = _set_search(fitter, seeds, invariant, rounds)
        score = _total(variables, invariant)
        if score < best_score:
            best, best_score = variables, score
    return best, invariant_fits, best_score
