"""Private prediction from certified stability: the smooth-sensitivity (Cauchy, Laplace), propose-test-release
and global-sensitivity mechanisms, for two classes (a noisy threshold of the label) and more (report noisy
argmax), as tables of release probabilities whose privacy is checked exactly.

Every mechanism here releases, for a query whose nominal prediction is ``ŷ`` and whose certified *level* is
``c`` (`StabilityProfile.levels`: the prediction is the same for every dataset within ``c`` changes, and ``c``
moves by at most one between neighbouring datasets), the label ``ŷ`` with probability ``1 - w_c`` and each
other label with probability ``w_c / (C - 1)``.  For ``C = 2`` classes that is the distribution of AGT's
"noise + threshold" release ``1[ŷ + Z S_c / α > 1/2]`` (``ŷ`` in {0, 1}); for more, of the report-noisy-argmax
release ``argmax_j (onehot(ŷ)_j + Z_j S_c / α)`` (``Z_j`` independent) — by symmetry every other label is as
likely.  ``S_c = exp(-β c)`` is the β-smooth bound on the local sensitivity (1 for a label) that the level
gives.  The theorem in ``docs/mibp.md`` ("Private prediction") says which tables ``w`` are (ε, δ)-DP: the
hockey-stick divergence between the release distributions of levels ``c`` and ``c + 1`` (same label) and of
two labels at level 0 is at most δ (`_check_table`).  Each table is checked with exact rational arithmetic
on the probabilities actually sampled, and the release is drawn exactly with those probabilities
(`_bernoulli`: a uniform integer of as many bits as the probability's binary expansion), so no floating-point
rounding of the noise enters the guarantee.
"""

from __future__ import annotations

import itertools
import math
import warnings
from fractions import Fraction
from functools import lru_cache
from typing import Any

import numpy as np
from scipy import integrate, optimize

from certkit._typing import RNGLike
from certkit._validation import check_in_options, check_positive, check_rng
from certkit._warnings import warn_user
from certkit.mibp.privacy.profile import check_private_profile

__all__ = [
    "ACCOUNTING_ROOM",
    "EPSILON_RANGE",
    "MECHANISMS",
    "LevelTable",
    "check_epsilon_delta",
    "level_table",
    "private_predict",
    "release_probabilities",
    "release_rng",
]

#: The mechanisms of `private_predict`.
MECHANISMS = ("cauchy", "laplace", "ptr", "global")

#: The ε of one release that the mechanisms support (`check_epsilon_delta`).
EPSILON_RANGE = (1e-6, 100.0)
#: Levels whose probability of another label would fall below this are released as this level's: a constant
#: cap keeps the level moving by at most one between neighbours, and probabilities stay normal floats.
_SMALLEST = 2.0**-1000
#: The constants are set for ``ε (1 - _SLACK)`` so that the exact check passes with room for rounding.
_SLACK = 2.0**-20
#: Every table is checked at ``ε (1 - ACCOUNTING_ROOM)``: each release is that private, and `PrivatePredictor`
#: composes it so, which a whole number of releases summing to the budget in decimals (``3 * 0.1`` against
#: ``0.3``, above it in floats by one rounding) fits with room to spare, and a real excess does not.
ACCOUNTING_ROOM = 2.0**-30
#: Beyond this lead the argmax's Cauchy tail is taken as ``1/s`` times its value here.
_FAR = 1e6


class LevelTable:
    """The probabilities ``w[c]`` of releasing another label than the nominal one at level ``c`` (the last
    entry serves every higher level), with the mechanism's constants.

    Attributes
    ----------
    w : ndarray
        ``w[c]`` for ``c = 0 .. len(w) - 1``.
    mechanism : str
    epsilon, delta : float
        The privacy of one release.
    n_classes : int
    beta : float or None
        The smoothness of ``S_c = exp(-β c)`` (None: the mechanism does not use levels).
    alpha : float or None
        The noise scale at level ``c`` is ``S_c / α``, in units of the label's global sensitivity.
    """

    def __init__(
        self,
        w: np.ndarray,
        mechanism: str,
        epsilon: float,
        delta: float,
        n_classes: int,
        beta: float | None,
        alpha: float | None,
    ) -> None:
        self.w = w
        self.mechanism, self.epsilon, self.delta, self.n_classes = mechanism, epsilon, delta, n_classes
        self.beta, self.alpha = beta, alpha
        self.w.setflags(write=False)

    def __repr__(self) -> str:
        return (
            f"LevelTable({self.mechanism!r}, epsilon={self.epsilon:g}, delta={self.delta:g}, "
            f"classes={self.n_classes}, levels={len(self.w)})"
        )

    def other(self, levels: np.ndarray) -> np.ndarray:
        """``w`` at each level (levels past the table's last entry get its value)."""
        return self.w[np.minimum(levels, len(self.w) - 1)]


