"""Response models: the distribution of the agents' cost sensitivity γ and how it is estimated.

An agent with covariates x₀ below a policy's threshold sees the disclosed explanation x_cf at distance d and
moves iff (γ/2)·d² ≤ B (benefit B), i.e. iff log γ ≤ c(x₀) := log(2B/d²). A response model is a conditional
distribution of log γ given x₀; the estimators need only its log-CDF and log-survival function at c (the small
`CostDistribution` protocol). The two models shipped here share log γ | x₀ ~ N(β₀ + βᵀx₀, s²):

- `LogNormalCostResponse`: fitted from the logged move indicators (a probit with the known regressor c);
- `ObservedCostResponse`: fitted from observed cost sensitivities γ (OLS on log γ).

Internally both hold the probit coefficients η = (1/s, −β₀/s, −β/s), so that
P(log γ ≤ c | x₀) = Φ(η·[c, 1, x₀]); the estimators differentiate through η to propagate the response model's
estimation error into their standard errors.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol, runtime_checkable

import numpy as np
from scipy.special import log_ndtr, ndtr

from certkit._results import ResultMixin, format_table
from certkit._validation import (
    check_array,
    check_integer,
    check_is_fitted,
    check_positive,
    check_same_length,
)
from certkit.ope._data import StrategicData, as_strategic_data
from certkit.ope.policies import ExplainingPolicy

__all__ = [
    "CalibrationTable",
    "CostDistribution",
    "LogNormalCostResponse",
    "ObservedCostResponse",
    "move_threshold",
]

_LOG_SQRT_2PI = 0.5 * np.log(2.0 * np.pi)


@runtime_checkable
class CostDistribution(Protocol):
    """The protocol the estimators need from a response model.

    `benefit` is B; `log_cdf(c, x_pre)` and `log_sf(c, x_pre)` are log P(log γ ≤ c | x₀) and
    log P(log γ > c | x₀), elementwise for `c` of shape (n,) and `x_pre` of shape (n, d). A user model that
    only satisfies this protocol is treated as known (no estimation error enters the standard errors).
    """

    benefit: float

    def log_cdf(self, c: np.ndarray, x_pre: np.ndarray) -> np.ndarray: ...

    def log_sf(self, c: np.ndarray, x_pre: np.ndarray) -> np.ndarray: ...


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


def _log_pdf(z: np.ndarray) -> np.ndarray:
    return -0.5 * z * z - _LOG_SQRT_2PI


def _mills(z: np.ndarray) -> np.ndarray:
    """φ(z)/Φ(z), stable for very negative z."""
    return np.exp(_log_pdf(z) - log_ndtr(z))


class _GaussianLogCost:
    """Shared machinery of the models with log γ | x₀ ~ N(β₀ + βᵀx₀, s²), parametrised by η."""

    benefit: float
    _eta: np.ndarray
    _eta_cov: np.ndarray
    _eta_influence: np.ndarray | None  # (n_fit, k): per-row contributions, sum ≈ η̂ − η
    _fit_x: np.ndarray | None

    def _set_eta(self, eta: np.ndarray, eta_cov: np.ndarray, influence: np.ndarray | None) -> None:
        a, b = eta[0], eta[1:]
        self._eta = eta
        self._eta_cov = eta_cov
        self._eta_influence = influence
        self.scale_ = float(1.0 / a)
        self.coef_ = -b / a
        # Delta method: (β, s) = g(η) with s = 1/a and β = −b/a.
        k = eta.shape[0]
        jac = np.zeros((k, k))
        jac[:-1, 0] = b / a**2  # ∂β/∂a
        jac[:-1, 1:] = -np.eye(k - 1) / a  # ∂β/∂b
        jac[-1, 0] = -1.0 / a**2  # ∂s/∂a
        self.covariance_ = jac @ eta_cov @ jac.T
        self.std_errors_ = np.sqrt(np.maximum(np.diag(self.covariance_), 0.0))

    def _check_x(self, x_pre: Any) -> np.ndarray:
        check_is_fitted(self, "_eta", method="fit")
        return check_array(x_pre, "x_pre", ndim=2, shape=(None, self._eta.shape[0] - 2))

    def _z(self, c: np.ndarray, x_pre: np.ndarray) -> np.ndarray:
        eta = self._eta
        return eta[0] * c + eta[1] + x_pre @ eta[2:]

    def log_cdf(self, c: np.ndarray, x_pre: np.ndarray) -> np.ndarray:
        """log P(log γ ≤ c | x₀)."""
        return log_ndtr(self._z(c, self._check_x(x_pre)))

    def log_sf(self, c: np.ndarray, x_pre: np.ndarray) -> np.ndarray:
        """log P(log γ > c | x₀)."""
        return log_ndtr(-self._z(c, self._check_x(x_pre)))

    def move_probability(self, policy: ExplainingPolicy, x_pre: Any) -> np.ndarray:
        """P(an agent at x₀ follows the explanation of `policy`), 0 for agents it already accepts."""
        x_pre = self._check_x(x_pre)
        _, c, accepted = move_threshold(policy, x_pre, self.benefit)
        out = np.zeros(x_pre.shape[0])
        out[~accepted] = ndtr(self._z(c[~accepted], x_pre[~accepted]))
        return out

    def __repr__(self) -> str:
        params = [f"benefit={self.benefit!r}"]
        for name, default in (("max_iter", 100), ("tol", 1e-10)):
            if hasattr(self, name) and getattr(self, name) != default:
                params.append(f"{name}={getattr(self, name)!r}")
        return f"{type(self).__name__}({', '.join(params)})"

    def _dz(self, c: np.ndarray, x_pre: np.ndarray) -> np.ndarray:
        """∂z/∂η = [c, 1, x₀], shape (n, k)."""
        return np.column_stack([c, np.ones_like(c), x_pre])

    def _with_eta(self, eta: np.ndarray, eta_cov: np.ndarray | None = None) -> _GaussianLogCost:
        """A fixed-parameter copy with probit coefficients `eta`."""
        out = LogNormalCostResponse(benefit=self.benefit)
        out._fit_x = None
        out._set_eta(eta, np.zeros((eta.size, eta.size)) if eta_cov is None else eta_cov, None)
        return out

    def _profile(self, scale: float) -> _GaussianLogCost:
        """The model with s fixed at `scale` and (β₀, β) re-estimated where data allow (kept otherwise)."""
        mu = -self._eta[1:] / self._eta[0]
        return self._with_eta(np.concatenate([[1.0 / scale], -mu / scale]))

    def _bootstrap(self, rows: np.ndarray | None, rng: np.random.Generator) -> _GaussianLogCost:
        """The model refitted on a bootstrap replicate (fixed-parameter models are returned as they are)."""
        return self

    def summary(self) -> str:
        check_is_fitted(self, "_eta", method="fit")
        names = ["beta_0", *(f"beta_{j + 1}" for j in range(self.coef_.size - 1)), "scale s"]
        values = [*self.coef_, self.scale_]
        rows = [[nm, v, se] for nm, v, se in zip(names, values, self.std_errors_)]
        return format_table(
            ["parameter", "estimate", "std. error"],
            rows,
            title=f"{type(self).__name__}: log γ | x₀ ~ N(β₀ + βᵀx₀, s²), benefit B = {self.benefit:g}",
        )

    @classmethod
    def from_params(
        cls, coef: Any, scale: float, *, benefit: float = 1.0, covariance: Any = None
    ) -> LogNormalCostResponse:
        """A response model with given parameters (e.g. a known or deliberately wrong model).

        Parameters
        ----------
        coef : array-like, shape (d + 1,)
            (β₀, β₁, …, β_d).
        scale : float
            s > 0.
        benefit : float
            B > 0.
        covariance : array-like, shape (d + 2, d + 2), optional
            Covariance of (β₀, β, s) if the parameters were estimated elsewhere; it then enters the
            estimators' standard errors. Default: known parameters (no estimation error).
        """
        coef = check_array(coef, "coef", ndim=1)
        scale = check_positive(scale, "scale")
        out = LogNormalCostResponse(benefit=benefit)
        out._fit_x = None
        eta = np.concatenate([[1.0 / scale], -coef / scale])
        k = eta.size
        if covariance is None:
            eta_cov = np.zeros((k, k))
        else:
            cov = check_array(covariance, "covariance", ndim=2, shape=(k, k))
            if not np.allclose(cov, cov.T) or np.min(np.linalg.eigvalsh((cov + cov.T) / 2)) < -1e-12:
                raise ValueError("covariance must be a symmetric positive semi-definite matrix")
            # Inverse delta map: η = h(β, s) with a = 1/s, b = −β/s.
            jac = np.zeros((k, k))
            jac[0, -1] = -1.0 / scale**2
            jac[1:, :-1] = -np.eye(k - 1) / scale
            jac[1:, -1] = coef / scale**2
            eta_cov = jac @ cov @ jac.T
        out._set_eta(eta, eta_cov, None)
        return out


def _probit_fit(
    w: np.ndarray, y: np.ndarray, offset: np.ndarray, *, max_iter: int, tol: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Newton–Raphson with step halving for the probit log-likelihood Σ log Φ(q(offset + wη)), q = 2y − 1.

    Large problems start from the fit on an evenly spaced subsample of 20,000 rows (the same maximum is
    reached; it saves most full-data iterations). Returns η, the observed information J (k, k) and the per-row
    scores (n, k).
    """
    q = 2.0 * y - 1.0
    eta = np.zeros(w.shape[1])
    if w.shape[0] > 50_000:
        sub = np.linspace(0, w.shape[0] - 1, 20_000).astype(np.int64)
        try:
            eta = _probit_fit(w[sub], y[sub], offset[sub], max_iter=max_iter, tol=1e-6)[0]
        except ValueError:  # the subsample may be separated where the full data are not
            eta = np.zeros(w.shape[1])
    qz = q * (offset + w @ eta)
    log_cdf = log_ndtr(qz)
    ll = float(np.sum(log_cdf))
    converged = False
    for _ in range(max_iter):
        lam = np.exp(_log_pdf(qz) - log_cdf)
        grad = w.T @ (q * lam)
        info = (w * (lam * (qz + lam))[:, None]).T @ w
        try:
            step = np.linalg.solve(info, grad)
        except np.linalg.LinAlgError as exc:
            raise ValueError(
                "data: the response model is not identified (singular information matrix); the move "
                "threshold and the covariates are collinear among the agents below the logging threshold"
            ) from exc
        t = 1.0
        while True:
            cand = eta + t * step
            qz_new = q * (offset + w @ cand)
            log_cdf_new = log_ndtr(qz_new)
            ll_new = float(np.sum(log_cdf_new))
            if ll_new >= ll - 1e-12 * abs(ll) or t < 1e-8:
                break
            t /= 2.0
        eta, qz, log_cdf, ll = cand, qz_new, log_cdf_new, ll_new
        if np.max(np.abs(t * step)) < tol * (1.0 + np.max(np.abs(eta))):
            converged = True
            break
    if not converged or np.max(np.abs(eta)) > 1e6:
        raise ValueError(
            "data: the maximum-likelihood fit of the response model did not converge - the moves are "
            "(quasi-)perfectly separated by the move threshold and covariates, so (β₀, β, s) are not "
            "identified; more data or more variation in the distance to the threshold is needed"
        )
    lam = np.exp(_log_pdf(qz) - log_cdf)
    info = (w * (lam * (qz + lam))[:, None]).T @ w
    scores = w * (q * lam)[:, None]
    return eta, info, scores


