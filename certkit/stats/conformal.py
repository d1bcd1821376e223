"""The finite-sample conformal quantile."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from certkit._validation import check_array, check_integer, check_level

__all__ = ["conformal_quantile", "conformal_rank"]

# Relative slack for the ceiling of (n + 1) * level, in units of float64 epsilon (see conformal_rank).
_RANK_SLACK = 4.0 * np.finfo(np.float64).eps


def conformal_rank(n: int, confidence_level: float) -> int:
    """The rank ⌈(n + 1)·level⌉ of the conformal quantile among ``n`` scores.

    Parameters
    ----------
    n : int
        Number of calibration scores, ``>= 1``.
    confidence_level : float
        Target coverage in (0, 1).

    Returns
    -------
    int
        The 1-based rank; a value ``> n`` means the quantile is +∞.

    Notes
    -----
    Levels such as 0.9 or 0.07 are not representable in binary, so (n + 1)·level computed in float64 can
    land one rounding error *above* the integer the user meant (``100 * 0.07`` is ``7.000000000000001``, and
    the float nearest 0.9 times 10 exceeds 9 in exact arithmetic), which would make a naive ceiling jump to
    the next rank (or to +∞ for ``n = 9``, level 0.9).  The ceiling is therefore taken of x·(1 − 4ε) with ε
    the float64 machine epsilon: values within four relative rounding errors of an integer count as that
    integer.  With the rounding of the level itself and of the two operations, the computed value lies in
    (n + 1)·d·[1 − 5.5ε, 1 − 2.5ε] for the decimal d the user wrote, hence exactly:

    * for a level written with at most k decimals (0.9, 0.95, 0.975), the rank is the exact ⌈(n + 1)·d⌉
      whenever n + 1 < 0.8·10^(15 − k), so the coverage guarantee holds for the level as written (checked
      exhaustively for k ≤ 4, n ≤ 5000; passed as ``1 - alpha``, cancellation can move the float several
      ulps off the decimal: over the same range this raised the rank in a few cases, never lowered it);
    * for an arbitrary float level the rank can be one below the exact ceiling, when (n + 1)·level exceeds an
      integer by less than 5.5ε relative (e.g. ``conformal_rank(9, 0.9000000000000001)`` is 9, not 10): the
      guaranteed coverage rank/(n + 1) is then ≥ level·(1 − 5.5ε), a shortfall below 1.3e-15.

    Examples
    --------
    >>> conformal_rank(9, 0.9)
    9
    >>> conformal_rank(99, 0.07)
    7
    >>> conformal_rank(8, 0.9)
    9
    """
    n = check_integer(n, "n", minimum=1)
    level = check_level(confidence_level)
    x = (n + 1) * level
    return math.ceil(x - _RANK_SLACK * x)


def conformal_quantile(scores: Any, *, confidence_level: float) -> float:
    """Finite-sample conformal quantile of calibration scores.

    Returns q̂, the ⌈(n + 1)·level⌉-th smallest of the ``n`` scores (1-based), or +∞ when that rank exceeds
    ``n``.  If the calibration scores and a test score Sₙ₊₁ are exchangeable, P(Sₙ₊₁ ≤ q̂) ≥ level (and
    ≤ level + 1/(n + 1) when there are no ties).

    Parameters
    ----------
    scores : array-like, shape (n,)
        Finite calibration (non-conformity) scores; larger means less conforming.
    confidence_level : float
        Target coverage in (0, 1).

    Returns
    -------
    float
        The quantile (``inf`` when ``n < 1 / (1 - level) - 1``, i.e. too few scores).

    Raises
    ------
    TypeError, ValueError
        Non-numeric, non-finite, empty or non-1-D ``scores``; ``confidence_level`` outside (0, 1).

    See Also
    --------
    conformal_rank : the rank alone, with a note on floating-point rounding.

    Examples
    --------
    >>> conformal_quantile([0.3, 0.1, 0.2, 0.5, 0.4, 0.9, 0.8, 0.7, 0.6], confidence_level=0.9)
    0.9
    >>> conformal_quantile([0.3, 0.1, 0.2], confidence_level=0.9)
    inf
    """
    arr = check_array(scores, "scores", ndim=1)
    rank = conformal_rank(arr.shape[0], confidence_level)
    if rank > arr.shape[0]:
        return math.inf
    return float(np.partition(arr, rank - 1)[rank - 1])
