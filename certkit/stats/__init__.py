"""Shared statistics: exact binomial bounds, smoothing certificates, the conformal quantile and
concentration inequalities.

Every function is vectorised over NumPy float64 arrays (inputs broadcast against each other; scalar
inputs give ``numpy.float64`` scalars), validates its arguments and takes its options by keyword.

| function | what it gives |
|---|---|
| ``clopper_pearson`` | exact binomial confidence bounds (optionally Bonferroni over a family) |
| ``smoothing_lower_bound`` | c[p, r]: certified probability after a perturbation |
| ``smoothing_upper_bound`` | the mirrored upper bound |
| ``smoothing_inverse_lower`` | smallest clean probability certified to stay above a target |
| ``smoothing_inverse_upper`` | largest clean probability certified to stay below a target |
| ``robust_level`` | RCP1's adjusted calibration level |
| ``conformal_quantile`` | finite-sample conformal quantile (and ``conformal_rank``) |
| ``hoeffding_bound`` | Hoeffding confidence bounds for a bounded mean |
| ``empirical_bernstein_bound`` | Maurer–Pontil empirical-Bernstein bounds for a bounded mean |
"""

from certkit.stats.binomial import clopper_pearson
from certkit.stats.concentration import empirical_bernstein_bound, hoeffding_bound
from certkit.stats.conformal import conformal_quantile, conformal_rank
from certkit.stats.smoothing import (
    robust_level,
    smoothing_inverse_lower,
    smoothing_inverse_upper,
    smoothing_lower_bound,
    smoothing_upper_bound,
)

__all__ = [
    "clopper_pearson",
    "conformal_quantile",
    "conformal_rank",
    "empirical_bernstein_bound",
    "hoeffding_bound",
    "robust_level",
    "smoothing_inverse_lower",
    "smoothing_inverse_upper",
    "smoothing_lower_bound",
    "smoothing_upper_bound",
]
