"""Training recipes (cross-entropy, schedules, mini-batches, momentum, weight decay, label flips between
classes, paired poisoning): the nominal run equals torch.optim.SGD, exact oracles on small cases, and no
sampled training run ever leaves its certified box."""

import numpy as np
import pytest

from certkit.mibp import (
    MLP,
    Budget,
    FeatureBox,
    InverseDecay,
    LabelFlips,
    certified_training,
    certify_predictions,
)
from certkit.mibp.certification.attack import attack_violation
from certkit.mibp.certification.cases import RECIPE_KINDS, random_recipe_case, recipe_kind_supported
from certkit.mibp.enclosures.interval import _affine, _hidden_derivative_ce, softmax_bounds
from certkit.mibp.enclosures.sgd_step import BoundsOverflowError
from certkit.mibp.problem.losses import label_classes
from certkit.mibp.problem.recipe import make_recipe

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(0)
X = RNG.normal(size=(23, 3))
LABELS = {
    "cross_entropy": (3, (X[:, 0] > 0).astype(int) + (X[:, 1] > 0.4)),
    "binary_cross_entropy": (1, (X[:, 0] > 0).astype(int)),
    "hinge": (3, (X[:, 0] > 0).astype(int) + (X[:, 1] > 0.4)),
    "mse": (2, X[:, :2] * 0.5),
}
RECIPES = {
    "full batch, constant": dict(learning_rate=0.3),
    "schedule and momentum": dict(learning_rate=InverseDecay(0.5, 0.6, minimum=0.05), momentum=0.9),
    "shuffled batches and weight decay": dict(
        learning_rate=0.2, batch_size=5, shuffle=True, weight_decay=0.05, rng=3
    ),
    "everything": dict(
        learning_rate=[0.3, 0.2, 0.1] * 3,
        batch_size=7,
        drop_last=True,
        shuffle=True,
        momentum=0.5,
        weight_decay=0.01,
        rng=1,
    ),
}


def _torch_loss(out, y, loss):
    if loss == "cross_entropy":
        return torch.nn.functional.cross_entropy(out, torch.tensor(y))
    if loss == "binary_cross_entropy":
        return torch.nn.functional.binary_cross_entropy_with_logits(
            out[:, 0], torch.tensor(y, dtype=out.dtype)
        )
    if loss == "mse":
        return ((out - torch.tensor(y)) ** 2).sum(dim=1).mean()
    rows = torch.arange(len(y))
    fy = out[rows, torch.tensor(y)][:, None]
    terms = torch.relu(1.0 + out - fy)
    terms = terms.masked_fill(torch.nn.functional.one_hot(torch.tensor(y), out.shape[1]).bool(), 0.0)
    return terms.sum(dim=1).mean()


def _torch_sgd(net, X, y, loss, recipe):
    opt = torch.optim.SGD(
        net.parameters(), lr=1.0, momentum=recipe.momentum, weight_decay=recipe.weight_decay
    )
    Xt = torch.tensor(X)
    path = [MLP.from_torch(net)]
    for step, rows in enumerate(recipe.batches):
        for group in opt.param_groups:
            group["lr"] = float(recipe.rates[step])
        opt.zero_grad()
        _torch_loss(net(Xt[rows]), y[rows], loss).backward()
        opt.step()
        if (step + 1) % recipe.steps_per_epoch == 0:
            path.append(MLP.from_torch(net))
    return path


@pytest.mark.parametrize("recipe_name", list(RECIPES))
@pytest.mark.parametrize("loss", list(LABELS))
def test_nominal_run_equals_torch_sgd(loss, recipe_name):
    torch.manual_seed(0)
    C, y = LABELS[loss]
    net = torch.nn.Sequential(torch.nn.Linear(3, 6), torch.nn.ReLU(), torch.nn.Linear(6, C)).double()
    model = MLP.from_torch(net)
    options = RECIPES[recipe_name]
    path = model.train(X, y, loss=loss, epochs=3, **options)
    recipe = make_recipe(len(X), loss=loss, epochs=3, **options)
    expected = _torch_sgd(net, X, y, loss, recipe)
    assert len(path) == len(expected) == 4
    for ours, theirs in zip(path, expected):
        np.testing.assert_allclose(ours.to_vector(), theirs.to_vector(), rtol=0, atol=1e-10)


