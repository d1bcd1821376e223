"""`ScoreRule`: a score-decomposable discovery rule (top-k or threshold on mean per-example scores)."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from certkit._validation import check_array, check_integer

__all__ = ["ScoreRule"]


@dataclasses.dataclass(frozen=True)
class ScoreRule:
    """A score-decomposable discovery rule over a per-example score matrix.

    On a subsample $T$ the score of component $j$ is the mean of ``scores[i, j]`` over
    the rows $i \\in T$; the rule includes the ``top_k`` highest (ties to the lower index) or
    every component whose mean is ``>= threshold``.  An empty subsample includes nothing.
    Given to `certify_circuit` or `certify_circuit_partition`, all subsamples (or parts) are evaluated
    by the compiled kernels of `certkit._core.votes` (no Python per subsample).

    Parameters
    ----------
    scores : array-like of shape (n, N)
        Per-example component scores (finite), row ``i`` belonging to example ``i`` of the
        concept dataset, e.g. from `certkit.circuits.neuron_scores`.
    top_k : int, optional
        Include the ``top_k`` components with the largest mean score (``1 <= top_k <= N``).
    threshold : float, optional
        Include the components with mean score ``>= threshold``.  Give exactly one of the two.
    """

    scores: np.ndarray
    top_k: int | None = None
    threshold: float | None = None

    def __post_init__(self) -> None:
        scores = check_array(self.scores, "scores", ndim=2)
        scores = np.ascontiguousarray(scores, dtype=np.float64)
        if (self.top_k is None) == (self.threshold is None):
            raise ValueError("ScoreRule needs exactly one of top_k and threshold")
        if self.top_k is not None:
            check_integer(self.top_k, "top_k", minimum=1, maximum=scores.shape[1])
            object.__setattr__(self, "top_k", int(self.top_k))
        else:
            thr = check_array(self.threshold, "threshold", ndim=0)
            object.__setattr__(self, "threshold", float(thr))
        object.__setattr__(self, "scores", scores)

    @property
    def n_components(self) -> int:
        """Number of components ``N``."""
        return int(self.scores.shape[1])

    def select(self, mean_scores: Any) -> np.ndarray:
        """The rule applied to a vector of mean scores: a boolean mask of shape (N,)."""
        mean = check_array(mean_scores, "mean_scores", shape=(self.n_components,))
        if self.top_k is not None:
            order = np.lexsort((np.arange(mean.size), -mean))
            mask = np.zeros(mean.size, dtype=bool)
            mask[order[: self.top_k]] = True
            return mask
        return mean >= self.threshold

    def discover(self, rows: Any = None) -> np.ndarray:
        """The rule on the examples ``rows`` (all by default): the unsmoothed, uncertified circuit."""
        if rows is None:
            return self.select(self.scores.mean(axis=0))
        idx = check_array(rows, "rows", ndim=1, dtype=int, allow_empty=True)
        if idx.size == 0:
            return np.zeros(self.n_components, dtype=bool)
        n = self.scores.shape[0]
        if idx.min() < 0 or idx.max() >= n:
            raise ValueError(f"rows must be example indices in [0, {n - 1}] (negative indices are not "
                             f"allowed), got values in [{idx.min()}, {idx.max()}]")
        return self.select(self.scores[idx].mean(axis=0))
