"""One certified SGD step by interval arithmetic: the budgeted batch sum of per-row gradient bounds and
the update of `certkit.mibp.problem.recipe.Recipe` (momentum, weight decay) on parameter and velocity
boxes."""

from __future__ import annotations

import numpy as np

from certkit.mibp.enclosures.interval import interval_gradients, magnitude, pad

__all__ = ["batch_gradient_sum", "interval_step", "interval_update", "sum_with_budget"]


def sum_with_budget(PL, PU, NL, NU, budget):
    """Bounds on ``Σ_k t_k`` when ``t_k ∈ [PL_k, PU_k]`` for deviating points and ``[NL_k, NU_k]`` otherwise.

    With ``budget=None`` every point deviates (takes a value in its perturbation set).
    Otherwise at most ``budget`` points deviate and the others keep their nominal
    value: the bound is the all-nominal sum plus the ``budget`` largest (smallest)
    gains of deviating (with ``budget >= n`` this is the per-point union).  Arrays
    are (n, m); returns (m,) bounds padded for the summation and for one rounding of every entry
    (the unpadded products of `interval_gradients`).
    """
    n = PL.shape[0]
    mag = magnitude(PL, PU).sum(axis=0)
    if budget is None:
        return pad(PL.sum(axis=0), PU.sum(axis=0), mag, n + 2)
    budget = min(budget, n)
    mag = mag + magnitude(NL, NU).sum(axis=0)
    lo, hi = NL.sum(axis=0), NU.sum(axis=0)
    if 0 < budget < n:
        dlo = np.minimum(PL - NL, 0.0)
        dhi = np.maximum(PU - NU, 0.0)
        lo = lo + np.partition(dlo, budget - 1, axis=0)[:budget].sum(axis=0)
        hi = hi - np.partition(-dhi, budget - 1, axis=0)[:budget].sum(axis=0)
    elif budget == n:
        lo = lo + np.minimum(PL - NL, 0.0).sum(axis=0)
        hi = hi + np.maximum(PU - NU, 0.0).sum(axis=0)
    return pad(lo, hi, mag, 3 * n + 4)


def batch_gradient_sum(lower, upper, sets, y, loss, rows=None):
    """Bounds (vectors) on ``Σ_{k ∈ rows} g_k`` over the parameter box and every allowed dataset.

    Points that deviate (all of them without a budget) take inputs in their sets and, when labels may
    change, any allowed label; with ``Budget`` at most ``budget`` points of the batch deviate and the others
    are exact; with ``LabelFlips(k)`` (no budget) every input is perturbed and at most ``k`` labels change.
    """
    rows = np.arange(len(y)) if rows is None else rows
    yb, lo, hi = y[rows], sets.lower[rows], sets.upper[rows]
    if sets.label_flips is not None:
        # deviating = label changed to another class (inputs perturbed either way)
        count = sets.label_flips
        NL, NU = interval_gradients(lower, upper, lo, hi, yb, loss)
        PL, PU = interval_gradients(lower, upper, lo, hi, yb, loss, "other")
    else:
        count = sets.budget
        PL, PU = interval_gradients(lower, upper, lo, hi, yb, loss, "any" if sets.flip_labels else "own")
        NL, NU = PL, PU
        if count is not None:
            exact = sets.nominal[rows]
            NL, NU = interval_gradients(lower, upper, exact, exact, yb, loss)
    return sum_with_budget(PL, PU, NL, NU, count)


def interval_update(theta, velocity, grad, recipe, step):
    """Bounds on one SGD update of `certkit.mibp.problem.recipe.Recipe` from boxes: ``theta = (lo, hi)``,
    ``velocity``
    (None before the first step or without momentum) and the mean gradient ``grad``; returns padded
    ``(theta, velocity)`` boxes.  The new parameters are ``(1 - λω) θ - λ (μ v + g)``, each variable once."""
    (tL, tU), (gL, gU) = theta, grad
    lr, wd, mu = float(recipe.rates[step]), recipe.weight_decay, recipe.momentum
    mag_t = magnitude(tL, tU)
    vL, vU = gL + wd * tL, gU + wd * tU  # d = g + ω θ
    mag_v = magnitude(gL, gU) + wd * mag_t
    sL, sU = gL, gU  # what is subtracted besides the decay: μ v + g
    if velocity is not None and mu:
        pL, pU = velocity
        vL, vU = mu * pL + vL, mu * pU + vU
        mag_v = mag_v + mu * magnitude(pL, pU)
        sL, sU = mu * pL + gL, mu * pU + gU
    a = 1.0 - lr * wd
    lo = np.minimum(a * tL, a * tU) - lr * sU
    hi = np.maximum(a * tL, a * tU) - lr * sL
    new_theta = pad(lo, hi, mag_t * (1.0 + lr * wd) + lr * mag_v, 10)
    new_velocity = pad(vL, vU, mag_v, 6) if mu else None
    return new_theta, new_velocity


def interval_step(lower, upper, sets, y, recipe, step, velocity=None):
    """One certified SGD step of ``recipe`` by interval arithmetic from the parameter box ``[lower, upper]``
    (MLPs) and the velocity box ``velocity`` ((lo, hi) vectors or None); returns ``((lo, hi), velocity)``."""
    rows = recipe.batches[step]
    GL, GU = batch_gradient_sum(lower, upper, sets, y, recipe.loss, rows)
    b = len(rows)
    grad = pad(GL / b, GU / b, magnitude(GL, GU) / b, 1)
    return interval_update((lower.to_vector(), upper.to_vector()), velocity, grad, recipe, step)