def check_epsilon_delta(epsilon: Any, delta: Any, mechanism: str) -> tuple[float, float]:
    """``(epsilon, delta)`` of one release of ``mechanism`` as floats: ε in `EPSILON_RANGE`, δ in [0, 1),
    0 for the ε-DP mechanisms and > 0 for the others (a ValueError / TypeError naming the argument)."""
    epsilon = check_positive(epsilon, "epsilon")
    low, high = EPSILON_RANGE
    if not low <= epsilon <= high:
        raise ValueError(
            f"epsilon must be in [{low:g}, {high:g}] (the range where every mechanism's release table is "
            f"built and checked: below it a release is indistinguishable from uniform noise at float "
            f"precision, above it from the nominal label), got {epsilon!r}"
        )
    if isinstance(delta, (bool, np.bool_)) or not isinstance(delta, (int, float, np.integer, np.floating)):
        raise TypeError(f"delta must be a real number in [0, 1), got {type(delta).__name__}")
    delta = float(delta)
    if not 0.0 <= delta < 1.0:
        raise ValueError(f"delta must be in [0, 1), got {delta!r}")
    if mechanism in ("cauchy", "global") and delta != 0.0:
        raise ValueError(
            f"mechanism={mechanism!r} is ε-DP (delta=0); for (ε, δ)-DP with delta > 0 use "
            "mechanism='laplace' or 'ptr'"
        )
    if mechanism in ("laplace", "ptr") and delta == 0.0:
        raise ValueError(
            f"mechanism={mechanism!r} needs delta > 0 (it is (ε, δ)-DP); for delta=0 use 'cauchy'"
        )
    return epsilon, delta


# ------------------------------------------------------------------------------------------ noise tails
def _tail(x: np.ndarray, family: str) -> np.ndarray:
    """``P(Z > x)`` for a standard Cauchy or Laplace variable."""
    x = np.asarray(x, dtype=np.float64)
    if family == "cauchy":
        return np.arctan2(1.0, x) / np.pi
    return np.where(x >= 0, 0.5 * np.exp(-np.abs(x)), 1.0 - 0.5 * np.exp(-np.abs(x)))


def _other(s: float, n_classes: int, family: str) -> float:
    """The probability that the release differs from the nominal label when the noise has scale ``1 / s``
    (``s`` the nominal label's lead in noise units): ``P(Z > s / 2)`` for the threshold of two classes,
    ``P(max_{j >= 1} Z_j > Z_0 + s)`` for the argmax of more (by quadrature; for Cauchy noise beyond
    ``s = 10**6``, where it falls like ``C / (π s)``, scaled as ``1/s`` from there).  Whatever its
    accuracy, the table it builds is what is released and what is checked."""
    if n_classes == 2:
        return float(_tail(0.5 * s, family))
    if family == "cauchy" and s > _FAR:  # the tail falls like 1/s there (C / (π s)); quadrature cannot see it
        return _other(_FAR, n_classes, family) * (_FAR / s)
    m = n_classes - 1

    def beaten(z: float) -> float:  # P(max_j Z_j > z + s) = 1 - (1 - P(Z > z + s))^m
        with np.errstate(divide="ignore"):  # a tail of 1: log1p(-1) = -inf, and the result 1
            return float(-np.expm1(m * np.log1p(-_tail(z + s, family))))

    if family == "cauchy":  # z = tan θ: the density becomes uniform in θ
        theta = np.arctan(-s)
        parts = [(-np.pi / 2, theta), (theta, 0.0), (0.0, np.pi / 2)]

        def integrand(t: float) -> float:
            return beaten(np.tan(t)) / np.pi

    else:
        parts = [(-s - 60.0, -s), (-s, 0.0), (0.0, 60.0)]

        def integrand(z: float) -> float:
            return 0.5 * np.exp(-abs(z)) * beaten(z)

    with warnings.catch_warnings():  # its accuracy does not matter to the guarantee (the table is checked)
        warnings.simplefilter("ignore", integrate.IntegrationWarning)
        return sum(integrate.quad(integrand, a, b, epsabs=0, epsrel=1e-11, limit=200)[0] for a, b in parts)


