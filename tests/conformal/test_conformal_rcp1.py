"""Exact oracles for split CP and RCP1: thresholds, levels, r = 0 identity, monotonicity, trivial regime."""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest
from _conformal_models import BinaryLinear
from scipy.stats import norm

from certkit.conformal import (
    APSScore,
    RCP1Classifier,
    RCP1Regressor,
    RCP1RiskControl,
    SplitConformalClassifier,
    SplitConformalRegressor,
)

MODEL = BinaryLinear(np.array([1.0, -0.5, 0.25]), scale=2.0)


def _data(n, seed=0):
    return MODEL.sample(n, np.random.default_rng(seed))


def test_adjusted_level_value_gaussian():
    X, y = _data(300)
    clf = RCP1Classifier(MODEL, sigma=0.25, radius=0.12, confidence_level=0.9, rng=0).calibrate(X, y)
    assert clf.adjusted_level_ == pytest.approx(0.960927, abs=5e-7)
    assert clf.adjusted_level_ == pytest.approx(norm.cdf(norm.ppf(0.9) + 0.12 / 0.25), rel=1e-12)


def test_adjusted_level_value_uniform():
    X, y = _data(300)
    clf = RCP1Classifier(MODEL, sigma=0.5, radius=0.1, noise="uniform", rng=0).calibrate(X, y)
    assert clf.adjusted_level_ == pytest.approx(0.9 + 0.1 / (2 * 0.5 * math.sqrt(3)), rel=1e-12)


@pytest.mark.parametrize("noise", ["gaussian", "uniform"])
def test_one_noise_draw_per_point_and_floor_rank(noise):
    # Reproduce the calibration noise from the same seed and check S_i and the rank floor(alpha'(n+1)).
    n, sigma, radius = 250, 0.4, 0.1
    X, y = _data(n, seed=1)
    clf = RCP1Classifier(MODEL, sigma=sigma, radius=radius, noise=noise, rng=123).calibrate(X, y)
    rng = np.random.default_rng(123)
    if noise == "gaussian":
        eps = rng.standard_normal(X.shape) * sigma
    else:
        eps = rng.uniform(-sigma * math.sqrt(3), sigma * math.sqrt(3), size=X.shape)
    scores = MODEL(X + eps)[np.arange(n), y]
    np.testing.assert_allclose(clf.calibration_scores_, scores, rtol=0, atol=0)
    alpha_adj = 1 - clf.adjusted_level_
    k = math.floor(alpha_adj * (n + 1))
    assert k >= 1
    assert clf.threshold_ == np.sort(scores)[k - 1]
    # the test uses fresh noise from the continuing stream, never the calibration draws
    X_test = X[:50]
    eps_test = (rng.standard_normal(X_test.shape) * sigma if noise == "gaussian"
                else rng.uniform(-sigma * math.sqrt(3), sigma * math.sqrt(3), size=X_test.shape))
    np.testing.assert_array_equal(clf.predict_set(X_test), MODEL(X_test + eps_test) >= clf.threshold_)


def test_split_cp_rank_hand_example():
    # 9 scores, alpha = 0.1: floor(0.1 * 10) = 1 -> the smallest score; alpha = 0.3 -> the 3rd smallest
    probs = np.array([0.95, 0.9, 0.85, 0.8, 0.75, 0.7, 0.65, 0.6, 0.55])
    X = probs[:, None]

    def model(X):
        return np.column_stack([X[:, 0], 1 - X[:, 0]])

    y = np.zeros(9, dtype=int)
    assert SplitConformalClassifier(model, confidence_level=0.9).calibrate(X, y).threshold_ == 0.55
    assert SplitConformalClassifier(model, confidence_level=0.7).calibrate(X, y).threshold_ == 0.65
    with pytest.warns(UserWarning, match="need n >= 19"):
        cp = SplitConformalClassifier(model, confidence_level=0.95).calibrate(X, y)
    assert cp.threshold_ == -math.inf
    assert cp.predict_set(X).all()


