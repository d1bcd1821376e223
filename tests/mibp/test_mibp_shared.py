"""Shared-generator carry (``carry="shared"``): exact oracles (an affine step reproduced exactly, the
implicit first layer equal to the materialised one), every form operation and the gradient-change bounds
against sampled values, and the carry on its own (not intersected with the box) containing sampled and
attacked training runs."""

from dataclasses import replace

import numpy as np
import pytest

from certkit.mibp import MLP, Budget, FeatureBox, LabelFlips, certified_training
from certkit.mibp.certification.attack import attack_violation
from certkit.mibp.certification.cases import RECIPE_KINDS, random_recipe_case, recipe_kind_supported
from certkit.mibp.enclosures.changes import gradient_changes
from certkit.mibp.enclosures.first_layer import FirstLayer
from certkit.mibp.enclosures.forms import (
    Forms,
    Params,
    backward,
    linear,
    mask,
    relu,
    sigmoid_forms,
    softmax_forms,
    sum_outer,
    sum_rows,
)
from certkit.mibp.enclosures.shared import SharedCarry
from certkit.mibp.problem.losses import check_labels, label_classes, sigmoid, softmax
from certkit.mibp.problem.recipe import make_recipe

GEN = np.random.default_rng(0)


def _forms(shape, q, gen, scale=1.0, r=0.05):
    return Forms(gen.normal(size=shape) * scale, gen.normal(size=(*shape, q)) * 0.1, np.full(shape, r))


def _draw(f: Forms, e, gen):
    """A value of the forms at symbols ``e``, with the independent part drawn in ``[-r, r]``."""
    lin = f.c if f.G is None else f.c + f.G @ e
    return lin + f.r * gen.uniform(-1, 1, size=f.c.shape)


def _inside(f: Forms, e, value, slack=1e-12):
    lin = f.c if f.G is None else f.c + f.G @ e
    return np.all(np.abs(value - lin) <= f.r + slack * (1 + np.abs(value)))


def _params(o, i, q, gen):
    return Params(
        gen.normal(size=(o, i)),
        gen.normal(size=(o, i, q)) * 0.05,
        gen.normal(size=o),
        gen.normal(size=(o, q)) * 0.05,
    )


def _draw_params(p: Params, e):
    return p.Wc + p.GW @ e, p.bc + p.Gb @ e


# ------------------------------------------------------------------ every operation against samples
def test_each_form_operation_contains_its_sampled_values():
    gen = np.random.default_rng(1)
    k, i, o, q = 5, 4, 3, 6
    for _ in range(200):
        e = gen.uniform(-1, 1, size=q)
        h, p = _forms((k, i), q, gen), _params(o, i, q, gen)
        hv = _draw(h, e, gen)
        W, b = _draw_params(p, e)
        z = linear(h, p)
        zv = hv @ W.T + b
        assert _inside(z, e, zv)
        lo, hi = z.bounds()
        assert np.all((lo <= zv) & (zv <= hi))
        assert _inside(relu(z, lo, hi), e, np.maximum(zv, 0.0))
        g = _forms((k, o), q, gen)
        gv = _draw(g, e, gen)
        assert _inside(backward(g, p), e, gv @ W)
        assert _inside(mask(g, lo, hi), e, gv * (zv > 0))
        c, G, r = sum_outer(g, h, q, k)
        assert np.all(np.abs((gv.T @ hv).ravel() - (c + G @ e)) <= r)
        c, G, r = sum_rows(g, q, k)
        assert np.all(np.abs(gv.sum(axis=0) - (c + G @ e)) <= r)
        s = softmax_forms(z, lo, hi)
        assert _inside(s, e, softmax(zv))
        z1 = linear(h, _params(1, i, q, gen))
        lo1, hi1 = z1.bounds()
        zv1 = _draw(z1, e, gen)
        assert _inside(sigmoid_forms(z1, lo1, hi1), e, sigmoid(zv1))


