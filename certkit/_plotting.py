"""Shared plot plumbing (matplotlib imported lazily through the ``plot`` extra).

Each capability owns its plots in ``certkit/<capability>/plot.py``; this module holds what they share.
"""

from __future__ import annotations

from typing import Any

from certkit._optional import require

__all__ = ["axes", "null_locator", "pyplot"]


def pyplot() -> Any:
    return require("matplotlib.pyplot", extra="plot", purpose="plotting")


def axes(ax: Any) -> Any:
    """`ax`, or a new figure's axes (matplotlib imported lazily)."""
    if ax is not None:
        return ax
    _, ax = pyplot().subplots(figsize=(5, 3.5))
    return ax


def null_locator() -> Any:
    from matplotlib.ticker import NullLocator

    return NullLocator()