@pytest.mark.parametrize("score", ["thr", "aps", "raps"])
def test_r0_identical_to_noisy_split_cp(score):
    X, y = _data(400, seed=2)
    Xt, _ = _data(300, seed=3)
    rcp = RCP1Classifier(MODEL, conformity_score=score, sigma=0.3, radius=0.0, rng=7).calibrate(X, y)
    cp = SplitConformalClassifier(MODEL, conformity_score=score, noise="gaussian", sigma=0.3,
                                  rng=7).calibrate(X, y)
    assert rcp.adjusted_level_ == cp.adjusted_level_ == 0.9
    assert rcp.threshold_ == cp.threshold_
    np.testing.assert_array_equal(rcp.calibration_scores_, cp.calibration_scores_)
    np.testing.assert_array_equal(rcp.predict_set(Xt), cp.predict_set(Xt))


def test_r0_regressor_identical_to_noisy_split():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(300, 2))
    y = X[:, 0] + rng.normal(size=300)

    def model(X):
        return X[:, 0]

    a = RCP1Regressor(model, sigma=0.3, radius=0.0, rng=1).calibrate(X, y)
    b = SplitConformalRegressor(model, noise="gaussian", sigma=0.3, rng=1).calibrate(X, y)
    assert a.threshold_ == b.threshold_
    for u, v in zip(a.predict_interval(X[:20]), b.predict_interval(X[:20])):
        np.testing.assert_array_equal(u, v)


def test_regressor_rank_is_ceil():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(99, 1))
    y = rng.normal(size=99)

    def model(X):
        return np.zeros(X.shape[0])

    reg = RCP1Regressor(model, sigma=0.5, radius=0.2, rng=0).calibrate(X, y)
    level = norm.cdf(norm.ppf(0.9) + 0.2 / 0.5)
    k = math.ceil(level * 100)
    assert reg.threshold_ == np.sort(np.abs(y))[k - 1]
    lo, hi = reg.predict_interval(X[:5])
    np.testing.assert_allclose(hi - lo, 2 * reg.threshold_)


def test_monotone_in_radius_and_sigma():
    X, y = _data(2000, seed=6)
    Xt, _ = _data(200, seed=7)
    levels, thresholds, sets = [], [], []
    for r in [0.0, 0.05, 0.1, 0.2, 0.3]:
        clf = RCP1Classifier(MODEL, sigma=0.25, radius=r, rng=11).calibrate(X, y)
        levels.append(clf.adjusted_level_)
        thresholds.append(clf.threshold_)
        sets.append(clf.predict_set(Xt))  # same seed -> same noise: nested sets
    assert np.all(np.diff(levels) > 0)
    assert np.all(np.diff(thresholds) <= 0)
    for small, big in itertools.pairwise(sets):
        assert np.all(big >= small)
    by_sigma = [RCP1Classifier(MODEL, sigma=s, radius=0.1, rng=0).calibrate(X, y).adjusted_level_
                for s in [0.1, 0.2, 0.4, 0.8]]
    assert np.all(np.diff(by_sigma) < 0)


def test_trivial_regime_warns_with_needed_size():
    # alpha = 0.1, sigma = 0.25, r = 0.5 -> n >= 1937
    X, y = _data(1937, seed=8)
    with pytest.warns(UserWarning, match="need n >= 1937"):
        clf = RCP1Classifier(MODEL, sigma=0.25, radius=0.5, rng=0).calibrate(X[:1936], y[:1936])
    assert clf.required_calibration_size_ == 1937
    assert clf.threshold_ == -math.inf
    assert clf.predict_set(X[:10]).all()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        clf = RCP1Classifier(MODEL, sigma=0.25, radius=0.5, rng=0).calibrate(X, y)
    assert np.isfinite(clf.threshold_)
    assert clf.threshold_ == np.min(clf.calibration_scores_)  # floor(alpha'(n+1)) = 1


