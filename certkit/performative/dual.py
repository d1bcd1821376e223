r"""One-dimensional Lagrangian duals of the Wasserstein risks for $p \in \{1, 2\}$, solved with scipy.

Strong duality (Blanchet & Murthy 2019; Gao & Kleywegt 2023; Mohajerin Esfahani & Kuhn 2018) gives, in the
margin units of `certkit.performative.closed_form` (shift $s$ of the margin/residual, budget $C =
\varepsilon\|\theta\|_*$, multiplier $a = \lambda/\|\theta\|_*^p$):

$$\sup_{W_p(Q,\hat P)\le\varepsilon} \mathbb E_Q\ell = \inf_{a\ge0}\; aC^p + \frac1n\sum_i \sup_{s\ge0}
[\ell_i(\text{worse by } s) - a s^p],\qquad \inf_{W_p(Q,\hat P)\le\varepsilon} \mathbb E_Q\ell =
\sup_{a\ge0}\; -aC^p + \frac1n\sum_i \inf_{s\ge0} [\ell_i(\text{better by } s) + a s^p].$$

The per-atom inner problems are solved exactly (closed form) or, for the logistic loss with $p = 2$, by
bisection on every monotone piece of the stationarity condition (so the global inner maximum is found even
where the inner problem has two local maxima). The outer problem is one-dimensional and unimodal; it is solved
with `scipy.optimize.minimize_scalar`. Whatever multiplier the optimiser returns, the dual objective there is
a valid bound (upper for ``sup``, lower for ``inf``) by weak duality; `wasserstein_risk` pads it outward by
$10^{-12}(1 + |v|)$ to cover the rounding of the inner solves.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize_scalar
from scipy.special import expit, logit

from certkit.performative.closed_form import loss_values

__all__ = ["dual_risk", "has_dual"]

_BISECTIONS = 64
_SPAN = 30.0  # search log(a) within +-_SPAN of the natural scale


def has_dual(loss: str, p: float, direction: str) -> bool:
    r"""The 1-D dual is implemented for $p \in \{1, 2\}$ (every loss, both directions)."""
    return p in (1.0, 2.0)


def _bisect_decreasing(phi, m: np.ndarray, a: float, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Root of a function decreasing on [lo, hi] (rows without a sign change end at an endpoint)."""
    for _ in range(_BISECTIONS):
        mid = 0.5 * (lo + hi)
        up = phi(mid, m, a) > 0
        lo = np.where(up, mid, lo)
        hi = np.where(up, hi, mid)
    return 0.5 * (lo + hi)


def _logistic_sup_inner(m: np.ndarray, a: float) -> np.ndarray:
    r"""$\max_{s\ge0} \log(1 + e^{s-m}) - a s^2$ for every atom (global maximum)."""

    def phi(s, m, a):  # derivative of the inner objective
        return expit(s - m) - 2.0 * a * s

    def h(s):
        return np.logaddexp(0.0, s - m) - a * s * s

    s_max = 1.0 / (2.0 * a)  # beyond it the derivative is negative
    zero = np.zeros_like(m)
    top = np.full_like(m, s_max)
    best = h(zero)
    if a >= 0.125:  # derivative strictly decreasing: one stationary point
        return np.maximum(best, h(_bisect_decreasing(phi, m, a, zero, top)))
    w = np.sqrt(1.0 - 8.0 * a)
    u1 = logit(0.5 * (1.0 - w))  # phi decreases on (-inf, m+u1], increases, then decreases on [m-u1, inf)
    s1 = np.clip(m + u1, 0.0, s_max)
    s2 = np.clip(m - u1, 0.0, s_max)
    for lo, hi in ((zero, s1), (s2, top)):
        best = np.maximum(best, np.maximum(h(lo), h(_bisect_decreasing(phi, m, a, lo, hi))))
    return best


def _logistic_inf_inner(m: np.ndarray, a: float) -> np.ndarray:
    r"""$\min_{s\ge0} \log(1 + e^{-(m+s)}) + a s^2$ (strictly convex: one stationary point)."""

    def phi(s, m, a):
        return expit(-(m + s)) - 2.0 * a * s

    s = _bisect_decreasing(phi, m, a, np.zeros_like(m), np.full_like(m, 1.0 / (2.0 * a)))
    return np.logaddexp(0.0, -(m + s)) + a * s * s