# ------------------------------------------------------------------------------------------ the exact check
def _divergence(stay_a, other_a, stay_b, other_b, e_eps) -> Fraction:
    """The hockey-stick divergence of release distribution ``a`` from ``b`` when both have the same nominal
    label: ``Σ_o max(0, P_a(o) - e^ε P_b(o))`` (the nominal label, then the other labels together)."""
    return max(Fraction(0), stay_a - e_eps * stay_b) + max(Fraction(0), other_a - e_eps * other_b)


def _check_table(w: np.ndarray, epsilon: float, delta: float, n_classes: int) -> bool:
    """Whether releasing the nominal label with probability ``1 - w[c]`` and each other label with
    ``w[c] / (C - 1)`` is (ε, δ)-DP when the level moves by at most one between neighbours (the theorem of
    the module docstring), checked in exact rational arithmetic with a lower bound on ``e^ε``."""
    e_eps = Fraction(float(np.nextafter(np.exp(epsilon) * (1.0 - 2.0**-50), 0.0)))
    d = Fraction(delta)
    q = [Fraction(float(v)) for v in w]
    if any(not 0 < v <= 1 for v in q) or any(a < b for a, b in itertools.pairwise(q)):
        return False
    # level 0, two datasets with different nominal labels: label a is the nominal of the first only
    C = n_classes - 1
    stay, other = 1 - q[0], q[0] / C
    if max(Fraction(0), stay - e_eps * other) + max(Fraction(0), other - e_eps * stay) > d:
        return False
    for a, b in itertools.pairwise(q):  # adjacent levels, the same nominal label, both directions
        if _divergence(1 - a, a, 1 - b, b, e_eps) > d or _divergence(1 - b, b, 1 - a, a, e_eps) > d:
            return False
    return True


# ------------------------------------------------------------------------------------------ the tables
def _levels_table(
    family: str, eps: float, n_classes: int, levels: int, alpha: float, beta: float
) -> np.ndarray:
    """``w[c]`` for ``c = 0 .. levels`` (fewer where it falls below `_SMALLEST`) at noise scale
    ``exp(-β c) / α``."""
    w = []
    for c in range(levels + 1):
        value = _other(alpha * math.exp(min(beta * c, 700.0)), n_classes, family)
        if value < _SMALLEST:
            break
        w.append(value)
    return np.asarray(w if w else [_other(alpha, n_classes, family)])


def _alpha_for(target: float, n_classes: int, family: str) -> float:
    """The ``α`` whose level-0 probability of another label is ``target`` (it falls with ``α`` from
    ``(C - 1) / C`` towards 0), bracketed by powers of two from 1 outwards (``2**±1000`` at most)."""

    def excess(a: float) -> float:
        return _other(a, n_classes, family) - target

    low = high = 1.0
    while excess(low) < 0.0 and low > 2.0**-1000:
        low /= 16.0
    while excess(high) > 0.0 and high < 2.0**1000:
        high *= 16.0
    return optimize.brentq(excess, low, high, xtol=1e-300, rtol=1e-14)


