"""Vote runners: how often each component is included over subsamples (or parts) of the concept dataset.

A `ScoreRule` is evaluated for all subsamples at once by the compiled kernels (`certkit._core.votes`);
a black-box `discover` callable runs once per subsample through `certkit.parallel.parallel_map`.  Both
paths draw the same subsamples for the same `Sampling` and seed, so they give identical counts for the
same rule.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from certkit._typing import ExecutorArg, Progress
from certkit._validation import as_numpy
from certkit.circuits.sampling import Sampling
from certkit.circuits.score_rule import ScoreRule

__all__ = ["check_concept_set", "concept_size", "count_votes", "partition_votes", "take_rows"]


def count_votes(
    discover: Callable[[Any], Any] | ScoreRule,
    X_concept: Any,
    sampling: Sampling,
    *,
    n_runs: int,
    seed: int,
    executor: ExecutorArg = None,
    progress: Progress = False,
    n_threads: int = 1,
) -> np.ndarray:
    """Inclusion count of every component over `n_runs` subsamples drawn by `sampling` from `seed`."""
    if isinstance(discover, ScoreRule):
        from certkit import _core

        return np.asarray(
            _core.votes.subsample(
                discover.scores,
                scheme=sampling.scheme,
                m=sampling.m,
                deletion_prob=sampling.deletion_prob,
                n_subsamples=n_runs,
                top_k=discover.top_k,
                threshold=discover.threshold,
                seed=seed,
                n_threads=n_threads,
            ),
            dtype=np.int64,
        )
    subsets = sampling.subsets(n_runs, seed)
    return _black_box_counts(discover, X_concept, subsets, executor=executor, progress=progress)


def partition_votes(
    discover: Callable[[Any], Any] | ScoreRule,
    X_concept: Any,
    parts: np.ndarray,
    n_parts: int,
    *,
    executor: ExecutorArg = None,
    progress: Progress = False,
) -> np.ndarray:
    """Number of parts (`parts[i]` is the part of example `i`) whose run includes each component.

    Only the non-empty parts (at most ``n``) are run: an empty part includes nothing, so the memory
    and the work do not grow with ``n_parts``.
    """
    used, compact = np.unique(parts, return_inverse=True)
    if isinstance(discover, ScoreRule):
        from certkit import _core

        votes = _core.votes.partition(
            discover.scores,
            used.size,
            np.ascontiguousarray(compact, dtype=np.int64),
            top_k=discover.top_k,
            threshold=discover.threshold,
        )
        return np.asarray(votes).sum(axis=0).astype(np.int64)
    order = np.argsort(compact, kind="stable")
    subsets = np.split(order, np.cumsum(np.bincount(compact, minlength=used.size))[:-1])
    return _black_box_counts(discover, X_concept, subsets, executor=executor, progress=progress)


def concept_size(discover: Any, X_concept: Any) -> int:
    """Validate `discover` and `X_concept`; returns the size `n` of the concept dataset."""
    if isinstance(discover, ScoreRule):
        n_rows = discover.scores.shape[0]
        if X_concept is not None and len(X_concept) != n_rows:
            raise ValueError(
                f"X_concept has {len(X_concept)} examples but the ScoreRule has scores for {n_rows}; "
                "row i of the scores must belong to example i"
            )
        return n_rows
    if not callable(discover):
        raise TypeError(
            f"discover must be a callable (X_subset -> bool mask of shape (N,)) or a ScoreRule, got "
            f"{type(discover).__name__}"
        )
    if X_concept is None:
        raise ValueError("X_concept is required when discover is a callable")
    return check_concept_set(X_concept)


def check_concept_set(X_concept: Any) -> int:
    """A non-empty sized collection of examples, finite when numeric; returns its size.

    Dicts are rejected (their keys are not example positions); NumPy arrays, tensors and pandas
    objects with float or complex values must be finite (NaN would reach the user's algorithm).
    """
    if isinstance(X_concept, Mapping):
        raise TypeError("X_concept must be an array, tensor or sequence of examples, got a dict")
    if isinstance(X_concept, (str, bytes)):
        raise TypeError(
            f"X_concept must be an array, tensor or sequence of examples, got a {type(X_concept).__name__}"
        )
    try:
        n = len(X_concept)
    except TypeError:
        raise TypeError(
            f"X_concept must be a sized collection of examples, got {type(X_concept).__name__}"
        ) from None
    if n == 0:
        raise ValueError("X_concept must not be empty (the concept dataset has no examples)")
    is_torch = type(X_concept).__module__.startswith("torch")
    if isinstance(X_concept, np.ndarray) or hasattr(X_concept, "iloc") or is_torch:
        arr = as_numpy(X_concept.to_numpy() if hasattr(X_concept, "iloc") else X_concept, "X_concept")
        if arr.dtype.kind in "fc" and not np.all(np.isfinite(arr)):
            raise ValueError("X_concept must be finite (found NaN or inf)")
    return n


def take_rows(X: Any, idx: np.ndarray) -> Any:
    """Rows ``idx`` (positions) of a NumPy array, a torch tensor, a pandas object or a Python sequence."""
    if isinstance(X, np.ndarray):
        return X[idx]
    if type(X).__module__.startswith("torch"):
        import torch

        return X[torch.from_numpy(idx)]
    if isinstance(X, (list, tuple)):
        return [X[int(i)] for i in idx]
    if hasattr(X, "iloc"):  # pandas: positional rows, whatever the index labels are
        return X.iloc[idx]
    return X[idx]


def _as_mask(raw: Any, run: int) -> np.ndarray:
    """Validate one mask returned by ``discover``."""
    try:
        mask = as_numpy(raw, "mask")
    except TypeError:
        raise TypeError(
            f"discover returned {type(raw).__name__} for subsample {run}; it must return a boolean array of "
            "shape (N,) (True = component included)"
        ) from None
    if mask.dtype != np.bool_:
        raise TypeError(
            f"discover returned a mask of dtype {mask.dtype} for subsample {run}; it must return a boolean "
            "array of shape (N,) (convert with `mask.astype(bool)` if 0/1 is intended)"
        )
    if mask.ndim != 1 or mask.size == 0:
        raise ValueError(
            f"discover returned a mask of shape {mask.shape} for subsample {run}; "
            "it must be 1-D of length N >= 1"
        )
    return mask


def _run_chunk(
    discover: Callable[[Any], Any], X: Any, first: int, subsets: list[np.ndarray]
) -> tuple[np.ndarray, int]:
    """Run ``discover`` on the subsets; returns (inclusion counts, N).  Empty subsets include nothing."""
    counts: np.ndarray | None = None
    for offset, idx in enumerate(subsets):
        if idx.size == 0:
            continue
        mask = _as_mask(discover(take_rows(X, idx)), first + offset)
        if counts is None:
            counts = np.zeros(mask.size, dtype=np.int64)
        elif mask.size != counts.size:
            raise ValueError(
                f"discover returned masks of changing length ({counts.size} before, {mask.size} "
                f"for subsample "
                f"{first + offset}); every mask must have one entry per component"
            )
        counts += mask
    return (np.zeros(0, dtype=np.int64) if counts is None else counts), (
        -1 if counts is None else counts.size
    )


def _chunk_task(
    args: tuple[int, list[np.ndarray]], *, discover: Callable[[Any], Any], X: Any
) -> tuple[np.ndarray, int]:
    return _run_chunk(discover, X, args[0], args[1])


def _black_box_counts(
    discover: Callable[[Any], Any],
    X: Any,
    subsets: list[np.ndarray],
    *,
    executor: ExecutorArg,
    progress: Progress,
) -> np.ndarray:
    """Inclusion counts of `discover` over the subsets (run in about 100 chunks through `executor`)."""
    from certkit.parallel import parallel_map

    size = max(1, math.ceil(len(subsets) / 100))
    chunks = [(start, subsets[start : start + size]) for start in range(0, len(subsets), size)]
    task = functools.partial(_chunk_task, discover=discover, X=X)
    results = parallel_map(task, chunks, executor=executor, progress=progress)
    sizes = {n_comp for _, n_comp in results if n_comp >= 0}
    if not sizes:
        raise ValueError(
            "every subsample was empty, so discover never ran; lower deletion_prob or use more data"
        )
    if len(sizes) > 1:
        raise ValueError(
            f"discover returned masks of changing length ({sorted(sizes)}); "
            "every mask must have one entry per "
            "component"
        )
    n_comp = sizes.pop()
    total = np.zeros(n_comp, dtype=np.int64)
    for counts, size_ in results:
        if size_ >= 0:
            total += counts
    return total
