"""Lower bounds on the prediction margins of test inputs over a parameter box: interval bounds first, then
the programs of a solver backend for the points they leave undecided (shared by `certify_predictions` and
`CertifiedTrainingResult.certified_accuracy`)."""

from __future__ import annotations

import numpy as np

from certkit._validation import check_in_options, check_positive, check_progress
from certkit.mibp.enclosures.interval import interval_margin
from certkit.mibp.problem.mlp import MLP
from certkit.mibp.programs.encoding import build_output
from certkit.mibp.programs.licence import check_gurobi_licence
from certkit.mibp.programs.solvers import BACKENDS, BackendOptions, check_backend, solve_program
from certkit.parallel import parallel_map, resolve_executor

__all__ = ["check_margin_options", "margin_lower_bounds"]


def check_margin_options(backend, time_limit, solver, executor, progress, verbose) -> tuple:
    """The checked options of `margin_lower_bounds`: ``(backend, time_limit, progress)``; the solver, the
    executor (nothing is started) and ``verbose`` are checked too."""
    backend = check_in_options(backend, "backend", BACKENDS)
    if time_limit is not None:
        time_limit = check_positive(time_limit, "time_limit")
    check_backend(backend, solver)
    if not isinstance(verbose, bool):
        raise TypeError(f"verbose must be True or False, got {type(verbose).__name__}")
    progress = check_progress(progress)
    with resolve_executor(executor, n_items=0):  # checks executor now (starts nothing), even if unused
        pass
    return backend, time_limit, progress


def margin_lower_bounds(
    lower: MLP,
    upper: MLP,
    X_test: np.ndarray,
    pred: np.ndarray,
    *,
    backend: str,
    time_limit: float | None,
    solver: str | None,
    executor,
    progress,
    verbose: bool,
    influence=None,
    epoch: int = 0,
) -> np.ndarray:
    """A lower bound (m,), over the box ``[lower, upper]``, of the margin of the predictions ``pred`` at the
    rows of ``X_test`` (``pred * f`` for one output, ``min_{c != pred} f_pred - f_c`` otherwise): interval
    bounds, then ``backend``'s programs for the points they leave at or below 0 (arguments checked by the
    caller).  With the ``influence`` enclosure of the run, the larger of its bound after ``epoch`` epochs and
    the interval bound."""
    n_out = lower.sizes[-1]
    margin = interval_margin(lower, upper, X_test, pred)
    if influence is not None and len(X_test):
        margin = np.maximum(margin, influence.margin_lower_bounds(epoch, X_test, pred))
    undecided = np.flatnonzero(margin <= 0)
    if backend != "interval" and undecided.size:
        options = BackendOptions(backend, time_limit, solver, verbose=verbose)
        # parameter vectors inside the box (the nominal model need not be: a missing value's placeholder)
        mid = MLP.from_vector(0.5 * (lower.to_vector() + upper.to_vector()), lower.sizes)
        inside = (lower, upper, mid)
        items = [
            (
                build_output(lower, upper, X_test[i], int(pred[i]), n_out),
                options,
                _objective_values(inside, X_test[i], int(pred[i]), n_out),
            )
            for i in undecided
        ]
        if backend == "gurobi":
            big = max(range(len(items)), key=lambda r: items[r][0].n_vars)
            x, p = X_test[undecided[big]], int(pred[undecided[big]])
            check_gurobi_licence(
                items[big][0], lambda lo, up: build_output(lo, up, x, p, n_out), lower, upper
            )
        solved = parallel_map(_solve_item, items, executor=executor, progress=progress)
        margin = margin.copy()
        margin[undecided] = np.maximum(margin[undecided], solved)
    return margin


def _solve_item(item: tuple) -> float:
    program, options, witnesses = item
    res = solve_program(program, [(j, 1) for j in range(len(program.objectives))], options, witnesses)
    return float(np.min(res["bounds"]))


def _objective_values(models, x: np.ndarray, pred: int, n_out: int) -> np.ndarray:
    """The output program's objectives at parameter vectors of the box (known feasible points)."""
    rows = []
    for model in models:
        f = model.forward(x[None])[0]
        rows.append([f[0] * pred] if n_out == 1 else [f[pred] - f[c] for c in range(n_out) if c != pred])
    return np.asarray(rows, dtype=np.float64)
