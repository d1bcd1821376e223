"""The direct HiGHS path of the McCormick MILP/LP backends against the cvxpy path, and its early stops."""

import numpy as np
import pytest

import certkit.mibp.programs.solvers.cvxpy as cvxpy_backend
import certkit.mibp.programs.solvers.highs as highs_backend
from certkit.mibp import MLP, FeatureBox, certified_training
from certkit.mibp.programs.encoding import build_decomposed, build_joint
from certkit.mibp.programs.solvers import BackendOptions, solve_program

SOLVER_TOL = 1e-6


def _data(n, rng):
    gen = np.random.default_rng(rng)
    X = gen.normal(size=(n, 2))
    y = np.where(X[:, 0] + 0.3 * gen.normal(size=n) > 0, 1.0, -1.0)
    return X, y


def _programs():
    X, y = _data(4, rng=11)
    model = MLP.random([2, 3, 1], rng=4)
    pert = FeatureBox(0.1)
    first = certified_training(model, X, y, loss="hinge", perturbation=pert, epochs=1, learning_rate=0.3)
    lower, upper, sets = first.lower[1], first.upper[1], pert.sets(X)
    joint = build_joint(lower, upper, sets, y, "hinge", 0.3)
    one = build_decomposed(lower, upper, sets, 2, y[2], "hinge", 0.3)
    return [joint, one], model.n_params


@pytest.mark.parametrize("backend", ["milp", "lp"])
def test_highs_direct_equals_cvxpy(backend, monkeypatch):
    programs, m = _programs()
    tasks = [(p, s) for p in range(m) for s in (1, -1)]
    direct = [solve_program(p, tasks, BackendOptions(backend))["bounds"] for p in programs]
    monkeypatch.setattr(highs_backend, "solve_highs", cvxpy_backend.solve_cvxpy)
    via_cvxpy = [solve_program(p, tasks, BackendOptions(backend))["bounds"] for p in programs]
    for a, b in zip(direct, via_cvxpy):
        assert np.all(np.isfinite(a))
        np.testing.assert_allclose(a, b, atol=SOLVER_TOL, rtol=0)


def test_highs_lp_contains_milp_on_each_objective():
    programs, m = _programs()
    tasks = [(p, s) for p in range(m) for s in (1, -1)]
    for program in programs:
        milp = solve_program(program, tasks, BackendOptions("milp"))["bounds"]
        lp = solve_program(program, tasks, BackendOptions("lp"))["bounds"]
        signs = np.array([s for _, s in tasks])
        # minima: LP <= MILP; maxima: LP >= MILP (the LP relaxes the binaries)
        assert np.all(signs * (milp - lp) >= -SOLVER_TOL)


def test_highs_time_limit_only_loosens(assert_sound):
    X, y = _data(6, rng=0)
    model = MLP.random([2, 4, 1], rng=0)
    pert = FeatureBox(0.1)
    kw = dict(
        loss="hinge", perturbation=pert, epochs=2, learning_rate=0.3, backend="milp", formulation="joint"
    )
    stopped = certified_training(model, X, y, time_limit=1e-4, **kw)
    full = certified_training(model, X, y, **kw)
    assert stopped.solver_stats[1]["not_optimal"] > 0
    assert full.solver_stats[1]["not_optimal"] == 0
    assert np.all(stopped.lower[2].to_vector() <= full.lower[2].to_vector() + SOLVER_TOL)
    assert np.all(stopped.upper[2].to_vector() >= full.upper[2].to_vector() - SOLVER_TOL)
    assert assert_sound(stopped, X, y, pert, rng=1) == 80


def test_other_cvxpy_solver_still_used(monkeypatch):
    programs, _ = _programs()
    calls = []

    def fake(program, tasks, options):
        calls.append(options.solver)
        return [0.0] * len(tasks), [True] * len(tasks)

    monkeypatch.setattr(highs_backend, "solve_cvxpy", fake)
    solve_program(programs[1], [(0, 1)], BackendOptions("lp", solver="CLARABEL"))
    assert calls == ["CLARABEL"]
