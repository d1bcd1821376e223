r"""Validation of the inputs of the Wasserstein risk functionals and their reduction to one dimension.

Moving a feature vector $x$ by $\delta$ changes the score $\theta^\top x$ by at most
$\|\theta\|_*\,\|\delta\|$, and exactly that much along the direction returned by `ascent_direction`. Every
functional of this package is therefore a problem over per-atom scalar shifts of the margin $m_i =
y_i\theta^\top x_i$ (margin losses) or of the residual $r_i = \theta^\top x_i - y_i$ (squared loss), with a
margin budget $C = \varepsilon\|\theta\|_*$.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from certkit._validation import check_array, check_in_options, check_nonnegative, check_same_length

LOSSES = ("linear", "hinge", "logistic", "squared")
MARGIN_LOSSES = ("linear", "hinge", "logistic")
DIRECTIONS = ("sup", "inf")
METHODS = ("auto", "closed_form", "dual", "lp")


def check_norm(norm: Any) -> float:
    """The transport norm: 1, 2 or ``np.inf`` (the string ``"inf"`` is accepted too)."""
    if isinstance(norm, str) and norm.lower() == "inf":
        return np.inf
    if isinstance(norm, (bool, np.bool_)) or not isinstance(norm, numbers.Real):
        raise TypeError(f"norm must be 1, 2 or np.inf (the transport norm), got {type(norm).__name__}")
    if float(norm) not in (1.0, 2.0, np.inf):
        raise ValueError(f"norm must be 1, 2 or np.inf (the transport norm), got {norm}")
    return float(norm)


def check_order(p: Any) -> float:
    """The Wasserstein order ``p >= 1``."""
    if isinstance(p, (bool, np.bool_)) or not isinstance(p, numbers.Real):
        raise TypeError(f"p must be a real number >= 1 (the Wasserstein order), got {type(p).__name__}")
    p = float(p)
    if not np.isfinite(p) or p < 1:
        raise ValueError(
            f"p must be a finite number >= 1 (the Wasserstein order; W_p is not a metric for p < 1), got {p}"
        )
    return p


def dual_norm(theta: np.ndarray, norm: float) -> np.ndarray:
    r"""$\|\theta\|_*$ per row: the dual of the transport norm ($\ell_2$, $\ell_\infty$, $\ell_1$)."""
    dual = {1.0: np.inf, 2.0: 2, np.inf: 1}[norm]
    return np.linalg.norm(theta, ord=dual, axis=-1)


def ascent_direction(theta: np.ndarray, norm: float) -> np.ndarray:
    r"""A unit vector $u$ in the transport norm with $\theta^\top u = \|\theta\|_*$ (0 for $\theta = 0$)."""
    theta = np.asarray(theta, dtype=np.float64)
    u = np.zeros_like(theta)
    if not np.any(theta):
        return u
    if norm == 2.0:
        return theta / np.linalg.norm(theta)
    if norm == 1.0:
        j = int(np.argmax(np.abs(theta)))
        u[j] = np.sign(theta[j])
        return u
    return np.sign(theta)


def check_problem(
    theta: Any, X: Any, y: Any, loss: str, intercept: Any = 0.0
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, bool]:
    """Validate ``theta`` ((d,) or (k, d)), ``X`` (n, d), ``y`` (n,) and ``intercept`` (scalar or (k,)).

    Returns theta as (k, d), X, y, the intercepts as (k,) and whether theta was a batch.
    """
    loss = check_in_options(loss, "loss", LOSSES)
    theta = check_array(theta, "theta", ndim=(1, 2))
    batch = theta.ndim == 2
    theta = np.atleast_2d(theta)
    X = check_array(X, "X", ndim=2)
    y = check_array(y, "y", ndim=1)
    check_same_length(("X", X), ("y", y))
    if theta.shape[1] != X.shape[1]:
        raise ValueError(
            f"theta has {theta.shape[1]} coefficients but X has {X.shape[1]} features; "
            "theta must have shape (d,) or (k, d) with d = X.shape[1]"
        )
    if loss in MARGIN_LOSSES and not np.all((y == 1.0) | (y == -1.0)):
        bad = np.unique(y[(y != 1.0) & (y != -1.0)])[:5]
        raise ValueError(
            f"y must contain labels in {{-1, +1}} for loss={loss!r}, found {bad.tolist()}; "
            "map {0, 1} labels with y = 2 * y - 1"
        )
    b = check_array(intercept, "intercept", ndim=(0, 1))
    if b.ndim == 1 and b.shape != (theta.shape[0],):
        raise ValueError(f"intercept must be a scalar or have shape ({theta.shape[0]},), got {b.shape}")
    return theta, X, y, np.broadcast_to(b, (theta.shape[0],)), batch


def check_radius(radius: Any) -> float:
    """The Wasserstein radius ``>= 0``."""
    return check_nonnegative(radius, "radius")
