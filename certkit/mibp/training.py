"""``certified_training``: per-epoch parameter boxes that contain every reachable training trajectory."""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Sequence
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
from certkit.mibp.affine import CARRIES, AffineCarry
from certkit.mibp.encoding import build_decomposed, build_joint
from certkit.mibp.interval import interval_margin, interval_step, magnitude, pad, sum_with_budget
from certkit.mibp.lagrangian import centre_multipliers
from certkit.mibp.licence import check_gurobi_licence
from certkit.mibp.mlp import MLP, check_labels
from certkit.mibp.perturbation import InputSets, Perturbation
from certkit.mibp.recipe import LOSSES, Recipe, make_recipe
from certkit.mibp.result import CertifiedTrainingResult
from certkit.mibp.solvers import BACKENDS, BackendOptions, SolveStats, check_backend, lp_bounds, solve_program
from certkit.mibp.witnesses import Witnesses
from certkit.parallel import parallel_map, resolve_executor, single_threaded

__all__ = ["BACKENDS", "CARRIES", "FORMULATIONS", "CertifiedTrainingResult", "certified_training"]

FORMULATIONS = ("joint", "decomposed", "hybrid", "lagrangian")


class BoundsOverflowError(FloatingPointError, ValueError):
    """The interval parameter bounds left the float64 range (a `FloatingPointError` and, as a consequence of
    the arguments' sizes, a `ValueError`)."""


def _solve_item(item: tuple) -> dict:
    program, tasks, options, witnesses = item
    return solve_program(program, tasks, options, witnesses)


def _chunks(m: int, parts: int) -> list[list[tuple[int, int]]]:
    tasks = [(p, s) for p in range(m) for s in (1, -1)]
    size = math.ceil(len(tasks) / max(1, parts))
    return [tasks[i : i + size] for i in range(0, len(tasks), size)]


def certified_training(
    model: MLP,
    X: Any,
    y: Any,
    *,
    perturbation: Perturbation,
    loss: str = "hinge",
    epochs: int = 1,
    learning_rate: float | Sequence[float] | Callable[[int], float] = 0.1,
    batch_size: int | None = None,
    shuffle: bool = False,
    drop_last: bool = False,
    momentum: float = 0.0,
    weight_decay: float = 0.0,
    rng: RNGLike = None,
    backend: str = "interval",
    formulation: str = "decomposed",
    carry: str = "box",
    time_limit: float | None = None,
    solver: str | None = None,
    tighten_bounds: bool = False,
    executor: ExecutorArg = None,
    progress: Progress = False,
    verbose: bool = False,
    validation: tuple[Any, Any] | None = None,
    patience: int | None = None,
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
        ``BCEWithLogitsLoss`` for the two cross-entropies).
    epochs : int
        Passes over the data; the result holds the box after each.
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
    rng : None, int or numpy.random.Generator
        Source of the shuffled batch order.
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
    carry : {"box", "affine"}
        What is carried from one step to the next.  ``box``: the parameter box (each step starts from
        a box, which forgets how the parameters depend on each other and on the perturbed inputs).
        ``affine``: additionally a zonotope ``c + G e`` over symbols for the perturbed inputs and for
        earlier remainders, advanced by affine arithmetic through the gradient (sound by
        construction, see `certkit.mibp.affine`); each epoch's box is the box of ``backend`` /
        ``formulation`` intersected with the zonotope's interval hull, so it is never wider than
        with ``box``.  ``Budget`` is relaxed to the per-point hull inside the zonotope (the
        intersected box still uses it).
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
    progress : bool or str
        Show a progress bar per epoch.
    verbose : bool
        Show the solvers' logs (silent by default).
    validation : tuple (X_val, y_val), optional
        A validation split for early stopping (with ``patience``): after each epoch the fraction of
        validation points whose prediction is correct and certified by interval bounds over the box (as
        ``certify_predictions(..., backend="interval")``, exact for one hidden layer) is computed.
        Without ``patience`` the split is only checked.
        ``y_val`` holds the classes `MLP.predict` returns, whatever the loss: -1 / +1 for one output,
        ``0..C-1`` otherwise.
    patience : int, optional
        Stop once that validation score has not improved for ``patience`` epochs (needs
        ``validation``); the result then holds fewer than ``epochs`` epochs.  Select the epoch to use
        with `select_epoch` on the same split.

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
    X = check_array(X, "X", ndim=2)
    if X.shape[1] != model.sizes[0]:
        raise ValueError(f"X has {X.shape[1]} features but the model expects {model.sizes[0]}")
    loss = check_in_options(loss, "loss", LOSSES)
    y = check_labels(y, loss, model.sizes[-1], len(X))
    y_fit = y[:, 0] if loss == "mse" and y.shape[1] == 1 else y
    epochs = check_integer(epochs, "epochs", minimum=1)
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
    )
    backend = check_in_options(backend, "backend", BACKENDS)
    formulation = check_in_options(formulation, "formulation", FORMULATIONS)
    carry = check_in_options(carry, "carry", CARRIES)
    if time_limit is not None:
        time_limit = check_positive(time_limit, "time_limit")
    check_backend(backend, solver)
    if not isinstance(tighten_bounds, bool):
        raise TypeError(f"tighten_bounds must be True or False, got {type(tighten_bounds).__name__}")
    if not isinstance(verbose, bool):
        raise TypeError(f"verbose must be True or False, got {type(verbose).__name__}")
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
        X_val = check_array(validation[0], "X_val", ndim=2, shape=(None, model.sizes[0]))
        y_val = check_labels(
            validation[1], "classes", model.sizes[-1], len(X_val), name="y_val", x_name="X_val"
        )
    sets = perturbation.sets(X)
    if sets.labels_vary and loss == "mse":
        raise ValueError(
            "LabelFlips needs a classification loss (hinge, cross_entropy or binary_cross_entropy)"
        )
    if backend != "interval":
        _check_program_recipe(backend, recipe, sets, model.sizes[-1])
    options = BackendOptions(backend, time_limit, solver, tighten_bounds, verbose)
    early_stop = None if patience is None else (X_val, y_val, patience)

    # interval arithmetic and the nominal run multiply thin matrices: one BLAS thread is faster
    with single_threaded() if backend == "interval" else contextlib.nullcontext():
        return _train(
            model, X, y, y_fit, sets, recipe, options, formulation, carry, executor, progress, early_stop
        )


