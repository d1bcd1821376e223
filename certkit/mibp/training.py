"""``certified_training``: per-epoch parameter boxes that contain every reachable training trajectory."""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from certkit._typing import ExecutorArg, Progress, RNGLike
from certkit._validation import (
    check_allocation,
    check_array,
    check_in_options,
    check_integer,
    check_positive,
    check_progress,
)
from certkit.mibp.certification.result import CertifiedTrainingResult
from certkit.mibp.enclosures.affine import AffineCarry
from certkit.mibp.enclosures.features import FrozenFeatures
from certkit.mibp.enclosures.interval import interval_margin
from certkit.mibp.enclosures.sgd_step import interval_step
from certkit.mibp.enclosures.shared import SharedCarry
from certkit.mibp.problem.losses import check_labels, label_classes
from certkit.mibp.problem.mlp import MLP
from certkit.mibp.problem.perturbation import InputSets, Perturbation
from certkit.mibp.problem.recipe import LOSSES, Recipe, make_recipe
from certkit.mibp.programs.solvers import BACKENDS, BackendOptions, SolveStats, check_backend
from certkit.mibp.programs.steps import check_gurobi_upfront, check_program_recipe, program_step
from certkit.mibp.programs.witnesses import Witnesses
from certkit.parallel import _progress_bar, resolve_executor, single_threaded

__all__ = ["BACKENDS", "CARRIES", "FORMULATIONS", "CertifiedTrainingResult", "certified_training"]

FORMULATIONS = ("joint", "decomposed", "hybrid", "lagrangian")
CARRIES = ("box", "affine", "shared")


