"""Baselines from causal-learn (PC, GES, DirectLiNGAM) as adjacency matrices in certkit's convention."""

from __future__ import annotations

import contextlib
import io
import warnings
from typing import Any

import numpy as np

from certkit._optional import require
from certkit._validation import check_level

__all__ = ["cpdag_adjacency", "run_direct_lingam", "run_ges", "run_pc"]


def cpdag_adjacency(graph: Any) -> np.ndarray:
    """``A[i, j] = 1`` for ``i -> j`` from a causal-learn graph matrix.

    causal-learn encodes ``i -> j`` as ``G[j, i] = 1, G[i, j] = -1`` and ``i -- j`` as
    ``G[i, j] = G[j, i] = -1``. An undirected edge of an equivalence class counts as both directions
    (so it scores one true and one false positive when the true edge is one of them).
    """
    g = np.asarray(graph)
    directed = (g.T == 1) & (g == -1)
    undirected = (g == -1) & (g.T == -1)
    return (directed | undirected).astype(np.int64)


def _quiet(fn: Any, *args: Any, **kwargs: Any) -> Any:
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


def run_ges(X: np.ndarray) -> np.ndarray:
    """causal-learn GES with its linear-Gaussian BIC; the CPDAG as an adjacency matrix."""
    ges = require("causallearn.search.ScoreBased.GES", extra="causal", purpose="the GES baseline").ges
    return cpdag_adjacency(_quiet(ges, np.asarray(X, dtype=np.float64))["G"].graph)


def run_pc(X: np.ndarray, *, confidence_level: float = 0.95) -> np.ndarray:
    """causal-learn PC with Fisher-z tests at significance ``1 - confidence_level``."""
    level = check_level(confidence_level)
    pc = require("causallearn.search.ConstraintBased.PC", extra="causal", purpose="the PC baseline").pc
    result = _quiet(
        pc, np.asarray(X, dtype=np.float64), alpha=1.0 - level, indep_test="fisherz", show_progress=False
    )
    return cpdag_adjacency(result.G.graph)


def run_direct_lingam(X: np.ndarray, *, seed: int = 0) -> np.ndarray:
    """causal-learn DirectLiNGAM (adaptive-lasso pruned) as an adjacency matrix."""
    lingam = require("causallearn.search.FCMBased.lingam", extra="causal", purpose="the LiNGAM baseline")
    model = lingam.DirectLiNGAM(random_state=seed)
    _quiet(model.fit, np.asarray(X, dtype=np.float64))
    return (np.abs(model.adjacency_matrix_.T) > 0).astype(np.int64)