def test_batch_order_is_drawn_once_and_stored():
    options = dict(loss="cross_entropy", epochs=2, learning_rate=0.1, batch_size=4, shuffle=True)
    a = make_recipe(10, rng=5, **options)
    b = make_recipe(10, rng=5, **options)
    c = make_recipe(10, rng=6, **options)
    assert a.steps_per_epoch == 3 and a.n_steps == 6
    assert all(np.array_equal(p, q) for p, q in zip(a.batches, b.batches))
    assert not all(np.array_equal(p, q) for p, q in zip(a.batches, c.batches))
    for epoch in range(2):  # every row once per epoch
        rows = np.concatenate(a.batches[3 * epoch : 3 * epoch + 3])
        assert sorted(rows) == list(range(10))
    dropped = make_recipe(10, drop_last=True, rng=5, **options)
    assert dropped.steps_per_epoch == 2 and all(len(b) == 4 for b in dropped.batches)
    C, y = LABELS["cross_entropy"]
    res = certified_training(
        MLP.random([3, 4, C], rng=0),
        X,
        y,
        perturbation=FeatureBox(0.01),
        batch_size=5,
        shuffle=True,
        rng=5,
        loss="cross_entropy",
        epochs=2,
    )
    assert np.array_equal(
        np.concatenate(res.recipe.batches),
        np.concatenate(
            make_recipe(
                len(X), loss="cross_entropy", epochs=2, learning_rate=0.1, batch_size=5, shuffle=True, rng=5
            ).batches
        ),
    )


def test_inverse_decay_is_agts_schedule():
    rate = InverseDecay(2.0, 0.6, minimum=1e-3)
    assert [rate(s) for s in range(4)] == [2.0, 2.0 / 1.6, 2.0 / 2.2, 2.0 / 2.8]
    assert InverseDecay(1.0, 1.0, minimum=0.25)(10) == 0.25
    recipe = make_recipe(5, loss="hinge", epochs=3, learning_rate=rate)
    np.testing.assert_array_equal(recipe.rates, [2.0, 2.0 / 1.6, 2.0 / 2.2])


# ------------------------------------------------------------------ soundness
PERTURBATIONS = {
    "features": FeatureBox(0.05),
    "budget": Budget(FeatureBox(0.2), 3),
    "label flips": LabelFlips(2),
    "features and flips": FeatureBox(0.02) & LabelFlips(1),
    "paired": Budget(FeatureBox(0.2) & LabelFlips(1), 2),
}


def _check_sound(res, model, y, perturbation, loss, C, draws=30, seed=0):
    sets = perturbation.sets(X)
    gen = np.random.default_rng(seed)
    worst = -np.inf
    for i in range(draws):
        Xp, yp = sets.sample_dataset(y, gen, vertex=i % 2 == 0, classes=label_classes(loss, C))
        path = model.run(Xp, yp.astype(y.dtype), res.recipe)
        for t, theta in enumerate(path):
            v = theta.to_vector()
            worst = max(worst, np.max(res.lower[t].to_vector() - v), np.max(v - res.upper[t].to_vector()))
    assert worst <= 0.0, f"a sampled training run leaves its box by {worst}"


@pytest.mark.filterwarnings("ignore:carry='affine' relaxes:UserWarning")  # soundness, not advice
@pytest.mark.parametrize("carry", ["box", "affine", "shared"])
@pytest.mark.parametrize("pert_name", list(PERTURBATIONS))
@pytest.mark.parametrize("loss", ["cross_entropy", "binary_cross_entropy", "hinge"])
def test_sampled_runs_stay_inside(loss, pert_name, carry):
    C, y = LABELS[loss]
    model = MLP.random([3, 5, C], rng=2)
    options = RECIPES["everything"]
    perturbation = PERTURBATIONS[pert_name]
    res = certified_training(
        model, X, y, perturbation=perturbation, loss=loss, epochs=3, carry=carry, **options
    )
    _check_sound(res, model, y, perturbation, loss, C)


