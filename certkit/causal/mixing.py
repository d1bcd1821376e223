"""Mixing variables: nodes whose mixture labels share information are switched by the same latent variable."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from certkit._validation import check_array, check_nonnegative
from certkit.causal.joint import JointMixtureResult, default_starts, joint_em, joint_parameters
from certkit.causal.score import ScoreSettings

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


class _SetFitter:
    """Joint fits of candidate mixing sets, memoised on (nodes, K); every fit is seeded by its nodes."""

    def __init__(
        self,
        X: np.ndarray,
        parents: Sequence[Sequence[int]],
        settings: ScoreSettings,
        hints: dict[int, np.ndarray],
        max_groups: int,
    ) -> None:
        self.X = X
        self.max_groups = max_groups
        self.parents = [tuple(int(p) for p in pa) for pa in parents]
        self.settings = settings
        self.hints = hints  # per node with K > 1 alone: its own responsibilities (n, K_j)
        self.n = X.shape[0]
        self._best: dict[frozenset[int], JointMixtureResult] = {}
        self._warm: dict[tuple[frozenset[int], int], JointMixtureResult] = {}

    def _fits(self, nodes: Sequence[int], K: int) -> bool:
        sizes = [len(self.parents[v]) + 1 for v in nodes]
        return self.n >= max(joint_parameters(K, sizes), K * (max(sizes) + 1))

    def _em(self, nodes: Sequence[int], K: int, starts: Sequence[np.ndarray]) -> JointMixtureResult:
        s = self.settings
        return joint_em(
            self.X, nodes, [self.parents[v] for v in nodes], K, starts,
            max_iter=s.max_iter, tol=s.tol, min_variance=s.min_variance,
        )

    def invariant(self, nodes: Sequence[int]) -> JointMixtureResult:
        """``K = 1``: every node's least-squares regression (the BIC of invariant mechanisms)."""
        return self._em(sorted(nodes), 1, [np.ones((self.n, 1))])

    def best(self, nodes: Iterable[int], warm: Sequence[np.ndarray] = ()) -> JointMixtureResult:
        """The joint fit with the lowest BIC over ``K = 1 .. max_groups`` (greedy in ``K`` if set)."""
        nodes = sorted(nodes)
        key = frozenset(nodes)
        if key in self._best:
            return self._best[key]
        s = self.settings
        Y = self.X[:, nodes]
        designs = [np.column_stack([np.ones(self.n), self.X[:, list(self.parents[v])]]) for v in nodes]
        best = self.invariant(nodes)
        hints = [*warm, *(self.hints[v] for v in nodes if v in self.hints)]
        for K in range(2, self.max_groups + 1):
            if not self._fits(nodes, K):
                break
            rng = np.random.default_rng([s.seed, 17, K, len(nodes), *nodes])
            extra = [h for h in hints if h.shape[1] == K]
            try:
                fit = self._em(nodes, K, default_starts(Y, designs, K, s.n_init, rng, extra))
            except ValueError:  # every start lost its groups: K is too large for the data
                break
            if fit.bic < best.bic:
                best = fit
            elif s.greedy_components:
                break
        self._best[key] = best
        return best

    def warm(self, nodes: Iterable[int], starts: Sequence[np.ndarray]) -> JointMixtureResult | None:
        """A quick fit of ``nodes`` from warm starts of one ``K`` (the candidate moves of the search)."""
        nodes = sorted(nodes)
        K = starts[0].shape[1]
        key = (frozenset(nodes), K)
        if key not in self._warm:
            if not self._fits(nodes, K):
                return None
            try:
                self._warm[key] = self._em(nodes, K, starts)
            except ValueError:
                return None
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
        # (change of the total score, indices of the sets replaced, the candidate fit)
        moves: list[tuple[float, tuple[int, ...], JointMixtureResult]] = []
        for a, fit in enumerate(current):
            nodes = list(fit.nodes)
            for v in (v for v in range(d) if v not in taken):  # add v to the set
                own = fitter.hints.get(v)
                starts = [fit.responsibilities]
                if own is not None and own.shape[1] == fit.n_components:
                    starts.append(own)
                cand = fitter.warm([*nodes, v], starts)
                if cand is not None:
                    moves.append((cand.bic - fit.bic - invariant[v], (a,), cand))
            for v in nodes if len(nodes) > 1 else ():  # v becomes invariant
                cand = fitter.warm([u for u in nodes if u != v], [fit.responsibilities])
                if cand is not None:
                    moves.append((cand.bic + invariant[v] - fit.bic, (a,), cand))
            for b in range(a + 1, len(current)):  # one latent for both sets
                other = current[b]
                for start in (fit.responsibilities, other.responsibilities):
                    cand = fitter.warm([*nodes, *other.nodes], [start])
                    if cand is not None:
                        moves.append((cand.bic - fit.bic - other.bic, (a, b), cand))
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
    share their fits (memoised on the node set).

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
    fitter = _SetFitter(X, parents, settings, dict(hints or {}), groups)
    invariant_fits = [fitter.invariant([v]) for v in range(d)]
    invariant = np.array([fit.bic for fit in invariant_fits])
    rounds = 4 * d if max_rounds is None else max_rounds
    best: list[JointMixtureResult] = []
    best_score = _total(best, invariant)
    for seeds in starts:
        variables = _set_search(fitter, seeds, invariant, rounds)
        score = _total(variables, invariant)
        if score < best_score:
            best, best_score = variables, score
    return best, invariant_fits, best_score
