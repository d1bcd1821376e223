r"""Certified radii of the subsampling certificate: how far can a vote probability move under edits?

Setting.  A concept dataset $S$ of $n$ examples, a deterministic discovery algorithm $D$ mapping a
dataset to an inclusion mask over $N$ components, and a random subsample $T$ of $S$ drawn by one of three
schemes:

- `"without_replacement"`: a uniform $m$-subset of the $n$ examples;
- `"with_replacement"`: $m$ independent uniform draws (bagging, Jia et al., AAAI 2021);
- `"poisson"`: every example kept independently with probability $1 - p_{del}$ (randomized deletion,
  RS-Del, Huang et al., NeurIPS 2023).

The vote probability of component $j$ is $p_j(S) = P[j \in D(T)]$; the smoothed circuit includes $j$
iff $p_j > 1/2$.

Coupling.  For an edited dataset $S'$ (size $n'$) let $C = S \cap S'$ (a multiset, $n_c = |C|$).
Conditioned on $T \subseteq C$ the subsample has the same law under $S$ and $S'$, so with
$P_S = P_S[T \subseteq C]$, $P_{S'} = P_{S'}[T \subseteq C]$ and $q = P[j \in D(T) \mid T \subseteq C]$:

$$
\frac{p_j(S) - (1 - P_S)}{P_S} \le q \le \frac{p_j(S)}{P_S},\qquad
P_{S'}\,q \le p_j(S') \le P_{S'}\,q + 1 - P_{S'}.
$$

With $d$ deletions, $i$ insertions and $s$ substitutions, $n_c = n - d - s$ and $n' = n - d + i$;
$P_S = \binom{n_c}{m}/\binom{n}{m}$ (without replacement), $(n_c/n)^m$ (with replacement) or
$p_{del}^{\,n - n_c}$ (Poisson), and likewise for $S'$.  Both bounds move monotonically with every single
edit, and a substitution has the $(n_c, n')$ of one deletion *plus* one insertion; hence, among all splits
with $i + d + s \le r$, the worst case is $r$ substitutions, and the edit-distance radius equals the
substitution radius (the tests check this against an explicit enumeration of every split).  Solving the
three pure cases, with $f(r)$ the probability that the subsample avoids $r$ given examples ($f_{del}$) or
that a subsample of the enlarged set avoids $r$ inserted ones ($f_{ins}$), a lower bound $\mu$ on $p_j(S)$
certifies inclusion at radius $r$ iff

- edits / substitutions: $\mu - (1 - f_{del}(r)) > 1/2$;
- insertions: $\mu \, f_{ins}(r) > 1/2$;
- deletions: $1 - (1 - \mu)/f_{del}(r) > 1/2$.

Exclusion is the mirror image with $\mu = 1 - \bar p_j$ (an upper bound $\bar p_j$).  For Poisson
deletion $f_{del}(r) = f_{ins}(r) = p_{del}^{\,r}$, which gives the closed forms of the spec.  All
inequalities are strict, and the comparison is padded by a relative $10^{-10}$ so that floating-point
rounding can only shrink a radius.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from certkit._validation import check_allocation, check_array, check_bool, check_in_options, check_integer
from certkit.circuits.dpa import partition_radius  # importable from here as before
from certkit.circuits.sampling import Sampling

__all__ = ["certified_radius", "edit_bounds", "partition_radius"]

THREATS = ("edit", "substitution", "insertion", "deletion")

# Relative outward padding of every certified comparison (rounding can only shrink a radius).
_PAD = 1e-10


def _sampling(n: Any, m: Any, replacement: Any, deletion_prob: Any) -> Sampling:
    """Validate the sampling arguments of `certified_radius` and `edit_bounds`."""
    replacement = check_bool(replacement, "replacement")
    if deletion_prob is not None:
        if m is not None:
            raise ValueError(
                "pass either m (subsample size, uniform subsampling) or deletion_prob "
                "(Poisson deletion), not both"
            )
        if replacement:
            raise ValueError("replacement=True has no meaning for Poisson deletion (deletion_prob is set)")
        return Sampling.poisson(n, deletion_prob)
    if m is None:
        raise ValueError("m (subsample size) is required unless deletion_prob is given (Poisson deletion)")
    return Sampling.uniform(n, m, replacement=replacement)


def _log_avoid_deleted(sampling: Sampling) -> np.ndarray:
    """log f_del(r), r = 0..n: log P_S[T avoids r given examples of S] (-inf where it is 0)."""
    scheme, n, m = sampling.scheme, sampling.n, sampling.m
    assert m is not None  # the uniform schemes have a subsample size (Poisson: `_count_above_poisson`)
    r = np.arange(n + 1, dtype=np.float64)
    out = np.full(n + 1, -np.inf)
    if scheme == "with_replacement":
        out[:n] = m * np.log1p(-r[:n] / n)
        return out
    # C(n - r, m) / C(n, m) = prod_{t < r} (n - t - m) / (n - t), zero once n - r < m.
    t = np.arange(n - m, dtype=np.float64)
    out[0] = 0.0
    out[1 : n - m + 1] = np.cumsum(np.log1p(-m / (n - t)))
    return out


def _log_avoid_inserted(sampling: Sampling) -> np.ndarray:
    """log f_ins(r), r = 0..R: log P_S'[T avoids r inserted examples], with f_ins(R) <= 1/2."""
    scheme, n, m = sampling.scheme, sampling.n, sampling.m
    assert m is not None
    # Both subsampling schemes have f_ins(r) <= (n / (n + r))^m, which is <= 1/2 from r = n (2^(1/m) - 1).
    big_r = math.ceil(n * math.expm1(math.log(2.0) / m)) + 1
    r = np.arange(big_r + 1, dtype=np.float64)
    if scheme == "with_replacement":
        return -m * np.log1p(r / n)
    # C(n, m) / C(n + r, m) = prod_{t = 1..r} (n + t - m) / (n + t).
    out = np.zeros(big_r + 1)
    out[1:] = np.cumsum(np.log1p(-m / (n + r[1:])))
    return out


