"""Starting responsibilities of the joint EM of a mixing variable (``certkit.causal.joint``)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from certkit.causal.mixture_regression import anchor_partitions

__all__ = ["GMM_START_ROWS", "default_starts", "gaussian_mixture_proba"]

#: Rows the Gaussian-mixture starts are fitted on (a random subsample when there are more).
GMM_START_ROWS = 2000
#: EM of the Gaussian-mixture starts: scikit-learn's ``GaussianMixture`` defaults.
GMM_TOL, GMM_MAX_ITER, GMM_REG_COVAR = 1e-3, 100, 1e-6


def _kmeans_plusplus_centres(X: np.ndarray, n_components: int, seed: int) -> np.ndarray:
    """Rows of scikit-learn's k-means++ centres (``GaussianMixture``'s start)."""
    from sklearn.cluster import kmeans_plusplus

    if X.shape[0] < n_components:
        raise ValueError(f"a Gaussian-mixture start needs at least {n_components} rows, got {X.shape[0]}")
    return kmeans_plusplus(X, n_components, random_state=np.random.RandomState(seed))[1]


def gaussian_mixture_proba(
    data: np.ndarray, rows: np.ndarray | slice, n_components: int, covariance: str, seed: int
) -> np.ndarray:
    """Responsibilities of every row of ``data`` (standardised columns) under a Gaussian mixture fitted
    on ``data[rows]``; ``covariance`` is ``"diag"`` or ``"full"``.

    The EM of scikit-learn's ``GaussianMixture(n_components, covariance_type=covariance,
    init_params="k-means++", random_state=seed)`` (same initialisation, updates, tolerance and
    ``max_iter``) in C++ (``certkit._core.mixreg.gaussian_mixture``), without its per-call overhead: the
    starts fit thousands of small mixtures. On continuous standardised data the responsibilities equal
    scikit-learn's up to rounding (about 1e-12). Where a component collapses onto one value of a column
    with few distinct values its variance is ``reg_covar`` (1e-6), which magnifies rounding: the two then
    differ by up to about 1e-2, both equally far from the exact EM. Columns far from standardised (scale
    or offset of 1e4 and more) lose the diagonal variances to cancellation, in scikit-learn's formula as
    here. An unconverged fit is returned as it stands (it is only a start). Raises ``ValueError`` when a
    component's covariance is ill-defined.
    """
    from certkit._core import mixreg

    if covariance not in ("diag", "full"):
        raise ValueError(f"covariance must be 'diag' or 'full', got {covariance!r}")
    X = data[rows]
    out = mixreg.gaussian_mixture(
        X, _kmeans_plusplus_centres(X, n_components, seed), data, full=covariance == "full",
        max_iter=GMM_MAX_ITER, tol=GMM_TOL, reg_covar=GMM_REG_COVAR,
    )
    return out["responsibilities"]


def _residual_points(Y: np.ndarray, designs: Sequence[np.ndarray]) -> np.ndarray:
    """Each node's least-squares residual on its parents, standardised: where the groups separate."""
    cols = []
    for j, design in enumerate(designs):
        coef, *_ = np.linalg.lstsq(design, Y[:, j], rcond=None)
        r = Y[:, j] - design @ coef
        cols.append((r - r.mean()) / max(r.std(), 1e-12))
    return np.column_stack(cols)


def default_starts(
    Y: np.ndarray,
    designs: Sequence[np.ndarray],
    n_components: int,
    n_init: int,
    rng: np.random.Generator,
    extra: Sequence[np.ndarray] = (),
    *,
    regressors: Sequence[np.ndarray] | None = None,
) -> list[np.ndarray]:
    """Starting responsibilities: ``extra`` (e.g. labels of single nodes, a warm start), a diagonal
    Gaussian mixture on the set's standardised least-squares residuals, a full-covariance Gaussian
    mixture on the standardised columns of the set and its parents (both fitted on at most
    ``GMM_START_ROWS`` random rows), then ``n_init - 1`` random anchor partitions of the residuals.
    The parents' columns are ``regressors`` (per node, (n, |pa|)) when given (behind spline designs),
    else the designs' columns after the first."""
    points = _residual_points(Y, designs)
    # The set's and its parents' columns, each once (a parent shared by two nodes, or a node that is
    # another's parent), in order of first appearance.
    raw = [d[:, 1:] for d in designs] if regressors is None else regressors
    distinct = {c.tobytes(): c for c in (*Y.T, *(col for r in raw for col in r.T))}
    columns = np.column_stack(list(distinct.values()))
    spread = columns.std(axis=0)
    columns = (columns - columns.mean(axis=0)) / np.where(spread > 0.0, spread, 1.0)
    n = Y.shape[0]
    # The Gaussian mixtures are only starts (EM on every row continues from them): fitted on a random
    # subsample when there are many rows, their responsibilities then computed for every row.
    rows = np.sort(rng.choice(n, size=GMM_START_ROWS, replace=False)) if n > GMM_START_ROWS else slice(None)
    starts = [np.asarray(s, dtype=np.float64) for s in extra]
    for data, covariance in ((points, "diag"), (columns, "full")):
        seed = int(rng.integers(2**31 - 1))
        starts.append(gaussian_mixture_proba(data, rows, n_components, covariance, seed))
    return starts + anchor_partitions(points, n_components, n_init - 1, rng)
