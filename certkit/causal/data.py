"""The data matrix of the causal estimators: numeric columns (a DataFrame's names kept), enough rows, no
constant column, squares within float64."""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any, TypeVar

import numpy as np

from certkit._validation import check_array, check_squares_fit

__all__ = ["canonical_data", "canonical_order", "check_data", "constant_columns", "data_seed", "in_row_order"]

#: A fit with per-row ``responsibilities`` and ``labels`` (a mixture or joint mixture result).
_Fit = TypeVar("_Fit")


def check_data(X: Any, name: str = "X") -> tuple[np.ndarray, tuple[str, ...] | None]:
    """Validate the (n, d) data matrix; returns it as float64 and the column names of a DataFrame."""
    names = None
    dtypes = getattr(X, "dtypes", None)
    if dtypes is not None and hasattr(X, "columns"):
        from pandas.api.types import is_bool_dtype, is_numeric_dtype

        for column, dtype in dtypes.items():
            if not is_numeric_dtype(dtype) or is_bool_dtype(dtype):
                raise TypeError(
                    f"{name} column {column!r} has non-numeric dtype {dtype}; encode it as numbers"
                )
        names = tuple(str(c) for c in X.columns)
        repeated = sorted({c for c in names if names.count(c) > 1})
        if repeated:
            raise ValueError(
                f"{name} has repeated column name(s) {', '.join(map(repr, repeated))}; give every column "
                "its own name (findings are reported by name)"
            )
        X = X.to_numpy(dtype=np.float64)
    X = check_array(X, name, ndim=2)
    n, d = X.shape
    if d < 2:
        raise ValueError(f"{name} must have at least 2 columns (variables), got {d} feature(s)")
    if n < 2:
        raise ValueError(
            f"{name} has {n} sample: too few samples to fit a mechanism (a variance needs 2, a mixture of "
            "regressions on the other variables many more)"
        )
    check_squares_fit(X, name, range(d))
    constant = constant_columns(X)
    if constant.size:
        which = ", ".join(repr(names[j]) if names else str(j) for j in constant)  # names quoted: user data
        raise ValueError(
            f"{name} has constant column(s) {which}; drop them (a constant has no causal mechanism)"
        )
    return X, names


def constant_columns(X: np.ndarray) -> np.ndarray:
    """Indices of the columns of ``X`` (n, d) that are constant: a spread at rounding level of the
    column's magnitude (standard deviation at most ``1e-10`` times its largest absolute value)."""
    return np.flatnonzero(~(X.std(axis=0) > 1e-10 * np.abs(X).max(axis=0)))


def canonical_order(X: np.ndarray) -> np.ndarray:
    """The rows of ``X`` (n, d) sorted by value: by the first column, ties by the next, and so on.

    The causal fits run on the rows in this order and put their per-row outputs back in the caller's
    order, so a permutation of the rows gives the same fit bit for bit (sums over rows are then taken
    in the same order too).
    """
    return np.lexsort(X.T[::-1])


def canonical_data(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(rows, X[rows])``: the ``canonical_order`` and the rows in it, contiguous, with ``-0.0`` made
    ``0.0`` (equal rows are then equal bit for bit): what a causal fit runs on and ``data_seed`` hashes."""
    rows = canonical_order(X)
    return rows, np.ascontiguousarray(X[rows]) + 0.0


def data_seed(X: np.ndarray) -> int:
    """A 63-bit seed derived from the values of ``X`` (rows in ``canonical_order``): what keys the EM
    starts of a causal fit, so the same data get the same starts whatever the row order or ``rng``."""
    digest = hashlib.blake2b(np.ascontiguousarray(X, dtype=np.float64).tobytes(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def in_row_order(fit: _Fit, rows: np.ndarray) -> _Fit:
    """``fit`` (a dataclass with per-row ``responsibilities`` and ``labels``) with those taken at ``rows``:
    how a fit on the ``canonical_data`` rows puts its per-row outputs back in the caller's order."""
    return dataclasses.replace(
        fit, responsibilities=np.ascontiguousarray(fit.responsibilities[rows]), labels=fit.labels[rows]
    )
