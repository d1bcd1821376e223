"""Affine (zonotope) carry-over: exact oracle on a tiny case, soundness on its own (without the box it is
intersected with) and under attack, never wider than the box-per-step method."""

from dataclasses import replace

import numpy as np
import pytest
from scipy.optimize import linprog

from certkit.mibp import MLP, Budget, FeatureBox, LabelFlips, certified_training
from certkit.mibp.certification.attack import attack_violation
from certkit.mibp.certification.cases import PERTURBATION_KINDS, random_case
from certkit.mibp.enclosures.affine import AffineCarry
from certkit.mibp.problem.recipe import make_recipe


def _pure_zonotopes(model, X, y, perturbation, loss, lr, epochs):
    """Zonotopes of the affine carry alone: each step is told only the zonotope's own hull."""
    recipe = make_recipe(len(X), loss=loss, epochs=epochs, learning_rate=lr)
    carry = AffineCarry(model, perturbation.sets(X), y, recipe)
    out = [carry.zonotope]
    for step in range(epochs):
        lo, hi = carry.zonotope.bounds()
        carry.step(MLP.from_vector(lo, model.sizes), MLP.from_vector(hi, model.sizes), step)
        out.append(carry.zonotope)
    return out


def _membership_gap(zonotope, theta):
    """Smallest ``max_i |(G e - (theta - c))_i| / ρ_i`` over ``e in [-1, 1]^q`` (``ρ_i``: row radius), by LP.

    0 means ``theta`` is in the zonotope; HiGHS solves to a feasibility tolerance of 1e-7 on this
    scaled problem, so values below 1e-7 are indistinguishable from 0.
    """
    m, q = zonotope.G.shape
    rho = np.abs(zonotope.G).sum(axis=1)
    rho[rho == 0] = 1.0
    G, d = zonotope.G / rho[:, None], (theta - zonotope.c) / rho
    cost = np.zeros(q + 1)
    cost[-1] = 1.0
    A = np.block([[G, -np.ones((m, 1))], [-G, -np.ones((m, 1))]])
    res = linprog(
        cost, A_ub=A, b_ub=np.concatenate([d, -d]), bounds=[(-1, 1)] * q + [(0, None)], method="highs"
    )
    assert res.status == 0
    return res.x[-1]


def _support_violation(zonotope, theta, directions):
    """Largest ``a·(theta - c) - Σ_j |a·G_j|`` over the directions (<= 0 for every point of the zonotope)."""
    lhs = directions @ (theta - zonotope.c)
    rhs = np.abs(directions @ zonotope.G).sum(axis=1)
    slack = 1e-12 * (np.abs(directions) @ (np.abs(theta) + np.abs(zonotope.c)) + rhs)  # float evaluation here
    return np.max(lhs - rhs - slack)


def _grid_paths(model, X, y, loss, lr, epochs, eps, points):
    """Trajectories of every dataset on a grid of the one perturbed input (the exact reachable curve)."""
    paths = []
    for x in np.linspace(X[0, 0] - eps, X[0, 0] + eps, points):
        path = model.train(np.array([[x]]), y, loss=loss, epochs=epochs, learning_rate=lr)
        paths.append(np.array([m.to_vector() for m in path]))
    return np.array(paths)  # (points, epochs + 1, n_params)


