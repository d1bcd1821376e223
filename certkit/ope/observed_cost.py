"""`ObservedCostResponse`: the log-normal response model fitted from observed cost sensitivities γ (OLS on
log γ), for agents who best-respond continuously to a disclosed direction."""

from __future__ import annotations

from typing import Any

import numpy as np

from certkit._validation import check_array, check_positive, check_same_length
from certkit.ope.response import _GaussianLogCost

__all__ = ["ObservedCostResponse"]


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
