"""Latent-aware local score: the BIC of the best mixture of regressions of a node on its parents."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from certkit._typing import ExecutorArg
from certkit._validation import (
    check_array,
    check_bool,
    check_in_options,
    check_integer,
    check_positive,
    check_squares_fit,
)
from certkit.causal.batches import chunk_count, em_work, map_chunks
from certkit.causal.data import data_seed
from certkit.causal.mixture_regression import (
    MAX_STARTS,
    MixtureRegressionResult,
    fit_mixture,
    n_mixture_parameters,
)
from certkit.causal.spline import LINEAR, MECHANISMS, NodeDesigns, check_n_knots
from certkit.parallel import single_threaded

__all__ = ["LatentBIC", "ScoreSettings", "fit_node"]

Parents = tuple[int, ...]
Key = tuple[int, Parents]

#: Most chunks one batch of local scores is split into for the executor.
_MAX_CHUNKS = 64


@dataclass(frozen=True)
class ScoreSettings:
    """Options of the local score (see ``CausalMixtureModel``); ``seed`` keys every EM start.

    ``mechanism`` (``"linear"`` or ``"spline"``) and ``n_knots`` (an int or ``"bic"``) choose the design
    of every regression (``certkit.causal.spline.NodeDesigns``).
    """

    max_components: int = 5
    n_init: int = 3
    max_iter: int = 100
    tol: float = 1e-5
    min_variance: float = 1e-3
    seed: int = 0
    greedy_components: bool = True
    mechanism: str = "linear"
    n_knots: int | str = "bic"

    def __post_init__(self) -> None:
        check_integer(self.max_components, "max_components", minimum=1)
        check_integer(self.n_init, "n_init", minimum=1, maximum=MAX_STARTS)
        check_integer(self.max_iter, "max_iter", minimum=1)
        # Python floats: settings that compare equal hash equal and fit with the same numbers (a
        # float32 1e-5 equals 1e-5 under NumPy's comparison but is another number)
        object.__setattr__(self, "tol", float(check_positive(self.tol, "tol")))
        object.__setattr__(self, "min_variance", float(check_positive(self.min_variance, "min_variance")))
        check_integer(self.seed, "seed", minimum=0)
        check_bool(self.greedy_components, "greedy_components")
        check_in_options(self.mechanism, "mechanism", MECHANISMS)
        check_n_knots(self.n_knots)


def fit_node(
    X: np.ndarray,
    node: int,
    parents: Iterable[int],
    settings: ScoreSettings,
    *,
    designs: NodeDesigns | None = None,
) -> MixtureRegressionResult:
    """The mixture (``K = 1 .. max_components``) of ``X[:, node]`` on ``X[:, parents]`` with the lowest BIC.

    With ``settings.greedy_components`` ``K`` grows only while the BIC decreases (the first ``K`` whose
    BIC is not below that of ``K - 1`` stops the scan); otherwise every ``K`` is fitted. The EM starts
    for ``K`` are seeded by ``(settings.seed, node, K, parents)``, so a local score never depends on
    the order in which scores are computed (or on the executor that computes them). A ``K`` whose
    mixture has more free parameters than there are samples is skipped. ``designs`` (built on ``X`` with
    the settings' mechanism) caches the spline bases across calls; by default one is built for this call.

    Raises
    ------
    ValueError
        If ``X`` has too few samples even for one regression of ``node`` on ``parents``.
    """
    parents = tuple(sorted(parents))
    y = X[:, node]
    n = y.size
    # X was validated once by the caller: build the design once and fit without checking again.
    if designs is None:
        designs = NodeDesigns(X, settings.mechanism, settings.n_knots)
    design = designs.design(node, parents)
    p = design.shape[1]
    regressors = X[:, list(parents)] if settings.mechanism == "spline" and parents else None
    y_var = float(np.var(y))
    if y_var == 0.0:
        raise ValueError(f"node {node} is constant in X; a mechanism needs a response that varies")
    best: MixtureRegressionResult | None = None
    for k in range(1, settings.max_components + 1):
        if n < max(n_mixture_parameters(k, p), k * (p + 1)):
            break
        rng = np.random.default_rng([settings.seed, node, k, len(parents), *parents])
        fit = fit_mixture(
            y,
            design,
            k,
            rng=rng,
            n_init=settings.n_init,
            max_iter=settings.max_iter,
            tol=settings.tol,
            floor=settings.min_variance * y_var,
            regressors=regressors,
        )
        if best is None or fit.bic < best.bic:
            best = fit
        elif settings.greedy_components:
            break
    if best is None:
        raise ValueError(
            f"X has {n} samples, fewer than the {n_mixture_parameters(1, p)} free parameters "
            f"of one regression of node {node} on its {len(parents)} parent(s); use more samples or fewer "
            "parents"
        )
    return best


def _score_batch(
    designs: NodeDesigns, settings: ScoreSettings, keys: Sequence[Key]
) -> list[tuple[float, int]]:
    out = []
    with single_threaded():  # as in the caller's process (CausalMixtureModel.fit)
        for node, parents in keys:
            fit = fit_node(designs.X, node, parents, settings, designs=designs)
            out.append((float(fit.bic), fit.n_components))
    return out


class LatentBIC:
    """Memoised latent-aware BIC ``S(j | parents)`` (lower is better).

    Scores are cached on ``(j, sorted parents)``; ``prefetch`` computes the missing ones of a batch
    through ``executor`` (in chunks, in input order) when the batch is large enough to pay for it
    (``certkit.causal.batches``), so parallel and serial runs give the same scores. An int ``executor``
    opens a process pool for each such batch: pass an open pool (``certkit.parallel.resolve_executor``)
    to keep one, as ``CausalMixtureModel.fit`` does.

    ``shared_scores`` (a dict, empty at first) shares scores between ``LatentBIC`` objects on the same
    ``X``: each reads the scores the others computed with equal settings and writes its own. A spline
    score also reads the linear score of the same ``(j, parents)`` when the knot rule enters every parent
    linearly in ``j``'s mechanism: the design, the starts and the EM are then the linear ones, so the
    score is the same number. ``CausalMixtureModel`` shares them between the fits of ``"auto"``.
    """

    def __init__(
        self,
        X: np.ndarray,
        settings: ScoreSettings,
        *,
        executor: ExecutorArg = None,
        shared_scores: dict | None = None,
    ) -> None:
        self.X = check_array(X, "X", ndim=2)
        check_squares_fit(self.X, "X", range(self.X.shape[1]))
        if not isinstance(settings, ScoreSettings):
            raise TypeError(f"settings must be a ScoreSettings, got {type(settings).__name__}")
        if shared_scores is not None and not isinstance(shared_scores, dict):
            raise TypeError(f"shared_scores must be a dict or None, got {type(shared_scores).__name__}")
        self._shared = shared_scores
        self._reused = 0  # scores of _cache read from shared_scores
        self._data_key = self._linear = None
        if shared_scores is not None:
            # a private copy, fingerprinted: only scores of these values are read or written, whatever the
            # caller does to its array later
            self.X = self.X.copy()
            self._data_key = (self.X.shape, data_seed(self.X))
            self._linear = dataclasses.replace(settings, mechanism="linear")
        self.settings = settings
        self.executor = executor
        self.designs = NodeDesigns(self.X, settings.mechanism, settings.n_knots)
        self._cache: dict[Key, tuple[float, int]] = {}

    def _from_shared(self, key: Key) -> tuple[float, int] | None:
        """The shared score of ``key``: computed with these settings, or, for a spline score whose
        parents all enter linearly, with the same settings and linear mechanisms."""
        found = self._shared.get((self._data_key, self.settings, key))
        node, parents = key
        if found is None and self.settings.mechanism == "spline" and all(
            self.designs.knots(p)[node] == LINEAR for p in parents
        ):
            found = self._shared.get((self._data_key, self._linear, key))
        return found

    @property
    def n_nodes(self) -> int:
        """Number of variables (columns of ``X``) the score covers."""
        return int(self.X.shape[1])

    @property
    def n_evaluations(self) -> int:
        """Number of distinct local scores computed so far (not counting those read from
        ``shared_scores``)."""
        return len(self._cache) - self._reused

    @staticmethod
    def key(node: int, parents: Iterable[int]) -> Key:
        return int(node), tuple(sorted(int(p) for p in parents))

    def prefetch(self, keys: Iterable[tuple[int, Iterable[int]]]) -> None:
        """Compute every missing score of ``keys`` (through the executor when there are several)."""
        missing = list(dict.fromkeys(k for k in (self.key(n, p) for n, p in keys) if k not in self._cache))
        if not missing:
            return
        self.designs.prepare(p for _, parents in missing for p in parents)  # knots fixed before workers
        if self._shared is not None:
            found = {k: hit for k in missing if (hit := self._from_shared(k)) is not None}
            self._cache.update(found)
            self._reused += len(found)
            missing = [k for k in missing if k not in found]
            if not missing:
                return
        fn = functools.partial(_score_batch, self.designs, self.settings)
        components = range(1, self.settings.max_components + 1)
        work = sum(em_work(self.X.shape[0], [self.designs.width(*key)], components) for key in missing)
        n_chunks = chunk_count(self.executor, work, len(missing), _MAX_CHUNKS)
        results = fn(missing) if n_chunks == 1 else map_chunks(fn, missing, n_chunks, self.executor)
        self._cache.update(zip(missing, results))
        if self._shared is not None:
            self._shared.update(((self._data_key, self.settings, k), r) for k, r in zip(missing, results))

    def __call__(self, node: int, parents: Iterable[int]) -> float:
        key = self.key(node, parents)
        if key not in self._cache:
            self.prefetch([key])
        return self._cache[key][0]

    def n_components(self, node: int, parents: Iterable[int]) -> int:
        """The ``K`` with the lowest BIC for ``(node, parents)``."""
        key = self.key(node, parents)
        if key not in self._cache:
            self.prefetch([key])
        return self._cache[key][1]
