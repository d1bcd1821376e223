"""Shared plumbing for result objects: plain-text tables and dict export."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

__all__ = ["ConfidenceInterval", "ResultMixin", "format_table"]


class ConfidenceInterval(NamedTuple):
    """A confidence interval ``(low, high)``, as returned by every ``confidence_interval`` method."""

    low: float
    high: float


def _is_float(value: Any) -> bool:
    return isinstance(value, (float, np.floating))


def _float_format(column: Sequence[Any]) -> str:
    """One format for the floats of a column: fixed point with the fewest decimals (at most 4) that show
    every value exactly, or scientific when all finite values are below 1e-3 or any reaches 1e6."""
    finite = [abs(float(v)) for v in column if _is_float(v) and np.isfinite(v)]
    if finite and (max(finite) >= 1e6 or 0 < max(finite) < 1e-3):
        return ".3e"
    for decimals in range(4):
        if all(abs(v - round(v, decimals)) <= 1e-9 * max(1.0, v) for v in finite):
            return f".{decimals}f"
    return ".4f"


def _fmt(value: Any, float_format: str) -> str:
    if _is_float(value):
        return format(float(value), float_format) if np.isfinite(value) else str(float(value))
    return str(value)


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], *, title: str | None = None) -> str:
    """Render ``rows`` under ``headers`` as an aligned plain-text table.

    Floats share one format per column (fixed point with up to 4 decimals, or scientific notation when
    the column's values are all tiny or some are huge); integers and strings are printed as they are.
    """
    for row in rows:
        if len(row) != len(headers):
            raise ValueError(f"row {list(row)} has {len(row)} cells, expected {len(headers)}")
    formats = [_float_format([row[j] for row in rows]) for j in range(len(headers))]
    cells = [[_fmt(v, f) for v, f in zip(row, formats)] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        widths = [max(w, len(c)) for w, c in zip(widths, row)]
    line = "  ".join("-" * w for w in widths)
    out = []
    if title:
        out.append(title)
    out.append("  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip())
    out.append(line)
    out.extend("  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in cells)
    return "\n".join(out)


class ResultMixin:
    """Mixin for frozen result dataclasses: ``to_dict()`` and ``__str__`` via ``summary()``."""

    def summary(self) -> str:  # pragma: no cover - every result overrides it
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        """Fields as a dict (arrays are kept as NumPy arrays)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}  # type: ignore[arg-type]

    def __str__(self) -> str:
        return self.summary()
