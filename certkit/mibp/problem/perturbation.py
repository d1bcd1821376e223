"""Perturbation models: which training sets ``D'`` could have been the real one.

Every model turns the observed inputs ``X`` (n, d) into `InputSets`: for each
entry ``(k, f)`` a set ``{v + e : v in options[k, f], e in [offset_lo, offset_hi]}``
(a finite union of intervals), plus an optional budget ``k`` on how many points may
differ from their observed value and which labels may change.  Models compose left to right
with ``&``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from certkit._validation import check_array, check_integer
from certkit.mibp.problem.input_sets import InputSets, NeighbourSets

__all__ = [
    "Budget",
    "Compose",
    "FeatureBox",
    "InputSets",
    "LabelFlips",
    "MissingValues",
    "Neighbours",
    "OrdinalShift",
    "Perturbation",
    "Removals",
    "TargetBox",
]


class Perturbation:
    """Base class: ``apply(sets)`` returns the sets after this perturbation."""

    def apply(self, sets: InputSets) -> InputSets:  # pragma: no cover - every model overrides it
        raise NotImplementedError

    def sets(self, X: Any) -> InputSets:
        """The input sets of this perturbation model for observed inputs ``X`` (n, d); NaN marks a missing
        entry where a `MissingValues` mask covers it (see `fill_missing`)."""
        X = self.fill_missing(X)
        out = self.apply(InputSets.exact(X))
        with np.errstate(over="ignore", invalid="ignore"):
            finite = (
                np.all(np.isfinite(out.options), axis=2) & np.isfinite(out.lower) & np.isfinite(out.upper)
            )
        if not np.all(finite):
            k, f = (int(i) for i in np.argwhere(~finite)[0])
            raise ValueError(
                f"{self!r} lets X[{k}, {f}] (observed {X[k, f]:g}) leave the float64 range (about ±1.8e308); "
                "give it narrower bounds"
            )
        if out.target_radius is not None and not np.all(np.isfinite(out.target_radius)):
            raise ValueError("TargetBox's epsilon must be finite")
        return out

    def __and__(self, other: Perturbation) -> Compose:
        return Compose(self, other)

    def fill_missing(self, X: Any) -> np.ndarray:
        """``X`` (n, d) as float64 with every NaN that a `MissingValues` mask of this model covers replaced
        by its placeholder (the centre of the missing value's range, or its middle level); a NaN anywhere
        else is an error naming the entry."""
        X = check_array(X, "X", ndim=2, finite=False)
        covered = np.zeros(X.shape, dtype=bool)
        for model in self._parts():
            if isinstance(model, MissingValues):
                X, covered = model._fill(X, covered)
        bad = ~np.isfinite(X)
        if np.any(bad):
            k, f = (int(i) for i in np.argwhere(bad)[0])
            raise ValueError(
                f"X must be finite; X[{k}, {f}] is {X[k, f]} and no MissingValues mask covers it "
                "(mark missing entries in MissingValues' mask, or fill them)"
            )
        return X

    def _parts(self) -> list[Perturbation]:
        """The models this one is made of (itself for a single model)."""
        return [self]


#: What a budget counts: ``"batch"``, changed rows in every batch (AGT's definition); ``"run"``, changed rows
#: in the whole training set.
SCOPES = ("batch", "run")


def _scope(scope: Any) -> str:
    if not isinstance(scope, str) or scope not in SCOPES:
        raise ValueError(
            f"scope must be 'batch' (at most k changed rows in every batch, AGT's definition) or 'run' (at "
            f"most k changed rows in the whole training set), got {scope!r}"
        )
    return scope


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


def _standalone(sets: InputSets) -> None:
    """Raise if ``sets`` come from a model that stands alone (`Removals`, `Neighbours`)."""
    for name, value in (("Removals", sets.removals), ("Neighbours", sets.neighbours)):
        if value is not None:
            raise ValueError(f"{name} stands alone: it cannot be composed with other perturbations")


def _no_budget(sets: InputSets, name: str) -> None:
    _standalone(sets)
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
        True where the value is missing: the observed value is a placeholder, or NaN (replaced by the
        centre of ``[lower, upper]``, or the middle level, for the nominal run; see
        `Perturbation.fill_missing`).  The nominal run trains on the placeholders; one outside its set
        makes that dataset one the perturbation does not allow, so ``result.nominal_path`` need not lie
        in the certified boxes (code such entries as NaN).
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
        with np.errstate(over="ignore"):
            too_wide = ~np.isfinite(hi - lo)
        if np.any(too_wide):
            raise ValueError(
                f"upper - lower must be finite: lower={lo.tolist()!r} and upper={hi.tolist()!r} span more "
                "than the float64 range (about 1.8e308); bound the missing values by what the feature can "
                "take (e.g. its observed minimum and maximum)"
            )
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

    def __repr__(self) -> str:
        levels = f", levels for features {sorted(self.levels)}" if self.levels else ""
        missing = f"{int(self.mask.sum())} of {self.mask.size} entries"
        bounds = f"lower={self.lower.tolist()!r}, upper={self.upper.tolist()!r}"
        return f"MissingValues({missing}, {bounds}{levels})"

    def _fill(self, X: np.ndarray, covered: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """NaN entries under the mask replaced by their placeholder; ``covered`` gains the mask."""
        n, d = X.shape
        if self.mask.shape != (n, d):
            raise ValueError(f"mask must have the shape of X ({n}, {d}), got {self.mask.shape}")
        centre = 0.5 * _broadcast(self.lower, "lower", n, d) + 0.5 * _broadcast(self.upper, "upper", n, d)
        for f, vals in self.levels.items():
            if f < d:
                centre[:, f] = vals[len(vals) // 2]
        return np.where(self.mask & np.isnan(X), centre, X), covered | self.mask

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

    def __repr__(self) -> str:
        return f"OrdinalShift({self.features.tolist()}, shifts={self.shifts.astype(int).tolist()})"

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

    ``scope="batch"`` (the default, AGT's definition): every batch of the run's batch order holds at most
    ``k`` deviating points; ``scope="run"``: at most ``k`` points of the whole training set deviate.  Either
    way the allowed dataset is fixed (a deviating point deviates in every epoch, the same way); with the
    full batch both scopes are the same.
    """

    def __init__(self, perturbation: Perturbation, k: int, *, scope: str = "batch"):
        if not isinstance(perturbation, Perturbation):
            raise TypeError(f"perturbation must be a Perturbation, got {type(perturbation).__name__}")
        inner = _nested_budget(perturbation)
        if inner is not None:
            raise ValueError(
                f"Budget cannot hold another Budget (got {inner!r} inside Budget(..., {k!r})): one budget "
                "bounds how many rows deviate; write a single Budget(perturbation, k) with the k you mean"
            )
        self.perturbation = perturbation
        self.k = check_integer(k, "k", minimum=0)
        self.scope = _scope(scope)

    def _parts(self) -> list[Perturbation]:
        return self.perturbation._parts()

    def __repr__(self) -> str:
        scope = "" if self.scope == "batch" else f", scope={self.scope!r}"
        return f"Budget({self.perturbation!r}, {self.k}{scope})"

    def apply(self, sets: InputSets) -> InputSets:
        _no_budget(sets, "another Budget")
        if np.any(sets.varies) or sets.label_flips is not None or sets.target_radius is not None:
            raise ValueError(
                "Budget must be the outermost perturbation: a model before it would perturb every row; "
                "write Budget(a & b, k)"
            )
        inner = self.perturbation.apply(sets)
        _standalone(inner)
        if inner.label_flips is not None:
            if inner.label_flips != 1:
                raise ValueError(
                    "inside a Budget, LabelFlips(1) says that each deviating point may also change its label "
                    "(paired poisoning: Budget(FeatureBox(eps) & LabelFlips(1), k)); "
                    f"got LabelFlips({inner.label_flips})"
                )
            return replace(inner, budget=self.k, label_flips=None, flip_labels=True, scope=self.scope)
        return replace(inner, budget=self.k, scope=self.scope)


def _nested_budget(perturbation: Perturbation) -> Budget | None:
    """The first `Budget` inside ``perturbation`` (itself included), or None."""
    if isinstance(perturbation, Budget):
        return perturbation
    if isinstance(perturbation, Compose):
        for part in perturbation.perturbations:
            found = _nested_budget(part)
            if found is not None:
                return found
    return None


class Removals(Perturbation):
    """Unlearning: up to ``k`` training rows may be removed, so the certificate says that training without
    any such rows would give a parameter vector in the same boxes (and, through `certify_predictions`, the
    same prediction).

    The run without the removed rows keeps the recipe's batches with those rows left out (the other rows'
    order and steps unchanged), each batch's mean taken over the rows it keeps: AGT's definition
    (``k_unlearn``), where each batch may lose up to ``k`` of its rows.  That includes every set of ``k``
    rows of the whole training set (which a batch loses at most ``k`` of); between steps the parameters are
    boxes, which cannot hold which rows earlier steps lost, so both give the same bounds.  ``k`` must be
    smaller than every batch.  Stands alone (not inside a `Budget` or with other models); the interval
    backend with ``carry="box"``.

    ``scope="run"``: at most ``k`` rows of the whole training set are removed (the same rows from every
    epoch's batches).

    Parameters
    ----------
    k : int
        How many rows may be removed (>= 0).
    scope : {"batch", "run"}
        ``"batch"`` (the default): up to ``k`` rows of every batch; ``"run"``: up to ``k`` rows in all.
    """

    def __init__(self, k: int, *, scope: str = "batch"):
        self.k = check_integer(k, "k", minimum=0)
        self.scope = _scope(scope)

    def apply(self, sets: InputSets) -> InputSets:
        _alone(sets, "Removals")
        return replace(sets, removals=self.k, scope=self.scope)

    def __repr__(self) -> str:
        scope = "" if self.scope == "batch" else f", scope={self.scope!r}"
        return f"Removals({self.k}{scope})"


def _alone(sets: InputSets, name: str) -> None:
    """Raise unless ``sets`` are the unperturbed data (``name`` stands alone)."""
    if (
        sets.budget is not None
        or sets.label_flips is not None
        or sets.target_radius is not None
        or sets.removals is not None
        or sets.neighbours is not None
        or np.any(sets.varies)
    ):
        raise ValueError(f"{name} stands alone: it cannot be composed with other perturbations")


class Neighbours(Perturbation):
    """Differential privacy's neighbouring datasets: up to ``k`` training rows added or removed.

    Definition (per batch, AGT's ``k_private``).  A run on a neighbouring dataset keeps the recipe's steps,
    learning rates and batch order; every batch is the recipe's batch with some of its rows removed and
    other rows added, at most ``k`` changes per batch in all (rows removed plus rows added; a batch's mean
    is taken over the rows it then holds).  A training row that is removed leaves every batch that held
    it; an added row joins one batch of every epoch (any one).  So the training run on every dataset at
    add/remove distance at most ``k`` from the training set is such a run, and so is any run whose batches
    gain and lose different rows at every step: the boxes hold for all of them.  Rows declared public are
    never removed (AGT's ``dl_public``: data that needs no protection).

    An added row is unknown, so its gradient must be bounded: by per-sample clipping (``clip_value`` /
    ``clip_norm`` of the recipe: every entry of a clipped gradient lies in ``[-c, c]``) or by a declared
    input ``domain`` (the box every row's inputs lie in) and, for a classification loss, the labels it may
    carry (every class of the loss unless ``labels`` says otherwise).  `certified_training` refuses a run
    with neither.  ``k`` must leave every batch a row (smaller than the batch, or the batch holds a public
    row).  Stands alone (not composed with other models); the interval backend with ``carry="box"``, no
    ``l1_penalty``.

    Parameters
    ----------
    k : int
        Rows added or removed per batch (>= 0).
    public : sequence of int, optional
        Indices of training rows that are never removed.
    domain : tuple (lower, upper), optional
        Bounds on an added row's inputs: scalars or one per input feature (raw inputs, flattened, when the
        run has ``features=``).
    labels : sequence, optional
        The labels an added row may carry, as in ``y`` (default: every class of the loss): labels of the
        loss, and every label of ``y`` among them (a dataset without one of the training rows has the
        training set as a neighbour by adding that row back); otherwise the run raises a ValueError naming
        ``labels``.  Needs ``domain`` (with clipping alone the label does not matter).
    scope : {"batch", "run"}
        What ``k`` counts: ``"batch"`` (the default, AGT's definition), changes in every batch;
        ``"run"``, rows added or removed in the whole training set (differential privacy's distance).  The
        boxes are the per-batch ones either way: they hold for both.

    Examples
    --------
    >>> import numpy as np
    >>> from certkit.mibp import MLP, Neighbours, certified_training
    >>> X = np.random.default_rng(0).normal(size=(40, 2)); y = (X[:, 0] > 0).astype(int)
    >>> res = certified_training(MLP.random([2, 2], rng=0), X, y, perturbation=Neighbours(3),
    ...                          loss="cross_entropy", clip_value=0.1, learning_rate=0.5)
    """

    def __init__(
        self,
        k: int,
        *,
        public: Sequence[int] | None = None,
        domain: tuple[Any, Any] | None = None,
        labels: Sequence[Any] | None = None,
        scope: str = "batch",
    ):
        self.k = check_integer(k, "k", minimum=0)
        self.scope = _scope(scope)
        self.public = None if public is None else check_array(public, "public", ndim=1, dtype=int)
        if domain is not None:
            if not isinstance(domain, tuple) or len(domain) != 2:
                raise TypeError("domain must be a tuple (lower, upper) of bounds on an added row's inputs")
            lo = check_array(domain[0], "domain lower", ndim=(0, 1))
            hi = check_array(domain[1], "domain upper", ndim=(0, 1))
            if lo.shape != hi.shape and lo.ndim and hi.ndim:
                raise ValueError(f"domain lower and upper have shapes {lo.shape} and {hi.shape}")
            if np.any(np.broadcast_to(lo, np.broadcast_shapes(lo.shape, hi.shape)) > hi):
                raise ValueError("domain lower must be <= upper")
            domain = (lo, hi)
        self.domain = domain
        if labels is not None:
            if domain is None:
                raise ValueError(
                    "labels (of an added row) needs domain=(lower, upper) too: with clipping alone an added "
                    "row's gradient is bounded whatever its label"
                )
            labels = np.unique(check_array(labels, "labels", ndim=1, dtype=None))
        self.labels = labels

    def apply(self, sets: InputSets) -> InputSets:
        _alone(sets, "Neighbours")
        n, d = sets.nominal.shape
        public = np.zeros(n, dtype=bool)
        if self.public is not None:
            if self.public.size and (self.public.min() < 0 or self.public.max() >= n):
                raise ValueError(f"public must be row indices in 0..{n - 1}")
            public[self.public] = True
        lower = upper = None
        if self.domain is not None:
            lower = _broadcast(self.domain[0], "domain lower", 1, d)[0].copy()
            upper = _broadcast(self.domain[1], "domain upper", 1, d)[0].copy()
        return replace(
            sets, neighbours=NeighbourSets(self.k, public, lower, upper, self.labels), scope=self.scope
        )

    def __repr__(self) -> str:
        extra = "" if self.public is None else f", {self.public.size} public rows"
        extra += "" if self.domain is None else ", domain"
        extra += "" if self.scope == "batch" else f", scope={self.scope!r}"
        return f"Neighbours({self.k}{extra})"


class TargetBox(Perturbation):
    """Regression target poisoning: ``y_k ∈ [ŷ_k - ε, ŷ_k + ε]`` (every output of the row) for the chosen
    points; for ``loss="mse"``.

    Inside a `Budget` only the deviating points' targets move (``Budget(TargetBox(0.1), k)``: at most ``k``
    targets off by at most 0.1, AGT's ``label_epsilon``); with `FeatureBox` in the same budget the same
    points may move their inputs too (``Budget(FeatureBox(0.01) & TargetBox(0.1), k)``).

    Parameters
    ----------
    epsilon : float or array (n,)
        Radius of each point's target interval; >= 0.
    points : sequence of int, optional
        Restrict the perturbation to these rows (default: all).
    """

    def __init__(self, epsilon: Any, *, points: Sequence[int] | None = None):
        eps = check_array(epsilon, "epsilon", ndim=(0, 1))
        if np.any(eps < 0):
            raise ValueError("epsilon must be >= 0")
        self.epsilon = epsilon
        self.points = points

    def apply(self, sets: InputSets) -> InputSets:
        _no_budget(sets, "TargetBox")
        if sets.target_radius is not None:
            raise ValueError("TargetBox may appear only once in a composition")
        n = len(sets.nominal)
        eps = check_array(self.epsilon, "epsilon", ndim=(0, 1))
        if eps.ndim == 1 and eps.shape != (n,):
            raise ValueError(f"epsilon as a 1-D array must have one entry per point ({n}), got {eps.shape}")
        radius = np.broadcast_to(eps, (n,)).astype(np.float64) * _select(n, 1, self.points, None)[:, 0]
        return replace(sets, target_radius=radius)

    def __repr__(self) -> str:
        return f"TargetBox(epsilon={self.epsilon!r})"


class LabelFlips(Perturbation):
    """At most ``k`` training labels change to another class (any other class when there are more than two,
    or only ``target``).

    For the classification losses (hinge, cross-entropy, binary cross-entropy).  Combines with input
    perturbations of every point (``FeatureBox(0.01) & LabelFlips(2)``); inside a `Budget`,
    ``LabelFlips(1)`` makes the budget's deviating points change label too (paired poisoning).

    Parameters
    ----------
    k : int
        How many labels may change (>= 0).
    target : label value, optional
        Targeted flips: a changed label can only become ``target`` (a class of the loss: -1 or +1 for the
        binary hinge, 0 or 1 for binary cross-entropy, ``0..C-1`` otherwise), so points already labelled
        ``target`` keep their label (AGT's ``poison_target_idx``).  None: any other class.
    scope : {"batch", "run"}
        What ``k`` counts: ``"batch"`` (the default, AGT's definition), at most ``k`` changed labels in every
        batch of the run's batch order; ``"run"``, at most ``k`` changed labels in the whole training set
        (what "at most k rows of my training set" means; with mini-batches far fewer than ``"batch"``
        allows).  Either way a changed label is changed in every epoch; with the full batch both are the
        same.
    """

    def __init__(self, k: int, *, target: int | float | None = None, scope: str = "batch"):
        self.k = check_integer(k, "k", minimum=0)
        self.scope = _scope(scope)
        if target is not None:
            if isinstance(target, (bool, np.bool_)) or not isinstance(
                target, (int, float, np.integer, np.floating)
            ):
                raise TypeError(
                    f"target must be a label value (a number) or None, got {type(target).__name__}"
                )
            if isinstance(target, (float, np.floating)) and not (
                np.isfinite(target) and float(target) == int(target)
            ):
                raise ValueError(f"target must be an integer label value, got {target!r}")
            target = int(target)
            if abs(target) > 2**53:  # no label of any loss (the classes are -1, +1, 0, 1, ..., C - 1)
                raise ValueError(
                    f"target must be a label value of the loss (-1 or +1, 0 or 1, or a class 0..C-1), got "
                    f"{target!r}"
                )
        self.target = target

    def apply(self, sets: InputSets) -> InputSets:
        _standalone(sets)
        if sets.budget is not None:
            raise ValueError(
                "LabelFlips cannot follow a Budget; for paired poisoning put LabelFlips(1) inside it: "
                "Budget(FeatureBox(eps) & LabelFlips(1), k)"
            )
        if sets.label_flips is not None:
            raise ValueError("LabelFlips may appear only once in a composition")
        return replace(sets, label_flips=self.k, flip_target=self.target, scope=self.scope)

    def __repr__(self) -> str:
        target = "" if self.target is None else f", target={self.target!r}"
        scope = "" if self.scope == "batch" else f", scope={self.scope!r}"
        return f"LabelFlips({self.k}{target}{scope})"


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

    def _parts(self) -> list[Perturbation]:
        return [q for p in self.perturbations for q in p._parts()]

    def __repr__(self) -> str:
        return " & ".join(repr(p) for p in self.perturbations)


def _pad_options(options: np.ndarray, n_options: np.ndarray, width: int) -> np.ndarray:
    if options.shape[2] >= width:
        return options.copy()
    last = np.take_along_axis(options, (n_options - 1)[:, :, None], axis=2)
    return np.concatenate([options, np.repeat(last, width - options.shape[2], axis=2)], axis=2)
