"""Fuzz of the public API with bad inputs (issue 14).

Every target is a public call with a valid set of arguments.  Hypothesis replaces one argument by a
value derived from its valid one — NaN/inf entries, empty, 0-d and 3-d arrays, one row too few, complex,
boolean, string and object dtypes, lists, dicts, None, huge, negative and fractional sizes, bad levels and
unknown options — and the call must either return a valid result (checked per target) or raise
``ValueError``/``TypeError`` whose message names the replaced argument.  Nothing may hang, allocate
gigabytes or fail with another exception.  Examples are bounded and derandomised so the file runs in well
under a minute.

The targets cover the statistics, the conformal estimators, `parallel_map`, the compiled kernels
(`certkit._core.*`, called directly), the circuit certificates built on them (radii, edit bounds,
`certify_circuit*`, `example_parts`) and the size arguments of certkit.ope and certkit.performative
(bootstrap replicates, sensitivity grid, simulated agents, retraining rounds; issue 23).  Huge sizes
are not avoided: the library refuses them up front (memory estimates, the vote kernel's and the OPE
estimators' work estimates) or computes in closed form (Poisson radii), and
this file checks that it does.  No per-example deadline (no timed assertions): a slow call shows up
as a slow file, and ``--durations`` names it.
"""

from __future__ import annotations

import functools
import math
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import special

from certkit import _core, circuits, conformal, mibp, ope, performative, stats
from certkit.circuits import ScoreRule
from certkit.parallel import parallel_map

FUZZ = settings(
    max_examples=100,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

HUGE_INTS = (10**12, 2**63, 10**30)


# ------------------------------------------------------------------------------------------ bad values
def _array_variants(arr: np.ndarray) -> list[Any]:
    out: list[Any] = [
        arr.tolist(),  # a list is valid input: must give a valid result
        arr[:0],  # empty
        np.asarray(arr.flat[0]),  # 0-d
        arr[None, None] if arr.ndim == 1 else arr[None],  # 3-d
        arr.astype(complex),
        arr.astype(bool),
        arr.astype(str),
        arr.astype(object),
        {"a": 1},
        None,
        "abc",
    ]
    if arr.shape[0] > 1:
        out.append(arr[:-1])  # one row too few
    if np.issubdtype(arr.dtype, np.floating):
        for bad in (np.nan, np.inf, -np.inf):
            corrupted = arr.copy()
            corrupted.flat[0] = bad
            out.append(corrupted)
        out += [-arr - 1.0, arr * 1e300]
    elif arr.dtype == np.bool_:
        out += [arr.astype(np.int64), arr.astype(np.float64)]
    else:
        out += [arr.astype(np.float64) + 0.5, -arr - 1, arr + 10**12]
    return out


def _float_variants(value: float) -> list[Any]:
    return [np.nan, np.inf, -np.inf, -1.0, 0.0, 1.0, 2.0, 1e300, -1e300, "0.5", [value, value],
            np.array([value, value]), None, True, complex(value), np.float32(value)]


def _int_variants(value: int) -> list[Any]:
    return [-1, 0, *HUGE_INTS, 1.5, float(value), True, "3", None, [value], np.int32(value)]


def _bool_variants(value: bool) -> list[Any]:
    return ["yes", 1, 0, None, 0.0, np.bool_(not value)]


def _str_variants(value: str) -> list[Any]:
    return ["nonsense", value.upper(), "", None, 1, [value], b"x"]


def bad_values(value: Any) -> list[Any]:
    """Values derived from a valid ``value`` that a careless or adversarial caller might pass."""
    if isinstance(value, bool):
        return _bool_variants(value)
    if isinstance(value, int):
        return _int_variants(value)
    if isinstance(value, float):
        return _float_variants(value)
    if isinstance(value, str):
        return _str_variants(value)
    if isinstance(value, np.ndarray):
        return _array_variants(value)
    if callable(value):
        return [5, None, "abs", [value]]
    if isinstance(value, tuple):
        return [value[::-1], (value[0],), None, "ab", (value[0], np.nan), (value[0], value[0])]
    raise AssertionError(f"no bad values for {value!r}")


# ------------------------------------------------------------------------------------------ targets
@dataclass
class Target:
    """A public call, its valid arguments and a check of its result."""

    name: str
    call: Callable[..., Any]
    valid: dict[str, Any]
    check: Callable[[Any], None]
    fuzzed: tuple[str, ...] = field(default=())
    aliases: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def arguments(self) -> tuple[str, ...]:
        return self.fuzzed or tuple(self.valid)


def _bounds(result: Any, low: float = 0.0, high: float = 1.0) -> None:
    lo, hi = (np.asarray(r, dtype=np.float64) for r in result)
    assert lo.shape == hi.shape
    assert np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))
    assert np.all(low <= lo) and np.all(lo <= hi) and np.all(hi <= high)


