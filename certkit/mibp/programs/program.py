"""Linear expressions and the backend-neutral `Program` container of one certified step.

A `Program` has continuous and binary variables with finite bounds, linear constraints (``<=`` and
``==``), bilinear equalities ``s = a * b`` and a list of linear objectives (one per bound to compute).
`Lin` is a linear expression whose folded constant carries a rounding-error record.  Nothing here knows
a solver or the network: `certkit.mibp.programs.builder` and `certkit.mibp.programs.encoding` write programs,
`certkit.mibp.programs.solvers` bounds them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

_U = 2.0**-52

#: Smallest relative width of a varying parameter or input box in a program.  The solvers run with
#: feasibility tolerance 1e-9 and treat smaller coefficients as zero (SCIP ``numerics/epsilon``, HiGHS
#: ``small_matrix_value``), so a box narrower than about 1e3 × that tolerance turns big-M rows at a
#: kink into wrong ones and a solver reports "optimal" with bounds that exclude reachable points.
#: Such boxes are widened to this width around their midpoint: a superset of the allowed
#: parameters / perturbations, so the certificate stays sound (and is as loose as at that width).
MIN_WIDTH = 1e-6


def widen(lo: float, hi: float) -> tuple[float, float]:
    """``[lo, hi]`` widened to at least ``MIN_WIDTH * max(1, |lo|, |hi|)`` when it is not a point."""
    w = MIN_WIDTH * max(1.0, abs(lo), abs(hi))
    if 0.0 < hi - lo < w:
        c = 0.5 * (lo + hi)
        return min(lo, c - 0.5 * w), max(hi, c + 0.5 * w)
    return lo, hi


__all__ = ["MIN_WIDTH", "Lin", "Program", "lin_sum", "widen"]


class Lin:
    """A linear expression ``Σ coef_i x_i + const`` over program variables.

    The constant is folded in floating point, so it carries a rounding record: ``mag``
    (total magnitude of the folded contributions), ``nops`` (depth of the fold) and
    ``xerr`` (absolute error inherited from inexact factors).  `err` bounds the
    distance between the represented expression and both the exact value and any float
    evaluation of it (e.g. numpy's matmul in the nominal training, whose summation order differs).
    """

    __slots__ = ("const", "mag", "nops", "terms", "xerr")

    def __init__(
        self,
        terms: dict[int, float] | None = None,
        const: float = 0.0,
        *,
        mag: float | None = None,
        nops: int = 0,
        xerr: float = 0.0,
    ) -> None:
        self.terms = terms or {}
        self.const = float(const)
        self.mag = abs(self.const) if mag is None else float(mag)
        self.nops = nops
        self.xerr = float(xerr)

    @property
    def is_const(self) -> bool:
        return not self.terms

    @property
    def err(self) -> float:
        """Bound on the rounding error of the constant (fold and any other float evaluation order)."""
        if self.nops == 0 and self.xerr == 0.0:
            return 0.0
        return 2.0 * (self.nops + 2) * _U * self.mag + self.xerr + 1e-300

    def __add__(self, other: Lin | float) -> Lin:
        if not isinstance(other, Lin):
            other = float(other)
            return Lin(
                dict(self.terms),
                self.const + other,
                mag=self.mag + abs(other),
                nops=self.nops + 1,
                xerr=self.xerr,
            )
        terms = dict(self.terms)
        for k, v in other.terms.items():
            terms[k] = terms.get(k, 0.0) + v
        return Lin(
            {k: v for k, v in terms.items() if v != 0.0},
            self.const + other.const,
            mag=self.mag + other.mag,
            nops=max(self.nops, other.nops) + 1,
            xerr=self.xerr + other.xerr,
        )

    __radd__ = __add__

    def __mul__(self, c: float) -> Lin:
        c = float(c)
        if c == 0.0:
            return Lin()
        return Lin(
            {k: v * c for k, v in self.terms.items()},
            self.const * c,
            mag=self.mag * abs(c),
            nops=self.nops + 1,
            xerr=self.xerr * abs(c),
        )

    __rmul__ = __mul__

    def __neg__(self) -> Lin:
        return self * -1.0

    def __sub__(self, other: Lin | float) -> Lin:
        return self + (-other if isinstance(other, Lin) else -float(other))


def lin_sum(items: list[Lin]) -> Lin:
    terms: dict[int, float] = {}
    const = mag = xerr = 0.0
    nops = 0
    for e in items:
        const += e.const
        mag += e.mag
        xerr += e.xerr
        nops = max(nops, e.nops)
        for k, v in e.terms.items():
            terms[k] = terms.get(k, 0.0) + v
    return Lin(
        {k: v for k, v in terms.items() if v != 0.0}, const, mag=mag, nops=nops + len(items), xerr=xerr
    )


@dataclass
class Program:
    """A finished program (see the module docstring); arrays are float64 / int64 / bool."""

    lb: np.ndarray
    ub: np.ndarray
    binary: np.ndarray
    A: sp.csr_matrix
    is_eq: np.ndarray
    rhs: np.ndarray
    bilinear: np.ndarray
    objectives: list[tuple[np.ndarray, np.ndarray, float]] = field(default_factory=list)
    objective_bounds: np.ndarray = field(default_factory=lambda: np.zeros((0, 2)))
    #: rounding error of each objective (float evaluation vs represented expression); solver values are
    #: widened by it
    objective_errors: np.ndarray = field(default_factory=lambda: np.zeros(0))
    #: number of parameter / input boxes widened to `MIN_WIDTH` (presolve reductions across such
    #: variables moved Gurobi's bounds by up to 7e-7, beyond its padding)
    widened: int = 0

    @property
    def n_vars(self) -> int:
        return len(self.lb)

    @property
    def n_constraints(self) -> int:
        return self.A.shape[0] + len(self.bilinear)
