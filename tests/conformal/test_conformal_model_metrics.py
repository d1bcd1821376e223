"""Model wrapper (numpy and torch), metrics, and bad inputs at every public entry point."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _conformal_models import LINEAR_MODEL as MODEL
from _conformal_models import linear_data
from sklearn.exceptions import NotFittedError

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
    interval_width,
    set_size,
)
from certkit.conformal._model import ModelWrapper


def _torch_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(2, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))


def test_wrapper_batches_numpy_and_counts_passes():
    calls = []

    def f(X):
        calls.append(X.shape[0])
        return X.sum(axis=1)

    w = ModelWrapper(f, batch_size=7)
    out = w(np.ones((20, 3)))
    assert calls == [7, 7, 6] and w.n_forward == 20
    np.testing.assert_array_equal(out, 3 * np.ones(20))


def test_torch_module_no_grad_eval_and_training_flag_restored():
    net = _torch_model()
    net.train()
    X, y = linear_data(200)
    y = y + (np.arange(len(y)) % 3 == 0)  # use all three classes
    clf = RCP1Classifier(net, output="logits", sigma=0.1, radius=0.05, rng=0, batch_size=16)
    clf.calibrate(torch.as_tensor(X, dtype=torch.float32), torch.as_tensor(y))
    assert net.training
    assert all(p.grad is None for p in net.parameters())
    sets = clf.predict_set(torch.as_tensor(X))
    assert sets.shape == (200, 3) and sets.dtype == bool
    with torch.no_grad():
        ref = torch.softmax(net(torch.as_tensor(X, dtype=torch.float32)), 1).double().numpy()
    clean = SplitConformalClassifier(net, output="logits", rng=0).calibrate(X, y)
    np.testing.assert_allclose(clean.calibration_scores_, ref[np.arange(200), y], rtol=1e-6)


def test_metrics_hand_values():
    sets = np.array([[True, False, True], [False, False, True], [True, True, True]])
    assert coverage(sets, [0, 0, 1]) == pytest.approx(2 / 3)
    assert set_size(sets) == pytest.approx(2.0)
    assert interval_width([0.0, 1.0], [2.0, 2.0]) == 1.5
    assert interval_coverage([0.0, 1.0], [2.0, 2.0], [1.0, 3.0]) == 0.5
    assert interval_width([-np.inf], [np.inf]) == np.inf
    with pytest.raises(ValueError, match="labels"):
        coverage(sets, [0, 3, 1])
    with pytest.raises(ValueError, match="inconsistent"):
        coverage(sets, [0, 1])
    with pytest.raises(TypeError, match="boolean"):
        set_size(np.ones((2, 2)))
    with pytest.raises(ValueError, match="lower <= upper"):
        interval_width([1.0], [0.0])


CLASSIFIERS = [
    lambda **kw: SplitConformalClassifier(MODEL, **kw),
    lambda **kw: RCP1Classifier(MODEL, sigma=kw.pop("sigma", 0.25), radius=kw.pop("radius", 0.1), **kw),
    lambda **kw: BinCPClassifier(MODEL, sigma=kw.pop("sigma", 0.25), radius=kw.pop("radius", 0.1),
                                 n_samples=8, **kw),
    lambda **kw: RSCPPlusClassifier(MODEL, sigma=kw.pop("sigma", 0.25), radius=kw.pop("radius", 0.1),
                                    n_samples=8, **kw),
]


@pytest.mark.parametrize("make", CLASSIFIERS)
def test_classifier_bad_inputs(make):
    X, y = linear_data(200)
    with pytest.raises(NotFittedError):
        make().predict_set(X)
    for level in [0.0, 1.0, 1.5, -0.1]:
        with pytest.raises(ValueError, match="confidence_level"):
            make(confidence_level=level).calibrate(X, y)
    with pytest.raises(ValueError, match=r"y must contain class labels in \[0, 1\]"):
        make().calibrate(X, y + 1)
    with pytest.raises(ValueError, match="y must contain class labels"):
        make().calibrate(X, y - 1)
    with pytest.raises(ValueError, match="finite"):
        make().calibrate(np.where(X > 1, np.nan, X), y)
    with pytest.raises(ValueError, match="inconsistent"):
        make().calibrate(X, y[:-1])
    with pytest.raises(ValueError, match="shape"):
        make().calibrate(X[:, 0], y)
    with pytest.raises(TypeError, match="integers"):
        make().calibrate(X, y + 0.5)
    with pytest.raises(ValueError, match="rows summing to 1"):
        SplitConformalClassifier(lambda X: 0.7 * MODEL(X)).calibrate(X, y)
    with pytest.raises(ValueError, match="output"):
        make(output="scores").calibrate(X, y)


@pytest.mark.parametrize("make", CLASSIFIERS[1:])
def test_smoothing_parameter_errors(make):
    X, y = linear_data(200)
    with pytest.raises(ValueError, match="radius"):
        make(radius=-0.1).calibrate(X, y)
    for sigma in [0.0, -1.0]:
        with pytest.raises(ValueError, match="sigma"):
            make(sigma=sigma).calibrate(X, y)
    with pytest.raises(ValueError, match="noise"):
        make(noise="laplace").calibrate(X, y)
    with pytest.raises(TypeError, match="noise"):
        make(noise=None).calibrate(X, y)


def test_split_noise_needs_sigma_and_multi_sample_options():
    X, y = linear_data(200)
    with pytest.raises(TypeError, match="sigma"):
        SplitConformalClassifier(MODEL, noise="gaussian").calibrate(X, y)
    with pytest.raises(ValueError, match="error_rate"):
        BinCPClassifier(MODEL, sigma=0.2, radius=0.1, error_rate=0.2).calibrate(X, y)
    with pytest.raises(ValueError, match="error_rate"):
        RSCPPlusClassifier(MODEL, sigma=0.2, radius=0.1, error_rate=0.06).calibrate(X, y)
    with pytest.raises(ValueError, match="n_samples"):
        BinCPClassifier(MODEL, sigma=0.2, radius=0.1, n_samples=1).calibrate(X, y)
    with pytest.raises(ValueError, match="base_probability"):
        BinCPClassifier(MODEL, sigma=0.2, radius=0.1, base_probability=1.0).calibrate(X, y)
    with pytest.raises(ValueError, match="RSCP"):
        RSCPPlusClassifier(MODEL, conformity_score="raps", sigma=0.2, radius=0.1).calibrate(X, y)
    with pytest.raises(ValueError, match="mc_bound"):
        RSCPPlusClassifier(MODEL, sigma=0.2, radius=0.1, mc_bound="chernoff").calibrate(X, y)
    n_classes = [2]
    clf = SplitConformalClassifier(lambda X: np.full((len(X), n_classes[0]), 1 / n_classes[0]))
    clf.calibrate(X, y)
    n_classes[0] = 3  # the model changed after calibration
    with pytest.raises(ValueError, match="calibrated with 2"):
        clf.predict_set(np.zeros((4, 2)))
    with pytest.raises(ValueError, match=r"X has 3 features, but \w+ is expecting 2 features as input"):
        clf.predict_set(np.zeros((4, 3)))  # issue 14 item 10: was the model's own error


def test_regressor_and_risk_bad_inputs():
    X, y = linear_data(200)
    yf = y.astype(float)

    def reg_model(X):
        return X[:, 0]

    with pytest.raises(NotFittedError):
        RCP1Regressor(reg_model, sigma=0.2, radius=0.1).predict_interval(X)
    with pytest.raises(ValueError, match="confidence_level"):
        SplitConformalRegressor(reg_model, confidence_level=1.0).calibrate(X, yf)
    with pytest.raises(ValueError, match="radius"):
        RCP1Regressor(reg_model, sigma=0.2, radius=-1).calibrate(X, yf)
    with pytest.raises(ValueError, match="sigma"):
        RCP1Regressor(reg_model, sigma=0, radius=0.1).calibrate(X, yf)
    with pytest.raises(ValueError, match="regression model"):
        RCP1Regressor(MODEL, sigma=0.2, radius=0.1).calibrate(X, yf)

    def loss(pred, target, lam):
        return (pred[np.arange(len(target)), target] < 1 - lam).astype(float)

    def make(**kw):
        base = dict(loss=loss, lambdas=np.linspace(0, 1, 11), sigma=0.2, radius=0.1)
        base.update(kw)
        return RCP1RiskControl(MODEL, **base)

    with pytest.raises(NotFittedError):
        make().predict(X)
    with pytest.raises(ValueError, match="non-increasing"):
        make(loss=lambda p, t, lam: np.full(len(t), lam)).calibrate(X, y)
    with pytest.raises(ValueError, match="bound"):
        make(loss=lambda p, t, lam: np.full(len(t), 2.0)).calibrate(X, y)
    with pytest.raises(ValueError, match="below"):
        make(bound=0.05).calibrate(X, y)
    with pytest.raises(ValueError, match="radius"):
        make(radius=-1.0).calibrate(X, y)
    with pytest.raises(TypeError, match="loss"):
        make(loss=3).calibrate(X, y)
    with pytest.warns(UserWarning, match="need n >= "):
        crc = make().calibrate(X[:5], y[:5])
    assert crc.lambda_ == 1.0
    crc = make().calibrate(X, y)
    assert crc.predict(X).shape == (200, 2)
    assert 0 <= crc.risk(X, y) <= 1


def test_evaluate_sets_counts_passes_and_matches_metrics():
    from certkit.conformal import evaluate_sets, evaluation_table

    X, y = linear_data(300)
    est = BinCPClassifier(MODEL, sigma=0.25, radius=0.1, n_samples=16, rng=0).calibrate(X, y)
    res = evaluate_sets(est, X[:50], y[:50], X_attacked=X[:50], method="bincp")
    assert res.forward_passes == 16.0 and res.method == "bincp"
    assert 0 <= res.coverage <= 1 and 0 <= res.attacked_coverage <= 1 and res.set_size >= 0
    assert "bincp" in res.summary() and "bincp" in evaluation_table([res])
    plain = evaluate_sets(SplitConformalClassifier(MODEL, rng=0).calibrate(X, y), X, y)
    assert plain.forward_passes == 1.0 and np.isnan(plain.attacked_coverage)


def test_an_estimator_passed_as_model_suggests_its_prediction_method():
    from sklearn.linear_model import LogisticRegression, Ridge

    from certkit.conformal import RCP1Classifier, RCP1Regressor

    X = np.random.default_rng(0).normal(size=(40, 3))
    y = (X[:, 0] > 0).astype(int)
    clf = LogisticRegression().fit(X, y)
    hint = r"got LogisticRegression; pass its method instead: model\.predict_proba"
    with pytest.raises(TypeError, match=hint):
        RCP1Classifier(clf, sigma=0.25, radius=0.1, confidence_level=0.9, rng=0).calibrate(X, y)
    reg = Ridge().fit(X, X[:, 0])
    with pytest.raises(TypeError, match=r"got Ridge; pass its method instead: model\.predict$"):
        RCP1Regressor(reg, sigma=0.25, radius=0.1, confidence_level=0.9, rng=0).calibrate(X, X[:, 0])
