"""SCIP backend (PySCIPOpt): exact mixed-integer bilinear programs, one fresh model per objective."""

from __future__ import annotations

import numpy as np

from certkit._optional import require
from certkit.mibp.programs.program import Program
from certkit.mibp.programs.solvers.common import (
    SCIP_FEAS_TOL,
    BackendOptions,
    consistent,
    pad_bound,
    program_scale,
    quiet_fds,
)

__all__ = ["solve_scip"]

#: SCIP statuses after which the dual bound is a proven bound (the solve stopped early at a limit);
#: any other non-optimal status (unknown, unbounded, inforunbd, ...) gives no bound.
SCIP_LIMITS = frozenset(
    {
        "timelimit",
        "nodelimit",
        "totalnodelimit",
        "stallnodelimit",
        "gaplimit",
        "sollimit",
        "bestsollimit",
        "restartlimit",
        "userinterrupt",
    }
)


def scip_model(program: Program, options: BackendOptions):
    """A fresh SCIP model of ``program`` (SCIP keeps state across re-solves of one model after
    ``freeTransform``, which has cut off feasible points of a later objective, so every objective gets
    its own model)."""
    from pyscipopt import Model, quicksum

    m = Model()
    if not options.verbose:
        m.hideOutput()
    m.setParam("numerics/feastol", SCIP_FEAS_TOL)
    m.setParam("limits/gap", 0.0)
    m.setParam("limits/absgap", 0.0)
    if program.widened:
        # reductions, cuts and propagated bounds derived from boxes ~1e-6 wide have cut off feasible points
        # (a widened joint MSE program: min 0.6305 "optimal" where 0.5472 is reached; without separation
        # still max -1.1871 where -1.1533 is reached): no presolve, no separation, no propagation
        m.setParam("presolving/maxrounds", 0)
        m.setParam("separating/maxrounds", 0)
        m.setParam("separating/maxroundsroot", 0)
        m.setParam("propagating/maxrounds", 0)
        m.setParam("propagating/maxroundsroot", 0)
    if options.time_limit is not None:
        m.setParam("limits/time", float(options.time_limit))
    x = [
        m.addVar(lb=lo, ub=hi, vtype="B" if b else "C")
        for lo, hi, b in zip(program.lb, program.ub, program.binary)
    ]
    A = program.A
    for r in range(A.shape[0]):
        sl = slice(A.indptr[r], A.indptr[r + 1])
        expr = quicksum(c * x[j] for j, c in zip(A.indices[sl], A.data[sl]))
        m.addCons(expr == program.rhs[r] if program.is_eq[r] else expr <= program.rhs[r])
    for s, a, b in program.bilinear:
        m.addCons(x[s] == x[a] * x[b])
    return m, x


def solve_scip(program: Program, tasks, options: BackendOptions):
    quicksum = require("pyscipopt", extra="scip", purpose='backend="scip"').quicksum
    scale = program_scale(program)
    values, flags = [], []
    for j, sense in tasks:
        m, x = scip_model(program, options)
        idx, coef, _ = program.objectives[j]
        m.setObjective(
            quicksum(float(c) * x[i] for i, c in zip(idx, coef)),
            sense="minimize" if sense > 0 else "maximize",
        )
        try:
            if options.verbose:
                m.optimize()
            else:
                with quiet_fds():  # SoPlex prints GMP tolerance warnings even with hideOutput()
                    m.optimize()
        except Exception as exc:  # PySCIPOpt raises a bare Exception for SCIP error codes
            if not str(exc).startswith("SCIP"):
                raise
            # e.g. "SCIP: error in LP solver!" on badly scaled programs: no solver bound, the caller keeps
            # the interval bound (counted as not optimal)
            values.append(-np.inf * sense)
            flags.append(False)
            continue
        status = m.getStatus()
        if status == "infeasible":
            raise RuntimeError(
                "SCIP reported an infeasible step program; this indicates a numerical problem "
                "(the unperturbed data are always feasible). Try backend='milp' or 'interval'."
            )
        bound = -np.inf * sense
        if status == "optimal" or status in SCIP_LIMITS:
            dual = m.getDualbound()
            incumbent = m.getPrimalbound() if m.getNSols() > 0 else None
            if consistent(dual, incumbent, sense, abs(dual)):
                bound = dual
        flags.append(status == "optimal")
        values.append(pad_bound(bound, sense, SCIP_FEAS_TOL, scale) if np.isfinite(bound) else bound)
    return values, flags
