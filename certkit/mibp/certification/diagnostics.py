"""When certified training stops certifying anything: the epoch from which the boxes certify no training
row's prediction (or bound no training output usefully), what in the run drives the growth of the boxes,
and the advice of `BoundsOverflowError` — naming only what the run has."""

from __future__ import annotations

import numpy as np

from certkit.mibp.enclosures.interval import interval_forward, interval_margin
from certkit.mibp.problem.input_sets import InputSets
from certkit.mibp.problem.mlp import MLP
from certkit.mibp.problem.recipe import Recipe

__all__ = ["growth_drivers", "lost_epoch", "overflow_advice", "vacuity_message"]

#: Training rows whose influence margins are scored when the boxes certify none (a run whose per-query
#: certificates hold is not one that lost certification).
INFLUENCE_ROWS = 64
#: Rows bounded at once when the training rows are scored (keeps the interval arrays small).
_ROWS = 4096
#: A regression run's boxes mean nothing once the outputs' bounds on the training rows are, on average, wider
#: than this many times the range of the targets.
REGRESSION_WIDTH_FACTOR = 1e3


def _useful(lower: MLP, upper: MLP, nominal: MLP, X: np.ndarray, y: np.ndarray, loss: str) -> bool:
    """Whether the box ``[lower, upper]`` still says something on the training rows ``X``: it certifies the
    prediction of at least one row (classification), or its output bounds are on average narrower than
    `REGRESSION_WIDTH_FACTOR` times the range of the targets (``loss="mse"``)."""
    with np.errstate(over="ignore", invalid="ignore"):
        if not (np.all(np.isfinite(lower.to_vector())) and np.all(np.isfinite(upper.to_vector()))):
            return False
        if loss == "mse":
            span = float(np.ptp(y)) + 1.0
            widths = []
            for start in range(0, len(X), _ROWS):
                rows = X[start : start + _ROWS]
                _, pre = interval_forward(lower, upper, rows, rows)
                widths.append((pre[-1][1] - pre[-1][0]).mean(axis=1))
            return bool(np.mean(np.concatenate(widths)) < REGRESSION_WIDTH_FACTOR * span)
        for start in range(0, len(X), _ROWS):
            rows = X[start : start + _ROWS]
            if np.any(interval_margin(lower, upper, rows, nominal.predict(rows)) > 0):
                return True
    return False


def lost_epoch(
    lowers: tuple[MLP, ...],
    uppers: tuple[MLP, ...],
    path: tuple[MLP, ...],
    X: np.ndarray,
    y,
    loss: str,
    influence=None,
) -> int | None:
    """The first epoch ``t >= 1`` from which nothing (of epochs ``t .. T``) says anything on the training
    rows (`_useful`; with the ``influence`` enclosure, also no training row of an evenly spaced sample of
    `INFLUENCE_ROWS` certified by it), or None when the last epoch still does.  Scored from the last epoch
    backwards, so a run that certifies scores one epoch."""
    T = len(lowers) - 1
    sample = X[np.linspace(0, len(X) - 1, min(len(X), INFLUENCE_ROWS)).astype(int)]

    def useful(t):
        if _useful(lowers[t], uppers[t], path[t], X, y, loss):
            return True
        return influence is not None and bool(
            np.any(influence.margin_lower_bounds(t, sample, path[t].predict(sample)) > 0)
        )

    t = T
    while t >= 1 and not useful(t):
        t -= 1
    return None if t == T else t + 1


def _budget(sets: InputSets, recipe: Recipe) -> str | None:
    """The perturbation's budget and what it counts, in words (None without a budget)."""
    per = "each batch" if recipe.batch_size is not None else "the full batch"
    rows = recipe.batch_size if recipe.batch_size is not None else recipe.n_rows
    if sets.removals is not None:
        return f"Removals({sets.removals}) counted per batch ({sets.removals} of {per} of {rows} rows)"
    if sets.neighbours is not None:
        k = sets.neighbours.k
        return f"Neighbours({k}) counted per batch ({k} rows added or removed of {per} of {rows} rows)"
    k = sets.label_flips if sets.label_flips is not None else sets.budget
    if k is None:
        return "every row perturbed" if np.any(sets.varies) else None
    what = "LabelFlips" if sets.label_flips is not None else "Budget"
    return f"{what}({k}) counted per batch ({k} of {per} of {rows} rows)"


def growth_drivers(recipe: Recipe, sets: InputSets) -> str:
    """What in the run makes the boxes grow: the rates and steps, the budget per batch, clipping, epochs."""
    parts = [
        f"learning_rate up to {float(np.max(recipe.rates)):g} over {recipe.steps_per_epoch} step(s) per epoch"
    ]
    budget = _budget(sets, recipe)
    if budget is not None:
        parts.append(budget)
    if np.any(sets.varies):
        with np.errstate(over="ignore"):  # a FeatureBox near the float range has an infinite width
            width = float(np.max(sets.upper - sets.lower))
        parts.append(f"inputs moving by up to {width:g}")
    if sets.labels_vary or sets.removals is not None or sets.neighbours is not None:
        parts.append(
            "no per-sample clipping (clip_value or clip_norm bounds each row's influence)"
            if not recipe.clips
            else "per-sample clipping at "
            + (
                f"clip_value={recipe.clip_value:g}"
                if recipe.clip_value is not None
                else f"clip_norm={recipe.clip_norm:g}"
            )
        )
    if recipe.momentum:
        parts.append(f"momentum {recipe.momentum:g}")
    parts.append(f"{recipe.epochs} epoch(s)")
    return "; ".join(parts)


def overflow_advice(recipe: Recipe, sets: InputSets) -> str:
    """What to change when the bounds overflow, naming only the parts the run has."""
    advice = ["fewer epochs", "a smaller learning_rate"]
    if np.any(sets.varies):
        advice.append("a smaller epsilon")
    if sets.target_radius is not None:
        advice.append("a smaller TargetBox radius")
    rows_budget = sets.removals is not None or sets.neighbours is not None
    if sets.label_flips is not None or sets.budget is not None or rows_budget:
        advice.append("a smaller k")
    if (sets.labels_vary or sets.removals is not None) and not recipe.clips:
        advice.append("per-sample clipping (clip_value or clip_norm)")
    if recipe.batch_size is not None and (sets.label_flips or sets.budget or rows_budget):
        advice.append("larger batches (the budget is counted per batch)")
    return ", ".join(advice[:-1]) + " or " + advice[-1]


def vacuity_message(lost: int, epochs: int, mean_widths: np.ndarray, drivers: str, loss: str) -> str:
    """The warning of a run whose boxes stopped saying anything at epoch ``lost``."""
    widths = ", ".join(f"{w:.3g}" for w in mean_widths[1:])
    what = (
        f"bound the training outputs more than {REGRESSION_WIDTH_FACTOR:g} times wider than the targets' "
        "range"
        if loss == "mse"
        else "certify no training row's prediction"
    )
    use = (
        "Certify "
        if lost == 1
        else (f"Use the epochs before {lost} (res.certified_accuracy(X, y) scores every epoch), or certify ")
    )
    return (
        f"certified_training: the parameter boxes stopped meaning anything at epoch {lost} of {epochs}: "
        f"from there on they {what} (mean box width per epoch: {widths}). What drives the growth in this "
        f"run: {drivers}. {use}fewer steps, a smaller rate or budget, or per-sample clipping."
    )
