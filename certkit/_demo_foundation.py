"""Demo section for the shared layer: kernels and statistics (no subcommand of its own)."""

from __future__ import annotations

import numpy as np

NAME = "foundation"
HELP = "compiled kernels and shared statistics"


def demo(rng: np.random.Generator) -> str:
    """A few lines showing the kernels and the shared bounds."""
    from certkit import _core

    draws = _core.random_uint64(int(rng.integers(2**63 - 1)), 0, np.arange(3, dtype=np.uint64))
    return "   counter-based draws: " + ", ".join(f"{d:#018x}" for d in draws)
