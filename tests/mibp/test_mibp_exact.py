"""Oracle tests of the program backends (exact Gurobi/SCIP, McCormick MILP/LP)."""

import functools
import itertools

import numpy as np
import pytest

from certkit.mibp import (
    MLP,
    Budget,
    FeatureBox,
    GurobiLicenseError,
    LabelFlips,
    MissingValues,
    OrdinalShift,
    certified_training,
)
from certkit.mibp.enclosures.interval import interval_forward
from certkit.mibp.programs.encoding import build_output as _output_program
from certkit.mibp.programs.program import widen
from certkit.mibp.programs.solvers import BackendOptions, gurobi_size_limited, solve_program
from certkit.mibp.programs.steps import program_step as _step

EXACT = ["scip", "gurobi"]
SOLVER_TOL = 1e-6  # solver feasibility tolerance 1e-9 on O(1) programs, padded by 1e-8 relative


def _data(n, d=2, rng=0):
    gen = np.random.default_rng(rng)
    X = gen.normal(size=(n, d))
    return X, np.where(X[:, 0] + 0.3 * X[:, 1] > 0, 1.0, -1.0)


@pytest.mark.parametrize("backend", EXACT)
@pytest.mark.parametrize("formulation", ["joint", "decomposed"])
def test_linear_regression_closed_form(backend, formulation):
    # f = w x + b, MSE, one step from a point: each gradient term's extremes are at the interval
    # ends or at the stationary point x* = -(b - y_k) / (2 w).
    w, b, lr, eps = 0.8, -0.3, 0.2, 0.4
    x_hat = np.array([-1.0, 0.2, 0.7, 1.5])
    y = np.array([-1.2, 0.1, 0.4, 1.0])
    n = len(x_hat)
    gmin, gmax = [], []
    for xk, yk in zip(x_hat, y):
        cand = [xk - eps, xk + eps]
        xs = -(b - yk) / (2 * w)
        if xk - eps <= xs <= xk + eps:
            cand.append(xs)
        vals = [w * x * x + (b - yk) * x for x in cand]
        gmin.append(min(vals))
        gmax.append(max(vals))
    w_lo = w - 2 * lr / n * sum(gmax)
    w_hi = w - 2 * lr / n * sum(gmin)
    bterm_lo = [w * (xk - eps) + b - yk if w > 0 else w * (xk + eps) + b - yk for xk, yk in zip(x_hat, y)]
    bterm_hi = [w * (xk + eps) + b - yk if w > 0 else w * (xk - eps) + b - yk for xk, yk in zip(x_hat, y)]
    b_lo = b - 2 * lr / n * sum(bterm_hi)
    b_hi = b - 2 * lr / n * sum(bterm_lo)
    model = MLP([[[w]]], [[b]])
    res = certified_training(
        model,
        x_hat[:, None],
        y,
        perturbation=FeatureBox(eps),
        loss="mse",
        epochs=1,
        learning_rate=lr,
        backend=backend,
        formulation=formulation,
    )
    np.testing.assert_allclose(res.lower[1].to_vector(), [w_lo, b_lo], atol=1e-7, rtol=0)
    np.testing.assert_allclose(res.upper[1].to_vector(), [w_hi, b_hi], atol=1e-7, rtol=0)
    interval = certified_training(
        model, x_hat[:, None], y, perturbation=FeatureBox(eps), loss="mse", epochs=1, learning_rate=lr
    )
    interval_width = interval.upper[1].to_vector()[0] - interval.lower[1].to_vector()[0]
    assert interval_width > (w_hi - w_lo) + 1e-3  # interval arithmetic is strictly looser here
    for relaxed in ("milp", "lp"):
        r = certified_training(
            model,
            x_hat[:, None],
            y,
            perturbation=FeatureBox(eps),
            loss="mse",
            epochs=1,
            learning_rate=lr,
            backend=relaxed,
            formulation=formulation,
        )
        assert r.lower[1].to_vector()[0] <= w_lo + 1e-9 and r.upper[1].to_vector()[0] >= w_hi - 1e-9


