"""Evaluation metrics for prediction sets and intervals."""

from __future__ import annotations

from typing import Any

import numpy as np

from certkit._validation import check_array

__all__ = ["coverage", "interval_coverage", "interval_width", "set_size"]


def _check_sets(sets: Any) -> np.ndarray:
    return check_array(sets, "sets", ndim=2, dtype=bool)


def coverage(sets: Any, y: Any) -> float:
    """Fraction of inputs whose label is in its prediction set.

    Parameters
    ----------
    sets : array-like of bool, shape (n, K)
        Prediction sets (``predict_set`` output).
    y : array-like of int, shape (n,)
        True labels in ``[0, K)``.

    Returns
    -------
    float
    """
    sets = _check_sets(sets)
    y = check_array(y, "y", ndim=1, dtype=int)
    if y.shape[0] != sets.shape[0]:
        raise ValueError(f"inconsistent numbers of samples: sets has {sets.shape[0]}, y has {y.shape[0]}")
    if y.min() < 0 or y.max() >= sets.shape[1]:
        raise ValueError(f"y must contain labels in [0, {sets.shape[1] - 1}]")
    return float(sets[np.arange(y.shape[0]), y].mean())


def set_size(sets: Any) -> float:
    """Average number of labels per prediction set.

    Parameters
    ----------
    sets : array-like of bool, shape (n, K)

    Returns
    -------
    float
    """
    return float(_check_sets(sets).sum(axis=1).mean())


def _check_interval(lo: Any, hi: Any) -> tuple[np.ndarray, np.ndarray]:
    lo = check_array(lo, "lo", ndim=1, finite=False)
    hi = check_array(hi, "hi", ndim=1, finite=False)
    if lo.shape != hi.shape:
        raise ValueError(f"lo and hi must have the same shape, got {lo.shape} and {hi.shape}")
    if np.any(np.isnan(lo)) or np.any(np.isnan(hi)):
        raise ValueError("lo and hi must not contain NaN")
    if np.any(lo > hi):
        raise ValueError("every interval must satisfy lo <= hi")
    return lo, hi


def interval_width(lo: Any, hi: Any) -> float:
    """Average width ``hi - lo`` of prediction intervals (``inf`` if any interval is unbounded)."""
    lo, hi = _check_interval(lo, hi)
    return float(np.mean(hi - lo))


def interval_coverage(lo: Any, hi: Any, y: Any) -> float:
    """Fraction of targets inside their interval ``[lo, hi]``."""
    lo, hi = _check_interval(lo, hi)
    y = check_array(y, "y", ndim=1)
    if y.shape != lo.shape:
        raise ValueError(f"inconsistent numbers of samples: intervals have {lo.shape[0]}, y has {y.shape[0]}")
    return float(np.mean((lo <= y) & (y <= hi)))
