"""`wasserstein_risk`: the worst-case (self-negating) and best-case (self-fulfilling) risk over a
Wasserstein ball."""

from __future__ import annotations

from typing import Any

import numpy as np

from certkit._validation import check_in_options
from certkit.performative._inputs import (
    DIRECTIONS,
    METHODS,
    check_norm,
    check_order,
    check_problem,
    check_radius,
    dual_norm,
)
from certkit.performative.closed_form import closed_form_risk, has_closed_form
from certkit.performative.dual import dual_risk, has_dual
from certkit.performative.lp import lp_risk

__all__ = ["resolve_method", "wasserstein_risk"]


def resolve_method(loss: str, p: float, direction: str, method: str) -> str:
    """The method ``method="auto"`` stands for, or a ValueError when the requested one does not apply."""
    combo = f"loss={loss!r}, direction={direction!r}, p={p:g}"
    if method == "auto":
        if has_closed_form(loss, p, direction):
            return "closed_form"
        if has_dual(loss, p, direction):
            return "dual"
        if direction == "inf":  # convex losses: the conic program over shifts is exact
            return "lp"
        raise ValueError(
            f"no exact method for {combo}: the worst case of a curved loss is available for p = 1 or p = 2 "
            "(closed form or 1-D dual); use p=1 or p=2"
        )
    if method == "closed_form" and not has_closed_form(loss, p, direction):
        alt = "method='dual'" if has_dual(loss, p, direction) else "method='lp' (needs cvxpy)"
        raise ValueError(f"no closed form for {combo}; use {alt} or method='auto'")
    if method == "dual" and not has_dual(loss, p, direction):
        raise ValueError(f"the 1-D dual is implemented for p = 1 and p = 2, got {combo}; use method='auto'")
    if method == "lp" and direction == "sup" and loss in ("logistic", "squared"):
        raise ValueError(
            f"method='lp' is a finite-support LP, exact for direction='sup' only with the piecewise-linear "
            f"losses "
            f"'linear' and 'hinge' (for {combo} it would only give a lower bound); use method='auto'"
        )
    return method


