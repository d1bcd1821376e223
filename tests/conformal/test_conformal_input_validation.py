"""Model outputs validated like inputs, options checked, clear errors (regressions of issue 14)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _conformal_models import LINEAR_MODEL as MODEL
from _conformal_models import linear_data
from sklearn.exceptions import NotFittedError

from certkit.conformal import (
    APSScore,
    BinCPClassifier,
    CallableScore,
    RAPSScore,
    RCP1Classifier,
    RCP1Regressor,
    RCP1RiskControl,
    RSCPPlusClassifier,
    SplitConformalClassifier,
    SplitConformalRegressor,
    evaluate_sets,
)
from certkit.conformal.attacks import smoothed_pgd


def _fnr_loss(pred, target, lam):
    return (pred[np.arange(len(target)), target] < 1 - lam).astype(float)


def _risk_control(model, **kw):
    return RCP1RiskControl(model, loss=_fnr_loss, lambdas=np.linspace(0, 1, 11), sigma=0.2, radius=0.1, **kw)


# ------------------------------------------------------------------------- item 5: model outputs
BAD_OUTPUTS = [
    (lambda P: np.where(P > 0.5, np.nan, P), ValueError, "model output must be finite"),
    (lambda P: P.astype(complex), TypeError, "model output must be a real numeric array"),
    (lambda P: P > 0.5, TypeError, "model output must be a real numeric array"),
    (lambda P: P.astype(str), TypeError, "model output must be a real numeric array"),
    (lambda P: P.astype(object), TypeError, "model output must be a numeric array"),
    (lambda P: P[:-1], ValueError, "model output must have one row per input"),
    (lambda P: 0.5, ValueError, "model output must have one row per input"),
]


@pytest.mark.parametrize(("corrupt", "error", "match"), BAD_OUTPUTS)
def test_bad_model_outputs_raise(corrupt, error, match):
    X, y = linear_data(100)

    def model(X):
        return corrupt(MODEL(X))

    with pytest.raises(error, match=match):
        SplitConformalClassifier(model).calibrate(X, y)
    with pytest.raises(error, match=match):
        RCP1Classifier(model, sigma=0.2, radius=0.1, rng=0).calibrate(X, y)
    with pytest.raises(error, match=match):
        _risk_control(model, rng=0).calibrate(X, y)


def test_risk_control_with_nan_model_raises_instead_of_lambda_one():
    """Issue 14 item 5: a NaN-emitting model calibrated to lambda_ = 1.0 and predicted NaN."""
    X, y = linear_data(100)
    with pytest.raises(ValueError, match="model output must be finite"):
        _risk_control(lambda X: np.full((len(X), 2), np.nan), rng=0).calibrate(X, y)
    broken = [False]

    def model(X):
        return np.full((len(X), 2), np.nan) if broken[0] else MODEL(X)

    crc = _risk_control(model, rng=0).calibrate(X, y)
    broken[0] = True  # NaN at prediction time
    with pytest.raises(ValueError, match="model output must be finite"):
        crc.predict(X)


def test_torch_model_with_nan_output_raises():
    net = torch.nn.Linear(2, 3)
    with torch.no_grad():
        net.bias.fill_(float("nan"))
    X, y = linear_data(100)
    with pytest.raises(ValueError, match="model output must be finite"):
        SplitConformalClassifier(net, output="logits").calibrate(X, y % 3)


def test_regression_model_output_checked():
    X, y = linear_data(100)
    with pytest.raises(ValueError, match="model output must be finite"):
        SplitConformalRegressor(lambda X: np.where(X[:, 0] > 0, np.inf, 0.0)).calibrate(X, y.astype(float))
    with pytest.raises(TypeError, match="model output must be a real numeric array"):
        RCP1Regressor(lambda X: X[:, 0] + 0j, sigma=0.2, radius=0.1).calibrate(X, y.astype(float))


# ------------------------------------------------------------------------- item 7: options
@pytest.mark.parametrize(
    "make",
    [
        lambda: APSScore(randomized="yes"),
        lambda: APSScore(randomized=1),
        lambda: RAPSScore(randomized=None),
        lambda: CallableScore(np.negative, nonconformity="no"),
        lambda: CallableScore(np.negative, bounded=1),
    ],
)
def test_score_flags_must_be_bools(make):
    with pytest.raises(TypeError, match=r"(randomized|nonconformity|bounded) must be a bool"):
        make()


def test_numpy_bool_flags_accepted():
    assert APSScore(randomized=np.bool_(False)).randomized == np.bool_(False)


def test_sigma_without_noise_is_an_error():
    """Issue 14 item 7: SplitConformalClassifier(sigma=0.3) silently ignored sigma."""
    X, y = linear_data(100)
    with pytest.raises(ValueError, match=r"sigma=0\.3 is only used with smoothing noise, but noise=None"):
        SplitConformalClassifier(MODEL, sigma=0.3).calibrate(X, y)
    with pytest.raises(ValueError, match=r"sigma=0\.3 is only used with smoothing noise"):
        SplitConformalRegressor(lambda X: X[:, 0], sigma=0.3).calibrate(X, y.astype(float))
    noisy = SplitConformalClassifier(MODEL, sigma=0.3, noise="gaussian", rng=0).calibrate(X, y)
    assert noisy.predict_set(X).shape == (100, 2)


@pytest.mark.parametrize("dtype", [complex, bool, object, str])
def test_complex_bool_or_text_targets_rejected(dtype):
    """Issue 14 item 7: complex y with zero imaginary part and complex/bool Y were accepted. Issue 36: class
    labels may be any hashable values (bool, strings, Python objects), so the classifiers take those and give
    the sets of the integer-coded labels; complex labels and non-numeric regression targets stay refused."""
    X, y = linear_data(100)
    if dtype is complex:
        with pytest.raises(TypeError, match=r"\by\b"):
            SplitConformalClassifier(MODEL).calibrate(X, y.astype(dtype))
    else:
        coded = SplitConformalClassifier(MODEL).calibrate(X, y)
        labelled = SplitConformalClassifier(MODEL).calibrate(X, y.astype(dtype))
        assert labelled.classes_.tolist() == np.array([0, 1]).astype(dtype).tolist()
        assert labelled.threshold_ == coded.threshold_
        np.testing.assert_array_equal(labelled.predict_set(X), coded.predict_set(X))
    with pytest.raises(TypeError, match=r"\by\b"):
        SplitConformalRegressor(lambda X: X[:, 0]).calibrate(X, y.astype(dtype))
    with pytest.raises(TypeError, match=r"\bY\b"):
        _risk_control(MODEL, rng=0).calibrate(X, y.astype(dtype))


def test_risk_control_keeps_integer_and_float_targets():
    X, y = linear_data(100)
    crc = _risk_control(MODEL, rng=0).calibrate(X, y)
    assert 0 <= crc.risk(X, y) <= 1
    with pytest.raises(ValueError, match="Y must be finite"):
        _risk_control(MODEL, rng=0).calibrate(X, np.where(y > 0, np.nan, 0.0))
    with pytest.raises(ValueError, match="inconsistent numbers of samples: X has 100, Y has shape"):
        _risk_control(MODEL, rng=0).calibrate(X, 1.0)


# ------------------------------------------------------------------------- item 10: clear errors
def test_evaluate_sets_unfitted_is_not_fitted_error():
    X, y = linear_data(100)
    with pytest.raises(NotFittedError, match="not fitted yet"):
        evaluate_sets(SplitConformalClassifier(MODEL), X, y)
    with pytest.raises(TypeError, match="estimator must be a certkit conformal classifier"):
        evaluate_sets(MODEL, X, y)
    fitted = SplitConformalClassifier(MODEL, rng=0).calibrate(X, y)
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        evaluate_sets(fitted, X, y[:-1])
    res = evaluate_sets(fitted, X, y)
    assert 0 <= res.coverage <= 1 and res.forward_passes == 1


@pytest.mark.parametrize(
    "make",
    [
        lambda: SplitConformalClassifier(MODEL, rng=0),
        lambda: RCP1Classifier(MODEL, sigma=0.2, radius=0.1, rng=0),
        lambda: SplitConformalRegressor(lambda X: X[:, 0], rng=0),
        lambda: _risk_control(MODEL, rng=0),
    ],
)
def test_wrong_feature_count_names_x(make):
    """Issue 14 item 10: a wrong feature count surfaced as the model's own matmul error."""
    X, y = linear_data(100)
    est = make().calibrate(X, y)
    assert est.input_shape_ == (2,) and est.n_features_in_ == 2
    wrong = np.zeros((5, 3))
    match = r"X has 3 features, but \w+ is expecting 2 features as input \(the calibration inputs' number\)"
    with pytest.raises(ValueError, match=match):
        if hasattr(est, "predict_set"):
            est.predict_set(wrong)
        elif hasattr(est, "predict_interval"):
            est.predict_interval(wrong)
        else:
            est.predict(wrong)


