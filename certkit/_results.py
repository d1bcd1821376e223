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


def _fmt(value: Any) -> str:
    if isinstance(value, (float, np.floating)):
        if value == 0 or 1e-3 <= abs(value) < 1e6:
            return f"{value:.4f}".rstrip("0").rstrip(".") if value != int(value) else f"{value:.1f}"
        return f"{value:.3e}"
    return str(value)


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], *, title: str | None = None) -> str:
    """Render ``rows`` under ``headers`` as an aligned plain-text table."""
    cells = [[_fmt(v) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        if len(row) != len(headers):
            raise ValueError(f"row {row} has {len(row)} cells, expected {len(headers)}")
        widths = [max(w, len(c)) for w, c in zip(widths, row)]
    line = "  ".join("-" * w for w in widths)
    out = []
    if title:
        out.append(title)
    out.append("  ".join(h.ljust(w) for h, w in zip(headers, widths)))
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
