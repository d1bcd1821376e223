"""Empirical soundness: coverage / risk under the exact worst-case perturbation, over many calibration splits.

For a binary linear model the worst l2 perturbation of the THR event is known in closed form (move
along -w for the true class), and it attains the Neyman-Pearson bound, so RCP1 must keep coverage
>= 1 - alpha (within 3 standard errors over splits) while noisy CP without correction must fall below.
"""

from __future__ import annotations

import numpy as np
import pytest
from _conformal_models import BinaryLinear

from certkit.conformal import (
    BinCPClassifier,
    RCP1Classifier,
    RCP1Regressor,
    RCP1RiskControl,
    RSCPPlusClassifier,
    SplitConformalClassifier,
    SplitConformalRegressor,
    coverage,
    interval_coverage,
    set_size,
)

ALPHA = 0.1


def _coverage_over_splits(make, model, radius, n_splits, n_cal, n_test, seed, label_scale=1.5):
    rng = np.random.default_rng(seed)
    covs, sizes = [], []
    for _ in range(n_splits):
        Xc, yc = model.sample(n_cal, rng, label_scale)
        Xt, yt = model.sample(n_test, rng, label_scale)
        est = make(rng).calibrate(Xc, yc)
        Xa = model.worst_case(Xt, yt, radius)
        sets = est.predict_set(Xa)
        covs.append(coverage(sets, yt))
        sizes.append(set_size(sets))
    covs = np.asarray(covs)
    return covs.mean(), covs.std(ddof=1) / np.sqrt(n_splits), float(np.mean(sizes))


@pytest.mark.parametrize("radius", [0.1, 0.25, 0.5])
def test_rcp1_gaussian_l2_holds_and_noisy_cp_breaks(radius):
    sigma = 0.5
    model = BinaryLinear(np.array([1.0, -0.5, 0.25]), scale=2.0)
    mean, se, size = _coverage_over_splits(
        lambda rng: RCP1Classifier(model, sigma=sigma, radius=radius, confidence_level=1 - ALPHA, rng=rng),
        model, radius, n_splits=200, n_cal=400, n_test=1000, seed=1)
    assert mean >= 1 - ALPHA - 3 * se
    assert size < 2.0  # the sets are not trivially everything
    mean_u, se_u, _ = _coverage_over_splits(
        lambda rng: SplitConformalClassifier(model, confidence_level=1 - ALPHA, noise="gaussian", sigma=sigma,
                                             rng=rng),
        model, radius, n_splits=200, n_cal=400, n_test=1000, seed=1)
    assert mean_u < 1 - ALPHA - 3 * se_u
    assert mean_u < mean


def test_rcp1_uniform_l1_holds_and_noisy_cp_breaks():
    # w along the first axis: the worst l1 move is along e_1 and the uniform bound p - r/(2 lambda) is tight
    sigma, radius = 0.5, 0.1  # alpha' = 0.1 - 0.1 / (2 sqrt(3) 0.5) = 0.042
    model = BinaryLinear(np.array([1.0, 0.0, 0.0]), scale=2.0)
    mean, se, size = _coverage_over_splits(
        lambda rng: RCP1Classifier(model, sigma=sigma, radius=radius, noise="uniform", rng=rng),
        model, radius, n_splits=200, n_cal=400, n_test=1000, seed=2)
    assert mean >= 1 - ALPHA - 3 * se
    assert size < 2.0
    mean_u, se_u, _ = _coverage_over_splits(
        lambda rng: SplitConformalClassifier(model, noise="uniform", sigma=sigma, rng=rng),
        model, radius, n_splits=200, n_cal=400, n_test=1000, seed=2)
    assert mean_u < 1 - ALPHA - 3 * se_u


def test_rcp1_r0_matches_clean_noisy_coverage():
    # no attack, r = 0: noisy split CP coverage ~ 1 - floor(alpha (n+1))/(n+1) (exact for continuous scores)
    model = BinaryLinear(np.array([1.0, -0.5, 0.25]), scale=2.0)
    mean, se, _ = _coverage_over_splits(
        lambda rng: RCP1Classifier(model, sigma=0.5, radius=0.0, rng=rng),
        model, 0.0, n_splits=200, n_cal=399, n_test=1000, seed=3)
    expected = 1 - np.floor(ALPHA * 400) / 400
    assert abs(mean - expected) <= 3 * se