def _probabilities(result: Any) -> None:
    arr = np.asarray(result, dtype=np.float64)
    assert np.all(np.isfinite(arr)) and np.all((arr >= 0) & (arr <= 1))


def _level(result: Any) -> None:
    assert isinstance(result, float) and 0.0 < result <= 1.0


def _quantile(result: Any) -> None:
    assert isinstance(result, float) and not math.isnan(result)


def _rank(result: Any) -> None:
    assert isinstance(result, int) and result >= 1


def _fraction(result: Any) -> None:
    assert isinstance(result, float) and 0.0 <= result <= 1.0


def _nonnegative(result: Any) -> None:
    assert isinstance(result, float) and result >= 0.0


RNG = np.random.default_rng(0)
X2 = RNG.normal(size=(30, 2))
W = np.array([1.0, -0.5])


def linear_probabilities(X: np.ndarray) -> np.ndarray:
    p1 = special.expit(2.0 * (X @ W))
    return np.column_stack([1.0 - p1, p1])


def linear_regression(X: np.ndarray) -> np.ndarray:
    return X @ W


def fnr_loss(pred: np.ndarray, target: np.ndarray, lam: float) -> np.ndarray:
    if not np.issubdtype(target.dtype, np.integer):  # the user's loss checks its own needs
        raise TypeError(f"Y must hold integer labels for this loss, got dtype {target.dtype}")
    if target.ndim != 1 or np.any((target < 0) | (target >= pred.shape[1])):
        raise ValueError("Y must hold one class label per input for this loss")
    return (pred[np.arange(len(target)), target] < 1.0 - lam).astype(float)


Y2 = (RNG.uniform(size=30) < linear_probabilities(X2)[:, 1]).astype(np.int64)
SETS = linear_probabilities(X2) > 0.3


def _calibrate_predict(cls: type, params: dict[str, Any], X: Any, y: Any) -> Any:
    est = cls(**params).calibrate(X, y)
    return est.predict_set(X2[:5]) if hasattr(est, "predict_set") else est.predict_interval(X2[:5])


def _sets(result: Any) -> None:
    assert result.dtype == bool and result.shape == (5, 2)


def _intervals(result: Any) -> None:
    lo, hi = result
    assert lo.shape == hi.shape == (5,) and np.all(lo <= hi) and not np.any(np.isnan(lo))


def _estimator_target(name: str, cls: type, params: dict[str, Any], y: np.ndarray, check: Any) -> Target:
    def call(X: Any, y: Any, **kw: Any) -> Any:
        return _calibrate_predict(cls, kw, X, y)

    valid = {"X": X2, "y": y, **params}
    return Target(name, call, valid, check, fuzzed=tuple(k for k in valid if k not in ("model", "loss")))


SMOOTHING = {"p": np.array([0.1, 0.5, 0.99]), "radius": 0.2, "sigma": 0.5, "noise": "gaussian"}

