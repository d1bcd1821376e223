"""Checks and small computations the conformal estimators share: inputs and labels, smoothing noise, the
lower conformal threshold, the calibration size a non-trivial set needs, and the deprecated ``score=``."""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from certkit._validation import as_numpy, check_array, check_same_length
from certkit.stats import conformal_rank, robust_level

__all__ = [
    "adjusted_alpha",
    "check_class_labels",
    "check_inputs",
    "check_labels",
    "encode_labels",
    "lower_conformal_threshold",
    "model_classes",
    "renamed_score",
    "required_calibration_size",
    "sample_noise",
    "warn_small_calibration",
]


def check_inputs(X: Any, name: str = "X") -> np.ndarray:
    """Inputs of shape ``(n, ...)`` (at least 2-D), finite, as float64."""
    arr = check_array(X, name)
    if arr.ndim < 2:
        raise ValueError(
            f"{name} must have shape (n_samples, n_features, ...), got shape {arr.shape}. Reshape your data "
            f"with {name}.reshape(-1, 1) (one feature) or {name}.reshape(1, -1) (one sample)"
        )
    return arr


def check_labels(y: Any, X: np.ndarray, n_classes: int | None = None) -> np.ndarray:
    """Integer class labels, one per row of ``X``, in ``[0, n_classes)``."""
    arr = check_array(y, "y", ndim=1, dtype=int)
    check_same_length(("X", X), ("y", arr))
    if n_classes is not None and (arr.min() < 0 or arr.max() >= n_classes):
        raise ValueError(
            f"y must contain class labels in [0, {n_classes - 1}] (the model returns {n_classes} classes), "
            f"got values in [{arr.min()}, {arr.max()}]"
        )
    return arr


def check_class_labels(y: Any, X: np.ndarray) -> np.ndarray:
    """Class labels, one per row of ``X``: a 1-D array of hashable values (integers, strings, ...), no NaN."""
    arr = as_numpy(y, "y")
    if arr.ndim != 1:
        raise ValueError(f"y must be 1-D (one class label per input), got an array of shape {arr.shape}")
    check_same_length(("X", X), ("y", arr))
    if arr.size == 0:
        raise ValueError("y must not be empty")
    if np.issubdtype(arr.dtype, np.complexfloating):
        raise TypeError(f"y must contain class labels, got dtype {arr.dtype}")
    if np.issubdtype(arr.dtype, np.floating) and not np.all(np.isfinite(arr)):
        raise ValueError("y must contain class labels, got NaN or inf")
    if arr.dtype == object:
        for value in arr:
            if isinstance(value, float) and not math.isfinite(value):
                raise ValueError("y must contain class labels, got NaN or inf")
            try:
                hash(value)
            except TypeError:
                raise TypeError(
                    f"y must contain hashable class labels, got a {type(value).__name__}"
                ) from None
    return arr


def model_classes(model: Any) -> np.ndarray | None:
    """The class order of ``model``: its ``classes_``, or that of the object a bound method belongs to
    (``clf.predict_proba``), as a 1-D array; ``None`` when it has none (a function or a torch module)."""
    for owner in (model, getattr(model, "__self__", None)):
        if owner is None:
            continue
        try:
            classes = getattr(owner, "classes_", None)
        except Exception:  # a property that cannot answer (e.g. an unfitted Pipeline's last step)
            classes = None
        if classes is not None:
            classes = as_numpy(classes, "model.classes_")
            if classes.ndim != 1 or classes.size == 0:
                raise ValueError(
                    "the model's classes_ must be a non-empty 1-D array, the class of every output column, "
                    f"got shape {classes.shape}; a multi-output classifier's classes are not supported: pass "
                    "a function returning one output's probabilities"
                )
            return classes
    return None


def _integer_labels(y: np.ndarray) -> np.ndarray | None:
    """``y`` as int64 when its values are integers (integer dtype, or integral floats); else ``None``."""
    if y.dtype != np.bool_ and np.issubdtype(y.dtype, np.integer):
        return y.astype(np.int64)
    if np.issubdtype(y.dtype, np.floating) and np.all(y == np.round(y)) and np.all(np.abs(y) < 2.0**63):
        return y.astype(np.int64)
    return None