def _train(model, X, y, y_fit, sets, recipe, options, formulation, carry, executor, progress, early_stop):
    """The certified run once its arguments are checked: the nominal run, then every step of every epoch.

    ``early_stop``: None or ``(X_val, y_val, patience)``.
    """
    epochs, loss, backend = recipe.epochs, recipe.loss, options.backend
    lr = float(recipe.rates[0])
    nominal_path = model.run(X, y_fit, recipe)
    witnesses = Witnesses(model, X, y, y_fit, sets, loss, lr, epochs) if backend != "interval" else None
    affine = AffineCarry(model, sets, y, recipe) if carry == "affine" else None
    lowers, uppers, seconds, stats = [model], [model], [], []
    scores: list[float] = []  # validation certified accuracy after epochs 1, 2, ...
    sizes = model.sizes
    velocity = None  # the velocity box (momentum)
    lower, upper = model, model
    # one pool for every epoch (an int executor), none for interval arithmetic
    with resolve_executor(executor if backend != "interval" else None, n_items=len(X)) as pool:
        for t in range(epochs):
            start = time.perf_counter()
            desc: bool | str = False
            if progress:
                desc = (
                    f"epoch {t + 1}/{epochs}"
                    if isinstance(progress, bool)
                    else f"{progress} epoch {t + 1}/{epochs}"
                )
            st = SolveStats()
            for step in range(recipe.epoch_end(t), recipe.epoch_end(t + 1)):
                if backend == "interval":
                    (newL, newU), velocity = _interval_step(lower, upper, sets, y, recipe, step, velocity)
                else:
                    newL, newU, st = _step(
                        lower, upper, sets, y, loss, lr, formulation, options, pool, desc, (witnesses, t)
                    )
                if affine is not None:
                    aL, aU = affine.step(lower, upper, step)
                    newL, newU = (
                        np.fmax(newL, aL),
                        np.fmin(newU, aU),
                    )  # a non-finite zonotope bound is ignored
                if witnesses is not None:
                    witnesses.check_step(t, newL, newU, backend)
                if np.any(newL > newU):
                    raise RuntimeError(
                        "internal error: empty parameter box; please report this with the inputs"
                    )
                lower, upper = MLP.from_vector(newL, sizes), MLP.from_vector(newU, sizes)
            lowers.append(lower)
            uppers.append(upper)
            seconds.append(time.perf_counter() - start)
            stats.append(st)
            if early_stop is not None:  # the validation score drives early stopping only
                X_val, y_val, patience = early_stop
                pred = nominal_path[t + 1].predict(X_val)
                certified = interval_margin(lower, upper, X_val, pred) > 0
                scores.append(float(np.mean(certified & (pred == y_val))))
                if len(scores) - 1 - int(np.argmax(scores)) >= patience:
                    nominal_path = nominal_path[: t + 2]
                    break
    return CertifiedTrainingResult(
        lower=tuple(lowers),
        upper=tuple(uppers),
        nominal=nominal_path[-1],
        nominal_path=tuple(nominal_path),
        epoch_seconds=np.asarray(seconds),
        solver_stats=tuple(stats),
        backend=backend,
        formulation=formulation if backend != "interval" else "interval",
        loss=loss,
        learning_rate=recipe.learning_rate,
        carry=carry,
        recipe=recipe,
    )