TARGETS = [
    Target("clopper_pearson", lambda successes, trials, **kw: stats.clopper_pearson(successes, trials, **kw),
           {"successes": np.array([0, 3, 10]), "trials": 10, "confidence_level": 0.9,
            "alternative": "two-sided", "n_tests": 2}, _bounds),
    Target("hoeffding_bound", lambda mean, n, **kw: stats.hoeffding_bound(mean, n, **kw),
           {"mean": np.array([0.2, 0.7]), "n": 50, "confidence_level": 0.95, "value_range": (0.0, 1.0),
            "alternative": "greater"}, _bounds),
    Target("empirical_bernstein_bound",
           lambda mean, variance, n, **kw: stats.empirical_bernstein_bound(mean, variance, n, **kw),
           {"mean": np.array([0.2, 0.7]), "variance": np.array([0.05, 0.1]), "n": 50,
            "confidence_level": 0.95, "value_range": (0.0, 1.0), "alternative": "two-sided"}, _bounds),
    *[
        Target(fn.__name__, (lambda f: lambda p, **kw: f(p, **kw))(fn), dict(SMOOTHING), _probabilities,
               aliases={"p": ("p", "target")})
        for fn in (stats.smoothing_lower_bound, stats.smoothing_upper_bound, stats.smoothing_inverse_lower,
                   stats.smoothing_inverse_upper)
    ],
    Target("robust_level", lambda confidence_level, **kw: stats.robust_level(confidence_level, **kw),
           {"confidence_level": 0.9, "radius": 0.1, "sigma": 0.25, "noise": "uniform"}, _level),
    Target("conformal_quantile", stats.conformal_quantile,
           {"scores": RNG.uniform(size=20), "confidence_level": 0.8}, _quantile),
    Target("conformal_rank", lambda n, confidence_level: stats.conformal_rank(n, confidence_level),
           {"n": 20, "confidence_level": 0.8}, _rank),
    Target("coverage", lambda sets, y: conformal.coverage(sets, y), {"sets": SETS, "y": Y2}, _fraction),
    Target("set_size", lambda sets: conformal.set_size(sets), {"sets": SETS}, _nonnegative),
    Target("interval_coverage", lambda lower, upper, y: conformal.interval_coverage(lower, upper, y),
           {"lower": X2[:, 0] - 1, "upper": X2[:, 0] + 1, "y": X2[:, 1]}, _fraction),
    _estimator_target("SplitConformalClassifier", conformal.SplitConformalClassifier,
                      {"model": linear_probabilities, "conformity_score": "aps", "confidence_level": 0.8,
                       "output": "probabilities", "batch_size": 16, "rng": 0}, Y2, _sets),
    _estimator_target("RCP1Classifier", conformal.RCP1Classifier,
                      {"model": linear_probabilities, "sigma": 0.3, "radius": 0.1, "confidence_level": 0.8,
                       "noise": "gaussian", "batch_size": 16, "rng": 0}, Y2, _sets),
    _estimator_target("BinCPClassifier", conformal.BinCPClassifier,
                      {"model": linear_probabilities, "sigma": 0.3, "radius": 0.1, "confidence_level": 0.8,
                       "n_samples": 4, "base_probability": 0.7, "error_rate": 0.01, "rng": 0}, Y2, _sets),
    _estimator_target("RSCPPlusClassifier", conformal.RSCPPlusClassifier,
                      {"model": linear_probabilities, "sigma": 0.3, "radius": 0.1, "confidence_level": 0.8,
                       "n_samples": 4, "error_rate": 0.01, "mc_bound": "bernstein", "rng": 0}, Y2, _sets),
    _estimator_target("RCP1Regressor", conformal.RCP1Regressor,
                      {"model": linear_regression, "sigma": 0.3, "radius": 0.1, "confidence_level": 0.8,
                       "noise": "uniform", "rng": 0}, X2[:, 1], _intervals),
    Target("RCP1RiskControl",
           lambda X, Y, **kw: conformal.RCP1RiskControl(linear_probabilities, loss=fnr_loss, **kw)
           .calibrate(X, Y).risk(X2[:5], Y2[:5]),
           {"X": X2, "Y": Y2, "lambdas": np.linspace(0.0, 1.0, 6), "bound": 1.0, "sigma": 0.3,
            "radius": 0.05, "confidence_level": 0.5, "rng": 0}, _fraction),
    Target("parallel_map", lambda fn, items, **kw: parallel_map(fn, items, **kw),
           {"fn": functools.partial(operator.mul, 2), "items": np.arange(4), "executor": 1,
            "progress": False},
           lambda out: None),
]


# ------------------------------------------------------------------- compiled kernels and circuit radii
SCORES = RNG.normal(size=(12, 5))
PARTS = np.arange(12) % 3
RULE = ScoreRule(SCORES, top_k=2)
CONCEPT = RNG.normal(size=(12, 3))


def _discover(X_subset: Any) -> np.ndarray:
    """A picklable black-box discovery: the coordinates with a positive mean.

    Like any user's algorithm it checks its own needs: examples must be rows of 3 real numbers (the
    certificates accept any collection of examples, strings included, and cannot know what it expects).
    """
    arr = np.asarray(X_subset)
    if arr.ndim != 2 or arr.shape[1] != 3 or arr.dtype.kind not in "fiu":
        raise TypeError(f"X_concept must hold rows of 3 real numbers for this discover, got {arr.shape}")
    return arr.mean(axis=0) > 0


def _counts(n_runs: int) -> Callable[[Any], None]:
    def check(result: Any) -> None:
        arr = np.asarray(result)
        assert arr.dtype == np.int64 and arr.shape == (5,) and np.all((arr >= 0) & (arr <= n_runs))

    return check


def _selections(result: Any) -> None:
    assert result.dtype == bool and result.shape == (3, 5)


