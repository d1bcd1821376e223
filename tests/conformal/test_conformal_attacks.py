"""smoothed_pgd: finds the known worst-case direction of a linear model and respects its constraints."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from certkit.conformal import RCP1Classifier, SplitConformalClassifier, coverage
from certkit.conformal.attacks import smoothed_pgd

W = np.array([1.0, -2.0, 0.5])


def _linear_net():
    net = torch.nn.Linear(3, 2)
    with torch.no_grad():
        net.weight.copy_(torch.tensor(np.stack([np.zeros(3), 2 * W]), dtype=torch.float32))
        net.bias.zero_()
    return net


def test_attack_moves_along_minus_w_and_stays_in_ball():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(64, 3))
    y = (X @ W > 0).astype(int)
    net = _linear_net()
    Xa = smoothed_pgd(net, X, y, 0.5, 0.25, steps=10, n_noise=8, output="logits", rng=0)
    delta = Xa - X
    norms = np.linalg.norm(delta, axis=1)
    assert np.all(norms <= 0.5 * (1 + 1e-12))
    assert np.all(norms >= 0.45)
    worst = -(2 * y - 1)[:, None] * W[None, :] / np.linalg.norm(W)
    cosine = (delta * worst).sum(axis=1) / norms
    assert np.all(cosine > 0.99)
    assert all(p.grad is None for p in net.parameters())


def test_attack_breaks_noisy_cp_but_not_rcp1_on_average():
    # Gaussian linear model: the attack attains the worst case, so only the corrected method keeps coverage.
    rng = np.random.default_rng(1)
    net = _linear_net()
    X = rng.normal(size=(4000, 3))
    y = (rng.uniform(size=4000) < 1 / (1 + np.exp(-1.5 * X @ W))).astype(int)
    cal, test = slice(0, 3000), slice(3000, 4000)
    Xa = smoothed_pgd(net, X[test], y[test], 0.25, 0.5, steps=10, n_noise=8, output="logits", rng=1)
    rcp = RCP1Classifier(net, output="logits", sigma=0.5, radius=0.25, rng=2).calibrate(X[cal], y[cal])
    cp = SplitConformalClassifier(net, output="logits", noise="gaussian", sigma=0.5, rng=2)
    cp.calibrate(X[cal], y[cal])
    se = np.sqrt(0.09 / 1000)
    assert coverage(rcp.predict_set(Xa), y[test]) >= 0.9 - 3 * se
    assert coverage(cp.predict_set(Xa), y[test]) < 0.9 - 3 * se


def test_attack_radius_zero_clip_and_errors():
    X = np.random.default_rng(2).uniform(size=(10, 3))
    y = np.zeros(10, dtype=int)
    net = _linear_net()
    np.testing.assert_array_equal(smoothed_pgd(net, X, y, 0.0, 0.25), X)
    Xa = smoothed_pgd(net, X, y, 2.0, 0.25, steps=5, n_noise=2, output="logits", clip=(0.0, 1.0), rng=0)
    assert Xa.min() >= 0.0 and Xa.max() <= 1.0
    with pytest.raises(ValueError, match="radius"):
        smoothed_pgd(net, X, y, -1.0, 0.25)
    with pytest.raises(ValueError, match="sigma"):
        smoothed_pgd(net, X, y, 0.1, 0.0)
    with pytest.raises(ValueError, match="steps"):
        smoothed_pgd(net, X, y, 0.1, 0.1, steps=0)
    with pytest.raises(ValueError, match="clip"):
        smoothed_pgd(net, X, y, 0.1, 0.1, clip=(1.0, 0.0))
    with pytest.raises(ValueError, match="inconsistent"):
        smoothed_pgd(net, X, y[:3], 0.1, 0.1)


def test_output_auto_detects_logits_and_probabilities():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(16, 3))
    y = (X @ W > 0).astype(int)
    net = _linear_net()
    prob_net = torch.nn.Sequential(_linear_net(), torch.nn.Softmax(dim=1))
    a = smoothed_pgd(net, X, y, 0.3, 0.2, steps=5, n_noise=4, rng=0)
    b = smoothed_pgd(net, X, y, 0.3, 0.2, steps=5, n_noise=4, output="logits", rng=0)
    c = smoothed_pgd(prob_net, X, y, 0.3, 0.2, steps=5, n_noise=4, rng=0)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(a, c, atol=1e-5)
    with pytest.raises(ValueError, match="output"):
        smoothed_pgd(net, X, y, 0.3, 0.2, output="scores")
