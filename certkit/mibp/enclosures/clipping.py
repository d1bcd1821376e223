"""Interval bounds on per-sample gradients after the recipe's clipping (`certkit.mibp.problem.recipe`).

By value: clipping each entry to ``[-c, c]`` is monotone, so the clipped bounds of an entry are its bounds
clipped (exact, no rounding).  By norm: each sample's gradient is scaled by
``f = min(1, c / (‖g‖₂ + 1e-6))``; over the box of the sample's gradient ``‖g‖₂`` lies between the norms of
the entries' smallest and largest magnitudes (0 for an entry whose interval holds 0), so ``f`` lies in
``[min(1, c / (N_hi + 1e-6)), min(1, c / (N_lo + 1e-6))]`` and each entry ``g_j f`` in the product of its
interval with that one; every clipped entry also lies in ``[-c, c]`` (``|g_j| <= ‖g‖₂``).  The norms, the
factors and the products are padded for their rounding and for that of the float clipping of `MLP.train`.
Every step is monotone in the bounds it is given and the norms are summed in an order fixed by the number of
entries (`certkit.mibp.enclosures.interval.ordered_sum`), so narrower gradient bounds never give wider clipped
ones, in floating point too (`certkit.mibp.enclosures.neighbours` relies on it).
"""

from __future__ import annotations

import numpy as np

from certkit.mibp.enclosures.interval import ordered_sum
from certkit.mibp.problem.recipe import Recipe

__all__ = ["clip_bounds"]

_U = 2.0**-52


def clip_bounds(GL: np.ndarray, GU: np.ndarray, recipe: Recipe) -> tuple[np.ndarray, np.ndarray]:
    """Bounds ``(n, m)`` on the clipped per-sample gradients whose unclipped values lie in ``[GL, GU]``
    (rows: samples), with the entries' own rounding allowance kept as in
    `certkit.mibp.enclosures.interval.interval_gradients` (one rounding of each entry, added by the sum)."""
    if recipe.clip_value is not None:
        c = recipe.clip_value
        return np.clip(GL, -c, c), np.clip(GU, -c, c)
    if recipe.clip_norm is None:
        return GL, GU
    c, m = recipe.clip_norm, GL.shape[1]
    big = np.maximum(np.abs(GL), np.abs(GU))
    small = np.where((GL <= 0.0) & (GU >= 0.0), 0.0, np.minimum(np.abs(GL), np.abs(GU)))
    # each entry within one rounding of its exact value, the float sum of m squares and its square root:
    # (m + 8) roundings relative to the norm at most
    slack = (m + 8) * _U
    n_lo = np.sqrt(ordered_sum(small * small)) * (1.0 - slack)
    n_hi = np.sqrt(ordered_sum(big * big)) * (1.0 + slack)
    f_lo = np.minimum(c / (n_hi + 1e-6), 1.0) * (1.0 - 4 * _U)
    f_hi = np.minimum(c / (np.maximum(n_lo, 0.0) + 1e-6), 1.0) * (1.0 + 4 * _U)
    f_lo, f_hi = f_lo[:, None], f_hi[:, None]
    lo = np.minimum(GL * f_lo, GL * f_hi)
    hi = np.maximum(GU * f_lo, GU * f_hi)
    # the products' rounding (ours and the float g f of the nominal run): 2 more roundings of each entry
    lo, hi = lo - 2.0 * _U * np.abs(lo), hi + 2.0 * _U * np.abs(hi)
    edge = c * (1.0 + 8.0 * _U)
    return np.clip(lo, -edge, edge), np.clip(hi, -edge, edge)