def _draws(result: Any) -> None:
    assert result.dtype == np.uint64 and result.ndim == 1


def _indices(result: Any) -> None:
    assert result.dtype == np.int64 and result.shape == (4, 3) and np.all((result >= 0) & (result < 10))
    assert all(np.unique(row).size == 3 for row in result)


def _masks(result: Any) -> None:
    assert result.dtype == bool and result.shape == (4, 10)


def _mixture(result: Any) -> None:
    assert np.all(np.isfinite(result["coef"])) and np.all(result["variance"] > 0)
    assert np.isclose(result["weights"].sum(), 1.0)


def _radii(result: Any) -> None:
    arr = np.asarray(result)
    assert arr.dtype == np.int64 and np.all(arr >= -1)


def _certificate(result: Any) -> None:
    assert isinstance(result, circuits.CircuitCertificate)
    assert np.all(result.lower <= result.upper) and np.all(result.certified_radius >= -1)
    assert np.all((result.counts >= 0) & (result.counts <= result.n_runs))


def _parts(result: Any) -> None:
    assert result.dtype == np.int64 and result.ndim == 1 and np.all(result >= 0)


_MIX_X = RNG.normal(size=(40, 1))
_MIX_DESIGN = np.column_stack([np.ones(40), _MIX_X[:, 0]])
_MIX_Y = np.where(RNG.uniform(size=40) < 0.5, 1.0, -1.0) * _MIX_X[:, 0] + 0.1 * RNG.normal(size=40)

