"""The paper's protocol: PyTorch-default initialisation and epoch selection on a validation split."""

import itertools

import numpy as np
import pytest

from certkit.mibp import (
    MLP,
    CertifiedTrainingResult,
    EpochSelection,
    FeatureBox,
    SolveStats,
    certified_training,
    certify_predictions,
    select_epoch,
)
from certkit.mibp.certification import result as result_module
from certkit.mibp.certification.attack import attack_predictions


# ----------------------------------------------------------------------------- MLP.random(init=)
def test_torch_init_matches_torch_linear_bounds_and_distribution():
    torch = pytest.importorskip("torch")
    stats = pytest.importorskip("scipy.stats")
    fan_in, fan_out = 40, 500
    ours = MLP.random([fan_in, fan_out, 1], init="torch", rng=0)
    torch.manual_seed(0)
    lin = torch.nn.Linear(fan_in, fan_out)
    w_ref = lin.weight.detach().double().numpy().ravel()
    b_ref = lin.bias.detach().double().numpy()
    bound = 1 / np.sqrt(fan_in)
    for ref, mine in ((w_ref, ours.weights[0].ravel()), (b_ref, ours.biases[0])):
        assert np.abs(ref).max() <= bound and np.abs(mine).max() <= bound
        # both fill the same interval: largest |value| within 2% of the bound
        assert np.abs(mine).max() > 0.98 * bound and np.abs(ref).max() > 0.98 * bound
        assert stats.ks_2samp(ref, mine).pvalue > 1e-3
    # output layer: fan_in = 500
    assert np.abs(ours.weights[1]).max() <= 1 / np.sqrt(fan_out)


def test_he_init_is_the_default_and_wider_than_torch():
    he = MLP.random([10, 2000, 1], rng=1)
    assert he == MLP.random([10, 2000, 1], init="he", rng=1)
    assert np.abs(he.weights[0]).max() == pytest.approx(np.sqrt(6 / 10), rel=1e-2)
    torch_like = MLP.random([10, 2000, 1], init="torch", rng=1)
    assert np.abs(torch_like.weights[0]).max() == pytest.approx(1 / np.sqrt(10), rel=1e-2)


def test_init_is_deterministic_given_rng():
    a = MLP.random([2, 16, 1], init="torch", rng=7)
    assert a == MLP.random([2, 16, 1], init="torch", rng=7)
    assert a != MLP.random([2, 16, 1], init="torch", rng=8)
    gen1, gen2 = np.random.default_rng(3), np.random.default_rng(3)
    assert MLP.random([2, 4, 1], init="torch", rng=gen1) == MLP.random([2, 4, 1], init="torch", rng=gen2)


def test_init_rejects_unknown_names():
    with pytest.raises(ValueError, match="init"):
        MLP.random([2, 4, 1], init="xavier", rng=0)
    with pytest.raises(TypeError, match="init"):
        MLP.random([2, 4, 1], init=None, rng=0)


# ----------------------------------------------------------------------------- select_epoch
def _one_unit(b2: float) -> MLP:
    """f(x) = relu(x) + b2."""
    return MLP([np.array([[1.0]]), np.array([[1.0]])], [np.array([0.0]), np.array([b2])])


def _hand_result(b2_boxes, nominal_b2) -> CertifiedTrainingResult:
    """Hand-made boxes in which only the output bias b2 varies."""
    return CertifiedTrainingResult(
        lower=tuple(_one_unit(lo) for lo, _ in b2_boxes),
        upper=tuple(_one_unit(hi) for _, hi in b2_boxes),
        nominal=_one_unit(nominal_b2[-1]),
        nominal_path=tuple(_one_unit(b) for b in nominal_b2),
        epoch_seconds=np.zeros(len(b2_boxes) - 1),
        solver_stats=tuple(SolveStats() for _ in b2_boxes[1:]),
        backend="interval",
        formulation="interval",
        loss="hinge",
        learning_rate=0.1,
    )


# validation points x > 0, so f(x) = x + b2; the true boundary is x = 2
X_VAL = np.array([[0.5], [1.5], [2.5], [3.5]])
Y_VAL = np.array([-1, -1, 1, 1])
BOXES = [(0.0, 0.0), (-1.2, -0.8), (-2.4, -1.6), (-3.0, -1.0), (-2.4, -1.6)]
NOMINAL = [0.0, -1.0, -2.0, -2.0, -2.0]


