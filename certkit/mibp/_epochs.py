"""The epoch loop of `certified_training`: the nominal run, then every gradient step bounded from the
previous box (interval arithmetic or the programs, intersected with a zonotope carry's hull), each epoch's
box kept."""

from __future__ import annotations

import time

import numpy as np

from certkit._warnings import warn_user
from certkit.mibp._setup import Run
from certkit.mibp.certification.diagnostics import (
    growth_drivers,
    lost_epoch,
    overflow_advice,
    vacuity_message,
)
from certkit.mibp.certification.result import CertifiedTrainingResult
from certkit.mibp.enclosures.affine import AffineCarry
from certkit.mibp.enclosures.influence import InfluenceEnclosure
from certkit.mibp.enclosures.interval import interval_margin
from certkit.mibp.enclosures.sgd_step import BoundsOverflowError, interval_step
from certkit.mibp.enclosures.shared import SharedCarry
from certkit.mibp.problem.mlp import MLP
from certkit.mibp.programs.solvers import SolveStats
from certkit.mibp.programs.steps import check_gurobi_upfront, program_step
from certkit.mibp.programs.witnesses import Witnesses
from certkit.parallel import _progress_bar

__all__ = ["train_run"]


class _Stepper:
    """Bounds one gradient step from the current parameter box: interval arithmetic or the programs, then
    intersected with the affine carry's hull; every box is checked against the witnesses (programs)."""

    def __init__(self, run: Run, pool) -> None:
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
        self.influence = None  # the influence enclosure's per-step boxes, when it runs
        if run.carry == "influence":
            self.influence = InfluenceEnclosure(run.model, run.X, run.y_fit, recipe, run.sets)
            self.influence.run()
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
        if self.influence is not None:
            iL, iU = self.influence.step_boxes[step]
            lo, hi = np.fmax(lo, iL), np.fmin(hi, iU)
        if self.witnesses is not None:
            self.witnesses.check_step(epoch, lo, hi, run.options.backend)
        if np.any(lo > hi):
            raise RuntimeError("internal error: empty parameter box; please report this with the inputs")
        return MLP.from_vector(lo, lower.sizes), MLP.from_vector(hi, lower.sizes), stats


def train_run(run: Run, pool, progress: bool | str) -> CertifiedTrainingResult:
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
            try:
                lower, upper, st = step_box(lower, upper, step, t, desc)
            except BoundsOverflowError as exc:
                if bar is not None:
                    bar.close()
                done = _result(run, lowers, uppers, nominal_path[: t + 1], seconds, stats, None)
                raise BoundsOverflowError(
                    f"the parameter bounds overflowed (left the float64 range) at step "
                    f"{step - recipe.epoch_end(t) + 1} of epoch {t + 1} of {recipe.epochs}; the {t} finite "
                    "epoch(s) are in this exception's .result. "
                    f"What drives the growth in this run: {growth_drivers(recipe, run.sets)}. Certify "
                    f"{overflow_advice(recipe, run.sets)}",
                    result=done,
                    epoch=t + 1,
                ) from exc
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
    path = tuple(nominal_path)
    lost = lost_epoch(tuple(lowers), tuple(uppers), path, run.X, run.y_fit, recipe.loss, step_box.influence)
    result = _result(run, lowers, uppers, path, seconds, stats, lost, step_box.influence)
    if lost is not None:
        drivers = growth_drivers(recipe, run.sets)
        warn_user(vacuity_message(lost, result.epochs, result.mean_widths(), drivers, recipe.loss))
    return result


def _result(
    run: Run, lowers, uppers, path, seconds, stats, lost: int | None, influence=None
) -> CertifiedTrainingResult:
    backend = run.options.backend
    return CertifiedTrainingResult(
        lower=tuple(lowers),
        upper=tuple(uppers),
        nominal=path[-1],
        nominal_path=tuple(path),
        epoch_seconds=np.asarray(seconds),
        solver_stats=tuple(stats),
        backend=backend,
        formulation=run.formulation if backend != "interval" else "interval",
        loss=run.recipe.loss,
        learning_rate=run.recipe.learning_rate,
        carry=run.carry,
        recipe=run.recipe,
        features=run.features,
        certification_lost=lost,
        influence=influence,
        auto_carry=run.auto,
    )


def _progress_label(progress, epoch: int, epochs: int) -> bool | str:
    if not progress:
        return False
    label = f"epoch {epoch + 1}/{epochs}"
    return label if isinstance(progress, bool) else f"{progress}, {label}"
