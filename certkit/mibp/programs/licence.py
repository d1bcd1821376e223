"""Advice for the size-limited Gurobi licence: which formulation or hidden-layer width would fit."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from certkit.mibp.problem.mlp import MLP
from certkit.mibp.programs.solvers import gurobi, gurobi_too_big, license_error

__all__ = ["check_gurobi_licence", "truncate_hidden"]


def truncate_hidden(model: MLP, hidden: int) -> MLP:
    """The first ``hidden`` units of a one-hidden-layer network (for sizing programs)."""
    (W1, W2), (b1, b2) = model.weights, model.biases
    return MLP([W1[:hidden], W2[:, :hidden]], [b1[:hidden], b2])


def check_gurobi_licence(
    program,
    rebuild: Callable[[MLP, MLP], Any],
    lower: MLP,
    upper: MLP,
    *,
    decomposed: Callable[[], Any] | None = None,
) -> None:
    """Raise `GurobiLicenseError` naming what would fit when ``program`` exceeds a size-limited licence.

    ``rebuild(lower, upper)`` builds the same program for another box (used with the hidden layer
    truncated, to find the most hidden units that fit); ``decomposed()`` builds the per-sample program
    (offered when it fits and the formulation is joint).
    """
    if not gurobi_too_big(program) or not gurobi.gurobi_size_limited():
        return
    fits: dict = {}
    if decomposed is not None and not gurobi_too_big(decomposed()):
        fits["formulation"] = "decomposed"
    if lower.n_layers == 2:
        lo, hi = 0, lower.sizes[1] - 1  # the most hidden units that fit lie in [lo, hi] (0: none)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if gurobi_too_big(rebuild(truncate_hidden(lower, mid), truncate_hidden(upper, mid))):
                hi = mid - 1
            else:
                lo = mid
        if lo > 0:
            fits["hidden"] = lo
    fits["backend"] = "scip"
    raise license_error(program, fits)