def test_select_epoch_hand_oracle():
    # epoch 0: f in {x}: all predicted +1, the two positives right                  -> 2/4
    # epoch 1: f = x + [-1.2, -0.8]: 0.5 -> -1 (right), 1.5 -> +1 (wrong), 2.5, 3.5 -> 3/4
    # epoch 2: f = x + [-2.4, -1.6]: every sign fixed and right                     -> 4/4
    # epoch 3: f = x + [-3, -1]: 1.5 and 2.5 may take either sign                   -> 2/4
    # epoch 4: the box of epoch 2 again: a tie, the earlier epoch 2 wins
    sel = select_epoch(_hand_result(BOXES, NOMINAL), X_VAL, Y_VAL)
    assert isinstance(sel, EpochSelection)
    np.testing.assert_array_equal(sel.certified_accuracy, [0.5, 0.75, 1.0, 0.5, 1.0])
    np.testing.assert_array_equal(sel.nominal_accuracy, [0.5, 0.75, 1.0, 1.0, 1.0])
    assert sel.epoch == 2
    assert sel.n_validation == 4 and sel.backend == "interval"
    text = sel.summary()
    assert "epoch 2" in text and text.count("*") == 1
    assert sel.to_dict()["epoch"] == 2
    # the per-epoch series without selecting: the same hand oracle
    res = _hand_result(BOXES, NOMINAL)
    np.testing.assert_array_equal(res.certified_accuracy(X_VAL, Y_VAL), [0.5, 0.75, 1.0, 0.5, 1.0])
    np.testing.assert_array_equal(res.nominal_accuracy(X_VAL, Y_VAL), [0.5, 0.75, 1.0, 1.0, 1.0])


def test_epoch_zero_is_never_selected():
    boxes = [(-2.0, -2.0), (-3.0, -1.0)]
    sel = select_epoch(_hand_result(boxes, [-2.0, -2.0]), X_VAL, Y_VAL)
    assert sel.certified_accuracy[0] == 1.0 and sel.certified_accuracy[1] == 0.5
    assert sel.epoch == 1


def _vertex_certified_accuracy(lower: MLP, upper: MLP, nominal: MLP, X, y) -> float:
    """Brute force for a one-hidden-unit network: f is monotone in each parameter, so its extremes over
    the box lie at the box's vertices."""
    lo, hi = lower.to_vector(), upper.to_vector()
    outs = np.array(
        [
            MLP.from_vector(np.where(np.array(corner), hi, lo), lower.sizes).forward(X)[:, 0]
            for corner in itertools.product((False, True), repeat=lo.size)
        ]
    )
    pred = nominal.predict(X)
    certified = np.all(outs * pred > 0, axis=0)
    return float(np.mean(certified & (pred == y)))


def _one_unit_case():
    """A [1, 1, 1] network, 12 training and 40 validation points of a threshold at x = 0.3."""
    rng = np.random.default_rng(4)
    X = rng.uniform(-2, 2, size=(12, 1))
    X_val = rng.uniform(-2, 2, size=(40, 1))
    model = MLP([np.array([[0.4]]), np.array([[0.5]])], [np.array([0.2]), np.array([-0.6])])
    return model, X, np.where(X[:, 0] > 0.3, 1, -1), X_val, np.where(X_val[:, 0] > 0.3, 1, -1)


def test_select_epoch_matches_vertex_enumeration_on_a_real_run():
    model, X, y, X_val, y_val = _one_unit_case()
    res = certified_training(
        model, X, y, loss="hinge", perturbation=FeatureBox(0.05), epochs=8, learning_rate=0.5
    )
    sel = select_epoch(res, X_val, y_val)
    expected = [
        _vertex_certified_accuracy(res.lower[t], res.upper[t], res.nominal_path[t], X_val, y_val)
        for t in range(res.epochs + 1)
    ]
    np.testing.assert_array_equal(sel.certified_accuracy, expected)
    assert len(set(expected[1:])) > 1, "the oracle case should separate the epochs"
    assert sel.epoch == 1 + int(np.argmax(expected[1:]))


def test_select_epoch_reads_only_the_validation_split(monkeypatch):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20, 2))
    y = np.where(X[:, 0] > 0, 1, -1)
    X_val, X_test = rng.normal(size=(15, 2)), rng.normal(size=(15, 2))
    y_val = np.where(X_val[:, 0] > 0, 1, -1)
    res = certified_training(
        MLP.random([2, 3, 1], init="torch", rng=0),
        X,
        y,
        loss="hinge",
        perturbation=FeatureBox(0.01),
        epochs=3,
        learning_rate=0.5,
    )
    seen = []
    real = result_module.margin_lower_bounds

    def spy(lower, upper, X_arg, pred, **kwargs):
        seen.append((np.array(X_arg), next(t for t, box in enumerate(res.lower) if box is lower)))
        return real(lower, upper, X_arg, pred, **kwargs)

    monkeypatch.setattr(result_module, "margin_lower_bounds", spy)
    select_epoch(res, X_val, y_val)
    assert [t for _, t in seen] == [0, 1, 2, 3]
    for X_arg, _ in seen:
        np.testing.assert_array_equal(X_arg, X_val)
        assert not np.isin(X_test, X_arg).any()


