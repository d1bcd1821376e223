"""Lagrangian decomposition (``formulation="lagrangian"``): multipliers, exact oracles, soundness."""

import importlib.util
import itertools
import math

import numpy as np
import pytest

from certkit.mibp import MLP, Budget, FeatureBox, MissingValues, certified_training
from certkit.mibp.problem.losses import check_labels
from certkit.mibp.programs.lagrangian import centre_multipliers, sample_jacobians, zero_sum
from certkit.mibp.programs.solvers import BackendOptions
from certkit.mibp.programs.steps import _solve_epoch_decomposed
from certkit.mibp.programs.steps import program_step as _step

_MODULES = {"scip": "pyscipopt", "gurobi": "gurobipy", "milp": "highspy", "lp": "highspy"}
BACKENDS = [b for b, mod in _MODULES.items() if importlib.util.find_spec(mod) is not None]


def _per_sample_gradients(model, X, y, loss):
    return np.array(
        [model.gradients(X[k : k + 1], y[k : k + 1], loss=loss).to_vector() for k in range(len(X))]
    )


@pytest.mark.parametrize(
    ("sizes", "loss"), [([2, 4, 1], "hinge"), ([2, 4, 1], "mse"), ([3, 3, 2, 3], "hinge")]
)
def test_sample_jacobians_match_central_differences(sizes, loss):
    gen = np.random.default_rng(3)
    model = MLP.random(sizes, rng=1)
    X = gen.normal(size=(6, sizes[0]))
    if loss == "mse":
        y = gen.normal(size=6)
    elif sizes[-1] == 1:
        y = gen.choice([-1.0, 1.0], size=6)
    else:
        y = gen.integers(0, sizes[-1], size=6)
    J = sample_jacobians(model, X, check_labels(y, loss, sizes[-1], 6), loss)
    v, h = model.to_vector(), 1e-6
    for j in range(model.n_params):
        e = np.zeros_like(v)
        e[j] = h
        up = _per_sample_gradients(MLP.from_vector(v + e, model.sizes), X, y, loss)
        dn = _per_sample_gradients(MLP.from_vector(v - e, model.sizes), X, y, loss)
        np.testing.assert_allclose(J[:, :, j], (up - dn) / (2 * h), atol=1e-7)


def test_zero_sum_is_exact_in_every_summation_order():
    gen = np.random.default_rng(0)
    mu = gen.normal(size=(37, 5, 6)) * np.exp(gen.uniform(-30, 30, size=(37, 5, 6)))
    mu -= mu.mean(axis=0)
    out = zero_sum(mu)
    assert np.all(out.sum(axis=0) == 0.0)
    assert np.all(out[::-1].sum(axis=0) == 0.0)
    for idx in itertools.product(range(5), range(6)):
        col = out[(slice(None), *idx)]
        assert math.fsum(col) == 0.0
        assert sum(gen.permutation(col)) == 0.0
    top = np.max(np.abs(mu))
    assert np.max(np.abs(out - mu)) <= top * 2.0**-30
    assert np.all(zero_sum(np.zeros((3, 2))) == 0.0)


def _linear_regression(width):
    """f = w x + b with MSE, inputs fixed: the step is linear in θ = (w, b)."""
    X = np.array([[1.5], [-0.5], [0.3]])
    y = np.array([1.0, -2.0, 0.4])
    centre = MLP([np.array([[0.7]])], [np.array([-0.2])])
    v = centre.to_vector()
    lower = MLP.from_vector(v - width, centre.sizes)
    upper = MLP.from_vector(v + width, centre.sizes)
    return X, y, lower, upper


