"""Decision policies and the counterfactual explanations they disclose.

Two small protocols make the policy pluggable:

- `Policy`: anything with `action_proba(x) -> P(a = 1 | x)`, shape `(n,)`, values in (0, 1) for a logging
  policy (every action must have positive probability) and in [0, 1] for a target policy.
- `ExplainingPolicy`: a `Policy` that also discloses, for every agent, its counterfactual explanation
  `counterfactual(x) -> x_cf`, shape `(n, d)`: the point the agent would have to reach to be accepted, or the
  agent's own `x` when it is already accepted (then it has no reason to move).

The strategic estimators need explaining policies (agents respond to the disclosed explanation); the naive
estimators need only `action_proba`.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np
from scipy.special import expit

from certkit._validation import check_array, check_positive

__all__ = ["ExplainingPolicy", "LinearThresholdPolicy", "Policy"]


@runtime_checkable
class Policy(Protocol):
    """A stochastic binary decision rule: `action_proba(x)` is P(a = 1 | x) for each row of `x`."""

    def action_proba(self, x: np.ndarray) -> np.ndarray: ...


@runtime_checkable
class ExplainingPolicy(Policy, Protocol):
    """A policy that discloses a counterfactual explanation: the nearest accepted point for each agent.

    `counterfactual(x)` returns an array of the shape of `x`; rows of agents that are already accepted equal
    their input row.
    """

    def counterfactual(self, x: np.ndarray) -> np.ndarray: ...


class LinearThresholdPolicy:
    """Soft linear threshold: P(a = 1 | x) = σ((θᵀx − τ) / T) with temperature T > 0.

    An agent is *accepted* when θᵀx ≥ τ. The disclosed explanation of a rejected agent is the nearest point of
    the decision boundary, x_cf = x + d·θ/‖θ‖ with d = (τ − θᵀx)/‖θ‖ (its Euclidean projection on θᵀx = τ).

    Parameters
    ----------
    theta : array-like, shape (d,)
        Score direction (not all zero).
    tau : float
        Threshold.
    temperature : float, default 1.0
        Softness T > 0; P(a = 1 | x) ∈ (0, 1) for every finite `x`, so the policy can log data.
    """

    def __init__(self, theta: Any, tau: float, *, temperature: float = 1.0) -> None:
        theta = check_array(theta, "theta", ndim=1).copy()
        norm = float(np.linalg.norm(theta))
        if norm == 0.0:
            raise ValueError("theta must not be the zero vector")
        self.theta = theta
        self.tau = float(check_array(tau, "tau", ndim=0))
        self.temperature = check_positive(temperature, "temperature")
        self._norm = norm

    def _check_x(self, x: Any, name: str = "x") -> np.ndarray:
        return check_array(x, name, ndim=2, shape=(None, self.theta.shape[0]))

    def score(self, x: Any) -> np.ndarray:
        """θᵀx − τ for each row of `x` (≥ 0 means accepted)."""
        return self._check_x(x) @ self.theta - self.tau

    def action_proba(self, x: Any) -> np.ndarray:
        """P(a = 1 | x), shape (n,)."""
        with np.errstate(over="ignore"):  # a score beyond the float range: ±inf, probability exactly 1 or 0
            return expit(self.score(x) / self.temperature)

    def distance(self, x: Any) -> np.ndarray:
        """Distance d ≥ 0 from each row to the accepted region (0 for accepted agents)."""
        return np.maximum(-self.score(x), 0.0) / self._norm

    def counterfactual(self, x: Any) -> np.ndarray:
        """The disclosed explanation: the nearest accepted point (the row itself when already accepted)."""
        x = self._check_x(x)
        d = np.maximum(self.tau - x @ self.theta, 0.0) / self._norm
        return x + d[:, None] * (self.theta / self._norm)[None, :]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LinearThresholdPolicy):
            return NotImplemented
        return (
            np.array_equal(self.theta, other.theta)
            and self.tau == other.tau
            and self.temperature == other.temperature
        )

    def __hash__(self) -> int:
        return hash((self.theta.tobytes(), self.tau, self.temperature))

    def __repr__(self) -> str:
        return (
            f"LinearThresholdPolicy(theta={np.array2string(self.theta, precision=4, separator=', ')}, "
            f"tau={self.tau:g}, temperature={self.temperature:g})"
        )
