"""NumPy reference of the EM kernel in csrc/mixreg.hpp (same steps, vectorised over samples)."""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp


def _statistics(y, design, resp):
    gram = np.einsum("ik,ia,ic->kac", resp, design, design)
    rhs = np.einsum("ik,ia,i->ka", resp, design, y)
    return gram, rhs, resp.T @ (y * y), resp.sum(axis=0)


def _m_step(stats, p, ridge, min_variance, coef, variance, weights):
    gram, rhs, syy, count = stats
    for k in range(coef.shape[0]):
        if weights[k] == 0.0:
            continue
        if not count[k] >= p + 1:
            weights[k] = 0.0
            continue
        diag = np.diag(gram[k])
        lam = ridge * np.where(diag > 0.0, diag, 1.0)
        try:
            chol = np.linalg.cholesky(gram[k] + np.diag(lam))
        except np.linalg.LinAlgError:
            weights[k] = 0.0
            continue
        coef[k] = np.linalg.solve(chol.T, np.linalg.solve(chol, rhs[k]))
        rss = max(syy[k] - 2.0 * coef[k] @ rhs[k] + coef[k] @ gram[k] @ coef[k], 0.0)
        variance[k] = max(rss / count[k], min_variance)
        weights[k] = count[k]
    weights /= weights.sum() if weights.any() else 1.0


def reference_em(y, design, resp0, *, max_iter, tol, ridge, min_variance):
    """Same contract as ``certkit._core.mixreg.em``."""
    n, p = design.shape
    K = resp0.shape[1]
    coef, variance, weights = np.zeros((K, p)), np.ones(K), np.ones(K)
    _m_step(_statistics(y, design, resp0), p, ridge, min_variance, coef, variance, weights)
    trace = []
    it = 0
    while True:
        with np.errstate(divide="ignore"):
            log_w = np.log(weights)
        resid = y[:, None] - design @ coef.T
        logp = log_w - 0.5 * (np.log(2 * np.pi * variance) + resid**2 / variance)
        lse = logsumexp(logp, axis=1)
        resp = np.exp(logp - lse[:, None])
        loglik = float(lse.sum())
        converged = bool(trace) and abs(loglik - trace[-1]) <= tol * n
        trace.append(loglik)
        if converged or it >= max_iter:
            return {
                "coef": coef,
                "variance": variance,
                "weights": weights,
                "responsibilities": resp,
                "loglik_trace": np.array(trace),
                "converged": converged,
            }
        _m_step(_statistics(y, design, resp), p, ridge, min_variance, coef, variance, weights)
        it += 1