@pytest.mark.parametrize("backend", BACKENDS)
def test_linear_step_is_exact_where_decomposed_is_not(backend):
    """Inputs fixed, f = w x + b, MSE: θ' = A θ + c is linear, so the Jacobian multipliers are exact and
    the Lagrangian bound equals the coupled maximum (a vertex of the box); the decomposed one does not."""
    X, y, lower, upper = _linear_regression(0.1)
    lr, n = 0.3, len(X)
    sets = FeatureBox(0.0).sets(X)
    yc = check_labels(y, "mse", 1, n)
    opts = BackendOptions(backend)
    # coupled step: θ' = θ - (2λ/n) Σ_k (w x_k + b - y_k) (x_k, 1)
    A = np.eye(2) - (2 * lr / n) * sum(np.outer([x, 1.0], [x, 1.0]) for x in X[:, 0])
    c = (2 * lr / n) * sum(yk * np.array([x, 1.0]) for x, yk in zip(X[:, 0], y))
    verts = np.array(list(itertools.product(*zip(lower.to_vector(), upper.to_vector()))))
    vals = verts @ A.T + c
    lag_lo, lag_hi, _ = _step(lower, upper, sets, yc, "mse", lr, "lagrangian", opts)
    dec_lo, dec_hi, _ = _step(lower, upper, sets, yc, "mse", lr, "decomposed", opts)
    np.testing.assert_allclose(lag_lo, vals.min(axis=0), atol=1e-7)
    np.testing.assert_allclose(lag_hi, vals.max(axis=0), atol=1e-7)
    assert np.all(lag_lo <= vals.min(axis=0)) and np.all(lag_hi >= vals.max(axis=0))
    assert np.all(dec_hi - dec_lo > lag_hi - lag_lo + 1e-3)


def _tiny_relu_case():
    model = MLP([np.array([[0.8], [-0.6]]), np.array([[0.9, 0.7]])], [np.array([0.1, 0.3]), np.array([0.05])])
    X = np.array([[0.5], [-0.4]])
    y = np.array([1.0, -1.0])
    v, r = model.to_vector(), 0.01
    return model, X, y, MLP.from_vector(v - r, model.sizes), MLP.from_vector(v + r, model.sizes)


def _coupled_grid(lower, upper, X, eps, y, lr, loss):
    """θ' over a grid of the coupled problem: shared θ at the vertices of its box, each x'_k on a
    3-point grid of [x_k ± eps] (values every sound bound must contain)."""
    lo, hi = lower.to_vector(), upper.to_vector()
    axes = list(zip(lo, hi))
    xs = [np.linspace(x - eps, x + eps, 3) for x in X[:, 0]]
    out = []
    for theta in itertools.product(*axes):
        model = MLP.from_vector(np.array(theta), lower.sizes)
        for xp in itertools.product(*xs):
            out.append(model.gd_step(np.array(xp)[:, None], y, loss=loss, learning_rate=lr).to_vector())
    return np.array(out)


@pytest.mark.parametrize("backend", [b for b in ("scip", "gurobi") if b in BACKENDS])
def test_tiny_relu_coupled_within_lagrangian_within_decomposed(backend):
    """Exact backends, 2 samples, [1, 2, 1] hinge network: brute force over a grid of the coupled
    problem <= Lagrangian bound <= decomposed bound (up to the padding of the solver values, whose
    objectives differ; strictly tighter on the sum of widths)."""
    _model, X, y, lower, upper = _tiny_relu_case()
    lr, eps = 0.5, 0.05
    sets = FeatureBox(eps).sets(X)
    yc = check_labels(y, "hinge", 1, 2)
    opts = BackendOptions(backend)
    grid = _coupled_grid(lower, upper, X, eps, y, lr, "hinge")
    lag_lo, lag_hi, _ = _step(lower, upper, sets, yc, "hinge", lr, "lagrangian", opts)
    dec_lo, dec_hi, _ = _step(lower, upper, sets, yc, "hinge", lr, "decomposed", opts)
    assert np.all(lag_lo <= grid.min(axis=0)) and np.all(grid.max(axis=0) <= lag_hi)
    assert np.all(dec_lo <= lag_lo + 1e-7) and np.all(lag_hi <= dec_hi + 1e-7)
    assert np.sum(lag_hi - lag_lo) < np.sum(dec_hi - dec_lo)


