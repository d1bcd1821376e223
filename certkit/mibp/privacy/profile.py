"""`stability_profile`: for each query, how many training rows may be added or removed before its prediction
can change — a ladder of certified trainings, one per ``k``, sharing what does not depend on ``k``."""

from __future__ import annotations

import inspect
import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import numpy as np

from certkit._results import ResultMixin, format_table
from certkit._typing import ExecutorArg, Progress
from certkit._validation import check_array, check_integer, check_progress
from certkit.mibp._setup import Run, setup_run
from certkit.mibp.enclosures.neighbours import (
    NeighbourMean,
    neighbour_batches_problem,
    neighbour_margins,
    neighbour_mean,
    neighbour_update,
)
from certkit.mibp.enclosures.sgd_step import BoundsOverflowError, interval_step
from certkit.mibp.problem.losses import label_classes
from certkit.mibp.problem.mlp import MLP
from certkit.mibp.problem.perturbation import Neighbours, Perturbation, Removals
from certkit.parallel import _progress_bar, available_cpus, parallel_map, resolve_executor, single_threaded

__all__ = [
    "RECIPE_OPTIONS",
    "LabelProfile",
    "Ladder",
    "StabilityProfile",
    "check_full_batch",
    "check_ks",
    "check_private_profile",
    "check_recipe",
    "prepare_ladder",
    "stability_profile",
]


class LabelProfile(ResultMixin):
    """What the private mechanisms read of a profile: every query's nominal label (``predictions``, among
    ``classes``) and its ``levels``, and the highest level possible (``max_level``)."""

    predictions: np.ndarray
    classes: np.ndarray
    levels: np.ndarray
    relation: str

    @property
    def n_classes(self) -> int:
        """Number of labels (2 for one output)."""
        return len(self.classes)

    @property
    def class_index(self) -> np.ndarray:
        """The predictions as indices into `classes`."""
        return np.searchsorted(self.classes, self.predictions)


@dataclass(frozen=True)
class StabilityProfile(LabelProfile):
    """Per query: the largest ``k`` of the ladder for which its prediction is certified, and its level.

    Attributes
    ----------
    ks : tuple of int
        The ladder (increasing).
    certified : ndarray (m, len(ks)) of bool
        ``certified[i, j]``: the prediction of query ``i`` is the same for every run the relation allows at
        ``ks[j]`` (every dataset within ``ks[j]`` rows added or removed, for `Neighbours`).  False past the
        rung where the ladder stopped (no query certified there, nor beyond).
    k_max : ndarray (m,) of int
        The largest ``k`` of ``ks`` at which the query is certified, at every smaller rung too; ``-1`` (none)
        where it is not certified at the smallest.
    levels : ndarray (m,) of int
        How many rungs ``k >= 1`` of the ladder certify the query: ``k_max`` for the ladder ``0, 1, 2, ...``,
        fewer for a ladder with gaps.  The prediction is the same within ``levels`` changes, and the level of
        a neighbouring dataset differs by at most one — what the private mechanisms use (`private_predict`).
    predictions : ndarray (m,)
        The nominal model's predictions, labels as in ``y``.
    classes : ndarray
        The labels, in the order of the model's classes.
    relation : str
        ``"neighbours"`` (`Neighbours`), ``"removals"`` (`Removals`) or the perturbation's description.
    runs : int
        Certified trainings run (one per rung up to the last that certified a query, and that one's next).
    seconds, cpu_seconds : float
        Wall time of the whole profile, and the CPU time of the calling process (worker processes of an
        ``executor`` not included).
    """

    ks: tuple[int, ...]
    certified: np.ndarray
    k_max: np.ndarray
    levels: np.ndarray
    predictions: np.ndarray
    classes: np.ndarray
    relation: str
    runs: int
    seconds: float
    cpu_seconds: float

    @property
    def max_level(self) -> int:
        """The highest level the ladder can give: its rungs ``k >= 1``."""
        return sum(k >= 1 for k in self.ks)

    def summary(self) -> str:
        m = len(self.predictions)
        rows = [["queries", m], ["ladder", f"{self.ks[0]}..{self.ks[-1]} ({len(self.ks)} rungs)"]]
        rows += [["relation", self.relation], ["certified trainings run", self.runs]]
        for q in (0.1, 0.5, 0.9):
            rows.append(
                [f"k_max, {int(q * 100)}th percentile", int(np.quantile(self.k_max, q, method="lower"))]
            )
        rows.append(["none certified at the smallest k", int(np.sum(self.k_max < 0))])
        rows.append(["CPU seconds", float(self.cpu_seconds)])
        return format_table(["quantity", "value"], rows, title="Stability profile (certkit.mibp)")