def _fixed_pattern_box():
    """A [2, 2, 1] parameter box and inputs for which every ReLU and hinge indicator is fixed."""
    model = MLP([[[1.0, 0.5], [-0.4, 1.2]], [[0.7, -0.9]]], [[2.0, 2.5], [0.1]])
    X = np.array([[0.3, -0.2], [-0.5, 0.4]])
    y = np.array([1.0, -1.0])
    eps = 1e-2
    first = certified_training(
        model, X, y, loss="hinge", perturbation=FeatureBox(eps), epochs=1, learning_rate=0.1
    )
    lower, upper = first.lower[1], first.upper[1]
    sets = FeatureBox(eps).sets(X)
    _, pre = interval_forward(lower, upper, sets.lower, sets.upper)
    assert np.all(pre[0][0] > 0)  # hidden units always on
    margin_hi = np.where(y > 0, 1 - pre[1][0][:, 0], 1 + pre[1][1][:, 0])
    margin_lo = np.where(y > 0, 1 - pre[1][1][:, 0], 1 + pre[1][0][:, 0])
    assert np.all(margin_lo > 0) and np.all(margin_hi > 0)  # hinge active everywhere
    return lower, upper, X, y, eps, sets


def _vertex_values(lower, upper, X, eps, fn, *, widened=False):
    lo, hi = lower.to_vector(), upper.to_vector()
    if widened:  # the box the programs encode (see certkit.mibp.programs.program.widen)
        lo, hi = (np.array(v) for v in zip(*map(widen, lo, hi)))
    free = np.flatnonzero(lo < hi)
    out = []
    for bits in itertools.product((0, 1), repeat=free.size + X.size):
        theta = lo.copy()
        theta[free] = np.where(np.array(bits[: free.size]) == 1, hi[free], lo[free])
        Xv = X + eps * (2 * np.array(bits[free.size :]).reshape(X.shape) - 1)
        out.append(fn(MLP.from_vector(theta, lower.sizes), Xv))
    return np.array(out)


def _vertex_steps(lower, upper, X, y, eps, lr, *, widened=False):
    """``θ - lr ∇J`` (binary hinge, `MLP.gd_step`'s formula) at every vertex of the parameter box × the
    input box, all vertices at once: rows in the order of `_vertex_values`, shape ``(vertices, m)``."""
    lo, hi = lower.to_vector(), upper.to_vector()
    if widened:  # the box the programs encode (see certkit.mibp.programs.program.widen)
        lo, hi = (np.array(v) for v in zip(*map(widen, lo, hi)))
    free = np.flatnonzero(lo < hi)
    bits = np.array(list(itertools.product((0, 1), repeat=free.size + X.size)))
    theta = np.tile(lo, (len(bits), 1))
    theta[:, free] = np.where(bits[:, : free.size] == 1, hi[free], lo[free])
    Xv = X + eps * (2 * bits[:, free.size :].reshape(-1, *X.shape) - 1)
    n_vertices = len(bits)
    weights, biases, pos = [], [], 0
    for fan_in, fan_out in itertools.pairwise(lower.sizes):
        weights.append(theta[:, pos : pos + fan_in * fan_out].reshape(n_vertices, fan_out, fan_in))
        pos += fan_in * fan_out
        biases.append(theta[:, pos : pos + fan_out])
        pos += fan_out
    acts, pre, h = [Xv], [], Xv
    for i, (w, b) in enumerate(zip(weights, biases)):
        z = np.einsum("vnd,vod->vno", h, w) + b[:, None, :]
        pre.append(z)
        h = np.maximum(z, 0.0) if i < len(weights) - 1 else z
        acts.append(h)
    g = (-y * ((1.0 - y * h[:, :, 0]) > 0))[:, :, None] / len(X)
    steps = [None] * len(weights)
    for layer in range(len(weights) - 1, -1, -1):
        gw, gb = np.einsum("vno,vni->voi", g, acts[layer]), g.sum(axis=1)
        w, b = weights[layer], biases[layer]
        steps[layer] = np.concatenate([(w - lr * gw).reshape(n_vertices, -1), b - lr * gb], axis=1)
        if layer > 0:
            g = np.einsum("vno,voi->vni", g, w) * (pre[layer - 1] > 0)
    return np.concatenate(steps, axis=1)