def test_two_hidden_layers_and_saturated_softmax_sound():
    C, y = LABELS["cross_entropy"]
    model = MLP.random([3, 6, 4, C], rng=4)
    big = MLP(list(np.array(w) * 6.0 for w in model.weights), list(model.biases))  # logits of order 50
    assert np.abs(big.forward(X)).max() > 20
    for m in (model, big):
        res = certified_training(
            m,
            X,
            y,
            perturbation=Budget(FeatureBox(0.05) & LabelFlips(1), 2),
            loss="cross_entropy",
            epochs=2,
            learning_rate=0.05,
            momentum=0.5,
            batch_size=8,
        )
        _check_sound(res, m, y, Budget(FeatureBox(0.05) & LabelFlips(1), 2), "cross_entropy", C)


def test_budget_larger_than_a_batch_and_strong_weight_decay():
    C, y = LABELS["binary_cross_entropy"]
    model = MLP.random([3, 4, 1], rng=1)
    pert = Budget(FeatureBox(0.1), 12)
    # 1 - lr * weight_decay < 0: the decayed parameter changes sign
    res = certified_training(
        model,
        X,
        y,
        perturbation=pert,
        loss="binary_cross_entropy",
        epochs=2,
        learning_rate=0.5,
        weight_decay=3.0,
        batch_size=6,
    )
    _check_sound(res, model, y, pert, "binary_cross_entropy", C)


def test_epsilon_zero_collapses_onto_the_sgd_run():
    C, y = LABELS["cross_entropy"]
    model = MLP.random([3, 5, C], rng=0)
    options = RECIPES["everything"]
    res = certified_training(
        model, X, y, perturbation=FeatureBox(0.0), loss="cross_entropy", epochs=3, **options
    )
    for t, theta in enumerate(res.nominal_path):
        lo, hi, v = res.lower[t].to_vector(), res.upper[t].to_vector(), theta.to_vector()
        assert np.all(lo <= v) and np.all(v <= hi)
        assert np.max(hi - lo) < 1e-9 * max(1.0, np.abs(v).max())


# ------------------------------------------------------------------ exact oracles
def test_one_dimensional_cross_entropy_oracle_with_schedule_and_momentum():
    """One point x in [x0 - eps, x0 + eps], a linear 2-class model z = W x + b, two steps of SGD with a
    decaying rate and momentum: the reachable parameters form a curve in x, traced on a dense grid.

    After the first step the bias moves by ``-λ_0 (softmax(z) - onehot)``, monotone in x: its exact range
    is the two endpoints, which the interval bound equals up to padding.  Every later box contains the
    whole curve."""
    model = MLP([np.array([[0.7], [-0.4]])], [np.array([0.1, -0.2])])
    x0, eps, y = 0.8, 0.3, np.array([1])
    rate = InverseDecay(1.5, 0.6)
    kw = dict(loss="cross_entropy", epochs=3, learning_rate=rate, momentum=0.8, weight_decay=0.1)
    res = certified_training(model, np.array([[x0]]), y, perturbation=FeatureBox(eps), **kw)
    recipe = res.recipe
    grid = np.linspace(x0 - eps, x0 + eps, 20001)
    curves = np.array([[t.to_vector() for t in model.run(np.array([[x]]), y, recipe)] for x in grid])
    for t in range(1, 4):
        lo, hi = res.lower[t].to_vector(), res.upper[t].to_vector()
        assert np.all(lo <= curves[:, t].min(axis=0)) and np.all(curves[:, t].max(axis=0) <= hi)
    # step 1: the biases' exact ranges are attained at the grid's ends
    lo, hi = res.lower[1].to_vector()[2:], res.upper[1].to_vector()[2:]
    exact_lo, exact_hi = curves[:, 1, 2:].min(axis=0), curves[:, 1, 2:].max(axis=0)
    np.testing.assert_allclose(lo, exact_lo, rtol=0, atol=1e-12)
    np.testing.assert_allclose(hi, exact_hi, rtol=0, atol=1e-12)


