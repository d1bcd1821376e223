"""The target policy's action distribution once the agents respond to its explanation: `target_action_proba`
(and its gradient in the response model's parameters, used by the standard errors)."""

from __future__ import annotations

from typing import Any

import numpy as np

from certkit.ope._checks import _check_policy, _check_response, _proba
from certkit.ope._data import StrategicData, as_strategic_data
from certkit.ope._probit import _mills
from certkit.ope.disclosure import move_threshold
from certkit.ope.policies import ExplainingPolicy
from certkit.ope.response import CostDistribution, _GaussianLogCost

__all__ = ["target_action_proba"]


def target_action_proba(
    data: Any,
    *,
    target_policy: ExplainingPolicy,
    logging_policy: ExplainingPolicy,
    response: CostDistribution,
) -> np.ndarray:
    """p̂_π(a = 1 | x₀, m₀): the target policy's action probability once agents respond to *its* explanation.

    Uses the logged move m₀ (the same γ drives both responses): with F(c) = P(log γ ≤ c | x₀),
    P(m_π = 1) = F(min(c_π, c₀))/F(c₀) for movers, [F(c_π) − F(c₀)]₊/(1 − F(c₀)) for stayers below π₀'s
    threshold, F(c_π) for agents π₀ accepted, and 0 for agents π accepts. Then
    p̂_π(1) = P(m_π = 1)·π(1 | x_cf^π) + (1 − P(m_π = 1))·π(1 | x₀).

    Returns
    -------
    ndarray, shape (n,)
    """
    data = as_strategic_data(data)
    _check_policy(target_policy, "target_policy", explaining=True)
    _check_policy(logging_policy, "logging_policy", explaining=True)
    _check_response(response, logging_policy, data.x_pre.shape[1])
    return _target_proba(data, target_policy, logging_policy, response, gradient=False)[0]


def _target_proba(
    data: StrategicData,
    target: ExplainingPolicy,
    logging: ExplainingPolicy,
    response: Any,
    *,
    gradient: bool,
) -> tuple[np.ndarray, np.ndarray | None]:
    x0 = data.x_pre
    b = response.benefit
    x_cf, c_t, acc_t = move_threshold(target, x0, b, name="target_policy")
    _, c_0, acc_0 = move_threshold(logging, x0, b, name="logging_policy")
    n = x0.shape[0]
    grad = gradient and isinstance(response, _GaussianLogCost)
    k = response._eta.size if grad else 0
    p_move = np.zeros(n)
    d_move = np.zeros((n, k)) if grad else None

    def z_and_dz(rows: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return response._z(c[rows], x0[rows]), response._dz(c[rows], x0[rows])

    # Agents the logging policy accepted: the logged move says nothing about γ.
    rows = ~acc_t & acc_0
    if np.any(rows):
        p_move[rows] = np.exp(response.log_cdf(c_t[rows], x0[rows]))
        if grad:
            z, dz = z_and_dz(rows, c_t)
            d_move[rows] = (np.exp(-0.5 * z * z) / np.sqrt(2 * np.pi))[:, None] * dz
    # Movers under π₀: log γ ≤ c₀.
    moved = ~acc_t & ~acc_0 & data.moved
    p_move[moved & (c_t >= c_0)] = 1.0
    rows = moved & (c_t < c_0)
    if np.any(rows):
        ratio = np.exp(response.log_cdf(c_t[rows], x0[rows]) - response.log_cdf(c_0[rows], x0[rows]))
        p_move[rows] = ratio
        if grad:
            zt, dzt = z_and_dz(rows, c_t)
            z0, dz0 = z_and_dz(rows, c_0)
            d_move[rows] = ratio[:, None] * (_mills(zt)[:, None] * dzt - _mills(z0)[:, None] * dz0)
    # Stayers below π₀'s threshold: log γ > c₀.
    rows = ~acc_t & ~acc_0 & ~data.moved & (c_t > c_0)
    if np.any(rows):
        diff = response.log_sf(c_t[rows], x0[rows]) - response.log_sf(c_0[rows], x0[rows])
        ratio = np.exp(diff)
        p_move[rows] = -np.expm1(diff)
        if grad:
            zt, dzt = z_and_dz(rows, c_t)
            z0, dz0 = z_and_dz(rows, c_0)
            d_move[rows] = ratio[:, None] * (_mills(-zt)[:, None] * dzt - _mills(-z0)[:, None] * dz0)
    pi_cf = _proba(target, x_cf, "target_policy", open_interval=False)
    pi_0 = _proba(target, x0, "target_policy", open_interval=False)
    p1 = p_move * pi_cf + (1.0 - p_move) * pi_0
    dp1 = d_move * (pi_cf - pi_0)[:, None] if grad else None
    return p1, dp1