@pytest.mark.parametrize("backend", BACKENDS)
def test_zero_multipliers_reproduce_decomposed_exactly(backend):
    _model, X, y, lower, upper = _tiny_relu_case()
    sets = FeatureBox(0.05).sets(X)
    yc = check_labels(y, "hinge", 1, 2)
    opts = BackendOptions(backend)
    args = (lower, upper, sets, yc, "hinge", 0.5, opts, None, False, (None, 0))
    (aL, aU), _, _ = _solve_epoch_decomposed(*args)
    (bL, bU), _, _ = _solve_epoch_decomposed(*args, np.zeros((2, lower.n_params, lower.n_params)))
    assert np.array_equal(aL, bL) and np.array_equal(aU, bU)


@pytest.mark.parametrize("backend", BACKENDS)
def test_random_zero_sum_multipliers_stay_sound(backend):
    """Any zero-sum μ gives bounds: sampled coupled steps (θ and inputs drawn from their boxes, vertices
    included) stay inside, for a few random multipliers of growing size."""
    gen = np.random.default_rng(5)
    model = MLP.random([2, 3, 1], rng=2)
    X = gen.normal(size=(4, 2))
    y = np.array([1.0, -1.0, 1.0, -1.0])
    v = model.to_vector()
    lower, upper = MLP.from_vector(v - 0.02, model.sizes), MLP.from_vector(v + 0.02, model.sizes)
    eps, lr, m = 0.05, 0.4, model.n_params
    sets = FeatureBox(eps).sets(X)
    yc = check_labels(y, "hinge", 1, 4)
    opts = BackendOptions(backend)
    draws = []
    for i in range(400):
        if i % 2:
            theta = gen.choice([-0.02, 0.02], size=m) + v
            Xp = X + gen.choice([-eps, eps], size=X.shape)
        else:
            theta = gen.uniform(-0.02, 0.02, size=m) + v
            Xp = X + gen.uniform(-eps, eps, size=X.shape)
        step = MLP.from_vector(theta, model.sizes).gd_step(Xp, y, loss="hinge", learning_rate=lr)
        draws.append(step.to_vector())
    draws = np.array(draws)
    for scale in (0.05, 1.0):
        mu = zero_sum(gen.normal(size=(4, m, m)) * scale)
        (L, U), _, _ = _solve_epoch_decomposed(
            lower, upper, sets, yc, "hinge", lr, opts, None, False, (None, 0), mu
        )
        assert np.all(L <= draws.min(axis=0)) and np.all(draws.max(axis=0) <= U)


def test_centre_multipliers_are_zero_sum_and_skip_point_parameters():
    model, X, y, lower, upper = _tiny_relu_case()
    lo, hi = lower.to_vector(), upper.to_vector()
    hi[3] = lo[3]  # a parameter whose box is a point
    mu = centre_multipliers(lo, hi, model.sizes, X, check_labels(y, "hinge", 1, 2), "hinge", 0.5)
    assert mu.shape == (2, model.n_params, model.n_params)
    assert np.all(mu.sum(axis=0) == 0.0)
    assert np.all(mu[:, :, 3] == 0.0)
    assert np.any(mu != 0.0)


def _moons(n, rng):
    gen = np.random.default_rng(rng)
    t = gen.uniform(0, np.pi, size=n)
    lab = gen.integers(0, 2, size=n)
    X = np.c_[np.cos(t) - lab, np.sin(t) * (1 - 2 * lab) + 0.5 * lab] + 0.1 * gen.normal(size=(n, 2))
    return X, 2.0 * lab - 1.0


@pytest.mark.parametrize("backend", BACKENDS)
def test_certified_training_lagrangian_is_sound(backend, assert_sound):
    X, y = _moons(6, 0)
    model = MLP.random([2, 3, 1], rng=0)
    pert = FeatureBox(0.02)
    kw = dict(perturbation=pert, loss="hinge", epochs=2, learning_rate=0.3, backend=backend)
    res = certified_training(model, X, y, formulation="lagrangian", **kw)
    dec = certified_training(model, X, y, formulation="decomposed", **kw)
    assert res.formulation == "lagrangian"
    assert res.solver_stats[-1]["max_vars"] == dec.solver_stats[-1]["max_vars"]
    assert_sound(res, X, y, pert, rng=1)


