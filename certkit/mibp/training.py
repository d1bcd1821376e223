"""``certified_training``: per-epoch parameter boxes that contain every reachable training trajectory."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

from certkit._typing import ExecutorArg, Progress, RNGLike
from certkit.mibp._epochs import train_run
from certkit.mibp._setup import (
    CARRIES,
    FORMULATIONS,
    LONG_RUN_SECONDS,
    SECONDS_PER_SOLVE,
    expected_seconds,
    setup_run,
)
from certkit.mibp.certification.result import CertifiedTrainingResult
from certkit.mibp.problem.mlp import MLP
from certkit.mibp.problem.perturbation import Perturbation
from certkit.mibp.programs.solvers import BACKENDS
from certkit.parallel import resolve_executor, single_threaded

__all__ = [
    "BACKENDS",
    "CARRIES",
    "FORMULATIONS",
    "LONG_RUN_SECONDS",
    "SECONDS_PER_SOLVE",
    "CertifiedTrainingResult",
    "certified_training",
    "expected_seconds",
]


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
    carry: str = "auto",
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
        most ``k`` points: ``Budget(FeatureBox(eps) & LabelFlips(1), k)``; `TargetBox` for regression;
        `Removals` for unlearning; `Neighbours` for rows added or removed, differential privacy's
        neighbouring datasets).
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
    carry : {"auto", "box", "affine", "shared", "influence"}
        What is carried from one step to the next.  ``auto`` (the default): the tightest carry that bounds
        the run — ``influence`` where it does (a linear model trained with cross-entropy or binary
        cross-entropy under `LabelFlips`, every recipe option but clipping and the L1 penalty), ``box``
        otherwise; ``result.carry`` and ``result.summary()`` name the one chosen.  ``box``: the parameter box
        (each step starts from a box, which forgets how the parameters depend on each other and on the
        perturbed inputs).  ``influence``: the deviation from the nominal run tracked to first order
        exactly (each changed row's influence through the products of the steps' Jacobians, never boxed in
        between), the higher-order remainder bounded from the energy of the deviation, the worst changed
        rows a top-k over rows (`certkit.mibp.enclosures.influence`); `certify_predictions` then bounds each
        query's margin by the worst rows for that query.  ``affine``: additionally a zonotope ``c + G e``
        over symbols for the perturbed inputs and for earlier remainders, advanced by affine arithmetic
        through the gradient (sound by construction, see `certkit.mibp.enclosures.affine`); ``Budget`` is
        relaxed to the per-point hull inside the zonotope (the intersected box still uses it); for small
        runs (hundreds of rows).  ``shared``: a zonotope over symbols of the parameters only, shared by
        every sample, with the softmax linearised and the deviating rows bounded by the change of their
        gradient (`certkit.mibp.enclosures.shared`); for runs of thousands of rows.  With a zonotope or the
        influence enclosure each epoch's box is the box of ``backend`` / ``formulation`` intersected with
        the carry's, so it is never wider than with ``box``.
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
    run, progress = setup_run(
        model,
        X,
        y,
        perturbation=perturbation,
        loss=loss,
        epochs=epochs,
        learning_rate=learning_rate,
        batch_size=batch_size,
        shuffle=shuffle,
        drop_last=drop_last,
        momentum=momentum,
        weight_decay=weight_decay,
        l1_penalty=l1_penalty,
        clip_value=clip_value,
        clip_norm=clip_norm,
        rng=rng,
        batches=batches,
        backend=backend,
        formulation=formulation,
        carry=carry,
        chunk_size=chunk_size,
        time_limit=time_limit,
        solver=solver,
        tighten_bounds=tighten_bounds,
        executor=executor,
        progress=progress,
        verbose=verbose,
        validation=validation,
        patience=patience,
        features=features,
    )
    interval = run.options.backend == "interval"
    # interval arithmetic and the nominal run multiply thin matrices: one BLAS thread is faster
    with single_threaded() if interval else contextlib.nullcontext():
        # one pool for every epoch (an int executor), none for interval arithmetic
        with resolve_executor(None if interval else executor, n_items=len(run.X)) as pool:
            return train_run(run, pool, progress)
