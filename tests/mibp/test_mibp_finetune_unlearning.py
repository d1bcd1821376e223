"""Fine-tuning behind a frozen extractor (``features=``), unlearning certificates (`Removals`) and the
regression certificate: exact oracles, sampled and attacked soundness, bad input."""

import itertools

import numpy as np
import pytest

from certkit.mibp import (
    MLP,
    Budget,
    FeatureBox,
    LabelFlips,
    Removals,
    TargetBox,
    certified_training,
    certify_predictions,
    certify_regression,
)
from certkit.mibp.certification.attack import attack_violation

torch = pytest.importorskip("torch")

GEN = np.random.default_rng(21)
X7 = GEN.normal(size=(7, 2))
Y7 = np.array([0, 1, 2, 0, 1, 2, 1])


# ----------------------------------------------------------------------------- unlearning
def _removal_runs(model, X, y, res, k):
    """Every run without at most ``k`` rows (the recipe's batches with them left out)."""
    for size in range(k + 1):
        for rows in itertools.combinations(range(len(X)), size):
            yield model.run(X, y, res.recipe.without(rows))


@pytest.mark.parametrize(
    "options",
    [
        {"epochs": 3},
        {"epochs": 2, "batch_size": 4, "momentum": 0.5},
        {"epochs": 2, "clip_value": 0.1, "weight_decay": 0.05},
        {"epochs": 2, "clip_norm": 0.3, "l1_penalty": 0.01},
    ],
)
def test_removals_hold_every_retrained_run(options):
    """Exhaustive check: every run without up to 2 of the 7 rows stays in the boxes of every epoch."""
    model = MLP.random([2, 4, 3], rng=0)
    res = certified_training(
        model, X7, Y7, perturbation=Removals(2), loss="cross_entropy", learning_rate=0.5, **options
    )
    for path in _removal_runs(model, X7, Y7, res, 2):
        for t in range(1, res.epochs + 1):
            assert res.contains(path[t], epoch=t)


def test_removals_one_step_equals_enumeration():
    """Exact oracle: from a point box each row's gradient is a point, so one step's box is the
    per-parameter hull of the steps without every set of at most 2 rows."""
    model = MLP.random([2, 3], rng=1)  # linear
    res = certified_training(model, X7, Y7, perturbation=Removals(2), loss="cross_entropy", learning_rate=0.5)
    thetas = np.array([p[1].to_vector() for p in _removal_runs(model, X7, Y7, res, 2)])
    lo, hi = res.lower[1].to_vector(), res.upper[1].to_vector()
    assert np.all(lo <= thetas.min(axis=0)) and np.all(hi >= thetas.max(axis=0))
    np.testing.assert_allclose(lo, thetas.min(axis=0), rtol=0, atol=1e-13)
    np.testing.assert_allclose(hi, thetas.max(axis=0), rtol=0, atol=1e-13)


def test_removals_by_hand():
    """Three rows with gradients 1, 2, 6 on one bias (MSE, f = b = 0, targets -0.5, -1, -3): without up to one
    row the mean is in [mean(1, 2), mean(2, 6)] = [1.5, 4]."""
    model = MLP([np.zeros((1, 1))], [np.zeros(1)])
    X = np.zeros((3, 1))
    y = np.array([-0.5, -1.0, -3.0])
    res = certified_training(model, X, y, perturbation=Removals(1), loss="mse", learning_rate=1.0)
    np.testing.assert_allclose(res.lower[1].biases[0], [-4.0], atol=1e-14)
    np.testing.assert_allclose(res.upper[1].biases[0], [-1.5], atol=1e-14)


