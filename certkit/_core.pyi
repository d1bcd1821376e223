"""Type stubs for the compiled module certkit._core.

Every kernel is deterministic: subsample ``b`` uses the counter-based generator
keyed by ``(seed, stream=b)`` (see ``csrc/rng.hpp``), so results never depend
on ``n_threads``.  The kernels validate their own arguments and raise
``ValueError`` naming the argument; public certkit functions validate first
and call these directly.
"""

import numpy as np
import numpy.typing as npt

def random_uint64(seed: int, stream: int, counters: npt.ArrayLike) -> npt.NDArray[np.uint64]:
    """Raw 64-bit draws of the counter-based generator.

    Parameters
    ----------
    seed : int
        Seed (taken modulo 2**64).
    stream : int
        Stream index (taken modulo 2**64).
    counters : array_like of uint64, shape (k,)
        Counters to evaluate.

    Returns
    -------
    numpy.ndarray of uint64, shape (k,)
        ``mix64(stream_key(seed, stream) + (counter + 1) * GAMMA)`` for each counter.
    """

def subsample_indices(n: int, m: int, n_subsamples: int, replace: bool, seed: int) -> npt.NDArray[np.int64]:
    """Indices of ``n_subsamples`` subsamples of size ``m`` from ``{0, ..., n-1}``.

    Parameters
    ----------
    n : int
        Number of examples, ``n >= 1``.
    m : int
        Subsample size, ``m >= 1``; ``m <= n`` when ``replace`` is False.
    n_subsamples : int
        Number of subsamples ``B >= 1``.
    replace : bool
        Draw with replacement (``idx[b, i] = bounded(key_b, i, n)``) or without
        (partial Fisher–Yates shuffle: ``j = i + bounded(key_b, i, n - i)``,
        swap positions ``i`` and ``j``; the row is the first ``m`` positions).
    seed : int
        Seed, ``0 <= seed < 2**63``.

    Returns
    -------
    numpy.ndarray of int64, shape (n_subsamples, m)
        Row ``b`` lists subsample ``b`` in draw order (distinct entries without
        replacement).

    Raises
    ------
    ValueError
        If an argument is out of range.
    """

def deletion_masks(n: int, keep_prob: float, n_subsamples: int, seed: int) -> npt.NDArray[np.bool_]:
    """Poisson-deletion masks: each example is kept independently.

    Parameters
    ----------
    n : int
        Number of examples, ``n >= 1``.
    keep_prob : float
        Probability of keeping an example, in ``[0, 1]``.
    n_subsamples : int
        Number of subsamples ``B >= 1``.
    seed : int
        Seed, ``0 <= seed < 2**63``.

    Returns
    -------
    numpy.ndarray of bool, shape (n_subsamples, n)
        ``mask[b, i] = uniform01(key_b, i) < keep_prob``.

    Raises
    ------
    ValueError
        If an argument is out of range or ``keep_prob`` is NaN.
    """

def subsample_votes(
    scores: npt.ArrayLike,
    *,
    scheme: str = "without_replacement",
    m: int = 0,
    keep_prob: float = ...,
    n_subsamples: int,
    top_k: int = -1,
    threshold: float = ...,
    seed: int,
    n_threads: int = 1,
) -> npt.NDArray[np.int64]:
    """Inclusion counts of each component over subsamples of the score rows.

    For each subsample ``b`` (the same rows as ``subsample_indices`` or
    ``deletion_masks`` give for this seed) the mean score of every component is
    the sum of its scores over the subsample, accumulated from 0.0 in subsample
    order (duplicates counted with multiplicity), divided by the subsample size.
    The rule then selects either the ``top_k`` components by (mean descending,
    index ascending) or every component with ``mean >= threshold``.  An empty
    Poisson subsample selects nothing.

    Parameters
    ----------
    scores : array_like of float64, shape (n, N)
        Finite per-example, per-component scores.
    scheme : {"without_replacement", "with_replacement", "poisson"}
        How subsamples are drawn.
    m : int
        Subsample size for the two fixed-size schemes (``1 <= m``, and
        ``m <= n`` without replacement); must stay 0 for ``"poisson"``.
    keep_prob : float
        Keep probability in ``[0, 1]`` for ``"poisson"``; unset (NaN) otherwise.
    n_subsamples : int
        Number of subsamples ``B >= 1``.
    top_k : int
        Number of components selected per subsample, ``1 <= top_k <= N``;
        -1 when ``threshold`` is used.
    threshold : float
        Inclusion threshold on the mean (inclusive); NaN when ``top_k`` is used.
    seed : int
        Seed, ``0 <= seed < 2**63``.
    n_threads : int
        Worker threads (0: all hardware threads).  The result does not depend
        on it.

    Returns
    -------
    numpy.ndarray of int64, shape (N,)
        ``counts[j]`` = number of subsamples whose selection contains ``j``.

    Raises
    ------
    ValueError
        On non-finite scores, wrong shapes, an unknown scheme, both or neither
        of ``top_k``/``threshold``, or out-of-range sizes, probabilities, seed.

    Notes
    -----
    The kernel works on a copy of ``scores`` laid out in tiles of 32 columns
    (``8 * n * 32 * ceil(N / 32)`` bytes, N padded to a multiple of 32).
    """

def partition_votes(
    scores: npt.ArrayLike,
    n_parts: int,
    part_of: npt.ArrayLike,
    *,
    top_k: int = -1,
    threshold: float = ...,
) -> npt.NDArray[np.bool_]:
    """Decision rule applied to each part of a partition (partition aggregation, DPA).

    Parameters
    ----------
    scores : array_like of float64, shape (n, N)
        Finite per-example, per-component scores.
    n_parts : int
        Number of parts, ``>= 1``.
    part_of : array_like of int, shape (n,)
        Part label of each example, in ``[0, n_parts)`` (integer dtype).
    top_k : int
        Components selected per part by (mean descending, index ascending); -1
        when ``threshold`` is used.
    threshold : float
        Inclusion threshold on the part mean (inclusive); NaN when ``top_k`` is used.

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
        If ``part_of`` has a non-integer dtype.
    """