def test_trivial_regime_regression_and_impossible_uniform():
    X, y = _data(50, seed=9)
    with pytest.warns(UserWarning, match="need n >= "):
        reg = RCP1Regressor(lambda X: X[:, 0], sigma=0.25, radius=0.5, rng=0).calibrate(X, y.astype(float))
    lo, hi = reg.predict_interval(X)
    assert np.all(np.isinf(lo)) and np.all(np.isinf(hi))
    with pytest.warns(UserWarning, match="no calibration set is large enough"):
        clf = RCP1Classifier(MODEL, sigma=0.25, radius=1.0, noise="uniform", rng=0).calibrate(X, y)
    assert clf.required_calibration_size_ is None


def test_fresh_noise_each_call_and_deterministic_given_seed():
    X, y = _data(300, seed=10)
    clf = RCP1Classifier(MODEL, conformity_score=APSScore(), sigma=0.5, radius=0.1, rng=3).calibrate(X, y)
    a, b = clf.conformity_scores(X), clf.conformity_scores(X)
    assert not np.array_equal(a, b)
    clf2 = RCP1Classifier(MODEL, conformity_score=APSScore(), sigma=0.5, radius=0.1, rng=3).calibrate(X, y)
    np.testing.assert_array_equal(clf2.conformity_scores(X), a)


def test_sklearn_parameters():
    clf = RCP1Classifier(MODEL, sigma=0.25, radius=0.1, confidence_level=0.95)
    params = clf.get_params()
    assert params["sigma"] == 0.25 and params["radius"] == 0.1 and params["confidence_level"] == 0.95
    assert not hasattr(clf, "threshold_")
    X, y = _data(100)
    assert clf.calibrate(X, y) is clf
    assert clf.n_calibration_ == 100 and clf.n_classes_ == 2


@pytest.mark.parametrize(("noise", "bound"), [("gaussian", 1.0), ("gaussian", 2.0), ("uniform", 1.0)])
def test_risk_control_hand_computation(noise, bound):
    """alpha' = B c_up^{-1}[alpha/B, r] and lambda_hat = inf{lam : n/(n+1) R(lam) + B/(n+1) <= alpha'},
    recomputed from the same noise draws with SciPy."""
    n, sigma, radius = 300, 0.5, 0.1
    X, y = _data(n, seed=12)
    lambdas = np.linspace(0.0, 1.0, 101)

    def loss(pred, target, lam):
        return bound * (pred[np.arange(pred.shape[0]), target] < 1.0 - lam)

    crc = RCP1RiskControl(MODEL, loss=loss, lambdas=lambdas[::-1], bound=bound, sigma=sigma, radius=radius,
                          confidence_level=0.8, noise=noise, rng=21).calibrate(X, y)
    alpha = 1 - 0.8
    if noise == "gaussian":
        alpha_adj = bound * norm.cdf(norm.ppf(alpha / bound) - radius / sigma)
        eps = np.random.default_rng(21).standard_normal(X.shape) * sigma
    else:
        alpha_adj = bound * (alpha / bound - radius / (2 * sigma * math.sqrt(3)))
        half = sigma * math.sqrt(3)
        eps = np.random.default_rng(21).uniform(-half, half, size=X.shape)
    assert crc.adjusted_risk_ <= alpha_adj
    assert crc.adjusted_risk_ == pytest.approx(alpha_adj, rel=1e-12)
    p_true = MODEL(X + eps)[np.arange(n), y]
    risks = np.array([bound * np.mean(p_true < 1.0 - lam) for lam in lambdas])
    np.testing.assert_allclose(crc.risks_, risks, rtol=0, atol=1e-15)
    ok = n / (n + 1) * risks + bound / (n + 1) <= alpha_adj
    assert ok.any() and not ok.all()
    assert crc.lambda_ == lambdas[np.flatnonzero(ok)[0]]