def _poisson_length(sampling: Sampling, threat: str) -> int:
    """Length of the Poisson table ``r log(deletion_prob)``, r = 0, 1, ..., that `_count_above` reads.

    Deletion: r <= n.  Insertion: up to the first r with f_ins(r) <= 1/2 (no larger r can certify).
    """
    assert sampling.deletion_prob is not None
    if threat == "insertion":
        return math.ceil(math.log(0.5) / math.log(sampling.deletion_prob)) + 2
    if sampling.n > 2**53:
        raise ValueError(
            f"n={sampling.n} is too large: Poisson-deletion radii are exact up to n = 2**53 examples"
        )
    return sampling.n + 1


def _count_above_poisson(log_p: float, length: int, threshold: np.ndarray) -> np.ndarray:
    """`_count_above` of the table ``r * log_p`` (r = 0 .. length - 1) without building it.

    The table decreases linearly, so the count is about ``log(threshold) / log_p``; the guess is then
    moved until it agrees with the table's own comparison of ``r * log_p`` (the same float64 products),
    so the result equals the table lookup exactly at any ``deletion_prob`` and ``n``.
    """
    padded = threshold * (1.0 + _PAD)
    with np.errstate(divide="ignore"):
        log_thr = np.where(padded > 0, np.log(np.maximum(padded, np.finfo(float).tiny)), -np.inf)
    with np.errstate(invalid="ignore"):
        guess = np.where(log_thr == -np.inf, float(length), np.ceil(np.maximum(log_thr / log_p, 0.0)))
    count = np.minimum(guess, float(length))
    for _ in range(2):  # rounding of the quotient: at most one step either way
        count = count - ((count >= 1) & ((count - 1) * log_p <= log_thr))
        count = count + ((count < length) & (count * log_p > log_thr))
    return count.astype(np.int64)


def _check_table_memory(sampling: Sampling, threat: str) -> None:
    """Refuse, before building them, radius tables that cannot fit (a few float64 arrays of their length)."""
    if threat == "insertion":
        assert sampling.m is not None
        length = sampling.n * math.expm1(math.log(2.0) / sampling.m) + 2
        check_allocation(24.0 * length, "n", sampling.n, what="the insertion radius table")
    else:
        check_allocation(24.0 * (sampling.n + 1), "n", sampling.n,
                         what="the deletion radius table (n + 1 entries)")


def _count_above(log_table: np.ndarray, threshold: np.ndarray) -> np.ndarray:
    """Number of r with table(r) > threshold * (1 + _PAD) for a non-increasing table (vectorised)."""
    padded = threshold * (1.0 + _PAD)
    with np.errstate(divide="ignore"):
        log_thr = np.where(padded > 0, np.log(np.maximum(padded, np.finfo(float).tiny)), -np.inf)
    return np.searchsorted(-log_table, -log_thr, side="left").astype(np.int64)


def _radius_from_mu(
    mu: np.ndarray, rest: np.ndarray, threat: str, count_above: Callable[[np.ndarray], np.ndarray]
) -> np.ndarray:
    """Largest r certified for a decision whose probability is at least mu (-1 if not even r = 0).

    ``rest`` is ``1 - mu`` computed exactly by the caller (``1 - mu`` rounds to 0 for mu within 1e-16
    of 1, which would certify every r against deletions).  ``count_above(thr)`` counts the r whose
    avoidance probability (f_ins for insertions, f_del otherwise) exceeds ``thr``.
    """
    if threat in ("edit", "substitution"):
        count = count_above(0.5 + rest)
    elif threat == "deletion":
        count = count_above(2.0 * rest)
    else:  # insertion
        with np.errstate(divide="ignore"):
            thr = np.where(mu > 0, 0.5 / np.maximum(mu, np.finfo(float).tiny), np.inf)
        count = count_above(thr)
    return count - 1


