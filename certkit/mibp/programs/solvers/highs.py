"""HiGHS backend (``highspy``) for the McCormick MILP / LP: one model per program, only the costs change."""

from __future__ import annotations

import numpy as np

from certkit.mibp.programs.program import Program
from certkit.mibp.programs.solvers.common import (
    FEAS_TOL,
    MILP_TOL,
    BackendOptions,
    consistent,
    pad_bound,
    program_scale,
)
from certkit.mibp.programs.solvers.cvxpy import solve_cvxpy
from certkit.mibp.programs.solvers.mccormick import linear_rows
from certkit.mibp.programs.solvers.safe_dual import safe_lp_bound

__all__ = ["solve_highs", "solve_linear"]


def solve_linear(program: Program, tasks, options: BackendOptions):
    """McCormick MILP / LP: HiGHS directly (one model, only the costs change) unless ``solver=`` names
    another cvxpy solver."""
    if options.solver in (None, "HIGHS"):
        try:
            import highspy  # noqa: F401
        except ImportError:
            return solve_cvxpy(program, tasks, options)
        return solve_highs(program, tasks, options)
    return solve_cvxpy(program, tasks, options)


def solve_highs(program: Program, tasks, options: BackendOptions):
    """Solve every task on one HiGHS model built once: a new objective only changes the cost vector,
    so the LP re-solves warm from the previous basis.  Bounds: the MIP dual bound (also when stopped
    early) padded outward, or the safe bound of the LP's dual vector; a MILP without a dual bound
    falls back to its LP."""
    import highspy

    integral = options.backend == "milp" and bool(program.binary.any())
    scale = program_scale(program)
    A, row_lo, row_hi = linear_rows(program)
    n = program.n_vars
    h = highspy.Highs()
    h.setOptionValue("output_flag", bool(options.verbose))
    h.setOptionValue("primal_feasibility_tolerance", FEAS_TOL)
    h.setOptionValue("dual_feasibility_tolerance", FEAS_TOL)
    if integral:
        h.setOptionValue("mip_rel_gap", 0.0)
        h.setOptionValue("mip_abs_gap", 0.0)
        h.setOptionValue("mip_feasibility_tolerance", FEAS_TOL)
    lp = highspy.HighsLp()
    lp.num_col_ = n
    lp.num_row_ = A.shape[0]
    lp.col_cost_ = np.zeros(n)
    lp.col_lower_ = program.lb
    lp.col_upper_ = program.ub
    lp.row_lower_ = row_lo
    lp.row_upper_ = row_hi
    lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
    lp.a_matrix_.num_col_ = n
    lp.a_matrix_.num_row_ = A.shape[0]
    lp.a_matrix_.start_ = A.indptr.astype(np.int32)
    lp.a_matrix_.index_ = A.indices.astype(np.int32)
    lp.a_matrix_.value_ = A.data.astype(np.float64)
    if integral:
        lp.integrality_ = [
            highspy.HighsVarType.kInteger if b else highspy.HighsVarType.kContinuous for b in program.binary
        ]
    h.passModel(lp)
    all_cols = np.arange(n, dtype=np.int32)
    status_ok = highspy.HighsModelStatus.kOptimal
    infeasible = (highspy.HighsModelStatus.kInfeasible,)
    values, flags = [], []
    for j, sense in tasks:
        idx, coef, _ = program.objectives[j]
        vec = np.zeros(n)
        np.add.at(vec, idx, coef * sense)
        h.changeColsCost(n, all_cols, vec)
        if options.time_limit is not None:
            # HiGHS measures the limit from its creation: allow this solve its own share
            h.setOptionValue("time_limit", h.getRunTime() + float(options.time_limit))
        h.run()
        status = h.getModelStatus()
        if status in infeasible:
            raise RuntimeError(
                "HiGHS reported an infeasible step program; this indicates a numerical "
                "problem. Try backend='interval'."
            )
        optimal = status == status_ok
        bound = -np.inf
        if integral:
            bound = highs_mip_bound(h, status)
            if np.isfinite(bound):
                bound = pad_bound(bound, 1, MILP_TOL, scale)
        else:
            sol = h.getSolution()
            if sol.dual_valid:
                y = np.asarray(sol.row_dual)
                bound = safe_lp_bound(vec, A, row_lo, row_hi, program.lb, program.ub, y)
        if not np.isfinite(bound) and integral:
            lp_options = BackendOptions("lp", options.time_limit, verbose=options.verbose)
            relaxed = solve_highs(program, [(j, sense)], lp_options)
            bound, optimal = relaxed[0][0] * sense, False
        values.append(sense * bound)
        flags.append(optimal)
    return values, flags


def highs_mip_bound(h, status) -> float:
    """HiGHS's MIP dual bound (of the minimisation it solved) when it is a proven bound, else ``-inf``.

    Only after an optimal solve or a limit stop, and only when finite, with a finite gap and not
    above the incumbent: on an error status HiGHS leaves ``mip_dual_bound = 0`` (gap ``inf``),
    which is no bound at all.
    """
    import highspy

    S = highspy.HighsModelStatus
    usable = (S.kOptimal, S.kTimeLimit, S.kIterationLimit, S.kSolutionLimit, S.kInterrupt, S.kHighsInterrupt)
    if status not in usable:
        return -np.inf
    info = h.getInfo()
    dual, gap = float(info.mip_dual_bound), float(info.mip_gap)
    if not np.isfinite(dual) or abs(dual) >= highspy.kHighsInf or not np.isfinite(gap):
        return -np.inf
    incumbent = float(info.objective_function_value) if info.primal_solution_status == 2 else None
    return dual if consistent(dual, incumbent, 1, abs(dual)) else -np.inf
