"""Subsample and aggregate: an ensemble of members trained on disjoint parts of the training set, whose vote
is released privately, the certified stability of each member bounding how many changes the vote needs."""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import partial
from typing import Any

import numpy as np
from scipy import integrate

from certkit._results import format_table
from certkit._typing import ExecutorArg, RNGLike
from certkit._validation import as_numpy, check_array, check_integer, check_rng, check_same_length
from certkit.mibp.privacy.profile import (
    LabelProfile,
    StabilityProfile,
    _relation,
    check_full_batch,
    stability_profile,
)
from certkit.mibp.problem.mlp import MLP
from certkit.parallel import parallel_map

__all__ = ["EnsembleProfile", "discrete_laplace", "ensemble_level", "ensemble_profile", "row_parts"]


@dataclass(frozen=True)
class EnsembleProfile(LabelProfile):
    """The members' votes on each query and the certified stability of the ensemble's prediction.

    Attributes
    ----------
    members : tuple of StabilityProfile or None
        Each member's profile (trained on its part of the rows); None for a member whose part holds no row,
        which abstains (no vote, level 0: one added row may make it vote).
    votes : ndarray (m, C) of int
        How many members predict each class.
    predictions : ndarray (m,)
        The ensemble's prediction: the class with most votes (the first of the tied ones), as in ``y``.
    classes : ndarray
        The labels, in the order of the model's classes.
    levels : ndarray (m,) of int
        The number of changes to the training set within which the ensemble's prediction is certified
        (`ensemble_level`); it moves by at most one between neighbouring datasets.
    parts : ndarray (n,) of int
        The part (member) of every training row.
    relation : str
        ``"neighbours"``.
    seconds, cpu_seconds : float
        Wall time, and the CPU time of the calling process.
    """

    members: tuple[StabilityProfile | None, ...]
    votes: np.ndarray
    predictions: np.ndarray
    classes: np.ndarray
    levels: np.ndarray
    parts: np.ndarray
    relation: str
    seconds: float
    cpu_seconds: float

    @property
    def k_max(self) -> np.ndarray:
        """The certified number of changes (`levels`; -1 would mean none, which a vote never has)."""
        return self.levels

    @property
    def max_level(self) -> int:
        """The highest level possible: every member certified at its ladder's top, all voting alike."""
        return sum(1 if member is None else member.max_level + 1 for member in self.members)

    @property
    def _counts(self) -> np.ndarray:
        return np.bincount(self.parts, minlength=len(self.members))

    def global_release(self, epsilon: float) -> np.ndarray:
        """The probability that the global-sensitivity release (`private_predict` with
        ``mechanism="global"``: discrete Laplace noise of scale ``2/ε`` on every vote count, the noisy argmax,
        ties to the first class) is each query's prediction: the exact sum over the nominal class's noise
        ``z``, where its pmf is above about ``1e-18`` (``|z| <= 84/ε``, up to ``2**17`` terms); for smaller
        ε, where the noise is so wide that the votes barely matter, the continuous Laplace's (by quadrature,
        within about ``ε`` of it)."""
        out = np.empty(len(self.votes))
        half = epsilon / 2.0  # the noise's pmf falls by exp(-ε/2) per unit
        r = math.exp(-half)
        reach = math.ceil(42.0 / half)
        for i, (v, c) in enumerate(zip(self.votes, self.class_index)):
            lead = np.delete(v[c] - v, c)
            strict = np.delete(np.arange(len(v)) < c, c)  # earlier classes win ties: theirs must stay below
            if reach <= 2**16:
                z = np.arange(-reach - int(np.abs(lead).max()), reach + int(np.abs(lead).max()) + 1)[:, None]
                x = z + lead - strict  # the largest noise of each other count that keeps c first
                below = np.where(x >= 0, 1.0 - r ** (x + 1) / (1.0 + r), r ** (-x) / (1.0 + r))
                pmf = (1.0 - r) / (1.0 + r) * r ** np.abs(z[:, 0])
                out[i] = float(np.sum(pmf * np.prod(below, axis=1)))
                continue
            scaled = lead * half

            def stay(t, scaled=scaled):  # Z_c = t (in units of the scale): every other below t + lead
                u = t + scaled
                cdf = np.where(u >= 0, 1.0 - 0.5 * np.exp(-np.abs(u)), 0.5 * np.exp(-np.abs(u)))
                return 0.5 * np.exp(-abs(t)) * float(np.prod(cdf))

            out[i] = sum(
                integrate.quad(stay, a, b, epsabs=1e-13, limit=200)[0] for a, b in ((-80, 0), (0, 80))
            )
        return out

    def global_release_draw(self, epsilon: float, gen: np.random.Generator) -> np.ndarray:
        """Draws of the global-sensitivity release (class indices): exact discrete Laplace noise of scale
        ``2/ε`` on the vote counts (`discrete_laplace`; their ℓ1 sensitivity is 2: a changed row moves one
        member's vote, so the noisy counts are ε-DP), the noisy argmax (ties to the first class)."""
        scale = Fraction(2) / Fraction(epsilon)
        noise = discrete_laplace(scale, self.votes.size, gen).reshape(self.votes.shape)
        return np.argmax(self.votes + noise, axis=1)

    def summary(self) -> str:
        rows = [
            ["queries", len(self.predictions)],
            ["members", len(self.members)],
            ["rows per member", f"{self._counts.min()}..{self._counts.max()}"],
            ["median certified changes", int(np.median(self.levels))],
            ["CPU seconds", float(self.cpu_seconds)],
        ]
        return format_table(["quantity", "value"], rows, title="Ensemble stability profile (certkit.mibp)")


