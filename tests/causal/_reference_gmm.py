"""NumPy reference of the Gaussian-mixture kernel (``certkit._core.mixreg.gaussian_mixture``, csrc/gmm.hpp).

The steps of scikit-learn's ``GaussianMixture`` EM, written out: the M-step from the one-hot
responsibilities of the start's centres (weights ``N_k / n``), then E-step (mean log-likelihood, log
responsibilities) and M-step (weights ``N_k / sum N_j``) until the bound changes by less than ``tol``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

_LOG_2PI = float(np.log(2.0 * np.pi))


def _m_step(X: np.ndarray, resp: np.ndarray, full: bool, reg: float) -> tuple[np.ndarray, ...]:
    """Unnormalised weights ``N_k``, means and precision factors (full: upper-triangular ``(L^-1)'``)."""
    nk = resp.sum(axis=0) + 10.0 * np.finfo(np.float64).eps
    means = (resp.T @ X) / nk[:, None]
    if not full:
        var = (resp.T @ (X * X)) / nk[:, None] - means**2 + reg
        if np.any(var <= 0.0):
            raise ValueError("ill-defined covariance")
        return nk, means, 1.0 / np.sqrt(var)
    K, d = means.shape
    cov = np.empty((K, d, d))
    for k in range(K):
        diff = X - means[k]
        cov[k] = (resp[:, k] * diff.T) @ diff / nk[k]
        cov[k].flat[:: d + 1] += reg
    try:
        chol = np.linalg.cholesky(cov)
    except np.linalg.LinAlgError:
        raise ValueError("ill-defined covariance") from None
    return nk, means, np.swapaxes(np.linalg.solve(chol, np.broadcast_to(np.eye(d), cov.shape)), 1, 2)


def _e_step(
    X: np.ndarray, weights: np.ndarray, means: np.ndarray, prec: np.ndarray
) -> tuple[float, np.ndarray]:
    """Mean log-likelihood per row and the log responsibilities."""
    d = X.shape[1]
    if prec.ndim == 2:  # diagonal
        sq = (((X[:, None, :] - means[None]) * prec[None]) ** 2).sum(axis=2)
        log_det = np.log(prec).sum(axis=1)
    else:
        whitened = np.einsum("nkd,kde->nke", X[:, None, :] - means[None], prec)
        sq = (whitened**2).sum(axis=2)
        log_det = np.log(np.diagonal(prec, axis1=1, axis2=2)).sum(axis=1)
    weighted = -0.5 * (d * _LOG_2PI + sq) + log_det + np.log(weights)
    top = weighted.max(axis=1, keepdims=True)
    norm = top[:, 0] + np.log(np.exp(weighted - top).sum(axis=1))
    return float(norm.mean()), weighted - norm[:, None]


def reference_gaussian_mixture(
    X: np.ndarray, centres: np.ndarray, predict: np.ndarray, *, full: bool, max_iter: int, tol: float,
    reg_covar: float,
) -> dict[str, Any]:
    """The kernel's result: weights, means, precisions_cholesky, the responsibilities of ``predict``,
    n_iter and converged."""
    n, K = X.shape[0], centres.size
    start = np.zeros((n, K))
    start[centres, np.arange(K)] = 1.0
    weights, means, prec = _m_step(X, start, full, reg_covar)
    weights = weights / n
    bound, n_iter, converged = -np.inf, 0, False
    while n_iter < max_iter and not converged:
        n_iter += 1
        previous = bound
        bound, log_resp = _e_step(X, weights, means, prec)
        weights, means, prec = _m_step(X, np.exp(log_resp), full, reg_covar)
        weights = weights / weights.sum()
        converged = abs(bound - previous) < tol
    return {
        "weights": weights,
        "means": means,
        "precisions_cholesky": prec,
        "responsibilities": np.exp(_e_step(predict, weights, means, prec)[1]),
        "n_iter": n_iter,
        "converged": converged,
    }