def check_ks(ks: Any) -> tuple[int, ...]:
    """``ks`` as a tuple of strictly increasing non-negative integers (a TypeError / ValueError naming it)."""
    if isinstance(ks, (str, bytes)) or not isinstance(ks, (Sequence, range, np.ndarray)):
        raise TypeError(
            f"ks must be a sequence of non-negative integers (e.g. range(50)), got {type(ks).__name__}"
        )
    if (isinstance(ks, np.ndarray) and ks.ndim != 1) or any(
        isinstance(k, (Sequence, range, np.ndarray)) and not isinstance(k, (str, bytes)) for k in ks
    ):
        raise TypeError(
            "ks must be a flat sequence of non-negative integers (e.g. range(50)), not a nested one"
        )
    ks = tuple(check_integer(k, "ks[i]", minimum=0) for k in ks)
    if not ks:
        raise ValueError("ks must hold at least one k")
    if any(b <= a for a, b in itertools.pairwise(ks)):
        raise ValueError(
            f"ks must be strictly increasing, got {list(ks)[:10]}{'...' if len(ks) > 10 else ''}"
        )
    return ks


def check_private_profile(profile: Any) -> None:
    """The private mechanisms take a profile of the `Neighbours` relation (differential privacy's)."""
    if not isinstance(profile, LabelProfile):
        raise TypeError(
            "profile must be a StabilityProfile or EnsembleProfile (from stability_profile or "
            f"ensemble_profile), got {type(profile).__name__}"
        )
    if profile.relation != "neighbours":
        raise ValueError(
            f"the private mechanisms need a profile of the Neighbours relation (rows added or removed: "
            f"differential privacy's neighbours), this one is of {profile.relation!r}"
        )


def check_full_batch(recipe: dict[str, Any], n_rows: int | None = None, batches: Any = None) -> None:
    """Refuse a recipe whose batches are not the whole training set at every step, for the privacy of the
    `Neighbours` relation.

    `Neighbours` bounds the runs that keep the training set's batch order; a neighbouring dataset trained by
    the same recipe has batches of its own (one row more or less moves every later row to another position,
    so mini-batches and a shuffled order change their members), so its run is not one of them, and the level
    would not be smooth.  Full batches (``batch_size=None``, the default) hold every row at every step,
    whatever the dataset: their run on a neighbour is one the boxes bound.  ``batch_size`` is refused
    whatever the number of rows (``batch_size >= len(X)`` too, so that the refusal does not depend on the
    data); a given batch order (``batches``: the recipe's, for ``n_rows`` rows) must hold every row in every
    batch.  A ValueError names the option and the fix.
    """
    if recipe.get("batch_size") is not None:
        raise ValueError(
            f"batch_size={recipe['batch_size']!r}: private prediction needs full-batch training "
            "(batch_size=None, the default): with mini-batches one row added or removed moves the later rows "
            "to other batches, which the Neighbours bounds do not cover, so the privacy would not hold"
        )
    if batches is not None and any(
        len(rows) != n_rows or not np.array_equal(np.sort(rows), np.arange(n_rows)) for rows in batches
    ):
        raise ValueError(
            "batches: private prediction needs full-batch training, every batch holding every row once (or "
            "leave batches=None and batch_size=None): with mini-batches one row added or removed moves the "
            "later rows to other batches, which the Neighbours bounds do not cover"
        )


def _relation(perturbation: Any) -> tuple[Callable[[int], Perturbation], str]:
    """The perturbation at each ``k`` and the relation's name."""
    if perturbation is None or perturbation is Neighbours:
        return Neighbours, "neighbours"
    if isinstance(perturbation, Neighbours):
        return (lambda k: _with_k(perturbation, k)), "neighbours"
    if perturbation is Removals or isinstance(perturbation, Removals):
        return Removals, "removals"
    raise TypeError(
        "perturbation must be None (Neighbours(k) at each k), a Neighbours instance (its public rows, domain "
        f"and labels kept, its k replaced) or Removals, got {perturbation!r}"
    )


def _with_k(template: Neighbours, k: int) -> Neighbours:
    """``template`` with ``k`` changes (its public rows, domain and labels kept)."""
    out = Neighbours.__new__(Neighbours)
    out.__dict__.update(template.__dict__)
    out.k = k
    return out


