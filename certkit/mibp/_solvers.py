"""Translators from `Program` to solvers, each returning sound objective bounds.

For every objective and sense the returned number is a bound that the true optimum cannot beat:

* `lp`: the Neumaier–Shcherbina safe bound computed from HiGHS's dual vector (`safe_lp_bound`),
  rigorous whatever the solver's accuracy, no tolerance padding;
* `milp`, `gurobi`, `scip`: the solver's *dual* bound (never an incumbent when the solve is not proven
  optimal), padded outward by the solver's feasibility tolerance × the program's scale;
* never looser than the interval bound of the objective (both are sound, so their intersection is too).

Programs whose coefficients exceed `MAX_SCALE` are not given to a solver (their tolerances cannot be
honoured there): their objectives get the interval bound and are counted as `rejected`.  When known
feasible points are passed (`witnesses`), a solver bound that one of them beats raises
`UnsoundBoundError` with the program attached instead of being returned.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading
import time
from dataclasses import dataclass

import numpy as np

from certkit.mibp._program import Program
from certkit.mibp._safe_dual import safe_lp_bound

__all__ = [
    "GUROBI_SIZE_LIMIT",
    "MAX_SCALE",
    "BackendOptions",
    "GurobiLicenseError",
    "UnsoundBoundError",
    "gurobi_size_limited",
    "gurobi_too_big",
    "license_error",
    "program_scale",
    "solve_program",
]

GUROBI_SIZE_LIMIT = 200
#: Feasibility / optimality / integrality tolerance given to Gurobi and HiGHS.
_FEAS_TOL = 1e-9
#: SCIP's feasibility tolerance (its ``numerics/epsilon`` is 1e-9: the feasibility tolerance must exceed it).
_SCIP_FEAS_TOL = 1e-8
#: Relative padding of every solver value (covers the solvers' relative optimality tolerances).
_PAD_REL = 1e-8
#: Largest coefficient / bound magnitude a program may have to be solved: beyond it an absolute
#: tolerance of ~1e-9 is below the rounding of the rows (|coefficient| × 2**-52 ≈ 2e-10 at 1e6), so the
#: solvers' answers are no longer bounds.  Such programs get the interval bounds instead.
MAX_SCALE = 1e6


class GurobiLicenseError(RuntimeError):
    """The model is larger than the installed (size-limited) Gurobi licence allows.

    ``fits`` maps the options that would give programs within the limit (computed from the program
    sizes) to their values: ``"formulation"``, ``"hidden"`` (hidden units), ``"backend"``.  `str(error)`
    names them as Python keywords; `render(cli=True)` as `certkit mibp` flags.
    """

    def __init__(self, reason: str, *, fits: dict | None = None) -> None:
        self.reason = reason
        self.fits = dict(fits or {})
        super().__init__(self.render(cli=False))

    def render(self, *, cli: bool) -> str:
        """The message with the fitting options in the caller's syntax (CLI flags or Python keywords)."""
        if not self.fits:
            return self.reason
        parts = []
        for key, value in self.fits.items():
            if key == "hidden":
                parts.append(f"--hidden {value}" if cli else f"a model with at most {value} hidden units")
            else:
                parts.append(f"--{key} {value}" if cli else f'{key}="{value}"')
        return f"{self.reason}. Within the limit: {', or '.join(parts)} (or a full Gurobi licence)"


