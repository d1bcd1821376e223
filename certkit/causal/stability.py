"""Bootstrap stability of every finding of a causal mixture model: edges, changing mechanisms, mixing sets."""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.base import clone

from certkit._results import ResultMixin, format_table
from certkit._typing import ExecutorArg, Progress, RNGLike
from certkit._validation import (
    check_allocation,
    check_in_options,
    check_integer,
    check_positive,
    check_progress,
    check_rng,
)
from certkit.causal.data import check_data
from certkit.causal.estimator import CausalMixtureModel
from certkit.causal.mixture_regression import n_mixture_parameters
from certkit.causal.spline import MECHANISMS, check_n_knots, max_width
from certkit.parallel import parallel_map

__all__ = ["MAX_BOOTSTRAP", "StabilityResult", "edge_stability"]

#: Most resampled fits: each is a whole model fit (seconds), and 10,000 resolve frequencies to 1e-4.
MAX_BOOTSTRAP = 10_000


@dataclass(frozen=True)
class StabilityResult(ResultMixin):
    """Bootstrap frequencies of the findings of a ``CausalMixtureModel``.

    Attributes
    ----------
    edge_frequency : ndarray (d, d)
        Fraction of bootstrap fits with the edge ``i -> j``.
    adjacency_frequency : ndarray (d, d)
        Fraction with an edge between ``i`` and ``j`` in either direction (symmetric).
    change_frequency : ndarray (d,)
        Fraction in which node ``j`` has more than one mechanism (``K > 1``).
    mixing_set_frequency : dict[frozenset, float]
        Fraction in which each mixing set (exactly this set of nodes) was found.
    n_bootstrap : int
        Number of resampled fits.
    feature_names : tuple of str
        Node names.
    """

    edge_frequency: np.ndarray
    adjacency_frequency: np.ndarray
    change_frequency: np.ndarray
    mixing_set_frequency: dict[frozenset[int], float]
    n_bootstrap: int
    feature_names: tuple[str, ...]

    def stable_edges(self, threshold: float = 0.5) -> list[tuple[str, str, float]]:
        """Edges found in more than ``threshold`` of the fits, most stable first: (cause, effect, freq)."""
        names = self.feature_names
        rows = [
            (names[i], names[j], float(self.edge_frequency[i, j]))
            for i, j in zip(*np.nonzero(self.edge_frequency > threshold))
        ]
        return sorted(rows, key=lambda r: -r[2])

    def summary(self) -> str:
        """Stable edges, changing mechanisms and mixing sets with their bootstrap frequencies."""
        names = self.feature_names
        edges = self.stable_edges(0.0)[:20]
        lines = [
            format_table(
                ["cause", "effect", "frequency"],
                [[a, b, f"{f:.2f}"] for a, b, f in edges],
                title=f"Edge stability over {self.n_bootstrap} bootstrap fits (top {len(edges)})",
            ),
            "",
            format_table(
                ["node", "P(K > 1)"],
                [[names[j], f"{f:.2f}"] for j, f in enumerate(self.change_frequency)],
                title="Changing mechanisms",
            ),
        ]
        sets = sorted(self.mixing_set_frequency.items(), key=lambda kv: -kv[1])[:10]
        if sets:
            lines += [
                "",
                format_table(
                    ["mixing set", "frequency"],
                    [["{" + ", ".join(names[v] for v in sorted(s)) + "}", f"{f:.2f}"] for s, f in sets],
                    title="Mixing sets",
                ),
            ]
        return "\n".join(lines)


def _bootstrap_fit(
    X: np.ndarray, template: CausalMixtureModel, size: int, replace: bool, seed: int
) -> tuple[Any, ...]:
    gen = np.random.default_rng(seed)
    idx = gen.choice(X.shape[0], size=size, replace=replace)
    model = clone(template).set_params(rng=int(gen.integers(0, 2**63 - 1)), executor=None, progress=False)
    model.fit(X[idx])
    return model.adjacency_, model.n_components_, model.mixing_sets_


