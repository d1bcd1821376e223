"""`partition_radius`: the Deep Partition Aggregation radius of the deterministic partition certificate
(Levine & Feizi, ICLR 2021), from the votes of the winner and the runner-up."""

from __future__ import annotations

from typing import Any

import numpy as np

from certkit._validation import check_array

__all__ = ["partition_radius"]


def partition_radius(votes_a: Any, votes_b: Any, idx_a: Any, idx_b: Any) -> np.ndarray:
    r"""Deep Partition Aggregation radius $\lfloor (n_A - n_B - 1[i_B < i_A]) / 2 \rfloor$.

    The number of *partitions* whose vote may change while the winner (most votes, ties to the
    smaller class index) stays ``a`` (Levine & Feizi, ICLR 2021).  An insertion or a deletion changes
    one partition, a substitution at most two; `certkit.circuits.certify_circuit_partition`
    converts accordingly.

    Parameters
    ----------
    votes_a, votes_b : array-like of int
        Votes of the winning class and of the runner-up.
    idx_a, idx_b : array-like of int
        Their class indices (the tie-break).

    Returns
    -------
    numpy.ndarray of int64
        The radius (``-1`` means ``a`` is not the winner).

    Examples
    --------
    >>> int(partition_radius(30, 20, 1, 0)), int(partition_radius(30, 20, 0, 1))
    (4, 5)
    """
    na = check_array(votes_a, "votes_a", dtype=int)
    nb = check_array(votes_b, "votes_b", dtype=int)
    ia = check_array(idx_a, "idx_a", dtype=int)
    ib = check_array(idx_b, "idx_b", dtype=int)
    if np.any(na < 0) or np.any(nb < 0):
        raise ValueError("votes_a and votes_b must be >= 0")
    if np.any(ia < 0) or np.any(ib < 0):
        raise ValueError("idx_a and idx_b are class indices and must be >= 0")
    try:
        na, nb, ia, ib = np.broadcast_arrays(na, nb, ia, ib)
    except ValueError:
        shapes = ", ".join(f"{name} has shape {np.shape(a)}" for name, a in
                           (("votes_a", na), ("votes_b", nb), ("idx_a", ia), ("idx_b", ib)))
        raise ValueError(f"shapes cannot be broadcast together: {shapes}") from None
    gap = na - nb - (ib < ia).astype(np.int64)
    return np.maximum(np.floor_divide(gap, 2), -1)