KERNEL_TARGETS = [
    Target("_core.votes.subsample", lambda scores, **kw: _core.votes.subsample(scores, **kw),
           {"scores": SCORES, "scheme": "without_replacement", "m": 4, "n_subsamples": 20, "top_k": 2,
            "seed": 3, "n_threads": 2}, _counts(20),
           aliases={"m": ("m",), "scheme": ("scheme", "m")}),
    Target("_core.votes.subsample(poisson)", lambda scores, **kw: _core.votes.subsample(scores, **kw),
           {"scores": SCORES, "scheme": "poisson", "deletion_prob": 0.5, "n_subsamples": 20,
            "threshold": 0.1, "seed": 3}, _counts(20),
           aliases={"scheme": ("scheme", "deletion_prob"), "threshold": ("threshold", "top_k")}),
    Target("_core.votes.partition",
           lambda scores, n_parts, part_of, **kw: _core.votes.partition(scores, n_parts, part_of, **kw),
           {"scores": SCORES, "n_parts": 3, "part_of": PARTS, "top_k": 2}, _selections,
           aliases={"scores": ("scores", "part_of")}),
    Target("_core.rng.random_uint64",
           lambda seed, stream, counters: _core.rng.random_uint64(seed, stream, counters),
           {"seed": 7, "stream": 2, "counters": np.arange(3, dtype=np.int64)}, _draws),
    Target("_core.subsample.indices",
           lambda n, m, n_subsamples, **kw: _core.subsample.indices(n, m, n_subsamples, **kw),
           {"n": 10, "m": 3, "n_subsamples": 4, "replacement": False, "seed": 5}, _indices,
           aliases={"m": ("m",), "n": ("n", "m")}),
    Target("_core.subsample.deletion_masks",
           lambda n, n_subsamples, **kw: _core.subsample.deletion_masks(n, n_subsamples, **kw),
           {"n": 10, "n_subsamples": 4, "deletion_prob": 0.4, "seed": 5}, _masks),
    Target("_core.mixreg.em", lambda y, design, resp0, **kw: _core.mixreg.em(y, design, resp0, **kw),
           {"y": _MIX_Y, "design": _MIX_DESIGN, "resp0": RNG.dirichlet([1.0, 1.0], size=40), "max_iter": 20,
            "tol": 1e-6, "ridge": 1e-8, "min_variance": 1e-3}, _mixture),
    Target("certified_radius", lambda lower, upper, n, **kw: circuits.certified_radius(lower, upper, n, **kw),
           {"lower": np.array([0.9, 0.1, 0.6]), "upper": np.array([0.95, 0.2, 0.7]), "n": 1000,
            "deletion_prob": 0.9, "threat": "insertion"}, _radii),
    Target("certified_radius(subsample)",
           lambda lower, upper, n, m, **kw: circuits.certified_radius(lower, upper, n, m, **kw),
           {"lower": np.array([0.9, 0.1]), "upper": np.array([0.95, 0.2]), "n": 1000, "m": 30,
            "replacement": True, "threat": "deletion"}, _radii),
    Target("edit_bounds", lambda lower, upper, n, m, **kw: circuits.edit_bounds(lower, upper, n, m, **kw),
           {"lower": np.array([0.9, 0.1]), "upper": np.array([0.95, 0.2]), "n": 100, "m": 10,
            "n_insert": 2, "n_delete": 1, "n_substitute": 1}, _bounds,
           aliases={"n_delete": ("n_delete", "n_substitute"), "n_substitute": ("n_delete", "n_substitute")}),
    Target("edit_bounds(poisson)", lambda lower, upper, n, **kw: circuits.edit_bounds(lower, upper, n, **kw),
           {"lower": np.array([0.9, 0.1]), "upper": np.array([0.95, 0.2]), "n": 100, "deletion_prob": 0.8,
            "n_insert": 3}, _bounds),
    Target("partition_radius", lambda votes_a, votes_b, idx_a, idx_b: circuits.partition_radius(
        votes_a, votes_b, idx_a, idx_b),
        {"votes_a": np.array([30, 12]), "votes_b": np.array([20, 12]), "idx_a": np.array([1, 0]),
         "idx_b": np.array([0, 1])}, _radii,
        aliases={"votes_a": ("votes_a", "votes_b"), "votes_b": ("votes_a", "votes_b"),
                 "idx_a": ("idx_a", "idx_b"), "idx_b": ("idx_a", "idx_b")}),
    Target("certify_circuit(ScoreRule)", lambda discover, **kw: circuits.certify_circuit(discover, **kw),
           {"discover": RULE, "subsample_size": 4, "n_subsamples": 30, "radius": 1, "confidence_level": 0.9,
            "threat": "edit", "rng": 0, "n_threads": 2}, _certificate,
           fuzzed=("subsample_size", "n_subsamples", "radius", "confidence_level", "threat", "rng",
                   "n_threads")),
    Target("certify_circuit(poisson)", lambda discover, X_concept, **kw: circuits.certify_circuit(
        discover, X_concept, **kw),
        {"discover": _discover, "X_concept": CONCEPT, "deletion_prob": 0.5, "n_subsamples": 20,
         "n_selection": 10, "confidence_level": 0.9, "threat": "deletion", "rng": 0, "progress": False},
        _certificate),
    Target("certify_circuit_partition", lambda discover, X_concept, **kw: circuits.certify_circuit_partition(
        discover, X_concept, **kw),
        {"discover": _discover, "X_concept": CONCEPT, "n_parts": 4, "radius": 1, "threat": "substitution"},
        _certificate),
    Target("certify_circuit_partition(part_of)", lambda discover, **kw: circuits.certify_circuit_partition(
        discover, **kw),
        {"discover": RULE, "n_parts": 3, "part_of": PARTS, "radius": 0}, _certificate,
        fuzzed=("n_parts", "part_of", "radius")),
    Target("example_parts", lambda X_concept, n_parts: circuits.example_parts(X_concept, n_parts),
           {"X_concept": CONCEPT, "n_parts": 4}, _parts),
    Target("robust_level(gaussian)",
           lambda confidence_level, **kw: stats.robust_level(confidence_level, **kw),
           {"confidence_level": 0.9, "radius": 0.1, "sigma": 0.25, "noise": "gaussian"}, _level),
]


# ------------------------------------------------------------------------------------------ mibp
XM = RNG.normal(size=(12, 2))
YM = np.where(XM[:, 0] > 0, 1, -1)
MIBP_MODEL = mibp.MLP.random([2, 3, 1], rng=0)
MIBP_RESULT = mibp.certified_training(
    MIBP_MODEL, XM, YM, perturbation=mibp.FeatureBox(0.01), loss="hinge", epochs=2
)
MIBP_CERT = mibp.certify_predictions(MIBP_RESULT, XM)
MIBP_SETS = mibp.FeatureBox(0.1).sets(XM)


def _boxes(result: Any) -> None:
    assert isinstance(result, mibp.CertifiedTrainingResult)
    for lo, hi in result.bounds:
        lo, hi = lo.to_vector(), hi.to_vector()
        assert np.all(np.isfinite(lo)) and np.all(lo <= hi) and np.all(np.isfinite(hi))


def _prediction_certificate(result: Any) -> None:
    assert result.certified.dtype == bool and result.certified.shape == result.prediction.shape
    assert np.all(result.certified == (result.margin_lower > 0))


def _mlp(result: Any) -> None:
    assert isinstance(result, mibp.MLP) and np.all(np.isfinite(result.to_vector()))


