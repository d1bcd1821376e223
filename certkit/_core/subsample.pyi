"""Subsample indices and Poisson-deletion masks (`csrc/subsample.hpp`)."""

import numpy as np
import numpy.typing as npt

def indices(
    n: int, m: int, n_subsamples: int, *, replacement: bool = False, seed: int
) -> npt.NDArray[np.int64]:
    """Indices of `n_subsamples` subsamples of size `m` from `{0, ..., n-1}`.

    Parameters
    ----------
    n : int
        Number of examples, `n >= 1`.
    m : int
        Subsample size, `m >= 1`; `m <= n` when `replacement` is False.
    n_subsamples : int
        Number of subsamples `B >= 1`.
    replacement : bool, default False
        Draw with replacement (`idx[b, i] = bounded(key_b, i, n)`) or without (partial Fisher–Yates shuffle:
        `j = i + bounded(key_b, i, n - i)`, swap positions `i` and `j`; the row is the first `m` positions).
    seed : int
        Seed, `0 <= seed < 2**63`.

    Returns
    -------
    numpy.ndarray of int64, shape (n_subsamples, m)
        Row `b` lists subsample `b` in draw order (distinct entries without replacement).

    Raises
    ------
    ValueError
        If an argument is out of range.
    """

def deletion_masks(n: int, n_subsamples: int, *, deletion_prob: float, seed: int) -> npt.NDArray[np.bool_]:
    """Poisson-deletion masks: each example is deleted independently with probability `deletion_prob`.

    Parameters
    ----------
    n : int
        Number of examples, `n >= 1`.
    n_subsamples : int
        Number of subsamples `B >= 1`.
    deletion_prob : float
        Probability of deleting an example, in `[0, 1]`.
    seed : int
        Seed, `0 <= seed < 2**63`.

    Returns
    -------
    numpy.ndarray of bool, shape (n_subsamples, n)
        `mask[b, i] = uniform01(key_b, i) < 1 - deletion_prob` (True: example `i` is kept).

    Raises
    ------
    ValueError
        If an argument is out of range or `deletion_prob` is NaN.
    """