class LogNormalCostResponse(_GaussianLogCost):
    """Log-normal cost sensitivity fitted from the logged move indicators (censored probit MLE).

    Under log γ | x₀ ~ N(β₀ + βᵀx₀, s²), an agent below the logging policy's threshold moves with probability
    Φ((c₀(x₀) − β₀ − βᵀx₀)/s), c₀ = log(2B/d₀²) — a probit on [c₀, 1, x₀] with coefficient 1/s on the known
    regressor c₀. Identification comes from the variation of c₀ (through the distance d₀) across agents.

    Parameters
    ----------
    benefit : float, default 1.0
        The benefit B of a favourable decision, in the units of the cost (γ/2)·d². Only B·γ⁻¹ is identified,
        so B fixes the scale of γ; it must be the same B the analyst assumes for the target policy.
    max_iter : int, default 100
        Newton iterations.
    tol : float, default 1e-10
        Relative step tolerance.

    Attributes
    ----------
    coef_ : ndarray, shape (d + 1,)
        (β₀, β).
    scale_ : float
        s.
    covariance_ : ndarray, shape (d + 2, d + 2)
        Covariance of (β₀, β, s) from the observed information (delta method).
    std_errors_ : ndarray, shape (d + 2,)
        Their standard errors.
    policy_ : ExplainingPolicy
        The logging policy the model was fitted under.
    n_fit_ : int
        Number of agents below the logging threshold (the probit sample).
    """

    def __init__(self, benefit: float = 1.0, *, max_iter: int = 100, tol: float = 1e-10) -> None:
        self.benefit = check_positive(benefit, "benefit")
        self.max_iter = check_integer(max_iter, "max_iter", minimum=1)
        self.tol = check_positive(tol, "tol")

    def _design(self, data: StrategicData, policy: ExplainingPolicy) -> tuple[np.ndarray, np.ndarray]:
        c, accepted = _check_disclosure(data, policy, self.benefit)
        return c, ~accepted

    def fit(self, data: Any, *, policy: ExplainingPolicy) -> LogNormalCostResponse:
        """Fit (β₀, β, s) by maximum likelihood on the agents below `policy`'s threshold.

        Parameters
        ----------
        data : StrategicData or mapping
            Logged data (only x_pre, x_post and moved are used).
        policy : ExplainingPolicy
            The logging policy the agents responded to.

        Raises
        ------
        ValueError
            When the design does not identify the parameters: no agent below the threshold, no movers, only
            movers, no variation of the move threshold independent of the covariates, perfect separation, or a
            non-positive coefficient on the move threshold (the data contradict the model).
        """
        data = as_strategic_data(data)
        _require_explaining(policy, "policy")
        c, below = self._design(data, policy)
        xb, cb, yb = data.x_pre[below], c[below], data.moved[below].astype(np.float64)
        if xb.shape[0] == 0:
            raise ValueError("data: no agent is below the logging threshold, so no move can be observed")
        if not np.any(yb):
            raise ValueError("data: no agent moved; the response model is not identified (all agents stayed)")
        if np.all(yb):
            raise ValueError(
                "data: every agent below the threshold moved, so the response model is not identified; the "
                f"move thresholds log(2B/d²) reach {float(np.max(cb)):.3g} with benefit={self.benefit:g}: "
                "a benefit far above the agents' costs makes every agent move (B must be on the scale of "
                "the cost (γ/2)·d²)"
            )
        w = np.column_stack([cb, np.ones_like(cb), xb])
        if np.ptp(cb) <= 1e-12 * (1.0 + np.max(np.abs(cb))) or np.linalg.matrix_rank(w) < w.shape[1]:
            raise ValueError(
                "data: the move threshold log(2B/d²) does not vary independently of the covariates among the "
                "agents below the threshold, so (β₀, β, s) are not identified"
            )
        eta, info, scores = _probit_fit(w, yb, np.zeros(cb.size), max_iter=self.max_iter, tol=self.tol)
        if eta[0] <= 0.0:
            raise ValueError(
                "data contradict the response model: the estimated coefficient of the move threshold is "
                f"{eta[0]:.3g} <= 0 (agents facing a cheaper move do not move more often)"
            )
        cov = np.linalg.inv(info)
        influence = np.zeros((data.n, eta.size))
        influence[below] = scores @ cov
        self._set_eta(eta, cov, influence)
        self.policy_ = policy
        self.n_fit_ = int(xb.shape[0])
        self._fit_data = data
        self._fit_x = data.x_pre
        return self

    def _profile(self, scale: float) -> _GaussianLogCost:
        if getattr(self, "_fit_x", None) is None:
            return super()._profile(scale)
        data = self._fit_data
        c, below = self._design(data, self.policy_)
        w = np.column_stack([np.ones(int(below.sum())), data.x_pre[below]])
        b, info, _ = _probit_fit(
            w, data.moved[below].astype(np.float64), c[below] / scale, max_iter=self.max_iter, tol=self.tol
        )
        k = b.size + 1
        cov = np.zeros((k, k))
        cov[1:, 1:] = np.linalg.inv(info)
        return self._with_eta(np.concatenate([[1.0 / scale], b]), cov)

    def _bootstrap(self, rows: np.ndarray | None, rng: np.random.Generator) -> _GaussianLogCost:
        if getattr(self, "_fit_x", None) is None:
            return self
        if rows is None:  # fitted on other data: resample those
            rows = rng.integers(0, self._fit_data.n, self._fit_data.n)
        clone = LogNormalCostResponse(self.benefit, max_iter=self.max_iter, tol=self.tol)
        return clone.fit(self._fit_data.subset(rows), policy=self.policy_)

    def calibration(self, data: Any = None, *, n_bins: int = 10) -> CalibrationTable:
        """Predicted vs observed move rates of the agents below the logging threshold, in bins.

        Parameters
        ----------
        data : StrategicData or mapping, optional
            Data logged under the same policy (default: the data the model was fitted on; pass held-out
            data for an honest check).
        n_bins : int, default 10
            Number of bins of equal count of the predicted move probability.

        Returns
        -------
        CalibrationTable
        """
        check_is_fitted(self, "policy_", method="fit")
        data = self._fit_data if data is None else as_strategic_data(data)
        n_bins = check_integer(n_bins, "n_bins", minimum=1)
        c, below = self._design(data, self.policy_)
        pred = ndtr(self._z(c[below], data.x_pre[below]))
        obs = data.moved[below].astype(np.float64)
        if pred.size < n_bins:
            raise ValueError(f"n_bins={n_bins} exceeds the {pred.size} agents below the logging threshold")
        order = np.argsort(pred, kind="stable")
        groups = np.array_split(order, n_bins)
        return CalibrationTable(
            lower=np.array([pred[g].min() for g in groups]),
            upper=np.array([pred[g].max() for g in groups]),
            predicted=np.array([pred[g].mean() for g in groups]),
            observed=np.array([obs[g].mean() for g in groups]),
            count=np.array([g.size for g in groups]),
        )


