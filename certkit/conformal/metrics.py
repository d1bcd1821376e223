"""Evaluation metrics for prediction sets and intervals."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from certkit._results import ResultMixin, format_table
from certkit._validation import as_numpy, check_array, check_is_fitted, check_same_length
from certkit.conformal._checks import check_inputs, encode_labels

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


def _check_sets(sets: Any, y: Any = None) -> np.ndarray:
    arr = np.asarray(sets) if isinstance(sets, (list, tuple, np.ndarray)) else None
    if y is not None and arr is not None and arr.ndim == 1 and np.ndim(y) == 2:
        raise ValueError(
            "sets must be 2-D, got a 1-D array and a 2-D y: the arguments look swapped; the order is "
            "coverage(sets, y), predictions first and labels last as in evaluate_sets(estimator, X, y)"
        )
    return check_array(sets, "sets", ndim=2, dtype=bool)


def coverage(sets: Any, y: Any, *, classes: Any = None) -> float:
    """Fraction of inputs whose label is in its prediction set.

    Predictions first, labels last, as in ``evaluate_sets(estimator, X, y)`` and ``interval_coverage(lower,
    upper, y)``.

    Parameters
    ----------
    sets : array-like of bool, shape (n, K)
        Prediction sets (``predict_set`` output).
    y : array-like, shape (n,)
        True labels: column indices in ``[0, K)``, or labels among ``classes``.
    classes : array-like, shape (K,), optional
        The class of every column of ``sets`` (the estimator's ``classes_``); ``y`` is then looked up in it.

    Returns
    -------
    float
    """
    sets = _check_sets(sets, y)
    y = _set_columns(y, sets, classes)
    return float(sets[np.arange(y.shape[0]), y].mean())


def _set_columns(y: Any, sets: np.ndarray, classes: Any) -> np.ndarray:
    """The column of ``sets`` of every label of ``y`` (indices, or labels among ``classes``)."""
    if classes is None:
        labels = as_numpy(y, "y")
        if labels.dtype.kind in "USOb":  # class labels, not the columns of sets
            raise TypeError(
                f"y holds class labels (dtype {labels.dtype}), not column indices of sets: pass the class of "
                "every column with classes=, e.g. coverage(sets, y, classes=clf.classes_) for the "
                "estimator clf that made the sets"
            )
        y = check_array(labels, "y", ndim=1, dtype=int)
        check_same_length(("sets", sets), ("y", y))
        if y.min() < 0 or y.max() >= sets.shape[1]:
            raise ValueError(f"y must contain labels in [0, {sets.shape[1] - 1}]")
        return y
    classes = as_numpy(classes, "classes")
    if classes.shape != (sets.shape[1],):
        raise ValueError(
            f"classes must have one class per column of sets ({sets.shape[1]}), got shape {classes.shape}"
        )
    y = as_numpy(y, "y")
    if y.ndim != 1:
        raise ValueError(f"y must be 1-D, got an array of shape {y.shape}")
    check_same_length(("sets", sets), ("y", y))
    if y.size == 0:
        raise ValueError("y must not be empty")
    return encode_labels(y, sets.shape[1], classes, name="classes")[1]


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


def _check_interval(lower: Any, upper: Any) -> tuple[np.ndarray, np.ndarray]:
    lower = check_array(lower, "lower", ndim=1, finite=False)
    upper = check_array(upper, "upper", ndim=1, finite=False)
    check_same_length(("lower", lower), ("upper", upper))
    if np.any(np.isnan(lower)) or np.any(np.isnan(upper)):
        raise ValueError("lower and upper must not contain NaN")
    if np.any(lower > upper):
        raise ValueError("every interval must satisfy lower <= upper")
    return lower, upper


def interval_width(lower: Any, upper: Any) -> float:
    """Average width ``upper - lower`` of prediction intervals (``inf`` if any interval is unbounded)."""
    lower, upper = _check_interval(lower, upper)
    return float(np.mean(upper - lower))


def interval_coverage(lower: Any, upper: Any, y: Any) -> float:
    """Fraction of targets inside their interval ``[lower, upper]``."""
    lower, upper = _check_interval(lower, upper)
    y = check_array(y, "y", ndim=1)
    check_same_length(("intervals", lower), ("y", y))
    return float(np.mean((lower <= y) & (y <= upper)))


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
        """The values in the order of `EVALUATION_HEADERS`."""
        return [
            self.method,
            self.set_size,
            self.coverage,
            self.attacked_set_size,
            self.attacked_coverage,
            self.forward_passes,
            1e3 * self.seconds_per_input,
        ]

    def summary(self) -> str:
        """One row of `evaluation_table` (without the attacked columns when no attacked inputs were given)."""
        return evaluation_table([self])


#: Column names of `SetEvaluation.row` (and of `evaluation_table`).
EVALUATION_HEADERS = (
    "method",
    "size",
    "coverage",
    "size (attacked)",
    "coverage (attacked)",
    "passes/input",
    "ms/input",
)


def evaluate_sets(
    estimator: Any, X: Any, y: Any, *, X_attacked: Any = None, method: str | None = None
) -> SetEvaluation:
    """Evaluate a calibrated set predictor (``predict_set``) on clean and optionally attacked inputs.

    Parameters
    ----------
    estimator : calibrated classifier
        Any certkit conformal classifier after ``calibrate``.
    X : array-like, shape (n, ...)
        Clean test inputs.
    y : array-like, shape (n,)
        Labels, as given to ``calibrate`` (looked up in the estimator's ``classes_``).
    X_attacked : array-like, optional
        Perturbed versions of ``X`` (e.g. from `certkit.conformal.attacks.smoothed_pgd`).
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
        raise TypeError(
            f"estimator must be a certkit conformal classifier with predict_set, "
            f"got {type(estimator).__name__}"
        )
    check_is_fitted(estimator, getattr(estimator, "_fitted_attr", "threshold_"))
    if method is not None and not isinstance(method, str):
        raise TypeError(f"method must be a str (the label of the row) or None, got {type(method).__name__}")
    classes = getattr(estimator, "classes_", None)
    y = check_array(y, "y", ndim=1, dtype=int) if classes is None else as_numpy(y, "y")
    if y.ndim != 1 or y.size == 0:
        raise ValueError(f"y must be a non-empty 1-D array of labels, got shape {y.shape}")
    n = y.shape[0]
    if X_attacked is not None:  # checked before any model call, under its own name
        X_attacked = check_inputs(X_attacked, "X_attacked")
        if X_attacked.shape[0] != n or X_attacked.shape[1:] != tuple(estimator.input_shape_):
            raise ValueError(
                f"X_attacked must hold one perturbed input per label ({n}) of the calibration inputs' shape "
                f"{tuple(estimator.input_shape_)}, got shape {X_attacked.shape}"
            )
    before = estimator.predictor_.n_forward
    start = time.perf_counter()
    sets = estimator.predict_set(X)
    elapsed = time.perf_counter() - start
    if sets.shape[0] != n:
        raise ValueError(f"inconsistent numbers of samples: X has {sets.shape[0]}, y has {n}")
    passes = (estimator.predictor_.n_forward - before) / n
    att_cov = att_size = math.nan
    if X_attacked is not None:
        att = estimator.predict_set(X_attacked)
        att_cov, att_size = coverage(att, y, classes=classes), set_size(att)
    return SetEvaluation(
        method or type(estimator).__name__,
        coverage(sets, y, classes=classes),
        set_size(sets),
        att_cov,
        att_size,
        passes,
        elapsed / n,
    )


def evaluation_table(results: Any, *, title: str | None = None) -> str:
    """A plain-text table of several `SetEvaluation` results.

    The two attacked columns are left out when no result was evaluated on attacked inputs.
    """
    rows = [r.row() for r in results]
    keep = [
        j
        for j, header in enumerate(EVALUATION_HEADERS)
        if "attacked" not in header or any(not math.isnan(row[j]) for row in rows)
    ]
    return format_table(
        [EVALUATION_HEADERS[j] for j in keep], [[row[j] for j in keep] for row in rows], title=title
    )
