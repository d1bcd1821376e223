"""Vote kernels of the circuit certificates (`csrc/votes.hpp`): a score rule over subsamples or parts."""

import numpy as np
import numpy.typing as npt

def subsample(
    scores: npt.ArrayLike,
    *,
    scheme: str = "without_replacement",
    m: int | None = None,
    deletion_prob: float | None = None,
    n_subsamples: int,
    top_k: int | None = None,
    threshold: float | None = None,
    seed: int,
    n_threads: int = 1,
) -> npt.NDArray[np.int64]:
    """Inclusion counts of each component over subsamples of the score rows.

    For each subsample `b` (the same rows as `certkit._core.subsample.indices`
    or `deletion_masks` give for this seed) the mean score of every component is
    the sum of its scores over the subsample, accumulated from 0.0 in subsample
    order (duplicates counted with multiplicity), divided by the subsample size.
    The rule then selects either the `top_k` components by (mean descending,
    index ascending) or every component with `mean >= threshold`.  An empty
    Poisson subsample selects nothing.

    Parameters
    ----------
    scores : array_like of float64, shape (n, N)
        Finite per-example, per-component scores.
    scheme : {"without_replacement", "with_replacement", "poisson"}
        How subsamples are drawn.
    m : int, optional
        Subsample size, required by the two fixed-size schemes (`1 <= m`, and
        `m <= n` without replacement); not given for `"poisson"`.
    deletion_prob : float, optional
        Deletion probability in `[0, 1]`, required by `"poisson"` (an example
        is kept iff `uniform01(key_b, i) < 1 - deletion_prob`); not given otherwise.
    n_subsamples : int
        Number of subsamples `B >= 1`.
    top_k : int, optional
        Number of components selected per subsample, `1 <= top_k <= N`.
    threshold : float, optional
        Inclusion threshold on the mean (inclusive, finite).  Give exactly
        one of `top_k` and `threshold`.
    seed : int
        Seed, `0 <= seed < 2**63`.
    n_threads : int
        Worker threads, `0 <= n_threads <= 1024` (0: all hardware threads);
        at most the hardware threads and `n_subsamples` are used.  The result
        does not depend on it.

    Returns
    -------
    numpy.ndarray of int64, shape (N,)
        `counts[j]` = number of subsamples whose selection contains `j`.

    Raises
    ------
    TypeError
        Scores of a non-real dtype (bool, complex, str, object: never
        coerced), non-integer sizes or seed, a non-str scheme.
    ValueError
        On non-finite scores, wrong shapes, an unknown scheme, both or neither
        of `top_k`/`threshold`, out-of-range sizes, probabilities, seed or
        `n_threads`, buffers larger than half the machine's memory, or more
        than 1e13 score additions, `n_subsamples * (rows * N padded to 32 + 2 N)`
        with the expected rows `(1 - deletion_prob) n` (plus n coin draws) for Poisson
        (about an hour of one core; the message names the argument and the estimate).

    Notes
    -----
    The kernel works on a copy of `scores` laid out in tiles of 32 columns
    (`8 * n * 32 * ceil(N / 32)` bytes, N padded to a multiple of 32).
    """

def partition(
    scores: npt.ArrayLike,
    n_parts: int,
    part_of: npt.ArrayLike,
    *,
    top_k: int | None = None,
    threshold: float | None = None,
) -> npt.NDArray[np.bool_]:
    """Decision rule applied to each part of a partition (partition aggregation, DPA).

    Parameters
    ----------
    scores : array_like of float64, shape (n, N)
        Finite per-example, per-component scores.
    n_parts : int
        Number of parts, `>= 1`.
    part_of : array_like of int, shape (n,)
        Part label of each example, in `[0, n_parts)` (integer dtype).
    top_k : int, optional
        Components selected per part by (mean descending, index ascending).
    threshold : float, optional
        Inclusion threshold on the part mean (inclusive).  Give exactly one of
        `top_k` and `threshold`.

    Returns
    -------
    numpy.ndarray of bool, shape (n_parts, N)
        Selection of each part; an empty part selects nothing.  Part means sum
        rows in increasing example index from 0.0, then divide by the part size.

    Raises
    ------
    ValueError
        On non-finite scores, wrong shapes, labels out of range or a bad rule.
    TypeError
        If `part_of` has a non-integer dtype.
    """