def test_select_epoch_validates_its_inputs():
    res = _hand_result(BOXES, NOMINAL)
    with pytest.raises(TypeError, match="result"):
        select_epoch("not a result", X_VAL, Y_VAL)
    with pytest.raises(ValueError, match="X_val"):
        select_epoch(res, np.ones((4, 2)), Y_VAL)
    with pytest.raises(ValueError, match="X_val"):
        select_epoch(res, np.array([[np.nan], [1.0], [2.0], [3.0]]), Y_VAL)
    with pytest.raises(ValueError, match="y_val"):
        select_epoch(res, X_VAL, np.array([0, 1, 1, 0]))
    with pytest.raises(ValueError, match="inconsistent"):
        select_epoch(res, X_VAL, Y_VAL[:3])
    with pytest.raises(ValueError, match="backend"):
        select_epoch(res, X_VAL, Y_VAL, backend="exact")
    with pytest.raises(TypeError):
        select_epoch(res, X_VAL, Y_VAL, "interval")  # options are keyword-only


# ----------------------------------------------------------------------------- attack_predictions
def _identity_unit() -> MLP:
    """f(x) = relu(x)."""
    return MLP([np.array([[1.0]]), np.array([[1.0]])], [np.array([0.0]), np.array([0.0])])


def test_attack_predictions_hand_oracle():
    pytest.importorskip("torch")
    # one training point x' in [1 - eps, 1 + eps] with label -1, learning rate 1/2: the hinge is active,
    # so after one step w1 = w2 = a := 1 - x'/2 and b1 = b2 = -1/2, i.e. f(x) = a relu(a x - 1/2) - 1/2,
    # = a^2 x - a/2 - 1/2 for the test points below (x >= 2.5).  It increases with a, so the reachable
    # predictions at x are those of the two end points x' = 1 -+ eps; nominal zero crossing at x = 3.
    eps = 0.05
    X, y = np.array([[1.0]]), np.array([-1])
    X_test = np.linspace(2.5, 3.5, 40)[:, None]  # avoids x = 3, where f = 0 up to rounding
    model = _identity_unit()
    flipped = attack_predictions(model, X, y, FeatureBox(eps), X_test, epochs=1, learning_rate=0.5, rng=0)
    assert flipped.shape == (2, 40) and not flipped[0].any()
    nominal = model.train(X, y, epochs=1, learning_rate=0.5)[-1].predict(X_test)
    ends = [model.train(X + s * eps, y, epochs=1, learning_rate=0.5)[-1].predict(X_test) for s in (-1, 1)]
    expected = (ends[0] != nominal) | (ends[1] != nominal)
    a_lo, a_hi = 1 - (1 + eps) / 2, 1 - (1 - eps) / 2  # the crossings (a/2 + 1/2) / a^2 bracket 3
    by_hand = (X_test[:, 0] > (a_hi / 2 + 0.5) / a_hi**2) & (X_test[:, 0] < (a_lo / 2 + 0.5) / a_lo**2)
    np.testing.assert_array_equal(expected, by_hand)
    assert 0 < expected.sum() < 40
    np.testing.assert_array_equal(flipped[1], expected)


def test_attack_never_flips_a_certified_prediction():
    pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    X = rng.normal(size=(30, 2))
    y = np.where(X[:, 0] + 0.3 * X[:, 1] > 0, 1, -1)
    X_test = rng.normal(size=(60, 2))
    model = MLP.random([2, 6, 1], init="torch", rng=1)
    pert = FeatureBox(0.05)
    res = certified_training(model, X, y, loss="hinge", perturbation=pert, epochs=4, learning_rate=1.0)
    flipped = attack_predictions(model, X, y, pert, X_test, epochs=4, learning_rate=1.0, rng=2)
    assert flipped[1:].any(), "the case should have flippable predictions"
    for t in range(res.epochs + 1):
        certified = certify_predictions(res, X_test, epoch=t).certified
        assert not np.any(certified & flipped[t]), f"epoch {t}: a certified prediction was flipped"
    again = attack_predictions(model, X, y, pert, X_test, epochs=4, learning_rate=1.0, rng=2)
    np.testing.assert_array_equal(flipped, again)


def test_attack_predictions_validates_its_inputs():
    model, X, y = _identity_unit(), np.array([[1.0]]), np.array([-1])
    with pytest.raises(TypeError, match="model"):
        attack_predictions("net", X, y, FeatureBox(0.1), X)
    with pytest.raises(TypeError, match="perturbation"):
        attack_predictions(model, X, y, 0.1, X)
    with pytest.raises(ValueError, match="X_test"):
        attack_predictions(model, X, y, FeatureBox(0.1), np.ones((2, 3)))
    with pytest.raises(ValueError, match="epochs"):
        attack_predictions(model, X, y, FeatureBox(0.1), X, epochs=0)


