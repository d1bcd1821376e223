"""Exact (Clopper–Pearson) confidence bounds for a binomial proportion."""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import special

from certkit._results import ConfidenceInterval
from certkit._validation import check_array, check_integer
from certkit.stats._common import broadcast, interval, pad_down, pad_up, tail_probability

__all__ = ["clopper_pearson"]


def clopper_pearson(
    successes: Any,
    trials: Any,
    *,
    confidence_level: float = 0.95,
    alternative: str = "two-sided",
    n_tests: int = 1,
) -> ConfidenceInterval:
    """Exact Clopper–Pearson confidence interval for a binomial success probability.

    For ``k`` successes in ``n`` trials and α = 1 − ``confidence_level``:

        low  = BetaQuantile(α_low;      k,     n − k + 1)    (0 when k = 0)
        high = BetaQuantile(1 − α_high; k + 1, n − k)        (1 when k = n)

    Two-sided: α_low = α_high = α/2.  ``"greater"`` (a lower confidence bound; the alternative hypothesis
    is that the proportion is greater): α_low = α and ``high = 1``.  ``"less"`` (an upper confidence
    bound): α_high = α and ``low = 0``.  The interval covers the true proportion with probability at least
    ``confidence_level`` for every proportion and every ``trials`` (conservative, never liberal).

    Parameters
    ----------
    successes : int or array-like of int
        Numbers of successes, each in ``[0, trials]``.
    trials : int or array-like of int
        Numbers of trials (``>= 1``); broadcast against ``successes``.
    confidence_level : float, default 0.95
        Coverage of each interval (or of all of them jointly when ``n_tests > 1``), in (0, 1).
    alternative : {"two-sided", "greater", "less"}, default "two-sided"
        Which side(s) are bounded, with the naming of ``scipy.stats.binomtest``.
    n_tests : int, default 1
        Family-wise (Bonferroni) correction: each interval is computed at level
        ``1 - (1 - confidence_level) / n_tests``, so that ``n_tests`` intervals cover their
        proportions *simultaneously* with probability at least ``confidence_level`` (whatever the
        dependence between them).  Pass the number of components certified together, e.g. the
        ``N`` entries of a vote-count vector.

    Returns
    -------
    ConfidenceInterval
        `(low, high)`, each a numpy.ndarray or numpy.float64: bounds of the broadcast shape of
        ``successes`` and ``trials``, as float64.  When both inputs
        are scalars the bounds are ``numpy.float64`` scalars (a subclass of ``float``).

    Raises
    ------
    TypeError
        If ``successes``/``trials`` are not integers, or an option has the wrong type.
    ValueError
        If a count is out of range, the shapes do not broadcast, ``confidence_level`` is not in
        (0, 1), ``n_tests < 1`` or ``alternative`` is unknown.

    Notes
    -----
    Equals ``scipy.stats.binomtest(k, n, alternative=...).proportion_ci(confidence_level, method="exact")``
    (SciPy finds the same quantiles with a root finder, to about 1e-12); this function evaluates the Beta
    quantiles directly with ``scipy.special.betaincinv``, vectorised, and computes the upper bound as
    ``1 − BetaQuantile(α_high; n − k, k + 1)`` so that a very small α_high (large ``n_tests``) keeps full
    precision.  At ``k = n`` the one-sided lower bound is α^(1/n).  Computed bounds are padded outward by
    1e-13 relative (plus 8 machine epsilons) to cover the rounding of the Beta quantile; the exact edges
    0 (at ``k = 0``) and 1 (at ``k = n``) are not padded.

    Examples
    --------
    >>> low, high = clopper_pearson(990, 1000, confidence_level=0.95)
    >>> round(float(low), 4), round(float(high), 4)
    (0.9817, 0.9952)
    >>> low, _ = clopper_pearson(1000, 1000, confidence_level=0.999, alternative="greater")
    >>> round(float(low), 6)
    0.993116
    """
    k = check_array(successes, "successes", dtype=int)
    n = check_array(trials, "trials", dtype=int)
    n_tests = check_integer(n_tests, "n_tests", minimum=1)
    tail = tail_probability(confidence_level, alternative, n_tests=n_tests)
    if np.any(n < 1):
        raise ValueError(f"trials must be >= 1 everywhere, got {n[n < 1].flat[0]}")
    k, n = broadcast(("successes", k), ("trials", n))
    if np.any(k < 0) or np.any(k > n):
        raise ValueError("successes must lie in [0, trials] everywhere")

    kf = k.astype(np.float64)
    nf = n.astype(np.float64)
    if alternative == "less":
        low = np.zeros(k.shape)
    else:
        # betaincinv(0, ., .) is undefined: guard the shape parameter, then set k = 0 to 0.
        low = np.where(k > 0, pad_down(special.betaincinv(np.maximum(kf, 1.0), nf - kf + 1.0, tail)), 0.0)
    if alternative == "greater":
        high = np.ones(k.shape)
    else:
        complement = special.betaincinv(np.maximum(nf - kf, 1.0), kf + 1.0, tail)
        high = np.where(k < n, pad_up(1.0 - complement), 1.0)
    return interval(low, high)