def test_softmax_bounds_are_the_exact_range_over_difference_boxes():
    gen = np.random.default_rng(3)
    for C in (2, 3, 5):
        z = gen.normal(size=C) * 3
        w = gen.uniform(0, 2, size=C)
        zL, zU = z - w, z + w
        dL = zL[None, :] - zU[:, None]
        dU = zU[None, :] - zL[:, None]
        sL, sU = softmax_bounds(dL[None], dU[None])
        samples = gen.uniform(zL, zU, size=(20000, C))
        corners = np.array(np.meshgrid(*zip(zL, zU))).reshape(C, -1).T
        pts = np.vstack([samples, corners])
        s = np.exp(pts - pts.max(axis=1, keepdims=True))
        s /= s.sum(axis=1, keepdims=True)
        assert np.all(sL[0] <= s.min(axis=0)) and np.all(s.max(axis=0) <= sU[0])
        # attained at corners (each entry's own logit at one end, the others at the other)
        np.testing.assert_allclose(sL[0], s.min(axis=0), atol=1e-13)
        np.testing.assert_allclose(sU[0], s.max(axis=0), atol=1e-13)


def test_interval_matrix_product_equals_corner_enumeration():
    gen = np.random.default_rng(1)
    WL = gen.normal(size=(4, 3))
    WU = WL + gen.uniform(0, 1, size=(4, 3))
    hL = gen.normal(size=(5, 3))
    hU = hL + gen.uniform(0, 1.5, size=(5, 3))  # some entries straddle 0
    hL[0] = hU[0] = gen.normal(size=3)  # a point
    b = np.zeros(4)
    lo, hi = _affine(WL, WU, b, b, hL, hU)
    for k in range(5):
        for o in range(4):
            ends = [[a * c for a in (WL[o, i], WU[o, i]) for c in (hL[k, i], hU[k, i])] for i in range(3)]
            exact_lo = sum(min(e) for e in ends)
            exact_hi = sum(max(e) for e in ends)
            assert lo[k, o] <= exact_lo and exact_hi <= hi[k, o]
            assert exact_lo - lo[k, o] < 1e-12 and hi[k, o] - exact_hi < 1e-12


def test_hidden_derivative_of_cross_entropy_contains_every_choice():
    gen = np.random.default_rng(2)
    C, H, n = 3, 4, 6
    WL = gen.normal(size=(C, H))
    WU = WL + gen.uniform(0, 0.3, size=(C, H))
    y = gen.integers(0, C, n)
    # output derivatives softmax(z) - onehot(y) for logits in a box
    z = gen.normal(size=(n, C))
    draws = []
    for _ in range(400):
        zz = z + gen.uniform(-0.5, 0.5, size=(n, C))
        s = np.exp(zz - zz.max(axis=1, keepdims=True))
        s /= s.sum(axis=1, keepdims=True)
        s[np.arange(n), y] -= 1.0
        draws.append(s)
    draws = np.array(draws)
    gL, gU = draws.min(axis=0), draws.max(axis=0)
    lo, hi = _hidden_derivative_ce(WL, WU, gL, gU, y)
    for g in draws[:50]:
        for W in (WL, WU, WL + gen.uniform(0, 1, size=WL.shape) * (WU - WL)):
            v = g @ W
            assert np.all(lo <= v) and np.all(v <= hi)


def test_certified_predictions_hold_for_every_sampled_model_in_the_box():
    C, y = LABELS["cross_entropy"]
    model = MLP.random([3, 6, C], rng=0)
    res = certified_training(
        model, X, y, perturbation=FeatureBox(0.05), loss="cross_entropy", epochs=2, learning_rate=0.2
    )
    cert = certify_predictions(res, X)
    assert cert.certified.any()
    lo, hi = res.lower[-1].to_vector(), res.upper[-1].to_vector()
    gen = np.random.default_rng(0)
    for _ in range(200):
        theta = MLP.from_vector(np.where(gen.random(lo.size) < 0.5, lo, hi), model.sizes)
        assert np.array_equal(theta.predict(X)[cert.certified], cert.prediction[cert.certified])


