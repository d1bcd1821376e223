"""Evaluation metrics for prediction sets and intervals."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from certkit._results import ResultMixin, format_table
from certkit._validation import check_array, check_is_fitted

__all__ = [
    "EVALUATION_HEADERS",
    "SetEvaluation",
    "coverage",
    "evaluate_sets",
    "evaluation_table",
    "interval_coverage",
    "interval_width",
    "set_size",
]


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


@dataclass(frozen=True)
class SetEvaluation(ResultMixin):
    """Coverage, size and cost of one calibrated set predictor on clean and attacked inputs.

    Attributes
    ----------
    method : str
        Label of the predictor.
    coverage, set_size : float
        On clean test inputs.
    attacked_coverage, attacked_set_size : float
        On perturbed test inputs (NaN when none were given).
    forward_passes : float
        Model evaluations per test input at prediction time.
    seconds_per_input : float
        Wall time of ``predict_set`` per test input (clean inputs).
    """

    method: str
    coverage: float
    set_size: float
    attacked_coverage: float
    attacked_set_size: float
    forward_passes: float
    seconds_per_input: float

    def row(self) -> list:
        """The values in the order of :data:`EVALUATION_HEADERS`."""
        return [self.method, self.set_size, self.coverage, self.attacked_set_size, self.attacked_coverage,
                self.forward_passes, 1e3 * self.seconds_per_input]

    def summary(self) -> str:
        return format_table(EVALUATION_HEADERS, [self.row()])


#: Column names of :meth:`SetEvaluation.row` (and of :func:`evaluation_table`).
EVALUATION_HEADERS = ("method", "size", "coverage", "size (attacked)", "coverage (attacked)",
                      "passes/input", "ms/input")


def evaluate_sets(estimator: Any, X: Any, y: Any, *, X_attacked: Any = None, method: str | None = None
                  ) -> SetEvaluation:
    """Evaluate a calibrated set predictor (``predict_set``) on clean and optionally attacked inputs.

    Parameters
    ----------
    estimator : calibrated classifier
        Any certkit conformal classifier after ``calibrate``.
    X : array-like, shape (n, ...)
        Clean test inputs.
    y : array-like of int, shape (n,)
        Labels.
    X_attacked : array-like, optional
        Perturbed versions of ``X`` (e.g. from :func:`certkit.conformal.attacks.smoothed_pgd`).
    method : str, optional
        Label (default: the class name).

    Returns
    -------
    SetEvaluation

    Raises
    ------
    sklearn.exceptions.NotFittedError
        If ``estimator`` has not been calibrated.
    """
    if not callable(getattr(estimator, "predict_set", None)):
        raise TypeError(f"estimator must be a certkit conformal classifier with predict_set, "
                        f"got {type(estimator).__name__}")
    check_is_fitted(estimator, getattr(estimator, "_fitted_attr", "threshold_"))
    y = check_array(y, "y", ndim=1, dtype=int)
    n = y.shape[0]
    before = estimator.predictor_.n_forward
    start = time.perf_counter()
    sets = estimator.predict_set(X)
    elapsed = time.perf_counter() - start
    passes = (estimator.predictor_.n_forward - before) / n
    att_cov = att_size = math.nan
    if X_attacked is not None:
        att = estimator.predict_set(X_attacked)
        att_cov, att_size = coverage(att, y), set_size(att)
    return SetEvaluation(method or type(estimator).__name__, coverage(sets, y), set_size(sets), att_cov,
                         att_size, passes, elapsed / n)


def evaluation_table(results: Any, *, title: str | None = None) -> str:
    """A plain-text table of several :class:`SetEvaluation` results."""
    return format_table(EVALUATION_HEADERS, [r.row() for r in results], title=title)