@pytest.mark.parametrize("eps", [0.01, 0.001])
@pytest.mark.parametrize(
    ("loss", "y", "lr"),
    [("mse", np.array([0.7]), 0.3), ("hinge", np.array([1.0]), 0.05), ("hinge", np.array([-1.0]), 0.1)],
)
def test_exact_oracle_one_sample_grid(loss, y, lr, eps):
    # one sample with one input, [1, 2, 1] net, five steps: the reachable set is the curve of the
    # trajectories over x' in [x - eps, x + eps] (401 grid points)
    model = MLP(
        [np.array([[0.8], [-0.5]]), np.array([[0.6, -0.4]])], [np.array([0.3, 0.9]), np.array([-0.2])]
    )
    X, epochs = np.array([[0.5]]), 5
    paths = _grid_paths(model, X, y, loss, lr, epochs, eps, 401)
    zonos = _pure_zonotopes(model, X, y, FeatureBox(eps), loss, lr, epochs)
    box = certified_training(
        model, X, y, perturbation=FeatureBox(eps), loss=loss, epochs=epochs, learning_rate=lr
    )
    for t in range(1, epochs + 1):
        exact_lo, exact_hi = paths[:, t].min(axis=0), paths[:, t].max(axis=0)
        lo, hi = zonos[t].bounds()
        assert np.all(lo <= exact_lo) and np.all(exact_hi <= hi)
        # the zonotope itself (not only its hull) holds the curve
        directions = np.random.default_rng(t).normal(size=(200, model.n_params))
        for i in range(0, len(paths), 50):
            assert _membership_gap(zonos[t], paths[i, t]) <= 1e-7
            assert _support_violation(zonos[t], paths[i, t], directions) <= 0.0
        # tight up to second order: the excess over the exact hull is O(eps^2) (measured <= 1.94 eps^2)
        assert np.max((hi - lo) - (exact_hi - exact_lo)) <= 3.0 * eps**2
    if loss == "mse":  # the box-per-step excess is first order: 190-210x the exact width by step 5
        exact_w = paths[:, -1].max(axis=0) - paths[:, -1].min(axis=0)
        assert np.sum(box.upper[-1].to_vector() - box.lower[-1].to_vector()) > 100 * np.sum(exact_w)
        assert np.sum(hi - lo) < 1.06 * np.sum(exact_w)


def test_epsilon_zero_collapses_onto_the_float_trajectory():
    gen = np.random.default_rng(3)
    model = MLP.random([2, 5, 1], rng=gen)
    X, y = gen.normal(size=(12, 2)), np.where(gen.random(12) < 0.5, -1.0, 1.0)
    zonos = _pure_zonotopes(model, X, y, FeatureBox(0.0), "hinge", 0.5, 4)
    path = model.train(X, y, loss="hinge", epochs=4, learning_rate=0.5)
    for z, m in zip(zonos, path):
        lo, hi = z.bounds()
        v = m.to_vector()
        assert np.all(lo <= v) and np.all(v <= hi)
        assert np.max(hi - lo) <= 1e-12


@pytest.mark.parametrize("kind", PERTURBATION_KINDS)
@pytest.mark.parametrize("seed", range(4))
def test_pure_zonotope_contains_sampled_trajectories(kind, seed):
    """The zonotope alone (not intersected with any box) holds every sampled and vertex trajectory."""
    gen = np.random.default_rng(50 + seed)
    config = random_case(gen, kind, max_hidden=4, max_points=6, max_epochs=3)
    model, X, y, pert = config["model"], config["X"], config["y"], config["perturbation"]
    loss, lr, epochs = config["loss"], config["learning_rate"], config["epochs"]
    zonos = _pure_zonotopes(model, X, y, pert, loss, lr, epochs)
    sets = pert.sets(X)
    for i in range(30):
        Xs = sets.sample(gen, vertex=bool(i % 2))
        ys = sets.sample_labels(y, gen)
        for t, m in enumerate(model.train(Xs, ys, loss=loss, epochs=epochs, learning_rate=lr)):
            lo, hi = zonos[t].bounds()
            v = m.to_vector()
            assert np.all(lo <= v) and np.all(v <= hi), (t, max(np.max(lo - v), np.max(v - hi)))
            if i < 4:
                assert _membership_gap(zonos[t], v) <= 1e-7


@pytest.mark.filterwarnings("ignore:carry='affine' relaxes:UserWarning")  # soundness, not advice
@pytest.mark.parametrize("seed", range(6))
def test_never_wider_than_box_per_step(seed):
    gen = np.random.default_rng(200 + seed)
    config = random_case(gen, PERTURBATION_KINDS[seed % len(PERTURBATION_KINDS)], max_hidden=4, max_epochs=3)
    box = certified_training(**config)
    aff = certified_training(**config, carry="affine")
    assert aff.carry == "affine" and "carry=affine" in aff.summary()
    for t in range(config["epochs"] + 1):
        assert np.all(aff.lower[t].to_vector() >= box.lower[t].to_vector())
        assert np.all(aff.upper[t].to_vector() <= box.upper[t].to_vector())


