"""Gaussian helpers of the response models: log-density, inverse Mills ratio and the probit maximum-likelihood
fit (Newton-Raphson with step halving)."""

from __future__ import annotations

import numpy as np
from scipy.special import log_ndtr

_LOG_SQRT_2PI = 0.5 * np.log(2.0 * np.pi)


def _log_pdf(z: np.ndarray) -> np.ndarray:
    return -0.5 * z * z - _LOG_SQRT_2PI


def _mills(z: np.ndarray) -> np.ndarray:
    """φ(z)/Φ(z), stable for very negative z."""
    return np.exp(_log_pdf(z) - log_ndtr(z))



def _probit_fit(
    w: np.ndarray, y: np.ndarray, offset: np.ndarray, *, max_iter: int, tol: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Newton–Raphson with step halving for the probit log-likelihood Σ log Φ(q(offset + wη)), q = 2y − 1.

    Large problems start from the fit on an evenly spaced subsample of 20,000 rows (the same maximum is
    reached; it saves most full-data iterations). Returns η, the observed information J (k, k) and the per-row
    scores (n, k).
    """
    q = 2.0 * y - 1.0
    eta = np.zeros(w.shape[1])
    if w.shape[0] > 50_000:
        sub = np.linspace(0, w.shape[0] - 1, 20_000).astype(np.int64)
        try:
            eta = _probit_fit(w[sub], y[sub], offset[sub], max_iter=max_iter, tol=1e-6)[0]
        except ValueError:  # the subsample may be separated where the full data are not
            eta = np.zeros(w.shape[1])
    qz = q * (offset + w @ eta)
    log_cdf = log_ndtr(qz)
    ll = float(np.sum(log_cdf))
    converged = False
    for _ in range(max_iter):
        lam = np.exp(_log_pdf(qz) - log_cdf)
        grad = w.T @ (q * lam)
        info = (w * (lam * (qz + lam))[:, None]).T @ w
        try:
            step = np.linalg.solve(info, grad)
        except np.linalg.LinAlgError as exc:
            raise ValueError(
                "data: the response model is not identified (singular information matrix); the move "
                "threshold and the covariates are collinear among the agents below the logging threshold"
            ) from exc
        t = 1.0
        while True:
            cand = eta + t * step
            qz_new = q * (offset + w @ cand)
            log_cdf_new = log_ndtr(qz_new)
            ll_new = float(np.sum(log_cdf_new))
            if ll_new >= ll - 1e-12 * abs(ll) or t < 1e-8:
                break
            t /= 2.0
        eta, qz, log_cdf, ll = cand, qz_new, log_cdf_new, ll_new
        if np.max(np.abs(t * step)) < tol * (1.0 + np.max(np.abs(eta))):
            converged = True
            break
    if not converged or np.max(np.abs(eta)) > 1e6:
        raise ValueError(
            "data: the maximum-likelihood fit of the response model did not converge - the moves are "
            "(quasi-)perfectly separated by the move threshold and covariates, so (β₀, β, s) are not "
            "identified; more data or more variation in the distance to the threshold is needed"
        )
    lam = np.exp(_log_pdf(qz) - log_cdf)
    info = (w * (lam * (qz + lam))[:, None]).T @ w
    scores = w * (q * lam)[:, None]
    return eta, info, scores
