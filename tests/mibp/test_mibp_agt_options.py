"""AGT's remaining recipe options: per-sample gradient clipping (by value and by norm), the L1 penalty,
targeted label flips and regression target poisoning (TargetBox): exact oracles by enumeration, the
nominal run against hand computations and torch, and bad options."""

import itertools

import numpy as np
import pytest

from certkit.mibp import (
    MLP,
    Budget,
    FeatureBox,
    LabelFlips,
    TargetBox,
    certified_training,
)
from certkit.mibp.certification.attack import attack_violation

GEN = np.random.default_rng(11)
X6 = GEN.normal(size=(6, 2))
Y_BINARY = np.array([1.0, -1.0, 1.0, 1.0, -1.0, -1.0])
Y_CLASSES = np.array([0, 1, 2, 0, 2, 1])
Y_REAL = X6 @ np.array([0.7, -1.2]) + 0.1


def _enumerated_box(model, X, datasets, **recipe):
    """Per-parameter min and max of one training step over the given datasets (X', y')."""
    thetas = np.array([model.train(Xd, yd, epochs=1, **recipe)[1].to_vector() for Xd, yd in datasets])
    return thetas.min(axis=0), thetas.max(axis=0)


def _flip_datasets(y, k, changes):
    """Every dataset with at most ``k`` labels changed (``changes(label)``: a row's allowed new labels)."""
    for size in range(k + 1):
        for rows in itertools.combinations(range(len(y)), size):
            for labels in itertools.product(*[changes(y[r]) for r in rows]):
                yd = y.copy()
                yd[list(rows)] = labels
                yield X6, yd


def _assert_equal_box(res, lo, hi):
    """The certified box holds every enumerated step and is tight up to its rounding allowance."""
    L, U = res.lower[1].to_vector(), res.upper[1].to_vector()
    assert np.all(L <= lo) and np.all(U >= hi)
    np.testing.assert_allclose(L, lo, rtol=0, atol=1e-12)
    np.testing.assert_allclose(U, hi, rtol=0, atol=1e-12)


RECIPES = [
    {"clip_value": 0.15},
    {"clip_norm": 0.4},
    {"l1_penalty": 0.05},
    {"clip_value": 0.2, "l1_penalty": 0.02, "weight_decay": 0.1},
]


@pytest.mark.parametrize("recipe", RECIPES)
@pytest.mark.parametrize("target", [None, 1])
def test_binary_label_flips_equal_enumeration(recipe, target):
    """Exact oracle: from a point box, one step under LabelFlips(2) (optionally targeted at +1) is the
    per-parameter hull of the steps on every dataset with at most 2 labels flipped."""
    model = MLP.random([2, 1], rng=0)  # linear: each row's gradient is a point for each label
    options = dict(loss="hinge", learning_rate=0.5, **recipe)
    res = certified_training(model, X6, Y_BINARY, perturbation=LabelFlips(2, target=target), **options)
    changes = (lambda v: [-v]) if target is None else (lambda v: [] if v == target else [target])
    lo, hi = _enumerated_box(model, X6, _flip_datasets(Y_BINARY, 2, changes), **options)
    _assert_equal_box(res, lo, hi)


@pytest.mark.parametrize("recipe", RECIPES)
@pytest.mark.parametrize("target", [None, 2])
def test_multiclass_cross_entropy_flips_equal_enumeration(recipe, target):
    """Exact oracle for three classes under cross-entropy: any other class, or only class 2."""
    model = MLP.random([2, 3], rng=1)
    options = dict(loss="cross_entropy", learning_rate=0.5, **recipe)
    res = certified_training(model, X6, Y_CLASSES, perturbation=LabelFlips(2, target=target), **options)
    if target is None:
        changes = lambda v: [c for c in range(3) if c != v]  # noqa: E731
    else:
        changes = lambda v: [] if v == target else [target]  # noqa: E731
    lo, hi = _enumerated_box(model, X6, _flip_datasets(Y_CLASSES, 2, changes), **options)
    if target is None and "clip_norm" in recipe:
        # two possible new labels: a flipped row's gradient is the hull of two points, whose norm (and so
        # its clipping factor) is bounded over that box, not per label: sound, not exact
        L, U = res.lower[1].to_vector(), res.upper[1].to_vector()
        assert np.all(L <= lo) and np.all(U >= hi)
        return
    _assert_equal_box(res, lo, hi)


