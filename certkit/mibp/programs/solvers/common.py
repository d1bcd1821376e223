"""Rules shared by every solver backend: tolerances, options, errors, padding, status consistency, silence."""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading
from dataclasses import dataclass

import numpy as np

from certkit.mibp.programs.program import Program

__all__ = [
    "FEAS_TOL",
    "MAX_SCALE",
    "MILP_TOL",
    "PAD_REL",
    "SCIP_FEAS_TOL",
    "BackendOptions",
    "GurobiLicenseError",
    "UnsoundBoundError",
    "consistent",
    "pad_bound",
    "program_scale",
    "quiet_fds",
    "silence_highs_banner",
]

#: Feasibility / optimality / integrality tolerance given to Gurobi and HiGHS.
FEAS_TOL = 1e-9
#: SCIP's feasibility tolerance (its ``numerics/epsilon`` is 1e-9: the feasibility tolerance must exceed it).
SCIP_FEAS_TOL = 1e-8
#: Relative padding of every solver value (covers the solvers' relative optimality tolerances).
PAD_REL = 1e-8
#: Largest coefficient / bound magnitude a program may have to be solved: beyond it an absolute
#: tolerance of ~1e-9 is below the rounding of the rows (|coefficient| × 2**-52 ≈ 2e-10 at 1e6), so the
#: solvers' answers are no longer bounds.  Such programs get the interval bounds instead.
MAX_SCALE = 1e6
#: Padding tolerance (× scale) of MILP dual bounds (HiGHS's MIP and the cvxpy MIP solvers).
MILP_TOL = 1e-7


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


def pad_bound(value: float, sense: int, tol: float, scale: float) -> float:
    """Move ``value`` outward (down for min, up for max) by the tolerance padding.

    The padding grows with ``scale`` (the largest big-M / bound magnitude of the program): a row
    satisfied only up to the feasibility tolerance ``tol`` can move the objective by about tol × M.
    """
    slack = PAD_REL * (1.0 + abs(value)) + tol * scale
    return value - slack if sense > 0 else value + slack


@functools.lru_cache(maxsize=1)
def silence_highs_banner() -> None:
    """HiGHS prints its banner when the first ``Highs`` object of a process is created (before any
    option can be set): create that first one with stdout/stderr redirected."""
    import highspy

    with quiet_fds():
        highspy.Highs()


_FD_LOCK = threading.Lock()


@contextlib.contextmanager
def quiet_fds():
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


def consistent(dual: float, incumbent: float | None, sense: int, value_scale: float) -> bool:
    """A finite dual bound on the right side of the incumbent (``sense`` +1: min, -1: max)."""
    if not np.isfinite(dual) or abs(dual) >= 1e100:
        return False
    if incumbent is None or not np.isfinite(incumbent) or abs(incumbent) >= 1e100:
        return True
    tol = 1e-6 * (1.0 + value_scale)
    return dual <= incumbent + tol if sense > 0 else dual >= incumbent - tol