def _check_probabilities(lower: Any, upper: Any) -> tuple[np.ndarray, np.ndarray]:
    lower = check_array(lower, "lower", allow_empty=True)
    upper = check_array(upper, "upper", allow_empty=True)
    for name, arr in (("lower", lower), ("upper", upper)):
        if np.any((arr < 0) | (arr > 1)):
            raise ValueError(f"{name} must lie in [0, 1] everywhere")
    try:
        lower, upper = np.broadcast_arrays(lower, upper)
    except ValueError:
        raise ValueError(
            f"lower (shape {lower.shape}) and upper (shape {upper.shape}) do not broadcast"
        ) from None
    if np.any(lower > upper):
        raise ValueError("lower must be <= upper everywhere")
    return lower, upper


def certified_radius(
    lower: Any,
    upper: Any,
    n: int,
    m: int | None = None,
    replacement: bool = False,
    *,
    deletion_prob: float | None = None,
    threat: str = "edit",
) -> np.ndarray:
    r"""Largest certified radius of each component's smoothed inclusion decision.

    Given bounds $\underline p_j \le p_j(S) \le \bar p_j$ on the probability that component
    $j$ is included by the discovery algorithm run on a random subsample of the concept
    dataset $S$ (size ``n``), returns the largest $r$ such that the smoothed decision
    (include iff $p_j > 1/2$) provably stays the same for every dataset $S'$ within
    ``threat`` distance $r$ of $S$ (see the module docstring for the bound).

    Parameters
    ----------
    lower, upper : array-like of float
        Lower and upper bounds on $p_j(S)$ (broadcast together), e.g. Clopper–Pearson bounds
        at a family-wise level, or the exact probabilities (``lower = upper``).
    n : int
        Size of the concept dataset $S$.
    m : int, optional
        Subsample size for uniform subsampling (required unless ``deletion_prob`` is given).
    replacement : bool, default False
        Draw the ``m`` examples with replacement (bagging) instead of without.
    deletion_prob : float in (0, 1), optional
        Poisson deletion: every example is deleted independently with this probability (kept with
        ``1 - deletion_prob``); ``m`` must then be None.
    threat : {"edit", "substitution", "insertion", "deletion"}, default "edit"
        ``"edit"``: any mix of insertions, deletions and substitutions with total $\le r$
        (each counting once; its worst case is $r$ substitutions, so ``"substitution"`` gives
        the same radius); ``"insertion"`` / ``"deletion"``: only that operation.

    Returns
    -------
    numpy.ndarray of int64
        Shape of the broadcast bounds.  ``r >= 0``: the decision (included when
        ``lower > 1/2``, excluded when ``upper < 1/2``) is certified for every edit of size
        ``<= r``; ``-1``: abstain, the bounds do not even decide the smoothed vote on $S$.
        Deletion radii are capped at ``n`` (no more examples to delete).

    Examples
    --------
    >>> [int(certified_radius(0.99, 1.0, 1000, deletion_prob=0.9, threat=t)) for t in
    ...  ("edit", "insertion", "deletion")]
    [6, 6, 37]
    >>> int(certified_radius(0.9, 0.9, 60000, 30, replacement=True))  # Jia et al.'s MNIST example
    1013
    """
    sampling = _sampling(n, m, replacement, deletion_prob)
    check_in_options(threat, "threat", THREATS)
    lower, upper = _check_probabilities(lower, upper)
    return radius_from_bounds(lower, upper, sampling, threat)


def radius_from_bounds(lower: np.ndarray, upper: np.ndarray, sampling: Sampling, threat: str) -> np.ndarray:
    """`certified_radius` on validated bounds (arrays in [0, 1], `lower <= upper`) and a `Sampling`."""
    if sampling.scheme == "poisson":
        assert sampling.deletion_prob is not None
        log_p, length = math.log(sampling.deletion_prob), _poisson_length(sampling, threat)
        count_above = functools.partial(_count_above_poisson, log_p, length)
    else:
        _check_table_memory(sampling, threat)
        table = _log_avoid_inserted(sampling) if threat == "insertion" else _log_avoid_deleted(sampling)
        count_above = functools.partial(_count_above, table)
    # 1 - lower is exact where it matters (lower >= 1/2, Sterbenz); 1 - (1 - upper) is not, so pass upper
    r_in = _radius_from_mu(lower, 1.0 - lower, threat, count_above)
    r_out = _radius_from_mu(1.0 - upper, upper, threat, count_above)
    return np.maximum(r_in, r_out)