class UnsoundBoundError(RuntimeError):
    """A solver returned a bound that a known feasible point of the program beats.

    Attributes
    ----------
    program : Program or None
        The program whose bound was wrong (None when the whole step's box misses a trajectory).
    objective : int
        Index of the objective (of the parameter when ``program`` is None).
    sense : int
        +1 for a lower bound (minimisation), -1 for an upper bound.
    bound : float
        The (padded) bound the solver returned.
    witness : float
        The objective's value at a feasible point, beyond ``bound``.
    backend : str
    """

    def __init__(
        self,
        program: Program | None,
        objective: int,
        sense: int,
        bound: float,
        witness: float,
        backend: str,
    ) -> None:
        kind = "lower" if sense > 0 else "upper"
        what = f"objective {objective}" if program is not None else f"parameter {objective} of the step"
        super().__init__(
            f"backend={backend!r} returned the {kind} bound {bound!r} for {what}, but a known "
            f"feasible point reaches {witness!r}: the answer is not a bound (a numerical failure of "
            "the solver). The program is attached as .program; please report it. "
            "backend='interval' is unaffected."
        )
        self.program = program
        self.objective = objective
        self.sense = sense
        self.bound = bound
        self.witness = witness
        self.backend = backend


@dataclass(frozen=True)
class BackendOptions:
    """Solver settings shared by all solves of one certified-training call."""

    backend: str
    time_limit: float | None = None
    solver: str | None = None
    tighten: bool = False
    verbose: bool = False


def program_scale(program: Program) -> float:
    """Largest magnitude among the variable bounds, row coefficients, right-hand sides and objective
    coefficients (at least 1): big-M and McCormick coefficients come from the bounds."""
    parts = [1.0]
    for arr in (program.lb, program.ub, program.A.data, program.rhs):
        if arr.size:
            parts.append(float(np.max(np.abs(arr))))
    parts += [float(np.max(np.abs(coef))) for _idx, coef, _c in program.objectives if coef.size]
    return max(parts)


def _pad_bound(value: float, sense: int, tol: float, scale: float) -> float:
    """Move ``value`` outward (down for min, up for max) by the tolerance padding.

    The padding grows with ``scale`` (the largest big-M / bound magnitude of the program): a row
    satisfied only up to the feasibility tolerance ``tol`` can move the objective by about tol × M.
    """
    slack = _PAD_REL * (1.0 + abs(value)) + tol * scale
    return value - slack if sense > 0 else value + slack


@functools.lru_cache(maxsize=1)
def _silence_highs_banner() -> None:
    """HiGHS prints its banner when the first ``Highs`` object of a process is created (before any
    option can be set): create that first one with stdout/stderr redirected."""
    import highspy

    with _quiet_fds():
        highspy.Highs()


_FD_LOCK = threading.Lock()


@contextlib.contextmanager
def _quiet_fds():
    """Redirect the process's stdout / stderr file descriptors to /dev/null (C libraries print there)."""
    with _FD_LOCK:
        sys.stdout.flush()
        sys.stderr.flush()
        saved = [os.dup(1), os.dup(2)]
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, 1)
            os.dup2(null, 2)
            yield
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in (*saved, null):
                os.close(fd)


def _consistent(dual: float, incumbent: float | None, sense: int, value_scale: float) -> bool:
    """A finite dual bound on the right side of the incumbent (``sense`` +1: min, -1: max)."""
    if not np.isfinite(dual) or abs(dual) >= 1e100:
        return False
    if incumbent is None or not np.isfinite(incumbent) or abs(incumbent) >= 1e100:
        return True
    tol = 1e-6 * (1.0 + value_scale)
    return dual <= incumbent + tol if sense > 0 else dual >= incumbent - tol


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
                _silence_highs_banner()
        solver = {"scip": _solve_scip, "gurobi": _solve_gurobi, "milp": _solve_linear, "lp": _solve_linear}[
            options.backend
        ]
        values, flags = solver(program, [tasks[t] for t in todo], options)
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