@pytest.mark.parametrize("budget", [None, 2])
@pytest.mark.parametrize("recipe", [{}, {"clip_value": 0.5}, {"l1_penalty": 0.05}])
def test_target_box_equals_enumeration(budget, recipe):
    """Exact oracle: with exact inputs an MSE gradient is linear in each row's target, so one step's box is
    the hull over the targets at the ends of their intervals (every row, or at most ``budget`` rows)."""
    model = MLP.random([2, 1], rng=2)
    eps = 0.3
    pert = TargetBox(eps) if budget is None else Budget(TargetBox(eps), budget)
    options = dict(loss="mse", learning_rate=0.1, **recipe)
    res = certified_training(model, X6, Y_REAL, perturbation=pert, **options)
    datasets = []
    subsets = (
        [tuple(range(6))]
        if budget is None
        else [r for s in range(budget + 1) for r in itertools.combinations(range(6), s)]
    )
    for rows in subsets:
        for signs in itertools.product((-1.0, 1.0), repeat=len(rows)):
            yd = Y_REAL.copy()
            yd[list(rows)] += eps * np.asarray(signs)
            datasets.append((X6, yd))
    lo, hi = _enumerated_box(model, X6, datasets, **options)
    _assert_equal_box(res, lo, hi)


def test_clipping_by_hand():
    """Two rows, f = w x + b, MSE: the per-sample gradients (2 r x, 2 r) with r = w x + b - y, clipped by
    value to [-1, 1] or scaled to norm 1, then averaged (and the certified box of a zero perturbation is
    that step)."""
    model = MLP([np.array([[2.0]])], [np.array([0.5])])
    X = np.array([[1.0], [-0.5]])
    y = np.array([0.0, 1.0])
    r = 2.0 * X[:, 0] + 0.5 - y  # residuals 2.5, -1.5
    G = np.stack([2 * r * X[:, 0], 2 * r], axis=1)  # [[5, 5], [1.5, -3]]
    by_value = np.clip(G, -1, 1).mean(axis=0)
    norms = np.sqrt((G * G).sum(axis=1))
    by_norm = (G * np.minimum(1.0 / (norms + 1e-6), 1.0)[:, None]).mean(axis=0)
    for options, grad in (({"clip_value": 1.0}, by_value), ({"clip_norm": 1.0}, by_norm)):
        trained = model.train(X, y, loss="mse", learning_rate=0.1, **options)[1].to_vector()
        np.testing.assert_allclose(trained, np.array([2.0, 0.5]) - 0.1 * grad, rtol=0, atol=1e-15)
        res = certified_training(
            model, X, y, perturbation=FeatureBox(0.0), loss="mse", learning_rate=0.1, **options
        )
        assert np.all(res.lower[1].to_vector() <= trained) and np.all(trained <= res.upper[1].to_vector())
        np.testing.assert_allclose(res.upper[1].to_vector(), trained, rtol=0, atol=1e-14)


def test_l1_penalty_by_hand():
    """θ' = θ - λ (g + λ₁ sign θ): sign(0) = 0, and a box across 0 keeps every shrunk value."""
    model = MLP([np.array([[1.0, -2.0, 0.0]])], [np.array([0.0])])
    X = np.zeros((1, 3))
    y = np.array([0.0])
    trained = model.train(X, y, loss="mse", learning_rate=0.5, l1_penalty=0.1)[1].to_vector()
    np.testing.assert_allclose(trained, [0.95, -1.95, 0.0, 0.0], rtol=0, atol=1e-15)


def test_clipped_nominal_run_equals_torch_per_sample_clipping():
    torch = pytest.importorskip("torch")
    gen = np.random.default_rng(5)
    X = gen.normal(size=(10, 3))
    y = gen.integers(0, 3, size=10)
    model = MLP.random([3, 4, 3], rng=2)
    for options in ({"clip_value": 0.05}, {"clip_norm": 0.3}):
        ours = model.train(
            X, y, loss="cross_entropy", epochs=2, learning_rate=0.4, batch_size=4, momentum=0.5, **options
        )[-1]
        net = model.to_torch()
        opt = torch.optim.SGD(net.parameters(), lr=0.4, momentum=0.5)
        Xt, yt = torch.from_numpy(X), torch.from_numpy(y)
        for _ in range(2):
            for start in range(0, 10, 4):
                rows = slice(start, start + 4)
                per = []
                for xk, yk in zip(Xt[rows], yt[rows]):
                    net.zero_grad()
                    torch.nn.functional.cross_entropy(net(xk[None]), yk[None]).backward()
                    per.append(torch.cat([p.grad.reshape(-1) for p in net.parameters()]))
                G = torch.stack(per)
                if "clip_value" in options:
                    G = G.clamp(-options["clip_value"], options["clip_value"])
                else:
                    norms = G.norm(dim=1, keepdim=True)
                    G = G * (options["clip_norm"] / (norms + 1e-6)).clamp(max=1.0)
                mean, pos = G.mean(dim=0), 0
                for p in net.parameters():
                    p.grad = mean[pos : pos + p.numel()].reshape(p.shape).clone()
                    pos += p.numel()
                opt.step()
        np.testing.assert_allclose(MLP.from_torch(net).to_vector(), ours.to_vector(), rtol=0, atol=1e-12)