@functools.cache
def _fixed_pattern_vertex_values():
    """The vertex enumeration of the fixed-pattern step (the oracle of both exact backends, computed once).

    Returns the joint step's values at the vertices of the true box and of the widened box, and each
    sample's own step's (min, max) over its vertices."""
    lower, upper, X, y, eps, _ = _fixed_pattern_box()
    lr = 0.5
    # θ' is multilinear in (θ, x) when every indicator is fixed, so its extremes lie at box vertices.
    vals = _vertex_steps(lower, upper, X, y, eps, lr)
    wide = _vertex_steps(lower, upper, X, y, eps, lr, widened=True)
    # the batched step is MLP.gd_step's: checked at the first, a middle and the last vertex
    lo, hi = lower.to_vector(), upper.to_vector()
    free = np.flatnonzero(lo < hi)
    corners = list(itertools.product((0, 1), repeat=free.size + X.size))
    for i in (0, len(corners) // 2, len(corners) - 1):
        bits = np.array(corners[i])
        theta = lo.copy()
        theta[free] = np.where(bits[: free.size] == 1, hi[free], lo[free])
        Xv = X + eps * (2 * bits[free.size :].reshape(X.shape) - 1)
        expected = MLP.from_vector(theta, lower.sizes).gd_step(Xv, y, learning_rate=lr).to_vector()
        np.testing.assert_allclose(vals[i], expected, rtol=0, atol=1e-12)
    per = []
    for k in range(2):
        v = _vertex_steps(lower, upper, X[k : k + 1], y[k : k + 1], eps, lr)
        per.append((v.min(axis=0), v.max(axis=0)))
    return vals, wide, per


@pytest.mark.parametrize("backend", EXACT)
def test_hinge_fixed_pattern_equals_vertex_enumeration(backend):
    lower, upper, _, y, _, sets = _fixed_pattern_box()
    lr = 0.5
    vals, wide, per = _fixed_pattern_vertex_values()
    L, U, _ = _step(lower, upper, sets, y, "hinge", lr, "joint", BackendOptions(backend))
    # parameter boxes narrower than MIN_WIDTH are widened (a sound superset) before solving, and the
    # result is intersected with the interval step on the true box: the bounds lie between the exact
    # values of the true box and those of the widened box
    assert np.all(L <= vals.min(axis=0) + 1e-7) and np.all(L >= wide.min(axis=0) - 1e-7)
    assert np.all(U >= vals.max(axis=0) - 1e-7) and np.all(U <= wide.max(axis=0) + 1e-7)
    # decomposed: each sample's (θ_p - λ g_kp)/n extremised separately
    L, U, _ = _step(lower, upper, sets, y, "hinge", lr, "decomposed", BackendOptions(backend))
    np.testing.assert_allclose(L, (per[0][0] + per[1][0]) / 2, atol=1e-7, rtol=0)
    np.testing.assert_allclose(U, (per[0][1] + per[1][1]) / 2, atol=1e-7, rtol=0)


def test_nesting_exact_milp_lp_interval():
    X, y = _data(5, rng=3)
    model = MLP.random([2, 3, 1], rng=1)
    eps = 0.1
    first = certified_training(
        model, X, y, loss="hinge", perturbation=FeatureBox(eps), epochs=1, learning_rate=0.3
    )
    sets = FeatureBox(eps).sets(X)
    box = {}
    for formulation in ("joint", "decomposed"):
        for backend in ("scip", "gurobi", "milp", "lp", "interval"):
            L, U, _ = _step(
                first.lower[1], first.upper[1], sets, y, "hinge", 0.3, formulation, BackendOptions(backend)
            )
            box[backend, formulation] = (L, U)

    def inside(a, b):
        (La, Ua), (Lb, Ub) = box[a], box[b]
        return bool(np.all(La >= Lb - SOLVER_TOL) and np.all(Ua <= Ub + SOLVER_TOL))

    for f in ("joint", "decomposed"):
        chain = [("scip", f), ("milp", f), ("lp", f), ("interval", f)]
        assert all(inside(a, b) for a, b in itertools.pairwise(chain)), f
        assert inside(("gurobi", f), ("milp", f))
        np.testing.assert_allclose(box["scip", f][0], box["gurobi", f][0], atol=SOLVER_TOL)
        np.testing.assert_allclose(box["scip", f][1], box["gurobi", f][1], atol=SOLVER_TOL)
    for backend in ("scip", "milp", "lp"):
        assert inside((backend, "joint"), (backend, "decomposed"))
    # the relaxations are strictly tighter than interval arithmetic on this box
    width = {k: np.sum(U - L) for k, (L, U) in box.items()}
    assert width["scip", "joint"] < width["lp", "decomposed"] < width["interval", "joint"]


def test_hybrid_inside_decomposed_and_joint_lp():
    X, y = _data(5, rng=3)
    model = MLP.random([2, 3, 1], rng=1)
    pert = FeatureBox(0.1)
    first = certified_training(
        model, X, y, loss="hinge", perturbation=pert, epochs=2, learning_rate=0.3, backend="gurobi"
    )
    sets = pert.sets(X)
    args = (first.lower[2], first.upper[2], sets, y, "hinge", 0.3)
    dL, dU, _ = _step(*args, "decomposed", BackendOptions("gurobi"))
    jL, jU, _ = _step(*args, "joint", BackendOptions("lp"))
    hL, hU, st = _step(*args, "hybrid", BackendOptions("gurobi"))
    assert st["programs"] == len(y) + 1
    # the joint LP with the per-sample bounds as cuts lies inside both boxes (up to solver tolerance) ...
    assert np.all(hL >= np.maximum(dL, jL) - SOLVER_TOL) and np.all(hU <= np.minimum(dU, jU) + SOLVER_TOL)
    # ... and, as neither contains the other on this (grown) box, is strictly tighter than both
    assert np.sum(hU - hL) < min(np.sum(dU - dL), np.sum(jU - jL))
    # and never tighter than the exact joint program (it is a relaxation of it)
    eL, eU, _ = _step(*args, "joint", BackendOptions("scip"))
    assert np.all(hL <= eL + SOLVER_TOL) and np.all(hU >= eU - SOLVER_TOL)


@pytest.mark.parametrize(
    ("backend", "formulation"),
    [
        ("scip", "joint"),
        ("scip", "decomposed"),
        ("gurobi", "joint"),
        ("gurobi", "decomposed"),
        ("milp", "joint"),
        ("milp", "decomposed"),
        ("lp", "joint"),
        ("lp", "decomposed"),
        ("gurobi", "hybrid"),
        ("milp", "hybrid"),
    ],
)
def test_backends_sound_monte_carlo(backend, formulation, assert_sound):
    X, y = _data(4, rng=1)
    model = MLP.random([2, 3, 1], rng=2)
    pert = FeatureBox(0.05)
    res = certified_training(
        model,
        X,
        y,
        loss="hinge",
        perturbation=pert,
        epochs=3,
        learning_rate=0.3,
        backend=backend,
        formulation=formulation,
    )
    interval = certified_training(model, X, y, loss="hinge", perturbation=pert, epochs=3, learning_rate=0.3)
    assert np.all(res.widths() <= interval.widths() + 1e-12)
    assert assert_sound(res, X, y, pert, rng=5) == 80


@pytest.mark.parametrize(
    ("sizes", "loss", "pert"),
    [
        ([2, 3, 3], "hinge", FeatureBox(0.05)),
        ([2, 3, 1], "mse", FeatureBox(0.05)),
        ([2, 3, 1], "hinge", Budget(FeatureBox(0.2), 1)),
        ([2, 3, 1], "hinge", OrdinalShift([0], shifts=(0, 1), points=[0, 2]) & FeatureBox(0.02)),
        ([2, 3, 1], "hinge", MissingValues(np.eye(4, 2, dtype=bool), lower=-1.0, upper=1.0)),
        ([2, 3, 1], "hinge", FeatureBox(0.05) & LabelFlips(1)),
    ],
)
@pytest.mark.parametrize("formulation", ["joint", "decomposed", "hybrid"])
def test_losses_and_perturbations_sound(sizes, loss, pert, formulation, assert_sound):
    X, y = _data(4, rng=2)
    if loss == "mse":
        y = X[:, 0] - X[:, 1]
    elif sizes[-1] > 1:
        y = np.array([0, 1, 2, 1])
    model = MLP.random(sizes, rng=3)
    res = certified_training(
        model,
        X,
        y,
        perturbation=pert,
        loss=loss,
        epochs=2,
        learning_rate=0.2,
        backend="gurobi",
        formulation=formulation,
    )
    interval = certified_training(model, X, y, perturbation=pert, loss=loss, epochs=2, learning_rate=0.2)
    assert np.all(res.widths() <= interval.widths() + 1e-12)
    assert assert_sound(res, X, y, pert, rng=1) == 80


def test_discrete_options_exact_joint():
    # OrdinalShift: x ∈ {x̂, x̂ + 1}; the joint exact program encodes the two options with binaries, so
    # with a point θ its bounds equal enumeration over the 2^n option choices.
    X, y = _data(3, rng=4)
    model = MLP.random([2, 3, 1], rng=1)
    pert = OrdinalShift([0], shifts=(0, 1))
    res = certified_training(
        model,
        X,
        y,
        loss="hinge",
        perturbation=pert,
        epochs=1,
        learning_rate=0.3,
        backend="scip",
        formulation="joint",
    )
    vals = []
    for bits in itertools.product((0, 1), repeat=3):
        Xv = X.copy()
        Xv[:, 0] += bits
        vals.append(model.gd_step(Xv, y, learning_rate=0.3).to_vector())
    vals = np.array(vals)
    np.testing.assert_allclose(res.lower[1].to_vector(), vals.min(axis=0), atol=1e-7, rtol=0)
    np.testing.assert_allclose(res.upper[1].to_vector(), vals.max(axis=0), atol=1e-7, rtol=0)


def test_exact_monotone_in_epsilon():
    X, y = _data(4, rng=6)
    model = MLP.random([2, 3, 1], rng=6)
    runs = [
        certified_training(
            model,
            X,
            y,
            perturbation=FeatureBox(e),
            loss="hinge",
            epochs=2,
            learning_rate=0.3,
            backend="gurobi",
            formulation="decomposed",
        )
        for e in (0.0, 0.02, 0.08)
    ]
    for a, b in itertools.pairwise(runs):
        for t in range(3):
            assert np.all(b.lower[t].to_vector() <= a.lower[t].to_vector() + SOLVER_TOL)
            assert np.all(b.upper[t].to_vector() >= a.upper[t].to_vector() - SOLVER_TOL)


@pytest.mark.parametrize("backend", EXACT)
def test_exact_output_bounds_equal_vertex_enumeration(backend):
    lower, upper, *_ = _fixed_pattern_box()
    x = np.array([0.2, 0.1])
    _, pre = interval_forward(lower, upper, x[None], x[None])
    assert np.all(pre[0][0] > 0)
    out = lambda m, _: m.forward(x[None])[0, 0]  # noqa: E731
    vals = _vertex_values(lower, upper, np.zeros((0, 2)), 0.0, out)
    # the program encodes the parameter box widened to MIN_WIDTH (a sound superset): exact on that box
    wide = _vertex_values(lower, upper, np.zeros((0, 2)), 0.0, out, widened=True)
    for pred in (1, -1):
        prog = _output_program(lower, upper, x, pred, 1)
        got = solve_program(prog, [(0, 1)], BackendOptions(backend))["bounds"][0]
        assert got <= (pred * vals).min() + 1e-7
        np.testing.assert_allclose(got, (pred * wide).min(), atol=1e-7, rtol=0)


def _large_joint_args():
    X, y = _data(30, rng=0)
    return MLP.random([2, 6, 1], rng=0), X, y


def test_gurobi_licence_limit_gives_clear_error():
    if not gurobi_size_limited():
        pytest.skip("the installed Gurobi licence is not size-limited")
    model, X, y = _large_joint_args()
    with pytest.raises(GurobiLicenseError, match=r'size-limited.*formulation="decomposed".*backend="scip"'):
        certified_training(
            model,
            X,
            y,
            loss="hinge",
            perturbation=FeatureBox(0.05),
            epochs=2,
            backend="gurobi",
            formulation="joint",
        )


def test_gurobi_error_10010_is_translated(monkeypatch):
    if not gurobi_size_limited():
        pytest.skip("the installed Gurobi licence is not size-limited, so error 10010 cannot be provoked")
    import certkit.mibp.programs.solvers.gurobi as solvers

    # bypass the up-front size check so that Gurobi itself raises GurobiError 10010
    monkeypatch.setattr(solvers, "gurobi_size_limited", lambda: False)
    model, X, y = _large_joint_args()
    with pytest.raises(GurobiLicenseError, match="size-limited") as info:
        certified_training(
            model,
            X,
            y,
            loss="hinge",
            perturbation=FeatureBox(0.05),
            epochs=2,
            backend="gurobi",
            formulation="joint",
        )
    assert getattr(info.value.__cause__, "errno", None) == 10010


def test_gurobi_large_joint_with_full_licence(assert_sound):
    if gurobi_size_limited():
        pytest.skip(
            "exact joint Gurobi on a >200-variable bilinear model needs a full Gurobi licence "
            "(the installed one is size-limited)"
        )
    model, X, y = _large_joint_args()
    res = certified_training(
        model,
        X,
        y,
        loss="hinge",
        perturbation=FeatureBox(0.05),
        epochs=2,
        backend="gurobi",
        formulation="joint",
    )
    assert assert_sound(res, X, y, FeatureBox(0.05), rng=0) == 80


def test_time_limit_uses_dual_bound():
    X, y = _data(6, rng=0)
    model = MLP.random([2, 4, 1], rng=0)
    pert = FeatureBox(0.1)
    res = certified_training(
        model,
        X,
        y,
        perturbation=pert,
        loss="hinge",
        epochs=2,
        learning_rate=0.3,
        backend="scip",
        formulation="joint",
        time_limit=0.002,
    )
    full = certified_training(
        model,
        X,
        y,
        loss="hinge",
        perturbation=pert,
        epochs=2,
        learning_rate=0.3,
        backend="scip",
        formulation="joint",
    )
    assert res.solver_stats[1]["not_optimal"] > 0
    assert full.solver_stats[1]["not_optimal"] == 0
    # an early stop can only loosen the box (dual bounds), never cut into the exact one
    assert np.all(res.lower[2].to_vector() <= full.lower[2].to_vector() + SOLVER_TOL)
    assert np.all(res.upper[2].to_vector() >= full.upper[2].to_vector() - SOLVER_TOL)


def test_parallel_executor_matches_serial(monkeypatch):
    import certkit.parallel

    pools = []

    class CountingPool(certkit.parallel.ProcessPoolExecutor):
        def __init__(self, *args, **kwargs):
            pools.append(self)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(certkit.parallel, "ProcessPoolExecutor", CountingPool)
    X, y = _data(4, rng=8)
    model = MLP.random([2, 3, 1], rng=8)
    kwargs = dict(loss="hinge", perturbation=FeatureBox(0.05), epochs=2, learning_rate=0.3, backend="gurobi")
    for formulation in ("decomposed", "joint"):
        serial = certified_training(model, X, y, formulation=formulation, **kwargs)
        n_pools = len(pools)
        parallel = certified_training(model, X, y, formulation=formulation, executor=2, **kwargs)
        # one worker pool serves every epoch (none on a one-CPU machine, where the work runs serially)
        assert len(pools) - n_pools == (1 if certkit.parallel.available_cpus() >= 2 else 0)
        for a, b in zip(serial.bounds, parallel.bounds):
            np.testing.assert_array_equal(a[0].to_vector(), b[0].to_vector())
            np.testing.assert_array_equal(a[1].to_vector(), b[1].to_vector())
    # select_epoch certifies every epoch through one pool too, with the serial scores (interval bounds
    # leave 24 and 19 of the 40 validation points undecided after epochs 1 and 2: work for both)
    from certkit.mibp import select_epoch

    X, y = _data(6, rng=1)
    res = certified_training(
        MLP.random([2, 3, 1], rng=1),
        X,
        y,
        loss="hinge",
        perturbation=FeatureBox(0.1),
        epochs=2,
        learning_rate=0.5,
    )
    X_val = np.random.default_rng(0).normal(size=(40, 2))
    y_val = res.nominal.predict(X_val)
    n_pools = len(pools)
    sel = select_epoch(res, X_val, y_val, backend="gurobi", executor=2)
    assert len(pools) - n_pools == (1 if certkit.parallel.available_cpus() >= 2 else 0)
    ref = select_epoch(res, X_val, y_val, backend="gurobi")
    np.testing.assert_array_equal(sel.certified_accuracy, ref.certified_accuracy)
    assert sel.epoch == ref.epoch


def test_lp_bound_tightening(assert_sound):
    # deeper net: the LP relaxation tightens second-layer pre-activations and hinge terms
    X, y = _data(5, rng=3)
    model = MLP.random([2, 4, 4, 1], rng=1)
    pert = FeatureBox(0.1)
    kw = dict(loss="hinge", perturbation=pert, epochs=2, learning_rate=0.3)
    runs = {
        (backend, tight): certified_training(
            model, X, y, backend=backend, formulation="decomposed", tighten_bounds=tight, **kw
        )
        for backend in ("lp", "gurobi")
        for tight in (False, True)
    }
    loose, tight = runs["lp", False], runs["lp", True]
    assert np.all(tight.lower[2].to_vector() >= loose.lower[2].to_vector() - SOLVER_TOL)
    assert np.all(tight.upper[2].to_vector() <= loose.upper[2].to_vector() + SOLVER_TOL)
    assert tight.mean_widths()[-1] < 0.95 * loose.mean_widths()[-1]
    # exact programs do not depend on the (valid) big-M constants: same boxes with and without tightening
    for t in range(3):
        np.testing.assert_allclose(
            runs["gurobi", True].lower[t].to_vector(),
            runs["gurobi", False].lower[t].to_vector(),
            atol=SOLVER_TOL,
        )
        np.testing.assert_allclose(
            runs["gurobi", True].upper[t].to_vector(),
            runs["gurobi", False].upper[t].to_vector(),
            atol=SOLVER_TOL,
        )
    assert assert_sound(tight, X, y, pert, rng=2) == 80
    with pytest.raises(TypeError, match="tighten_bounds"):
        certified_training(model, X, y, backend="lp", tighten_bounds="yes", **kw)


@pytest.mark.parametrize(
    ("backend", "formulation"),
    [
        ("interval", "decomposed"),
        ("scip", "joint"),
        ("gurobi", "joint"),
        ("gurobi", "decomposed"),
        ("milp", "joint"),
        ("lp", "decomposed"),
    ],
)
def test_label_flips_equal_enumeration(backend, formulation):
    # from a point θ with exact inputs, every backend's bounds equal the extremes over all flip sets
    X, y = _data(4, rng=5)
    model = MLP.random([2, 3, 1], rng=5)
    res = certified_training(
        model,
        X,
        y,
        perturbation=LabelFlips(2),
        loss="hinge",
        epochs=1,
        learning_rate=0.3,
        backend=backend,
        formulation=formulation,
    )
    vals = []
    for size in range(3):
        for flip in itertools.combinations(range(4), size):
            yv = y.copy()
            yv[list(flip)] *= -1
            vals.append(model.gd_step(X, yv, learning_rate=0.3).to_vector())
    vals = np.array(vals)
    tol = 1e-7 if backend in ("interval", "scip", "gurobi") else SOLVER_TOL
    np.testing.assert_allclose(res.lower[1].to_vector(), vals.min(axis=0), atol=tol, rtol=0)
    np.testing.assert_allclose(res.upper[1].to_vector(), vals.max(axis=0), atol=tol, rtol=0)
