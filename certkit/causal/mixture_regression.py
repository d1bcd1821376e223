"""Mixtures of linear regressions fitted by EM (the compiled kernel ``certkit._core.mixreg``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from certkit._results import ResultMixin, format_table
from certkit._typing import RNGLike
from certkit._validation import (
    check_allocation,
    check_array,
    check_in_options,
    check_integer,
    check_positive,
    check_rng,
)
from certkit.causal.spline import MECHANISMS, NodeDesigns, check_n_knots

__all__ = ["MAX_STARTS", "MixtureRegressionResult", "fit_mixture_regression", "n_mixture_parameters"]

#: Most EM starts per fit (``n_init``): every start costs passes over the data and an (n, K) array.
MAX_STARTS = 1000

#: Relative ridge added to the diagonal of every weighted Gram matrix of the M-step, ``RIDGE * G[a, a]``
#: per column (scale-equivariant: rescaling a column of ``X`` rescales its slope, nothing else).
RIDGE = 1e-8

#: EM iterations every start gets before only the best one is run to convergence (short-run selection).
BURN_IN = 10


@dataclass(frozen=True)
class MixtureRegressionResult(ResultMixin):
    """A fitted mixture of ``K`` linear regressions ``y = [1, x]' coef[k] + N(0, scale[k]^2)``.

    Attributes
    ----------
    coef : ndarray (K, p)
        Regression coefficients per component; column 0 is the intercept, then one per column of ``X``
        (``mechanism="linear"``) or each column's spline basis coefficients in turn (``"spline"``).
    scale : ndarray (K,)
        Noise standard deviation per component.
    weights : ndarray (K,)
        Mixing proportions, summing to 1 (0 for a component that EM retired for lack of samples).
    responsibilities : ndarray (n, K)
        Posterior probability of each component for each sample (soft labels).
    labels : ndarray (n,)
        ``argmax`` of the responsibilities (hard labels).
    loglik : float
        Log-likelihood of the returned parameters.
    bic : float
        $-2\\,\\ell + (Kp + K + K - 1)\\log n$ with $K$ the number of live components.
    n_iter : int
        EM iterations (M-steps) of the best start (0 for ``K = 1``, solved in closed form).
    converged : bool
        Whether the best start met the tolerance before ``max_iter``.
    loglik_trace : ndarray
        Log-likelihood after every EM iteration of the best start: never decreasing up to rounding,
        except at an iteration that retires a component.
    """

    coef: np.ndarray
    scale: np.ndarray
    weights: np.ndarray
    responsibilities: np.ndarray
    labels: np.ndarray
    loglik: float
    bic: float
    n_iter: int
    converged: bool
    loglik_trace: np.ndarray

    @property
    def n_components(self) -> int:
        """Number of live components (weight > 0); EM may retire some of the ``K`` it started with."""
        return int(np.count_nonzero(self.weights > 0.0))

    def summary(self) -> str:
        """Components with their weights, scales and coefficients, then the fit statistics."""
        rows = [[k, self.weights[k], self.scale[k], *self.coef[k]] for k in range(self.coef.shape[0])]
        headers = [
            "component",
            "weight",
            "scale",
            "intercept",
            *(f"x{j}" for j in range(1, self.coef.shape[1])),
        ]
        status = "converged" if self.converged else "stopped at max_iter"
        return (
            format_table(headers, rows, title=f"Mixture of {self.n_components} linear regression(s)")
            + f"\nlog-likelihood {self.loglik:.3f}, BIC {self.bic:.3f}, "
            f"{self.n_iter} EM iterations ({status})"
        )


def n_mixture_parameters(n_components: int, n_regressors: int) -> int:
    """Free parameters of a mixture of ``K`` regressions on ``p = n_regressors`` columns (incl. intercept)."""
    return n_components * n_regressors + n_components + (n_components - 1)


def _design(X: Any, n: int) -> np.ndarray:
    """``[1, X]`` as a C-contiguous float64 (n, p) array; X may be None or have zero columns."""
    if X is None:
        return np.ones((n, 1))
    X = check_array(X, "X", ndim=(1, 2), allow_empty=True)
    if X.ndim == 1:
        X = X[:, None]
    if X.shape[0] != n:
        raise ValueError(f"X must have as many rows as y has entries ({n}), got {X.shape[0]}")
    return np.ascontiguousarray(np.column_stack([np.ones(n), X]))


def hard_responsibilities(labels: np.ndarray, k: int) -> np.ndarray:
    """One-hot (n, k) responsibilities of integer labels in ``0..k-1``."""
    resp = np.zeros((labels.size, k))
    resp[np.arange(labels.size), labels] = 1.0
    return resp


def initial_responsibilities(
    y: np.ndarray,
    design: np.ndarray,
    n_components: int,
    n_init: int,
    rng: np.random.Generator,
    *,
    regressors: np.ndarray | None = None,
) -> list[np.ndarray]:
    """Hard starting partitions: sorted-``y`` chunks, then ``n_init - 1`` random anchor partitions.

    A random start draws ``K`` distinct anchor samples and gives every sample the label of its nearest
    anchor in the standardised ``(x, y)`` space, so each start is a spatially coherent partition; ``x`` is
    ``regressors`` when given (the parents of a spline design), else the design's columns after the first.
    """
    n = y.size
    chunks = np.empty(n, dtype=np.int64)
    chunks[np.argsort(y, kind="stable")] = np.arange(n) * n_components // n
    points = np.column_stack([design[:, 1:] if regressors is None else regressors, y])
    spread = points.std(axis=0)
    points = (points - points.mean(axis=0)) / np.where(spread > 0, spread, 1.0)
    random = anchor_partitions(points, n_components, n_init - 1, rng)
    return [hard_responsibilities(chunks, n_components), *random]


def anchor_partitions(
    points: np.ndarray, n_components: int, count: int, rng: np.random.Generator
) -> list[np.ndarray]:
    """``count`` hard partitions: each draws ``n_components`` distinct anchor rows of ``points`` and
    gives every row the label of its nearest anchor (a spatially coherent random start)."""
    starts = []
    for _ in range(count):
        anchors = points[rng.choice(points.shape[0], size=n_components, replace=False)]
        dist = ((points[:, None, :] - anchors[None, :, :]) ** 2).sum(axis=2)
        starts.append(hard_responsibilities(np.argmin(dist, axis=1), n_components))
    return starts


def _gaussian_loglik(resid: np.ndarray, variance: float) -> float:
    return float(-0.5 * (resid.size * np.log(2.0 * np.pi * variance) + resid @ resid / variance))


def _closed_form(y: np.ndarray, design: np.ndarray, min_variance: float) -> dict[str, Any]:
    """``K = 1``: ordinary least squares, ``var = max(RSS / n, min_variance)``."""
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    resid = y - design @ coef
    variance = max(float(resid @ resid) / y.size, min_variance)
    loglik = _gaussian_loglik(resid, variance)
    return {
        "coef": coef[None, :],
        "variance": np.array([variance]),
        "weights": np.ones(1),
        "responsibilities": np.ones((y.size, 1)),
        "loglik_trace": np.array([loglik]),
        "converged": True,
    }


def fit_mixture_regression(
    y: Any,
    X: Any,
    n_components: int,
    *,
    rng: RNGLike = 0,
    n_init: int = 3,
    max_iter: int = 100,
    tol: float = 1e-5,
    min_variance: float = 1e-3,
    mechanism: str = "linear",
    n_knots: int | str = "bic",
) -> MixtureRegressionResult:
    """Fit a mixture of linear regressions of ``y`` on ``[1, X]`` (or on spline bases of ``X``) by EM.

    $p(y_i \\mid x_i) = \\sum_k \\pi_k\\, \\mathcal{N}(y_i;\\ \\beta_k^\\top [1, x_i],\\ \\sigma_k^2)$.
    ``K = 1`` is ordinary least squares in closed form. For ``K > 1`` the EM loop runs in C++
    (one fused pass per iteration: log-space E-step and the weighted Gram matrices of the next
    M-step, with the GIL released) from ``n_init`` starts, and the start with the highest final
    log-likelihood is returned.

    Parameters
    ----------
    y : array-like (n,)
        The response.
    X : array-like (n, q) or (n,), or None
        Regressors (an intercept is always added); None or ``q = 0`` fits a 1-D Gaussian mixture.
    n_components : int
        Number of components ``K >= 1``.
    rng : None, int or numpy.random.Generator
        Seeds the random starts.
    n_init : int
        Number of EM starts (1 to `MAX_STARTS` = 1000): the first splits the sorted ``y`` into ``K`` equal
        chunks, the others assign each sample to the nearest of ``K`` random anchor samples in the
        standardised ``(x, y)`` space.
        Every start runs 10 EM iterations; the one with the highest log-likelihood then runs to convergence.
    max_iter : int
        Maximum EM iterations per start (>= 1; ``converged`` says whether the tolerance was met).
    tol : float
        Stop when the mean log-likelihood (per sample) changes by at most ``tol`` in one iteration.
    min_variance : float
        Floor of every component variance, as a fraction of the variance of ``y`` (> 0). It keeps the
        likelihood bounded (a component cannot collapse onto a few points).

    Returns
    -------
    MixtureRegressionResult

    Raises
    ------
    ValueError
        If ``y`` is constant or not finite, shapes disagree, the design is rank deficient (collinear
        columns of ``X``), there are fewer samples than the model has free parameters ($Kp + 2K - 1$), or
        the starts would not fit in memory.
    """
    y = check_array(y, "y", ndim=1)
    n = y.size
    design = _design(X, n)
    mechanism = check_in_options(mechanism, "mechanism", MECHANISMS)
    n_knots = check_n_knots(n_knots)
    regressors = None
    owner = np.arange(design.shape[1]) - 1  # the column of X behind each design column (-1: intercept)
    if mechanism == "spline" and design.shape[1] > 1:
        regressors = design[:, 1:]
        columns = np.column_stack([y, regressors])
        if np.any(np.ptp(regressors, axis=0) == 0.0):
            raise ValueError("X has a constant column; a spline basis needs regressors that vary")
        designs = NodeDesigns(columns, mechanism, n_knots)
        parents = range(1, columns.shape[1])
        design = designs.design(0, parents)
        widths = [block.shape[1] for block in designs.blocks(0, parents)]
        owner = np.repeat(np.arange(-1, regressors.shape[1]), [1, *widths])
    _check_full_rank(design, owner)
    n_components = check_integer(n_components, "n_components", minimum=1)
    n_init = check_integer(n_init, "n_init", minimum=1, maximum=MAX_STARTS)
    # 0 iterations would return the starting partition as if it were a fit
    max_iter = check_integer(max_iter, "max_iter", minimum=1)
    tol = check_positive(tol, "tol")
    min_variance = check_positive(min_variance, "min_variance")
    n_params = n_mixture_parameters(n_components, design.shape[1])
    if n < max(n_params, n_components * (design.shape[1] + 1)):
        raise ValueError(
            f"y has {n} samples, fewer than the {n_params} free parameters of a mixture of {n_components} "
            f"regression(s) on {design.shape[1]} column(s) (each component also needs p + 1 = "
            f"{design.shape[1] + 1} samples); use fewer components or regressors, or more samples"
        )
    y_var = float(np.var(y))
    if y_var == 0.0:
        raise ValueError("y is constant; a regression mixture needs a response that varies")
    floor = min_variance * y_var
    if n_components > 1:
        # the starting partitions, (n, K) each, are held at once
        check_allocation(8.0 * n * n_components * n_init, "n_init", n_init,
                         what=f"{n_init} starting partitions of {n} samples into {n_components} components")
    gen = check_rng(rng) if n_components > 1 else None
    return fit_mixture(
        y, design, n_components, rng=gen, n_init=n_init, max_iter=max_iter, tol=tol, floor=floor,
        regressors=regressors,
    )


def _check_full_rank(design: np.ndarray, owner: np.ndarray) -> None:
    """Refuse a rank-deficient design, naming the first column of ``X`` (``owner`` of each design column)
    that is a combination of the intercept and the columns before it: its coefficients would not be
    determined, and the BIC would count parameters the data cannot fit."""
    p = design.shape[1]
    rank = int(np.linalg.matrix_rank(design))
    if rank == p:
        return
    first = next(j for j in range(2, p + 1) if np.linalg.matrix_rank(design[:, :j]) < j) - 1
    raise ValueError(
        f"X is collinear: its design [1, X] has rank {rank} for {p} columns, and column {owner[first]} of X "
        "is a combination of the intercept and the columns before it (a duplicated or constant column, or "
        "one a multiple or sum of others); drop or combine the collinear columns of X"
    )


def fit_mixture(
    y: np.ndarray,
    design: np.ndarray,
    n_components: int,
    *,
    rng: np.random.Generator | None,
    n_init: int,
    max_iter: int,
    tol: float,
    floor: float,
    regressors: np.ndarray | None = None,
) -> MixtureRegressionResult:
    """``fit_mixture_regression`` on validated input: ``y`` (n,) and ``design`` ``[1, X]`` (n, p) float64,
    enough samples for ``n_components``, ``floor`` the absolute variance floor, ``rng`` a Generator
    (unused for ``K = 1``), ``regressors`` the raw columns behind a spline design (for the starts).
    The causal search calls it directly, so its inner loop validates nothing.
    """
    n = y.size
    if n_components == 1:
        fit = _closed_form(y, design, floor)
        n_iter = 0
    else:
        from certkit._core import mixreg

        options = {"tol": tol, "ridge": RIDGE, "min_variance": floor}
        starts = initial_responsibilities(y, design, n_components, n_init, rng, regressors=regressors)
        burn_in = min(BURN_IN, max_iter) if len(starts) > 1 else max_iter
        fit = None
        for resp0 in starts:
            out = mixreg.em(y, design, resp0, max_iter=burn_in, **options)
            if fit is None or out["loglik_trace"][-1] > fit["loglik_trace"][-1]:
                fit = out
        n_iter = fit["loglik_trace"].size - 1
        if not fit["converged"] and n_iter < max_iter:
            # Continue the best start: an M-step from its responsibilities is its next EM iteration.
            rest = mixreg.em(y, design, fit["responsibilities"], max_iter=max_iter - n_iter - 1, **options)
            rest["loglik_trace"] = np.concatenate([fit["loglik_trace"], rest["loglik_trace"]])
            fit = rest
            n_iter = fit["loglik_trace"].size - 1
    loglik = float(fit["loglik_trace"][-1])
    n_live_params = n_mixture_parameters(int(np.count_nonzero(fit["weights"] > 0.0)), design.shape[1])
    resp = fit["responsibilities"]
    return MixtureRegressionResult(
        coef=fit["coef"],
        scale=np.sqrt(fit["variance"]),
        weights=fit["weights"],
        responsibilities=resp,
        labels=np.argmax(resp, axis=1).astype(np.int64),
        loglik=loglik,
        bic=-2.0 * loglik + n_live_params * np.log(n),
        n_iter=n_iter,
        converged=bool(fit["converged"]),
        loglik_trace=fit["loglik_trace"],
    )