class Ladder:
    """One training run's boxes at every rung of a ladder, computed when a query first needs them (a rung's
    box is the last epoch's box with the relation's budget set to that ``k``), and the queries' certificates.

    A rung that cannot be bounded certifies no query, and neither does any above it: under `Neighbours` a
    budget that could empty a batch or overflow its exact sums (`neighbour_batches_problem`: ``k`` at least
    the rows of a batch, for instance), and a run whose bounds leave the float64 range
    (`BoundsOverflowError`).  Raising there instead would tell whether the data allow the rung — a release
    that depends on the data, outside the mechanisms' accounting.  Uncertified is what the level's
    smoothness allows: a neighbour's rung ``k - 1`` can be bounded wherever this dataset's rung ``k`` can
    (one row fewer and one change fewer leave as many rows in a batch; its boxes lie inside, so finite where
    these are).

    Parameters
    ----------
    run : Run
        The checked run (`certkit.mibp._setup.setup_run`), its relation at the ladder's top.
    ks : tuple of int
    relation : str
    """

    def __init__(self, run: Run, ks: tuple[int, ...], relation: str) -> None:
        self.run, self.ks, self.relation = run, ks, relation
        self.nominal = run.model.run(run.X, run.y_fit, run.recipe)[-1]
        n_out = run.model.sizes[-1]
        self.classes = label_classes(run.recipe.loss, n_out)
        nb = run.sets.neighbours
        self.bounded = tuple(nb is None or neighbour_batches_problem(run.recipe, nb, k) is None for k in ks)
        self.boxes: dict[int, tuple[MLP, MLP] | None] = {}  # None: the rung's bounds overflowed
        self._first: NeighbourMean | None = None

    def first_steps(self, ks: list[int]) -> list[tuple | None]:
        """The box and velocity after the first step at every ``k`` of ``ks``, rungs the batches allow
        (None for `Removals`; `_OVERFLOWED` where the bounds overflow): every rung starts from the same
        point, so the first step's row bounds are computed once and each rung takes the changes of its ``k``
        from them (`NeighbourMean.bounds`)."""
        run = self.run
        if run.sets.neighbours is None or not ks:
            return [None] * len(ks)
        out: list[tuple | None] = []
        try:
            if self._first is None:
                top = max(k for k, ok in zip(self.ks, self.bounded) if ok)
                with single_threaded():
                    self._first = neighbour_mean(
                        run.model, run.model, run.sets, run.y, run.recipe, 0, run.chunk_size, k=top
                    )
            for k in ks:
                out.append(neighbour_update(run.model, run.model, self._first.bounds(k), run.recipe, 0))
        except BoundsOverflowError:  # a larger k only widens the bounds: every rung from here overflows
            out += [_OVERFLOWED] * (len(ks) - len(out))
        return out

    def queries(self, X_query: Any) -> tuple[np.ndarray, np.ndarray]:
        """The queries as the network sees them (through the frozen extractor) and their nominal classes
        (indices into `classes`)."""
        run = self.run
        if run.features is not None:
            raw = check_array(X_query, "X_query", shape=(None, *run.features.input_shape))
            Xq = run.features.features(raw.reshape(len(raw), -1))
        else:
            Xq = check_array(X_query, "X_query", ndim=2, shape=(None, run.model.sizes[0]))
        pred = self.nominal.predict(Xq)
        return Xq, (pred > 0).astype(np.int64) if run.model.sizes[-1] == 1 else pred

    def certify(
        self, Xq: np.ndarray, index: np.ndarray, executor: ExecutorArg, progress: bool | str
    ) -> tuple[np.ndarray, int]:
        """``certified`` (m, len(ks)): each query's nominal class at every rung where it and every smaller
        rung certify it; and the rungs trained.  Rungs run in increasing order and stop after one that
        certifies no query (a box only grows with ``k``); with ``executor`` in waves of as many as workers."""
        pred = 2 * index - 1 if self.run.model.sizes[-1] == 1 else index  # as MLP.predict gives them
        certified = np.zeros((len(Xq), len(self.ks)), dtype=bool)
        trained = 0
        with resolve_executor(executor, n_items=len(self.ks)) as pool:
            wave = 1 if pool is None else max(1, executor if isinstance(executor, int) else available_cpus())
            bar = _progress_bar(len(self.ks), progress)
            try:
                for first in range(0, len(self.ks), wave):
                    rungs = range(first, min(first + wave, len(self.ks)))
                    todo = [self.ks[j] for j in rungs if self.bounded[j] and self.ks[j] not in self.boxes]
                    items = []
                    for k, start in zip(todo, self.first_steps(todo)):
                        if start is _OVERFLOWED:
                            self.boxes[k] = None
                        else:
                            items.append((k, start))
                    boxes = parallel_map(partial(_rung, self.run), items, executor=pool)
                    for (k, _), box in zip(items, boxes):
                        self.boxes[k] = box
                    trained += len(todo)
                    for j in rungs:
                        box = self.boxes.get(self.ks[j]) if self.bounded[j] else None
                        if box is not None:
                            with np.errstate(over="ignore", invalid="ignore"):
                                certified[:, j] = neighbour_margins(*box, Xq, pred) > 0
                    if bar is not None:
                        bar.update(len(rungs))
                    if not np.any(certified[:, rungs[-1]]):
                        break
            finally:
                if bar is not None:
                    bar.close()
        return np.cumprod(certified, axis=1).astype(bool), trained

    def profile(self, Xq: np.ndarray, index: np.ndarray, executor: ExecutorArg, progress, start, cpu):
        """The `StabilityProfile` of the queries."""
        held, trained = self.certify(Xq, index, executor, progress)
        reached = held.sum(axis=1)
        ladder = np.asarray(self.ks)
        k_max = np.where(reached > 0, ladder[np.maximum(reached - 1, 0)], -1).astype(np.int64)
        positive = np.cumsum(ladder >= 1)  # rungs k >= 1 up to each rung
        levels = np.where(reached > 0, positive[np.maximum(reached - 1, 0)], 0).astype(np.int64)
        return StabilityProfile(
            ks=self.ks,
            certified=held,
            k_max=k_max,
            levels=levels,
            predictions=self.classes[index],
            classes=self.classes,
            relation=self.relation,
            runs=trained,
            seconds=time.perf_counter() - start,
            cpu_seconds=time.process_time() - cpu,
        )


