"""Graph metrics (structural Hamming distance, edge precision / recall / F1) and group metrics (ARI, AMI)."""

from __future__ import annotations

from typing import Any

import numpy as np

from certkit._validation import check_array, check_same_length

__all__ = ["ami", "ari", "edge_f1", "edge_precision", "edge_recall", "shd"]


def _adjacency(A: Any, name: str, d: int | None = None) -> np.ndarray:
    A = check_array(A, name, ndim=2, dtype=None)
    if A.shape[0] != A.shape[1]:
        raise ValueError(f"{name} must be a square (d, d) adjacency matrix, got shape {A.shape}")
    if d is not None and A.shape[0] != d:
        raise ValueError(f"{name} must have shape ({d}, {d}) like the other graph, got {A.shape}")
    if A.dtype != np.bool_ and (not np.issubdtype(A.dtype, np.number) or not np.all(np.isin(A, (0, 1)))):
        raise ValueError(f"{name} must contain only 0 and 1 (A[i, j] = 1 for an edge i -> j)")
    if np.any(np.diagonal(A)):
        raise ValueError(f"{name} has a self-loop (non-zero diagonal); a DAG adjacency needs a zero diagonal")
    return A.astype(np.int64)


def _pair(true: Any, estimate: Any) -> tuple[np.ndarray, np.ndarray]:
    A = _adjacency(true, "true")
    return A, _adjacency(estimate, "estimate", A.shape[0])


def shd(true: Any, estimate: Any) -> int:
    """Structural Hamming distance: node pairs whose edge differs (missing, extra or reversed count 1 each).

    Parameters
    ----------
    true, estimate : array-like (d, d) of 0/1
        Adjacency matrices, ``A[i, j] = 1`` for ``i -> j``.
    """
    A, B = _pair(true, estimate)
    iu = np.triu_indices(A.shape[0], k=1)
    return int(np.sum((A[iu] != B[iu]) | (A.T[iu] != B.T[iu])))


def _counts(true: Any, estimate: Any) -> tuple[int, int, int]:
    A, B = _pair(true, estimate)
    np.fill_diagonal(A, 0)
    np.fill_diagonal(B, 0)
    tp = int(np.sum((A == 1) & (B == 1)))
    return tp, int(B.sum()) - tp, int(A.sum()) - tp


def edge_precision(true: Any, estimate: Any) -> float:
    """Fraction of the estimated directed edges that are true edges (1.0 for an empty estimate)."""
    tp, fp, _ = _counts(true, estimate)
    return tp / (tp + fp) if tp + fp else 1.0


def edge_recall(true: Any, estimate: Any) -> float:
    """Fraction of the true directed edges that were found (1.0 when there are none)."""
    tp, _, fn = _counts(true, estimate)
    return tp / (tp + fn) if tp + fn else 1.0


def edge_f1(true: Any, estimate: Any) -> float:
    """Harmonic mean of directed-edge precision and recall (1.0 when both graphs are empty)."""
    tp, fp, fn = _counts(true, estimate)
    return 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 1.0


def _labels(true: Any, estimate: Any) -> tuple[np.ndarray, np.ndarray]:
    a = check_array(true, "labels_true", ndim=1, dtype=int)
    b = check_array(estimate, "labels_pred", ndim=1, dtype=int)
    check_same_length(("labels_true", a), ("labels_pred", b))
    return a, b


def ari(labels_true: Any, labels_pred: Any) -> float:
    """Adjusted Rand index of two labelings (invariant to permutations of the labels)."""
    from sklearn.metrics import adjusted_rand_score

    return float(adjusted_rand_score(*_labels(labels_true, labels_pred)))


def ami(labels_true: Any, labels_pred: Any) -> float:
    """Adjusted mutual information of two labelings (invariant to permutations of the labels)."""
    from sklearn.metrics import adjusted_mutual_info_score

    return float(adjusted_mutual_info_score(*_labels(labels_true, labels_pred)))