@lru_cache(maxsize=256)
def level_table(mechanism: str, epsilon: float, delta: float, n_classes: int, levels: int) -> LevelTable:
    """The checked release table of ``mechanism`` at (ε, δ) for ``n_classes`` labels and levels up to
    ``levels`` (the number of rungs of the ladder; levels are never higher).

    * ``global``: noise at the label's global sensitivity, whatever the level: Laplace of scale ``1/ε`` on
      the label for two classes, of scale ``2/ε`` on every entry of the one-hot vote for more (its ℓ1
      sensitivity is 2).
    * ``cauchy`` (δ = 0): Cauchy noise of scale ``exp(-β c) / α``; for two classes ``β = ε`` and ``α`` the
      scale at which level 0 is randomized response at ε (``α = 2 tan(π tanh(ε/2) / 2)``), which the
      two-class analysis allows (``docs/mibp.md``); for more classes ``α`` likewise (ε-DP randomized
      response over ``C`` labels at level 0) and the largest ``β`` of ``ε, ε/1.25, ε/1.5, ε/2, ...`` whose
      table passes the check.
    * ``laplace`` (δ > 0): Laplace noise of scale ``exp(-β c) / α``; ``α`` such that level 0 is
      randomized response at (ε, δ), ``β`` the largest of ``8, 4, 2, 1, 1/2, ..., 2**-7`` times Nissim et
      al.'s ``ε / (2 ln(2/δ))`` whose table passes the check (``2**-30`` times it, where the levels barely
      differ, if none does).
    * ``ptr``: propose-test-release on the level with ``ε/2`` for the test and ``ε/2`` for the fallback:
      the level plus Laplace noise of scale ``2/ε`` above ``τ = (2/ε) ln(1/(2δ))`` releases the nominal label,
      else the global mechanism at ``ε/2`` releases.

    Every table is checked (`_check_table`) at ``ε (1 - ACCOUNTING_ROOM)`` before it is returned; one that
    fails raises `RuntimeError`.
    """
    eps = epsilon * (1.0 - _SLACK)
    checked = epsilon * (1.0 - ACCOUNTING_ROOM)
    C = n_classes
    beta = alpha = None
    if mechanism == "global":
        w = np.asarray([_other(eps if C == 2 else eps / 2.0, C, "laplace")])
    elif mechanism == "ptr":
        half = eps / 2.0
        other = _other(half if C == 2 else half / 2.0, C, "laplace")
        tau = math.log(1.0 / (2.0 * delta)) / half
        # the test passes when level + Laplace(2/ε) exceeds τ
        fail = [1.0 - float(_tail((tau - c) * half, "laplace")) for c in range(levels + 1)]
        w = np.asarray([f * other for f in fail if f * other >= _SMALLEST] or [fail[0] * other])
    else:
        family = mechanism
        # level 0: randomized response over C labels at (ε, δ): w0 = (C - 1)(1 - δ) / (e^ε + C - 1)
        target = (C - 1) * (1.0 - delta) / (math.exp(eps) + C - 1)
        # a little more noise than that (room for the exact check), below uniform ((C - 1) / C) all the same
        alpha = _alpha_for(min(target * (1.0 + 2.0**-30), 0.5 * (target + (C - 1) / C)), C, family)
        if family == "cauchy":
            candidates = (
                [eps]
                if C == 2
                else [eps / g for g in (1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0)] + [eps / (2 * C)]
            )
        else:
            nrs = eps / (2.0 * math.log(2.0 / delta))
            candidates = [nrs * 2.0**j for j in [*range(3, -8, -1), -30]]  # the last: levels alike
        w = None
        for beta in candidates:
            table = _levels_table(family, eps, C, levels, alpha, beta)
            if _check_table(table, checked, delta, C):
                w = table
                break
        if w is None:  # pragma: no cover - the last candidates pass: ε/(2C) (docs/mibp.md), levels alike
            raise RuntimeError(f"internal error: no {mechanism} table passed the privacy check")
    if not _check_table(w, checked, delta, C):  # pragma: no cover - the constants above make them pass
        raise RuntimeError(f"internal error: the {mechanism} table failed the privacy check")
    return LevelTable(np.asarray(w, dtype=np.float64), mechanism, epsilon, delta, C, beta, alpha)


# ------------------------------------------------------------------------------------------ the release
def _bernoulli(p: np.ndarray, gen: np.random.Generator) -> np.ndarray:
    """Exact draws with probabilities ``p`` (floats in (0, 1]): ``p = M / 2^E`` exactly, and the draw is
    ``U < M`` for a uniform integer ``U`` of ``E`` random bits (``E`` up to about 1,100)."""
    out = np.empty(len(p), dtype=bool)
    for i, value in enumerate(p.tolist()):
        num, den = float(value).as_integer_ratio()
        bits = den.bit_length() - 1
        nbytes = (bits + 7) // 8
        u = int.from_bytes(gen.bytes(nbytes), "little") >> (8 * nbytes - bits) if bits else 0
        out[i] = u < num
    return out


def release_rng(rng: RNGLike) -> np.random.Generator:
    """The generator of a private release (`certkit._validation.check_rng`), with one UserWarning naming
    ``rng`` when it is an int seed: noise drawn from a seed is reproducible by anyone who knows or guesses
    it, and then protects nothing."""
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, (bool, np.bool_)):
        warn_user(
            f"rng={int(rng)} seeds the noise of a privacy mechanism: anyone who knows the seed can "
            "reproduce the noise and remove it; pass rng=None (fresh entropy from the OS) for releases, "
            "and a seed only to reproduce tests"
        )
    return check_rng(rng)


