"""What a disclosed explanation does: the explanation each agent is shown and the log-cost threshold below
which it follows it (`move_threshold`), and the check that logged moves follow a policy's disclosure."""

from __future__ import annotations

from typing import Any

import numpy as np

from certkit._validation import check_array
from certkit.ope._data import StrategicData
from certkit.ope.policies import ExplainingPolicy

__all__ = ["move_threshold"]


def _require_explaining(policy: Any, name: str) -> None:
    if not callable(getattr(policy, "action_proba", None)):
        raise TypeError(f"{name} must have an action_proba(x) method, got {type(policy).__name__}")
    if not isinstance(policy, ExplainingPolicy):
        raise TypeError(
            f"{name} must disclose explanations: it needs a counterfactual(x) method (the ExplainingPolicy "
            f"protocol); {type(policy).__name__} has none"
        )


def move_threshold(
    policy: ExplainingPolicy, x_pre: np.ndarray, benefit: float, *, name: str = "policy"
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The explanation each agent is shown and the log-cost threshold below which it follows it.

    Returns
    -------
    x_cf : ndarray, shape (n, d)
        `policy.counterfactual(x_pre)`.
    c : ndarray, shape (n,)
        log(2B/d²) for agents at distance d > 0; NaN for accepted agents (d = 0, they never move).
    accepted : ndarray of bool, shape (n,)
        d = 0.
    """
    _require_explaining(policy, name)
    x_cf = check_array(policy.counterfactual(x_pre), f"{name}.counterfactual(x)", ndim=2, shape=x_pre.shape)
    dist = np.sqrt(np.sum((x_cf - x_pre) ** 2, axis=1))
    accepted = dist == 0.0
    with np.errstate(divide="ignore"):
        log_2b = np.log(2.0) + np.log(benefit)  # log(2B) without overflowing 2B
        c = np.where(accepted, np.nan, log_2b - 2.0 * np.log(np.where(accepted, 1.0, dist)))
    return x_cf, c, accepted


def _check_disclosure(
    data: StrategicData, policy: ExplainingPolicy, benefit: float, *, name: str = "policy"
) -> tuple[np.ndarray, np.ndarray]:
    """Check that the logged moves follow `policy`'s disclosure; return (thresholds c, accepted at x₀).

    Agents `policy` already accepts must not have moved, and every mover's x_post must be the counterfactual
    explanation x_cf that `policy` disclosed to it.
    """
    x_cf, c, accepted = move_threshold(policy, data.x_pre, benefit, name=name)
    if np.any(data.moved & accepted):
        raise ValueError(
            f"data: {int(np.sum(data.moved & accepted))} agents already accepted by {name} moved; the "
            "data were logged under another policy"
        )
    if not np.allclose(data.x_post[data.moved], x_cf[data.moved], rtol=1e-9, atol=1e-9):
        eps32 = float(np.finfo(np.float32).eps)
        if np.allclose(data.x_post[data.moved], x_cf[data.moved], rtol=4 * eps32, atol=4 * eps32):
            raise ValueError(
                f"data: the movers' x_post differs from the counterfactual explanation disclosed by {name} "
                "only by float32 rounding; pass x_pre and x_post as float64 arrays (float32 data cannot be "
                "matched to the explanations)"
            )
        raise ValueError(
            f"data: the movers' x_post is not the counterfactual explanation disclosed by {name}; the data "
            "were logged under another policy (or agents do not follow the explanation exactly)"
        )
    return c, accepted