def _input_sets(result: Any) -> None:
    assert isinstance(result, mibp.InputSets) and np.all(result.lower <= result.upper)


def _dataset(result: Any) -> None:
    assert result.shape == XM.shape
    assert np.all(MIBP_SETS.lower <= result) and np.all(result <= MIBP_SETS.upper)


def _is_bool(result: Any) -> None:
    assert isinstance(result, bool)


def _train(X: Any, y: Any, *, epsilon: Any, **kw: Any) -> Any:
    return mibp.certified_training(MIBP_MODEL, X, y, perturbation=mibp.FeatureBox(epsilon), **kw)


MIBP_TARGETS = [
    Target("mibp.certified_training", _train,
           {"X": XM, "y": YM, "epsilon": 0.01, "loss": "hinge", "epochs": 2, "learning_rate": 0.1,
            "backend": "interval", "formulation": "decomposed", "tighten_bounds": False, "progress": False,
            "verbose": False, "executor": 1}, _boxes),
    Target("mibp.certify_predictions",
           lambda X_test, **kw: mibp.certify_predictions(MIBP_RESULT, X_test, **kw),
           {"X_test": XM, "backend": "interval", "epoch": -1, "progress": False, "verbose": False,
            "executor": 1},
           _prediction_certificate),
    Target("mibp.certified_accuracy", lambda y: MIBP_CERT.certified_accuracy(y), {"y": YM}, _fraction),
    Target("mibp.contains", lambda model, epoch: MIBP_RESULT.contains(model, epoch),
           {"model": MIBP_MODEL, "epoch": 0}, _is_bool, fuzzed=("epoch",)),
    Target("mibp.MLP.random", lambda sizes, rng: mibp.MLP.random(sizes, rng=rng),
           {"sizes": (2, 3, 1), "rng": 0}, _mlp, aliases={"sizes": ("sizes", "sizes[i]")}),
    Target("mibp.MLP.from_vector", mibp.MLP.from_vector,
           {"vector": MIBP_MODEL.to_vector(), "sizes": (2, 3, 1)}, _mlp,
           aliases={"sizes": ("sizes", "sizes[i]")}),
    Target("mibp.MLP.train", lambda X, y, **kw: MIBP_MODEL.train(X, y, **kw)[-1],
           {"X": XM, "y": YM, "loss": "hinge", "epochs": 2, "learning_rate": 0.1}, _mlp),
    Target("mibp.MLP.predict", lambda X: MIBP_MODEL.predict(X), {"X": XM},
           lambda out: np.testing.assert_array_equal(np.abs(out), 1)),
    Target("mibp.MLP", lambda weights, biases: mibp.MLP(weights, biases),
           {"weights": MIBP_MODEL.weights, "biases": MIBP_MODEL.biases}, _mlp,
           aliases={"weights": ("weights", "weights[0]"), "biases": ("biases", "biases[0]", "biases[1]")}),
    Target("mibp.FeatureBox", lambda epsilon, X: mibp.FeatureBox(epsilon).sets(X), {"epsilon": 0.1, "X": XM},
           _input_sets),
    Target("mibp.MissingValues", lambda mask, lower, upper: mibp.MissingValues(mask, lower, upper).sets(XM),
           {"mask": XM > 1.0, "lower": -2.0, "upper": 2.0}, _input_sets),
    Target("mibp.OrdinalShift", lambda features, shifts: mibp.OrdinalShift(features, shifts).sets(XM),
           {"features": np.array([1]), "shifts": np.array([-1, 0, 1])}, _input_sets),
    Target("mibp.Budget", lambda k: mibp.Budget(mibp.FeatureBox(0.1), k).sets(XM), {"k": 2}, _input_sets),
    Target("mibp.LabelFlips", lambda k: (mibp.FeatureBox(0.1) & mibp.LabelFlips(k)).sets(XM), {"k": 2},
           _input_sets),
    Target("mibp.InputSets.sample", lambda rng, vertex: MIBP_SETS.sample(rng, vertex=vertex),
           {"rng": 0, "vertex": False}, _dataset),
]
TARGETS += MIBP_TARGETS


# ------------------------------------------------------------ size caps of ope and performative (issue 23)
# Each target fuzzes only its size argument: huge values must be refused up front (a work or memory
# estimate), small ones give a valid result.
OPE_SIM = ope.StrategicSimulator()
OPE_PI0 = ope.LinearThresholdPolicy([1.0, 1.0], 1.0, temperature=1.0)
OPE_PI = ope.LinearThresholdPolicy([1.0, 0.0], 1.0, temperature=0.5)
OPE_DATA = OPE_SIM.sample(OPE_PI0, 300, rng=0)
OPE_RESPONSE = ope.LogNormalCostResponse().fit(OPE_DATA, policy=OPE_PI0)


