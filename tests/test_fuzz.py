"""Fuzz of the public API with bad inputs (issue 14).

Every target is a public call with a valid set of arguments.  Hypothesis replaces one argument by a
value derived from its valid one — NaN/inf entries, empty, 0-d and 3-d arrays, one row too few, complex,
boolean, string and object dtypes, lists, dicts, None, huge, negative and fractional sizes, bad levels and
unknown options — and the call must either return a valid result (checked per target) or raise
``ValueError``/``TypeError`` whose message names the replaced argument.  Nothing may hang, allocate
gigabytes or fail with another exception.  Examples are bounded and derandomised so the file runs in well
under a minute.
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

from certkit import conformal, mibp, stats
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
                      {"model": linear_probabilities, "score": "aps", "confidence_level": 0.8,
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


# ------------------------------------------------------------------------------------------ mibp
XM = RNG.normal(size=(12, 2))
YM = np.where(XM[:, 0] > 0, 1, -1)
MIBP_MODEL = mibp.MLP.random([2, 3, 1], rng=0)
MIBP_RESULT = mibp.certified_training(MIBP_MODEL, XM, YM, perturbation=mibp.FeatureBox(0.01), epochs=2)
MIBP_CERT = mibp.certify_predictions(MIBP_RESULT, XM)
MIBP_SETS = mibp.FeatureBox(0.1).sets(XM)


def _boxes(result: Any) -> None:
    assert isinstance(result, mibp.CertifiedTrainingResult)
    for lo, hi in result.bounds:
        lo, hi = lo.to_vector(), hi.to_vector()
        assert np.all(np.isfinite(lo)) and np.all(lo <= hi) and np.all(np.isfinite(hi))


def _certificate(result: Any) -> None:
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
           _certificate),
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


def _names_argument(message: str, names: tuple[str, ...]) -> bool:
    return any(re.search(rf"(?<![A-Za-z0-9_]){re.escape(n)}(?![A-Za-z0-9_])", message) for n in names)


@pytest.mark.filterwarnings("ignore::UserWarning")  # e.g. "calibration set too small" at a fuzzed radius
@pytest.mark.parametrize("target", TARGETS, ids=lambda t: t.name)
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


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: t.name)
def test_valid_arguments_give_a_valid_result(target: Target) -> None:
    target.check(target.call(**target.valid))