def certified_training(
    model: MLP,
    X: Any,
    y: Any,
    *,
    perturbation: Perturbation,
    loss: str,
    epochs: int | None = None,
    learning_rate: float | Sequence[float] | Callable[[int], float] = 0.1,
    batch_size: int | None = None,
    shuffle: bool = False,
    drop_last: bool = False,
    momentum: float = 0.0,
    weight_decay: float = 0.0,
    l1_penalty: float = 0.0,
    clip_value: float | None = None,
    clip_norm: float | None = None,
    rng: RNGLike = None,
    batches: Sequence[Sequence[Any]] | None = None,
    backend: str = "interval",
    formulation: str = "decomposed",
    carry: str = "box",
    chunk_size: int | None = None,
    time_limit: float | None = None,
    solver: str | None = None,
    tighten_bounds: bool = False,
    executor: ExecutorArg = None,
    progress: Progress | None = None,
    verbose: bool = False,
    validation: tuple[Any, Any] | None = None,
    patience: int | None = None,
    features: Any = None,
) -> CertifiedTrainingResult:
    """Bound every parameter of SGD training over all datasets allowed by ``perturbation``.

    Parameters
    ----------
    model : MLP
        The initial network θ_0 (fixed, not perturbed).
    X : array (n, d)
        Observed training inputs.
    y : array (n,) or (n, C)
        Labels: {-1, +1} for the binary hinge (one output), integers ``0..C-1`` for the
        multi-class hinge and for cross-entropy (``C >= 2`` outputs), {0, 1} for binary
        cross-entropy (one output), real targets for ``loss="mse"``.
    perturbation : Perturbation
        Which training sets could have been the real one (`FeatureBox`, `MissingValues`,
        `OrdinalShift`, `Budget`, `LabelFlips`, or a composition ``a & b``; paired poisoning of at
        most ``k`` points: ``Budget(FeatureBox(eps) & LabelFlips(1), k)``).
    loss : {"hinge", "mse", "cross_entropy", "binary_cross_entropy"}
        Mean training loss of each batch ``J = (1/|B|) Σ_{k∈B} ℓ_k`` (PyTorch's ``CrossEntropyLoss`` and
        ``BCEWithLogitsLoss`` for the two cross-entropies).  Required: the boxes are for the loss the
        model is trained with, and no loss can be read off the labels (±1 labels fit the hinge, MSE and,
        as 0/1, binary cross-entropy alike).
    epochs : int, optional
        Passes over the data; the result holds the box after each (default 1, or one per entry of
        ``batches``).
    learning_rate : float, sequence or callable
        A constant rate λ > 0, one rate per gradient step, or a callable ``step -> rate`` (steps counted
        from 0 over all gradient steps; `InverseDecay` is ``lr / (1 + decay * step)`` with a floor).
    batch_size : int, optional
        Rows per gradient step (None: full batch, one step per epoch).
    shuffle : bool
        Draw a new order of the rows every epoch from ``rng``; the order is drawn once, stored in
        ``result.recipe`` and the boxes hold for that order.
    drop_last : bool
        Drop each epoch's last batch when it is incomplete.
    momentum : float
        Heavy-ball momentum in ``[0, 1)`` (``torch.optim.SGD(momentum=...)``); the velocity gets its own box.
    weight_decay : float
        L2 coefficient added to the gradient (``torch.optim.SGD(weight_decay=...)``).
    l1_penalty : float
        Coefficient λ₁ of an L1 penalty ``λ₁ ‖θ‖₁``: its subgradient ``λ₁ sign(θ)`` (``sign(0) = 0``) is
        added to every step's gradient (AGT's ``l1_reg``).  ``carry="box"`` and ``"shared"``.
    clip_value, clip_norm : float, optional
        Per-sample gradient clipping before the batch mean, as in DP-SGD: ``clip_value`` clips every entry
        of each sample's gradient to ``[-clip_value, clip_value]`` (AGT's ``clip_method="clamp"``),
        ``clip_norm`` scales each sample's whole gradient to ℓ2 norm at most ``clip_norm``
        (``g min(1, clip_norm / (‖g‖₂ + 1e-6))``, Opacus' flat clipping; AGT's ``"norm"`` clips each
        parameter tensor separately instead).  At most one; ``carry="box"`` only (the carries sum the
        gradients as forms without forming them per sample).  Clipping bounds each sample's influence,
        which is what keeps label-flip certificates non-trivial on large batches.
    rng : None, int or numpy.random.Generator
        Source of the shuffled batch order.
    batches : sequence of sequences of index arrays, optional
        The batch order of the run you trained, instead of one drawn here: ``batches[e][s]`` holds the row
        indices (into ``X``) of the ``s``-th gradient step of epoch ``e`` (lists, NumPy arrays or torch
        tensors of integers).  Record them in your own loop, e.g. ``for idx in DataLoader(range(n),
        batch_size=32, shuffle=True, generator=g)`` with one list of ``idx`` per epoch; the nominal run
        then is your run (``result.nominal`` equals the model your loop trained, up to float rounding),
        and the boxes hold for that order.  Each batch lists a row at most once (no sampling with
        replacement), every epoch has the same number of batches, ``epochs`` (if given) equals
        ``len(batches)``; ``batch_size`` and ``drop_last``, if given, must describe these batches (as a
        ``DataLoader``'s), ``shuffle`` only records that the order was shuffled.
    backend : {"interval", "gurobi", "scip", "milp", "lp"}
        ``interval``: interval arithmetic (fast, loosest; every recipe). ``gurobi`` / ``scip``: exact
        mixed-integer bilinear programs. ``milp``: McCormick envelopes + binaries (HiGHS directly, or the
        cvxpy ``solver``). ``lp``: its LP relaxation.  The program backends certify full-batch gradient
        descent with a constant rate, the hinge or MSE loss and input perturbations or binary label
        flips; other recipes raise a `ValueError` naming the backends that support them.
    formulation : {"decomposed", "joint", "hybrid", "lagrangian"}
        ``joint``: one program over all samples with shared θ (tightest); ``decomposed``: one program
        per sample with its own copy of θ (a sound relaxation that scales linearly in n);
        ``hybrid``: each step's decomposed box (with ``backend``) intersected with the box of the joint
        LP relaxation (McCormick, relaxed binaries; HiGHS) to which the per-sample decomposed bounds
        are added as constraints (without ``Budget``/``LabelFlips``).  All are sound, so the result
        is: the decomposed programs are tight while the parameter box is small (exact when it is a
        point), the joint LP keeps the coupling through the shared θ that the decomposition drops
        once the box has grown.  ``lagrangian``: the decomposed programs with a linear term
        ``μ_k · θ`` added to sample ``k``'s objectives, ``Σ_k μ_k = 0`` exactly (sound for any such μ),
        ``μ_k`` from the per-sample Jacobians of the step at the box centre: same program sizes as
        ``decomposed``, much of the coupling restored.  Ignored by ``interval``.
    carry : {"box", "affine", "shared"}
        What is carried from one step to the next.  ``box``: the parameter box (each step starts from
        a box, which forgets how the parameters depend on each other and on the perturbed inputs).
        ``affine``: additionally a zonotope ``c + G e`` over symbols for the perturbed inputs and for
        earlier remainders, advanced by affine arithmetic through the gradient (sound by
        construction, see `certkit.mibp.enclosures.affine`); ``Budget`` is relaxed to the per-point hull
        inside
        the zonotope (the intersected box still uses it); for small runs (hundreds of rows).
        ``shared``: a zonotope over symbols of the parameters only, shared by every sample, with the
        softmax linearised and the deviating rows bounded by the change of their gradient
        (`certkit.mibp.enclosures.shared`); for runs of thousands of rows.  With either zonotope each epoch's
        box is the box of ``backend`` / ``formulation`` intersected with the zonotope's interval
        hull, so it is never wider than with ``box``.
    chunk_size : int, optional
        Rows bounded together when a batch is bounded by interval arithmetic or a carry: each batch is
        processed in chunks of this many rows and only what the bound needs is kept between chunks (running
        sums, each parameter's ``k`` largest deviations, the shared carry's accumulated forms), so the
        memory is about ``chunk_size x parameters`` whatever the batch size.  None (default) chooses it
        from the memory this process can still use (about 1/8 of it, at most 256 MiB of per-row arrays).
        The chunk size changes only the memory (and a little the time): the boxes are the same up to the
        rounding of sums taken in another order, which their padding covers for every order.
    time_limit : float, optional
        Seconds per solve; a solve stopped early contributes its dual bound.
    solver : str, optional
        cvxpy solver for ``milp`` / ``lp`` (default ``"HIGHS"``).
    tighten_bounds : bool
        Tighten the bounds of every uncertain ReLU pre-activation and hinge term by the LP relaxation
        of the program written so far (optimisation-based bound tightening, HiGHS through cvxpy)
        before encoding it: fewer binaries and tighter big-M constants at the cost of 2 LPs per
        uncertain unit.  With one hidden layer the LP cannot improve the first-layer bounds (each is
        a sum of independent products), so the gain comes from the hinge terms and deeper layers.
        Program backends only.
    executor : None, int or executor-like
        Runs the independent solves in parallel (see `certkit.parallel`).
    progress : bool, str or None
        Show a progress bar per epoch (a string labels it).  None (the default): a bar for runs of the
        program backends expected to take 10 s or more on one core, none otherwise (``interval`` runs
        take milliseconds per epoch): the run solves ``2 m`` objectives (``m`` parameters) per row and
        epoch, twice that with ``Budget``, ``LabelFlips`` or ``formulation="hybrid"``, at the measured
        time per solve of the backend (about 1 ms for ``lp`` and ``milp``, 10 ms for ``scip``, 0.3 ms
        for ``gurobi``; ``certkit.mibp.training.SECONDS_PER_SOLVE``).  False: never.
    verbose : bool
        Show the solvers' logs (silent by default).
    validation : tuple (X_val, y_val), optional
        A validation split for early stopping (with ``patience``): after each epoch the fraction of
        validation points whose prediction is correct and certified by interval bounds over the box (as
        ``certify_predictions(..., backend="interval")``, exact for one hidden layer) is computed.
        Without ``patience`` the split is only checked.
        ``y_val`` holds the classes `MLP.predict` returns: -1 / +1 for one output (0 / 1 after binary
        cross-entropy, as ``y``), ``0..C-1`` otherwise.
    patience : int, optional
        Stop once that validation score has not improved for ``patience`` epochs (needs
        ``validation``); the result then holds fewer than ``epochs`` epochs.  Select the epoch to use
        with `select_epoch` on the same split.
    features : torch.nn.Sequential, optional
        A frozen feature extractor in front of ``model`` (fine-tuning a head behind frozen convolutions):
        ``X`` holds its raw inputs, one row per sample in any shape (e.g. ``(n, 1, 28, 28)`` images), the
        perturbation applies to them (flattened: ``FeatureBox(eps)`` is a pixel budget), and ``model``
        is trained on the extractor's outputs.  The extractor is used as a float64 copy in eval mode and
        bounded by interval propagation (`certkit.mibp.enclosures.features`: convolutions, linear layers,
        ReLU, max / average pooling, flatten, eval-mode batch norm, dropout, identity; any other layer
        raises `TypeError` naming it); rows no perturbation touches keep their exact features.
        ``validation`` then holds raw inputs too, and `certify_predictions` takes raw test inputs.

    Returns
    -------
    CertifiedTrainingResult
        Per-epoch boxes with ``lower[t] <= θ_t(D') <= upper[t]`` for every allowed ``D'``.

    Notes
    -----
    Program backends widen every varying parameter or input box narrower than
    ``1e-6 * max(1, |bound|)`` (about 1e3 × the solvers' feasibility tolerance) to that width
    around its midpoint before encoding it: below it the solvers drop the big-M coefficients at
    ReLU / hinge kinks and report wrong "optimal" bounds.  The widened box is a superset, so the
    certificate stays sound; for such tiny perturbations it is as loose as at that width.
    Constants folded in floating point carry a rounding-error bound, so a ReLU or hinge side is fixed
    only when the padded bounds exclude the kink, and the boxes contain the float trajectory of
    `MLP.train`.  A solve that ends with an error status contributes no solver bound (the LP
    relaxation's, or the interval bound, is used instead).  Programs whose coefficients exceed
    `MAX_SCALE` (1e6) are not solved: their objectives keep the interval bounds (``rejected`` in
    ``solver_stats``).  Every solver bound is checked against the trajectories of the nominal data and a
    few perturbed datasets; one they beat raises `UnsoundBoundError` with the program attached.
    """
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
    if extractor is not None:  # the perturbation acts on the raw inputs; the head sees the features
        sets = extractor.feature_sets(sets)
        X = sets.nominal
    _check_perturbation(sets, loss, model.sizes[-1])
    _check_carry(carry, recipe, sets)
    if backend != "interval":
        check_program_recipe(backend, recipe, sets, model.sizes[-1])
    if carry == "affine":
        _warn_affine_without_gain(sets, len(X))
    if progress is None:
        progress = expected_seconds(backend, formulation, recipe, sets, model.n_params) >= LONG_RUN_SECONDS
    run = _Run(
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
    )
    # interval arithmetic and the nominal run multiply thin matrices: one BLAS thread is faster
    with single_threaded() if backend == "interval" else contextlib.nullcontext():
        # one pool for every epoch (an int executor), none for interval arithmetic
        with resolve_executor(executor if backend != "interval" else None, n_items=len(X)) as pool:
            return _train(run, pool, progress)


