"""The result object of the off-policy value estimators: `OPEResult` (value, standard errors, intervals)."""

from __future__ import annotations

import dataclasses

import numpy as np
from scipy.stats import norm

from certkit._results import ConfidenceInterval, ResultMixin, format_table
from certkit._validation import check_in_options, check_level

__all__ = ["OPEResult"]

_NAMES = {
    "dr": "strategic DR",
    "ipw": "strategic IPW",
    "dm": "direct method",
    "naive_dr": "naive DR",
    "naive_ipw": "naive IPW",
    "plain_dr": "plain DR",
}


@dataclasses.dataclass(frozen=True)
class OPEResult(ResultMixin):
    """A policy-value estimate.

    Attributes
    ----------
    estimator : str
        Which estimator produced it.
    value : float
        The estimated value V̂(π) (mean reward under the target policy and the agents' response to it).
    std_error : float
        Influence-function standard error (response-model estimation error included).
    n : int
        Logged rows used.
    response_std_error : float
        The part of `std_error` due to the response model alone (0 for known or absent response models).
    bootstrap_estimates : ndarray or None
        Estimates on the bootstrap replicates (response and outcome models refitted on each), if requested.
    bootstrap_failures : int
        Replicates left out because the response model could not be refitted on them (weak identification
        at small n: no movers, separation or a non-positive threshold coefficient in the resample). More than
        10% of failures raise an error instead.
    max_weight : float or None
        Largest importance weight p̂_π(aᵢ | ·)/π₀(aᵢ | x'ᵢ) (None for the direct method, which uses none).
    effective_sample_size : float or None
        Kish effective sample size (Σ wᵢ)²/Σ wᵢ² of the importance weights (None for the direct method).
        Below n/10, or a maximum weight above √n, the normal interval is unreliable and the estimator
        warns.
    """

    estimator: str
    value: float
    std_error: float
    n: int
    response_std_error: float = 0.0
    bootstrap_estimates: np.ndarray | None = None
    bootstrap_failures: int = 0
    max_weight: float | None = None
    effective_sample_size: float | None = None

    def confidence_interval(
        self, confidence_level: float = 0.95, *, method: str = "normal"
    ) -> ConfidenceInterval:
        """Two-sided interval for the value.

        Parameters
        ----------
        confidence_level : float, default 0.95
        method : {"normal", "percentile"}
            "normal": value ± z·std_error; "percentile": quantiles of the bootstrap estimates (needs
            `bootstrap=B` at estimation).
        """
        level = check_level(confidence_level)
        method = check_in_options(method, "method", ("normal", "percentile"))
        if method == "percentile":
            if self.bootstrap_estimates is None:
                raise ValueError(
                    "method='percentile' needs bootstrap estimates: pass bootstrap=B to the estimator"
                )
            lo, hi = np.quantile(self.bootstrap_estimates, [(1 - level) / 2, (1 + level) / 2])
            return ConfidenceInterval(float(lo), float(hi))
        half = float(norm.ppf(0.5 + level / 2)) * self.std_error
        return ConfidenceInterval(self.value - half, self.value + half)

    @property
    def bootstrap_std_error(self) -> float | None:
        """Standard deviation of the bootstrap estimates (None without bootstrap)."""
        if self.bootstrap_estimates is None:
            return None
        return float(np.std(self.bootstrap_estimates, ddof=1))

    def summary(self) -> str:
        ci = self.confidence_interval(0.95)
        rows = [
            ["value", self.value],
            ["std. error", self.std_error],
            ["  of which response model", self.response_std_error],
            ["95% CI (normal)", f"[{ci.low:.4f}, {ci.high:.4f}]"],
        ]
        if self.max_weight is not None:
            rows.append(["max. importance weight", self.max_weight])
            rows.append(["effective sample size (Kish)", self.effective_sample_size])
        if self.bootstrap_estimates is not None:
            b = self.confidence_interval(0.95, method="percentile")
            rows.append(
                [f"bootstrap std. error (B = {self.bootstrap_estimates.size})", self.bootstrap_std_error]
            )
            rows.append(["95% CI (percentile)", f"[{b.low:.4f}, {b.high:.4f}]"])
            if self.bootstrap_failures:
                rows.append(["replicates left out (response refit failed)", self.bootstrap_failures])
        return format_table(
            ["quantity", "value"], rows, title=f"{_NAMES.get(self.estimator, self.estimator)} (n = {self.n})"
        )
