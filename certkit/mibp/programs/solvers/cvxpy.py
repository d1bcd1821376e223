"""cvxpy backend for the McCormick MILP / LP with any installed cvxpy solver (``solver=``)."""

from __future__ import annotations

import numpy as np

from certkit._optional import require
from certkit.mibp.programs.program import Program
from certkit.mibp.programs.solvers.common import (
    FEAS_TOL,
    MILP_TOL,
    BackendOptions,
    consistent,
    pad_bound,
    program_scale,
)
from certkit.mibp.programs.solvers.mccormick import relaxation_rows
from certkit.mibp.programs.solvers.safe_dual import safe_lp_bound

__all__ = ["solve_cvxpy"]

DEFAULT_GAP = 1e-4


def solve_cvxpy(program: Program, tasks, options: BackendOptions):
    cp = require("cvxpy", extra="cvxpy", purpose=f'backend="{options.backend}"')
    import scipy.sparse as sp

    solver = options.solver or "HIGHS"
    integral = options.backend == "milp" and bool(program.binary.any())
    M, mrhs = relaxation_rows(program)
    A = program.A
    le = ~program.is_eq
    A_ub = sp.vstack([A[le], M]).tocsr()
    b_ub = np.concatenate([program.rhs[le], mrhs])
    A_eq, b_eq = A[program.is_eq], program.rhs[program.is_eq]
    x = cp.Variable(program.n_vars)
    cons = [x >= program.lb, x <= program.ub]
    ub_con = eq_con = None
    if A_ub.shape[0]:
        ub_con = A_ub @ x <= b_ub
        cons.append(ub_con)
    if A_eq.shape[0]:
        eq_con = A_eq @ x == b_eq
        cons.append(eq_con)
    if integral:
        z = cp.Variable(int(program.binary.sum()), boolean=True)
        cons.append(x[np.flatnonzero(program.binary)] == z)
    c = cp.Parameter(program.n_vars)
    prob = cp.Problem(cp.Minimize(c @ x), cons)
    kwargs = cvxpy_options(solver, options.time_limit, integral, options.verbose)
    scale = program_scale(program)
    rows = sp.vstack([A_ub, A_eq]).tocsr()
    row_lo = np.concatenate([np.full(A_ub.shape[0], -np.inf), b_eq])
    row_hi = np.concatenate([b_ub, b_eq])
    solver_errors: tuple[type[BaseException], ...] = (cp.error.SolverError,)
    if solver == "GUROBI":  # cvxpy reads Gurobi's solution without checking that there is one
        import gurobipy

        solver_errors += (gurobipy.GurobiError,)
    values, flags = [], []
    for j, sense in tasks:
        idx, coef, _ = program.objectives[j]
        vec = np.zeros(program.n_vars)
        np.add.at(vec, idx, coef * sense)
        c.value = vec
        try:
            prob.solve(solver=solver, **kwargs)
            status = prob.status
        except solver_errors as exc:
            if options.time_limit is None:
                raise RuntimeError(
                    f"cvxpy solver {solver} failed on a step program ({exc}); "
                    "try another solver= or backend='interval'"
                ) from exc
            status = "solver_error"  # stopped at the time limit without an answer: no solver bound
        # cvxpy reports a time limit hit before any solution as "infeasible_inaccurate" (GUROBI)
        limited = options.time_limit is not None and status == "infeasible_inaccurate"
        if status in ("infeasible", "infeasible_inaccurate") and not limited:
            raise RuntimeError(
                f"{solver} reported an infeasible step program; this indicates a numerical "
                "problem. Try backend='interval'."
            )
        bound = -np.inf
        optimal = status == "optimal"
        if integral:
            stats = prob.solver_stats.extra_stats if status in ("optimal", "user_limit") else None
            dual = getattr(stats, "mip_dual_bound", None) if solver == "HIGHS" else None
            gap = getattr(stats, "mip_gap", None)
            usable = (
                status in ("optimal", "user_limit")
                and dual is not None
                and (gap is None or np.isfinite(gap))
                and consistent(float(dual), prob.value if optimal else None, 1, abs(float(dual)))
            )
            if usable:
                bound = pad_bound(float(dual), 1, MILP_TOL, scale)
            elif optimal:
                value = float(prob.value) - DEFAULT_GAP * (1.0 + abs(prob.value))
                bound = pad_bound(value, 1, MILP_TOL, scale)
        else:
            duals = [con.dual_value for con in (ub_con, eq_con) if con is not None]
            if all(d is not None for d in duals) and duals:
                # cvxpy's multipliers of ``A x <= b`` / ``A x == b`` enter the Lagrangian with a plus sign
                y = -np.concatenate([np.atleast_1d(np.asarray(d, dtype=np.float64)) for d in duals])
                bound = safe_lp_bound(vec, rows, row_lo, row_hi, program.lb, program.ub, y)
            elif not duals:
                bound = safe_lp_bound(vec, rows, row_lo, row_hi, program.lb, program.ub, np.zeros(0))
        if not np.isfinite(bound) and integral:
            # not proven optimal without a dual bound: fall back to the LP relaxation (sound, looser)
            lp_options = BackendOptions("lp", options.time_limit, options.solver, verbose=options.verbose)
            relaxed = solve_cvxpy(program, [(j, sense)], lp_options)
            bound, optimal = relaxed[0][0] * sense, False
        values.append(sense * bound)
        flags.append(optimal)
    return values, flags


def cvxpy_options(solver: str, time_limit: float | None, integral: bool, verbose: bool) -> dict:
    kw: dict = {"verbose": verbose}
    if solver == "HIGHS":
        kw.update(
            primal_feasibility_tolerance=FEAS_TOL,
            dual_feasibility_tolerance=FEAS_TOL,
            log_to_console=verbose,
            output_flag=verbose,
        )
        if integral:
            kw.update(mip_rel_gap=0.0, mip_abs_gap=0.0, mip_feasibility_tolerance=FEAS_TOL)
        if time_limit is not None:
            kw["time_limit"] = float(time_limit)
    elif solver == "GUROBI":
        kw.update(FeasibilityTol=FEAS_TOL, OptimalityTol=FEAS_TOL, MIPGap=DEFAULT_GAP, Threads=1)
        if time_limit is not None:
            kw["TimeLimit"] = float(time_limit)
    elif solver == "SCIP":
        params = {"limits/gap": DEFAULT_GAP}
        if time_limit is not None:
            params["limits/time"] = float(time_limit)
        kw["scip_params"] = params
    elif time_limit is not None:
        raise ValueError(
            f"time_limit is supported with the cvxpy solvers HIGHS, GUROBI and SCIP, not {solver}"
        )
    return kw