class _Bits:
    """Uniform random bits of ``gen``, drawn 8,192 at a time (the draws are a function of ``gen``'s state)."""

    def __init__(self, gen: np.random.Generator) -> None:
        self.gen, self.pool, self.count = gen, 0, 0

    def below(self, n: int) -> int:
        """A uniform integer in ``0 .. n - 1``, exactly: as many bits as ``n - 1`` has, rejected at ``n`` or
        above."""
        bits = (n - 1).bit_length()
        while True:
            while self.count < bits:
                self.pool |= int.from_bytes(self.gen.bytes(1024), "little") << self.count
                self.count += 8192
            u = self.pool & ((1 << bits) - 1)
            self.pool >>= bits
            self.count -= bits
            if u < n:
                return u

    def bernoulli_exp(self, num: int, den: int) -> bool:
        """An exact draw of Bernoulli(``exp(-γ)``) for ``γ = num / den`` in [0, 1] (Canonne, Kamath & Steinke
        2020, Algorithm 1: the parity of the first ``K`` whose Bernoulli(``γ / K``) fails)."""
        k = 1
        while self.below(den * k) < num:
            k += 1
        return k % 2 == 1


def discrete_laplace(scale: Fraction, size: int, gen: np.random.Generator) -> np.ndarray:
    """``size`` exact draws of the discrete Laplace distribution of ``scale``, ``P(Z = z)`` proportional to
    ``exp(-|z| / scale)`` on the integers (Canonne, Kamath & Steinke 2020, Algorithm 2), from uniform
    integers of ``gen`` and rational arithmetic only, so no floating-point rounding enters the distribution.

    Parameters
    ----------
    scale : fractions.Fraction
        ``> 0``; ``t / s`` in lowest terms.
    size : int
    gen : numpy.random.Generator

    Returns
    -------
    ndarray (size,) of int64
    """
    t, s = scale.numerator, scale.denominator
    bits = _Bits(gen)
    out = np.empty(size, dtype=np.int64)
    for i in range(size):
        while True:
            u = bits.below(t)
            if not bits.bernoulli_exp(u, t):
                continue
            v = 0  # geometric: the count of successes of Bernoulli(exp(-1)) before a failure
            while bits.bernoulli_exp(1, 1):
                v += 1
            y = (u + t * v) // s  # geometric with ratio exp(-1 / scale)
            negative = bits.below(2) == 1
            if negative and y == 0:
                continue
            out[i] = -y if negative else y
            break
    return out