def _check_program_recipe(backend: str, recipe: Recipe, sets: InputSets, n_outputs: int) -> None:
    """The program backends certify plain full-batch GD with the hinge or MSE loss and binary label flips."""
    why = None
    if recipe.loss not in ("hinge", "mse"):
        why = f"loss={recipe.loss!r}"
    elif not recipe.plain:
        why = "a learning-rate schedule, mini-batches, momentum or weight decay"
    elif sets.flip_labels:
        why = "paired poisoning (LabelFlips inside a Budget)"
    elif sets.label_flips is not None and n_outputs != 1:
        why = "label flips between more than two classes"
    if why is not None:
        raise ValueError(
            f"backend={backend!r} does not support {why}; use backend='interval' (with carry='box' or "
            "carry='affine'), which certifies every recipe"
        )


def _interval_step(lower, upper, sets, y, recipe, step, velocity):
    """`interval_step`, refusing bounds that left the float64 range."""
    with np.errstate(over="ignore", invalid="ignore"):
        (iL, iU), velocity = interval_step(lower, upper, sets, y, recipe, step, velocity)
    if not (np.all(np.isfinite(iL)) and np.all(np.isfinite(iU))):
        raise BoundsOverflowError(
            "the parameter bounds overflowed (interval bounds are no longer finite); certify fewer epochs "
            "or use a smaller epsilon or learning_rate"
        )
    return (iL, iU), velocity


def _step(
    lower, upper, sets, y, loss, lr, formulation, options, executor=None, desc=False, witness=(None, 0)
):
    """Bounds (vectors) on the parameters after one step from the box [lower, upper], plus solver stats.

    ``witness = (Witnesses or None, epoch)``: known feasible points for the runtime guard.
    """
    plain = make_recipe(len(y), loss=loss, epochs=1, learning_rate=lr)
    (iL, iU), _ = _interval_step(lower, upper, sets, y, plain, 0, None)
    if options.backend == "interval":
        return iL, iU, SolveStats()
    if formulation == "joint":
        (sL, sU), st = _solve_epoch_joint(lower, upper, sets, y, loss, lr, options, executor, desc, witness)
    else:
        mu = None
        if formulation == "lagrangian":
            # inputs at the centres of their sets: the observed value of a missing entry is a placeholder
            centre = 0.5 * sets.lower + 0.5 * sets.upper
            mu = centre_multipliers(lower.to_vector(), upper.to_vector(), lower.sizes, centre, y, loss, lr)
        (sL, sU), st, per_sample = _solve_epoch_decomposed(
            lower, upper, sets, y, loss, lr, options, executor, desc, witness, mu
        )
    if formulation == "hybrid":
        lp = BackendOptions("lp", options.time_limit, None, options.tighten, options.verbose)
        cuts = None if sets.budget is not None or sets.label_flips is not None else per_sample
        (jL, jU), jst = _solve_epoch_joint(lower, upper, sets, y, loss, lr, lp, executor, desc, witness, cuts)
        sL, sU = np.maximum(sL, jL), np.minimum(sU, jU)
        st = st + jst
    return np.maximum(sL, iL), np.minimum(sU, iU), st