def _sup_inner(loss: str, u: np.ndarray, a: float) -> np.ndarray:
    r"""Per-atom $\sup_s \ell(\text{worse by } s) - a s^2$ ($p = 2$)."""
    if loss == "linear":
        return -u + 0.25 / a
    if loss == "hinge":
        return np.maximum(0.0, 1.0 - u + 0.25 / a)
    if loss == "logistic":
        return _logistic_sup_inner(u, a)
    return u * u * a / (a - 1.0)  # squared, a > 1


def _inf_inner(loss: str, u: np.ndarray, a: float, p: float) -> np.ndarray:
    r"""Per-atom $\inf_s \ell(\text{better by } s) + a s^p$."""
    if loss == "linear":  # finite only for a >= 1 when p = 1 (the caller never goes below)
        return -u - (0.0 if p == 1.0 else 0.25 / a)
    if loss == "hinge":
        h = np.maximum(0.0, 1.0 - u)
        if p == 1.0:
            return np.minimum(h, a * h)
        return np.where(h >= 0.5 / a, h - 0.25 / a, a * h * h)
    if loss == "logistic":
        if p == 2.0:
            return _logistic_inf_inner(u, a)
        if a >= 1.0:
            return np.logaddexp(0.0, -u)
        if a <= 0.0:
            return np.zeros_like(u)
        level = np.log((1.0 - a) / a)
        return np.logaddexp(0.0, -np.maximum(u, level)) + a * np.maximum(0.0, level - u)
    r = np.abs(u)  # squared
    if p == 2.0:
        return r * r * a / (1.0 + a)
    return np.where(r >= 0.5 * a, a * r - 0.25 * a * a, r * r)


def _optimise(objective, lo: float, hi: float) -> float:
    """Minimise a unimodal objective on [lo, hi]; the best of the optimiser's point and both ends."""
    res = minimize_scalar(
        objective, bounds=(lo, hi), method="bounded", options={"xatol": 1e-12, "maxiter": 500}
    )
    return float(min(res.fun, objective(lo), objective(hi)))


def dual_risk(loss: str, u: np.ndarray, C: float, p: float, direction: str) -> float:
    r"""The risk over the $W_p$ ball ($p \in \{1, 2\}$) through its 1-D dual."""
    losses = loss_values(loss, u)
    mean = float(losses.mean())
    if C == 0.0:
        return mean
    if direction == "sup":
        if p == 1.0:
            # The inner sup is finite iff a >= the loss's asymptotic slope (1 for margin losses,
            # infinite for the
            # squared loss); there it equals the loss itself, so the dual minimum is at a = 1.
            return float(np.inf) if loss == "squared" else mean + C
        if loss == "squared":  # domain a > 1: a = 1 + e^t
            scale = np.log(np.sqrt(mean) / C) if mean > 0 else 0.0
            value = _optimise(
                lambda t: (1 + np.exp(t)) * C * C + _sup_inner(loss, u, 1 + np.exp(t)).mean(),
                scale - _SPAN,
                scale + _SPAN,
            )
        else:
            scale = np.log(0.5 / C)
            value = _optimise(
                lambda t: np.exp(t) * C * C + _sup_inner(loss, u, np.exp(t)).mean(),
                scale - _SPAN,
                scale + _SPAN,
            )
        return value
    if p == 1.0:
        if loss == "linear":  # only a = 1 is finite
            return mean - C
        hi = 2.0 * float(np.abs(u).max()) + 1.0 if loss == "squared" else 1.0
        value = -_optimise(lambda a: a * C - _inf_inner(loss, u, a, p).mean(), 0.0, hi)
    else:
        scale = np.log(0.5 / C)
        value = -_optimise(
            lambda t: np.exp(t) * C * C - _inf_inner(loss, u, np.exp(t), p).mean(),
            scale - _SPAN,
            scale + _SPAN,
        )
    return value
