"""NumPy reference of the joint EM kernel (``certkit._core.mixreg.joint_em``, csrc/mixjoint.hpp).

The same steps as the kernel: retire groups with fewer than ``max p_j + 1`` effective samples, M-step
(weighted least squares per node and group with the relative ridge, variance floor), E-step in log
space, stop at ``|ΔL| <= tol * n``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy.special import logsumexp

from certkit.causal.mixture_regression import RIDGE

_LOG_2PI = float(np.log(2.0 * np.pi))


def _node_terms(Y: np.ndarray, designs: Sequence[np.ndarray]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per node, the rows of ``phi phi'`` (n, p*p) and ``y phi`` (n, p): the M-step is two products."""
    return [
        ((d[:, :, None] * d[:, None, :]).reshape(d.shape[0], -1), Y[:, [j]] * d)
        for j, d in enumerate(designs)
    ]


def _m_step(
    Y: np.ndarray,
    designs: Sequence[np.ndarray],
    terms: Sequence[tuple[np.ndarray, np.ndarray]],
    resp: np.ndarray,
    floors: np.ndarray,
) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    """Weighted least squares per node and group; returns coefficients, variances and log-densities.

    ``G_k = sum_i r_ik phi_i phi_i'`` plus the relative ridge ``RIDGE * G_k[a, a]`` of the single-node
    kernel, ``beta_k = G_k^{-1} sum_i r_ik y_i phi_i``, ``var_k = max(sum_i r_ik e_ik^2 / N_k, floor)``.
    """
    n, K = resp.shape
    count = resp.sum(axis=0)
    coefs, variances = [], np.empty((Y.shape[1], K))
    logdens = np.zeros((n, K))
    for j, (design, (outer, ydesign)) in enumerate(zip(designs, terms)):
        p = design.shape[1]
        gram = (resp.T @ outer).reshape(K, p, p)
        diag = np.einsum("kaa->ka", gram)
        gram[:, np.arange(p), np.arange(p)] += RIDGE * np.where(diag > 0.0, diag, 1.0)
        coef = np.linalg.solve(gram, (resp.T @ ydesign)[:, :, None])[:, :, 0]
        resid = Y[:, [j]] - design @ coef.T
        variance = np.maximum((resp * resid**2).sum(axis=0) / count, floors[j])
        coefs.append(coef)
        variances[j] = variance
        logdens -= 0.5 * (np.log(variance) + _LOG_2PI + resid**2 / variance)
    return coefs, variances, logdens


def reference_joint_em(
    Y: np.ndarray,
    designs: Sequence[np.ndarray],
    resp: np.ndarray,
    floors: np.ndarray,
    *,
    max_iter: int,
    tol: float,
) -> dict[str, Any]:
    """EM from the responsibilities ``resp``: M-step, then E-step, until ``|ΔL| <= tol * n``.

    Groups with fewer effective samples than the largest regression has parameters plus one are
    retired (dropped) before the M-step, as the single-node kernel does.
    """
    n = resp.shape[0]
    need = max(d.shape[1] for d in designs) + 1
    terms = _node_terms(Y, designs)
    trace: list[float] = []
    converged = False
    for it in range(max_iter + 1):
        live = resp.sum(axis=0) >= need
        if not live.all():
            resp = resp[:, live]
            if resp.shape[1] == 0:
                raise ValueError("every group was retired (too few samples per group); use fewer groups")
            total = resp.sum(axis=1, keepdims=True)
            # A sample held only by retired groups (hard starts) restarts uniform over the live ones.
            resp = np.where(total > 0.0, resp / np.where(total > 0.0, total, 1.0), 1.0 / resp.shape[1])
        coefs, variances, logdens = _m_step(Y, designs, terms, resp, floors)
        weights = resp.sum(axis=0) / n
        logp = np.log(weights) + logdens
        lse = logsumexp(logp, axis=1)
        resp = np.exp(logp - lse[:, None])
        trace.append(float(lse.sum()))
        if it > 0 and abs(trace[-1] - trace[-2]) <= tol * n:
            converged = True
            break
    return {
        "coef": coefs,
        "variance": variances,
        "weights": weights,
        "responsibilities": resp,
        "logdens": logdens,
        "trace": np.asarray(trace),
        "converged": converged,
    }