@pytest.mark.parametrize(
    ("loss", "perturbation", "options"),
    [
        ("cross_entropy", Budget(FeatureBox(0.2) & LabelFlips(1, target=0), 3), {"clip_norm": 0.3}),
        ("cross_entropy", FeatureBox(0.1) & LabelFlips(2, target=1), {"clip_value": 0.1, "momentum": 0.5}),
        ("hinge", Budget(FeatureBox(0.3), 2), {"l1_penalty": 0.05, "batch_size": 4}),
        ("mse", Budget(FeatureBox(0.1) & TargetBox(0.5), 3), {"clip_value": 0.3, "l1_penalty": 0.02}),
        ("mse", FeatureBox(0.05) & TargetBox(0.3), {"weight_decay": 0.1}),
    ],
)
def test_attacked_trajectories_stay_inside(loss, perturbation, options):
    """Empirical soundness: projected gradient ascent (inputs and targets) through the unrolled training,
    and sampled datasets, never leave the boxes."""
    torch = pytest.importorskip("torch")
    del torch
    gen = np.random.default_rng(4)
    X = gen.normal(size=(9, 2))
    if loss == "mse":
        y, out = X @ np.array([1.0, -1.0]), 1
    elif loss == "hinge":
        y, out = np.where(X[:, 0] > 0, 1.0, -1.0), 1
    else:
        y, out = gen.integers(0, 3, size=9), 3
    model = MLP.random([2, 4, out], rng=3)
    for chunk in (1, None):
        res = certified_training(
            model,
            X,
            y,
            perturbation=perturbation,
            loss=loss,
            epochs=3,
            learning_rate=0.3,
            chunk_size=chunk,
            **options,
        )
        violation, count = attack_violation(res, X, y, perturbation, restarts=6, steps=6, rng=gen)
        assert count >= 6 and violation <= 0.0


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"clip_value": 0.0}, ValueError, "clip_value must be a finite number > 0"),
        ({"clip_norm": -1.0}, ValueError, "clip_norm must be a finite number > 0"),
        ({"clip_value": 1.0, "clip_norm": 1.0}, ValueError, "at most one of clip_value and clip_norm"),
        ({"clip_value": "1"}, TypeError, "clip_value must be a real number"),
        ({"l1_penalty": -0.1}, ValueError, "l1_penalty must be a finite number >= 0"),
        ({"l1_penalty": np.nan}, ValueError, "l1_penalty must be a finite number >= 0"),
        ({"clip_value": 1.0, "carry": "shared"}, ValueError, "carry='shared' does not support per-sample"),
        ({"l1_penalty": 0.1, "carry": "affine"}, ValueError, "carry='affine' does not support l1_penalty"),
        ({"clip_norm": 1.0, "backend": "milp"}, ValueError, "backend='milp' does not support"),
    ],
)
def test_bad_recipe_options(kwargs, error, match):
    with pytest.raises(error, match=match):
        certified_training(
            MLP.random([2, 2, 3], rng=0),
            X6,
            Y_CLASSES,
            perturbation=FeatureBox(0.01),
            loss="cross_entropy",
            **kwargs,
        )


def test_bad_targets_and_target_boxes():
    model = MLP.random([2, 3], rng=0)
    with pytest.raises(ValueError, match=r"LabelFlips\(target=3\) must be one of the labels"):
        certified_training(model, X6, Y_CLASSES, perturbation=LabelFlips(1, target=3), loss="cross_entropy")
    with pytest.raises(ValueError, match=r"LabelFlips\(target=0\) must be one of the labels"):
        certified_training(
            MLP.random([2, 1], rng=0), X6, Y_BINARY, perturbation=LabelFlips(1, target=0), loss="hinge"
        )
    with pytest.raises(ValueError, match="TargetBox perturbs regression targets and needs loss='mse'"):
        certified_training(model, X6, Y_CLASSES, perturbation=TargetBox(0.1), loss="cross_entropy")
    with pytest.raises(ValueError, match="does not support targeted label flips"):
        certified_training(
            MLP.random([2, 1], rng=0),
            X6,
            Y_BINARY,
            perturbation=LabelFlips(1, target=1),
            loss="hinge",
            backend="milp",
        )
    with pytest.raises(ValueError, match="does not support TargetBox"):
        certified_training(
            MLP.random([2, 1], rng=0), X6, Y_REAL, perturbation=TargetBox(0.1), loss="mse", carry="affine"
        )
    with pytest.raises(TypeError, match="target must be a label value"):
        LabelFlips(1, target="a")
    with pytest.raises(ValueError, match="target must be an integer label value"):
        LabelFlips(1, target=0.5)
    with pytest.raises(ValueError, match="epsilon must be >= 0"):
        TargetBox(-0.1)
    with pytest.raises(ValueError, match="one entry per point"):
        TargetBox(np.ones(3)).sets(X6)
    with pytest.raises(ValueError, match="TargetBox may appear only once"):
        (TargetBox(0.1) & TargetBox(0.2)).sets(X6)
    with pytest.raises(ValueError, match="Budget must be the outermost"):
        Budget(TargetBox(0.1), 2).sets(X6) and (TargetBox(0.1) & Budget(FeatureBox(0.1), 2)).sets(X6)
