"""Exact oracles for BinCP and RSCP+: every quantity recomputed from the same noise draws with SciPy."""

from __future__ import annotations

import math

import numpy as np
import pytest
from _conformal_models import BinaryLinear
from scipy.stats import beta, norm

from certkit.conformal import BinCPClassifier, RSCPPlusClassifier

MODEL = BinaryLinear(np.array([1.0, -0.5, 0.25]), scale=2.0)
N, M, SIGMA, RADIUS, ETA = 120, 20, 0.4, 0.1, 0.01


def _noisy_true_scores(rng, X, y, m):
    Xr = np.repeat(X, m, axis=0)
    probs = MODEL(Xr + rng.standard_normal(Xr.shape) * SIGMA)
    return probs.reshape(X.shape[0], m, 2), probs


def test_bincp_matches_hand_computation():
    X, y = MODEL.sample(N, np.random.default_rng(0))
    Xt, _ = MODEL.sample(30, np.random.default_rng(1))
    clf = BinCPClassifier(MODEL, sigma=SIGMA, radius=RADIUS, n_samples=M, base_probability=0.8,
                          error_rate=ETA, batch_size=10**6, rng=9).calibrate(X, y)
    rng = np.random.default_rng(9)
    scores, _ = _noisy_true_scores(rng, X, y, M)
    true = scores[np.arange(N), :, y]
    k = 16  # ceil(0.8 * 20)
    lam = np.sort(true, axis=1)[:, M - k]
    np.testing.assert_array_equal(clf.calibration_scores_, lam)
    rank = math.floor((0.1 - ETA) * (N + 1))
    assert clf.threshold_ == np.sort(lam)[rank - 1]
    p_low = beta.ppf(ETA / 2, k, M - k + 1)
    assert clf.base_probability_lower_ == pytest.approx(p_low, rel=1e-9)
    rho = norm.cdf(norm.ppf(p_low) - RADIUS / SIGMA)
    assert clf.test_level_ == pytest.approx(rho, rel=1e-9)
    test_scores, _ = _noisy_true_scores(rng, Xt, None, M)
    counts = (test_scores >= clf.threshold_).sum(axis=1)
    upper = np.where(counts < M, beta.ppf(1 - ETA / 2, counts + 1, M - counts), 1.0)
    np.testing.assert_array_equal(clf.predict_set(Xt), upper >= rho)


@pytest.mark.parametrize("mc_bound", ["hoeffding", "bernstein"])
def test_rscp_plus_matches_hand_computation(mc_bound):
    M = 200  # enough samples for a non-degenerate Hoeffding correction
    X, y = MODEL.sample(N, np.random.default_rng(2), label_scale=10.0)
    Xt, _ = MODEL.sample(30, np.random.default_rng(3))
    clf = RSCPPlusClassifier(MODEL, sigma=SIGMA, radius=RADIUS, n_samples=M, error_rate=ETA / 2,
                             mc_bound=mc_bound, batch_size=10**6, rng=4).calibrate(X, y)
    rng = np.random.default_rng(4)
    scores, _ = _noisy_true_scores(rng, X, y, M)
    means = scores[np.arange(N), :, y].mean(axis=1)
    np.testing.assert_allclose(clf.calibration_scores_, means, rtol=1e-15)
    rank = math.floor((0.1 - ETA) * (N + 1))
    assert clf.threshold_ == np.sort(means)[rank - 1]
    b_h = math.sqrt(math.log(2 / ETA) / (2 * M))
    assert clf.threshold_ - b_h > 0
    rho = norm.cdf(norm.ppf(clf.threshold_ - b_h) - RADIUS / SIGMA)
    assert clf.test_level_ == pytest.approx(rho, rel=1e-9)
    test_scores, _ = _noisy_true_scores(rng, Xt, None, M)
    mean = test_scores.mean(axis=1)
    if mc_bound == "hoeffding":
        upper = np.minimum(mean + b_h, 1.0)
    else:
        t = math.log(2 / (ETA / 2))
        var = test_scores.var(axis=1, ddof=1)
        upper = np.minimum(mean + np.sqrt(2 * var * t / M) + 7 * t / (3 * (M - 1)), 1.0)
    np.testing.assert_array_equal(clf.predict_set(Xt), upper >= rho)


def test_baselines_trivial_regime_warns():
    X, y = MODEL.sample(5, np.random.default_rng(5))
    with pytest.warns(UserWarning, match="need n >= "):
        clf = BinCPClassifier(MODEL, sigma=SIGMA, radius=RADIUS, n_samples=8, rng=0).calibrate(X, y)
    assert clf.predict_set(X).all()
    with pytest.warns(UserWarning, match="need n >= "):
        clf = RSCPPlusClassifier(MODEL, sigma=SIGMA, radius=RADIUS, n_samples=8, rng=0).calibrate(X, y)
    assert clf.test_level_ == 0.0 and clf.predict_set(X).all()
