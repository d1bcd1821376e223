"""Input validation shared by every public entry point.

Each helper raises ``TypeError`` for a value of the wrong kind and
``ValueError`` for a value of the right kind but outside its allowed range,
and names the argument and what was expected.  Nothing is silently coerced:
NaN/inf, booleans posing as numbers, wrong shapes and empty arrays are errors.
"""

from __future__ import annotations

import numbers
import os
from collections.abc import Iterable
from typing import Any

import numpy as np

__all__ = [
    "as_numpy",
    "check_allocation",
    "check_array",
    "check_bool",
    "check_in_options",
    "check_integer",
    "check_is_fitted",
    "check_level",
    "check_nonnegative",
    "check_positive",
    "check_probability",
    "check_progress",
    "check_rng",
    "check_same_length",
    "seed_from_rng",
]


def as_numpy(x: Any, name: str) -> np.ndarray:
    """Return ``x`` as a NumPy array, accepting torch tensors without importing torch."""
    if type(x).__module__.startswith("torch"):
        if not hasattr(x, "detach"):
            raise TypeError(f"{name} must be an array or a tensor, got {type(x).__name__}")
        x = x.detach().cpu().numpy()
    if isinstance(x, (str, bytes)) or x is None:
        raise TypeError(f"{name} must be array-like, got {type(x).__name__}")
    if type(x).__module__.startswith("scipy.sparse"):
        raise TypeError(
            f"{name} is a scipy.sparse {type(x).__name__}; sparse input is not supported: pass a dense array "
            f"({name}.toarray(), if it fits in memory)"
        )
    try:
        return np.asarray(x)
    except Exception as exc:  # pragma: no cover - numpy raises various errors on ragged input
        raise TypeError(f"{name} must be array-like: {exc}") from exc


def check_array(
    x: Any,
    name: str,
    *,
    ndim: int | tuple[int, ...] | None = None,
    dtype: type | None = np.float64,
    allow_empty: bool = False,
    finite: bool = True,
    shape: tuple[int | None, ...] | None = None,
) -> np.ndarray:
    """Validate an array argument and return it (a float64 copy-free view when possible).

    Parameters
    ----------
    x : array-like or torch.Tensor
        The value to check.
    name : str
        The argument name used in error messages.
    ndim : int or tuple of int, optional
        Allowed numbers of dimensions.
    dtype : type, optional
        ``np.float64`` (default) converts numeric input to float64; ``int`` requires
        integer-valued input and returns int64; ``bool`` requires a boolean array;
        ``None`` keeps the dtype.
    allow_empty : bool
        Whether an array with zero elements is acceptable.
    finite : bool
        Reject NaN and infinities (float arrays only).
    shape : tuple, optional
        Required shape; ``None`` entries match any length.
    """
    arr = as_numpy(x, name)
    if arr.dtype == object:
        raise TypeError(f"{name} must be a numeric array, got an array of Python objects")
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else tuple(ndim)
        if arr.ndim not in allowed:
            want = " or ".join(f"{d}-D" for d in allowed)
            raise ValueError(f"{name} must be {want}, got an array of shape {arr.shape}")
    if shape is not None:
        if arr.ndim != len(shape) or any(s is not None and s != a for s, a in zip(shape, arr.shape)):
            want = "(" + ", ".join("any" if s is None else str(s) for s in shape) + ")"
            raise ValueError(f"{name} must have shape {want}, got {arr.shape}")
    if not allow_empty and arr.size == 0:
        raise ValueError(f"{name} must not be empty")
    if dtype is bool:
        if arr.dtype != np.bool_:
            raise TypeError(f"{name} must be a boolean array, got dtype {arr.dtype}")
        return arr
    if dtype is int:
        if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
            integral = np.issubdtype(arr.dtype, np.floating) and np.all(np.isfinite(arr))
            if integral and np.all(arr == np.round(arr)):
                if np.any(np.abs(arr) >= 2.0**63):
                    raise ValueError(f"{name} has integer values outside the int64 range")
                return arr.astype(np.int64)
            raise TypeError(f"{name} must contain integers, got dtype {arr.dtype}")
        if arr.dtype == np.uint64 and np.any(arr > np.iinfo(np.int64).max):
            raise ValueError(f"{name} has integer values outside the int64 range")
        return arr.astype(np.int64, copy=False)
    if dtype is not None:
        if arr.dtype == np.bool_ or not (
            np.issubdtype(arr.dtype, np.number) and not np.issubdtype(arr.dtype, np.complexfloating)
        ):
            raise TypeError(f"{name} must be a real numeric array, got dtype {arr.dtype}")
        arr = arr.astype(dtype, copy=False)
    if finite and np.issubdtype(arr.dtype, np.floating) and not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite (no NaN or inf)")
    return arr


def _check_real_scalar(value: Any, name: str) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    value = float(value)
    if not np.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    return value


def check_level(value: Any, name: str = "confidence_level") -> float:
    """A level strictly inside (0, 1), e.g. ``confidence_level``."""
    value = _check_real_scalar(value, name)
    if not 0.0 < value < 1.0:
        raise ValueError(f"{name} must lie strictly between 0 and 1, got {value}")
    return value


def check_probability(value: Any, name: str, *, closed: bool = True) -> float:
    """A probability in [0, 1] (or (0, 1) with ``closed=False``)."""
    value = _check_real_scalar(value, name)
    ok = 0.0 <= value <= 1.0 if closed else 0.0 < value < 1.0
    if not ok:
        interval = "[0, 1]" if closed else "(0, 1)"
        raise ValueError(f"{name} must lie in {interval}, got {value}")
    return value