def _check_perturbation(sets: InputSets, loss: str, n_outputs: int) -> None:
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


def _check_carry(carry: str, recipe: Recipe, sets: InputSets) -> None:
    """The zonotope carries support what they can bound: neither clips per-sample gradients (they sum the
    gradients as forms without forming them per sample); the per-input affine carry knows none of the
    L1 penalty, targeted flips or target boxes either."""
    if carry == "box":
        return
    if sets.removals is not None:
        raise ValueError(f"carry={carry!r} does not support Removals (unlearning); use carry='box'")
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
    warnings.warn(
        f"carry='affine' relaxes {what} to every row deviating, so with at most {k} of {n} rows deviating "
        "its zonotope adds (almost) nothing to the box it is intersected with (measured: mean widths within "
        "1% of carry='box' and the same certified accuracy) at 10-1000x the time; use carry='shared', "
        "which bounds the deviating rows directly, or carry='box'",
        UserWarning,
        stacklevel=3,
    )


@dataclass(frozen=True)
class _Run:
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


class _Stepper:
    """Bounds one gradient step from the current parameter box: interval arithmetic or the programs, then
    intersected with the affine carry's hull; every box is checked against the witnesses (programs)."""

    def __init__(self, run: _Run, pool) -> None:
        self.run, self.pool = run, pool
        recipe, backend = run.recipe, run.options.backend
        self.witnesses = None
        if backend == "gurobi" and not run.options.tighten and recipe.n_steps > 1:
            check_gurobi_upfront(
                run.model, run.sets, run.y, recipe.loss, float(recipe.rates[0]), run.formulation
            )
        if backend != "interval":
            lr = float(recipe.rates[0])
            self.witnesses = Witnesses(
                run.model, run.X, run.y, run.y_fit, run.sets, recipe.loss, lr, recipe.epochs
            )
        self.affine = None
        if run.carry == "shared":
            self.affine = SharedCarry(run.model, run.sets, run.y, recipe, chunk_size=run.chunk_size)
        elif run.carry == "affine":
            self.affine = AffineCarry(run.model, run.sets, run.y, recipe)
        self.velocity = None  # the velocity box (momentum)

    def __call__(self, lower: MLP, upper: MLP, step: int, epoch: int, desc) -> tuple[MLP, MLP, SolveStats]:
        run, stats = self.run, SolveStats()
        if run.options.backend == "interval":
            (lo, hi), self.velocity = interval_step(
                lower, upper, run.sets, run.y, run.recipe, step, self.velocity, run.chunk_size
            )
        else:  # full-batch gradient descent: one step per epoch
            lo, hi, stats = program_step(
                lower,
                upper,
                run.sets,
                run.y,
                run.recipe.loss,
                float(run.recipe.rates[step]),
                run.formulation,
                run.options,
                self.pool,
                desc,
                (self.witnesses, epoch),
            )
        if self.affine is not None:
            aL, aU = self.affine.step(lower, upper, step)
            lo, hi = np.fmax(lo, aL), np.fmin(hi, aU)  # a non-finite zonotope bound is ignored
        if self.witnesses is not None:
            self.witnesses.check_step(epoch, lo, hi, run.options.backend)
        if np.any(lo > hi):
            raise RuntimeError("internal error: empty parameter box; please report this with the inputs")
        return MLP.from_vector(lo, lower.sizes), MLP.from_vector(hi, lower.sizes), stats


