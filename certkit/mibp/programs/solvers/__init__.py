"""Solver backends for MIBP step programs: one file per backend, the shared rules in `common`.

`solve_program` returns, for each objective and sense, a bound that the true optimum cannot beat (see
docs/mibp.md, "Numerical contract of each backend").
"""

from certkit.mibp.programs.solvers.common import (
    MAX_SCALE,
    BackendOptions,
    GurobiLicenseError,
    UnsoundBoundError,
    program_scale,
)
from certkit.mibp.programs.solvers.dispatch import BACKENDS, check_backend, lp_bounds, solve_program
from certkit.mibp.programs.solvers.gurobi import (
    GUROBI_SIZE_LIMIT,
    gurobi_size_limited,
    gurobi_too_big,
    license_error,
)
from certkit.mibp.programs.solvers.stats import SolveStats

__all__ = [
    "BACKENDS",
    "GUROBI_SIZE_LIMIT",
    "MAX_SCALE",
    "BackendOptions",
    "GurobiLicenseError",
    "SolveStats",
    "UnsoundBoundError",
    "check_backend",
    "gurobi_size_limited",
    "gurobi_too_big",
    "license_error",
    "lp_bounds",
    "program_scale",
    "solve_program",
]