def row_parts(X: Any, y: Any, n_members: int) -> np.ndarray:
    """The part of every row: a hash of the row's bytes (inputs and label) modulo ``n_members``.

    A row's part depends on that row alone, so adding or removing a row changes one part and leaves the
    others as they were — what the ensemble's privacy needs (a split that shuffles every row again when one
    is added would change every member).
    """
    X = check_array(X, "X", finite=False)
    y = as_numpy(y, "y")
    n_members = check_integer(n_members, "n_members", minimum=1)
    X = np.ascontiguousarray(X.reshape(len(X), -1), dtype=np.float64)
    y = np.ascontiguousarray(y.reshape(len(y), -1))
    out = np.empty(len(X), dtype=np.int64)
    for i in range(len(X)):
        digest = hashlib.blake2b(X[i].tobytes() + y[i].tobytes(), digest_size=8).digest()
        out[i] = int.from_bytes(digest, "little") % n_members
    return out


def ensemble_level(
    votes: np.ndarray, nominal: np.ndarray, member_levels: np.ndarray, member_votes: np.ndarray
) -> np.ndarray:
    """The number of changes to the training set within which the ensemble's vote is certified.

    Member ``i`` (level ``c_i``) can change its vote only after ``c_i + 1`` changes to its part, so the fewest
    changes that can change the ensemble's prediction ``ŷ`` to ``c'`` is the cheapest set of members that can
    make ``c'`` win: moving a vote from ``ŷ`` to ``c'`` gains 2 on the margin ``n_ŷ - n_c'``, from a third
    class 1 (and so does a member that abstains, vote -1: its part is empty), and ``c'`` needs ``n_ŷ - n_c' +
    [c' > ŷ]`` (ties go to the first class). For each target the cheapest ``a`` votes of ``ŷ`` and ``b`` of
    third classes are taken, every ``a``; the level is the least of these costs over the targets, minus one.
    This is an exact minimum of a cost that moves by at most one between neighbouring datasets (one member's
    level moves by one, or a member at level 0 moves its vote, which the cheapest plan of the other dataset
    can undo at cost one), so the level does too.

    Parameters
    ----------
    votes : ndarray (m, C)
    nominal : ndarray (m,)
        The ensemble's class per query.
    member_levels : ndarray (m, T)
    member_votes : ndarray (m, T)
        Every member's level and class per query.
    """
    m, C = votes.shape
    out = np.empty(m, dtype=np.int64)
    for i in range(m):
        cost = member_levels[i] + 1
        best = np.inf
        mine = np.sort(cost[member_votes[i] == nominal[i]])
        mine_sum = np.concatenate([[0], np.cumsum(mine)])
        for target in range(C):
            if target == nominal[i]:
                continue
            gain = votes[i, nominal[i]] - votes[i, target] + int(target > nominal[i])
            third = np.sort(cost[(member_votes[i] != nominal[i]) & (member_votes[i] != target)])
            third_sum = np.concatenate([[0], np.cumsum(third)])
            for a in range(min(len(mine), (gain + 1) // 2) + 1):
                b = max(0, gain - 2 * a)
                if b <= len(third):
                    best = min(best, mine_sum[a] + third_sum[b])
        out[i] = int(best) - 1
    return out


def _member_profile(item, **options) -> StabilityProfile:
    model, X, y, X_query, seed = item
    return stability_profile(model, X, y, X_query, rng=seed, **options)


def ensemble_profile(
    model: MLP | Sequence[MLP],
    X: Any,
    y: Any,
    X_query: Any,
    *,
    n_members: int,
    ks: Sequence[int],
    loss: str,
    parts: Any = None,
    perturbation: Any = None,
    features: Any = None,
    rng: RNGLike = None,
    executor: ExecutorArg = None,
    **recipe: Any,
) -> EnsembleProfile:
    """Train ``n_members`` members on disjoint parts of the rows, each with a stability profile, and certify
    how many changes the ensemble's vote on each query needs (subsample and aggregate; AGT's
    ``dp_mechanisms_ensembles``).

    Parameters
    ----------
    model : MLP or sequence of MLP
        The initial network of every member, or one per member.
    X, y, X_query, ks, loss, perturbation, features
        As in `stability_profile` (every member trains with the same recipe on its part; the relation must
        be `Neighbours`).
    n_members : int
        Members (parts), >= 1.
    parts : array (n,) of int, optional
        The part of every row, in ``0 .. n_members - 1``.  Default: `row_parts` (a hash of each row), so that
        adding or removing a row changes one member only; a split of your own must have that property too.
    rng : None, int or numpy.random.Generator
        Each member's batch order (with ``shuffle``) comes from its own seed drawn from it.
    executor : None, int or executor-like
        Trains the members in parallel (see `certkit.parallel`).
    **recipe
        The recipe options of `certified_training` but ``rng``, as in `stability_profile`; full-batch
        training only (``batch_size`` raises a ValueError, see `check_full_batch`).

    Returns
    -------
    EnsembleProfile
    """
    start, cpu = time.perf_counter(), time.process_time()
    n_members = check_integer(n_members, "n_members", minimum=1)
    if _relation(perturbation)[1] != "neighbours":
        raise ValueError("ensemble_profile needs the Neighbours relation (perturbation=None or a Neighbours)")
    check_full_batch(recipe)
    if recipe.get("batches") is not None:  # a member trains on its part: an order of all rows cannot apply
        raise ValueError(
            "batches: ensemble_profile trains every member on its own part of the rows with the full batch; "
            "leave batches=None"
        )
    X_arr = as_numpy(X, "X")
    y_arr = as_numpy(y, "y")
    check_same_length(("X", X_arr), ("y", y_arr))
    if parts is None:
        parts = row_parts(X_arr, y_arr, n_members)
    else:
        parts = check_array(parts, "parts", ndim=1, dtype=int)
        if parts.shape != (len(X_arr),) or parts.min() < 0 or parts.max() >= n_members:
            raise ValueError(
                f"parts must hold one part in 0..{n_members - 1} per row of X ({len(X_arr)} rows)"
            )
    models = [model] * n_members if isinstance(model, MLP) else list(model)
    if len(models) != n_members or not all(isinstance(mm, MLP) for mm in models):
        raise TypeError(f"model must be an MLP or a sequence of {n_members} MLPs (one per member)")
    gen = check_rng(rng)
    seeds = gen.integers(0, 2**63 - 1, size=n_members)
    # a member whose part is empty abstains at level 0 (one added row may make it vote): refusing it would
    # tell this dataset from a neighbour whose part holds one row
    trained = [t for t in range(n_members) if np.any(parts == t)]
    items = [(models[t], X_arr[parts == t], y_arr[parts == t], X_query, int(seeds[t])) for t in trained]
    options = dict(ks=ks, loss=loss, perturbation=perturbation, features=features, **recipe)
    profiles = dict(zip(trained, parallel_map(partial(_member_profile, **options), items, executor=executor)))
    members = tuple(profiles.get(t) for t in range(n_members))
    classes = profiles[trained[0]].classes
    n_queries = len(profiles[trained[0]].levels)
    member_votes = np.stack(
        [profiles[t].class_index if t in profiles else np.full(n_queries, -1) for t in range(n_members)],
        axis=1,
    )
    member_levels = np.stack(
        [profiles[t].levels if t in profiles else np.zeros(n_queries, np.int64) for t in range(n_members)],
        axis=1,
    )
    votes = np.stack([np.sum(member_votes == c, axis=1) for c in range(len(classes))], axis=1)
    nominal = np.argmax(votes, axis=1)
    return EnsembleProfile(
        members=members,
        votes=votes,
        predictions=classes[nominal],
        classes=classes,
        levels=ensemble_level(votes, nominal, member_levels, member_votes),
        parts=parts,
        relation="neighbours",
        seconds=time.perf_counter() - start,
        cpu_seconds=time.process_time() - cpu,
    )
