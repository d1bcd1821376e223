r"""Conformity scores for classification.

Convention: **higher = more conforming**.  A prediction set keeps every label whose conformity
score reaches the calibrated threshold, $C(x) = \{y : s(x, y) \ge q\}$.  Scores written in the
usual non-conformity form $E(x, y)$ (APS, RAPS) are stored as $s = 1 - E$.

| name | conformity $s(x, y)$ | range |
|---|---|---|
| ``"thr"``/``"lac"`` | $\pi_y(x)$ (the model's probability of ``y``) | [0, 1] |
| ``"aps"`` | $1 - \sum_{j \prec y} \pi_j - u\,\pi_y$ | [0, 1] |
| ``"raps"`` | APS minus $\lambda \max(0, o(y) - k_{reg})$ | (-inf, 1] |

$j \prec y$ are the labels ranked above ``y`` (by decreasing probability, ties broken by label
index), $o(y)$ is the 1-based rank of ``y`` and $u \sim U[0, 1]$ is drawn from the
estimator's ``rng`` once per input (``randomized=False`` uses $u = 1$).

A user callable ``f(probs) -> scores`` (both ``(n, K)``) is accepted anywhere a score is; wrap it in
`CallableScore` with ``nonconformity=True`` if larger values mean *less* conforming.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from certkit._validation import check_array, check_bool, check_integer, check_nonnegative

__all__ = ["APSScore", "CallableScore", "ConformityScore", "RAPSScore", "THRScore", "get_score"]


class ConformityScore:
    """Base class: ``score(probs, rng)`` returns conformity scores of every label, shape ``(n, K)``."""

    #: Whether every score lies in [0, 1] (required by `certkit.conformal.RSCPPlusClassifier`).
    bounded: bool = True

    def __call__(self, probs: np.ndarray, rng: np.random.Generator) -> np.ndarray:  # pragma: no cover
        raise NotImplementedError


@dataclass(frozen=True)
class THRScore(ConformityScore):
    """Threshold / LAC score: the probability of the label, $s(x, y) = \\pi_y(x)$."""

    def __call__(self, probs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return np.array(probs, dtype=np.float64, copy=True)


def _aps_nonconformity(probs: np.ndarray, rng: np.random.Generator, randomized: bool) -> tuple:
    """APS non-conformity of every label and the 1-based rank of every label."""
    n, k = probs.shape
    order = np.argsort(-probs, axis=1, kind="stable")
    sorted_p = np.take_along_axis(probs, order, axis=1)
    cum = np.cumsum(sorted_p, axis=1)
    u = rng.uniform(size=(n, 1)) if randomized else np.ones((n, 1))
    e_sorted = cum - (1.0 - u) * sorted_p
    e = np.empty_like(e_sorted)
    np.put_along_axis(e, order, e_sorted, axis=1)
    rank = np.empty((n, k), dtype=np.int64)
    np.put_along_axis(rank, order, np.broadcast_to(np.arange(1, k + 1), (n, k)), axis=1)
    return np.clip(e, 0.0, 1.0), rank


@dataclass(frozen=True)
class APSScore(ConformityScore):
    """Adaptive prediction sets (Romano et al. 2020) as a conformity score ``1 - E``.

    Parameters
    ----------
    randomized : bool, default True
        Draw $u \\sim U[0, 1]$ per input from the estimator's ``rng`` (exact coverage) or use
        $u = 1$ (the cumulative mass including ``y``).
    """

    randomized: bool = True

    def __post_init__(self) -> None:
        check_bool(self.randomized, "randomized")

    def __call__(self, probs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        e, _ = _aps_nonconformity(probs, rng, self.randomized)
        return 1.0 - e


@dataclass(frozen=True)
class RAPSScore(ConformityScore):
    """Regularised APS (Angelopoulos et al. 2021): APS plus $\\lambda \\max(0, o(y) - k_{reg})$.

    Parameters
    ----------
    penalty : float, default 0.01
        $\\lambda \\ge 0$, the cost of each label beyond rank ``k_reg``.
    k_reg : int, default 1
        Number of top labels exempt from the penalty, ``>= 0``.
    randomized : bool, default True
        As in `APSScore`.
    """

    penalty: float = 0.01
    k_reg: int = 1
    randomized: bool = True
    bounded = False

    def __post_init__(self) -> None:
        check_nonnegative(self.penalty, "penalty")
        check_integer(self.k_reg, "k_reg", minimum=0)
        check_bool(self.randomized, "randomized")

    def __call__(self, probs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        e, rank = _aps_nonconformity(probs, rng, self.randomized)
        k_reg = min(self.k_reg, probs.shape[1])  # ranks are at most K: a larger k_reg (even 10**30) is K
        return 1.0 - e - self.penalty * np.maximum(0, rank - k_reg)


@dataclass(frozen=True)
class CallableScore(ConformityScore):
    """A user function ``fn(probs) -> scores`` of shape ``(n, K) -> (n, K)``.

    Parameters
    ----------
    fn : callable
        Maps the model outputs (probabilities) to one score per label.
    nonconformity : bool, default False
        If True, larger values of ``fn`` mean *less* conforming; the sign is flipped internally.
    bounded : bool, default False
        Declare that the conformity scores lie in [0, 1] (needed by RSCP+; checked at run time).
    """

    fn: Callable[[np.ndarray], Any]
    nonconformity: bool = False
    bounded: bool = False

    def __post_init__(self) -> None:
        if not callable(self.fn):
            raise TypeError(f"fn must be callable, got {type(self.fn).__name__}")
        check_bool(self.nonconformity, "nonconformity")
        check_bool(self.bounded, "bounded")

    def __call__(self, probs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        out = check_array(self.fn(probs), "score output", shape=probs.shape)
        out = -out if self.nonconformity else out
        if self.bounded and (np.any(out < 0) or np.any(out > 1)):
            raise ValueError("score output must lie in [0, 1] for a score declared bounded=True")
        return out


_NAMED = {"thr": THRScore, "lac": THRScore, "aps": APSScore, "raps": RAPSScore}


def get_score(score: Any, *, name: str = "score") -> ConformityScore:
    """Resolve ``score`` (a name, a `ConformityScore` or a callable) to a score object.

    Parameters
    ----------
    score : {"thr", "lac", "aps", "raps"}, ConformityScore or callable
        Names use default parameters (build e.g. ``RAPSScore(penalty=0.05, k_reg=2)`` for others); a
        plain callable is wrapped in `CallableScore` (higher = more conforming).
    name : str
        The argument's name in error messages.

    Returns
    -------
    ConformityScore
    """
    if isinstance(score, ConformityScore):
        return score
    if isinstance(score, str):
        key = score.lower()
        if key not in _NAMED:
            raise ValueError(f"unknown {name} {score!r}; expected one of {tuple(_NAMED)}, "
                             "a ConformityScore or a callable")
        return _NAMED[key]()
    if callable(score):
        return CallableScore(score)
    raise TypeError(f"{name} must be a name, a ConformityScore or a callable, got {type(score).__name__}")