def test_softmax_forms_are_exact_at_a_point_and_shrink_with_the_spread():
    z = Forms(np.array([[0.3, -1.2, 2.0]]), np.zeros((1, 3, 2)), np.zeros((1, 3)))
    s = softmax_forms(z, *z.bounds())
    assert np.allclose(s.c, softmax(z.c), atol=1e-15) and s.r.max() < 1e-13
    widths = []
    for spread in (1e-1, 1e-2, 1e-3):
        z = Forms(
            np.array([[0.3, -1.2, 2.0]]),
            spread * np.array([[[1.0, -1.0], [0.0, 1.0], [-1.0, 0.5]]]),
            np.zeros((1, 3)),
        )
        widths.append(softmax_forms(z, *z.bounds()).r.max())
    # the remainder is second order in the spread
    assert widths[1] < widths[0] / 50 and widths[2] < widths[1] / 50


# ------------------------------------------------------------------ the implicit first layer
@pytest.mark.parametrize("diagonal", [True, False])
def test_first_layer_equals_the_materialised_forms(diagonal):
    gen = np.random.default_rng(2)
    k, d, H, C = 7, 3, 5, 2
    m1 = H * (d + 1)
    q = m1 + 4
    if diagonal:  # every parameter its own symbol: the triangle inequality is exact
        G1 = np.zeros((H, d + 1, q))
        G1.reshape(m1, q)[np.arange(m1), np.arange(m1)] = gen.uniform(0.01, 0.1, size=m1)
    else:
        G1 = gen.normal(size=(H, d + 1, q)) * 0.03
    p1 = Params(gen.normal(size=(H, d)), G1[:, :d], gen.normal(size=H), G1[:, d])
    p2 = _params(C, H, q, gen)
    x = Forms(gen.normal(size=(k, d)), None, np.full((k, d), 0.01))
    a = linear(x, p1)
    box = a.bounds()
    first = FirstLayer(x, p1, box)
    h = relu(a, *box)
    assert np.allclose(first.c, h.c, atol=1e-14)
    z, z_first = linear(h, p2), first.linear(p2)
    assert np.allclose(z_first.c, z.c, atol=1e-13) and np.allclose(z_first.G, z.G, atol=1e-13)
    g = Forms(gen.normal(size=(k, C)), gen.normal(size=(k, C, q)) * 0.02, np.full((k, C), 0.01))
    (c1, G1_, r1), (c2, G2_, r2) = first.sum_outer(g, k), sum_outer(g, h, q, k)
    assert np.allclose(c1, c2, atol=1e-12) and np.allclose(G1_, G2_, atol=1e-12)
    assert np.allclose(r1, r2, rtol=1e-6) if diagonal else np.all(r1 >= r2 * (1 - 1e-9))
    ga = mask(backward(g, p2), *box)
    (cw, Gw, rw), (cb, Gb, rb) = first.backward_sums(g, p2, k)
    c_ref, G_ref, r_ref = sum_outer(ga, x, q, k)
    assert np.allclose(cw, c_ref, atol=1e-12) and np.allclose(Gw, G_ref, atol=1e-12)
    cb_ref, Gb_ref, rb_ref = sum_rows(ga, q, k)
    assert np.allclose(cb, cb_ref, atol=1e-12) and np.allclose(Gb, Gb_ref, atol=1e-12)
    # Σ|G| of the hidden derivative by the triangle inequality: never smaller
    assert np.all(rw >= r_ref * (1 - 1e-9)) and np.all(rb >= rb_ref * (1 - 1e-9))


