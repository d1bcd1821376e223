"""Perturbation models: which training sets ``D'`` could have been the real one.

Every model turns the observed inputs ``X`` (n, d) into `InputSets`: for each
entry ``(k, f)`` a set ``{v + e : v in options[k, f], e in [offset_lo, offset_hi]}``
(a finite union of intervals), plus an optional budget ``k`` on how many points may
differ from their observed value and an optional number of binary labels that may be
flipped.  Models compose left to right with ``&``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from certkit._typing import RNGLike
from certkit._validation import check_array, check_bool, check_integer, check_rng

__all__ = [
    "Budget",
    "Compose",
    "FeatureBox",
    "InputSets",
    "LabelFlips",
    "MissingValues",
    "OrdinalShift",
    "Perturbation",
]


@dataclass(frozen=True)
class InputSets:
    """Per-entry sets of possible input values (see the module docstring).

    Attributes
    ----------
    nominal : ndarray (n, d)
        The observed inputs.
    options : ndarray (n, d, V)
        Candidate base values; entries past ``n_options[k, f]`` repeat the last one.
    n_options : ndarray (n, d) of int
        How many base values each entry has.
    offset_lo, offset_hi : ndarray (n, d)
        The continuous offset interval added to the base value.
    budget : int or None
        At most this many points differ from ``nominal`` (None: any number).
    label_flips : int or None
        At most this many labels may change to another class, on any points (None: labels are exact
        unless ``flip_labels``).
    flip_labels : bool
        Paired poisoning: a point that deviates under ``budget`` may also change its label to another
        class (``Budget(FeatureBox(ε) & LabelFlips(1), k)``).
    """

    nominal: np.ndarray
    options: np.ndarray
    n_options: np.ndarray
    offset_lo: np.ndarray
    offset_hi: np.ndarray
    budget: int | None = None
    label_flips: int | None = None
    flip_labels: bool = False

    @property
    def labels_vary(self) -> bool:
        """Whether some label may change."""
        return self.flip_labels or bool(self.label_flips)

    @classmethod
    def exact(cls, X: np.ndarray) -> InputSets:
        """No perturbation: every entry is its observed value."""
        zeros = np.zeros_like(X)
        return cls(X, X[:, :, None].copy(), np.ones(X.shape, dtype=np.int64), zeros, zeros.copy())

    @property
    def lower(self) -> np.ndarray:
        """Lower end of each entry's interval hull."""
        return self.options.min(axis=2) + self.offset_lo

    @property
    def upper(self) -> np.ndarray:
        """Upper end of each entry's interval hull."""
        return self.options.max(axis=2) + self.offset_hi

    @property
    def varies(self) -> np.ndarray:
        """(n, d) bool: entries whose set is not the single observed value."""
        single = (self.n_options == 1) & (self.offset_lo == 0) & (self.offset_hi == 0)
        return ~(single & (self.options[:, :, 0] == self.nominal))

    def sample(self, rng: RNGLike = None, *, vertex: bool = False) -> np.ndarray:
        """One dataset ``X'`` from the sets (uniform offsets, or offset endpoints with ``vertex=True``).

        Under a budget, a random subset of points deviates (``budget`` of them half of the time, a uniform
        number in ``0..budget`` otherwise) and the rest keep ``nominal``.
        """
        return self._sample(check_bool(vertex, "vertex"), check_rng(rng))[0]

    def _sample(self, vertex: bool, gen: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """`sample` and the mask of the points that deviate (all of them without a budget)."""
        n, d = self.nominal.shape
        pick = np.floor(gen.random((n, d)) * self.n_options).astype(np.int64)
        base = np.take_along_axis(self.options, pick[:, :, None], axis=2)[:, :, 0]
        if vertex:
            off = np.where(gen.random((n, d)) < 0.5, self.offset_lo, self.offset_hi)
        else:
            off = self.offset_lo + gen.random((n, d)) * (self.offset_hi - self.offset_lo)
        X = base + off
        deviates = np.ones(n, dtype=bool)
        if self.budget is not None:
            b = min(self.budget, n)
            m = b if gen.random() < 0.5 else int(gen.integers(0, b + 1))
            deviates[:] = False
            deviates[gen.choice(n, size=m, replace=False)] = True
            X[~deviates] = self.nominal[~deviates]
        return X, deviates

    def sample_labels(self, y: np.ndarray, rng: RNGLike = None, *, classes: Any = None) -> np.ndarray:
        """Labels with up to ``label_flips`` random labels changed (a copy of ``y`` otherwise).

        ``classes``: the label values (default ``(-1, 1)``, binary labels); a changed label takes another
        of them, uniformly.
        """
        y = np.array(check_array(y, "y", ndim=(1, 2), dtype=None), copy=True)
        classes = self._classes(y, classes)
        if self.label_flips:
            gen = check_rng(rng)
            b = min(self.label_flips, len(y))
            m = b if gen.random() < 0.5 else int(gen.integers(0, b + 1))
            flip = gen.choice(len(y), size=m, replace=False)
            y[flip] = _other_class(y[flip], classes, gen)
        return y

    def sample_dataset(
        self, y: np.ndarray, rng: RNGLike = None, *, vertex: bool = False, classes: Any = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """One allowed training set ``(X', y')``: inputs as `sample`, labels as `sample_labels`; under paired
        poisoning (``flip_labels``) each deviating point changes its label half of the time."""
        gen = check_rng(rng)
        X, deviates = self._sample(check_bool(vertex, "vertex"), gen)
        y = self.sample_labels(y, gen, classes=classes)
        if self.flip_labels:
            classes = self._classes(y, classes)
            rows = np.flatnonzero(deviates & (gen.random(len(y)) < 0.5))
            y[rows] = _other_class(y[rows], classes, gen)
        return X, y

    def _classes(self, y: np.ndarray, classes: Any) -> np.ndarray:
        if classes is None:
            if self.labels_vary and not np.all(np.isin(y, (-1, 1))):
                raise ValueError(
                    "labels y must be -1 or +1 to be flipped without classes= (the label values)"
                )
            return np.array([-1.0, 1.0])
        classes = np.unique(check_array(classes, "classes", ndim=1))
        if self.labels_vary and (classes.size < 2 or not np.all(np.isin(y, classes))):
            raise ValueError("classes must list at least two label values, including every label in y")
        return classes


def _other_class(labels: np.ndarray, classes: np.ndarray, gen: np.random.Generator) -> np.ndarray:
    """A uniformly drawn class other than each label."""
    pos = np.searchsorted(classes, labels)
    shift = gen.integers(1, len(classes), size=len(labels))
    return classes[(pos + shift) % len(classes)].astype(labels.dtype)


class Perturbation:
    """Base class: ``apply(sets)`` returns the sets after this perturbation."""

    def apply(self, sets: InputSets) -> InputSets:  # pragma: no cover - every model overrides it
        raise NotImplementedError

    def sets(self, X: Any) -> InputSets:
        """The input sets of this perturbation model for observed inputs ``X`` (n, d)."""
        X = check_array(X, "X", ndim=2)
        out = self.apply(InputSets.exact(X))
        for name in ("offset_lo", "offset_hi", "options"):
            if not np.all(np.isfinite(getattr(out, name))):
                raise ValueError(f"the perturbation produced non-finite {name}; check its bounds")
        return out

    def __and__(self, other: Perturbation) -> Compose:
        return Compose(self, other)


def _select(n: int, d: int, points: Any, features: Any) -> np.ndarray:
    mask = np.zeros((n, d), dtype=bool)
    rows = np.arange(n) if points is None else check_array(points, "points", ndim=1, dtype=int)
    cols = np.arange(d) if features is None else check_array(features, "features", ndim=1, dtype=int)
    if rows.size and (rows.min() < 0 or rows.max() >= n):
        raise ValueError(f"points must be indices in 0..{n - 1}")
    if cols.size and (cols.min() < 0 or cols.max() >= d):
        raise ValueError(f"features must be indices in 0..{d - 1}")
    mask[np.ix_(rows, cols)] = True
    return mask


def _broadcast(value: Any, name: str, n: int, d: int) -> np.ndarray:
    arr = check_array(value, name, ndim=(0, 1, 2))
    if arr.ndim == 1 and arr.shape != (d,):
        raise ValueError(f"{name} as a 1-D array must have one entry per feature ({d}), got {arr.shape}")
    if arr.ndim == 2 and arr.shape != (n, d):
        raise ValueError(f"{name} as a 2-D array must have shape ({n}, {d}), got {arr.shape}")
    return np.broadcast_to(arr, (n, d)).astype(np.float64)


def _no_budget(sets: InputSets, name: str) -> None:
    if sets.budget is not None:
        raise ValueError(f"Budget must be the outermost perturbation; apply {name} inside it")
    if sets.label_flips is not None:
        raise ValueError(f"apply {name} before LabelFlips (write `{name}(...) & LabelFlips(k)`)")


class FeatureBox(Perturbation):
    """``x_k[f] ∈ [x̂_k[f] - ε, x̂_k[f] + ε]`` for the chosen points and features.

    Parameters
    ----------
    epsilon : float or array
        Radius: a scalar, one per feature ``(d,)`` or one per entry ``(n, d)``; >= 0.
    features, points : sequence of int, optional
        Restrict the perturbation to these columns / rows (default: all).
    """

    def __init__(
        self, epsilon: Any, *, features: Sequence[int] | None = None, points: Sequence[int] | None = None
    ):
        eps = check_array(epsilon, "epsilon", ndim=(0, 1, 2))
        if np.any(eps < 0):
            raise ValueError("epsilon must be >= 0")
        self.epsilon = epsilon
        self.features = features
        self.points = points

    def apply(self, sets: InputSets) -> InputSets:
        _no_budget(sets, "FeatureBox")
        n, d = sets.nominal.shape
        eps = _broadcast(self.epsilon, "epsilon", n, d) * _select(n, d, self.points, self.features)
        return replace(sets, offset_lo=sets.offset_lo - eps, offset_hi=sets.offset_hi + eps)

    def __repr__(self) -> str:
        return f"FeatureBox(epsilon={self.epsilon!r})"


class MissingValues(Perturbation):
    """Masked entries may take any value in ``[lower, upper]`` (or any listed level of a categorical feature).

    Parameters
    ----------
    mask : bool array (n, d)
        True where the value is missing (the observed value is a placeholder).
    lower, upper : float or array (d,)
        Range of a missing continuous value.
    levels : mapping feature -> sequence of float, optional
        Categorical features: a missing entry takes one of these values (overrides the range).
    """

    def __init__(
        self, mask: Any, lower: Any, upper: Any, *, levels: Mapping[int, Sequence[float]] | None = None
    ):
        self.mask = check_array(mask, "mask", ndim=2, dtype=bool, allow_empty=True)
        lo = check_array(lower, "lower", ndim=(0, 1))
        hi = check_array(upper, "upper", ndim=(0, 1))
        if np.any(np.broadcast_to(lo, np.broadcast_shapes(lo.shape, hi.shape)) > hi):
            raise ValueError("lower must be <= upper")
        self.lower, self.upper = lo, hi
        if levels is not None and not isinstance(levels, Mapping):
            raise TypeError(
                "levels must be a mapping feature -> sequence of values (or None), "
                f"got {type(levels).__name__}"
            )
        self.levels = {}
        for f, vals in (levels or {}).items():
            f = check_integer(f, "levels key", minimum=0)
            vals = check_array(vals, f"levels[{f}]", ndim=1)
            self.levels[f] = np.unique(vals)

    def apply(self, sets: InputSets) -> InputSets:
        _no_budget(sets, "MissingValues")
        n, d = sets.nominal.shape
        if self.mask.shape != (n, d):
            raise ValueError(f"mask must have the shape of X ({n}, {d}), got {self.mask.shape}")
        if any(f >= d for f in self.levels):
            raise ValueError(f"levels keys must be feature indices in 0..{d - 1}")
        lo = _broadcast(self.lower, "lower", n, d)
        hi = _broadcast(self.upper, "upper", n, d)
        n_lev = max([len(v) for v in self.levels.values()], default=1)
        width = max(sets.options.shape[2], n_lev)
        options = _pad_options(sets.options, sets.n_options, width)
        n_options = sets.n_options.copy()
        off_lo, off_hi = sets.offset_lo.copy(), sets.offset_hi.copy()
        m = self.mask
        options[m] = lo[m][:, None]
        n_options[m] = 1
        off_lo[m] = 0.0
        off_hi[m] = (hi - lo)[m]
        for f, vals in self.levels.items():
            rows = m[:, f]
            options[rows, f, :] = np.concatenate([vals, np.full(width - len(vals), vals[-1])])
            n_options[rows, f] = len(vals)
            off_hi[rows, f] = 0.0
        return replace(sets, options=options, n_options=n_options, offset_lo=off_lo, offset_hi=off_hi)


class OrdinalShift(Perturbation):
    """The value of an ordinal feature stays or moves by one of the allowed integer offsets.

    Parameters
    ----------
    features : sequence of int
        The ordinal columns.
    shifts : sequence of int
        Allowed offsets, e.g. ``(0, 1)`` (under-reporting by one level) or ``(-1, 0, 1)``.
    points : sequence of int, optional
        Restrict to these rows.
    """

    def __init__(
        self, features: Sequence[int], shifts: Sequence[int] = (0, 1), *, points: Sequence[int] | None = None
    ):
        self.features = check_array(features, "features", ndim=1, dtype=int)
        self.shifts = np.unique(check_array(shifts, "shifts", ndim=1, dtype=int)).astype(np.float64)
        self.points = points

    def apply(self, sets: InputSets) -> InputSets:
        _no_budget(sets, "OrdinalShift")
        n, d = sets.nominal.shape
        sel = _select(n, d, self.points, self.features)
        V = sets.options.shape[2]
        S = len(self.shifts)
        width = V * S
        options = _pad_options(sets.options, sets.n_options, width)
        n_options = sets.n_options.copy()
        for k, f in zip(*np.nonzero(sel)):
            base = sets.options[k, f, : sets.n_options[k, f]]
            vals = np.unique((base[:, None] + self.shifts[None, :]).ravel())
            options[k, f] = np.concatenate([vals, np.full(width - len(vals), vals[-1])])
            n_options[k, f] = len(vals)
        return replace(sets, options=options, n_options=n_options)


class Budget(Perturbation):
    """At most ``k`` training points deviate (according to ``perturbation``); the others are exact.

    With ``LabelFlips(1)`` inside (``Budget(FeatureBox(eps) & LabelFlips(1), k)``), each deviating point
    may also change its label: paired feature-and-label poisoning of at most ``k`` points.
    """

    def __init__(self, perturbation: Perturbation, k: int):
        if not isinstance(perturbation, Perturbation):
            raise TypeError(f"perturbation must be a Perturbation, got {type(perturbation).__name__}")
        self.perturbation = perturbation
        self.k = check_integer(k, "k", minimum=0)

    def apply(self, sets: InputSets) -> InputSets:
        _no_budget(sets, "another Budget")
        inner = self.perturbation.apply(sets)
        if inner.label_flips is not None:
            if inner.label_flips != 1:
                raise ValueError(
                    "inside a Budget, LabelFlips(1) says that each deviating point may also change its label "
                    "(paired poisoning: Budget(FeatureBox(eps) & LabelFlips(1), k)); "
                    f"got LabelFlips({inner.label_flips})"
                )
            return replace(inner, budget=self.k, label_flips=None, flip_labels=True)
        return replace(inner, budget=self.k)


class LabelFlips(Perturbation):
    """At most ``k`` training labels change to another class (any other class when there are more than two).

    For the classification losses (hinge, cross-entropy, binary cross-entropy).  Combines with input
    perturbations of every point (``FeatureBox(0.01) & LabelFlips(2)``); inside a `Budget`,
    ``LabelFlips(1)`` makes the budget's deviating points change label too (paired poisoning).
    """

    def __init__(self, k: int):
        self.k = check_integer(k, "k", minimum=0)

    def apply(self, sets: InputSets) -> InputSets:
        if sets.budget is not None:
            raise ValueError(
                "LabelFlips cannot follow a Budget; for paired poisoning put LabelFlips(1) inside it: "
                "Budget(FeatureBox(eps) & LabelFlips(1), k)"
            )
        if sets.label_flips is not None:
            raise ValueError("LabelFlips may appear only once in a composition")
        return replace(sets, label_flips=self.k)

    def __repr__(self) -> str:
        return f"LabelFlips({self.k})"


class Compose(Perturbation):
    """Apply several perturbation models in order (``a & b`` is ``Compose(a, b)``)."""

    def __init__(self, *perturbations: Perturbation):
        if not perturbations:
            raise ValueError("Compose needs at least one perturbation")
        for p in perturbations:
            if not isinstance(p, Perturbation):
                raise TypeError(f"Compose takes Perturbation objects, got {type(p).__name__}")
        self.perturbations = perturbations

    def apply(self, sets: InputSets) -> InputSets:
        for p in self.perturbations:
            sets = p.apply(sets)
        return sets


def _pad_options(options: np.ndarray, n_options: np.ndarray, width: int) -> np.ndarray:
    if options.shape[2] >= width:
        return options.copy()
    last = np.take_along_axis(options, (n_options - 1)[:, :, None], axis=2)
    return np.concatenate([options, np.repeat(last, width - options.shape[2], axis=2)], axis=2)
