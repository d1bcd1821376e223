"""`max_affected_share`: the largest share of performatively affected units for which a bound stays below a
target."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from certkit._validation import (
    _check_real_scalar,
    check_in_options,
    check_integer,
)
from certkit.performative.bounds import KINDS, generalization_bound
from certkit.performative.retraining import retraining_bound

__all__ = ["max_affected_share"]


_BRUTE_FORCE_BELOW = 200  # > q^2 for every confidence level below 1 - 1e-40


def max_affected_share(target: float, *, kind: str, **kwargs: Any) -> float:
    r"""Largest share $m/n$ of affected units for which a bound stays at or below ``target``.

    Parameters
    ----------
    target : float
        The largest acceptable bound.
    kind : {"thm3.13", "thm3.15", "rademacher", "retraining"}
        Which bound (``"retraining"`` is `retraining_bound`, the others `generalization_bound`).
    **kwargs
        The bound's other arguments, without ``share``; ``n`` (or, for ``"rademacher"``, the length of ``y``)
        fixes the grid of shares $m/n$.

    Returns
    -------
    float
        $m/n$ for the largest integer $m \le n$ with bound $\le$ target. The Rademacher and retraining bounds
        increase with the share; the Thm 3.13/3.15 bounds first fall (the complexity term shrinks as the
        radius grows) and then rise; for $n$ above $q^2$ (here: $n \ge 200$) the radius $R$ increases with the
        share, their feasible shares form an interval and its right end is found by ternary search and
        bisection; smaller $n$ are checked share by share.

    Raises
    ------
    ValueError
        When no share keeps the bound below ``target`` (the message gives the smallest achievable bound).
    """
    target = _check_real_scalar(target, "target")
    kind = check_in_options(kind, "kind", (*KINDS, "retraining"))
    if "share" in kwargs:
        raise TypeError("max_affected_share varies share itself; do not pass it")
    fixed_radii = sorted({"radius_population", "radius_sample"} & kwargs.keys())
    if fixed_radii:
        raise TypeError(
            f"max_affected_share derives the radii from the share; do not pass {', '.join(fixed_radii)} "
            "(give diameter instead)"
        )
    if kind == "rademacher":
        if "y" not in kwargs or kwargs["y"] is None:
            raise TypeError("max_affected_share(kind='rademacher') needs y")
        n = len(kwargs["y"])
    else:
        if "n" not in kwargs:
            raise TypeError(f"max_affected_share(kind={kind!r}) needs n")
        n = check_integer(kwargs["n"], "n", minimum=1)

    def total(m: int) -> float:
        if kind == "retraining":
            return retraining_bound(share=m / n, **kwargs).total
        try:
            return generalization_bound(kind=kind, share=m / n, **kwargs).total
        except ValueError as exc:
            if getattr(exc, "zero_radius", False):  # share 0: the complexity term is infinite, never the best
                return math.inf
            raise

    if kind in ("thm3.13", "thm3.15") and n < _BRUTE_FORCE_BELOW:
        # R(r) is increasing (so the bound unimodal in r) only when n exceeds q^2; small n: check every m
        feasible = [m for m in range(n + 1) if total(m) <= target]
        if feasible:
            return max(feasible) / n
        lo = min(range(n + 1), key=total)
    else:
        lo = _argmin_unimodal(total, n) if kind in ("thm3.13", "thm3.15") else 0
    best = total(lo)
    if best > target:
        raise ValueError(
            f"no share of affected units keeps the {kind} bound below target={target:g}; the smallest "
            f"bound is {best:.6g} at share {lo / n:.6g}"
        )
    hi = n
    if total(hi) <= target:
        return 1.0
    while hi - lo > 1:  # total(lo) <= target < total(hi), total increasing on [lo, hi]
        mid = (lo + hi) // 2
        if total(mid) <= target:
            lo = mid
        else:
            hi = mid
    return lo / n


def _argmin_unimodal(f: Callable[[int], float], n: int) -> int:
    """Integer minimiser of a unimodal function on {0, ..., n} (ternary search)."""
    lo, hi = 0, n
    while hi - lo > 2:
        a = lo + (hi - lo) // 3
        b = hi - (hi - lo) // 3
        if f(a) <= f(b):
            hi = b
        else:
            lo = a
    return min(range(lo, hi + 1), key=f)
