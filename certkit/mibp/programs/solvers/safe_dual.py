"""Rigorous lower bounds of linear programs from any (approximate) dual vector.

Neumaier & Shcherbina (2004, "Safe bounds in linear and mixed-integer linear programming"): for
``min c^T x`` subject to ``row_lo <= A x <= row_hi`` and ``lb <= x <= ub`` (all ``lb``, ``ub`` finite),
every vector ``y`` gives, with the residual ``r = c - A^T y``,

$$c^T x = y^T A x + r^T x \\ge \\sum_i \\min(y_i \\, \\mathrm{row\\_lo}_i, y_i \\, \\mathrm{row\\_hi}_i)
          + \\sum_j \\min(r_j \\, lb_j, r_j \\, ub_j)$$

for every feasible ``x``.  The bound needs no optimality or feasibility of the solver's answer: an
inaccurate dual only makes it looser.  Every floating-point step is enclosed (the residual by an
error bound on its dot products, the final sum by Higham's ``γ_m``), so the returned number is a
lower bound of the exact LP optimum, not an approximation of it.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from certkit.mibp.enclosures.interval import pad

__all__ = ["safe_lp_bound"]

_U = 2.0**-52


def safe_lp_bound(
    c: np.ndarray,
    A: sp.csr_matrix,
    row_lo: np.ndarray,
    row_hi: np.ndarray,
    lb: np.ndarray,
    ub: np.ndarray,
    y: np.ndarray,
) -> float:
    """A rigorous lower bound of ``min c^T x`` over ``{row_lo <= A x <= row_hi, lb <= x <= ub}``.

    Parameters
    ----------
    c : ndarray (n,)
        Cost vector.
    A : sparse matrix (m, n)
        Constraint matrix.
    row_lo, row_hi : ndarray (m,)
        Row bounds (``-inf`` / ``+inf`` where a side is absent; equal for equalities).
    lb, ub : ndarray (n,)
        Finite variable bounds.
    y : ndarray (m,)
        Any row multipliers, typically the solver's row duals (convention ``c = A^T y + r``).

    Returns
    -------
    float
        A lower bound of the optimum (``-inf`` if a variable bound is infinite).
    """
    if not (np.all(np.isfinite(lb)) and np.all(np.isfinite(ub))):
        return -np.inf
    A = sp.csr_matrix(A)
    y = np.where(np.isfinite(y), np.asarray(y, dtype=np.float64), 0.0)
    # a multiplier whose row side is absent gives no bound: drop it (any y is allowed)
    y = np.where((y > 0) & ~np.isfinite(row_lo), 0.0, y)
    y = np.where((y < 0) & ~np.isfinite(row_hi), 0.0, y)
    side = np.where(y > 0, row_lo, np.where(y < 0, row_hi, 0.0))
    row_terms = np.where(y != 0, y * side, 0.0)
    # residual r = c - A^T y, enclosed by [r - e, r + e]
    At = A.T.tocsr()
    r = c - At @ y
    per_col = np.diff(At.indptr)
    e = 2.0 * (per_col + 2) * _U * (np.abs(c) + abs(At) @ np.abs(y)) + 1e-300
    rL, rU = r - e, r + e
    col_terms = np.minimum.reduce([rL * lb, rL * ub, rU * lb, rU * ub])
    terms = np.concatenate([row_terms, col_terms])
    total = float(np.sum(terms))
    low, _ = pad(np.float64(total), np.float64(total), float(np.sum(np.abs(terms))), len(terms) + 1)
    return float(low)