class ObservedCostResponse(_GaussianLogCost):
    """Log-normal cost sensitivity fitted from observed γ (OLS on log γ).

    The variant where agents best-respond continuously to a disclosed direction g (maximising gᵀΔ − (γ/2)‖Δ‖²
    gives x' = x₀ + g/γ), so that each agent's γ = ‖g‖/‖x' − x₀‖ is observed (`gamma_from_moves`).
    The fitted model plugs into the same estimators as `LogNormalCostResponse`.

    Parameters
    ----------
    benefit : float, default 1.0
        The benefit B used when the model predicts moves towards a disclosed explanation.

    Attributes
    ----------
    coef_, scale_, covariance_, std_errors_
        As for `LogNormalCostResponse` (OLS coefficients; s from the residual variance with n − d − 1 degrees
        of freedom; Var(ŝ) ≈ s²/(2(n − d − 1)) under normality).
    n_fit_ : int
    """

    def __init__(self, benefit: float = 1.0) -> None:
        self.benefit = check_positive(benefit, "benefit")

    @staticmethod
    def gamma_from_moves(x_pre: Any, x_post: Any, direction: Any) -> np.ndarray:
        """γᵢ = ‖g‖/‖x'ᵢ − x₀ᵢ‖ for moves x' = x₀ + g/γ along the disclosed direction `direction` (g)."""
        x_pre = check_array(x_pre, "x_pre", ndim=2)
        x_post = check_array(x_post, "x_post", ndim=2, shape=x_pre.shape)
        g = check_array(direction, "direction", ndim=(1, 2))
        if g.ndim == 1 and g.shape[0] != x_pre.shape[1]:
            raise ValueError(
                f"direction must have shape ({x_pre.shape[1]},) or {x_pre.shape} (one entry per column of "
                f"x_pre), got {g.shape}"
            )
        g = np.broadcast_to(g, x_pre.shape) if g.ndim == 1 else g
        if g.shape != x_pre.shape:
            raise ValueError(f"direction must have shape ({x_pre.shape[1]},) or {x_pre.shape}, got {g.shape}")
        step = x_post - x_pre
        gnorm = np.linalg.norm(g, axis=1)
        snorm = np.linalg.norm(step, axis=1)
        if np.any(gnorm == 0):
            raise ValueError("direction must not contain zero vectors")
        if np.any(snorm == 0):
            raise ValueError("x_post: every agent must have moved (x_post != x_pre) for γ to be observed")
        cos = np.sum(step * g, axis=1) / (gnorm * snorm)
        if np.any(cos < 1 - 1e-9):
            raise ValueError("x_post - x_pre must point along direction (x' = x₀ + g/γ with γ > 0)")
        return gnorm / snorm

    def fit(self, x_pre: Any, gamma: Any) -> ObservedCostResponse:
        """OLS of log γ on [1, x₀].

        Parameters
        ----------
        x_pre : array-like, shape (n, d)
        gamma : array-like, shape (n,)
            Observed cost sensitivities (> 0).
        """
        x_pre = check_array(x_pre, "x_pre", ndim=2)
        gamma = check_array(gamma, "gamma", ndim=1)
        n = check_same_length(("x_pre", x_pre), ("gamma", gamma))
        if np.any(gamma <= 0):
            raise ValueError("gamma must be > 0")
        k = x_pre.shape[1] + 1
        if n <= k + 1:
            raise ValueError(f"x_pre: need more than {k + 1} agents to fit {k} coefficients and a scale")
        design = np.column_stack([np.ones(n), x_pre])
        if np.linalg.matrix_rank(design) < k:
            raise ValueError("x_pre: the covariates are collinear (with the intercept); β is not identified")
        y = np.log(gamma)
        xtx_inv = np.linalg.inv(design.T @ design)
        beta = xtx_inv @ design.T @ y
        resid = y - design @ beta
        dof = n - k
        s2 = float(resid @ resid / dof)
        s = np.sqrt(s2)
        # Residuals at rounding level (relative to log γ's magnitude) are a scale of 0, not an estimate.
        resolution = np.sqrt(np.finfo(np.float64).eps) * max(1.0, float(np.max(np.abs(y))))
        if s <= resolution:
            raise ValueError(
                f"gamma: log γ is an exact linear function of x_pre (residual scale s = {s:.3g}, below the "
                f"rounding level {resolution:.3g} of log γ); the scale s is 0 to working precision and the "
                "response model is degenerate"
            )
        cov = np.zeros((k + 1, k + 1))
        cov[:k, :k] = s2 * xtx_inv
        cov[k, k] = s2 / (2.0 * dof)
        # Per-row influence of (β, s): (XᵀX)⁻¹xᵢeᵢ and (eᵢ² − s²)/(2 s n).
        infl_bs = np.column_stack([(design * resid[:, None]) @ xtx_inv, (resid**2 - s2) / (2.0 * s * n)])
        # Map to η = (1/s, −β/s).
        jac = np.zeros((k + 1, k + 1))
        jac[0, k] = -1.0 / s2
        jac[1:, :k] = -np.eye(k) / s
        jac[1:, k] = beta / s2
        eta = np.concatenate([[1.0 / s], -beta / s])
        self._set_eta(eta, jac @ cov @ jac.T, infl_bs @ jac.T)
        self.n_fit_ = n
        self._fit_x = x_pre
        self._fit_gamma = gamma
        return self

    def _bootstrap(self, rows: np.ndarray | None, rng: np.random.Generator) -> _GaussianLogCost:
        n = self._fit_x.shape[0]
        idx = rng.integers(0, n, n) if rows is None else rows
        return ObservedCostResponse(self.benefit).fit(self._fit_x[idx], self._fit_gamma[idx])


