"""Type stubs for the compiled submodule certkit._core.mixreg (kernel: csrc/mixreg.hpp).

EM for a mixture of K linear regressions with Gaussian noise. The kernel validates its own
arguments and raises ``ValueError`` naming the argument; ``certkit.causal.fit_mixture_regression``
validates first and calls it once per EM start. The GIL is released during the EM loop.
"""

from typing import TypedDict

import numpy as np
import numpy.typing as npt

class EmResult(TypedDict):
    coef: npt.NDArray[np.float64]
    variance: npt.NDArray[np.float64]
    weights: npt.NDArray[np.float64]
    responsibilities: npt.NDArray[np.float64]
    loglik_trace: npt.NDArray[np.float64]
    converged: bool

def em(
    y: npt.ArrayLike,
    design: npt.ArrayLike,
    resp0: npt.ArrayLike,
    *,
    max_iter: int,
    tol: float,
    ridge: float,
    min_variance: float,
) -> EmResult:
    """EM for ``p(y_i | phi_i) = sum_k w_k N(y_i; phi_i' beta_k, var_k)`` from given responsibilities.

    Every iteration is one fused pass over the samples: the log-space E-step (log-densities,
    logsumexp, responsibilities, log-likelihood) of the current parameters and the accumulation of the
    weighted Gram matrices ``G_k = sum_i r_ik phi_i phi_i'``, ``b_k = sum_i r_ik y_i phi_i``,
    ``sum_i r_ik y_i^2`` and ``N_k`` for the next M-step. M-step:
    ``beta_k = (G_k + diag(ridge * G_k[a, a]))^{-1} b_k`` (Cholesky, per-column ridge),
    ``var_k = max(RSS_k / N_k, min_variance)``, ``w_k = N_k / sum of the live N_j``; a component with
    ``N_k < p + 1`` or a Gram matrix that is not positive definite is retired (``w_k = 0``).

    Parameters
    ----------
    y : array_like of float64, shape (n,)
        Response (finite).
    design : array_like of float64, shape (n, p)
        Regressors including the intercept column, ``p >= 1`` (finite).
    resp0 : array_like of float64, shape (n, K)
        Starting responsibilities: finite, >= 0, rows summing to 1 (within 1e-6); the first M-step uses them.
    max_iter : int
        Maximum number of M-steps (>= 0).
    tol : float
        Stop after the pass whose log-likelihood changed by at most ``tol * n``.
    ridge : float
        Relative ridge (>= 0).
    min_variance : float
        Absolute variance floor (> 0).

    Returns
    -------
    dict
        ``coef`` (K, p), ``variance`` (K,), ``weights`` (K,), ``responsibilities`` (n, K) and
        ``loglik_trace`` (one entry per evaluated parameter set; the last one belongs to the returned
        parameters), ``converged``.

    Raises
    ------
    ValueError
        If an argument is out of range or shapes disagree, or if every component was retired: the
        message says whether for too few samples or for a singular Gram matrix (a rank-deficient,
        collinear design).
    """

class JointEmResult(TypedDict):
    coef: list[npt.NDArray[np.float64]]
    variance: npt.NDArray[np.float64]
    weights: npt.NDArray[np.float64]
    responsibilities: npt.NDArray[np.float64]
    loglik_trace: npt.NDArray[np.float64]
    converged: bool