def test_removals_attack_and_certified_predictions():
    model = MLP.random([2, 4, 3], rng=2)
    pert = Removals(2)
    res = certified_training(
        model, X7, Y7, perturbation=pert, loss="cross_entropy", epochs=2, learning_rate=0.5
    )
    violation, count = attack_violation(res, X7, Y7, pert, restarts=4, steps=4, rng=0)
    # every set of at most 2 of the 7 rows, then 4 x (4 + 1) runs with other rows removed at each step
    assert count == 29 + 20 and violation <= 0
    cert = certify_predictions(res, X7)
    for path in _removal_runs(model, X7, Y7, res, 2):  # a certified prediction is every retrained model's
        assert np.all(path[-1].predict(X7)[cert.certified] == cert.prediction[cert.certified])


def test_removals_refuse_what_they_cannot_bound():
    model = MLP.random([2, 3], rng=0)
    kwargs = dict(loss="cross_entropy", learning_rate=0.5)
    with pytest.raises(ValueError, match="Removals stands alone"):
        certified_training(model, X7, Y7, perturbation=Removals(1) & LabelFlips(1), **kwargs)
    with pytest.raises(ValueError, match="Removals stands alone"):
        certified_training(model, X7, Y7, perturbation=FeatureBox(0.1) & Removals(1), **kwargs)
    with pytest.raises(ValueError, match="Removals stands alone"):
        Budget(Removals(1), 2).sets(X7)
    with pytest.raises(ValueError, match=r"Removals\(4\) may remove every row of a batch of 4 rows"):
        certified_training(model, X7, Y7, perturbation=Removals(4), batch_size=4, **kwargs)
    with pytest.raises(ValueError, match="carry='shared' does not support Removals"):
        certified_training(model, X7, Y7, perturbation=Removals(1), carry="shared", **kwargs)
    with pytest.raises(ValueError, match="does not support Removals"):
        certified_training(
            MLP.random([2, 1], rng=0),
            X7,
            np.where(Y7 > 0, 1, -1),
            perturbation=Removals(1),
            loss="hinge",
            backend="milp",
        )
    with pytest.raises(ValueError, match="k must be"):
        Removals(-1)


# ----------------------------------------------------------------------------- frozen extractor
def _extractor(seed=0):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        net = torch.nn.Sequential(
            torch.nn.Conv2d(1, 3, 3, padding=1),
            torch.nn.BatchNorm2d(3),
            torch.nn.ReLU(),
            torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(3, 2, 2, stride=1),
            torch.nn.ReLU(),
            torch.nn.AvgPool2d(1),
            torch.nn.Dropout(0.5),
            torch.nn.Flatten(),
            torch.nn.Sequential(torch.nn.Linear(8, 5), torch.nn.ReLU(), torch.nn.Identity()),
        )
        with torch.no_grad():
            net[1].running_mean.uniform_(-0.3, 0.3)
            net[1].running_var.uniform_(0.5, 2.0)
            net[1].weight.uniform_(-1.5, 1.5)
    return net.eval()


IMAGES = np.random.default_rng(3).random((14, 1, 6, 6))
LABELS = np.random.default_rng(4).integers(0, 2, 14)


def test_extractor_bounds_hold_sampled_and_vertex_inputs():
    """Every sampled input of the box (uniform and vertices) has float64 features inside the bounds."""
    from certkit.mibp.enclosures.features import FrozenFeatures

    ext = FrozenFeatures(_extractor(), (1, 6, 6))
    X = IMAGES.reshape(14, -1)
    lo, hi = ext.bounds(X - 0.05, X + 0.05)
    gen = np.random.default_rng(0)
    for draw in range(200):
        noise = gen.choice([-0.05, 0.05], size=X.shape) if draw % 2 else gen.uniform(-0.05, 0.05, X.shape)
        f = ext.features(X + noise)
        assert np.all(lo <= f) and np.all(f <= hi)