def _final_box(run: Run, k: int, start: tuple | None = None) -> tuple[MLP, MLP]:
    """The last epoch's box of ``run`` with its relation's budget set to ``k``; ``start`` is the box and
    velocity after the first step when they are known (shared by the rungs: `Ladder.first_steps`)."""
    sets = run.sets
    if sets.neighbours is not None:
        sets = replace(sets, neighbours=replace(sets.neighbours, k=k))
    else:
        sets = replace(sets, removals=k)
    lower = upper = run.model
    velocity, first = None, 0
    if start is not None:
        (lo, hi), velocity = start
        lower, upper = MLP.from_vector(lo, run.model.sizes), MLP.from_vector(hi, run.model.sizes)
        first = 1
    with single_threaded(), np.errstate(over="ignore", invalid="ignore"):
        for step in range(first, run.recipe.n_steps):
            (lo, hi), velocity = interval_step(
                lower, upper, sets, run.y, run.recipe, step, velocity, run.chunk_size
            )
            lower, upper = MLP.from_vector(lo, run.model.sizes), MLP.from_vector(hi, run.model.sizes)
    return lower, upper


#: `Ladder.first_steps`' mark of a rung whose first step's bounds overflowed.
_OVERFLOWED = "overflowed"


def _rung(run: Run, item: tuple[int, tuple | None]) -> tuple[MLP, MLP] | None:
    """The rung's last box, None where its bounds overflow (the rung certifies nothing)."""
    try:
        return _final_box(run, *item)
    except BoundsOverflowError:
        return None


#: The options of `certified_training` that shape a ladder's training run (passed as ``**recipe``).
RECIPE_OPTIONS = (
    "epochs",
    "learning_rate",
    "batch_size",
    "shuffle",
    "drop_last",
    "momentum",
    "weight_decay",
    "l1_penalty",
    "clip_value",
    "clip_norm",
    "rng",
    "batches",
    "chunk_size",
)


def check_recipe(recipe: dict[str, Any]) -> dict[str, Any]:
    """``recipe`` with `certified_training`'s defaults for the options it leaves out; an option that is not
    one of `RECIPE_OPTIONS` raises a TypeError naming it."""
    from certkit.mibp.training import certified_training

    unknown = sorted(set(recipe) - set(RECIPE_OPTIONS))
    if unknown:
        raise TypeError(
            f"unexpected recipe option(s) {unknown}: the training run takes certified_training's recipe "
            f"options {list(RECIPE_OPTIONS)} (the interval bounds with carry='box' are the only ones used)"
        )
    defaults = {
        name: param.default
        for name, param in inspect.signature(certified_training).parameters.items()
        if name in RECIPE_OPTIONS
    }
    return {**defaults, **recipe}


