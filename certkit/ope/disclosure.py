"""What a disclosed explanation does: the explanation each agent is shown and the log-cost threshold below
which it follows it (`move_threshold`), and the check that logged moves follow a policy's disclosure."""

from __future__ import annotations

from typing import Any

import numpy as np

from certkit._validation import check_array, check_positive
from certkit.ope._data import StrategicData
from certkit.ope.policies import ExplainingPolicy

__all__ = ["X_POST_TOL", "move_threshold"]

#: Default tolerance of the check that movers' x_post is the disclosed explanation (relative and absolute):
#: data stored with 6 or more decimals pass.
X_POST_TOL = 1e-6


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
    x_pre = check_array(x_pre, "x_pre", ndim=2)
    benefit = check_positive(benefit, "benefit")
    x_cf = check_array(policy.counterfactual(x_pre), f"{name}.counterfactual(x)", ndim=2, shape=x_pre.shape)
    step = x_cf - x_pre
    scale = np.max(np.abs(step), axis=1)  # |step| scaled first: its square overflows beyond 1e154
    with np.errstate(invalid="ignore"):  # 0 / 0 for agents that stay
        dist = scale * np.sqrt(np.sum((step / scale[:, None]) ** 2, axis=1))
    dist[scale == 0.0] = 0.0
    accepted = dist == 0.0
    with np.errstate(divide="ignore"):
        log_2b = np.log(2.0) + np.log(benefit)  # log(2B) without overflowing 2B
        c = np.where(accepted, np.nan, log_2b - 2.0 * np.log(np.where(accepted, 1.0, dist)))
    return x_cf, c, accepted


def _check_disclosure(
    data: StrategicData,
    policy: ExplainingPolicy,
    benefit: float,
    *,
    name: str = "policy",
    tol: float = X_POST_TOL,
) -> tuple[np.ndarray, np.ndarray]:
    """Check that the logged moves follow `policy`'s disclosure; return (thresholds c, accepted at x₀).

    Agents `policy` already accepts must not have moved, and every mover's x_post must be the counterfactual
    explanation x_cf that `policy` disclosed to it, within `tol` (relative and absolute, as `numpy.allclose`).
    """
    x_cf, c, accepted = move_threshold(policy, data.x_pre, benefit, name=name)
    if np.any(data.moved & accepted):
        raise ValueError(
            f"data: {int(np.sum(data.moved & accepted))} agents already accepted by {name} moved; the "
            "data were logged under another policy"
        )
    post, cf = data.x_post[data.moved], x_cf[data.moved]
    if not np.allclose(post, cf, rtol=tol, atol=tol):
        error = _XPostMismatchError(_mismatch_message(post, cf, name, tol))
        error.command_line_message = _mismatch_message(post, cf, name, tol, flag="--x-post-tol")
        raise error
    return c, accepted


class _XPostMismatchError(ValueError):
    """The movers' x_post is not the disclosed explanation within the response model's ``x_post_tol``.

    ``command_line_message`` says the same with the tolerance named as ``certkit ope``'s ``--x-post-tol``.
    """

    command_line_message: str = ""


def _mismatch_message(
    post: np.ndarray, cf: np.ndarray, name: str, tol: float, *, flag: str | None = None
) -> str:
    """Why movers' x_post is not the disclosed explanation: decimal rounding, float32, or another policy.

    The tolerance is named as the response model's ``x_post_tol``, or as the command-line ``flag``.
    """

    def setting(value: float) -> str:
        return f"x_post_tol={value:g}" if flag is None else f"{flag} {value:g}"

    diff = np.abs(post - cf)
    off = ~np.isclose(post, cf, rtol=tol, atol=tol).all(axis=1)
    head = (
        f"data: the movers' x_post differs from the counterfactual explanation disclosed by {name} by up "
        f"to {float(diff.max()):.3g} ({int(off.sum())} of {post.shape[0]} movers are beyond {setting(tol)})"
    )
    if flag is None:
        fix = "pass a larger x_post_tol to the response model (LogNormalCostResponse(x_post_tol=...))"
    else:
        fix = f"pass a larger {flag}"
    for decimals in range(16):
        if np.allclose(post, np.round(cf, decimals), rtol=1e-12, atol=1e-12):
            return (
                f"{head}: x_post is the explanation rounded to {decimals} decimals; {fix}, e.g. "
                f"{setting(10.0**-decimals)}, or log x_post at full precision"
            )
    eps32 = float(np.finfo(np.float32).eps)
    if np.allclose(post, cf, rtol=4 * eps32, atol=4 * eps32):
        return (
            f"{head}: the differences are float32 rounding (the values passed through float32); {fix}, "
            f"e.g. {setting(1e-6)}, or keep x_pre and x_post in float64"
        )
    return (
        f"{head}: the data were logged under another policy, or agents do not follow the explanation "
        f"exactly; if x_post was stored with limited precision, {fix}"
    )
