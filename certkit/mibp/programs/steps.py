"""One certified step of full-batch gradient descent by the program backends, intersected with the interval
step (`certified_training` runs them step by step)."""

from __future__ import annotations

import math

import numpy as np

from certkit.mibp.enclosures.interval import magnitude, pad
from certkit.mibp.enclosures.sgd_step import interval_step, sum_with_budget
from certkit.mibp.problem.perturbation import InputSets
from certkit.mibp.problem.recipe import Recipe, make_recipe
from certkit.mibp.programs.encoding import build_decomposed, build_joint
from certkit.mibp.programs.lagrangian import centre_multipliers
from certkit.mibp.programs.licence import check_gurobi_licence
from certkit.mibp.programs.solvers import BackendOptions, SolveStats, lp_bounds, solve_program
from certkit.parallel import parallel_map

__all__ = [
    "check_gurobi_upfront",
    "check_program_recipe",
    "program_step",
]


def _solve_item(item: tuple) -> dict:
    program, tasks, options, witnesses = item
    return solve_program(program, tasks, options, witnesses)


def _chunks(m: int, parts: int) -> list[list[tuple[int, int]]]:
    tasks = [(p, s) for p in range(m) for s in (1, -1)]
    size = math.ceil(len(tasks) / max(1, parts))
    return [tasks[i : i + size] for i in range(0, len(tasks), size)]


def check_program_recipe(backend: str, recipe: Recipe, sets: InputSets, n_outputs: int) -> None:
    """The program backends certify plain full-batch GD with the hinge or MSE loss and binary label flips."""
    why = None
    if recipe.loss not in ("hinge", "mse"):
        why = f"loss={recipe.loss!r}"
    elif not recipe.plain:
        why = (
            "a learning-rate schedule, mini-batches (or a given batch order), momentum, weight decay, an L1 "
            "penalty or per-sample gradient clipping"
        )
    elif sets.removals is not None:
        why = "Removals (unlearning)"
    elif sets.neighbours is not None:
        why = "Neighbours (rows added or removed)"
    elif sets.flip_target is not None:
        why = "targeted label flips (LabelFlips(target=...))"
    elif sets.target_radius is not None:
        why = "TargetBox"
    elif sets.flip_labels:
        why = "paired poisoning (LabelFlips inside a Budget)"
    elif sets.label_flips is not None and n_outputs != 1:
        why = "label flips between more than two classes"
    if why is not None:
        raise ValueError(
            f"backend={backend!r} does not support {why}; use backend='interval' (carry='box'), which "
            "certifies every recipe"
        )


def program_step(
    lower, upper, sets, y, loss, lr, formulation, options, executor=None, desc=False, witness=(None, 0)
):
    """Bounds (vectors) on the parameters after one step from the box [lower, upper], plus solver stats.

    ``witness = (Witnesses or None, epoch)``: known feasible points for the runtime guard.
    """
    plain = make_recipe(len(y), loss=loss, epochs=1, learning_rate=lr)
    (iL, iU), _ = interval_step(lower, upper, sets, y, plain, 0)
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
        _check_joint_licence(program, lower, upper, sets, y, loss, lr, tight)
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
    multipliers, ``mu[k, p] · θ`` added to sample ``k``'s objective ``p``
    (`certkit.mibp.programs.lagrangian`)."""
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
    programs, values, samples = [], [], []
    for kind_sets, sign, exact in kinds:
        for k in range(n):
            label = -y[k] if sign < 0 else y[k]
            mu_k = None if mu is None else mu[k]
            programs.append(
                build_decomposed(lower, upper, kind_sets, k, label, loss, lr, tighten=tight, multipliers=mu_k)
            )
            samples.append((kind_sets, k, label))
            if witnesses is not None:
                values.append(witnesses.decomposed(t, k, flip=sign < 0, exact=exact, multipliers=mu_k))
    if options.backend == "gurobi":
        _check_decomposed_licence(programs, samples, lower, upper, loss, lr, tight)
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


def check_gurobi_upfront(model, sets, y, loss: str, lr: float, formulation: str) -> None:
    """Raise `GurobiLicenseError` before any solve when a later step's Gurobi programs will not fit a
    size-limited licence.

    The first step starts from a point (no bilinear terms) and may fit where every later one does not, so
    the programs are built for a box of width ``2e-6 max(1, |θ|)`` around the initial parameters: the
    narrowest box the program backends encode (they widen narrower ones to it), whose programs are the
    smallest a later step can have.
    """
    theta = model.to_vector()
    delta = 1e-6 * np.maximum(1.0, np.abs(theta))
    lower = type(model).from_vector(theta - delta, model.sizes)
    upper = type(model).from_vector(theta + delta, model.sizes)
    if formulation == "joint":
        _check_joint_licence(build_joint(lower, upper, sets, y, loss, lr), lower, upper, sets, y, loss, lr)
        return
    samples = [(sets, k, y[k]) for k in range(len(y))]
    programs = [build_decomposed(lower, upper, s, k, label, loss, lr) for s, k, label in samples]
    _check_decomposed_licence(programs, samples, lower, upper, loss, lr)


def _check_joint_licence(program, lower, upper, sets, y, loss, lr, tight=None) -> None:
    """`check_gurobi_licence` for a joint program, offering the per-sample one when it fits."""
    check_gurobi_licence(
        program,
        lambda lo, up: build_joint(lo, up, sets, y, loss, lr, tighten=tight),
        lower,
        upper,
        decomposed=lambda: build_decomposed(lower, upper, sets, 0, y[0], loss, lr, tighten=tight),
    )


def _check_decomposed_licence(programs, samples, lower, upper, loss, lr, tight=None) -> None:
    """`check_gurobi_licence` for the largest per-sample program; ``samples[r] = (sets, k, label)`` built
    ``programs[r]``."""
    big = max(range(len(programs)), key=lambda r: programs[r].n_vars)
    sets, k, label = samples[big]
    check_gurobi_licence(
        programs[big],
        lambda lo, up: build_decomposed(lo, up, sets, k, label, loss, lr, tighten=tight),
        lower,
        upper,
    )