def check_nonnegative(value: Any, name: str) -> float:
    """A finite real number >= 0 (radii, epsilons)."""
    value = _check_real_scalar(value, name)
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")
    return value


def check_positive(value: Any, name: str) -> float:
    """A finite real number > 0 (noise scales, learning rates)."""
    value = _check_real_scalar(value, name)
    if value <= 0:
        raise ValueError(f"{name} must be > 0, got {value}")
    return value


def check_integer(value: Any, name: str, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """A Python or NumPy integer (not a bool, not a float) within optional bounds."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {value}")
    return value


def check_bool(value: Any, name: str) -> bool:
    """A Python or NumPy bool (not 0/1, not a str)."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool (True or False), got {type(value).__name__}")
    return bool(value)


def check_in_options(value: Any, name: str, options: Iterable[str]) -> str:
    """One of a fixed set of string options."""
    options = tuple(options)
    if not isinstance(value, str):
        raise TypeError(f"{name} must be one of {options}, got {type(value).__name__}")
    if value not in options:
        raise ValueError(f"unknown {name} {value!r}; expected one of {options}")
    return value


def check_same_length(*pairs: tuple[str, Any]) -> int:
    """All arrays have the same first dimension; returns it."""
    lengths = {name: len(arr) for name, arr in pairs}
    if len(set(lengths.values())) > 1:
        desc = ", ".join(f"{name} has {n}" for name, n in lengths.items())
        raise ValueError(f"inconsistent numbers of samples: {desc}")
    return next(iter(lengths.values()))


def check_progress(progress: Any) -> bool | str:
    """``progress`` is a bool (show a bar or not) or a str (a bar with that label)."""
    if not isinstance(progress, (bool, np.bool_, str)):
        raise TypeError(f"progress must be a bool or a str, got {type(progress).__name__}")
    return progress if isinstance(progress, str) else bool(progress)


def check_rng(rng: Any) -> np.random.Generator:
    """Turn ``rng`` (None, int or Generator; SPEC 7) into a ``numpy.random.Generator``.

    A Generator is returned as is (so the caller's stream advances); an int
    seeds a new PCG64 generator; None draws fresh OS entropy.
    """
    if rng is None:
        return np.random.default_rng()
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, (bool, np.bool_)) or not isinstance(rng, numbers.Integral):
        raise TypeError(
            f"rng must be None, an int seed or a numpy.random.Generator, got {type(rng).__name__}"
        )
    if rng < 0:
        raise ValueError(f"rng seed must be >= 0, got {rng}")
    return np.random.default_rng(int(rng))


def seed_from_rng(rng: Any) -> int:
    """Draw a 63-bit seed for the C++ kernels' counter-based generator from ``rng``."""
    return int(check_rng(rng).integers(0, 2**63 - 1, dtype=np.int64))


def memory_limit() -> int:
    """Largest allocation certkit attempts in one call: half the physical (or cgroup-limited) memory."""
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):  # pragma: no cover - not POSIX
        total = 16 * 2**30
    try:
        with open("/sys/fs/cgroup/memory.max") as fh:
            text = fh.read().strip()
        if text.isdigit():
            total = min(total, int(text))
    except OSError:
        pass
    return int(total) // 2


def check_squares_fit(X: np.ndarray, name: str, columns: Iterable[int]) -> None:
    """Raise ``ValueError`` naming the columns of a 2-D ``X`` whose squares leave the float64 range.

    A column with a magnitude above 1e100 overflows when squared; a nonzero column whose magnitudes are all
    below 1e-150 underflows to zero variance. Both are refused with the advice to rescale.
    """
    columns = list(columns)
    peak = np.abs(X[:, columns]).max(axis=0)
    for what, bad in (("magnitudes above 1e100", peak > 1e100),
                      ("all magnitudes below 1e-150", (peak < 1e-150) & (peak > 0))):
        if bad.any():
            which = ", ".join(str(columns[j]) for j in np.flatnonzero(bad)[:5])
            raise ValueError(
                f"{name} has {what} in column(s) {which}; rescale them (e.g. standardize each column): "
                "their squares leave the float64 range"
            )


def check_allocation(n_bytes: float, name: str, value: Any, *, what: str) -> None:
    """Raise ``ValueError`` naming ``name=value`` before allocating more than `memory_limit` bytes.

    ``n_bytes`` is the caller's estimate of the largest memory the call needs at once (a float, so that
    products of huge sizes do not overflow).
    """
    limit = memory_limit()
    if n_bytes > limit:
        raise ValueError(
            f"{name}={value!r} is too large: {what} would need about {_format_bytes(n_bytes)}, more than "
            f"half ({_format_bytes(limit)}) of this machine's memory; reduce {name}"
        )


def _format_bytes(n: float) -> str:
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:.0f} bytes"


def check_is_fitted(estimator: Any, attributes: str | Iterable[str], *, method: str = "calibrate") -> None:
    """Raise ``RuntimeError``-like ``NotFittedError`` unless the fitted attributes exist."""
    from sklearn.exceptions import NotFittedError

    attrs = (attributes,) if isinstance(attributes, str) else tuple(attributes)
    if not all(hasattr(estimator, a) for a in attrs):
        raise NotFittedError(
            f"This {type(estimator).__name__} instance is not fitted yet; call {method}(...) first."
        )
