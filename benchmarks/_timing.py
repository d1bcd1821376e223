"""Timing helper shared by the benchmark scripts (run as ``python benchmarks/NAME.py``)."""

from __future__ import annotations

import subprocess
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


def run_fresh(python: str, script: str, *args: str, cwd: str) -> str:
    """The standard output of ``script`` run by the interpreter ``python`` in a fresh process (another
    install's timings come from its own process); its standard error in the exception if it fails."""
    done = subprocess.run([python, script, *args], cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{python} {script} {' '.join(args)} failed:\n{done.stderr}")
    return done.stdout