def _solve_epoch_joint(lower, upper, sets, y, loss, lr, options, executor, desc, witness, cuts=None):
    m = lower.n_params
    tight = lp_bounds if options.tighten else None
    program = build_joint(lower, upper, sets, y, loss, lr, tighten=tight, cuts=cuts)
    if options.backend == "gurobi":
        check_gurobi_licence(
            program,
            lambda lo, up: build_joint(lo, up, sets, y, loss, lr, tighten=tight, cuts=None),
            lower,
            upper,
            decomposed=lambda: build_decomposed(lower, upper, sets, 0, y[0], loss, lr, tighten=tight),
        )
    witnesses, t = witness
    values = None if witnesses is None else witnesses.joint(t)
    parts = 1 if executor is None else min(2 * m, 32)
    chunks = _chunks(m, parts)
    results = parallel_map(
        _solve_item, [(program, c, options, values) for c in chunks], executor=executor, progress=desc
    )
    L, U = np.empty(m), np.empty(m)
    for chunk, res in zip(chunks, results):
        for (p, s), v in zip(chunk, res["bounds"]):
            (L if s > 0 else U)[p] = v
    return (L, U), SolveStats.of(results, 1)


def _solve_epoch_decomposed(lower, upper, sets, y, loss, lr, options, executor, desc, witness, mu=None):
    """Per-sample programs summed; ``mu`` (array ``(n, m, m)``, zero-sum over the samples): Lagrangian
    multipliers, ``mu[k, p] · θ`` added to sample ``k``'s objective ``p`` (`certkit.mibp.lagrangian`)."""
    m = lower.n_params
    n = len(y)
    tight = lp_bounds if options.tighten else None
    witnesses, t = witness
    # (input sets, label sign, exact inputs) of each program: first the perturbed sets with the given
    # labels; then the flipped labels (LabelFlips) or the unperturbed inputs (Budget)
    kinds = [(sets, 1.0, False)]
    budget = sets.budget
    if sets.label_flips is not None:
        budget = sets.label_flips
        kinds.append((sets, -1.0, False))
    elif budget is not None:
        kinds.append((InputSets.exact(sets.nominal), 1.0, True))
    programs, values = [], []
    for kind_sets, sign, exact in kinds:
        for k in range(n):
            label = -y[k] if sign < 0 else y[k]
            mu_k = None if mu is None else mu[k]
            programs.append(
                build_decomposed(lower, upper, kind_sets, k, label, loss, lr, tighten=tight, multipliers=mu_k)
            )
            if witnesses is not None:
                values.append(witnesses.decomposed(t, k, flip=sign < 0, exact=exact, multipliers=mu_k))
    if options.backend == "gurobi":
        big = max(range(len(programs)), key=lambda r: programs[r].n_vars)
        kind_sets, sign, _ = kinds[big // n]
        k = big % n
        label = -y[k] if sign < 0 else y[k]
        check_gurobi_licence(
            programs[big],
            lambda lo, up: build_decomposed(lo, up, kind_sets, k, label, loss, lr, tighten=tight),
            lower,
            upper,
        )
    tasks = _chunks(m, 1)[0]
    items = [(p, tasks, options, values[r] if values else None) for r, p in enumerate(programs)]
    results = parallel_map(_solve_item, items, executor=executor, progress=desc)
    lo = np.empty((len(programs), m))
    hi = np.empty((len(programs), m))
    for r, res in enumerate(results):
        for (p, s), v in zip(tasks, res["bounds"]):
            (lo if s > 0 else hi)[r, p] = v
    if sets.label_flips is not None:
        (NL, NU), (PL, PU) = (lo[:n], hi[:n]), (lo[n:], hi[n:])
    elif budget is not None:
        (PL, PU), (NL, NU) = (lo[:n], hi[:n]), (lo[n:], hi[n:])
    else:
        PL, PU = NL, NU = lo, hi
    SL, SU = sum_with_budget(PL, PU, NL, NU, budget)
    bounds = pad(SL / n, SU / n, magnitude(SL, SU) / n, 1)
    return bounds, SolveStats.of(results, len(programs)), (lo, hi)