def _linear_net():
    torch.manual_seed(0)
    return torch.nn.Linear(2, 2)


def test_torch_model_with_wrong_feature_count_names_x():
    """Calibrating a torch model or attacking it with the wrong feature count: an error naming X."""
    X, y = linear_data(10)
    wrong = np.zeros((10, 3))
    match = r"X of shape \(10, 3\) does not fit model: its first layer \(Linear.*\) expects 2 input features"
    with pytest.raises(ValueError, match=match):
        SplitConformalClassifier(_linear_net(), output="logits").calibrate(wrong, y)
    with pytest.raises(ValueError, match=r"X of shape \(10, 3\) does not fit model"):
        smoothed_pgd(_linear_net(), wrong, y, 0.3, 0.2, steps=2, n_noise=2, rng=0)
    net = _linear_net()
    est = SplitConformalClassifier(net, output="logits").calibrate(X, y)  # the right shape still works
    assert est.predict_set(X).shape == (10, 2) and not net._forward_pre_hooks


def test_smoothed_pgd_label_out_of_range():
    X, y = linear_data(10)
    with pytest.raises(ValueError, match=r"y must contain class labels in \[0, 1\]"):
        smoothed_pgd(_linear_net(), X, y + 5, 0.3, 0.2, steps=2, n_noise=2, rng=0)


