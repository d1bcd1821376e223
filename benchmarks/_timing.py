"""Timing helper shared by the benchmark scripts (run as ``python benchmarks/NAME.py``)."""

from __future__ import annotations

import subprocess
import sys
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


def peak_memory_bytes() -> int:
    """This process's peak resident memory: ``VmHWM`` of ``/proc/self/status`` where there is one (Linux),
    else ``ru_maxrss``.  (On Linux ``ru_maxrss`` keeps the peak of the process before ``exec``: a worker
    started by a large parent reports at least the parent's memory at the fork.)"""
    import resource

    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    scale = 1 if sys.platform == "darwin" else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale
