"""Stability of the findings of a causal mixture model: how often refits on resamples reproduce the edges,
changing mechanisms, mixing sets and invariant nodes of the fit on all rows."""

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
from certkit.causal.data import canonical_data, check_data, constant_columns, data_seed
from certkit.causal.estimator import ESTIMATOR_MECHANISMS, RUN_ONLY_PARAMS, CausalMixtureModel
from certkit.causal.mixture_regression import n_mixture_parameters
from certkit.causal.spline import check_n_knots, max_width
from certkit.parallel import parallel_map

__all__ = ["MAX_BOOTSTRAP", "MAX_REDRAWS", "StabilityResult", "edge_stability", "resample_size"]

#: Most resampled fits: each is a whole model fit (seconds), and 10,000 resolve frequencies to 1e-4.
MAX_BOOTSTRAP = 10_000

#: Most draws of one resample (a draw that leaves a column constant is drawn again).
MAX_REDRAWS = 100


@dataclass(frozen=True)
class StabilityResult(ResultMixin):
    """What a ``CausalMixtureModel`` finds on all rows, and how often refits on resamples find it again.

    Attributes
    ----------
    edge_frequency : ndarray (d, d)
        Fraction of refits with the edge ``i -> j``.
    adjacency_frequency : ndarray (d, d)
        Fraction with an edge between ``i`` and ``j`` in either direction (symmetric).
    change_frequency : ndarray (d,)
        Fraction in which node ``j`` has more than one mechanism (``K > 1``).
    mixing_set_frequency : dict[frozenset, float]
        Fraction in which each mixing set (exactly this set of nodes) was found.
    n_bootstrap : int
        Number of refits.
    feature_names : tuple of str
        Node names.
    full_adjacency : ndarray (d, d) of int
        The graph of the fit on all rows (``adjacency_``).
    full_changing : ndarray (d,) of bool
        The nodes the fit on all rows found changing (``n_components_ > 1``).
    full_mixing_sets : list of frozenset
        The mixing sets of the fit on all rows (``mixing_sets_``).
    change_agreement : ndarray (d,)
        Fraction of refits in which node ``j`` is changing exactly when the fit on all rows says so:
        ``change_frequency`` for a changing node, ``1 - change_frequency`` for an invariant one.
    n_redrawn : int
        Draws refused because they left a column constant (each such resample was drawn again).
    """

    edge_frequency: np.ndarray
    adjacency_frequency: np.ndarray
    change_frequency: np.ndarray
    mixing_set_frequency: dict[frozenset[int], float]
    n_bootstrap: int
    feature_names: tuple[str, ...]
    full_adjacency: np.ndarray
    full_changing: np.ndarray
    full_mixing_sets: list[frozenset[int]]
    change_agreement: np.ndarray
    n_redrawn: int = 0

    def stable_edges(self, threshold: float = 0.5) -> list[tuple[str, str, float]]:
        """Edges found in more than ``threshold`` of the refits, most stable first: (cause, effect, freq)."""
        names = self.feature_names
        rows = [
            (names[i], names[j], float(self.edge_frequency[i, j]))
            for i, j in zip(*np.nonzero(self.edge_frequency > threshold))
        ]
        return sorted(rows, key=lambda r: -r[2])

    def summary(self) -> str:
        """The full fit's findings with the fraction of refits that reproduce each, then the frequencies
        of everything the refits found: edges, changing mechanisms and mixing sets."""
        names = self.feature_names

        def name_set(nodes: frozenset[int]) -> str:
            return "{" + ", ".join(names[v] for v in sorted(nodes)) + "}"

        findings = [
            [f"edge {names[i]} -> {names[j]}", f"{self.edge_frequency[i, j]:.2f}",
             f"{self.adjacency_frequency[i, j]:.2f}"]
            for i, j in zip(*np.nonzero(self.full_adjacency))
        ]
        changing = np.flatnonzero(self.full_changing)
        invariant = np.flatnonzero(~self.full_changing)
        findings += [[f"changing {names[j]}", f"{self.change_agreement[j]:.2f}", "-"] for j in changing]
        findings += [
            [f"mixing set {name_set(s)}", f"{self.mixing_set_frequency.get(s, 0.0):.2f}", "-"]
            for s in self.full_mixing_sets
        ]
        findings += [[f"invariant {names[j]}", f"{self.change_agreement[j]:.2f}", "-"] for j in invariant]
        edges = self.stable_edges(0.0)[:20]
        lines = [
            format_table(
                ["finding", "reproduced", "either direction"],
                findings,
                title=f"Findings of the fit on all rows and the fraction of {self.n_bootstrap} refits "
                "that reproduce each",
            ),
            "",
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
                    [[name_set(s), f"{f:.2f}"] for s, f in sets],
                    title="Mixing sets",
                ),
            ]
        if self.n_redrawn:
            lines += ["", f"{self.n_redrawn} draw(s) left a column constant and were drawn again"]
        return "\n".join(lines)


