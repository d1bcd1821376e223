"""`CalibrationTable`: predicted vs observed move rates of a fitted response model."""

from __future__ import annotations

import dataclasses

import numpy as np

from certkit._results import ResultMixin, format_table

__all__ = ["CalibrationTable"]


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