def _index_of(y: np.ndarray, classes: np.ndarray, name: str) -> np.ndarray:
    """Position of every label of ``y`` in ``classes`` (named ``name``); -1 for a label that is not there."""
    position: dict[Any, int] = {}
    for i, c in enumerate(classes.tolist()):
        try:
            first = position.setdefault(c, i)
        except TypeError:
            raise TypeError(f"{name} must hold hashable class labels, got a {type(c).__name__}") from None
        if first != i:
            raise ValueError(
                f"{name} repeats the class {c!r} (columns {first} and {i}); each output column must stand "
                "for a different class"
            )
    try:
        values, inverse = np.unique(y, return_inverse=True)
    except TypeError:  # labels of several types that do not sort together: one by one
        return np.array([position.get(v, -1) for v in y.tolist()], dtype=np.int64)
    return np.array([position.get(v, -1) for v in values.tolist()], dtype=np.int64)[inverse.ravel()]


def encode_labels(
    y: np.ndarray, n_classes: int, classes: np.ndarray | None, *, name: str = "the model's classes_"
) -> tuple[np.ndarray, np.ndarray]:
    """``(classes_, codes)``: the class of every column of the model's output and each label's column.

    With the model's own class order (``classes``, e.g. a scikit-learn classifier's ``classes_``), the labels
    are looked up in it. Without one, integer labels are column indices in ``[0, n_classes)``; other labels
    (strings, ...) are sorted, as scikit-learn orders ``classes_``, and must take all ``n_classes`` values.
    """
    if classes is not None:
        if classes.shape[0] != n_classes:
            raise ValueError(f"{name} has {classes.shape[0]} classes but the output has {n_classes} columns")
        codes = _index_of(y, classes, name)
        if np.any(codes < 0):
            unknown = list(dict.fromkeys(y[codes < 0].tolist()))
            raise ValueError(
                f"y has labels that are not among {name} {classes.tolist()}: "
                f"{unknown[:5]}{' ...' if len(unknown) > 5 else ''}"
            )
        return classes, codes
    codes = _integer_labels(y)
    if codes is None and np.issubdtype(y.dtype, np.floating):
        raise TypeError(
            "y must contain class labels (integers, strings, ...), got non-integer floats: values to "
            "regress on, not classes"
        )
    if codes is not None:
        if codes.min() < 0 or codes.max() >= n_classes:
            raise ValueError(
                f"y must contain class labels in [0, {n_classes - 1}] (the model returns {n_classes} classes "
                f"and has no classes_, so integer labels are its output columns), got values in "
                f"[{codes.min()}, {codes.max()}]"
            )
        return np.arange(n_classes), codes
    try:
        values = np.unique(y)
    except TypeError:
        raise TypeError(
            "y mixes labels of types that do not sort together; without a model with classes_, the "
            "labels are sorted to find the class of every output column"
        ) from None
    if values.shape[0] != n_classes:
        raise ValueError(
            f"y has {values.shape[0]} distinct labels but the model returns {n_classes} classes and has no "
            "classes_ giving their order; calibrate on data with every class, pass the model of a classifier "
            "with classes_ (e.g. clf.predict_proba), or give y as the output columns' indices "
            f"in [0, {n_classes - 1}]"
        )
    return values, _index_of(y, values, "the labels")


def sample_noise(rng: np.random.Generator, shape: tuple[int, ...], sigma: float, noise: str) -> np.ndarray:
    """Smoothing noise with standard deviation ``sigma`` per coordinate.

    ``"gaussian"``: $N(0, \\sigma^2)$; ``"uniform"``: $U[-\\sigma\\sqrt3, \\sigma\\sqrt3]$.
    """
    if noise == "gaussian":
        return rng.standard_normal(shape) * sigma
    half = sigma * math.sqrt(3.0)
    return rng.uniform(-half, half, size=shape)


