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
    _selection,
    certified_training,
    select_epoch,
)


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


def test_select_epoch_matches_vertex_enumeration_on_a_real_run():
    rng = np.random.default_rng(4)
    X = rng.uniform(-2, 2, size=(12, 1))
    y = np.where(X[:, 0] > 0.3, 1, -1)
    X_val = rng.uniform(-2, 2, size=(40, 1))
    y_val = np.where(X_val[:, 0] > 0.3, 1, -1)
    model = MLP([np.array([[0.4]]), np.array([[0.5]])], [np.array([0.2]), np.array([-0.6])])
    res = certified_training(model, X, y, perturbation=FeatureBox(0.05), epochs=8, learning_rate=0.5)
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
    res = certified_training(MLP.random([2, 3, 1], init="torch", rng=0), X, y, perturbation=FeatureBox(0.01),
                             epochs=3, learning_rate=0.5)
    seen = []
    real = _selection.certify_predictions

    def spy(result, X_arg, **kwargs):
        seen.append((np.array(X_arg), kwargs["epoch"]))
        return real(result, X_arg, **kwargs)

    monkeypatch.setattr(_selection, "certify_predictions", spy)
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