def _resample(
    X: np.ndarray, size: int, replace: bool, seed: int, names: tuple[str, ...]
) -> tuple[np.ndarray, int]:
    """The resample ``seed`` draws, and how many draws were refused first: a draw that leaves a column
    constant (a rare value missed) is drawn again, as a fit needs every column to vary."""
    gen = np.random.default_rng(seed)
    for redraws in range(MAX_REDRAWS):
        sample = X[gen.choice(X.shape[0], size=size, replace=replace)]
        constant = constant_columns(sample)
        if not constant.size:
            return sample, redraws
    raise ValueError(
        f"{MAX_REDRAWS} draws of {size} rows in a row left column {names[constant[0]]!r} constant (it takes "
        "one value in almost every row); use a larger sample_fraction, or drop the column"
    )


def _fit_findings(
    X: np.ndarray,
    template: CausalMixtureModel,
    size: int,
    replace: bool,
    names: tuple[str, ...],
    seed: int | None,
) -> tuple[Any, ...]:
    """Fit a clone of ``template`` on all rows (``seed`` None) or on the resample ``seed`` draws:
    its findings and the number of draws refused."""
    redraws = 0
    if seed is not None:
        X, redraws = _resample(X, size, replace, seed, names)
    model = clone(template).fit(X)
    return model.adjacency_, model.n_components_, model.mixing_sets_, redraws


def _check_fitted_on(estimator: CausalMixtureModel, X: np.ndarray, names: tuple[str, ...] | None) -> None:
    """Refuse a fitted ``estimator`` whose findings cannot be those of a fit on this ``X``."""
    n, d = X.shape
    key, fitted_params = vars(estimator).get("data_key_"), vars(estimator).get("_fit_params")
    if key is None or fitted_params is None:
        raise ValueError(
            "estimator was fitted by an older certkit (it does not record the data and parameters of its "
            "fit); refit it, or pass an unfitted estimator (edge_stability then fits it on X)"
        )
    if estimator.n_features_in_ != d:
        raise ValueError(
            f"estimator was fitted on {estimator.n_features_in_} variables but X has {d}; pass the X it "
            "was fitted on, or an unfitted estimator (edge_stability then fits it on X)"
        )
    if estimator.labels_.shape[0] != n:
        raise ValueError(
            f"estimator was fitted on {estimator.labels_.shape[0]} samples but X has {n}; pass the X it "
            "was fitted on, or an unfitted estimator (edge_stability then fits it on X)"
        )
    fitted_names = tuple(estimator.feature_names_in_)
    if names is not None and vars(estimator).get("_named_columns", True) and fitted_names != names:
        raise ValueError(
            f"estimator was fitted on the columns ({', '.join(fitted_names)}) but X has "
            f"({', '.join(names)}); pass the X it was fitted on, or an unfitted estimator"
        )
    if key != data_seed(canonical_data(X)[1]):
        raise ValueError(
            "estimator was fitted on other values than X (same shape, other data, or the columns in "
            "another order); pass the X it was fitted on (any row order), or an unfitted estimator "
            "(edge_stability then fits it on X)"
        )
    params = estimator.get_params(deep=False)
    # the executor and the progress bar do not change a fit, nor does rng without a search subsample
    ignored = set(RUN_ONLY_PARAMS) | (
        {"rng"} if params["search_samples"] is None and fitted_params.get("search_samples") is None else set()
    )
    changed = [
        f"{name}: {fitted_params.get(name)!r} -> {value!r}"
        for name, value in params.items()
        if name not in ignored and not _same_value(fitted_params.get(name), value)
    ]
    if changed:
        raise ValueError(
            f"estimator's parameters were changed after its fit ({'; '.join(changed)}): its findings are not "
            "those of the refits' protocol; refit it, or pass an unfitted estimator"
        )


def _same_value(a: Any, b: Any) -> bool:
    """``a`` and ``b`` are the same parameter value (the same object, or equal)."""
    if a is b:
        return True
    try:
        return bool(a == b)
    except (TypeError, ValueError):  # no truth value: not the same
        return False


