"""Sensitivity of the strategic estimates to the response model's scale s."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from scipy.stats import norm

from certkit._results import ResultMixin, format_table
from certkit._typing import RNGLike
from certkit._validation import check_array, check_in_options, check_integer, check_level, check_rng
from certkit.ope._checks import _check_work
from certkit.ope._engine import _estimate, _validate
from certkit.ope.outcome import fit_outcome
from certkit.ope.policies import ExplainingPolicy
from certkit.ope.response import _GaussianLogCost
from certkit.ope.result import _NAMES

__all__ = ["SensitivityResult", "sensitivity"]


@dataclasses.dataclass(frozen=True)
class SensitivityResult(ResultMixin):
    """Value estimates as the response model's scale s varies.

    Attributes
    ----------
    estimator : str
    scales : ndarray
        The values of s.
    values, std_errors : ndarray
        Estimate and standard error at each s.
    fitted_scale : float
        The response model's own estimate ŝ.
    """

    estimator: str
    scales: np.ndarray
    values: np.ndarray
    std_errors: np.ndarray
    fitted_scale: float

    def confidence_intervals(self, confidence_level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        """Normal intervals at each s: (lower, upper)."""
        half = float(norm.ppf(0.5 + check_level(confidence_level) / 2)) * self.std_errors
        return self.values - half, self.values + half

    def summary(self) -> str:
        lower, upper = self.confidence_intervals()
        rows = [
            [
                f"{s:.3f}" + (" (fit)" if np.isclose(s, self.fitted_scale) else ""),
                v,
                se,
                f"[{lo:.4f}, {hi:.4f}]",
            ]
            for s, v, se, lo, hi in zip(self.scales, self.values, self.std_errors, lower, upper)
        ]
        return format_table(
            ["scale s", "value", "std. error", "95% CI"],
            rows,
            title=f"Sensitivity of {_NAMES[self.estimator]} to the response scale s",
        )


def sensitivity(
    data: Any,
    *,
    target_policy: ExplainingPolicy,
    logging_policy: ExplainingPolicy,
    response: _GaussianLogCost,
    estimator: str = "dr",
    scale_range: tuple[float, float] = (0.5, 2.0),
    n_points: int = 9,
    outcome_model: Any = None,
    cross_fit: int | None = None,
    rng: RNGLike = None,
) -> SensitivityResult:
    """Re-estimate the value with the response scale s fixed on a grid around ŝ.

    At each s the other response parameters (β₀, β) are re-estimated by maximum likelihood with s held fixed
    when `response` was fitted on move data (`LogNormalCostResponse`), and kept otherwise (for
    `ObservedCostResponse` the OLS coefficients do not depend on s). The outcome model is fitted once.

    Parameters
    ----------
    data, target_policy, logging_policy, response, outcome_model, cross_fit, rng
        As for `strategic_dr`.
    estimator : {"dr", "ipw", "dm"}, default "dr"
    scale_range : (float, float), default (0.5, 2.0)
        Multiples of ŝ spanned (geometric grid).
    n_points : int, default 9
        Grid size (odd sizes with a symmetric range include ŝ).

    Returns
    -------
    SensitivityResult
    """
    estimator = check_in_options(estimator, "estimator", ("dr", "ipw", "dm"))
    if not isinstance(response, _GaussianLogCost):
        raise TypeError(
            "response must be a LogNormalCostResponse or ObservedCostResponse (a log-normal model with a "
            f"scale), got {type(response).__name__}"
        )
    prob = _validate(estimator, data, target_policy, logging_policy, response, outcome_model, cross_fit)
    lo, hi = check_array(scale_range, "scale_range", ndim=1, shape=(2,))
    if not 0 < lo < hi:
        raise ValueError(f"scale_range must satisfy 0 < low < high, got ({lo}, {hi})")
    n_points = check_integer(n_points, "n_points", minimum=2)
    _check_work(n_points, "n_points", prob.data.n, what="grid points")
    gen = check_rng(rng)
    q_hat = None
    if estimator != "ipw":
        data = prob.data
        folds = None if cross_fit is None else gen.permutation(np.arange(data.n) % prob.cross_fit)
        q_hat = fit_outcome(data.x_pre, data.action, data.reward, outcome_model, folds=folds)
    scales = response.scale_ * np.geomspace(lo, hi, n_points)
    values, ses = np.empty(n_points), np.empty(n_points)
    multiples = np.geomspace(lo, hi, n_points)
    for j, s in enumerate(scales):
        try:
            with np.errstate(all="ignore"):  # a failure is reported below, naming scale_range
                fixed = dataclasses.replace(prob, response=response._profile(float(s)))
                values[j], ses[j], _, _ = _estimate(fixed, gen, q_hat=q_hat)
        except ValueError as exc:
            raise ValueError(
                f"scale_range=({lo:g}, {hi:g}): at s = {multiples[j]:.3g} x the fitted scale the estimate "
                f"failed ({exc}); use a narrower scale_range (default (0.5, 2.0))"
            ) from exc
        if not (np.isfinite(values[j]) and np.isfinite(ses[j])):
            raise ValueError(
                f"scale_range=({lo:g}, {hi:g}): at s = {multiples[j]:.3g} x the fitted scale the estimate is "
                "not finite; use a narrower scale_range (default (0.5, 2.0))"
            )
    return SensitivityResult(estimator, scales, values, ses, response.scale_)