def _ope_result(result: Any) -> None:
    assert np.isfinite(result.value) and np.isfinite(result.std_error) and result.n == OPE_DATA.n
    if result.bootstrap_estimates is not None:
        assert np.all(np.isfinite(result.bootstrap_estimates))


def _sensitivity(result: Any) -> None:
    assert np.all(np.isfinite(result.values)) and np.all(result.std_errors > 0)


def _logged(result: Any) -> None:
    assert isinstance(result, ope.StrategicData) and result.n >= 1


def _bound(result: Any) -> None:
    assert np.isfinite(result.total) and result.total >= 0


def _ope_target(name: str, strategic: bool) -> Target:
    fn = getattr(ope, name)
    extra = {"response": OPE_RESPONSE} if strategic else {}
    return Target(f"ope.{name}(bootstrap)",
                  lambda bootstrap: fn(OPE_DATA, target_policy=OPE_PI, logging_policy=OPE_PI0,
                                       bootstrap=bootstrap, rng=0, **extra),
                  {"bootstrap": 3}, _ope_result)


CAP_TARGETS = [
    *(_ope_target(name, strategic) for name, strategic in (
        ("strategic_dr", True), ("strategic_ipw", True), ("direct_method", True), ("naive_dr", False),
        ("naive_ipw", False))),
    Target("ope.sensitivity(n_points)",
           lambda n_points: ope.sensitivity(OPE_DATA, target_policy=OPE_PI, logging_policy=OPE_PI0,
                                            response=OPE_RESPONSE, n_points=n_points, rng=0),
           {"n_points": 3}, _sensitivity),
    Target("ope.StrategicSimulator.sample(n)", lambda n: OPE_SIM.sample(OPE_PI0, n, rng=0), {"n": 50},
           _logged),
    Target("ope.StrategicSimulator.sample_costs(n)", lambda n: OPE_SIM.sample_costs(n, rng=0)[0], {"n": 50},
           lambda x: np.testing.assert_array_equal(np.isfinite(x), True)),
    Target("performative.retraining_bound(n_rounds)",
           lambda n_rounds: performative.retraining_bound(
               n=100, share=0.1, diameter=1.0, loss_lipschitz=1.0, contraction=1.5, n_rounds=n_rounds,
               map_lipschitz=1.0, dimension=2.0),
           {"n_rounds": 3}, _bound),
]
TARGETS += CAP_TARGETS


@pytest.mark.parametrize("target", CAP_TARGETS, ids=lambda t: t.name)
@pytest.mark.parametrize("huge", HUGE_INTS)
def test_huge_sizes_are_refused_up_front(target: Target, huge: int) -> None:
    (arg,) = target.arguments()
    with pytest.raises(ValueError, match=rf"^{arg}={huge} is too large"):
        target.call(**{arg: huge})


@pytest.mark.parametrize(
    ("argv", "flag"),
    [(["ope", "--n", "10000000000"], "--n"),
     (["ope", "--n", "300", "--bootstrap", "1000000000"], "--bootstrap")],
)
def test_cli_huge_sizes_are_one_line_errors(capsys: Any, argv: list[str], flag: str) -> None:
    from certkit import cli

    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"certkit ope: error: {flag}=") and "is too large" in err and err.count("\n") == 1


def _names_argument(message: str, names: tuple[str, ...]) -> bool:
    return any(re.search(rf"(?<![A-Za-z0-9_]){re.escape(n)}(?![A-Za-z0-9_])", message) for n in names)


@pytest.mark.filterwarnings("ignore::UserWarning")  # e.g. "calibration set too small" at a fuzzed radius
@pytest.mark.parametrize("target", TARGETS + KERNEL_TARGETS, ids=lambda t: t.name)
@FUZZ
@given(data=st.data())
def test_bad_input_gives_a_valid_result_or_a_clear_error(target: Target, data: Any) -> None:
    arg = data.draw(st.sampled_from(target.arguments()), label="argument")
    bad = data.draw(st.sampled_from(bad_values(target.valid[arg])), label="value")
    kwargs = {**target.valid, arg: bad}
    try:
        result = target.call(**kwargs)
    except (ValueError, TypeError) as exc:
        names = target.aliases.get(arg, (arg,))
        assert _names_argument(str(exc), names), (
            f"{target.name}({arg}={bad!r}) raised {type(exc).__name__} without naming {arg}: {exc}"
        )
        return
    target.check(result)