def prepare_ladder(
    model: MLP,
    X: Any,
    y: Any,
    *,
    ks: Any,
    loss: str,
    perturbation: Any = None,
    features: Any = None,
    executor: ExecutorArg = None,
    **recipe: Any,
) -> Ladder:
    """Check a ladder's arguments and build its `Ladder` (the nominal run done, no rung trained yet); the
    arguments as in `stability_profile`."""
    ks = check_ks(ks)
    if loss == "mse":
        raise ValueError("the stability profile certifies labels: use a classification loss, not loss='mse'")
    at_k, relation = _relation(perturbation)
    if relation == "neighbours":
        check_full_batch(recipe)
    run, _ = setup_run(
        model,
        X,
        y,
        perturbation=at_k(ks[-1]),
        loss=loss,
        backend="interval",
        formulation="decomposed",
        carry="box",
        time_limit=None,
        solver=None,
        tighten_bounds=False,
        executor=executor,
        progress=False,
        verbose=False,
        validation=None,
        patience=None,
        features=features,
        neighbour_batches=False,
        **check_recipe(recipe),
    )
    if relation == "neighbours":
        check_full_batch(recipe, len(run.X), run.recipe.batches)
    return Ladder(run, ks, relation)


def stability_profile(
    model: MLP,
    X: Any,
    y: Any,
    X_query: Any,
    *,
    ks: Sequence[int],
    loss: str,
    perturbation: Any = None,
    features: Any = None,
    executor: ExecutorArg = None,
    progress: Progress = False,
    **recipe: Any,
) -> StabilityProfile:
    """For each query, the largest ``k`` of a ladder for which its prediction is certified.

    Trains once per rung ``k`` of ``ks`` with `certified_training`'s interval bounds under the relation at
    ``k`` (`Neighbours(k)`: up to ``k`` rows added or removed per batch) and certifies each query's nominal
    prediction against the last epoch's box.  What does not depend on ``k`` is done once: the checks, the
    batch order, the nominal run, the queries' features and predictions.  The rungs run in increasing order
    and stop after the first that certifies no query (a box only grows with ``k``, so none beyond would);
    with ``executor`` they run in parallel, in waves of as many rungs as workers.  The cost is one
    certified training per rung run (AGT's privacy scripts train once per ``k`` as well): about ``len(ks)``
    times that of `certified_training`, divided by the workers.

    Parameters
    ----------
    model, X, y, loss, features
        The training run, as in `certified_training` (``X`` holds raw inputs with ``features=``).
    X_query : array (m, d)
        The queries (raw inputs with ``features=``).
    ks : sequence of int
        The ladder: strictly increasing non-negative integers, e.g. ``range(200)``.  The private mechanisms
        gain most from every ``k`` up to the largest (a ladder with gaps counts each certified rung as one
        change: see `StabilityProfile.levels`).
    perturbation : Neighbours or Removals, optional
        The relation at each rung: None (default) is `Neighbours(k)`; a `Neighbours` instance keeps its
        public rows, domain and labels with each rung's ``k``; `Removals` (the class or an instance)
        certifies unlearning instead (its profile is not for the private mechanisms).
    executor : None, int or executor-like
        Runs the rungs in parallel (see `certkit.parallel`).
    progress : bool or str
        A progress bar over the rungs.
    **recipe
        The recipe options of `certified_training` (`RECIPE_OPTIONS`: ``epochs``, ``learning_rate``,
        ``batch_size``, ``shuffle``, ``drop_last``, ``momentum``, ``weight_decay``, ``l1_penalty``,
        ``clip_value``, ``clip_norm``, ``rng``, ``batches``, ``chunk_size``), its defaults for the others; any
        other keyword raises a TypeError.  Rows added by `Neighbours` need per-sample clipping
        (``clip_value`` / ``clip_norm``) or a declared domain (``perturbation=Neighbours(0, domain=...)``).
        Under `Neighbours` the training is full-batch: ``batch_size`` other than None, or ``batches`` with a
        batch that misses a row, raises a ValueError (`check_full_batch`: the bounds of a mini-batch run do
        not cover a neighbouring dataset's own batches).

    Returns
    -------
    StabilityProfile

    Examples
    --------
    >>> import numpy as np
    >>> from certkit.mibp import MLP, stability_profile
    >>> X = np.random.default_rng(0).normal(size=(200, 2)); y = (X[:, 0] > 0).astype(int)
    >>> profile = stability_profile(MLP.random([2, 2], rng=0), X, y, X[:5], ks=range(6),
    ...                             loss="cross_entropy", clip_value=0.1, learning_rate=0.5)
    >>> profile.k_max.shape
    (5,)
    """
    start, cpu = time.perf_counter(), time.process_time()
    progress = check_progress(progress)
    ladder = prepare_ladder(
        model,
        X,
        y,
        ks=ks,
        loss=loss,
        perturbation=perturbation,
        features=features,
        executor=executor,
        **recipe,
    )
    Xq, index = ladder.queries(X_query)
    return ladder.profile(Xq, index, executor, progress, start, cpu)