def test_extractor_bounds_are_exact_for_one_affine_layer():
    """Exact oracle: for one convolution the interval bound is attained at inputs by the weights' signs."""
    from certkit.mibp.enclosures.features import FrozenFeatures

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(1)
        conv = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.Flatten()).double()
    ext = FrozenFeatures(conv, (1, 4, 4))
    x = np.random.default_rng(2).normal(size=(1, 16))
    lo, hi = ext.bounds(x - 0.1, x + 0.1)
    W = conv[0].weight.detach().numpy()
    for unit in range(lo.shape[1]):
        c, i, j = np.unravel_index(unit, (2, 2, 2))
        sign = np.zeros((4, 4))
        sign[i : i + 3, j : j + 3] = np.sign(W[c, 0])
        top = ext.features(x + 0.1 * sign.reshape(1, -1))[0, unit]
        bottom = ext.features(x - 0.1 * sign.reshape(1, -1))[0, unit]
        assert lo[0, unit] <= bottom and top <= hi[0, unit]
        assert top - hi[0, unit] > -1e-12 and lo[0, unit] - bottom > -1e-12


def test_unperturbed_rows_keep_exact_features():
    net = _extractor()
    head = MLP.random([5, 3, 2], rng=0)
    res = certified_training(
        head,
        IMAGES,
        LABELS,
        perturbation=Budget(FeatureBox(0.05, points=[0, 1]), 1),
        loss="cross_entropy",
        features=net,
        learning_rate=0.3,
    )
    with torch.no_grad():
        exact = net.double()(torch.from_numpy(IMAGES)).numpy()
    np.testing.assert_array_equal(res.features.features(IMAGES.reshape(14, -1)), exact)
    # the sets the head is certified on: rows 2..13 are exactly their features, rows 0 and 1 boxes around them
    pert = Budget(FeatureBox(0.05, points=[0, 1]), 1)
    sets = res.features.feature_sets(pert.sets(IMAGES.reshape(14, -1)))
    np.testing.assert_array_equal(sets.nominal, exact)
    assert np.all(sets.lower[2:] == exact[2:]) and np.all(sets.upper[2:] == exact[2:])
    assert np.all(sets.lower[:2] <= exact[:2]) and np.all(sets.upper[:2] >= exact[:2])
    assert np.all(sets.upper[:2] - sets.lower[:2] > 0) and sets.budget == 1


def test_the_extractor_writes_nothing_and_runs_no_hooks():
    """An in-place ReLU does not change the caller's inputs; hooks and statistics-free batch norm are refused
    (the features would differ from what is bounded: the reviewer's counterexamples)."""
    from certkit.mibp.enclosures.features import FrozenFeatures

    X = -np.ones((3, 16))
    ext = FrozenFeatures(torch.nn.Sequential(torch.nn.ReLU(inplace=True), torch.nn.Flatten()), (1, 4, 4))
    assert np.all(ext.features(X) == 0.0) and np.all(X == -1.0)
    hooked = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 2))
    hooked[1].register_forward_hook(lambda module, inputs, out: out + 1.0)
    with pytest.raises(TypeError, match=r"features has forward hooks \(features\[1\]\)"):
        FrozenFeatures(hooked, (1, 4, 4))
    batch_stats = torch.nn.Sequential(
        torch.nn.Conv2d(1, 1, 3), torch.nn.BatchNorm2d(1, track_running_stats=False), torch.nn.Flatten()
    )
    with pytest.raises(TypeError, match="without running statistics"):
        certified_training(
            MLP.random([4, 2], rng=0),
            np.zeros((6, 1, 4, 4)),
            np.arange(6) % 2,
            perturbation=Removals(1),
            loss="cross_entropy",
            features=batch_stats,
        )