def test_lagrangian_executor_and_progress_match_serial(capsys):
    X, y = _moons(6, 1)
    kw = dict(
        perturbation=FeatureBox(0.02),
        loss="hinge",
        epochs=2,
        learning_rate=0.3,
        backend="lp",
        formulation="lagrangian",
    )
    res = certified_training(MLP.random([2, 3, 1], rng=1), X, y, **kw)
    par = certified_training(MLP.random([2, 3, 1], rng=1), X, y, executor=2, progress=True, **kw)
    assert "epoch 2/2" in capsys.readouterr().err
    for t in range(3):
        assert np.array_equal(res.lower[t].to_vector(), par.lower[t].to_vector())
        assert np.array_equal(res.upper[t].to_vector(), par.upper[t].to_vector())


@pytest.mark.parametrize("backend", [b for b in ("milp", "lp") if b in BACKENDS])
def test_lagrangian_with_budget_is_sound(backend, assert_sound):
    X, y = _moons(6, 2)
    pert = Budget(FeatureBox(0.05), 2)
    res = certified_training(
        MLP.random([2, 3, 1], rng=3),
        X,
        y,
        perturbation=pert,
        loss="hinge",
        epochs=2,
        learning_rate=0.3,
        backend=backend,
        formulation="lagrangian",
    )
    assert_sound(res, X, y, pert, rng=2)


def test_guard_raises_on_a_wrong_lagrangian_bound(monkeypatch):
    """Epoch 2 (a box with width, nonzero multipliers): a bound 0.05 too tight is caught by the guard,
    whose witness values include the multiplier terms (a correct run raises nothing)."""
    from certkit.mibp import UnsoundBoundError
    from certkit.mibp.programs.solvers import highs

    X = np.array([[0.5, -0.2], [-0.3, 0.8], [0.1, 0.4]])
    y = np.array([1, -1, 1])
    kw = dict(loss="hinge", perturbation=FeatureBox(0.1), epochs=2, backend="lp", formulation="lagrangian")
    certified_training(MLP.random([2, 3, 1], rng=0), X, y, **kw)
    real, calls = highs.solve_linear, []

    def wrong(program, tasks, options):
        values, flags = real(program, tasks, options)
        calls.append(1)
        if len(calls) <= len(X):  # epoch 1 untouched
            return values, flags
        return [v + 0.05 * s for v, (_, s) in zip(values, tasks)], flags

    monkeypatch.setattr(highs, "solve_linear", wrong)
    with pytest.raises(UnsoundBoundError) as info:
        certified_training(MLP.random([2, 3, 1], rng=0), X, y, **kw)
    assert info.value.program is not None and len(calls) > len(X)


def test_multipliers_do_not_depend_on_the_placeholders_of_missing_entries():
    """Review finding: the Jacobians were taken at the observed inputs, so the placeholder of a missing
    entry (outside its range) changed the multipliers and made the box wider than `decomposed`."""
    gen = np.random.default_rng(3)
    X = gen.normal(size=(6, 2))
    y = np.sign(gen.normal(size=6))
    mask = np.zeros((6, 2), bool)
    mask[:3, 0] = True
    model = MLP.random([2, 3, 1], rng=1)
    widths = []
    for placeholder in (0.0, 5.0, 100.0):
        Xp = X.copy()
        Xp[mask] = placeholder
        res = certified_training(
            model,
            Xp,
            y,
            perturbation=MissingValues(mask, -0.5, 0.5),
            loss="hinge",
            epochs=2,
            learning_rate=0.5,
            backend="lp",
            formulation="lagrangian",
        )
        widths.append(res.upper[-1].to_vector() - res.lower[-1].to_vector())
    np.testing.assert_array_equal(widths[0], widths[1])
    np.testing.assert_array_equal(widths[0], widths[2])