def test_smoothed_pgd_numpy_model():
    X, y = linear_data(10)
    with pytest.raises(TypeError, match=r"model must .*torch"):
        smoothed_pgd(MODEL, X, y, 0.3, 0.2, steps=2, n_noise=2, rng=0)
    with pytest.raises(TypeError, match="model must return a torch tensor"):
        smoothed_pgd(lambda t: MODEL(t.detach().numpy()), X, y, 0.3, 0.2, steps=2, n_noise=2, rng=0)


def test_smoothed_pgd_nan_or_constant_model():
    X, y = linear_data(10)
    with pytest.raises(ValueError, match="model output must be finite"):
        smoothed_pgd(lambda t: t * float("nan"), X, y, 0.3, 0.2, steps=2, n_noise=2, rng=0)
    with pytest.raises(TypeError, match="does not depend differentiably"):
        smoothed_pgd(lambda t: torch.full((t.shape[0], 2), 0.5), X, y, 0.3, 0.2, steps=2, n_noise=2, rng=0)


@pytest.mark.parametrize("cls", [BinCPClassifier, RSCPPlusClassifier])
def test_huge_n_samples_is_refused_before_allocating(cls):
    """A huge n_samples asked numpy for 14.6 TiB; now a ValueError names n_samples and the estimate."""
    X, y = linear_data(30)
    with pytest.raises(ValueError, match=r"n_samples=1000000000000 is too large: .* about [0-9.]+ TiB"):
        cls(MODEL, sigma=0.2, radius=0.1, n_samples=10**12, error_rate=0.01, rng=0).calibrate(X, y)
