"""`retraining_bound`: the risk after $T$ rounds of retraining on performatively distorted samples
(Cor. 3.8)."""

from __future__ import annotations

import math

from certkit._validation import (
    _check_real_scalar,
    check_integer,
    check_level,
    check_nonnegative,
    check_positive,
    check_probability,
)
from certkit.performative._inputs import check_order
from certkit.performative.bound_result import BoundResult, _result

__all__ = ["retraining_bound"]


def retraining_bound(
    *,
    n: int,
    share: float,
    diameter: float,
    loss_lipschitz: float,
    contraction: float,
    n_rounds: int,
    map_lipschitz: float,
    dimension: float,
    concentration: tuple[float, float] = (1.0, 1.0),
    p: float = 2,
    confidence_level: float = 0.95,
    empirical_risk: float = 0.0,
) -> BoundResult:
    r"""Risk after $T$ rounds of retraining on performatively distorted samples (Cor. 3.8-style).

    $\mathcal R(d_0, \hat\theta_T) \le \mathcal R(\hat d_{T-1}, \hat\theta_T) +
    L_\ell\left(\frac{\log(C_a/\delta)}{C_b n}\right)^{p/\nu} + \frac{\kappa^{T-1} - 1}{L_\ell^{-1}(\kappa -
    1)}\left(\frac mn\right)^{1/p} D_Z \tilde L_a$,

    with the last term's limit $(T - 1) L_\ell (m/n)^{1/p} D_Z \tilde L_a$ at $\kappa = 1$ (it is computed as
    the geometric sum $L_\ell\sum_{j<T-1}\kappa^j$, exact for every $\kappa$). Symbols as in the reference
    notebook of the paper's Cor. 3.8:

    Parameters
    ----------
    n : int
        Sample size.
    share : float
        $m/n$, the share of units the deployed model affects in each round.
    diameter : float
        $D_Z$, the diameter of the data space.
    loss_lipschitz : float
        $L_\ell$, the Lipschitz constant of the loss in $z$.
    contraction : float
        $\kappa > 0$ (the notebook's $\varepsilon$): the factor by which one round of retraining can amplify a
        distribution shift, i.e. the Lipschitz constant of one retrain-and-redeploy step (the notebook takes
        $\kappa = 1 + L_a$, $L_a$ the Lipschitz constant of the best response $G(d) = \arg\min_\theta \mathcal
        R(d, \theta)$). Not the radius.
    n_rounds : int
        $T \ge 1$ retraining rounds ($T = 1$: no accumulation).
    map_lipschitz : float
        $\tilde L_a$, the Lipschitz constant of the performative map in $\theta$ (the notebook uses $1/(1 +
        L_a)$).
    dimension : float
        $\nu > 0$, the (effective) dimension in the Wasserstein concentration of the empirical measure.
    concentration : (float, float), default (1, 1)
        $(C_a, C_b)$, the constants of that concentration inequality (not identified by the model; the
        notebook uses 1).
    p : float, default 2
        Wasserstein order.
    confidence_level : float, default 0.95
        $1 - \delta$.
    empirical_risk : float, default 0
        $\mathcal R(\hat d_{T-1}, \hat\theta_T)$; 0 gives a bound on the gap.

    Returns
    -------
    BoundResult
        Terms ``empirical_risk``, ``sampling``, ``performative`` (the accumulation term).
    """
    n = check_integer(n, "n", minimum=1)
    share = check_probability(share, "share")
    diameter = check_nonnegative(diameter, "diameter")
    L = check_positive(loss_lipschitz, "loss_lipschitz")
    kappa = check_positive(contraction, "contraction")
    T = check_integer(n_rounds, "n_rounds", minimum=1)
    La = check_nonnegative(map_lipschitz, "map_lipschitz")
    nu = check_positive(dimension, "dimension")
    if not isinstance(concentration, (tuple, list)) or len(concentration) != 2:
        raise TypeError("concentration must be a pair (C_a, C_b)")
    Ca = check_positive(concentration[0], "concentration[0] (C_a)")
    Cb = check_positive(concentration[1], "concentration[1] (C_b)")
    p = check_order(p)
    delta = 1.0 - check_level(confidence_level)
    empirical_risk = _check_real_scalar(empirical_risk, "empirical_risk")
    accumulation = L * _geometric_sum(kappa, T - 1)
    terms = {
        "empirical_risk": float(empirical_risk),
        "sampling": L * max(math.log(Ca / delta) / (Cb * n), 0.0) ** (p / nu),
        "performative": accumulation * share ** (1.0 / p) * diameter * La,
    }
    assumptions = {
        "bound": f"retraining bound (Cor 3.8-style), T = {T}",
        "n": n,
        "share m/n": share,
        "diameter D_Z": diameter,
        "L_loss": L,
        "contraction kappa": kappa,
        "n_rounds T": T,
        "map_lipschitz L_a~": La,
        "dimension nu": nu,
        "concentration (C_a, C_b)": (Ca, Cb),
        "p": p,
        "confidence_level": 1.0 - delta,
        "conditions": "repeated risk minimisation; each round affects m of n units; loss L-Lipschitz; "
        "W_p concentration P(W_p > t) <= C_a exp(-C_b n t^(nu/p))",
    }
    return _result(terms, assumptions, culprits=f"n_rounds={T}, contraction={kappa!r}, diameter={diameter!r}")


def _geometric_sum(kappa: float, count: int) -> float:
    """Σ_{j < count} κ^j: summed exactly (fsum) up to 10,000 terms, in closed form beyond; ValueError naming
    n_rounds when it overflows float64."""
    if count == 0:
        return 0.0
    if kappa == 1.0:
        return float(count)
    log_top = (count - 1) * math.log(kappa)  # log of the largest term when κ > 1
    if kappa > 1.0 and log_top > 700.0:
        raise ValueError(
            f"n_rounds={count + 1} is too large for contraction={kappa!r}: the accumulation term grows like "
            f"kappa^(T - 1) = e^{log_top:.4g}, beyond float64; the bound is vacuous long before (reduce "
            "n_rounds or use contraction <= 1)"
        )
    if count <= 10_000:
        return math.fsum(kappa**j for j in range(count))
    return math.expm1(count * math.log(kappa)) / (kappa - 1.0)