@dataclasses.dataclass(frozen=True)
class CalibrationTable(ResultMixin):
    """Predicted vs observed move rates in bins of the predicted move probability.

    Attributes
    ----------
    lower, upper : ndarray
        Range of predicted probabilities in each bin.
    predicted : ndarray
        Mean predicted move probability per bin.
    observed : ndarray
        Observed move rate per bin.
    count : ndarray of int
        Agents per bin.
    """

    lower: np.ndarray
    upper: np.ndarray
    predicted: np.ndarray
    observed: np.ndarray
    count: np.ndarray

    @property
    def std_error(self) -> np.ndarray:
        """Binomial standard error of each observed rate under the model, sqrt(p̄(1 − p̄)/count)."""
        return np.sqrt(self.predicted * (1 - self.predicted) / self.count)

    @property
    def max_z(self) -> float:
        """Largest |observed − predicted| / std_error over the bins (≈ N(0, 1) each under the model)."""
        se = self.std_error
        return float(np.max(np.abs(self.observed - self.predicted) / np.where(se > 0, se, np.inf)))

    def summary(self) -> str:
        rows = [
            [f"[{lo:.3f}, {hi:.3f}]", int(n), p, o, (o - p) / se if se > 0 else 0.0]
            for lo, hi, n, p, o, se in zip(
                self.lower, self.upper, self.count, self.predicted, self.observed, self.std_error
            )
        ]
        return format_table(
            ["predicted range", "agents", "predicted", "observed", "z"],
            rows,
            title="Response-model calibration (agents below the logging threshold)",
        )