@pytest.mark.parametrize(
    ("perturbation", "carry"),
    [
        (Budget(FeatureBox(0.05), 3), "box"),
        (Budget(FeatureBox(0.05), 3), "shared"),
        (FeatureBox(0.02) & LabelFlips(1), "box"),
        (Budget(FeatureBox(0.1) & LabelFlips(1), 2), "shared"),
    ],
)
def test_attacks_through_the_extractor_stay_inside(perturbation, carry):
    """Projected gradient ascent on the raw pixels, through the frozen extractor and the unrolled training."""
    res = certified_training(
        MLP.random([5, 4, 2], rng=1),
        IMAGES,
        LABELS,
        perturbation=perturbation,
        loss="cross_entropy",
        epochs=2,
        learning_rate=0.5,
        features=_extractor(),
        carry=carry,
        batch_size=7,
    )
    violation, count = attack_violation(res, IMAGES, LABELS, perturbation, restarts=4, steps=6, rng=1)
    assert count >= 4 and violation <= 0
    acc = res.certified_accuracy(IMAGES, LABELS)
    assert acc.shape == (3,) and acc[0] == res.nominal_accuracy(IMAGES, LABELS)[0]
    cert = certify_predictions(res, IMAGES)
    assert cert.certified_accuracy(LABELS) == acc[-1]


def test_extractor_refuses_what_it_cannot_bound():
    head = MLP.random([5, 2], rng=0)
    kwargs = dict(perturbation=FeatureBox(0.01), loss="cross_entropy")
    bad = torch.nn.Sequential(torch.nn.Conv2d(1, 1, 3), torch.nn.Tanh(), torch.nn.Flatten())
    with pytest.raises(TypeError, match=r"features\[1\] is a Tanh, which certkit cannot bound"):
        certified_training(head, IMAGES, LABELS, features=bad, **kwargs)
    with pytest.raises(TypeError, match=r"features must be a torch\.nn\.Sequential"):
        certified_training(head, IMAGES, LABELS, features=torch.nn.Linear(36, 5), **kwargs)
    with pytest.raises(ValueError, match="features outputs 8 values per row but the model expects 5"):
        certified_training(head, IMAGES, LABELS, features=_extractor()[:-1], **kwargs)
    with pytest.raises(
        ValueError,
        match=r"features\[0\] \(Conv2d.*takes rows of shape \(channels, height, width\); the rows "
        r"reaching it have shape \(36,\)",
    ):
        certified_training(head, IMAGES.reshape(14, 36), LABELS, features=_extractor(), **kwargs)
    reflect = torch.nn.Sequential(
        torch.nn.Conv2d(1, 1, 3, padding=1, padding_mode="reflect"), torch.nn.Flatten()
    )
    with pytest.raises(TypeError, match="only zeros are bounded"):
        certified_training(MLP.random([36, 2], rng=0), IMAGES, LABELS, features=reflect, **kwargs)
    res = certified_training(head, IMAGES, LABELS, features=_extractor(), **kwargs)
    with pytest.raises(ValueError, match="X_test must have shape"):
        certify_predictions(res, IMAGES.reshape(14, 36))


# ----------------------------------------------------------------------------- regression certificate
def test_regression_certificate_bounds_every_model_in_the_box():
    gen = np.random.default_rng(5)
    X = gen.normal(size=(30, 3))
    y = X @ np.array([1.0, -0.5, 0.2])
    res = certified_training(
        MLP.random([3, 6, 1], rng=0),
        X,
        y,
        perturbation=Budget(TargetBox(0.3), 4),
        loss="mse",
        epochs=2,
        learning_rate=0.05,
    )
    cert = certify_regression(res, X)
    lo, hi = res.lower[-1].to_vector(), res.upper[-1].to_vector()
    worst = 0.0
    for _ in range(200):  # parameter vectors of the box, vertices half of the time
        u = gen.random(lo.shape)
        theta = lo + (np.round(u) if gen.random() < 0.5 else u) * (hi - lo)
        f = MLP.from_vector(theta, res.nominal.sizes).forward(X)
        assert np.all(cert.lower <= f) and np.all(f <= cert.upper)
        worst = max(worst, float(np.mean((f[:, 0] - y) ** 2)))
    assert worst <= cert.mse_bound(y)
    assert np.all(cert.squared_error_bound(y) >= (cert.prediction[:, 0] - y) ** 2)
    assert "regression certificate" in cert.summary()
    with pytest.raises(ValueError, match="y must have shape"):
        cert.mse_bound(y[:-1])
