r"""Exact closed forms of the Wasserstein worst-case (``sup``) and best-case (``inf``) risks.

All functions work on the one-dimensional reduction (see `certkit.performative._inputs`): ``u`` holds the
margins $m_i = y_i\theta^\top x_i$ (margin losses) or residuals $r_i = \theta^\top x_i - y_i$ (squared loss),
and ``C`` is the margin budget $\varepsilon\|\theta\|_*$: the transport budget allows per-atom shifts $s_i$ of
$u_i$ (split over any number of destinations) with $\frac1n\sum_i \mathbb E|s_i|^p \le C^p$.

Derivations (each is checked against the LP / conic program and the 1-D dual in the tests):

- linear, any $p$: a shift $s$ changes the loss by exactly $s$, and $\frac1n\sum\mathbb E|s_i| \le C$ by
  Jensen, reached by shifting every atom by $C$: $\bar\ell \pm C$.
- 1-Lipschitz margin losses (hinge, logistic), $W_1$, ``sup``: $\bar\ell + C$ is an upper bound (Lipschitz),
  and it is the supremum: a fraction $\eta$ of one atom moved by $nC/\eta$ gains $C$ up to $O(\eta)$ because
  the slope of the loss tends to 1. For hinge it is attained as soon as one atom has $m_i \le 1$.
- convex losses, ``inf``: splitting mass never helps (Jensen on the loss and on the cost), so the ``inf`` is a
  convex problem over deterministic shifts, solved by water-filling: hinge raises the positive hinge terms to
  a common cap ($p > 1$) or in any order ($p = 1$, giving $\max(0, \bar\ell - C)$ because only positive hinge
  terms can be lowered and they sum to $n\bar\ell$); logistic $W_1$ raises the smallest margins to a common
  level $L$ (the derivative of the loss is monotone in the margin); squared $W_1$ lowers the largest $|r_i|$
  to a common level.
- squared $W_2$: Minkowski's inequality in $L^2$: $(\sqrt{\bar\ell} + C)^2$ and $\max(0, \sqrt{\bar\ell} -
  C)^2$, both reached by scaling the residuals. Squared with $p < 2$ and ``sup`` is $+\infty$ (quadratic gain,
  cost $t^p$).
- hinge $W_p$, $p > 1$, ``sup``: the dual $\inf_{a\ge0} aC^p + \frac1n\sum_i \max(0, 1 - m_i + \varphi(a))$
  with $\varphi(a) = \sup_s (s - a s^p)$, written in $\tau = \varphi(a)$, is the convex piecewise function
  $F(\tau) = A\tau^{1-p} + \frac1n\sum_i (1 - m_i + \tau)_+$ with $A = C^p (p-1)^{p-1} p^{-p}$; its minimum
  lies at a breakpoint $\tau = m_i - 1$ or at a stationary point $\tau_j = \frac{p-1}{p} C (n/j)^{1/p}$ of a
  piece with $j$ active atoms. Evaluating $F$ at every candidate (sorted prefix sums) gives the exact value;
  any $\tau > 0$ gives a valid upper bound (weak duality), so rounding in the choice of $\tau$ cannot make it
  unsound.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["closed_form_risk", "has_closed_form", "hinge_sup_tau", "loss_values"]


def loss_values(loss: str, u: np.ndarray) -> np.ndarray:
    """Per-atom losses from margins (margin losses) or residuals (squared)."""
    if loss == "linear":
        return -u
    if loss == "hinge":
        return np.maximum(0.0, 1.0 - u)
    if loss == "logistic":
        return np.logaddexp(0.0, -u)
    return u * u


def has_closed_form(loss: str, p: float, direction: str) -> bool:
    """Whether `closed_form_risk` is exact for this combination."""
    if loss in ("linear", "hinge"):
        return True
    if loss == "logistic":
        return p == 1.0
    if direction == "sup":
        return p <= 2.0
    return p in (1.0, 2.0)


def _water_level(values: np.ndarray, budget: float) -> tuple[float, int]:
    r"""Level $L$ with $\sum_i (L - v_i)_+ =$ budget, and the count $J$ of ``values`` (sorted) below it."""
    n = values.size
    prefix = np.concatenate(([0.0], np.cumsum(values)))
    need = np.arange(n) * values - prefix[:-1]  # raising the j smallest values to values[j]
    j = int(np.searchsorted(need, budget, side="right"))  # >= 1 since need[0] = 0
    return (budget + prefix[j]) / j, j


def hinge_sup_tau(u: np.ndarray, C: float, p: float) -> tuple[float, float]:
    r"""Exact hinge $W_p$ ``sup`` ($p > 1$) and its optimal $\tau$ (optimal margin shift $p\tau/(p-1)$)."""
    n = u.size
    b = np.sort(u - 1.0)
    prefix = np.concatenate(([0.0], np.cumsum(b)))
    # (p - 1)^(p - 1) p^(-p) through logarithms: the powers overflow float64 from p of about 150 on
    k = math.exp((p - 1.0) * math.log1p(-1.0 / p) - math.log(p))
    j = np.arange(1, n + 1, dtype=np.float64)
    stationary = (p - 1.0) / p * C * (n / j) ** (1.0 / p)
    candidates = np.concatenate((stationary, b[b > 0]))
    active = np.searchsorted(b, candidates, side="left")
    # C^p k tau^(1-p) written as C k (tau/C)^(1-p): no 0 * inf (NaN) when C^p under- or overflows
    with np.errstate(over="ignore", under="ignore"):
        transport = C * k * (candidates / C) ** (1.0 - p)
    values = transport + (active * candidates - prefix[active]) / n
    best = int(np.argmin(values))
    return float(values[best]), float(candidates[best])


def _hinge_inf_capped(h: np.ndarray, C: float, p: float) -> float:
    r"""Water-filling for hinge ``inf``, $p > 1$: lower every hinge term to $\min(h_i, c)$-type cap.

    Lowering term $i$ by $\delta_i$ costs $\delta_i^p$ of the budget $\sum_i \delta_i^p \le n C^p$, so the
    best use lowers the largest terms to a common cap $c$. Computed in units of $C$ (terms $h_i / C$, budget
    $n$): $C^p$ itself underflows float64 for $C < 1$ and large $p$ (e.g. $0.1^{300}$), which left every term
    unlowered, a best case above the true one.
    """
    n = h.size
    hs = np.sort(h)
    with np.errstate(over="ignore", under="ignore"):  # inf: a term the budget cannot lower to the cap
        gp = (hs / C) ** p
    if gp.sum() <= n:
        return 0.0  # every hinge term can reach 0
    prefix_p = np.concatenate(([0.0], np.cumsum(gp)))
    reach = prefix_p[:-1] + (n - np.arange(n)) * gp  # sum_i min(g_i, g_j)^p, nondecreasing in j
    J = int(np.searchsorted(reach, float(n), side="right"))  # < n because reach[-1] = sum g^p > n
    c = C * ((n - prefix_p[J]) / (n - J)) ** (1.0 / p)
    return float((hs[J:].sum() - (n - J) * c) / n)


def closed_form_risk(loss: str, u: np.ndarray, C: float, p: float, direction: str) -> float:
    r"""The exact risk over the $W_p$ ball for one $\theta$ (see the module docstring for each case)."""
    losses = loss_values(loss, u)
    mean = float(losses.mean())
    sup = direction == "sup"
    if C == 0.0:
        return mean
    if loss == "linear":
        return mean + C if sup else mean - C
    if loss == "hinge":
        if p == 1.0:
            return mean + C if sup else max(0.0, mean - C)
        return hinge_sup_tau(u, C, p)[0] if sup else _hinge_inf_capped(losses, C, p)
    if loss == "logistic":  # p == 1 (has_closed_form)
        if sup:
            return mean + C
        level, _ = _water_level(np.sort(u), u.size * C)
        return float(np.logaddexp(0.0, -np.maximum(u, level)).mean())
    # squared
    if sup:
        return float(np.inf) if p < 2.0 else (np.sqrt(mean) + C) ** 2
    if p == 2.0:
        return max(0.0, np.sqrt(mean) - C) ** 2
    a = np.abs(u)
    if a.sum() <= u.size * C:
        return 0.0
    neg_level, _ = _water_level(np.sort(-a), u.size * C)
    return float((np.minimum(a, -neg_level) ** 2).mean())