# ------------------------------------------------------------------ an exactly affine step
def test_a_linear_mse_step_is_the_exact_image_of_the_box():
    """``[3, 1]`` with MSE and no perturbation: one step maps ``θ = c + diag(r) e`` to
    ``M c + v + M diag(r) e`` with ``M = I - (2λ/n) X̃ᵀX̃`` exactly; the carry keeps these generators and adds
    only rounding."""
    gen = np.random.default_rng(3)
    n, d, lr = 9, 3, 0.1
    X = gen.normal(size=(n, d))
    y = gen.normal(size=n)
    model = MLP.random([d, 1], rng=0)
    recipe = make_recipe(n, loss="mse", epochs=1, learning_rate=lr)
    carry = SharedCarry(model, FeatureBox(0.0).sets(X), y[:, None], recipe, max_generators=2 * (d + 1))
    r = gen.uniform(0.01, 0.1, size=d + 1)
    c = model.to_vector()
    carry.c, carry.G = c.copy(), np.diag(r)
    carry.step(MLP.from_vector(c - r, model.sizes), MLP.from_vector(c + r, model.sizes), 0)
    Xt = np.hstack([X, np.ones((n, 1))])
    M = np.eye(d + 1) - 2 * lr / n * Xt.T @ Xt
    assert np.allclose(carry.c, M @ c + 2 * lr / n * Xt.T @ y, atol=1e-13)
    assert np.allclose(carry.G[:, : d + 1], M @ np.diag(r), atol=1e-13)
    assert np.abs(carry.G[:, d + 1 :]).sum(axis=1).max() < 1e-12  # fresh symbols: rounding only


def test_a_point_without_perturbation_gives_the_nominal_step():
    gen = np.random.default_rng(4)
    X = gen.normal(size=(20, 3))
    y = (X[:, 0] > 0).astype(int)
    model = MLP.random([3, 6, 2], rng=1)
    res = certified_training(
        model,
        X,
        y,
        perturbation=FeatureBox(0.0),
        loss="cross_entropy",
        epochs=3,
        learning_rate=0.5,
        momentum=0.5,
        carry="shared",
    )
    for lo, hi, nom in zip(res.lower, res.upper, res.nominal_path):
        v = nom.to_vector()
        assert np.all(lo.to_vector() <= v) and np.all(v <= hi.to_vector())
        assert np.max(hi.to_vector() - lo.to_vector()) < 1e-11


# ------------------------------------------------------------------ the change of a deviating row
CHANGES = [
    (loss, labels)
    for loss in ["cross_entropy", "binary_cross_entropy", "mse", "hinge"]
    for labels in ["own", "other", "any"]
    if loss != "mse" or labels == "own"  # MSE has no labels to change
]


@pytest.mark.parametrize(("loss", "labels"), CHANGES)
def test_gradient_changes_contain_sampled_changes(loss, labels):
    gen = np.random.default_rng(5)
    C = {"cross_entropy": 3, "binary_cross_entropy": 1, "mse": 2, "hinge": 3}[loss]
    model = MLP.random([2, 5, C], rng=2)
    n = 6
    X = gen.normal(size=(n, 2))
    y = gen.normal(size=(n, C)) if loss == "mse" else label_classes(loss, C)[gen.integers(0, max(C, 2), n)]
    y = check_labels(y, loss, C, n)
    v = model.to_vector()
    lower, upper = MLP.from_vector(v - 0.05, model.sizes), MLP.from_vector(v + 0.05, model.sizes)
    XL, XU = X - 0.1, X + 0.1
    DL, DU = gradient_changes(lower, upper, X, XL, XU, y, loss, labels)
    classes = label_classes(loss, C)
    for _ in range(300):
        theta = MLP.from_vector(v + gen.uniform(-0.05, 0.05, size=v.size), model.sizes)
        Xp = X + gen.uniform(-0.1, 0.1, size=X.shape)
        for k in range(n):
            yk = y[k : k + 1]
            if labels == "own":
                yp = yk
            else:
                choices = [c for c in classes if labels == "any" or c != yk[0]]
                yp = np.array([gen.choice(choices)], dtype=y.dtype)
            change = theta._gradient_vector(Xp[k : k + 1], yp, loss) - theta._gradient_vector(
                X[k : k + 1], yk, loss
            )
            assert np.all(DL[k] - 1e-12 <= change) and np.all(change <= DU[k] + 1e-12)


