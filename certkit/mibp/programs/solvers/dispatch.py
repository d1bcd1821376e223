"""`solve_program`: sound objective bounds of a `Program` with any backend, the backend names and checks."""

from __future__ import annotations

import contextlib
import time

import numpy as np

from certkit._optional import require
from certkit.mibp.programs.program import Program
from certkit.mibp.programs.solvers import gurobi, highs, scip
from certkit.mibp.programs.solvers.common import (
    MAX_SCALE,
    BackendOptions,
    UnsoundBoundError,
    program_scale,
    silence_highs_banner,
)

__all__ = ["BACKENDS", "check_backend", "lp_bounds", "solve_program"]

BACKENDS = ("interval", "gurobi", "scip", "milp", "lp")

#: optional module and certkit extra of each program backend
_REQUIRES = {
    "gurobi": ("gurobipy", "gurobi"),
    "scip": ("pyscipopt", "scip"),
    "milp": ("cvxpy", "cvxpy"),
    "lp": ("cvxpy", "cvxpy"),
}


def _solver(backend: str):
    """The backend's solve function (looked up at call time)."""
    if backend == "scip":
        return scip.solve_scip
    if backend == "gurobi":
        return gurobi.solve_gurobi
    return highs.solve_linear


def solve_program(
    program: Program,
    tasks: list[tuple[int, int]],
    options: BackendOptions,
    witnesses: np.ndarray | None = None,
) -> dict:
    """Bounds for ``tasks`` = [(objective index, +1 for min / -1 for max)].

    ``witnesses`` (array ``(k, n_objectives)``, optional): the objectives' values at ``k`` known feasible
    points of the program; a solver bound beyond one of them raises `UnsoundBoundError`.

    Returns ``{"bounds": array, "not_optimal": int, "rejected": int, "solves": int, "seconds": float,
    "n_vars": int, "n_bilinear": int}``.
    """
    start = time.perf_counter()
    out = np.empty(len(tasks))
    todo = []
    for t, (j, sense) in enumerate(tasks):
        idx, _coef, _const = program.objectives[j]
        lo, hi = program.objective_bounds[j]
        out[t] = lo if sense > 0 else hi
        if idx.size and lo != hi:
            todo.append(t)
    not_optimal = 0
    rejected = int(bool(todo) and program_scale(program) > MAX_SCALE)
    if todo and not rejected:
        if not options.verbose and options.backend in ("lp", "milp"):
            with contextlib.suppress(ImportError):
                silence_highs_banner()
        values, flags = _solver(options.backend)(program, [tasks[t] for t in todo], options)
        for t, v, ok in zip(todo, values, flags):
            j, sense = tasks[t]
            lo, hi = program.objective_bounds[j]
            not_optimal += not ok
            v = v + program.objectives[j][2]
            if len(program.objective_errors):
                v = v - program.objective_errors[j] if sense > 0 else v + program.objective_errors[j]
            if witnesses is not None and len(witnesses):
                w = float(np.min(witnesses[:, j])) if sense > 0 else float(np.max(witnesses[:, j]))
                if (sense > 0 and v > w) or (sense < 0 and v < w):
                    raise UnsoundBoundError(program, j, sense, float(v), w, options.backend)
            out[t] = max(lo, v) if sense > 0 else min(hi, v)
    return {
        "bounds": out,
        "not_optimal": not_optimal,
        "rejected": rejected,
        "solves": 0 if rejected else len(todo),
        "seconds": time.perf_counter() - start,
        "n_vars": program.n_vars,
        "n_bilinear": len(program.bilinear),
    }


def check_backend(backend: str, solver: str | None) -> None:
    """Fail early, naming the extra, when the backend's optional dependency is missing; check ``solver=``."""
    if backend not in _REQUIRES:
        if solver is not None:
            raise ValueError(f"solver= applies to the cvxpy backends 'milp' and 'lp', not {backend!r}")
        return
    module, extra = _REQUIRES[backend]
    require(module, extra=extra, purpose=f'backend="{backend}"')
    if solver is not None:
        if backend not in ("milp", "lp"):
            raise ValueError(f"solver= applies to the cvxpy backends 'milp' and 'lp', not {backend!r}")
        cp = require("cvxpy", extra="cvxpy", purpose=f'backend="{backend}"')
        if solver not in cp.installed_solvers():
            raise ValueError(f"cvxpy solver {solver!r} is not installed; installed: {cp.installed_solvers()}")


def lp_bounds(program: Program, tasks: list[tuple[int, int]]) -> np.ndarray:
    """Sound bounds of ``tasks`` from the program's LP relaxation (HiGHS): the builder's bound tightener."""
    return solve_program(program, tasks, BackendOptions("lp"))["bounds"]
