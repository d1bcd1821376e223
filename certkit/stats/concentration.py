"""Distribution-free confidence bounds for the mean of bounded random variables.

Both bounds hold for i.i.d. samples X₁, …, Xₙ in [a, b] whatever their distribution.  Hoeffding's uses only
the range; the empirical-Bernstein bound of Maurer & Pontil (2009, Theorem 4) adapts to the sample variance
and is much tighter when the variance is small (e.g. Monte-Carlo estimates of a smoothed score that is
nearly constant under noise), at the price of an O(1/n) term.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from certkit._results import ConfidenceInterval
from certkit.stats._common import bounded_array, broadcast, interval, pad_down, pad_up, tail_probability

__all__ = ["empirical_bernstein_bound", "hoeffding_bound"]


def _check_range(value_range: Any) -> tuple[float, float]:
    try:
        low, high = value_range
    except (TypeError, ValueError):
        raise TypeError(f"value_range must be a pair (low, high), got {value_range!r}") from None
    arr = bounded_array([low, high], "value_range")
    if not arr[0] < arr[1]:
        raise ValueError(f"value_range must satisfy low < high, got ({arr[0]}, {arr[1]})")
    return float(arr[0]), float(arr[1])


def _interval(
    mean: np.ndarray, width: np.ndarray, low: float, high: float, alternative: str
) -> ConfidenceInterval:
    scale = high - low
    if alternative == "less":
        lower = np.full(mean.shape, low)
    else:
        lower = pad_down(mean - width, floor=low, scale=scale)
    if alternative == "greater":
        upper = np.full(mean.shape, high)
    else:
        upper = pad_up(mean + width, ceil=high, scale=scale)
    return interval(lower, upper)


def _check_variance(mean: np.ndarray, var: np.ndarray, n: np.ndarray, low: float, high: float) -> None:
    """Bhatia–Davis: n values in [low, high] with mean m have unbiased variance <= (m-low)(high-m) n/(n-1)."""
    largest = (mean - low) * (high - mean) * n / (n - 1.0)
    # Slack for the rounding of a variance computed from the samples (relative 1e-9 and 1e-12 of the range).
    bad = var > largest * (1.0 + 1e-9) + 1e-12 * (high - low) ** 2
    if np.any(bad):
        i = np.flatnonzero(bad.ravel())[0]
        raise ValueError(
            f"variance {var.flat[i]:.6g} is larger than any sample of {n.flat[i]} values in value_range "
            f"({low}, {high}) with mean {mean.flat[i]:.6g} can have (at most (mean - low)(high - mean) "
            f"n/(n - 1) = {largest.flat[i]:.6g}); pass the unbiased sample variance of the same samples"
        )


def hoeffding_bound(
    mean: Any,
    n: Any,
    *,
    confidence_level: float = 0.95,
    value_range: tuple[float, float] = (0.0, 1.0),
    alternative: str = "two-sided",
) -> ConfidenceInterval:
    """Hoeffding confidence interval for the mean of i.i.d. variables in ``value_range``.

    With X̄ the sample mean of n samples in [a, b] and tail probability δ per bounded side:

        μ ≥ X̄ − (b − a) √(ln(1/δ) / (2n))    and/or    μ ≤ X̄ + (b − a) √(ln(1/δ) / (2n)),

    each with probability at least 1 − δ; δ = 1 − level for a one-sided bound and (1 − level)/2 per side
    for a two-sided interval.  Bounds are clipped to [a, b] (which contains the mean anyway) and padded
    outward by 1e-13 relative to cover rounding.

    Parameters
    ----------
    mean : float or array-like
        Sample mean(s), each in ``value_range``.
    n : int or array-like of int
        Sample size(s), ``>= 1``; broadcast against ``mean``.
    confidence_level : float, default 0.95
        Coverage in (0, 1).
    value_range : (float, float), default (0, 1)
        Almost-sure range [a, b] of each sample.
    alternative : {"two-sided", "greater", "less"}, default "two-sided"
        ``"greater"``: a lower confidence bound (``high`` is ``b``); ``"less"``: an upper confidence
        bound (``low`` is ``a``) - the naming of ``clopper_pearson``.

    Returns
    -------
    ConfidenceInterval
        `(low, high)`, each a numpy.ndarray or numpy.float64: the bounds, broadcast over ``mean`` and
        ``n`` (scalars for scalar inputs).

    Raises
    ------
    TypeError, ValueError
        NaN/inf, ``mean`` outside ``value_range``, ``n < 1`` or not an integer, an invalid
        ``value_range``, ``confidence_level`` outside (0, 1) or unknown ``alternative``.

    Examples
    --------
    >>> low, high = hoeffding_bound(0.5, 100, confidence_level=0.95, alternative="greater")
    >>> round(float(low), 6), float(high)
    (0.377613, 1.0)
    """
    a, b = _check_range(value_range)
    m = bounded_array(mean, "mean", low=a, high=b)
    size = bounded_array(n, "n", low=1, dtype=int)
    tail = tail_probability(confidence_level, alternative)
    m, size = broadcast(("mean", m), ("n", size))
    width = (b - a) * np.sqrt(np.log(1.0 / tail) / (2.0 * size))
    return _interval(m, width, a, b, alternative)


def empirical_bernstein_bound(
    mean: Any,
    variance: Any,
    n: Any,
    *,
    confidence_level: float = 0.95,
    value_range: tuple[float, float] = (0.0, 1.0),
    alternative: str = "two-sided",
) -> ConfidenceInterval:
    """Empirical-Bernstein confidence interval (Maurer & Pontil 2009, Theorem 4).

    For n ≥ 2 i.i.d. samples in [a, b] with sample mean X̄ and unbiased sample variance Vₙ (``ddof=1``),
    with probability at least 1 − δ:

        μ ≤ X̄ + √(2 Vₙ ln(2/δ) / n) + 7 (b − a) ln(2/δ) / (3 (n − 1)),

    and symmetrically for the lower bound.  δ = 1 − level for a one-sided bound and (1 − level)/2 per side
    for a two-sided interval.  Bounds are clipped to [a, b] and padded outward by 1e-13 relative to cover
    rounding.

    Parameters
    ----------
    mean : float or array-like
        Sample mean(s), each in ``value_range``.
    variance : float or array-like
        Unbiased sample variance(s) (``numpy.var(x, ddof=1)``), ``>= 0`` and at most the Bhatia–Davis
        limit ``(mean - a)(b - mean) n/(n - 1)``, the largest variance of ``n`` values in [a, b] with
        that mean.
    n : int or array-like of int
        Sample size(s), ``>= 2``.  ``mean``, ``variance`` and ``n`` are broadcast together.
    confidence_level : float, default 0.95
        Coverage in (0, 1).
    value_range : (float, float), default (0, 1)
        Almost-sure range [a, b] of each sample.
    alternative : {"two-sided", "greater", "less"}, default "two-sided"
        ``"greater"``: a lower confidence bound (``high`` is ``b``); ``"less"``: an upper confidence
        bound (``low`` is ``a``).

    Returns
    -------
    ConfidenceInterval
        `(low, high)`, each a numpy.ndarray or numpy.float64: the bounds, broadcast over the inputs
        (scalars for scalar inputs).

    Raises
    ------
    TypeError, ValueError
        NaN/inf, ``mean`` outside ``value_range``, ``variance < 0`` or above the Bhatia–Davis limit,
        ``n < 2`` or not an integer, an invalid ``value_range``, ``confidence_level`` outside (0, 1)
        or unknown ``alternative``.

    Notes
    -----
    Prefer it to ``hoeffding_bound`` when the variance is well below (b − a)²/4; for Vₙ near that maximum
    the 7/(3(n − 1)) term makes it looser than Hoeffding.

    Examples
    --------
    >>> low, _ = empirical_bernstein_bound(0.95, 0.0475, 1000, alternative="greater")
    >>> round(float(low), 4)
    0.9227
    """
    a, b = _check_range(value_range)
    m = bounded_array(mean, "mean", low=a, high=b)
    var = bounded_array(variance, "variance", low=0.0)
    size = bounded_array(n, "n", low=2, dtype=int)
    tail = tail_probability(confidence_level, alternative)
    m, var, size = broadcast(("mean", m), ("variance", var), ("n", size))
    _check_variance(m, var, size, a, b)
    log_term = np.log(2.0 / tail)
    width = np.sqrt(2.0 * var * log_term / size) + 7.0 * (b - a) * log_term / (3.0 * (size - 1))
    return _interval(m, width, a, b, alternative)