def test_rcp1_regressor_holds_and_noisy_cp_breaks():
    sigma, radius = 0.5, 0.5
    w = np.array([0.6, -0.8])

    def model(X):
        return X @ w

    def worst(X, y, r):
        # |w.(x + delta + eps) - y| is largest when w.delta pushes the residual outward
        sign = np.sign(X @ w - y)
        return X + r * sign[:, None] * w[None, :] / np.linalg.norm(w)

    rng = np.random.default_rng(4)

    def run(make):
        covs = []
        for _ in range(200):
            Xc = rng.normal(size=(300, 2))
            yc = Xc @ w + 0.5 * rng.normal(size=300)
            Xt = rng.normal(size=(1000, 2))
            yt = Xt @ w + 0.5 * rng.normal(size=1000)
            est = make().calibrate(Xc, yc)
            lo, hi = est.predict_interval(worst(Xt, yt, radius))
            covs.append(interval_coverage(lo, hi, yt))
        covs = np.asarray(covs)
        return covs.mean(), covs.std(ddof=1) / np.sqrt(len(covs))

    mean, se = run(lambda: RCP1Regressor(model, sigma=sigma, radius=radius, rng=rng))
    assert mean >= 1 - ALPHA - 3 * se
    mean_u, se_u = run(lambda: SplitConformalRegressor(model, noise="gaussian", sigma=sigma, rng=rng))
    assert mean_u < 1 - ALPHA - 3 * se_u


@pytest.mark.parametrize("bound", [1.0, 2.0])
def test_rcp1_risk_control_holds_and_uncorrected_breaks(bound):
    # loss = B * 1{y not in {k : p_k >= 1 - lam}}, non-increasing in lam; worst case: move along -w for y
    sigma, radius = 0.5, 0.5
    model = BinaryLinear(np.array([1.0, -0.5, 0.25]), scale=2.0)

    def loss(pred, target, lam):
        return bound * (pred[np.arange(pred.shape[0]), target] < 1.0 - lam).astype(float)

    lambdas = np.linspace(0.0, 1.0, 201)
    rng = np.random.default_rng(5)

    def run(r_cal):
        risks = []
        for _ in range(150):
            Xc, yc = model.sample(400, rng)
            Xt, yt = model.sample(1000, rng)
            crc = RCP1RiskControl(model, loss=loss, lambdas=lambdas, bound=bound, sigma=sigma, radius=r_cal,
                                  confidence_level=1 - ALPHA, rng=rng).calibrate(Xc, yc)
            risks.append(crc.risk(model.worst_case(Xt, yt, radius), yt))
        risks = np.asarray(risks)
        return risks.mean(), risks.std(ddof=1) / np.sqrt(len(risks))

    mean, se = run(radius)
    assert mean <= ALPHA + 3 * se
    mean_u, se_u = run(0.0)  # radius 0 = noisy CRC without correction
    assert mean_u > ALPHA + 3 * se_u


@pytest.mark.slow
@pytest.mark.parametrize("method", ["bincp", "rscp+", "rscp+bernstein"])
def test_multi_sample_baselines_hold_under_worst_case(method):
    sigma, radius = 0.5, 0.25
    model = BinaryLinear(np.array([1.0, -0.5, 0.25]), scale=3.0)

    def make(rng):
        if method == "bincp":
            return BinCPClassifier(model, sigma=sigma, radius=radius, n_samples=64, rng=rng)
        bound = "bernstein" if method.endswith("bernstein") else "hoeffding"
        return RSCPPlusClassifier(model, sigma=sigma, radius=radius, n_samples=256, mc_bound=bound, rng=rng)

    mean, se, size = _coverage_over_splits(make, model, radius, n_splits=40, n_cal=300, n_test=500, seed=6,
                                           label_scale=10.0)
    assert mean >= 1 - ALPHA - 3 * se
    assert size < 2.0


@pytest.mark.slow
def test_three_class_linear_under_smoothed_pgd():
    # the spec's reference setting: 3 classes, linear model, sigma = 0.5, alpha = 0.1, attacked by EOT-PGD
    torch = pytest.importorskip("torch")
    from certkit.conformal.attacks import smoothed_pgd

    sigma, radius = 0.5, 0.5
    rng = np.random.default_rng(7)
    W = rng.normal(size=(3, 4))
    net = torch.nn.Linear(4, 3, bias=False).double()
    with torch.no_grad():
        net.weight.copy_(torch.as_tensor(1.5 * W))

    def sample(n):
        X = rng.normal(size=(n, 4))
        logits = 1.5 * X @ W.T
        p = np.exp(logits - logits.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        return X, (rng.uniform(size=(n, 1)) > np.cumsum(p, axis=1)).sum(axis=1)

    covs, covs_u = [], []
    for _ in range(40):
        Xc, yc = sample(400)
        Xt, yt = sample(500)
        Xa = smoothed_pgd(net, Xt, yt, radius, sigma, steps=10, n_noise=8, output="logits", rng=rng)
        rcp = RCP1Classifier(net, output="logits", sigma=sigma, radius=radius, rng=rng).calibrate(Xc, yc)
        cp = SplitConformalClassifier(net, output="logits", noise="gaussian", sigma=sigma, rng=rng)
        cp.calibrate(Xc, yc)
        covs.append(coverage(rcp.predict_set(Xa), yt))
        covs_u.append(coverage(cp.predict_set(Xa), yt))
    se = np.std(covs, ddof=1) / np.sqrt(len(covs))
    se_u = np.std(covs_u, ddof=1) / np.sqrt(len(covs_u))
    assert np.mean(covs) >= 1 - ALPHA - 3 * se
    assert np.mean(covs_u) < 1 - ALPHA - 3 * se_u