def test_affine_is_tighter_in_later_epochs():
    gen = np.random.default_rng(7)
    X = gen.normal(size=(20, 2))
    y = np.where(X[:, 0] + 0.3 * X[:, 1] > 0, 1.0, -1.0)
    model = MLP.random([2, 6, 1], rng=1)
    kw = dict(loss="hinge", perturbation=FeatureBox(0.01), epochs=6, learning_rate=0.1)
    box = certified_training(model, X, y, **kw)
    aff = certified_training(model, X, y, **kw, carry="affine")
    assert aff.mean_widths()[-1] < 0.8 * box.mean_widths()[-1]


@pytest.mark.filterwarnings("ignore:carry='affine' relaxes:UserWarning")  # soundness, not advice
def test_budget_and_label_flips_run_and_stay_within_box():
    gen = np.random.default_rng(11)
    X = gen.normal(size=(8, 2))
    y = np.where(gen.random(8) < 0.5, -1.0, 1.0)
    model = MLP.random([2, 3, 1], rng=2)
    for pert in (Budget(FeatureBox(0.1), 2), FeatureBox(0.01) & LabelFlips(1)):
        box = certified_training(model, X, y, loss="hinge", perturbation=pert, epochs=2, learning_rate=0.2)
        aff = certified_training(
            model, X, y, loss="hinge", perturbation=pert, epochs=2, learning_rate=0.2, carry="affine"
        )
        assert np.all(
            aff.upper[-1].to_vector() - aff.lower[-1].to_vector()
            <= box.upper[-1].to_vector() - box.lower[-1].to_vector()
        )


def test_bad_carry_is_rejected():
    X = np.zeros((2, 1))
    with pytest.raises(ValueError, match="carry"):
        certified_training(
            MLP.random([1, 2, 1], rng=0),
            X,
            np.array([1.0, -1.0]),
            perturbation=FeatureBox(0.1),
            loss="hinge",
            carry="zonotope",
        )


@pytest.mark.parametrize("kind", PERTURBATION_KINDS)
def test_pure_zonotope_hull_survives_the_attack(kind):
    """Projected-gradient attacks through the unrolled training find nothing outside the zonotope's hull."""
    pytest.importorskip("torch")
    gen = np.random.default_rng(300 + PERTURBATION_KINDS.index(kind))
    config = random_case(gen, kind, max_hidden=4, max_points=5, max_epochs=3)
    config["epochs"] = 3
    model, X, y, pert = config["model"], config["X"], config["y"], config["perturbation"]
    zonos = _pure_zonotopes(model, X, y, pert, config["loss"], config["learning_rate"], 3)
    hulls = [z.bounds() for z in zonos]
    res = replace(
        certified_training(**config),
        lower=tuple(MLP.from_vector(lo, model.sizes) for lo, _ in hulls),
        upper=tuple(MLP.from_vector(hi, model.sizes) for _, hi in hulls),
    )
    violation, trajectories = attack_violation(res, X, y, pert, restarts=4, steps=6, rng=1)
    assert trajectories >= 20
    assert violation <= 0.0, f"a trajectory leaves the zonotope's hull by {violation}"


def test_unperturbed_entries_get_no_symbol():
    """Review finding: every entry of X got a symbol of radius ~1e-300 (slow steps)."""
    X = np.random.default_rng(0).normal(size=(20, 3))
    carry = AffineCarry(
        MLP.random([3, 4, 1], rng=0),
        FeatureBox(0.1, points=[0]).sets(X),
        np.ones(20),
        make_recipe(20, loss="hinge", epochs=1, learning_rate=0.1),
    )
    assert np.count_nonzero(carry.rad) == 3


def test_a_non_finite_remainder_is_not_dropped():
    """Review finding: `_reduce` picked fresh symbols with ``r > 0``, so a NaN remainder vanished."""
    carry = AffineCarry(
        MLP.random([1, 2, 1], rng=0),
        FeatureBox(0.1).sets(np.zeros((1, 1))),
        np.array([1.0]),
        make_recipe(1, loss="hinge", epochs=1, learning_rate=0.1),
    )
    zonotope = carry._reduce(np.zeros(7), np.zeros((7, 0)), np.zeros(0, dtype=np.int64), np.full(7, np.nan))
    lower, upper = zonotope.bounds()
    assert np.all(np.isnan(lower)) and np.all(np.isnan(upper))