# ---------------------------------------------------------------------------- SCIP
#: SCIP statuses after which the dual bound is a proven bound (the solve stopped early at a limit);
#: any other non-optimal status (unknown, unbounded, inforunbd, ...) gives no bound.
_SCIP_LIMITS = frozenset(
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


def _scip_model(program: Program, options: BackendOptions):
    """A fresh SCIP model of ``program`` (SCIP keeps state across re-solves of one model after
    ``freeTransform``, which has cut off feasible points of a later objective, so every objective gets
    its own model)."""
    from pyscipopt import Model, quicksum

    m = Model()
    if not options.verbose:
        m.hideOutput()
    m.setParam("numerics/feastol", _SCIP_FEAS_TOL)
    m.setParam("limits/gap", 0.0)
    m.setParam("limits/absgap", 0.0)
    if program.widened:
        m.setParam("presolving/maxrounds", 0)
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


def _solve_scip(program: Program, tasks, options: BackendOptions):
    try:
        from pyscipopt import quicksum
    except ImportError as exc:
        raise ImportError('backend="scip" needs PySCIPOpt: pip install "certkit[scip]"') from exc
    scale = program_scale(program)
    values, flags = [], []
    for j, sense in tasks:
        m, x = _scip_model(program, options)
        idx, coef, _ = program.objectives[j]
        m.setObjective(
            quicksum(float(c) * x[i] for i, c in zip(idx, coef)),
            sense="minimize" if sense > 0 else "maximize",
        )
        if options.verbose:
            m.optimize()
        else:
            with _quiet_fds():  # SoPlex prints GMP tolerance warnings even with hideOutput()
                m.optimize()
        status = m.getStatus()
        if status == "infeasible":
            raise RuntimeError(
                "SCIP reported an infeasible step program; this indicates a numerical problem "
                "(the unperturbed data are always feasible). Try backend='milp' or 'interval'."
            )
        bound = -np.inf * sense
        if status == "optimal" or status in _SCIP_LIMITS:
            dual = m.getDualbound()
            incumbent = m.getPrimalbound() if m.getNSols() > 0 else None
            if _consistent(dual, incumbent, sense, abs(dual)):
                bound = dual
        flags.append(status == "optimal")
        values.append(_pad_bound(bound, sense, _SCIP_FEAS_TOL, scale) if np.isfinite(bound) else bound)
    return values, flags


# ---------------------------------------------------------------------------- Gurobi
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
def _gurobi_env():
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


def _solve_gurobi(program: Program, tasks, options: BackendOptions):
    try:
        import gurobipy as gp
    except ImportError as exc:
        raise ImportError('backend="gurobi" needs gurobipy: pip install "certkit[gurobi]"') from exc
    if gurobi_too_big(program) and gurobi_size_limited():
        raise license_error(program)
    scale = program_scale(program)
    with gp.Model(env=_gurobi_env()) as m:
        m.Params.OutputFlag = int(options.verbose)
        m.Params.NonConvex = 2
        m.Params.FeasibilityTol = _FEAS_TOL
        m.Params.OptimalityTol = _FEAS_TOL
        m.Params.IntFeasTol = _FEAS_TOL
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
                    dual = float(m.ObjBound)
                    if _consistent(dual, incumbent, sense, abs(dual)):
                        bound = dual
                elif optimal:
                    bound = float(m.ObjVal)
            flags.append(optimal)
            values.append(_pad_bound(bound, sense, _FEAS_TOL, scale) if np.isfinite(bound) else bound)
    return values, flags


# ---------------------------------------------------------------------------- cvxpy (McCormick)
#: Padding tolerance (× scale) of MILP dual bounds (HiGHS's MIP and the cvxpy MIP solvers).
_MILP_TOL = 1e-7
_U = 2.0**-52


def _relaxation_rows(program: Program):
    """Linear rows (A_ub, b_ub) of the McCormick envelopes of all bilinear terms.

    Each row is valid in exact arithmetic for the float bounds it is built from; its right-hand side is
    rounded outward (loosened) by the rounding of the product ``ca * cb`` and, for a square, of the
    coefficient ``ca + cb``, so the float row contains every point the exact envelope contains.
    """
    import scipy.sparse as sp

    rows, cols, vals, rhs = [], [], [], []
    r = 0
    lb, ub = program.lb, program.ub
    for s, a, b in program.bilinear:
        aL, aU, bL, bU = lb[a], ub[a], lb[b], ub[b]
        # s >= aL b + bL a - aL bL ; s >= aU b + bU a - aU bU
        # s <= aU b + bL a - aU bL ; s <= aL b + bU a - aL bU
        for sign, ca, cb in ((-1, aL, bL), (-1, aU, bU), (1, aU, bL), (1, aL, bU)):
            slack = 2.0 * _U * abs(ca * cb)
            if a == b:
                rows += [r, r]
                cols += [s, a]
                vals += [float(sign), -sign * (ca + cb)]
                slack += 2.0 * _U * abs(ca + cb) * max(abs(aL), abs(aU))
            else:
                rows += [r, r, r]
                cols += [s, b, a]
                vals += [float(sign), -sign * ca, -sign * cb]
            rhs.append(np.nextafter(-sign * ca * cb + slack, np.inf))
            r += 1
    M = sp.csr_matrix((vals, (rows, cols)), shape=(r, program.n_vars))
    return M, np.asarray(rhs, dtype=np.float64)


def _solve_cvxpy(program: Program, tasks, options: BackendOptions):
    try:
        import cvxpy as cp
    except ImportError as exc:
        raise ImportError(f'backend="{options.backend}" needs cvxpy: pip install "certkit[cvxpy]"') from exc
    import scipy.sparse as sp

    solver = options.solver or "HIGHS"
    integral = options.backend == "milp" and bool(program.binary.any())
    M, mrhs = _relaxation_rows(program)
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
    kwargs = _cvxpy_options(solver, options.time_limit, integral, options.verbose)
    scale = program_scale(program)
    rows = sp.vstack([A_ub, A_eq]).tocsr()
    row_lo = np.concatenate([np.full(A_ub.shape[0], -np.inf), b_eq])
    row_hi = np.concatenate([b_ub, b_eq])
    values, flags = [], []
    for j, sense in tasks:
        idx, coef, _ = program.objectives[j]
        vec = np.zeros(program.n_vars)
        np.add.at(vec, idx, coef * sense)
        c.value = vec
        try:
            prob.solve(solver=solver, **kwargs)
        except cp.error.SolverError as exc:
            raise RuntimeError(
                f"cvxpy solver {solver} failed on a step program ({exc}); "
                "try another solver= or backend='interval'"
            ) from exc
        status = prob.status
        if status in ("infeasible", "infeasible_inaccurate"):
            raise RuntimeError(
                f"{solver} reported an infeasible step program; this indicates a numerical "
                "problem. Try backend='interval'."
            )
        bound = -np.inf
        optimal = status == "optimal"
        if integral:
            stats = prob.solver_stats.extra_stats
            dual = getattr(stats, "mip_dual_bound", None) if solver == "HIGHS" else None
            gap = getattr(stats, "mip_gap", None)
            usable = (
                status in ("optimal", "user_limit")
                and dual is not None
                and (gap is None or np.isfinite(gap))
                and _consistent(float(dual), prob.value if optimal else None, 1, abs(float(dual)))
            )
            if usable:
                bound = _pad_bound(float(dual), 1, _MILP_TOL, scale)
            elif optimal:
                value = float(prob.value) - _DEFAULT_GAP * (1.0 + abs(prob.value))
                bound = _pad_bound(value, 1, _MILP_TOL, scale)
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
            relaxed = _solve_cvxpy(program, [(j, sense)], lp_options)
            bound, optimal = relaxed[0][0] * sense, False
        values.append(sense * bound)
        flags.append(optimal)
    return values, flags


_DEFAULT_GAP = 1e-4


# ---------------------------------------------------------------------------- MILP / LP (McCormick)
def _solve_linear(program: Program, tasks, options: BackendOptions):
    """McCormick MILP / LP: HiGHS directly (one model, only the costs change) unless ``solver=`` names
    another cvxpy solver."""
    if options.solver in (None, "HIGHS"):
        try:
            import highspy  # noqa: F401
        except ImportError:
            return _solve_cvxpy(program, tasks, options)
        return _solve_highs(program, tasks, options)
    return _solve_cvxpy(program, tasks, options)


def _linear_rows(program: Program):
    """All linear rows (program rows and McCormick envelopes) as CSR with row bounds."""
    import scipy.sparse as sp

    M, mrhs = _relaxation_rows(program)
    A = sp.vstack([program.A, M]).tocsr()
    upper = np.concatenate([program.rhs, mrhs])
    lower = np.concatenate([np.where(program.is_eq, program.rhs, -np.inf), np.full(len(mrhs), -np.inf)])
    return A, lower, upper


def _solve_highs(program: Program, tasks, options: BackendOptions):
    """Solve every task on one HiGHS model built once: a new objective only changes the cost vector,
    so the LP re-solves warm from the previous basis.  Bounds: the MIP dual bound (also when stopped
    early) padded outward, or the safe bound of the LP's dual vector; a MILP without a dual bound
    falls back to its LP."""
    import highspy

    integral = options.backend == "milp" and bool(program.binary.any())
    scale = program_scale(program)
    A, row_lo, row_hi = _linear_rows(program)
    n = program.n_vars
    h = highspy.Highs()
    h.setOptionValue("output_flag", bool(options.verbose))
    h.setOptionValue("primal_feasibility_tolerance", _FEAS_TOL)
    h.setOptionValue("dual_feasibility_tolerance", _FEAS_TOL)
    if integral:
        h.setOptionValue("mip_rel_gap", 0.0)
        h.setOptionValue("mip_abs_gap", 0.0)
        h.setOptionValue("mip_feasibility_tolerance", _FEAS_TOL)
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
            bound = _highs_mip_bound(h, status)
            if np.isfinite(bound):
                bound = _pad_bound(bound, 1, _MILP_TOL, scale)
        else:
            sol = h.getSolution()
            if sol.dual_valid:
                y = np.asarray(sol.row_dual)
                bound = safe_lp_bound(vec, A, row_lo, row_hi, program.lb, program.ub, y)
        if not np.isfinite(bound) and integral:
            lp_options = BackendOptions("lp", options.time_limit, verbose=options.verbose)
            relaxed = _solve_highs(program, [(j, sense)], lp_options)
            bound, optimal = relaxed[0][0] * sense, False
        values.append(sense * bound)
        flags.append(optimal)
    return values, flags


def _highs_mip_bound(h, status) -> float:
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
    return dual if _consistent(dual, incumbent, 1, abs(dual)) else -np.inf


def _cvxpy_options(solver: str, time_limit: float | None, integral: bool, verbose: bool) -> dict:
    kw: dict = {"verbose": verbose}
    if solver == "HIGHS":
        kw.update(
            primal_feasibility_tolerance=_FEAS_TOL,
            dual_feasibility_tolerance=_FEAS_TOL,
            log_to_console=verbose,
            output_flag=verbose,
        )
        if integral:
            kw.update(mip_rel_gap=0.0, mip_abs_gap=0.0, mip_feasibility_tolerance=_FEAS_TOL)
        if time_limit is not None:
            kw["time_limit"] = float(time_limit)
    elif solver == "GUROBI":
        kw.update(FeasibilityTol=_FEAS_TOL, OptimalityTol=_FEAS_TOL, MIPGap=_DEFAULT_GAP, Threads=1)
        if time_limit is not None:
            kw["TimeLimit"] = float(time_limit)
    elif solver == "SCIP":
        params = {"limits/gap": _DEFAULT_GAP}
        if time_limit is not None:
            params["limits/time"] = float(time_limit)
        kw["scip_params"] = params
    elif time_limit is not None:
        raise ValueError(
            f"time_limit is supported with the cvxpy solvers HIGHS, GUROBI and SCIP, not {solver}"
        )
    return kw