@pytest.mark.parametrize("target", TARGETS + KERNEL_TARGETS, ids=lambda t: t.name)
def test_valid_arguments_give_a_valid_result(target: Target) -> None:
    target.check(target.call(**target.valid))


# ---------------------------------------------------------------------- size caps of causal (issue 23)
# The size arguments of certkit.causal: huge values are refused up front (a memory or work estimate, or a
# cap such as MAX_STARTS), every bad value of them gives a valid result or an error naming the argument.
from certkit import causal  # noqa: E402

CAUSAL_X = causal.make_mixture_sem(3, 60, rng=0)[0]


def _sem(result: Any) -> None:
    X, A, Z = result
    assert np.all(np.isfinite(X)) and X.shape[1] == A.shape[0] == A.shape[1] and Z.shape[0] == X.shape[0]
    assert set(np.unique(A)) <= {0, 1} and np.trace(A) == 0


def _mixture(result: Any) -> None:
    assert np.isfinite(result.loglik) and np.isclose(result.weights.sum(), 1.0) and result.n_iter >= 1


def _stability(result: Any) -> None:
    assert np.all((result.edge_frequency >= 0) & (result.edge_frequency <= 1))


CAUSAL_CAP_TARGETS = [
    Target("causal.make_mixture_sem", lambda n_nodes, n_samples, n_groups: causal.make_mixture_sem(
        n_nodes, n_samples, 0.5, n_groups, mixing_size=1, rng=0),
        {"n_nodes": 4, "n_samples": 30, "n_groups": 3}, _sem),
    Target("causal.fit_mixture_regression(n_init)", lambda n_init: causal.fit_mixture_regression(
        CAUSAL_X[:, 2], CAUSAL_X[:, :2], 2, n_init=n_init, rng=0), {"n_init": 2}, _mixture),
    Target("causal.edge_stability(n_bootstrap)", lambda n_bootstrap: causal.edge_stability(
        CAUSAL_X, n_bootstrap=n_bootstrap, estimator=causal.CausalMixtureModel(max_components=1), rng=0),
        {"n_bootstrap": 2}, _stability),
]


@pytest.mark.parametrize("target", CAUSAL_CAP_TARGETS, ids=lambda t: t.name)
@pytest.mark.parametrize("huge", HUGE_INTS)
def test_causal_huge_sizes_are_refused_up_front(target: Target, huge: int) -> None:
    for arg in target.arguments():
        with pytest.raises(ValueError, match=rf"^{arg}(={huge} is too large| must be <= \d+, got {huge})"):
            target.call(**{**target.valid, arg: huge})


@pytest.mark.parametrize(
    ("args", "arg"),
    [((10**5, 10), "n_nodes"), ((5, 10**10), "n_samples"), ((10**4, 2000), "n_nodes"),
     ((6, 100, 0.4, 10**6), "n_groups")],
)
def test_causal_generator_refuses_what_issue_23_found(args: tuple, arg: str) -> None:
    with pytest.raises(ValueError, match=rf"^{arg}(=\d+ is too large| must be <= )"):
        causal.make_mixture_sem(*args)


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize(
    ("target", "arg", "bad"),
    [(t, arg, bad) for t in CAUSAL_CAP_TARGETS for arg in t.arguments() for bad in bad_values(t.valid[arg])],
    ids=lambda v: v.name if isinstance(v, Target) else None,
)
def test_causal_bad_sizes_give_a_valid_result_or_a_clear_error(target: Target, arg: str, bad: Any) -> None:
    try:
        result = target.call(**{**target.valid, arg: bad})
    except (ValueError, TypeError) as exc:
        assert _names_argument(str(exc), (arg,)), f"{target.name}({arg}={bad!r}) did not name {arg}: {exc}"
        return
    target.check(result)


@pytest.mark.parametrize(("flag", "value"),
                         [("--stability", "1000000000"), ("--jobs", "0"), ("--jobs", "-1")])
def test_causal_cli_bad_sizes_are_one_line_errors(tmp_path: Any, capsys: Any, flag: str, value: str) -> None:
    from certkit import cli

    path = tmp_path / "x.csv"
    path.write_text("a,b\n" + "\n".join(f"{v:.6f},{2 * v + 1:.6f}" for v in np.linspace(0, 1, 20)) + "\n")
    assert cli.main(["causal", str(path), flag, value]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"certkit causal: error: {flag} must be ") and err.count("\n") == 1
