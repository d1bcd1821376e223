"""A simulator of strategic agents facing a policy that discloses counterfactual explanations."""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.special import expit, ndtr

from certkit._typing import RNGLike
from certkit._validation import check_allocation, check_array, check_integer, check_positive, check_rng
from certkit.ope._checks import _MAX_WORK
from certkit.ope._data import StrategicData
from certkit.ope.disclosure import _require_explaining, move_threshold
from certkit.ope.policies import ExplainingPolicy
from certkit.ope.response import LogNormalCostResponse

__all__ = ["StrategicSimulator"]


class StrategicSimulator:
    """Agents x₀ ~ N(μ_x, I), log γ | x₀ ~ N(β₀ + βᵀx₀, s²), binary rewards depending on x₀ and the decision.

    An agent below the policy's threshold moves to the disclosed explanation x_cf at distance d iff
    (γ/2)d² ≤ B; the policy then acts on the post-strategic x'. The reward is Bernoulli with
    P(r = 1 | x₀, a) = σ(α_a0 + α_aᵀx₀): it depends on the *pre*-strategic covariates (gaming does not change
    the outcome). The defaults give a clear strategic effect: agents who move to the logging threshold are
    worse than the x' the policy sees.

    Parameters
    ----------
    n_features : int, optional
        Covariate dimension (default 2, or the number of columns of `features`).
    coef : array-like, shape (n_features + 1,), optional
        (β₀, β) of log γ; default (0.5, −0.5, 0, …).
    scale : float, default 0.7
        s.
    benefit : float, default 1.0
        B.
    feature_mean : array-like, shape (n_features,), optional
        μ_x; default 0.
    reward_coef : array-like, shape (2, n_features + 1), optional
        Row a = (α_a0, α_a); default row 0 = (−1.5, 0, …) (a rejected agent rarely yields a reward), row 1 =
        (−0.5, 1.5, 0.5, 0, …).
    features : array-like, shape (N, n_features), optional
        A finite population of covariate rows (e.g. real, standardised covariates) used instead of the
        Gaussian: agents are drawn from its rows with replacement, and `true_value` averages exactly over
        them.
    """

    def __init__(
        self,
        *,
        n_features: int | None = None,
        coef: Any = None,
        scale: float = 0.7,
        benefit: float = 1.0,
        feature_mean: Any = None,
        reward_coef: Any = None,
        features: Any = None,
    ) -> None:
        self.features = None if features is None else check_array(features, "features", ndim=2)
        if n_features is None:
            n_features = 2 if self.features is None else self.features.shape[1]
        p = check_integer(n_features, "n_features", minimum=1)
        if self.features is not None and self.features.shape[1] != p:
            raise ValueError(f"features has {self.features.shape[1]} columns, n_features is {p}")
        self.n_features = p
        if coef is None:
            coef = np.zeros(p + 1)
            coef[:2] = (0.5, -0.5)
        self.coef = check_array(coef, "coef", ndim=1, shape=(p + 1,))
        self.scale = check_positive(scale, "scale")
        self.benefit = check_positive(benefit, "benefit")
        self.feature_mean = (
            np.zeros(p) if feature_mean is None else check_array(feature_mean, "feature_mean", shape=(p,))
        )
        if reward_coef is None:
            reward_coef = np.zeros((2, p + 1))
            reward_coef[0, 0] = -1.5
            reward_coef[1, : min(p, 2) + 1] = (-0.5, 1.5, 0.5)[: min(p, 2) + 1]
        self.reward_coef = check_array(reward_coef, "reward_coef", shape=(2, p + 1))

    def response(self) -> LogNormalCostResponse:
        """The true response model (`LogNormalCostResponse.from_params` with the simulator's parameters)."""
        return LogNormalCostResponse.from_params(self.coef, self.scale, benefit=self.benefit)

    def expected_reward(self, x_pre: Any, action: int) -> np.ndarray:
        """q(x₀, a) = P(r = 1 | x₀, a)."""
        x_pre = check_array(x_pre, "x_pre", ndim=2, shape=(None, self.n_features))
        a = check_integer(action, "action", minimum=0, maximum=1)
        return expit(self.reward_coef[a, 0] + x_pre @ self.reward_coef[a, 1:])

    def _agents(self, n: int, rng: np.random.Generator) -> np.ndarray:
        if self.features is not None:
            return self.features[rng.integers(0, self.features.shape[0], n)]
        return self.feature_mean + rng.standard_normal((n, self.n_features))

    def _check_policy_features(self, policy: ExplainingPolicy) -> None:
        """A policy with coefficients ``theta`` has one per simulated feature (ValueError naming both)."""
        theta = getattr(policy, "theta", None)
        d = np.shape(theta)[0] if np.ndim(theta) == 1 else None
        if d is not None and d != self.n_features:
            raise ValueError(
                f"policy has {d} coefficients (theta) but the simulator draws agents with n_features="
                f"{self.n_features}; use StrategicSimulator(n_features={d}) or a policy with "
                f"{self.n_features} coefficients"
            )

    def _check_size(self, n: int) -> None:
        # x_pre, x_cf, x_post and their temporaries (n, d), plus about ten vectors of length n.
        check_allocation(8.0 * n * (4.0 * self.n_features + 10.0), "n", n, what=f"{n} simulated agents")

    def sample_costs(self, n: int, rng: RNGLike = None) -> tuple[np.ndarray, np.ndarray]:
        """Agents and their cost sensitivities: (x_pre (n, d), γ (n,)) — data for `ObservedCostResponse`."""
        n = check_integer(n, "n", minimum=1)
        self._check_size(n)
        gen = check_rng(rng)
        x0 = self._agents(n, gen)
        log_gamma = self.coef[0] + x0 @ self.coef[1:] + self.scale * gen.standard_normal(n)
        return x0, np.exp(log_gamma)

    def sample(self, policy: ExplainingPolicy, n: int, rng: RNGLike = None) -> StrategicData:
        """Log `n` agents under `policy`: responses, decisions a ~ π(· | x'), rewards, propensities."""
        _require_explaining(policy, "policy")
        self._check_policy_features(policy)
        n = check_integer(n, "n", minimum=1)
        self._check_size(n)
        gen = check_rng(rng)
        x0 = self._agents(n, gen)
        log_gamma = self.coef[0] + x0 @ self.coef[1:] + self.scale * gen.standard_normal(n)
        x_cf, c, accepted = move_threshold(policy, x0, self.benefit)
        moved = ~accepted & (log_gamma <= np.where(accepted, -np.inf, c))
        x_post = np.where(moved[:, None], x_cf, x0)
        p1 = check_array(policy.action_proba(x_post), "policy.action_proba(x)", ndim=1, shape=(n,))
        action = (gen.random(n) < p1).astype(np.int64)
        q = np.where(action == 1, self.expected_reward(x0, 1), self.expected_reward(x0, 0))
        reward = (gen.random(n) < q).astype(np.float64)
        pscore = np.where(action == 1, p1, 1.0 - p1)
        return StrategicData(
            x_pre=x0, x_post=x_post, moved=moved, action=action, reward=reward, pscore=pscore
        )

    def true_value(self, policy: ExplainingPolicy, *, n_mc: int = 2_000_000, rng: RNGLike = 0) -> float:
        """V(π) = E[Σ_a P(a | response to π) q(x₀, a)] by Monte Carlo over x₀, with the move probability
        and the rewards integrated exactly (Monte Carlo error ≈ 2·10⁻⁴ at the default `n_mc`).

        Parameters
        ----------
        policy : ExplainingPolicy
        n_mc : int, default 2,000,000
            Monte Carlo agents (processed in chunks of 10⁶); ignored with `features` (exact average).
        rng : None, int or numpy.random.Generator, default 0
        """
        _require_explaining(policy, "policy")
        self._check_policy_features(policy)
        n_mc = check_integer(n_mc, "n_mc", minimum=1)
        if self.features is None and n_mc > _MAX_WORK:  # chunked, so the cap is on time, not memory
            raise ValueError(
                f"n_mc={n_mc} is too large: more than {_MAX_WORK:.0e} Monte Carlo agents, at about a "
                "microsecond each, take hours; reduce n_mc"
            )
        gen = check_rng(rng)
        total = 0.0
        if self.features is not None:  # exact average over the finite population
            n_mc = self.features.shape[0]
        for start in range(0, n_mc, 1_000_000):
            m = min(1_000_000, n_mc - start)
            x0 = self._agents(m, gen) if self.features is None else self.features[start : start + m]
            x_cf, c, accepted = move_threshold(policy, x0, self.benefit)
            p_move = np.zeros(m)
            mu = self.coef[0] + x0[~accepted] @ self.coef[1:]
            p_move[~accepted] = ndtr((c[~accepted] - mu) / self.scale)
            q0, q1 = self.expected_reward(x0, 0), self.expected_reward(x0, 1)
            p_cf, p_0 = policy.action_proba(x_cf), policy.action_proba(x0)
            p1 = p_move * p_cf + (1.0 - p_move) * p_0
            total += float(np.sum((1.0 - p1) * q0 + p1 * q1))
        return total / n_mc
