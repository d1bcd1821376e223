"""`SolveStats`: counts of the solves behind one certified step (read like a read-only mapping)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

__all__ = ["SolveStats"]


@dataclass(frozen=True)
class SolveStats(Mapping):
    """Solver statistics of one epoch.

    Attributes
    ----------
    solves : int
        Objectives given to a solver.
    not_optimal : int
        Solves that stopped early (their dual bound was used) or failed with a solver error (no solver
        bound: the interval bound was kept).
    rejected : int
        Programs whose coefficients exceed `MAX_SCALE` (bounded by interval arithmetic instead).
    max_vars, max_bilinear : int
        Largest program: variables and bilinear terms.
    programs : int
        Programs built.

    `stats["solves"]` reads the same fields as `stats.solves`.
    """

    solves: int = 0
    not_optimal: int = 0
    rejected: int = 0
    max_vars: int = 0
    max_bilinear: int = 0
    programs: int = 0

    @classmethod
    def of(cls, results: list[dict], programs: int) -> SolveStats:
        """Totals over the per-program answers of `solve_program`."""
        return cls(
            solves=sum(r["solves"] for r in results),
            not_optimal=sum(r["not_optimal"] for r in results),
            rejected=sum(r["rejected"] for r in results),
            max_vars=max((r["n_vars"] for r in results), default=0),
            max_bilinear=max((r["n_bilinear"] for r in results), default=0),
            programs=programs,
        )

    def __add__(self, other: SolveStats) -> SolveStats:
        """Statistics of both sets of solves (sums of counts, maxima of sizes)."""
        return SolveStats(
            solves=self.solves + other.solves,
            not_optimal=self.not_optimal + other.not_optimal,
            rejected=self.rejected + other.rejected,
            max_vars=max(self.max_vars, other.max_vars),
            max_bilinear=max(self.max_bilinear, other.max_bilinear),
            programs=self.programs + other.programs,
        )

    def __getitem__(self, key: str) -> int:
        if key not in self._fields():
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self) -> Iterator[str]:
        return iter(self._fields())

    def __len__(self) -> int:
        return len(self._fields())

    @classmethod
    def _fields(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))