def joint_em(
    Y: npt.ArrayLike,
    designs: list[npt.ArrayLike],
    resp0: npt.ArrayLike,
    *,
    max_iter: int,
    tol: float,
    ridge: float,
    min_variance: npt.ArrayLike,
    tiled: bool = False,
) -> JointEmResult:
    """Joint EM of one latent over m nodes (kernel: csrc/mixjoint.hpp; ``certkit.causal.fit_joint_mixture``).

    ``p(x_i) = sum_k w_k prod_j N(Y_ij; designs[j]_i' beta_jk, var_jk)``. Each iteration retires the
    groups with fewer than ``max_j p_j + 1`` effective samples (their samples' responsibility moves to the
    live groups; a sample held only by retired groups becomes uniform), runs the M-step per node and
    group (``beta = (G + diag(ridge * G_aa))^{-1} b``, ``var = max(sum r e^2 / N_k, min_variance[j])``,
    ``w_k = N_k / n``) and the log-space E-step, and stops after the iteration whose log-likelihood changed
    by at most ``tol * n``. Single-threaded, deterministic, GIL released.

    Parameters
    ----------
    Y : array_like of float64, shape (n, m)
        One column per node (finite).
    designs : list of array_like of float64, shapes (n, p_j)
        Node j's regressors including the intercept column.
    resp0 : array_like of float64, shape (n, K)
        Starting responsibilities (>= 0, rows summing to 1 within 1e-6).
    max_iter, tol, ridge
        As in ``em``.
    min_variance : array_like of float64, shape (m,)
        Per-node variance floors (> 0).
    tiled : bool
        Accumulate the Gram matrices in register tiles (faster for wide spline designs; the same steps up
        to rounding). True or False only.

    Returns
    -------
    dict
        ``coef`` (list of (K, p_j)), ``variance`` (m, K), ``weights`` (K,) with 0 for a retired group,
        ``responsibilities`` (n, K), ``loglik_trace``, ``converged``.

    Raises
    ------
    ValueError
        If an argument is out of range or shapes disagree, if every group was retired (too few samples)
        or if a group's weighted Gram matrix was singular (a rank-deficient, collinear design).
    """

class GaussianMixtureResult(TypedDict):
    weights: npt.NDArray[np.float64]
    means: npt.NDArray[np.float64]
    precisions_cholesky: npt.NDArray[np.float64]
    responsibilities: npt.NDArray[np.float64]
    n_iter: int
    converged: bool

def gaussian_mixture(
    X: npt.ArrayLike,
    centres: npt.ArrayLike,
    predict: npt.ArrayLike,
    *,
    full: bool,
    max_iter: int,
    tol: float,
    reg_covar: float,
) -> GaussianMixtureResult:
    """EM of a Gaussian mixture (kernel: csrc/gmm.hpp; the starts of ``certkit.causal``'s joint EM).

    scikit-learn's ``GaussianMixture`` EM: an M-step from the one-hot responsibilities of the rows
    ``centres`` (weights ``N_k / n``), then per iteration the E-step (bound: mean log-likelihood per row)
    and the M-step (``N_k = sum_i r_ik + 10 eps``, means, covariances plus ``reg_covar`` on the diagonal,
    weights ``N_k / sum_j N_j``), stopping when the bound changed by less than ``tol``.
    Single-threaded, deterministic, GIL released.

    Parameters
    ----------
    X : array_like of float64, shape (n, d)
        Rows the mixture is fitted on (finite, magnitudes <= 1e100).
    centres : array_like of int, shape (K,)
        One starting row of X per component (e.g. scikit-learn's ``kmeans_plusplus`` indices).
    predict : array_like of float64, shape (m, d)
        Rows whose responsibilities are returned (finite, magnitudes <= 1e100).
    full : bool
        Full covariances (True) or diagonal ones.
    max_iter : int
        Most EM iterations (>= 1).
    tol : float
        Stop when the mean log-likelihood changed by less than ``tol`` (>= 0).
    reg_covar : float
        Added to the diagonal of every covariance (>= 0).

    Returns
    -------
    dict
        ``weights`` (K,), ``means`` (K, d), ``precisions_cholesky`` (full: (K, d, d) upper-triangular
        ``P_k`` with ``P_k P_k' = S_k^{-1}``; diagonal: (K, d) ``1 / sqrt(s_k)``), ``responsibilities``
        (m, K) of ``predict``, ``n_iter``, ``converged``.

    Raises
    ------
    TypeError
        If ``centres`` is not an integer array, ``full`` not a bool or an array not real-valued.
    ValueError
        If an argument is out of range or shapes disagree, if a covariance is not positive definite, or
        if a row has no finite log-density under any component.
    """
