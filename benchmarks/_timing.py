"""Timing helper shared by the benchmark scripts (run as ``python benchmarks/NAME.py``)."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np


def best_time(fn: Callable[[], object], repeats: int = 3) -> tuple[float, object]:
    """Smallest wall time over `repeats` calls, and the last result."""
    best, out = np.inf, None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out
