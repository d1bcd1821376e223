"""`InputSets`: the per-entry sets of possible training inputs (and labels) that a perturbation model allows,
and draws of allowed training sets from them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from certkit._typing import RNGLike
from certkit._validation import check_array, check_bool, check_rng

__all__ = ["InputSets", "NeighbourSets"]


@dataclass(frozen=True)
class NeighbourSets:
    """What `certkit.mibp.Neighbours` allows in every batch: up to ``k`` changes, rows removed (never a public
    one) or added (inputs in ``[lower, upper]``, labels among ``labels``).

    Attributes
    ----------
    k : int
        Changes per batch (rows removed plus rows added).
    public : ndarray (n,) of bool
        Rows that are never removed.
    lower, upper : ndarray (d,) or None
        The box an added row's inputs lie in (None: not declared; per-sample clipping bounds its gradient).
    labels : ndarray or None
        The labels an added row may carry (None: every class of the loss).
    """

    k: int
    public: np.ndarray
    lower: np.ndarray | None = None
    upper: np.ndarray | None = None
    labels: np.ndarray | None = None


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
    flip_target : int, float or None
        Targeted label flips: a changed label can only become this label value (None: any other class).
    target_radius : ndarray (n,) or None
        Regression target poisoning: the target of a point that deviates (every point without
        ``budget``) may be anywhere in ``[y - r, y + r]`` (None: exact targets).
    removals : int or None
        Unlearning: up to this many rows of every batch may be removed from the training set (the inputs
        and labels of the others exact).
    scope : {"batch", "run"}
        What ``budget``, ``label_flips`` and ``removals`` count: ``"batch"``, at most that many changed
        rows in every batch of the run's batch order (AGT's definition); ``"run"``, at most that many
        changed rows in the whole training set.  Either way the allowed dataset is fixed: a changed row is
        changed in every epoch.
    neighbours : NeighbourSets or None
        Differential privacy's neighbouring datasets: rows removed or added, per batch (the inputs and labels
        of the training rows exact).
    """

    nominal: np.ndarray
    options: np.ndarray
    n_options: np.ndarray
    offset_lo: np.ndarray
    offset_hi: np.ndarray
    budget: int | None = None
    label_flips: int | None = None
    flip_labels: bool = False
    flip_target: int | float | None = None
    target_radius: np.ndarray | None = None
    removals: int | None = None
    scope: str = "batch"
    neighbours: NeighbourSets | None = None

    @property
    def labels_vary(self) -> bool:
        """Whether some class label may change."""
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
            y[flip] = self._changed(y[flip], classes, gen)
        return y

    def _changed(self, labels: np.ndarray, classes: np.ndarray, gen: np.random.Generator) -> np.ndarray:
        """Changed labels: the target (where it differs from the label; unchanged otherwise) or a uniformly
        drawn other class."""
        if self.flip_target is not None:
            return np.full_like(labels, self.flip_target)
        return _other_class(labels, classes, gen)

    def sample_dataset(
        self, y: np.ndarray, rng: RNGLike = None, *, vertex: bool = False, classes: Any = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """One allowed training set ``(X', y')``: inputs as `sample`, labels as `sample_labels`; under paired
        poisoning (``flip_labels``) each deviating point changes its label half of the time; with
        ``target_radius`` each deviating point's target moves within its radius (to an end with
        ``vertex=True``)."""
        return self._sample_dataset(y, check_rng(rng), check_bool(vertex, "vertex"), classes)[:2]

    def _sample_dataset(
        self, y: np.ndarray, gen: np.random.Generator, vertex: bool, classes: Any
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`sample_dataset` and the mask of the points that deviate (all of them without a budget)."""
        X, deviates = self._sample(vertex, gen)
        y = self.sample_labels(y, gen, classes=classes)
        if self.flip_labels:
            classes = self._classes(y, classes)
            rows = np.flatnonzero(deviates & (gen.random(len(y)) < 0.5))
            y[rows] = self._changed(y[rows], classes, gen)
        if self.target_radius is not None:
            r = np.where(deviates, self.target_radius, 0.0)
            shift = (
                np.where(gen.random(len(y)) < 0.5, -r, r) if vertex else r * (2.0 * gen.random(len(y)) - 1.0)
            )
            y = y + (shift[:, None] if y.ndim == 2 else shift)
        return X, y, deviates

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