def _log_p_common(sampling: Sampling, size: int, n_c: int) -> float:
    """log P[T subset of C] for a dataset of ``size`` examples of which ``n_c`` are in C (-inf if 0).

    A product of ratios of integers summed in log space with ``math.fsum`` (differences of log-gammas
    lose ~1e-7 relative at n = 1e7).  Of the two product forms the shorter one is used, so the cost is
    ``min(k, m)`` terms however many examples are edited.  Every ratio is correctly rounded from its
    integers (each rounded once above 2**53), so the absolute error of the log is at most
    ``(2 min(k, m) + |log P|)`` machine epsilons (about ``4 |log P|`` for the one-factor forms with
    replacement and for Poisson deletion, whose single rounding is multiplied along with the log).
    """
    k = size - n_c  # examples of the dataset outside C
    scheme, m = sampling.scheme, sampling.m
    if scheme == "poisson":
        return k * math.log(sampling.deletion_prob)
    assert m is not None
    if scheme == "with_replacement":  # (n_c / size)^m, from the more accurate side of 1/2
        if n_c == 0:
            return -math.inf
        return m * (math.log1p(-k / size) if 2 * k <= size else math.log(n_c / size))
    if n_c < m:
        return -math.inf
    # C(n_c, m) / C(size, m) = prod_{t < k} (size - m - t) / (size - t) = prod_{t < m} (n_c - t) / (size - t)
    t = np.arange(min(k, m), dtype=np.float64)
    numerator = size - m - t if k <= m else n_c - t
    return math.fsum(np.log(numerator / (size - t)))


def edit_bounds(
    lower: Any,
    upper: Any,
    n: int,
    m: int | None = None,
    replacement: bool = False,
    *,
    deletion_prob: float | None = None,
    n_insert: int = 0,
    n_delete: int = 0,
    n_substitute: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    r"""Bounds on $p_j(S')$ after a given number of insertions, deletions and substitutions.

    The coupling bound of the module docstring, for one explicit split of the edit budget.

    Parameters
    ----------
    lower, upper : array-like of float
        Bounds on $p_j(S)$.
    n, m, replacement, deletion_prob
        The sampling scheme, as in `certified_radius`.
    n_insert, n_delete, n_substitute : int, default 0
        The edit: $n_c = n - n_{del} - n_{sub}$ examples are shared and
        $n' = n - n_{del} + n_{ins}$.

    Returns
    -------
    lower, upper : numpy.ndarray
        $P_{S'} \max(0, (\underline p - 1 + P_S)/P_S)$ and
        $P_{S'} \min(1, \bar p/P_S) + 1 - P_{S'}$ (the trivial ``0`` and ``1`` when
        $P_S = 0$), padded outward by the propagated floating-point error (about
        $4(|\log P_S| + |\log P_{S'}| + 2t)$ machine epsilons, with $t$ the number of factors of the
        two products without replacement, at most $2m$), so that rounding never moves a bound past
        the exact one.
    """
    sampling = _sampling(n, m, replacement, deletion_prob)
    n = sampling.n
    lower, upper = _check_probabilities(lower, upper)
    ins = check_integer(n_insert, "n_insert", minimum=0)
    dele = check_integer(n_delete, "n_delete", minimum=0)
    sub = check_integer(n_substitute, "n_substitute", minimum=0)
    if dele + sub > n:
        raise ValueError(f"n_delete + n_substitute must be <= n = {n}, got {dele + sub}")
    n_c = n - dele - sub
    n_new = n - dele + ins
    log_ps = _log_p_common(sampling, n, n_c)
    try:
        log_pt = _log_p_common(sampling, n_new, n_c)
    except (OverflowError, ValueError):  # n' beyond float range, or a ratio that underflows to 0
        log_pt = -math.inf
    # P_S = 0, or subnormal (too few significant bits for the relative-error padding): trivial bounds
    if not log_ps >= math.log(np.finfo(np.float64).tiny):
        return np.zeros_like(lower), np.ones_like(upper)
    ps, pt = math.exp(log_ps), math.exp(log_pt)
    new_lower = pt * np.maximum(0.0, 1.0 - (1.0 - lower) / ps)
    new_upper = pt * np.minimum(1.0, upper / ps) - math.expm1(log_pt)
    # Outward padding: the relative errors of P_S and P_S' are at most (2 terms + |log P| + 1) eps (see
    # `_log_p_common`), which reach q and the bounds as absolute errors of at most that plus a few eps.
    terms = 0
    if sampling.scheme == "without_replacement":
        assert sampling.m is not None
        terms = min(dele + sub, sampling.m) + min(ins + sub, sampling.m)
    pad = (4.0 * (abs(log_ps) + abs(log_pt) + 2 * terms) + 16.0) * np.finfo(np.float64).eps
    return np.maximum(new_lower - pad, 0.0), np.minimum(new_upper + pad, 1.0)