def _train(run: _Run, pool, progress) -> CertifiedTrainingResult:
    """The nominal run, then each epoch's steps from the previous box, each epoch's box kept."""
    recipe, model = run.recipe, run.model
    nominal_path = model.run(run.X, run.y_fit, recipe)
    step_box = _Stepper(run, pool)
    lowers, uppers, seconds, stats = [model], [model], [], []
    scores: list[float] = []  # validation certified accuracy after epochs 1, 2, ...
    lower, upper = model, model
    # the programs draw a bar per epoch over their solves; interval steps get one bar over all steps
    bar = _progress_bar(recipe.n_steps, progress) if run.options.backend == "interval" else None
    for t in range(recipe.epochs):
        start = time.perf_counter()
        desc = _progress_label(progress, t, recipe.epochs)
        for step in range(recipe.epoch_end(t), recipe.epoch_end(t + 1)):
            lower, upper, st = step_box(lower, upper, step, t, desc)
            if bar is not None:
                bar.update(1)
        lowers.append(lower)
        uppers.append(upper)
        seconds.append(time.perf_counter() - start)
        stats.append(st)
        if run.early_stop is not None:  # the validation score drives early stopping only
            X_val, y_val, patience = run.early_stop
            pred = nominal_path[t + 1].predict(X_val)
            certified = interval_margin(lower, upper, X_val, pred) > 0
            scores.append(float(np.mean(certified & (pred == y_val))))
            if len(scores) - 1 - int(np.argmax(scores)) >= patience:
                nominal_path = nominal_path[: t + 2]
                break
    if bar is not None:
        bar.close()
    backend = run.options.backend
    return CertifiedTrainingResult(
        lower=tuple(lowers),
        upper=tuple(uppers),
        nominal=nominal_path[-1],
        nominal_path=tuple(nominal_path),
        epoch_seconds=np.asarray(seconds),
        solver_stats=tuple(stats),
        backend=backend,
        formulation=run.formulation if backend != "interval" else "interval",
        loss=recipe.loss,
        learning_rate=recipe.learning_rate,
        carry=run.carry,
        recipe=recipe,
        features=run.features,
    )


def _progress_label(progress, epoch: int, epochs: int) -> bool | str:
    if not progress:
        return False
    label = f"epoch {epoch + 1}/{epochs}"
    return label if isinstance(progress, bool) else f"{progress} {label}"