# ------------------------------------------------------------------ errors
def test_program_backends_name_the_backend_that_supports_a_recipe():
    C, y = LABELS["cross_entropy"]
    model = MLP.random([3, 3, C], rng=0)
    with pytest.raises(ValueError, match=r"backend='milp' does not support loss='cross_entropy'.*'interval'"):
        certified_training(model, X, y, perturbation=FeatureBox(0.01), loss="cross_entropy", backend="milp")
    _, yh = LABELS["hinge"]
    for bad in (dict(momentum=0.5), dict(batch_size=4), dict(learning_rate=[0.1, 0.2], epochs=2)):
        with pytest.raises(ValueError, match="does not support a learning-rate schedule"):
            certified_training(model, X, yh, perturbation=FeatureBox(0.01), loss="hinge", backend="lp", **bad)
    with pytest.raises(ValueError, match="label flips between more than two classes"):
        certified_training(model, X, yh, loss="hinge", perturbation=LabelFlips(1), backend="lp")
    with pytest.raises(ValueError, match="paired poisoning"):
        certified_training(
            MLP.random([3, 3, 1], rng=0),
            X,
            np.where(yh > 0, 1, -1),
            perturbation=Budget(FeatureBox(0.1) & LabelFlips(1), 1),
            loss="hinge",
            backend="lp",
        )


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        (dict(learning_rate=[0.1, 0.1]), ValueError, r"one rate per gradient step \(3 = epochs"),
        (
            dict(learning_rate=lambda s: -1.0),
            ValueError,
            r"learning_rate\(step\) must be finite and > 0.*step 0",
        ),
        (dict(learning_rate=lambda s: float("nan")), ValueError, "finite and > 0"),
        (dict(learning_rate=lambda s: "fast"), TypeError, r"learning_rate\(0\) must return a real number"),
        (dict(learning_rate=[0.1, np.inf, 0.1]), ValueError, "learning_rate must be finite"),
        (dict(momentum=1.0), ValueError, r"momentum must be in \[0, 1\)"),
        (dict(momentum=-0.1), ValueError, "momentum must be a finite number >= 0"),
        (dict(weight_decay=np.nan), ValueError, "weight_decay must be a finite number"),
        (dict(batch_size=0), ValueError, "batch_size must be >= 1"),
        (dict(batch_size=24), ValueError, r"batch_size must be at most the number of training rows \(23\)"),
        (dict(batch_size=2.5), TypeError, "batch_size must be an integer"),
        (dict(shuffle=True), ValueError, "shuffle=True needs a batch_size"),
        (dict(shuffle=1, batch_size=4), TypeError, "shuffle must be a bool"),
        (dict(drop_last="yes"), TypeError, "drop_last must be a bool"),
    ],
)
def test_bad_recipe_options(options, error, match):
    C, y = LABELS["cross_entropy"]
    model = MLP.random([3, 3, C], rng=0)
    kw = dict(loss="cross_entropy", epochs=3) | options
    with pytest.raises(error, match=match):
        certified_training(model, X, y, perturbation=FeatureBox(0.01), **kw)
    with pytest.raises(error, match=match):
        model.train(X, y, **kw)


def test_label_checks_for_the_cross_entropies():
    with pytest.raises(ValueError, match="needs a network with at least 2 outputs"):
        MLP.random([3, 2, 1], rng=0).train(X, (X[:, 0] > 0).astype(int), loss="cross_entropy")
    with pytest.raises(ValueError, match="needs a network with one output"):
        MLP.random([3, 2, 2], rng=0).train(X, (X[:, 0] > 0).astype(int), loss="binary_cross_entropy")
    with pytest.raises(ValueError, match="labels y must be 0 or 1 for the binary cross-entropy loss"):
        MLP.random([3, 2, 1], rng=0).train(X, np.where(X[:, 0] > 0, 1, -1), loss="binary_cross_entropy")
    with pytest.raises(ValueError, match=r"integers in 0..2 for the multi-class cross-entropy loss"):
        MLP.random([3, 2, 3], rng=0).train(X, np.full(len(X), 3), loss="cross_entropy")
    with pytest.raises(ValueError, match="decay must be a finite number >= 0"):
        InverseDecay(1.0, -0.5)
    with pytest.raises(ValueError, match="learning_rate must be a finite number > 0"):
        InverseDecay(0.0, 0.5)


def test_inverse_decay_refuses_negative_steps():
    # fuzz round 4: rate(-1) answered 2.0 and rate(-2) divided by zero
    rate = InverseDecay(1.0, 0.5)
    for step in (-1, -2, -3):
        with pytest.raises(ValueError, match=f"step must be >= 0, got {step}"):
            rate(step)
    with pytest.raises(TypeError, match="step must be an integer, got float"):
        rate(1.5)
    assert rate(np.int64(2)) == rate(2) == 0.5


