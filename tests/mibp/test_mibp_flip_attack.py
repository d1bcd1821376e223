"""`attack_label_flips`: the influence-guided label-flip attack (an upper bound on certified accuracy)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from certkit.mibp import (
    MLP,
    BoundsOverflowError,
    FeatureBox,
    LabelFlips,
    Removals,
    certified_training,
    certify_predictions,
)
from certkit.mibp.certification.cases import random_recipe_case
from certkit.mibp.problem.losses import label_classes
from certkit.parallel import single_threaded

torch = pytest.importorskip("torch")
# the tiny runs below lose their boxes on purpose: the attack is what they test
pytestmark = pytest.mark.filterwarnings("ignore:certified_training. the parameter boxes:UserWarning")

from certkit.mibp.certification.attack import (  # noqa: E402 (needs torch)
    _label_losses,
    _per_sample_loss,
    _torch_forward,
    _torch_train,
    attack_label_flips,
)


def _every_change(res, X, y, perturbation, X_test, classes) -> np.ndarray:
    """Which test predictions some allowed labelling changes, by retraining every one of them."""
    recipe, model = res.recipe, res.nominal_path[0]
    sets = perturbation.sets(X)
    pred = res.nominal_path[-1].predict(X_test)
    changed = np.zeros(len(X_test), dtype=bool)
    for size in range(1, len(X) + 1):
        for rows in itertools.combinations(range(len(X)), size):
            if sets.scope == "run" and size > sets.label_flips:
                continue
            if sets.scope == "batch" and any(
                np.isin(b, rows).sum() > sets.label_flips for b in recipe.batches
            ):
                continue
            for labels in itertools.product(*[[c for c in classes if c != y[r]] for r in rows]):
                changed_y = y.copy()
                changed_y[list(rows)] = labels
                with single_threaded():  # as the attack re-trains
                    changed |= model.run(X, changed_y, recipe)[-1].predict(X_test) != pred
    return changed


@pytest.mark.parametrize("seed", [0, 1, 4])
@pytest.mark.parametrize("hidden", [[], [3]])
@pytest.mark.parametrize(
    "perturbation", [LabelFlips(1, scope="run"), LabelFlips(2, scope="run"), LabelFlips(1)], ids=repr
)
def test_every_change_found_is_real_and_most_are_found(seed, hidden, perturbation):
    """Against retraining every allowed labelling (6 rows, 3 classes, two batches of 3, 2 epochs): the
    attack reports only changes some labelling makes, and finds at least 80 % of them."""
    gen = np.random.default_rng(seed)
    X, y = gen.normal(size=(6, 2)), gen.integers(0, 3, size=6)
    X_test = 1.5 * gen.normal(size=(40, 2))
    res = certified_training(
        MLP.random([2, *hidden, 3], rng=seed),
        X,
        y,
        perturbation=perturbation,
        loss="cross_entropy",
        epochs=2,
        learning_rate=1.0,
        batch_size=3,
    )
    changed = attack_label_flips(res, X, y, perturbation, X_test)
    truth = _every_change(res, X, y, perturbation, X_test, range(3))
    assert changed.dtype == bool and changed.shape == (40,)
    assert not np.any(changed & ~truth), "a reported change that no allowed labelling makes"
    assert truth.sum() >= 20 and changed.sum() >= 0.8 * truth.sum()


@pytest.mark.parametrize("loss", ["cross_entropy", "binary_cross_entropy", "hinge"])
def test_one_output_and_targeted_flips_against_every_labelling(loss):
    """Binary losses (one output) and multi-class hinge, with a targeted flip: only real changes."""
    gen = np.random.default_rng(7)
    out = 1 if loss == "binary_cross_entropy" else 3
    classes = label_classes(loss, out)
    X, y = gen.normal(size=(6, 2)), classes[gen.integers(0, max(out, 2), size=6)]
    X_test = 1.5 * gen.normal(size=(30, 2))
    perturbation = LabelFlips(2, target=classes[0].item(), scope="run")
    res = certified_training(
        MLP.random([2, 3, out], rng=3),
        X,
        y,
        perturbation=perturbation,
        loss=loss,
        epochs=2,
        learning_rate=0.5,
        batch_size=3,
    )
    changed = attack_label_flips(res, X, y, perturbation, X_test)
    truth = _every_change(res, X, y, perturbation, X_test, [classes[0].item()])
    assert not np.any(changed & ~truth)
    assert changed.sum() >= 0.8 * truth.sum() > 0


def test_first_order_weights_are_the_derivative_of_the_interpolated_training():
    """``∂margin/∂w`` from the attack's weighted loss equals a central difference of the training whose
    row loss is interpolated towards another label (float64, relative 1e-5)."""
    gen = np.random.default_rng(2)
    X, y = gen.normal(size=(8, 3)), gen.integers(0, 4, size=8)
    model = MLP.random([3, 5, 4], rng=2)
    res = certified_training(
        model,
        X,
        y,
        perturbation=LabelFlips(1),
        loss="cross_entropy",
        epochs=2,
        learning_rate=0.7,
        batch_size=4,
    )
    x_q = torch.tensor(gen.normal(size=(1, 3)))
    classes = torch.arange(4, dtype=torch.float64)

    def margin(w):
        def sample_loss(h, yb, rows):
            base = _per_sample_loss(torch, h, yb, "cross_entropy")
            return base + (
                w.index_select(0, rows) * (_label_losses(torch, h, "cross_entropy", classes) - base[:, None])
            ).sum(-1)

        theta = [
            torch.tensor(a, requires_grad=True) for layer in zip(model.weights, model.biases) for a in layer
        ]
        params = _torch_train(
            torch, theta, torch.tensor(X), torch.tensor(y), res.recipe, model.sizes, sample_loss
        )[-1]
        f = _torch_forward(torch, params, x_q, model.sizes)[0]
        return f[0] - f[1]

    w = torch.zeros((8, 4), dtype=torch.float64, requires_grad=True)
    (g,) = torch.autograd.grad(margin(w), w)
    for row, label in [(0, 2), (5, 3), (7, 1)]:
        step = torch.zeros((8, 4), dtype=torch.float64)
        step[row, label] = 1e-5
        central = (margin(step) - margin(-step)).item() / 2e-5
        assert central == pytest.approx(g[row, label].item(), rel=1e-5, abs=1e-9)
    # a row's own label changes nothing
    assert np.all(g.numpy()[np.arange(8), y] == 0.0)


@pytest.mark.parametrize("carry", ["box", "influence"])
def test_no_certified_prediction_is_ever_changed(carry):
    """On random recipes (momentum, weight decay, decaying rates, shuffled batches, clipping and the L1
    penalty where the carry bounds them, targeted flips, both scopes, with or without a feature box) no
    prediction that `certify_predictions` certifies is changed by the attack on the label changes (the
    observed inputs lie in every feature box), at every epoch."""
    gen = np.random.default_rng(11 if carry == "box" else 12)
    attacked = changes = 0
    for _ in range(8):
        case = random_recipe_case(gen, "label_flips", carry=carry)
        try:
            res = certified_training(**case, carry=carry)
        except BoundsOverflowError:
            continue
        X_test = gen.normal(size=(25, case["X"].shape[1]))
        sets = case["perturbation"].sets(case["X"])
        flips = LabelFlips(sets.label_flips, target=sets.flip_target, scope=sets.scope)
        for epoch in range(res.epochs + 1):
            certified = certify_predictions(res, X_test, epoch=epoch).certified
            changed = attack_label_flips(res, case["X"], case["y"], flips, X_test, epoch=epoch)
            assert not np.any(certified & changed), f"epoch {epoch}: a certified prediction changed ({case})"
            changes += int(changed.sum())
        attacked += 1
    assert attacked >= 6 and changes > 0


def test_frozen_features_are_attacked_through_the_extractor():
    """With ``features=`` the attack takes raw rows (as the result's other methods) and trains the head."""
    gen = np.random.default_rng(4)
    extractor = torch.nn.Sequential(torch.nn.Conv1d(1, 2, 3), torch.nn.ReLU(), torch.nn.Flatten()).double()
    X = gen.normal(size=(12, 1, 6))
    y = gen.integers(0, 3, size=12)
    perturbation = LabelFlips(1, scope="run")
    res = certified_training(
        MLP.random([8, 3], rng=1),
        X,
        y,
        perturbation=perturbation,
        loss="cross_entropy",
        epochs=3,
        learning_rate=2.0,
        features=extractor,
    )
    X_test = gen.normal(size=(30, 1, 6))
    changed = attack_label_flips(res, X, y, perturbation, X_test)
    features = extractor(torch.tensor(X)).detach().numpy()
    truth = _every_change(res, features, y, perturbation, res.inputs(X_test), range(3))
    assert not np.any(changed & ~truth) and changed.sum() >= 0.8 * truth.sum() > 0


def test_epoch_zero_and_no_allowed_change_find_nothing():
    X = np.array([[0.0], [1.0], [2.0]])
    y = np.array([0, 1, 1])
    pert = LabelFlips(1, target=1, scope="run")
    res = certified_training(
        MLP.random([1, 2], rng=0), X, y, perturbation=pert, loss="cross_entropy", epochs=2
    )
    assert not attack_label_flips(res, X, y, pert, X, epoch=0).any()
    y_all = np.array([1, 1, 1])  # every row already has the target: no allowed change
    res = certified_training(MLP.random([1, 2], rng=0), X, y_all, perturbation=pert, loss="cross_entropy")
    assert not attack_label_flips(res, X, y_all, pert, X).any()


def test_attack_label_flips_validates_its_inputs():
    X = np.array([[0.0], [1.0], [2.0]])
    y = np.array([0, 1, 1])
    pert = LabelFlips(1)
    res = certified_training(
        MLP.random([1, 2], rng=0), X, y, perturbation=pert, loss="cross_entropy", epochs=2
    )
    with pytest.raises(TypeError, match="result"):
        attack_label_flips("res", X, y, pert, X)
    with pytest.raises(TypeError, match="perturbation"):
        attack_label_flips(res, X, y, 1, X)
    with pytest.raises(ValueError, match="LabelFlips alone"):
        attack_label_flips(res, X, y, Removals(1), X)
    with pytest.raises(ValueError, match="LabelFlips alone"):
        attack_label_flips(res, X, y, FeatureBox(0.1) & LabelFlips(1), X)
    with pytest.raises(ValueError, match="epoch"):
        attack_label_flips(res, X, y, pert, X, epoch=3)
    with pytest.raises(ValueError, match="competitors"):
        attack_label_flips(res, X, y, pert, X, competitors=0)
    with pytest.raises(ValueError, match="X_test"):
        attack_label_flips(res, X, y, pert, np.ones((2, 3)))
    with pytest.raises(ValueError, match="X_test"):
        attack_label_flips(res, X, y, pert, np.array([[np.nan]]))
    with pytest.raises(ValueError):
        attack_label_flips(res, X, np.array([0, 1, 5]), pert, X)  # a label outside the classes
    with pytest.raises(TypeError):
        attack_label_flips(res, X, y, pert, X, -1)  # options are keyword-only
    targets = np.array([0.0, 1.0, 2.0])
    mse = certified_training(MLP.random([1, 1], rng=0), X, targets, perturbation=FeatureBox(0.1), loss="mse")
    with pytest.raises(ValueError, match="mse"):
        attack_label_flips(mse, X, targets, pert, X)


def test_a_zero_per_sample_gradient_under_clip_norm_gives_finite_influences():
    """Hinge loss with ``clip_norm``: rows that meet the margin have a zero gradient, whose norm's derivative
    must not turn every influence into NaN; the attack then finds every change one flip makes."""
    X = np.array([[-2.0], [-1.0], [1.0], [2.0], [3.0], [0.5]])
    y = np.array([-1.0, -1.0, 1.0, 1.0, 1.0, -1.0])
    model = MLP.from_vector(np.array([2.0, 0.0]), [1, 1])  # f(x) = 2x: rows 0, 1, 3 and 4 meet the margin
    perturbation = LabelFlips(1, scope="run")
    res = certified_training(
        model, X, y, perturbation=perturbation, loss="hinge", epochs=2, learning_rate=1.0, clip_norm=10.0
    )
    weights = torch.zeros((6, 2), dtype=torch.float64, requires_grad=True)
    classes = torch.tensor([-1.0, 1.0], dtype=torch.float64)

    def sample_loss(h, yb, rows):
        base = _per_sample_loss(torch, h, yb, "hinge")
        change = _label_losses(torch, h, "hinge", classes) - base[:, None]
        return base + (weights.index_select(0, rows) * change).sum(-1)

    theta = [torch.tensor(a, requires_grad=True) for layer in zip(model.weights, model.biases) for a in layer]
    params = _torch_train(torch, theta, torch.tensor(X), torch.tensor(y), res.recipe, [1, 1], sample_loss)[-1]
    f = _torch_forward(torch, params, torch.tensor([[0.3]], dtype=torch.float64), [1, 1])[0, 0]
    (g,) = torch.autograd.grad(f, weights)
    assert torch.isfinite(g).all()
    X_test = np.linspace(-1.0, 1.0, 21)[:, None]
    changed = attack_label_flips(res, X, y, perturbation, X_test)
    truth = _every_change(res, X, y, perturbation, X_test, [-1.0, 1.0])
    assert truth.sum() > 0 and np.array_equal(changed, truth)


def test_the_training_data_must_be_the_results():
    gen = np.random.default_rng(3)
    X, y = gen.normal(size=(8, 2)), gen.integers(0, 3, size=8)
    pert = LabelFlips(1, scope="run")
    res = certified_training(
        MLP.random([2, 3], rng=0), X, y, perturbation=pert, loss="cross_entropy", epochs=2
    )
    other = y.copy()
    other[:4] = (other[:4] + 1) % 3
    with pytest.raises(ValueError, match="not the training data of result"):
        attack_label_flips(res, X, other, pert, X)
    with pytest.raises(ValueError, match="X has 7 rows but result was trained on 8"):
        attack_label_flips(res, X[:7], y[:7], pert, X)
    with pytest.raises(ValueError, match="target"):
        attack_label_flips(res, X, y, LabelFlips(1, target=7), X)