def wasserstein_risk(
    theta: Any,
    X: Any,
    y: Any,
    *,
    loss: str,
    radius: float,
    p: float = 1,
    norm: float = 2,
    direction: str = "sup",
    method: str = "auto",
    intercept: Any = 0.0,
) -> float | np.ndarray:
    r"""Worst-case (``"sup"``) or best-case (``"inf"``) risk over a $W_p$ ball around the sample.

    Computes $\sup$ (or $\inf$) of $\mathbb E_Q\,\ell(\theta; x, y)$ over all $Q$ with $W_p(Q, \hat P_n) \le
    \varepsilon$, where the transport cost moves features only, $d((x, y), (x', y')) = \|x - x'\|$ if $y = y'$
    and $\infty$ otherwise, and $x$ ranges over all of $\mathbb R^d$. The ``sup`` is the self-negating
    (population) worst case of Performative Learning Theory, the ``inf`` the self-fulfilling (sample) one.

    Parameters
    ----------
    theta : array-like, shape (d,) or (k, d)
        Linear model(s) $x \mapsto \theta^\top x + b$. A batch gives one risk per row.
    X : array-like, shape (n, d)
        Features of the sample (the atoms of $\hat P_n$).
    y : array-like, shape (n,)
        Labels in $\{-1, +1\}$ for the margin losses, real targets for ``"squared"``.
    loss : {"linear", "hinge", "logistic", "squared"}
        $-y\theta^\top x$, $\max(0, 1 - y\theta^\top x)$, $\log(1 + e^{-y\theta^\top x})$ or $(\theta^\top x -
        y)^2$.
    radius : float
        $\varepsilon \ge 0$ (see `flip_radius` for the radius of $m$ of $n$ affected units).
    p : float, default 1
        Wasserstein order $p \ge 1$.
    norm : {2, 1, np.inf}, default 2
        Transport norm on $x$; the dual norm $\|\theta\|_*$ ($2$, $\infty$, $1$) enters the results.
    direction : {"sup", "inf"}, default "sup"
    method : {"auto", "closed_form", "dual", "lp"}, default "auto"
        ``"closed_form"``: exact formulas (linear and hinge for every $p$; logistic $W_1$; squared $W_1$,
        $W_2$ and ``sup`` for $p < 2$). ``"dual"``: the 1-D Lagrangian dual solved with scipy ($p \in \{1,
        2\}$; the only route for logistic $W_2$). ``"lp"``: cvxpy (extra ``cvxpy``): the finite-support LP for
        ``sup`` (linear and hinge only: with any other loss a finite support only lower-bounds the supremum)
        and the exact conic program over shifts for ``inf`` (a lower bound for $p > 1024$, or a $p$ whose
        $1/p$ is no fraction of denominator $\le 1024$: cvxpy's exponents). ``"auto"`` takes the first exact
        route in that order, so it needs cvxpy only for ``inf`` of logistic/squared losses with $p \notin \{1,
        2\}$.
    intercept : float or array-like of shape (k,), default 0
        The intercept $b$ (one per row of a batch); it does not move with $x$.

    Returns
    -------
    float or numpy.ndarray
        The risk (``float`` for ``theta`` of shape (d,), shape (k,) for a batch). ``inf`` when unbounded: the
        squared loss with ``direction="sup"`` and $p < 2$ (moving a vanishing mass far gains quadratically
        while it costs $t^p$). Closed forms and duals are padded outward by $10^{-12}(1 + |v|)$ for rounding.

    Raises
    ------
    ValueError
        Negative radius, $p < 1$, labels outside $\{-1, +1\}$ for a margin loss, empty or non-finite data,
        shape mismatch, unknown option, or no exact method for the combination.
    ImportError
        ``method="lp"`` (or the ``auto`` route to it) without cvxpy installed.

    Examples
    --------
    >>> import numpy as np
    >>> from certkit.performative import wasserstein_risk
    >>> X = np.array([[1.0, 0.0], [0.0, 2.0]]); y = np.array([1.0, -1.0]); theta = np.array([1.0, -1.0])
    >>> round(wasserstein_risk(theta, X, y, loss="hinge", radius=0.1), 6)  # mean hinge 0 + 0.1 * sqrt(2)
    0.141421
    """
    theta, X, y, intercept, batch = check_problem(theta, X, y, loss, intercept)
    radius = check_radius(radius)
    p = check_order(p)
    norm = check_norm(norm)
    direction = check_in_options(direction, "direction", DIRECTIONS)
    method = resolve_method(loss, p, direction, check_in_options(method, "method", METHODS))
    with np.errstate(over="ignore"):  # an infinite norm is reported by _check_scale
        ks = dual_norm(theta, norm)
    out = np.empty(theta.shape[0])
    for j in range(theta.shape[0]):
        C = float(ks[j]) * radius
        with np.errstate(over="ignore", invalid="ignore"):  # overflow is reported by _check_scale
            linear = X @ theta[j]
            scores = linear + intercept[j]  # one matrix-vector product per row: a batch equals single calls
            u = scores - y if loss == "squared" else y * scores
        if not np.all(np.isfinite(u)):
            raise _overflow(u, C, linear, float(intercept[j]), p, radius)
        if method in ("closed_form", "dual"):
            solve = closed_form_risk if method == "closed_form" else dual_risk
            with np.errstate(over="ignore", invalid="ignore"):  # an overflow is reported below
                value = solve(loss, u, C, p, direction)
            unbounded = loss == "squared" and direction == "sup" and p < 2  # documented +inf
            if not np.isfinite(value) and not (unbounded and value == np.inf):
                raise _overflow(u, C, linear, float(intercept[j]), p, radius)
            out[j] = _pad(value, loss, direction)
        else:
            out[j] = lp_risk(
                theta[j],
                X,
                y,
                loss,
                radius,
                p,
                norm,
                direction,
                intercept=float(intercept[j]),
                purpose=f"loss={loss!r}, direction={direction!r}, p={p:g} (solved by cvxpy)",
            )
    return out if batch else float(out[0])


def _overflow(
    u: np.ndarray, C: float, linear: np.ndarray, intercept: float, p: float, radius: float
) -> ValueError:
    """The error for a risk that overflowed float64 (inf or NaN), naming the argument that made it large."""
    largest = float(np.max(np.abs(u))) if np.all(np.isfinite(u)) else np.inf
    if np.isfinite(largest) and largest < 1e100:
        lead = f"radius={radius!r} is too large"
    elif np.isfinite(intercept) and abs(intercept) >= 1e100 and abs(intercept) >= np.max(np.abs(linear)):
        lead = f"intercept={intercept!r} is too large"
    else:
        lead = "theta and X are too large"
    return ValueError(
        f"{lead}: the risk overflows float64 (margins up to {largest:.3g}, margin budget radius * "
        f"||theta||_* = {C:.3g}, p = {p:g}); rescale theta, X and intercept (or the radius)"
    )


def _pad(value: float, loss: str, direction: str) -> float:
    """Pad a floating-point risk outward (losses other than linear are >= 0, so an inf is clipped at 0)."""
    if np.isnan(value):
        raise FloatingPointError(
            f"the {direction} risk of the {loss} loss evaluated to NaN (an overflow in the closed form); "
            "please report this case, and use method='dual' meanwhile"
        )
    if np.isinf(value):
        return value
    if direction == "sup":
        return value + 1e-12 * (1.0 + abs(value))
    value -= 1e-12 * (1.0 + abs(value))
    return value if loss == "linear" else max(0.0, value)