def resample_size(
    estimator: CausalMixtureModel, n: int, d: int, sample_fraction: float, replace: bool
) -> int:
    """Rows of each refit's resample, ``round(sample_fraction * n)``, checked against the estimator's
    mixtures: with ``mechanism="auto"`` the spline ones whenever the full fit tries splines (fitted: it
    did, unfitted: ``n`` rows allow them), so every refit runs the full fit's protocol.

    Parameters
    ----------
    estimator : CausalMixtureModel
        The model of the full fit, fitted or not.
    n, d : int
        Rows and variables of ``X``.
    sample_fraction : float
        Size of each resample as a fraction of ``n`` (see ``edge_stability``).
    replace : bool
        Whether rows are drawn with replacement.

    Returns
    -------
    int
        Rows per resample (at least 2).

    Raises
    ------
    ValueError
        ``sample_fraction`` is out of range or draws fewer rows than those mixtures have parameters.
    """
    sample_fraction = check_positive(sample_fraction, "sample_fraction")
    if not replace and sample_fraction > 1:
        raise ValueError(f"sample_fraction must be <= 1 without replacement, got {sample_fraction}")
    size = max(2, round(sample_fraction * n))
    k = check_integer(estimator.max_components, "max_components", minimum=1)
    mechanism = check_in_options(estimator.mechanism, "mechanism", ESTIMATOR_MECHANISMS)
    if mechanism == "auto":
        if hasattr(estimator, "mechanism_scores_"):
            splines = "spline" in estimator.mechanism_scores_
        else:
            params = estimator.get_params(deep=False)
            splines = type(estimator)(**{**params, "mechanism": "spline"})._enough_rows(n, d)
        mechanism = "spline" if splines else "linear"
    need = n_mixture_parameters(k, max_width(d, mechanism, check_n_knots(estimator.n_knots)))
    if size < need <= n:  # (too few rows in X itself: the fit says so, naming X)
        kind = " spline" if mechanism == "spline" else ""
        raise ValueError(
            f"sample_fraction={sample_fraction:g} draws {size} of the {n} rows per fit, fewer than "
            f"the {need} parameters of the estimator's {k}-component{kind} mixture on all other {d - 1} "
            f"variables; use sample_fraction >= {need / n:.3g} (or more samples, or a smaller max_components)"
        )
    return size


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
    """How often refits of a causal mixture model on resamples reproduce what it finds on all rows.

    The full fit is ``estimator`` fitted on all of ``X`` (done here unless ``estimator`` is already
    fitted). Each of the ``n_bootstrap`` refits draws ``round(sample_fraction * n)`` rows (by default
    80 % without replacement, i.e. subsampling) and fits a clone of ``estimator``: the same protocol as
    the full fit (every parameter: ``max_components``, ``mechanism``, ``n_knots``, ``n_init``,
    ``search``, ...) on other rows. Only ``executor`` and ``progress`` differ: each fit scores serially,
    the fits are what runs in parallel. The result gives, for each finding of the full fit (edge,
    changing node, mixing set, invariant node), the fraction of refits that reproduce it, and the
    frequencies of everything the refits found.

    The seeds of all resamples are drawn from ``rng`` first, so the result does not depend on
    ``executor``. The classical bootstrap (``sample_fraction=1, replace=True``) is available but biased
    here: duplicated rows form tight clusters that the mixture score can mistake for extra mechanisms,
    inflating the frequency of ``K > 1`` and of the edges it brings.

    Parameters
    ----------
    X : array-like or DataFrame (n, d)
        The data.
    n_bootstrap : int
        Number of refits on resamples (1 to `MAX_BOOTSTRAP` = 10,000).
    sample_fraction : float
        Size of each resample as a fraction of ``n``, in (0, 1] without replacement (> 0 with); at
        least the parameters of the estimator's mixtures on all other variables: with
        ``mechanism="auto"`` the spline ones when the full fit tries splines, so that every refit does
        too. A draw that leaves a column constant (a value that most rows share) is drawn again, up to
        `MAX_REDRAWS` = 100 times per resample (``n_redrawn`` counts them).
    replace : bool
        Draw rows with replacement (bootstrap) instead of without (subsampling).
    estimator : CausalMixtureModel, optional
        The model whose findings are checked; default ``CausalMixtureModel()``. Unfitted, a clone is
        fitted on all of ``X`` for the full fit. Fitted (it has ``adjacency_``), its findings are the
        full fit's and nothing is refitted on all rows: it must have been fitted on this ``X``: the
        same values in any row order (``data_key_``), and when ``X`` is a DataFrame and the estimator
        was fitted on one, the same column names (an estimator fitted on an array takes ``X``'s), with
        the parameters of that fit (not changed by ``set_params`` since; ``executor``, ``progress``
        and, without ``search_samples``, ``rng`` may change: they do not change a fit). Its
        parameters are the refits' protocol; an ``rng`` of None or a Generator is replaced by one seed
        drawn from ``rng`` and shared by every fit, so the result is reproducible from ``rng``.
    executor : None, int or executor
        Where the fits run (see ``certkit.parallel``).
    rng : None, int or numpy.random.Generator
        Seeds the resamples (and the estimator's ``rng`` when that is None or a Generator).
    progress : bool or str
        Progress bar over the fits.

    Returns
    -------
    StabilityResult
        The full fit's findings (``full_adjacency``, ``full_changing``, ``full_mixing_sets``), how
        often each is reproduced (``edge_frequency``, ``change_agreement``, ``mixing_set_frequency``)
        and the frequencies of every finding of the refits.

    Raises
    ------
    TypeError
        ``estimator`` is not a ``CausalMixtureModel``, ``replace`` is not a bool, or another argument
        has the wrong type.
    ValueError
        ``n_bootstrap`` or ``sample_fraction`` is out of range, a resample has fewer rows than the
        estimator's mixture has parameters, a fitted ``estimator`` was fitted on other data or its
        parameters were changed since, or 100 draws of a resample in a row left a column constant.
    """
    X, names = check_data(X)
    n, d = X.shape
    n_bootstrap = check_integer(n_bootstrap, "n_bootstrap", minimum=1, maximum=MAX_BOOTSTRAP)
    # every fit returns a (d, d) graph, its (d,) components and mixing sets; the means stack them again
    check_allocation(8.0 * (n_bootstrap + 1) * (3 * d * d + 2 * d + 16), "n_bootstrap", n_bootstrap,
                     what=f"the findings of {n_bootstrap + 1} fits on {d} variables")
    if estimator is None:
        estimator = CausalMixtureModel()
    if not isinstance(estimator, CausalMixtureModel):
        raise TypeError(f"estimator must be a CausalMixtureModel, got {type(estimator).__name__}")
    fitted = hasattr(estimator, "adjacency_")
    if fitted:
        _check_fitted_on(estimator, X, names)
    progress = check_progress(progress)
    if not isinstance(replace, (bool, np.bool_)):
        raise TypeError(f"replace must be True or False, got {type(replace).__name__}")
    size = resample_size(estimator, n, d, sample_fraction, replace)
    gen = check_rng(rng)
    seeds: list[int | None] = [int(s) for s in gen.integers(0, 2**63 - 1, size=n_bootstrap)]
    # the estimator's options, not a deep copy (an executor object, e.g. a Dask client, cannot be copied)
    template = type(estimator)(**{**estimator.get_params(deep=False), "executor": None, "progress": False})
    if estimator.rng is None or isinstance(estimator.rng, np.random.Generator):
        template.set_params(rng=int(gen.integers(0, 2**63 - 1)))
    feature_names = (
        names if names is not None
        else tuple(estimator.feature_names_in_) if fitted
        else tuple(f"x{j}" for j in range(d))
    )
    fits = parallel_map(
        functools.partial(_fit_findings, X, template, size, bool(replace), feature_names),
        seeds if fitted else [None, *seeds],
        executor=executor,
        progress="bootstrap" if progress is True else progress,
    )
    if fitted:
        full = (estimator.adjacency_, estimator.n_components_, estimator.mixing_sets_)
    else:
        full, fits = fits[0], fits[1:]
    full_changing = np.asarray(full[1]) > 1
    changing = np.array([f[1] > 1 for f in fits])
    sets = Counter(s for f in fits for s in f[2])
    return StabilityResult(
        edge_frequency=np.mean([f[0] for f in fits], axis=0),
        adjacency_frequency=np.mean([np.maximum(f[0], f[0].T) for f in fits], axis=0),
        change_frequency=changing.mean(axis=0),
        mixing_set_frequency={s: c / n_bootstrap for s, c in sets.items()},
        n_bootstrap=n_bootstrap,
        feature_names=feature_names,
        full_adjacency=np.array(full[0], dtype=np.int64),
        full_changing=full_changing,
        full_mixing_sets=[frozenset(int(v) for v in s) for s in full[2]],
        change_agreement=(changing == full_changing).mean(axis=0),
        n_redrawn=sum(f[3] for f in fits),
    )
