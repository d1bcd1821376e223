"""`BoundResult`, a bound with its additive terms and assumptions, and the overflow checks every bound
shares."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from certkit._results import ResultMixin, format_table

__all__ = ["BoundResult"]


@dataclasses.dataclass(frozen=True)
class BoundResult(ResultMixin):
    """A bound and its additive terms.

    Attributes
    ----------
    total : float
        The bound: the sum of `terms` (always finite: a bound that would be infinite or overflow, e.g. at a
        zero radius with $p > 1$, raises ValueError instead).
    terms : dict of str to float
        Each additive term by name (``"complexity"``, ``"sampling"``, ``"performative"``, ...).
    assumptions : dict of str to object
        The constants the bound was evaluated with and the conditions it needs, by name.
    """

    total: float
    terms: Mapping[str, float]
    assumptions: Mapping[str, Any]

    @property
    def loss_range(self) -> float | None:
        """The range of the loss the bound assumes (F or M), None when the bound does not fix one."""
        for key in _RANGE_KEYS:
            if key in self.assumptions:
                return float(self.assumptions[key])
        return None

    @property
    def vacuous(self) -> bool:
        """Whether the bound exceeds the loss range: a gap above it holds for every loss with values in that
        range, so the bound says nothing."""
        return self.loss_range is not None and self.total > self.loss_range

    def summary(self) -> str:
        """The terms, the total and the assumptions as plain text."""
        rows = [[name, value] for name, value in self.terms.items()] + [["total", self.total]]
        lines = [format_table(["term", "value"], rows, title=self.assumptions.get("bound", "bound"))]
        if self.vacuous:
            lines.append(
                f"vacuous: the total {self.total:.4g} exceeds the loss range {self.loss_range:g}, which "
                "bounds every gap of a loss with values in that range"
            )
        lines.append("assumptions:")
        lines.extend(f"  {k}: {v}" for k, v in self.assumptions.items() if k != "bound")
        return "\n".join(lines)


_RANGE_KEYS = ("F (loss range)", "loss_bound M")


def _zero_radius_error(message: str) -> ValueError:
    """The plain ``ValueError`` of a Thm 3.13 (p > 1) / 3.15 bound at radius R = 0, where its complexity term
    is infinite; marked ``zero_radius`` so that `max_affected_share` can treat that share as infinite."""
    error = ValueError(message)
    error.zero_radius = True  # type: ignore[attr-defined]
    return error


def _result(terms: dict[str, float], assumptions: dict[str, Any], *, culprits: str) -> BoundResult:
    """The result with the total; ValueError naming `culprits` when a term or the total overflows float64."""
    try:
        total = math.fsum(terms.values()) if all(np.isfinite(v) for v in terms.values()) else math.inf
    except OverflowError:  # finite terms whose sum overflows
        total = math.inf
    if not math.isfinite(total):
        big = ", ".join(f"{k} = {v:.3g}" for k, v in terms.items())
        raise ValueError(
            f"{culprits}: the bound overflows float64 ({big}); it is vacuous at this scale - rescale the "
            "problem (e.g. the data space to a unit diameter)"
        )
    return BoundResult(total=float(total), terms=dict(terms), assumptions=dict(assumptions))


def _overflow_guard(fn: Callable[[], float], culprits: str) -> float:
    """`fn()` with Python's OverflowError (from ** and math functions) turned into a ValueError naming
    `culprits`."""
    try:
        with np.errstate(over="ignore"):
            return fn()
    except OverflowError:
        raise ValueError(
            f"{culprits}: a term of the bound overflows float64; it is vacuous at this scale - rescale the "
            "problem (e.g. the data space to a unit diameter)"
        ) from None
