r"""cvxpy programs over the ball: the finite-support LP (``sup``) and the convex program over shifts
(``inf``).

Both work in feature space with the actual transport norm, so they check the one-dimensional reduction the
closed forms and duals rely on.

- ``sup`` (linear and hinge losses): the worst case over distributions supported on the atoms plus, for each
  atom, points on the ray $x_i - t\,y_i u$ ($u$ the unit ascent direction of $\theta^\top x$): a grid of
  distances and the analytic optimal ones (shift $\varepsilon$; the budget spent on one atom; the distance to
  the hinge's kink; the optimal hinge shift for $p > 1$; one far point for the $W_1$ limit). Each atom's mass
  is split over its own support points (an LP in the mass fractions). A finite support only gives a **lower**
  bound on a supremum over the continuous space; it equals it when the support holds a maximiser, which the
  analytic points provide for piecewise-linear losses.
- ``inf`` (every loss, convex in $x$): $\min_\delta \frac1n\sum_i \ell(\theta, x_i + \delta_i, y_i)$ subject
  to $\frac1n\sum_i\|\delta_i\|^p \le \varepsilon^p$; splitting mass never helps a convex loss, so this conic
  program is exact (for $p \notin \{1, 2\}$ with the exponent cvxpy can write, see `_conic_exponent`;
  otherwise a lower bound). The moves are measured in units of $\varepsilon$ (budget $n$), so the budget stays
  within the solvers' tolerances for any $p$. The solver's value is padded down by $10^{-6}(1 + |v|)$ for its
  tolerance ($10^{-4}(1 + |v|)$ when the interior-point solver reports ``optimal_inaccurate``, which happens
  for exp-cone programs with $n \approx 10^4$; the values then still agreed with the 1-D dual to $10^{-9}$ in
  our runs).
"""

from __future__ import annotations

import functools
import math
import os
import sys
import warnings
from fractions import Fraction

import numpy as np

from certkit._optional import require
from certkit.performative._inputs import ascent_direction, dual_norm
from certkit.performative.closed_form import hinge_sup_tau, loss_values

__all__ = ["lp_risk"]

_SOLVER_PAD = {"optimal": 1e-6, "optimal_inaccurate": 1e-4}  # relative pad of the conic value, by status
_MAX_DENOMINATOR = 1024  # cvxpy's largest denominator of a rational exponent
_FAR = 1e6  # far support point (in units of the largest other distance) for the hinge W1 limit


def _support_distances(loss: str, m: np.ndarray, k: float, radius: float, p: float) -> np.ndarray:
    """(n, T) distances along the worsening ray for each atom."""
    n = m.size
    C = k * radius
    base = [0.0, 0.5 * radius, radius, 2.0 * radius, radius * n ** (1.0 / p)]
    cols = [np.full(n, t) for t in base]
    if loss == "hinge":
        cols.append(np.maximum(m - 1.0, 0.0) / k)  # reach the kink
        if p > 1.0:
            tau = hinge_sup_tau(m, C, p)[1]
            cols.append(np.full(n, p * tau / ((p - 1.0) * k)))  # optimal shift of the active atoms
        else:
            cols.append(np.full(n, _FAR * max(radius * n, float(cols[-1].max()), 1.0)))
    return np.column_stack(cols)


@functools.cache
def _silence_highs_banner() -> None:
    """Build the first HiGHS model of the process with file descriptor 1 on /dev/null.

    HiGHS prints a banner to the C stdout once per process, when the first model is built.
    """
    import highspy

    sys.stdout.flush()
    saved = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        highspy.Highs()
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)


def _solve(problem, solver_names: tuple[str, ...], *, accepted: tuple[str, ...] = ("optimal",)) -> float:
    import cvxpy as cp

    installed = set(cp.installed_solvers())
    solver = next((s for s in solver_names if s in installed), None)
    if solver == "HIGHS":
        _silence_highs_banner()
    options = {"max_iter": 1000} if solver == "CLARABEL" else {}  # the default 200 is short for exp cones
    with warnings.catch_warnings():  # the status is checked below; "inaccurate" solutions are handled there
        warnings.filterwarnings("ignore", message="Solution may be inaccurate", category=UserWarning)
        # t^p as second-order cones: exact for the exponents of _conic_exponent (cvxpy says "error: 0.00e+00")
        warnings.filterwarnings("ignore", message="Power atom with exponent", category=UserWarning)
        problem.solve(solver=solver, verbose=False, **options)
    if problem.status not in accepted:
        raise RuntimeError(
            f"the cvxpy program ended with status {problem.status!r}; rescale X or theta, "
            "or use method='closed_form'"
        )
    return float(problem.value)


