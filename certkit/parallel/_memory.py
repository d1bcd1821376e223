"""How much memory this process may still use, and how many rows of a row-by-row computation fit in it."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["available_memory", "rows_per_chunk"]


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _cgroup_room() -> int | None:
    """Bytes left under this process's cgroup memory limit (v2, or v1's memory controller), or None without
    one."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # v2
            base = Path("/sys/fs/cgroup") / path.lstrip("/")
            limit, used = _read_int(base / "memory.max"), _read_int(base / "memory.current")
        elif "memory" in controllers.split(","):  # v1
            base = Path("/sys/fs/cgroup/memory") / path.lstrip("/")
            limit = _read_int(base / "memory.limit_in_bytes")
            used = _read_int(base / "memory.usage_in_bytes")
        else:
            continue
        if limit is not None and used is not None:
            return max(0, limit - used)
    return None


def _meminfo_available() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def available_memory() -> int | None:
    """Bytes of memory this process can still allocate without swapping, or None where the OS does not say.

    The smaller of the system's available memory (``MemAvailable`` on Linux, free pages elsewhere) and the
    room left under the process's cgroup limit (containers).
    """
    candidates = [_meminfo_available(), _cgroup_room()]
    if candidates[0] is None and hasattr(os, "sysconf"):
        try:
            candidates[0] = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError):
            pass
    known = [c for c in candidates if c is not None and c >= 0]
    return min(known) if known else None


def rows_per_chunk(bytes_per_row: float, chunk_size: int | None = None) -> int:
    """Rows to process together: ``chunk_size`` where given, else as many rows of ``bytes_per_row`` as fit an
    eighth of `available_memory`, kept between 32 MiB and 256 MiB (beyond that larger chunks are not faster,
    only larger; 256 MiB where the OS does not say)."""
    if chunk_size is not None:
        return chunk_size
    room = available_memory()
    budget = 256 * 2**20 if room is None else min(max(room / 8, 32 * 2**20), 256 * 2**20)
    return max(1, int(budget // max(bytes_per_row, 1.0)))
