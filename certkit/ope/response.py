"""Response models: the distribution of the agents' cost sensitivity γ and how it is estimated.

An agent with covariates x₀ below a policy's threshold sees the disclosed explanation x_cf at distance d and
moves iff (γ/2)·d² ≤ B (benefit B), i.e. iff log γ ≤ c(x₀) := log(2B/d²). A response model is a conditional
distribution of log γ given x₀; the estimators need only its log-CDF and log-survival function at c (the small
`CostDistribution` protocol). The two models shipped here share log γ | x₀ ~ N(β₀ + βᵀx₀, s²):

- `LogNormalCostResponse`: fitted from the logged move indicators (a probit with the known regressor c);
- `ObservedCostResponse` (module `certkit.ope.observed_cost`): fitted from observed cost sensitivities γ (OLS
  on log γ).

Internally both hold the probit coefficients η = (1/s, −β₀/s, −β/s), so that
P(log γ ≤ c | x₀) = Φ(η·[c, 1, x₀]); the estimators differentiate through η to propagate the response model's
estimation error into their standard errors.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np
from scipy.special import log_ndtr, ndtr

from certkit._results import format_table
from certkit._validation import check_array, check_integer, check_is_fitted, check_nonnegative, check_positive
from certkit.ope._data import StrategicData, as_strategic_data
from certkit.ope._probit import _probit_fit
from certkit.ope.calibration import CalibrationTable
from certkit.ope.disclosure import X_POST_TOL, _check_disclosure, _require_explaining, move_threshold
from certkit.ope.policies import ExplainingPolicy

__all__ = [
    "CalibrationTable",
    "CostDistribution",
    "LogNormalCostResponse",
    "move_threshold",
]


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
        for name, default in (("max_iter", 100), ("tol", 1e-10), ("x_post_tol", X_POST_TOL)):
            if hasattr(self, name) and getattr(self, name) != default:
                params.append(f"{name}={getattr(self, name)!r}")
        return f"{type(self).__name__}({', '.join(params)})"

    def _dz(self, c: np.ndarray, x_pre: np.ndarray) -> np.ndarray:
        """∂z/∂η = [c, 1, x₀], shape (n, k)."""
        return np.column_stack([c, np.ones_like(c), x_pre])

    def _with_eta(self, eta: np.ndarray, eta_cov: np.ndarray | None = None) -> _GaussianLogCost:
        """A fixed-parameter copy with probit coefficients `eta`."""
        out = LogNormalCostResponse(benefit=self.benefit, x_post_tol=getattr(self, "x_post_tol", X_POST_TOL))
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
    x_post_tol : float, default 1e-6
        How closely every mover's x_post must equal the explanation the logging policy disclosed (relative and
        absolute tolerance, as `numpy.allclose`): data stored with 6 or more decimals pass; raise it for
        coarser data. The strategic estimators check the data with the response model's `x_post_tol`.

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

    def __init__(
        self, benefit: float = 1.0, *, max_iter: int = 100, tol: float = 1e-10, x_post_tol: float = X_POST_TOL
    ) -> None:
        self.benefit = check_positive(benefit, "benefit")
        self.max_iter = check_integer(max_iter, "max_iter", minimum=1)
        self.tol = check_positive(tol, "tol")
        self.x_post_tol = check_nonnegative(x_post_tol, "x_post_tol")

    def _design(self, data: StrategicData, policy: ExplainingPolicy) -> tuple[np.ndarray, np.ndarray]:
        c, accepted = _check_disclosure(data, policy, self.benefit, tol=self.x_post_tol)
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
        clone = LogNormalCostResponse(self.benefit, max_iter=self.max_iter, tol=self.tol,
                                      x_post_tol=self.x_post_tol)
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



def __getattr__(name: str) -> Any:  # PEP 562: ObservedCostResponse moved to its own module
    if name == "ObservedCostResponse":
        import warnings

        from certkit.ope.observed_cost import ObservedCostResponse

        warnings.warn(
            "certkit.ope.response.ObservedCostResponse moved to certkit.ope.observed_cost; import it from "
            "certkit.ope",
            DeprecationWarning,
            stacklevel=2,
        )
        return ObservedCostResponse
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