# ----------------------------------------------------------------------------- early stopping
def test_patience_stops_after_the_validation_score_stalls():
    model, X, y, X_val, y_val = _one_unit_case()
    kw = dict(loss="hinge", perturbation=FeatureBox(0.05), epochs=8, learning_rate=0.5)
    full = certified_training(model, X, y, **kw)
    scores = select_epoch(full, X_val, y_val).certified_accuracy[1:]
    for patience in (1, 2, 3):
        res = certified_training(model, X, y, **kw, validation=(X_val, y_val), patience=patience)
        # by hand: the first epoch e with e - (first best epoch among 1..e) >= patience, else all 8
        stop = next((e for e in range(1, 9) if e - (1 + int(np.argmax(scores[:e]))) >= patience), 8)
        assert res.epochs == stop
        assert len(res.nominal_path) == len(res.lower) == stop + 1
        for t in range(stop + 1):  # the same boxes as the full run
            assert res.lower[t] == full.lower[t] and res.upper[t] == full.upper[t]
        assert res.nominal == full.nominal_path[stop]
        assert select_epoch(res, X_val, y_val).epoch == select_epoch(full, X_val, y_val).epoch
    assert certified_training(model, X, y, **kw, validation=(X_val, y_val)).epochs == 8


def test_validation_and_patience_are_checked():
    X, y = np.array([[1.0], [-1.0]]), np.array([1, -1])
    kw = dict(perturbation=FeatureBox(0.01), loss="hinge", epochs=2)
    model = _identity_unit()
    with pytest.raises(ValueError, match="patience needs a validation"):
        certified_training(model, X, y, **kw, patience=2)
    with pytest.raises(ValueError, match="patience"):
        certified_training(model, X, y, **kw, validation=(X, y), patience=0)
    with pytest.raises(TypeError, match="validation"):
        certified_training(model, X, y, **kw, validation=X)
    with pytest.raises(ValueError, match="X_val"):
        certified_training(model, X, y, **kw, validation=(np.ones((2, 2)), y))
    with pytest.raises(ValueError, match="y_val"):
        certified_training(model, X, y, **kw, validation=(X, np.array([0, 1])))


def test_mse_training_scores_validation_classes_not_regression_targets():
    # MSE training on +-1 targets: the validation score is certified accuracy of predict(), so y_val holds
    # the classes predict() returns, and the error for 0/1 labels names those classes, not the hinge loss
    model, X, y, X_val, y_val = _one_unit_case()
    kw = dict(perturbation=FeatureBox(0.05), epochs=4, learning_rate=0.2, loss="mse")
    res = certified_training(model, X, y, **kw, validation=(X_val, y_val), patience=1)
    full = certified_training(model, X, y, **kw)
    scores = select_epoch(full, X_val, y_val).certified_accuracy[1:]
    stop = next((e for e in range(1, 5) if e - (1 + int(np.argmax(scores[:e]))) >= 1), 4)
    assert res.epochs == stop
    message = r"y_val must be -1 or \+1 for the classes predict\(\) returns"
    with pytest.raises(ValueError, match=message) as err:
        certified_training(model, X, y, **kw, validation=(X_val, (y_val + 1) // 2))
    assert "hinge" not in str(err.value)
    with pytest.raises(ValueError, match="predict"):
        select_epoch(full, X_val, (y_val + 1) // 2)


def test_select_epoch_multiclass_scores_are_the_certificates_of_each_epoch():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(24, 2))
    y = np.argmax(X @ np.array([[1.0, -1.0, 0.0], [0.0, 1.0, -1.0]]), axis=1)
    X_val = rng.normal(size=(30, 2))
    y_val = np.argmax(X_val @ np.array([[1.0, -1.0, 0.0], [0.0, 1.0, -1.0]]), axis=1)
    res = certified_training(
        MLP.random([2, 4, 3], init="torch", rng=3),
        X,
        y,
        loss="hinge",
        perturbation=FeatureBox(0.02),
        epochs=4,
        learning_rate=0.5,
    )
    sel = select_epoch(res, X_val, y_val)
    for t in range(res.epochs + 1):
        cert = certify_predictions(res, X_val, epoch=t)
        assert sel.certified_accuracy[t] == cert.certified_accuracy(y_val)
        assert sel.nominal_accuracy[t] == np.mean(res.nominal_path[t].predict(X_val) == y_val)
    with pytest.raises(ValueError, match=r"y_val must be integers in 0\.\.2"):
        select_epoch(res, X_val, np.full(30, 3))
