"""McCormick envelopes of the bilinear terms: the linear rows shared by the MILP / LP backends."""

from __future__ import annotations

import numpy as np

from certkit.mibp.programs.program import Program

__all__ = ["linear_rows", "relaxation_rows"]

_U = 2.0**-52


def relaxation_rows(program: Program):
    """Linear rows (A_ub, b_ub) of the McCormick envelopes of all bilinear terms.

    Each row is valid in exact arithmetic for the float bounds it is built from; its right-hand side is
    rounded outward (loosened) by the rounding of the product ``ca * cb`` and, for a square, of the
    coefficient ``ca + cb``, so the float row contains every point the exact envelope contains.
    """
    import scipy.sparse as sp

    rows, cols, vals, rhs = [], [], [], []
    r = 0
    lb, ub = program.lb, program.ub
    for s, a, b in program.bilinear:
        aL, aU, bL, bU = lb[a], ub[a], lb[b], ub[b]
        # s >= aL b + bL a - aL bL ; s >= aU b + bU a - aU bU
        # s <= aU b + bL a - aU bL ; s <= aL b + bU a - aL bU
        for sign, ca, cb in ((-1, aL, bL), (-1, aU, bU), (1, aU, bL), (1, aL, bU)):
            slack = 2.0 * _U * abs(ca * cb)
            if a == b:
                rows += [r, r]
                cols += [s, a]
                vals += [float(sign), -sign * (ca + cb)]
                slack += 2.0 * _U * abs(ca + cb) * max(abs(aL), abs(aU))
            else:
                rows += [r, r, r]
                cols += [s, b, a]
                vals += [float(sign), -sign * ca, -sign * cb]
            rhs.append(np.nextafter(-sign * ca * cb + slack, np.inf))
            r += 1
    M = sp.csr_matrix((vals, (rows, cols)), shape=(r, program.n_vars))
    return M, np.asarray(rhs, dtype=np.float64)


def linear_rows(program: Program):
    """All linear rows (program rows and McCormick envelopes) as CSR with row bounds."""
    import scipy.sparse as sp

    M, mrhs = relaxation_rows(program)
    A = sp.vstack([program.A, M]).tocsr()
    upper = np.concatenate([program.rhs, mrhs])
    lower = np.concatenate([np.where(program.is_eq, program.rhs, -np.inf), np.full(len(mrhs), -np.inf)])
    return A, lower, upper
