"""Diagnostics of an estimate: overflow of the value or its standard error, heavy importance weights."""

from __future__ import annotations

import warnings

import numpy as np

from certkit.ope._data import StrategicData
from certkit.ope.result import _NAMES


def _check_finite(value: float, se: float, data: StrategicData, estimator: str) -> None:
    """Raise ValueError naming `reward` when the estimate or its standard error overflowed float64."""
    if np.isfinite(value) and np.isfinite(se):
        return
    raise ValueError(
        f"reward: the {_NAMES.get(estimator, estimator)} estimate overflowed float64 (value {value}, std. "
        f"error {se}; |reward| up to {float(np.max(np.abs(data.reward))):.3g}); rescale the rewards (e.g. "
        "divide them by their largest magnitude: the value scales with them)"
    )


def _weight_diagnostics(weight: np.ndarray) -> tuple[float, float]:
    """(max weight, Kish effective sample size (Σw)²/Σw²); ESS is 0 when every weight is 0."""
    total_sq = float(np.sum(weight**2))
    ess = float(np.sum(weight)) ** 2 / total_sq if total_sq > 0 else 0.0
    return float(np.max(weight)), ess


def _warn_weights(estimator: str, n: int, max_weight: float, ess: float, *, stacklevel: int) -> None:
    if ess >= n / 10 and max_weight <= np.sqrt(n):
        return
    warnings.warn(
        f"{_NAMES.get(estimator, estimator)}: heavy importance weights (max {max_weight:.3g} vs sqrt(n) = "
        f"{np.sqrt(n):.3g}; effective sample size {ess:.1f} of n = {n}): the target policy puts mass where "
        "the logging policy rarely acts, and the normal confidence interval can undercover. Use bootstrap=B "
        "(percentile interval), a target policy closer to the logging policy, or log under a softer "
        "(higher-temperature) logging policy.",
        UserWarning,
        stacklevel=stacklevel + 1,
    )
