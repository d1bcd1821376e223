"""Private helpers shared by the ``certkit.stats`` modules."""

from __future__ import annotations

from typing import Any

import numpy as np

from certkit._results import ConfidenceInterval
from certkit._validation import check_array, check_in_options, check_level

__all__ = [
    "ALTERNATIVES",
    "NOISES",
    "bounded_array",
    "broadcast",
    "interval",
    "pad_down",
    "pad_up",
    "tail_probability",
    "unwrap",
]

#: The `alternative` options of every confidence bound (the naming of `scipy.stats.binomtest`).
ALTERNATIVES = ("two-sided", "greater", "less")
#: The `noise` families of randomized smoothing.
NOISES = ("gaussian", "uniform")

# Outward padding of computed bounds (design rule: floating-point bounds are padded outward).  The special
# functions used here (betaincinv, ndtr, ndtri) are accurate to < 60 float64 epsilons (checked against
# 40-digit mpmath on random cases); 1e-13 relative is ~450 epsilons, plus 8 epsilons of the value range.
REL_PAD = 1e-13
ABS_PAD = 8 * float(np.finfo(np.float64).eps)


def bounded_array(
    x: Any,
    name: str,
    *,
    low: float | None = None,
    high: float | None = None,
    strict_low: bool = False,
    dtype: type = np.float64,
) -> np.ndarray:
    """A finite, non-empty array of any shape with every entry in ``[low, high]``."""
    arr = check_array(x, name, dtype=dtype)
    if low is not None:
        bad = arr <= low if strict_low else arr < low
        if np.any(bad):
            op = ">" if strict_low else ">="
            raise ValueError(f"{name} must be {op} {low} everywhere, got {arr[bad].flat[0]}")
    if high is not None and np.any(arr > high):
        raise ValueError(f"{name} must be <= {high} everywhere, got {arr[arr > high].flat[0]}")
    return arr


def broadcast(*named: tuple[str, np.ndarray]) -> list[np.ndarray]:
    """Broadcast arrays against each other, naming them when the shapes are incompatible."""
    try:
        return list(np.broadcast_arrays(*(arr for _, arr in named)))
    except ValueError:
        desc = ", ".join(f"{name} has shape {arr.shape}" for name, arr in named)
        raise ValueError(f"shapes cannot be broadcast together: {desc}") from None


def pad_down(x: np.ndarray, *, floor: float = 0.0, scale: float = 1.0) -> np.ndarray:
    """Move computed lower bounds down by the rounding margin, never below ``floor``."""
    return np.maximum(x - REL_PAD * np.abs(x) - ABS_PAD * scale, floor)


def pad_up(x: np.ndarray, *, ceil: float = 1.0, scale: float = 1.0) -> np.ndarray:
    """Move computed upper bounds up by the rounding margin, never above ``ceil``."""
    return np.minimum(x + REL_PAD * np.abs(x) + ABS_PAD * scale, ceil)


def tail_probability(confidence_level: Any, alternative: Any, *, n_tests: int = 1) -> float:
    """Error probability of each bounded side: `(1 - confidence_level) / n_tests`, halved if two-sided."""
    level = check_level(confidence_level)
    check_in_options(alternative, "alternative", ALTERNATIVES)
    alpha = (1.0 - level) / n_tests
    return alpha / 2.0 if alternative == "two-sided" else alpha


def interval(low: np.ndarray, high: np.ndarray) -> ConfidenceInterval:
    """`ConfidenceInterval(low, high)` with 0-d bounds as `numpy.float64` scalars."""
    return ConfidenceInterval(unwrap(low), unwrap(high))


def unwrap(arr: np.ndarray) -> np.ndarray | np.float64:
    """A 0-d result becomes a ``numpy.float64`` scalar (a ``float`` subclass); arrays stay arrays."""
    arr = np.asarray(arr, dtype=np.float64)
    return arr[()] if arr.ndim == 0 else arr