def edge_stability(
    X: Any,
    *,
    n_bootstrap: int = 50,
    sample_fraction: float = 0.8,
    replace: bool = False,
    estimator: CausalMixtureModel | None = None,
    executor: ExecutorArg = None,
    rng: RNGLike = None,
    progress: Progress = False,
) -> StabilityResult:
    """Refit a causal mixture model on ``n_bootstrap`` resamples and count what it finds.

    Each fit draws ``round(sample_fraction * n)`` rows (by default 80 % without replacement, i.e.
    subsampling) and fits a clone of ``estimator`` (its own executor is replaced by serial scoring: the
    fits are what runs in parallel). The seeds of all fits are drawn from ``rng`` first, so the result
    does not depend on ``executor``. The classical bootstrap (``sample_fraction=1, replace=True``) is
    available but biased here: duplicated rows form tight clusters that the mixture score can mistake
    for extra mechanisms, inflating the frequency of ``K > 1`` and of the edges it brings.

    Parameters
    ----------
    X : array-like or DataFrame (n, d)
        The data.
    n_bootstrap : int
        Number of resampled fits (1 to `MAX_BOOTSTRAP` = 10,000).
    sample_fraction : float
        Size of each resample as a fraction of ``n``, in (0, 1] without replacement (> 0 with).
    replace : bool
        Draw rows with replacement (bootstrap) instead of without (subsampling).
    estimator : CausalMixtureModel, optional
        The model to refit (its parameters are kept, ``rng`` is set per fit); default
        ``CausalMixtureModel()``.
    executor : None, int or executor
        Where the bootstrap fits run (see ``certkit.parallel``).
    rng : None, int or numpy.random.Generator
        Seeds the resamples and fits.
    progress : bool or str
        Progress bar over the fits.

    Returns
    -------
    StabilityResult
    """
    X, names = check_data(X)
    n_bootstrap = check_integer(n_bootstrap, "n_bootstrap", minimum=1, maximum=MAX_BOOTSTRAP)
    d = X.shape[1]
    # every fit returns a (d, d) graph, its (d,) components and mixing sets; the means stack them again
    check_allocation(8.0 * n_bootstrap * (3 * d * d + 2 * d + 16), "n_bootstrap", n_bootstrap,
                     what=f"the findings of {n_bootstrap} fits on {d} variables")
    if estimator is None:
        estimator = CausalMixtureModel()
    if not isinstance(estimator, CausalMixtureModel):
        raise TypeError(f"estimator must be a CausalMixtureModel, got {type(estimator).__name__}")
    progress = check_progress(progress)
    if not isinstance(replace, (bool, np.bool_)):
        raise TypeError(f"replace must be True or False, got {type(replace).__name__}")
    sample_fraction = check_positive(sample_fraction, "sample_fraction")
    if not replace and sample_fraction > 1:
        raise ValueError(f"sample_fraction must be <= 1 without replacement, got {sample_fraction}")
    size = max(2, round(sample_fraction * X.shape[0]))
    k = check_integer(estimator.max_components, "max_components", minimum=1)
    mechanism = check_in_options(estimator.mechanism, "mechanism", MECHANISMS)
    need = n_mixture_parameters(k, max_width(d, mechanism, check_n_knots(estimator.n_knots)))
    if size < need <= X.shape[0]:  # (too few rows in X itself: the fit says so, naming X)
        raise ValueError(
            f"sample_fraction={sample_fraction:g} draws {size} of the {X.shape[0]} rows per fit, fewer than "
            f"the {need} parameters of the estimator's {k}-component mixture on all other {d - 1} variables; "
            f"use sample_fraction >= {need / X.shape[0]:.3g} (or more samples, or a smaller max_components)"
        )
    seeds = check_rng(rng).integers(0, 2**63 - 1, size=n_bootstrap)
    fits = parallel_map(
        functools.partial(_bootstrap_fit, X, estimator, size, bool(replace)),
        [int(s) for s in seeds],
        executor=executor,
        progress="bootstrap" if progress is True else progress,
    )
    edges = np.mean([f[0] for f in fits], axis=0)
    sets = Counter(s for f in fits for s in f[2])
    return StabilityResult(
        edge_frequency=edges,
        adjacency_frequency=np.mean([np.maximum(f[0], f[0].T) for f in fits], axis=0),
        change_frequency=np.mean([f[1] > 1 for f in fits], axis=0),
        mixing_set_frequency={s: c / n_bootstrap for s, c in sets.items()},
        n_bootstrap=n_bootstrap,
        feature_names=names if names is not None else tuple(f"x{j}" for j in range(d)),
    )