def _lp_sup(
    theta: np.ndarray, b: float, X: np.ndarray, y: np.ndarray, loss: str, radius: float, p: float, norm: float
) -> float:
    import cvxpy as cp

    n = X.shape[0]
    u = ascent_direction(theta, norm)
    k = float(dual_norm(theta, norm))
    m = y * (X @ theta + b)
    dist = _support_distances(loss, m, k, radius, p)
    steps = -(y[:, None, None] * u[None, None, :]) * dist[:, :, None]  # (n, T, d) moves that lower the margin
    points = X[:, None, :] + steps
    # the transport costs in units of radius^p (budget 1): radius^p itself falls below the solvers' tolerances
    # for large p (0.1^10 = 1e-10), which let the mass move past the ball
    with np.errstate(over="ignore"):
        cost = (np.linalg.norm(points - X[:, None, :], ord=norm, axis=2) / radius) ** p
    value = loss_values(loss, y[:, None] * (points @ theta + b))
    # support points far beyond the budget are left out (a finite support is a lower bound anyway): their
    # costs, up to 1e300 for large p, make the LP too badly scaled to solve (at p = 100 it exceeded the exact
    # supremum). The analytic points cost at most n; the far point of the W1 limit about 1e6 n / radius.
    reachable = cost <= (1e12 if p == 1.0 else 1e6) * n
    w = cp.Variable(dist.shape, nonneg=True)
    problem = cp.Problem(
        cp.Maximize(cp.sum(cp.multiply(value, w)) / n),
        [
            cp.sum(w, axis=1) == 1,
            cp.sum(cp.multiply(np.where(reachable, cost, 0.0), w)) / n <= 1.0,
            cp.multiply(~reachable, w) == 0,
        ],
    )
    return _solve(problem, ("HIGHS", "CLARABEL", "ECOS", "SCS"))


def _conic_exponent(p: float) -> float:
    """The exponent of the budget $\\sum_i t_i^p \\le n$ in the conic program of the ``inf``.

    cvxpy writes $t^p$ with $1/p$ rounded to a fraction of denominator at most 1024 (and fails from $p = 2048$
    on). Where that rounding moves $p$ by more than float rounding, the program takes the largest $p' < p$
    whose $1/p'$ is such a fraction: the $W_{p'}$ ball contains the $W_p$ ball, so its best case is a lower
    bound of the best case over the $W_p$ ball (a rounded-up exponent would give a smaller ball, and a best
    case above the true one).
    """
    inverse = Fraction(1.0 / Fraction(p)).limit_denominator(_MAX_DENOMINATOR)  # cvxpy's rounding of 1 / p
    if inverse > 0 and abs(1.0 / float(inverse) - p) <= 1e-12 * p:
        return p
    exact = 1 / Fraction(p)
    above = min(Fraction(math.ceil(b * exact), b) for b in range(1, _MAX_DENOMINATOR + 1))  # >= 1 / p
    return float(1 / above)


def _conic_inf(
    theta: np.ndarray, b: float, X: np.ndarray, y: np.ndarray, loss: str, radius: float, p: float, norm: float
) -> tuple[float, str]:
    import cvxpy as cp

    n, d = X.shape
    delta = cp.Variable((n, d))
    t = cp.Variable(n, nonneg=True)  # the moves' lengths in units of the radius: the budget is n for any p
    score = X @ theta + b + delta @ theta
    if loss == "linear":
        terms = -cp.multiply(y, score)
    elif loss == "hinge":
        terms = cp.pos(1 - cp.multiply(y, score))
    elif loss == "logistic":
        terms = cp.logistic(-cp.multiply(y, score))
    else:
        terms = cp.square(score - y)
    # written as n * radius^p, the budget is below the solvers' tolerances for large p (0.1^30 = 1e-30): the
    # moves then went unconstrained and the best case came out far below the true one
    exponent = _conic_exponent(p)
    budget = cp.sum(t) if p == 1.0 else cp.sum_squares(t) if p == 2.0 else cp.sum(cp.power(t, exponent))
    constraints = [cp.norm(delta, norm, axis=1) <= radius * t, budget <= n]
    problem = cp.Problem(cp.Minimize(cp.sum(terms) / n), constraints)
    # interior-point codes can stall near the optimum of exp-cone programs at large n ("optimal_inaccurate");
    # such values are accepted for the inf with a wider pad (see lp_risk)
    value = _solve(problem, ("CLARABEL", "ECOS", "SCS"), accepted=tuple(_SOLVER_PAD))
    return value, problem.status


def lp_risk(
    theta: np.ndarray,
    X: np.ndarray,
    y: np.ndarray,
    loss: str,
    radius: float,
    p: float,
    norm: float,
    direction: str,
    *,
    intercept: float = 0.0,
    pad: bool = True,
    purpose: str = "method='lp'",
) -> float:
    r"""The cvxpy value for one $\theta$ (``pad=False`` returns the solver's raw value, for cross-checks)."""
    require("cvxpy", extra="cvxpy", purpose=purpose)
    scores = X @ theta + intercept
    mean = float(loss_values(loss, (scores - y) if loss == "squared" else y * scores).mean())
    if radius == 0.0 or not np.any(theta):
        return mean
    if direction == "sup":
        return _lp_sup(theta, intercept, X, y, loss, radius, p, norm)
    value, status = _conic_inf(theta, intercept, X, y, loss, radius, p, norm)
    if pad:
        value -= _SOLVER_PAD[status] * (1.0 + abs(value))
        if loss != "linear":
            value = max(0.0, value)
    return value