def test_gradient_changes_vanish_without_a_change():
    gen = np.random.default_rng(6)
    model = MLP.random([2, 5, 3], rng=3)
    X = gen.normal(size=(4, 2))
    y = np.array([0, 1, 2, 0])
    DL, DU = gradient_changes(model, model, X, X, X, y, "cross_entropy", "own")
    # only the rounding allowances remain: (fan-in + a few) ulps of O(1) magnitudes per layer, below
    # 1e4 ulps of 1 (a real change of a row's gradient here is >= 1e-3)
    assert np.max(np.abs(DL)) < 1e4 * 2.0**-52 and np.max(np.abs(DU)) < 1e4 * 2.0**-52


# ------------------------------------------------------------------ the carry on its own
def _pure_hulls(case):
    """The result of `certified_training` with its boxes replaced by the hulls of the shared carry alone
    (each step told only the carry's own hull), up to the epoch where the carry overflows (as runs whose
    boxes blow up do)."""
    res = certified_training(**case)
    model, X, recipe = case["model"], case["X"], res.recipe
    y = check_labels(case["y"], case["loss"], model.sizes[-1], len(X))
    sets = case["perturbation"].sets(X.reshape(len(X), -1))
    if res.features is not None:  # the head's inputs: the frozen extractor's feature boxes
        sets = res.features.feature_sets(sets)
    carry = SharedCarry(model, sets, y, recipe)
    lo = hi = model.to_vector()
    lowers, uppers = list(res.lower), list(res.upper)
    for step in range(recipe.n_steps):
        lo, hi = carry.step(MLP.from_vector(lo, model.sizes), MLP.from_vector(hi, model.sizes), step)
        if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))):
            break
        if (step + 1) % recipe.steps_per_epoch == 0:
            epoch = (step + 1) // recipe.steps_per_epoch
            lowers[epoch], uppers[epoch] = (MLP.from_vector(v, model.sizes) for v in (lo, hi))
    return replace(res, lower=tuple(lowers), upper=tuple(uppers))


@pytest.mark.parametrize("kind", [k for k in RECIPE_KINDS if recipe_kind_supported(k, "shared")])
def test_the_carry_alone_contains_attacked_and_sampled_runs(kind):
    gen = np.random.default_rng([7, RECIPE_KINDS.index(kind)])
    for _ in range(10):
        case = random_recipe_case(gen, kind, carry="shared")
        hulls = _pure_hulls(case)
        violation, trajectories = attack_violation(
            hulls, case["X"], case["y"], case["perturbation"], restarts=3, steps=4, rng=gen
        )
        assert trajectories >= 3
        assert violation <= 0.0, f"a trajectory leaves the shared carry's hull by {violation} ({case})"


def test_never_wider_than_the_box_and_tighter_on_a_regression():
    from sklearn.datasets import load_diabetes

    X, y = load_diabetes(return_X_y=True)
    y = (y - y.mean()) / y.std()
    model = MLP.random([10, 16, 1], rng=0)
    kw = dict(perturbation=Budget(FeatureBox(0.05), 10), loss="mse", epochs=4, learning_rate=0.1)
    box = certified_training(model, X, y, **kw)
    shared = certified_training(model, X, y, **kw, carry="shared")
    assert shared.carry == "shared" and "carry=shared" in shared.summary()
    for lb, ub, ls, us in zip(box.lower, box.upper, shared.lower, shared.upper):
        assert np.all(ls.to_vector() >= lb.to_vector()) and np.all(us.to_vector() <= ub.to_vector())
    assert shared.mean_widths()[-1] < 0.95 * box.mean_widths()[-1]


def test_label_flips_without_features_and_paired_poisoning_stay_sound():
    gen = np.random.default_rng(8)
    X = gen.normal(size=(30, 2))
    y = (X[:, 0] + 0.3 * X[:, 1] > 0).astype(int)
    model = MLP.random([2, 8, 2], rng=5)
    for pert in (LabelFlips(3), Budget(FeatureBox(0.1) & LabelFlips(1), 3)):
        res = certified_training(
            model, X, y, perturbation=pert, loss="cross_entropy", epochs=3, learning_rate=0.5, carry="shared"
        )
        violation, trajectories = attack_violation(res, X, y, pert, restarts=4, steps=6, rng=0)
        assert trajectories >= 20 and violation <= 0.0
