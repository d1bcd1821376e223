"""The checks of a `certified_training` call and the checked run they build (`Run`): data, labels,
perturbation sets, recipe, backend options and the frozen extractor, validated once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from certkit._validation import (
    check_allocation,
    check_array,
    check_in_options,
    check_integer,
    check_positive,
    check_progress,
)
from certkit._warnings import warn_user
from certkit.mibp.enclosures.features import FrozenFeatures
from certkit.mibp.enclosures.influence import influence_supports
from certkit.mibp.enclosures.neighbours import ADDED_LABELS, check_neighbour_batches
from certkit.mibp.problem.input_sets import NeighbourSets
from certkit.mibp.problem.losses import check_labels, label_classes
from certkit.mibp.problem.mlp import MLP
from certkit.mibp.problem.perturbation import InputSets, Perturbation
from certkit.mibp.problem.recipe import LOSSES, Recipe, make_recipe
from certkit.mibp.programs.solvers import BACKENDS, BackendOptions, check_backend
from certkit.mibp.programs.steps import check_program_recipe
from certkit.parallel import resolve_executor

__all__ = [
    "CARRIES",
    "FORMULATIONS",
    "LONG_RUN_SECONDS",
    "SECONDS_PER_SOLVE",
    "Run",
    "expected_seconds",
    "setup_run",
]

FORMULATIONS = ("joint", "decomposed", "hybrid", "lagrangian")
CARRIES = ("auto", "box", "affine", "shared", "influence")


@dataclass(frozen=True)
class Run:
    """A checked run: the data, its allowed sets, the recipe and how each step is bounded.

    ``early_stop``: None or ``(X_val, y_val, patience)``.
    """

    model: MLP
    X: np.ndarray
    y: np.ndarray  # as check_labels returns them
    y_fit: np.ndarray  # the labels of the nominal run
    sets: InputSets
    recipe: Recipe
    options: BackendOptions
    formulation: str
    carry: str
    chunk_size: int | None  # rows per chunk (None: from the available memory)
    early_stop: tuple | None
    features: FrozenFeatures | None  # the frozen extractor before the model (X holds its outputs)
    auto: bool = False  # the carry was chosen by carry="auto"



def setup_run(
    model: MLP,
    X: Any,
    y: Any,
    *,
    perturbation: Perturbation,
    loss: str,
    epochs: int | None,
    learning_rate: Any,
    batch_size: int | None,
    shuffle: bool,
    drop_last: bool,
    momentum: float,
    weight_decay: float,
    l1_penalty: float,
    clip_value: float | None,
    clip_norm: float | None,
    rng: Any,
    batches: Any,
    backend: str,
    formulation: str,
    carry: str,
    chunk_size: int | None,
    time_limit: float | None,
    solver: str | None,
    tighten_bounds: bool,
    executor: Any,
    progress: Any,
    verbose: bool,
    validation: tuple[Any, Any] | None,
    patience: int | None,
    features: Any,
    neighbour_batches: bool = True,
) -> tuple[Run, bool | str]:
    """Check every argument of `certified_training` (see its docstring) and build the run; returns the run
    and whether (or with which label) to show progress.  ``neighbour_batches=False`` leaves out the check
    that `Neighbours`' budget can bound the batches (`stability_profile`'s ladder bounds only the rungs the
    batches allow, without raising)."""
    if not isinstance(model, MLP):
        raise TypeError(f"model must be a certkit.mibp.MLP (use MLP.from_torch), got {type(model).__name__}")
    if not isinstance(perturbation, Perturbation):
        raise TypeError(
            f"perturbation must be a Perturbation (e.g. FeatureBox(0.01)), got {type(perturbation).__name__}"
        )
    extractor = None
    if features is not None:
        X_raw = check_array(X, "X", finite=False)
        if X_raw.ndim < 2:
            raise ValueError(
                f"X must hold one input per row (n, ...) with features=, got shape {X_raw.shape}"
            )
        extractor = FrozenFeatures(features, X_raw.shape[1:])
        X = X_raw.reshape(len(X_raw), -1)
        if extractor.n_features != model.sizes[0]:
            raise ValueError(
                f"features outputs {extractor.n_features} values per row but the model expects "
                f"{model.sizes[0]} inputs"
            )
    X = perturbation.fill_missing(X)  # NaN allowed where MissingValues marks an entry missing
    if extractor is None and X.shape[1] != model.sizes[0]:
        raise ValueError(f"X has {X.shape[1]} features but the model expects {model.sizes[0]}")
    loss = check_in_options(loss, "loss", LOSSES)
    y = check_labels(y, loss, model.sizes[-1], len(X))
    y_fit = y[:, 0] if loss == "mse" and y.shape[1] == 1 else y
    if epochs is not None or batches is None:
        epochs = check_integer(1 if epochs is None else epochs, "epochs", minimum=1)
        check_allocation(
            24.0 * model.n_params * (epochs + 1.0), "epochs", epochs, what="the per-epoch parameter boxes"
        )
    recipe = make_recipe(
        len(X),
        loss=loss,
        epochs=epochs,
        learning_rate=learning_rate,
        batch_size=batch_size,
        shuffle=shuffle,
        drop_last=drop_last,
        momentum=momentum,
        weight_decay=weight_decay,
        rng=rng,
        l1_penalty=l1_penalty,
        clip_value=clip_value,
        clip_norm=clip_norm,
        batches=batches,
    )
    if epochs is None:  # as many epochs as the given batch order holds
        check_allocation(
            24.0 * model.n_params * (recipe.epochs + 1.0),
            "batches",
            f"{recipe.epochs} epochs",
            what="the per-epoch parameter boxes",
        )
    backend = check_in_options(backend, "backend", BACKENDS)
    formulation = check_in_options(formulation, "formulation", FORMULATIONS)
    carry = check_in_options(carry, "carry", CARRIES)
    if chunk_size is not None:
        chunk_size = check_integer(chunk_size, "chunk_size", minimum=1)
    if time_limit is not None:
        time_limit = check_positive(time_limit, "time_limit")
    check_backend(backend, solver)
    if not isinstance(tighten_bounds, bool):
        raise TypeError(f"tighten_bounds must be True or False, got {type(tighten_bounds).__name__}")
    if not isinstance(verbose, bool):
        raise TypeError(f"verbose must be True or False, got {type(verbose).__name__}")
    if progress is not None:
        progress = check_progress(progress)
    with resolve_executor(executor, n_items=0):  # checks executor now (starts nothing), even if unused
        pass
    if (tighten_bounds or formulation == "hybrid") and backend != "interval":
        check_backend("lp", None)
    if patience is not None:
        patience = check_integer(patience, "patience", minimum=1)
        if validation is None:
            raise ValueError("patience needs a validation split: validation=(X_val, y_val)")
    if validation is not None:
        if not isinstance(validation, tuple) or len(validation) != 2:
            raise TypeError("validation must be a tuple (X_val, y_val)")
        if extractor is not None:
            raw = check_array(validation[0], "X_val", shape=(None, *extractor.input_shape))
            X_val = extractor.features(raw.reshape(len(raw), -1))
        else:
            X_val = check_array(validation[0], "X_val", ndim=2, shape=(None, model.sizes[0]))
        y_val = check_labels(
            validation[1],
            "classes",
            model.sizes[-1],
            len(X_val),
            name="y_val",
            x_name="X_val",
            zero_one=loss == "binary_cross_entropy",
        )
    sets = perturbation.sets(X)
    if sets.neighbours is not None and sets.neighbours.lower is not None:
        _check_domain(sets.neighbours, sets.nominal)
    if extractor is not None:  # the perturbation acts on the raw inputs; the head sees the features
        sets = extractor.feature_sets(sets)
        X = sets.nominal
    check_perturbation(sets, loss, model.sizes[-1])
    carry, auto = _resolve_carry(carry, model, recipe, sets), carry == "auto"
    if sets.neighbours is not None:
        check_neighbours(sets.neighbours, recipe, model.sizes[-1], y, batches=neighbour_batches)
    _check_carry(carry, recipe, sets)
    if backend != "interval":
        check_program_recipe(backend, recipe, sets, model.sizes[-1])
    if carry == "affine":
        _warn_affine_without_gain(sets, len(X))
    if progress is None:
        progress = expected_seconds(backend, formulation, recipe, sets, model.n_params) >= LONG_RUN_SECONDS
    run = Run(
        model,
        X,
        y,
        y_fit,
        sets,
        recipe,
        BackendOptions(backend, time_limit, solver, tighten_bounds, verbose),
        formulation,
        carry,
        chunk_size,
        None if patience is None else (X_val, y_val, patience),
        extractor,
        auto,
    )
    return run, progress


def _resolve_carry(carry: str, model: MLP, recipe: Recipe, sets: InputSets) -> str:
    """The carry that runs: ``"auto"`` picks the influence enclosure where it bounds the run (a linear model
    under label flips, `certkit.mibp.enclosures.influence`), the box carry otherwise; ``"influence"`` where it
    cannot bound the run is an error saying why."""
    reason = influence_supports(model, recipe, sets)
    if carry == "auto":
        return "box" if reason is not None else "influence"
    if carry == "influence" and reason is not None:
        raise ValueError(
            f"carry='influence' cannot bound {reason}; use carry='auto' (the tightest carry that bounds this "
            "run) or carry='box'"
        )
    return carry


def check_perturbation(sets: InputSets, loss: str, n_outputs: int) -> None:
    """The perturbation fits the loss: label flips need classes, a flip target must be one, TargetBox
    needs regression targets."""
    if sets.labels_vary and loss == "mse":
        raise ValueError(
            "LabelFlips needs a classification loss (hinge, cross_entropy or binary_cross_entropy)"
        )
    if sets.target_radius is not None and loss != "mse":
        raise ValueError(f"TargetBox perturbs regression targets and needs loss='mse', got loss={loss!r}")
    if sets.flip_target is not None:
        classes = label_classes(loss, n_outputs)
        if sets.flip_target not in classes:
            raise ValueError(
                f"LabelFlips(target={sets.flip_target!r}) must be one of the labels of loss={loss!r} with "
                f"{n_outputs} output(s): {classes.tolist()}"
            )


def check_neighbours(
    nb: NeighbourSets, recipe: Recipe, n_outputs: int, y: np.ndarray, *, batches: bool = True
) -> None:
    """`Neighbours` needs the gradient of an added row bounded (clipping, or a domain and labels), no L1
    penalty, labels of the loss that hold every label of ``y`` (the checked labels), and (with ``batches``)
    batches it cannot empty."""
    if not recipe.clips and nb.lower is None:
        raise ValueError(
            "Neighbours adds rows whose gradients must be bounded: clip the per-sample gradients "
            "(clip_value=... or clip_norm=..., as DP-SGD does) or declare the input domain of a row "
            "(Neighbours(k, domain=(lower, upper)), with labels=... for the labels it may carry)"
        )
    if not recipe.clips and recipe.loss == "mse":
        raise ValueError(
            "Neighbours with loss='mse' needs per-sample clipping (clip_value or clip_norm): an added row's "
            "target is unbounded"
        )
    if recipe.l1_penalty:
        raise ValueError("Neighbours does not support l1_penalty; train without it (or use Removals)")
    if nb.labels is not None:
        labels = check_labels(nb.labels, recipe.loss, n_outputs, len(nb.labels), name=ADDED_LABELS)
        missing = np.unique(y[~np.isin(y, labels)])
        if missing.size:
            # a dataset without such a row has the training set as a neighbour by adding it back, so an added
            # row may carry every label a training row carries
            raise ValueError(
                f"Neighbours(labels=...) must hold every label of y (the labels a row of any neighbouring "
                f"dataset may carry): expected a superset of {np.unique(y).tolist()}, got "
                f"{np.unique(labels).tolist()} (missing {missing.tolist()})"
            )
    if batches:
        check_neighbour_batches(recipe, nb)


def _check_domain(nb: NeighbourSets, X: np.ndarray) -> None:
    """Every training row must lie in the declared domain of `Neighbours` (a row outside it is a row that
    could not have been added, and the domain would not bound every neighbour)."""
    outside = np.any((X < nb.lower) | (X > nb.upper), axis=1)
    if np.any(outside):
        row = int(np.flatnonzero(outside)[0])
        raise ValueError(
            f"X[{row}] lies outside Neighbours' domain: the domain must hold every row a dataset may have "
            "(widen it, or clip the per-sample gradients instead)"
        )


def _check_carry(carry: str, recipe: Recipe, sets: InputSets) -> None:
    """The zonotope carries support what they can bound: neither clips per-sample gradients (they sum the
    gradients as forms without forming them per sample); the per-input affine carry knows none of the
    L1 penalty, targeted flips or target boxes either."""
    if carry == "box":
        return
    if sets.removals is not None:
        raise ValueError(f"carry={carry!r} does not support Removals (unlearning); use carry='box'")
    if sets.neighbours is not None:
        raise ValueError(
            f"carry={carry!r} does not support Neighbours (rows added or removed); use carry='box'"
        )
    what = []
    if recipe.clips:
        what.append("per-sample gradient clipping (clip_value / clip_norm)")
    if carry == "affine":
        if recipe.l1_penalty:
            what.append("l1_penalty")
        if sets.flip_target is not None:
            what.append("targeted label flips (LabelFlips(target=...))")
        if sets.target_radius is not None:
            what.append("TargetBox")
    if what:
        alternative = "carry='box'" if recipe.clips else "carry='box' or carry='shared'"
        raise ValueError(f"carry={carry!r} does not support {' or '.join(what)}; use {alternative}")
#: A run expected to take this many seconds or more shows progress by default (``progress=None``).
LONG_RUN_SECONDS = 10.0
#: Seconds per objective solve of a program backend, per row of its program (measured on two moons, 40 rows,
#: [2, 4, 1] and [2, 8, 1], ε = 0.01, two epochs, decomposed and joint, one core: lp 0.12-1.1 ms, milp
#: 0.6-1.2 ms, scip 3.5-9.3 ms, gurobi 0.27-0.32 ms); the larger value, rounded up.
SECONDS_PER_SOLVE = {"lp": 1e-3, "milp": 1e-3, "scip": 1e-2, "gurobi": 3e-4}


def expected_seconds(backend: str, formulation: str, recipe: Recipe, sets: InputSets, n_params: int) -> float:
    """A rough single-core estimate of a certified run's time, to decide whether it shows progress.

    The program backends solve ``2 m`` objectives per program and step: one program per row
    (``decomposed``, ``lagrangian``; twice with a budget or label flips, once for the deviating and once for
    the exact rows) or one over all rows (``joint``, whose solves grow about with the rows); ``hybrid`` adds
    the joint LP.  ``interval`` counts as 0 (milliseconds per epoch).
    """
    if backend == "interval":
        return 0.0
    kinds = 2 if sets.budget is not None or sets.label_flips is not None else 1
    hybrid = 2 if formulation == "hybrid" else 1
    solves = recipe.n_steps * len(sets.nominal) * 2 * n_params * kinds * hybrid
    return solves * SECONDS_PER_SOLVE[backend]


#: ``carry="affine"`` under a ``Budget`` of at most this share of the rows adds (almost) nothing (measured).
AFFINE_BUDGET_SHARE = 0.1


def _warn_affine_without_gain(sets: InputSets, n: int) -> None:
    """A `UserWarning` when ``carry="affine"`` is measured to cost 10-1000x ``carry="box"`` for no gain.

    The affine carry relaxes ``Budget(..., k)`` and label flips to every row deviating, and the box it is
    intersected with uses the budget; with few deviating rows the zonotope's hull is then wider than that
    box almost everywhere.  Measured (two moons, 100 rows, [2, 16, C], 5 epochs; hinge and cross-entropy):
    label flips (``LabelFlips(1)``, ``LabelFlips(5)``, paired ``k = 3``) and budgets of 5-10 rows gave
    mean widths within 1 % of ``carry="box"`` and the same certified accuracy at 10-30x the time (757 s
    against 0.96 s on AGT's 3,000 rows); budgets of 50 or more rows gave 18-40 % narrower boxes.
    """
    k = sets.label_flips if sets.label_flips is not None else sets.budget
    labels = sets.label_flips is not None or sets.flip_labels
    if k is None or k >= n or (not labels and k > AFFINE_BUDGET_SHARE * n):
        return
    what = "label flips" if sets.label_flips is not None else "a Budget" + (" with relabelling" * labels)
    warn_user(
        f"carry='affine' relaxes {what} to every row deviating, so with at most {k} of {n} rows deviating "
        "its zonotope adds (almost) nothing to the box it is intersected with (measured: mean widths within "
        "1% of carry='box' and the same certified accuracy) at 10-1000x the time; use carry='shared', "
        "which bounds the deviating rows directly, or carry='box'"
    )

