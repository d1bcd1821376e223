"""Gurobi backend: exact mixed-integer bilinear programs (``NonConvex=2``) and the size-limited licence."""

from __future__ import annotations

import functools

import numpy as np

from certkit._optional import require
from certkit.mibp.programs.program import Program
from certkit.mibp.programs.solvers.common import (
    FEAS_TOL,
    BackendOptions,
    GurobiLicenseError,
    consistent,
    pad_bound,
    program_scale,
)

__all__ = ["GUROBI_SIZE_LIMIT", "gurobi_size_limited", "gurobi_too_big", "license_error", "solve_gurobi"]

GUROBI_SIZE_LIMIT = 200


@functools.lru_cache(maxsize=1)
def gurobi_size_limited() -> bool:
    """Whether the installed Gurobi licence is size-limited (probed once, 201-variable bilinear model)."""
    import gurobipy as gp

    with gp.Env(params={"OutputFlag": 0}) as env, gp.Model(env=env) as m:
        x = m.addVars(GUROBI_SIZE_LIMIT + 1, lb=-1, ub=1)
        m.addConstr(x[0] == x[1] * x[2])
        m.Params.NonConvex = 2
        m.Params.TimeLimit = 1.0
        try:
            m.optimize()
        except gp.GurobiError as exc:
            if exc.errno == 10010:
                return True
            raise
    return False


@functools.lru_cache(maxsize=1)
def gurobi_env():
    """One quiet Gurobi environment per process (creating one per model is slow)."""
    import gurobipy as gp

    env = gp.Env(empty=True)
    env.setParam("OutputFlag", 0)
    env.start()
    return env


def gurobi_too_big(program: Program) -> bool:
    """Whether ``program`` exceeds the size-limited (pip) Gurobi licence."""
    return (len(program.bilinear) > 0 and program.n_vars > GUROBI_SIZE_LIMIT) or max(
        program.n_vars, program.n_constraints
    ) > 2000


def license_error(program: Program, fits: dict | None = None) -> GurobiLicenseError:
    """The size-limit error for ``program``; ``fits``: options that would fit (default: SCIP)."""
    return GurobiLicenseError(
        f"the Gurobi licence is size-limited (at most {GUROBI_SIZE_LIMIT} variables once a model has "
        f"bilinear terms, 2000 variables/constraints otherwise) but this program has "
        f"{program.n_vars} variables, {program.n_constraints} constraints and {len(program.bilinear)} "
        "bilinear terms",
        fits={"backend": "scip"} if fits is None else fits,
    )


def solve_gurobi(program: Program, tasks, options: BackendOptions):
    gp = require("gurobipy", extra="gurobi", purpose='backend="gurobi"')
    if gurobi_too_big(program) and gurobi_size_limited():
        raise license_error(program)
    scale = program_scale(program)
    with gp.Model(env=gurobi_env()) as m:
        m.Params.OutputFlag = int(options.verbose)
        m.Params.NonConvex = 2
        m.Params.FeasibilityTol = FEAS_TOL
        m.Params.OptimalityTol = FEAS_TOL
        m.Params.IntFeasTol = FEAS_TOL
        m.Params.MIPGap = 0.0
        m.Params.MIPGapAbs = 0.0
        m.Params.Threads = 1
        if program.widened:
            m.Params.Presolve = 0
        if options.time_limit is not None:
            m.Params.TimeLimit = float(options.time_limit)
        vt = [gp.GRB.BINARY if b else gp.GRB.CONTINUOUS for b in program.binary]
        xd = m.addVars(program.n_vars, lb=program.lb.tolist(), ub=program.ub.tolist(), vtype=vt)
        x = [xd[i] for i in range(program.n_vars)]
        A = program.A
        for r in range(A.shape[0]):
            sl = slice(A.indptr[r], A.indptr[r + 1])
            expr = gp.LinExpr(A.data[sl].tolist(), [x[j] for j in A.indices[sl]])
            m.addLConstr(expr, gp.GRB.EQUAL if program.is_eq[r] else gp.GRB.LESS_EQUAL, float(program.rhs[r]))
        for s, a, b in program.bilinear:
            m.addQConstr(x[s] == x[a] * x[b])
        values, flags = [], []
        for j, sense in tasks:
            idx, coef, _ = program.objectives[j]
            m.setObjective(
                gp.LinExpr(coef.tolist(), [x[i] for i in idx]),
                gp.GRB.MINIMIZE if sense > 0 else gp.GRB.MAXIMIZE,
            )
            try:
                m.optimize()
            except gp.GurobiError as exc:
                if exc.errno == 10010:
                    raise license_error(program) from exc
                raise
            if m.Status in (gp.GRB.INFEASIBLE, gp.GRB.INF_OR_UNBD):
                raise RuntimeError(
                    "Gurobi reported an infeasible step program; this indicates a numerical "
                    "problem. Try backend='scip' or 'interval'."
                )
            optimal = m.Status == gp.GRB.OPTIMAL
            limits = (
                gp.GRB.TIME_LIMIT,
                gp.GRB.ITERATION_LIMIT,
                gp.GRB.NODE_LIMIT,
                gp.GRB.SOLUTION_LIMIT,
                gp.GRB.INTERRUPTED,
                gp.GRB.WORK_LIMIT,
            )
            bound = -np.inf * sense
            if optimal or m.Status in limits:
                if m.IsMIP or m.IsQCP:
                    incumbent = m.ObjVal if m.SolCount > 0 else None
                    dual = _dual_bound(m)
                    if consistent(dual, incumbent, sense, abs(dual)):
                        bound = dual
                elif optimal:
                    bound = float(m.ObjVal)
            flags.append(optimal)
            values.append(pad_bound(bound, sense, FEAS_TOL, scale) if np.isfinite(bound) else bound)
    return values, flags


def _dual_bound(m) -> float:
    """The model's proven objective bound, or NaN when the solve stopped before it had one (a time limit
    hit while presolving: gurobipy then has no ``ObjBound`` attribute to read)."""
    import gurobipy as gp

    try:
        return float(m.ObjBound)
    except (AttributeError, gp.GurobiError):
        return float("nan")