def _table_for(profile: Any, epsilon: Any, delta: Any, mechanism: Any) -> tuple[LevelTable, str]:
    mechanism = check_in_options(mechanism, "mechanism", MECHANISMS)
    epsilon, delta = check_epsilon_delta(epsilon, delta, mechanism)
    check_private_profile(profile)
    table = level_table(mechanism, epsilon, delta, profile.n_classes, profile.max_level)
    return table, mechanism


def release_probabilities(
    profile: Any, *, epsilon: float, delta: float = 0.0, mechanism: str = "cauchy"
) -> np.ndarray:
    """The probability that `private_predict` releases each query's nominal prediction (its expected
    accuracy, where the nominal prediction is right).

    Parameters
    ----------
    profile, epsilon, delta, mechanism
        As in `private_predict`.

    Returns
    -------
    ndarray (m,)
    """
    table, mechanism = _table_for(profile, epsilon, delta, mechanism)
    if mechanism == "global" and hasattr(profile, "votes"):
        return profile.global_release(epsilon)
    return 1.0 - table.other(profile.levels)


def private_predict(
    profile: Any, *, epsilon: float, delta: float = 0.0, mechanism: str = "cauchy", rng: RNGLike = None
) -> np.ndarray:
    """One differentially private prediction per query of a stability profile.

    Each query is answered by a mechanism that is (ε, δ)-DP with respect to the training set (one row
    added or removed, full-batch training: `certkit.mibp.Neighbours`'s relation): the nominal prediction is
    released with a probability that grows with how many changes it is certified for (its ``level``),
    another label otherwise (see the module docstring and ``docs/mibp.md`` for the proofs).  Answering
    many queries costs more privacy: compose them with `PrivatePredictor`.

    Parameters
    ----------
    profile : StabilityProfile or EnsembleProfile
        From `stability_profile` or `ensemble_profile` (the ``Neighbours`` relation).
    epsilon : float
        ε of each release, in `EPSILON_RANGE` (``1e-6`` to ``100``; a ValueError outside it).
    delta : float
        δ in [0, 1): 0 for ``cauchy`` and ``global``, > 0 for ``laplace`` and ``ptr``.
    mechanism : {"cauchy", "laplace", "ptr", "global"}
        ``cauchy``: ε-DP smooth sensitivity with Cauchy noise (Nissim, Raskhodnikova & Smith 2007; the
        default). ``laplace``: (ε, δ)-DP smooth sensitivity with Laplace noise. ``ptr``: propose-test-release
        on the level. ``global``: the global-sensitivity baseline (the level is not used; for an ensemble
        the vote counts get exact discrete Laplace noise of scale ``2/ε``, `discrete_laplace`).  Two
        classes: a noisy threshold of the label; more: report noisy argmax.
    rng : None, int or numpy.random.Generator
        The randomness of the releases: None (the default, fresh entropy from the OS) for a release; an int
        seed makes the noise reproducible by whoever knows it and gives a UserWarning (for tests).

    Returns
    -------
    ndarray (m,)
        The released labels, as in the ``y`` the profile was computed with.

    Examples
    --------
    >>> import numpy as np
    >>> from certkit.mibp import MLP, stability_profile, private_predict
    >>> X = np.random.default_rng(0).normal(size=(200, 2)); y = (X[:, 0] > 0).astype(int)
    >>> profile = stability_profile(MLP.random([2, 2], rng=0), X, y, X[:5], ks=range(6),
    ...                             loss="cross_entropy", clip_value=0.1, learning_rate=0.5)
    >>> private_predict(profile, epsilon=1.0).shape
    (5,)
    """
    table, mechanism = _table_for(profile, epsilon, delta, mechanism)
    gen = release_rng(rng)
    nominal = profile.class_index
    C = profile.n_classes
    if mechanism == "global" and hasattr(profile, "votes"):
        index = profile.global_release_draw(epsilon, gen)
        return profile.classes[index]
    flip = _bernoulli(table.other(profile.levels), gen)
    shift = gen.integers(1, C, size=len(nominal)) if C > 2 else np.ones(len(nominal), dtype=np.int64)
    index = np.where(flip, (nominal + shift) % C, nominal)
    return profile.classes[index]