def lower_conformal_threshold(scores: np.ndarray, alpha: float) -> float:
    """The $\\lfloor \\alpha (n + 1) \\rfloor$-th smallest score (``-inf`` when that rank is < 1).

    The rank is computed as $n + 1 - \\lceil (1 - \\alpha)(n + 1) \\rceil$ with
    `certkit.stats.conformal_rank` (same float64 rounding rule as every conformal quantile in
    certkit), which equals $\\lfloor \\alpha (n + 1) \\rfloor$ in exact arithmetic.
    """
    n = scores.shape[0]
    if alpha <= 0.0 or 1.0 - alpha >= 1.0:
        return -math.inf
    k = n + 1 - conformal_rank(n, 1.0 - alpha)
    if k < 1:
        return -math.inf
    return float(np.partition(scores, k - 1)[k - 1])


def required_calibration_size(alpha: float) -> int | None:
    """Smallest ``n`` with a non-trivial set at miscoverage ``alpha`` (about ``ceil(1/alpha) - 1``).

    ``None`` when no calibration set suffices (``alpha`` is 0 after the robustness adjustment).
    """
    if alpha <= 0.0 or 1.0 - alpha >= 1.0:
        return None
    guess = max(1, math.ceil(1.0 / alpha) - 1)

    def ok(m: int) -> bool:  # monotone: the rank grows by at most 1 when m does
        return conformal_rank(m, 1.0 - alpha) <= m

    # bisection around the guess: near alpha = 1e-13 the float rank is off the guess by 1e11 sizes, which a
    # walk one size at a time took hours to cover (certkit conformal --radius 1.5)
    lo, hi = 0, guess  # ok(lo) is false (lo = 0 stands for "no size"), ok(hi) true
    while not ok(hi):
        lo, hi = hi, 2 * hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi


def warn_small_calibration(n: int, alpha_adj: float, what: str, detail: str) -> None:
    """UserWarning for the trivial regime, naming the calibration size needed."""
    need = required_calibration_size(alpha_adj)
    if need is None:
        msg = (
            f"no calibration set is large enough for a non-trivial {what} ({detail}): the adjusted "
            "miscoverage is 0; decrease radius or increase sigma"
        )
    else:
        msg = (
            f"the calibration set ({n} points) is too small for a non-trivial {what} ({detail}); "
            f"need n >= {need} calibration points (n >= ceil(1/alpha') - 1, alpha' = {alpha_adj:.6g}); "
            "every label / the whole line is returned"
        )
    warnings.warn(msg, UserWarning, stacklevel=3)


def adjusted_alpha(confidence_level: float, radius: float, sigma: float, noise: str) -> float:
    """RCP1's clean miscoverage $\\alpha'$ with $1-\\alpha' = c^{-1}[1-\\alpha, r]$."""
    return 1.0 - robust_level(confidence_level, radius=radius, sigma=sigma, noise=noise)


def renamed_score(owner: str, conformity_score: Any, deprecated: dict[str, Any]) -> Any:
    """``conformity_score``, or the value given under its deprecated name ``score=`` (with a FutureWarning).

    The old name is taken as a keyword only, so that no ``score`` attribute shadows scikit-learn's ``score``
    method name; any other unknown keyword is a ``TypeError``, as Python would raise.
    """
    unknown = sorted(set(deprecated) - {"score"})
    if unknown:
        raise TypeError(f"{owner}.__init__() got an unexpected keyword argument {unknown[0]!r}")
    if "score" not in deprecated:
        return conformity_score
    if not (isinstance(conformity_score, str) and conformity_score == "thr"):
        raise TypeError("score is the deprecated name of conformity_score; pass conformity_score only")
    warnings.warn(
        f"{owner}(score=...) is deprecated and will be removed in certkit 0.3; use conformity_score=... (the "
        "name MAPIE uses; score shadowed scikit-learn's score method)",
        FutureWarning,
        stacklevel=3,
    )
    return deprecated["score"]