@pytest.mark.filterwarnings("ignore:carry='affine' relaxes:UserWarning")  # soundness, not advice
@pytest.mark.parametrize(
    ("kind", "carry"),
    [
        (k, c)
        for k in RECIPE_KINDS
        for c in ("box", "affine", "shared", "influence")
        if recipe_kind_supported(k, c)
    ],
)
def test_attacked_random_recipes_stay_inside(kind, carry):
    """Projected gradient ascent on the inputs (and TargetBox targets) through the unrolled recipe (torch)
    and sampled datasets, on random tiny configurations of every recipe option the carry supports, with
    chunk sizes down to one row (a run whose bounds leave the float range raises and is not attacked)."""
    gen = np.random.default_rng(
        [RECIPE_KINDS.index(kind), ("box", "affine", "shared", "influence").index(carry)]
    )
    attacked = 0
    for _ in range(8):
        case = random_recipe_case(gen, kind, carry=carry)
        try:
            res = certified_training(**case, carry=carry)
        except BoundsOverflowError:
            continue
        violation, trajectories = attack_violation(
            res, case["X"], case["y"], case["perturbation"], restarts=3, steps=4, rng=gen
        )
        attacked += 1
        assert trajectories >= 3
        assert violation <= 0.0, f"a trajectory leaves its box by {violation} ({case})"
    assert attacked >= 6


def test_interval_training_draws_a_progress_bar_over_its_steps(capsys):
    C, y = LABELS["cross_entropy"]
    res = certified_training(
        MLP.random([3, 4, C], rng=0),
        X,
        y,
        perturbation=FeatureBox(0.01),
        loss="cross_entropy",
        epochs=2,
        batch_size=8,
        progress="certifying",
    )
    err = capsys.readouterr().err
    assert res.recipe.n_steps == 6 and "certifying" in err and "/6 " in err  # one bar over the 6 steps
    certified_training(
        MLP.random([3, 4, C], rng=0), X, y, perturbation=FeatureBox(0.01), loss="cross_entropy"
    )
    assert capsys.readouterr().err == ""  # silent by default


def test_first_use_review_findings():
    """Binary cross-entropy's {0, 1} (or bool) labels work after training too; a rate floor above the
    starting rate, a callable that fails and a Budget that is not outermost are clear errors; 0-d arrays
    are numbers."""
    _, y = LABELS["binary_cross_entropy"]
    model = MLP.random([3, 4, 1], rng=0)
    res = certified_training(
        model,
        X,
        y.astype(bool),
        perturbation=FeatureBox(0.01),
        loss="binary_cross_entropy",
        validation=(X, y),
        patience=1,
        learning_rate=np.float64(0.1),
    )
    cert = certify_predictions(res, X)
    assert cert.certified_accuracy(y) == cert.certified_accuracy(2 * y - 1) == cert.certified_accuracy(y > 0)
    assert np.array_equal(
        res.nominal.to_vector(), model.train(X, y, loss="binary_cross_entropy")[-1].to_vector()
    )
    same = certified_training(
        model,
        X,
        y,
        perturbation=FeatureBox(0.01),
        loss="binary_cross_entropy",
        learning_rate=lambda s: np.array(0.1),
    )
    assert np.array_equal(same.upper[-1].to_vector(), res.upper[-1].to_vector())
    with pytest.raises(ValueError, match=r"minimum \(1.0\) must be at most learning_rate \(0.1\)"):
        InverseDecay(0.1, 0.5, minimum=1.0)
    with pytest.raises(ValueError, match=r"learning_rate\(0\) raised ZeroDivisionError"):
        model.train(X, y, loss="binary_cross_entropy", learning_rate=lambda s: 1 / 0)
    with pytest.raises(ValueError, match="Budget must be the outermost perturbation"):
        (FeatureBox(0.01) & Budget(FeatureBox(0.01), 2)).sets(X)
    with pytest.raises(
        ValueError, match=r"labels y must be -1 or \+1 for the binary hinge loss \(one output\)$"
    ):
        certified_training(model, X, np.full(len(X), 2), loss="hinge", perturbation=FeatureBox(0.01))
