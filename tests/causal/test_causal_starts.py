"""The Gaussian-mixture starts of the joint EM: the C++ kernel against its NumPy reference, scikit-learn's
``GaussianMixture`` (whose EM it takes over) and cases solved by hand."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from _reference_gmm import reference_gaussian_mixture

from certkit._core import mixreg
from certkit.causal.starts import (
    GMM_MAX_ITER,
    GMM_REG_COVAR,
    GMM_START_ROWS,
    GMM_TOL,
    _kmeans_plusplus_centres,
    default_starts,
    gaussian_mixture_proba,
)

OPTIONS = {"max_iter": GMM_MAX_ITER, "tol": GMM_TOL, "reg_covar": GMM_REG_COVAR}


def _clusters(seed: int, n: int, d: int, K: int, spread: float = 2.5) -> np.ndarray:
    gen = np.random.default_rng([seed, 41])
    centres = spread * gen.standard_normal((K, d))
    X = centres[gen.integers(0, K, n)] + gen.standard_normal((n, d)) @ gen.uniform(0.3, 1.0, (d, d))
    return X


def _sklearn_proba(data, rows, K, covariance, seed):
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.mixture import GaussianMixture

    gmm = GaussianMixture(K, covariance_type=covariance, init_params="k-means++", random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return gmm.fit(data[rows]).predict_proba(data)


@pytest.mark.parametrize(
    ("seed", "n", "d", "K"), [(0, 300, 1, 2), (1, 800, 3, 3), (2, 1500, 6, 4), (3, 60, 2, 5)]
)
@pytest.mark.parametrize("full", [False, True])
def test_gmm_kernel_equals_the_numpy_reference(seed, n, d, K, full):
    X = _clusters(seed, n, d, K)
    predict = _clusters(seed + 100, 50, d, K)
    centres = _kmeans_plusplus_centres(X, K, seed)
    for max_iter, tol in [(1, GMM_TOL), (5, 0.0), (GMM_MAX_ITER, GMM_TOL)]:
        options = {"max_iter": max_iter, "tol": tol, "reg_covar": GMM_REG_COVAR}
        out = mixreg.gaussian_mixture(X, centres, predict, full=full, **options)
        ref = reference_gaussian_mixture(X, centres, predict, full=full, **options)
        assert (out["n_iter"], out["converged"]) == (ref["n_iter"], ref["converged"])
        # the same steps summed in another order: differences of a few ulps, grown by the EM iterations
        np.testing.assert_allclose(out["weights"], ref["weights"], rtol=1e-9)
        np.testing.assert_allclose(out["means"], ref["means"], rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(
            out["precisions_cholesky"], ref["precisions_cholesky"], rtol=1e-9, atol=1e-9
        )
        np.testing.assert_allclose(out["responsibilities"], ref["responsibilities"], atol=1e-9)
        np.testing.assert_allclose(out["responsibilities"].sum(axis=1), 1.0, rtol=1e-12)


@pytest.mark.parametrize(("seed", "n", "d", "K"), [(4, 500, 2, 2), (5, 2600, 4, 3), (6, 1200, 7, 4)])
@pytest.mark.parametrize("covariance", ["diag", "full"])
def test_gaussian_mixture_proba_equals_scikit_learn(seed, n, d, K, covariance):
    """The kernel replaces ``GaussianMixture(K, covariance_type, init_params="k-means++")``: the same
    responsibilities up to rounding, fitted on a subsample of rows and evaluated on every row."""
    X = _clusters(seed, n, d, K)
    rows = np.sort(np.random.default_rng(seed).choice(n, size=min(n, GMM_START_ROWS), replace=False))
    for gmm_seed in (0, 12345, 2**31 - 2):
        ours = gaussian_mixture_proba(X, rows, K, covariance, gmm_seed)
        np.testing.assert_allclose(ours, _sklearn_proba(X, rows, K, covariance, gmm_seed), atol=1e-8)


@pytest.mark.parametrize("n", [400, GMM_START_ROWS + 700])
def test_default_starts_are_the_scikit_learn_starts(n):
    """``default_starts`` with the kernel gives the starts it gave with scikit-learn's mixtures (the same
    seeds and rows drawn from the same rng), and the random partitions after them unchanged."""
    from certkit.causal.mixture_regression import anchor_partitions
    from certkit.causal.starts import _residual_points

    gen = np.random.default_rng(8)
    Y = _clusters(8, n, 2, 3)
    parent = gen.standard_normal(n)
    Y[:, 1] += 0.7 * parent
    designs = [np.ones((n, 1)), np.column_stack([np.ones(n), parent])]
    starts = default_starts(Y, designs, 3, 3, np.random.default_rng(0))
    rng = np.random.default_rng(0)
    rows = np.sort(rng.choice(n, size=GMM_START_ROWS, replace=False)) if n > GMM_START_ROWS else slice(None)
    points = _residual_points(Y, designs)
    columns = np.column_stack([Y, parent])
    columns = (columns - columns.mean(axis=0)) / columns.std(axis=0)
    expected = [
        _sklearn_proba(points, rows, 3, "diag", int(rng.integers(2**31 - 1))),
        _sklearn_proba(columns, rows, 3, "full", int(rng.integers(2**31 - 1))),
    ]
    assert len(starts) == 4
    for got, want in zip(starts[:2], expected):
        np.testing.assert_allclose(got, want, atol=1e-8)
    for got, want in zip(starts[2:], anchor_partitions(points, 3, 2, rng)):  # the rng where it was
        np.testing.assert_array_equal(got, want)


def test_gmm_kernel_by_hand_two_tight_clusters():
    """Three copies of (0, 0) and three of (10, -10), started at one row of each: every M-step gives the
    cluster means, covariance reg_covar * I (precision factor 1000 I) and weights 1/2, and the
    responsibilities are one-hot (the other component's density underflows to 0)."""
    X = np.array([[0.0, 0.0]] * 3 + [[10.0, -10.0]] * 3)
    for full in (False, True):
        out = mixreg.gaussian_mixture(X, np.array([4, 1]), X, full=full, **OPTIONS)
        np.testing.assert_allclose(out["means"], [[10.0, -10.0], [0.0, 0.0]], rtol=1e-14, atol=1e-14)
        np.testing.assert_allclose(out["weights"], [0.5, 0.5], rtol=1e-14)
        factor = np.eye(2) * 1e3 if full else np.full(2, 1e3)
        # diag takes E[x^2] - mean^2 (scikit-learn's formula): 100 - 100 leaves up to 100 eps = 2e-14 of
        # the variance 1e-6, a relative 2e-8; the full covariance is taken around the means (N_k + 10 eps
        # moves them by ulps, so an off-diagonal entry may be 1e-20 instead of 0)
        np.testing.assert_allclose(
            out["precisions_cholesky"], [factor, factor], rtol=1e-14 if full else 1e-7, atol=1e-12
        )
        np.testing.assert_array_equal(out["responsibilities"], [[0, 1]] * 3 + [[1, 0]] * 3)
        assert out["converged"]


def test_gmm_kernel_by_hand_one_component():
    """K = 1: the sample mean and the (biased) sample covariance plus reg_covar, after one step."""
    X = _clusters(9, 200, 3, 1)
    cov = np.cov(X.T, bias=True) + GMM_REG_COVAR * np.eye(3)
    out = mixreg.gaussian_mixture(X, np.array([7]), X, full=True, **OPTIONS)
    np.testing.assert_allclose(out["means"][0], X.mean(axis=0), rtol=1e-12, atol=1e-12)
    P = out["precisions_cholesky"][0]
    np.testing.assert_allclose(P, np.triu(P))
    np.testing.assert_allclose(P @ P.T, np.linalg.inv(cov), rtol=1e-9)
    np.testing.assert_array_equal(out["responsibilities"], 1.0)
    diag = mixreg.gaussian_mixture(X, np.array([7]), X, full=False, **OPTIONS)
    np.testing.assert_allclose(diag["precisions_cholesky"][0], 1.0 / np.sqrt(np.diag(cov)), rtol=1e-9)


def test_an_ill_defined_covariance_raises_like_scikit_learn():
    """Two identical columns of magnitude 1e9: reg_covar is lost to rounding, the covariance is singular;
    scikit-learn raises, so does the kernel (a joint fit then treats that K as too large)."""
    t = 1e9 * np.random.default_rng(0).standard_normal(300)
    X = np.column_stack([t, t])
    with pytest.raises(ValueError, match="ill-defined"):
        _sklearn_proba(X, slice(None), 2, "full", 0)
    with pytest.raises(ValueError, match="ill-defined covariance"):
        gaussian_mixture_proba(X, slice(None), 2, "full", 0)
    with pytest.raises(ValueError, match="at least 3 rows"):
        gaussian_mixture_proba(X[:2], slice(None), 3, "diag", 0)
    with pytest.raises(ValueError, match="covariance must be 'diag' or 'full', got 'tied'"):
        gaussian_mixture_proba(X, slice(None), 2, "tied", 0)


def test_a_row_without_a_finite_log_density_raises():
    """Squared distances that overflow (reg_covar 0, tiny spreads, a far row): every log-density of the
    row is -inf; scikit-learn returns NaN, the kernel refuses."""
    X = np.random.default_rng(0).standard_normal((100, 2)) * 1e-100
    X[50:] += 1e-99
    with pytest.raises(ValueError, match="no finite log-density"):
        mixreg.gaussian_mixture(
            X, np.array([0, 60]), np.array([[1e100, 1e100]]), full=True, max_iter=100, tol=1e-3, reg_covar=0.0
        )


@pytest.mark.parametrize(
    ("change", "error", "match"),
    [
        ("centre_range", ValueError, r"centres must hold row indices of X in \[0, 100\)"),
        ("centre_float", TypeError, "centres must be an array of integers"),
        ("centre_2d", ValueError, "centres must be a 1-D array"),
        ("predict_columns", ValueError, "predict must be 2-D with the d = 2 columns of X"),
        ("nan", ValueError, "X must be finite"),
        ("predict_inf", ValueError, "predict must be finite"),
        ("tol", ValueError, "tol must be finite and >= 0"),
        ("reg", ValueError, "reg_covar must be finite and >= 0"),
        ("max_iter", ValueError, "max_iter must be >= 1"),
        ("empty", ValueError, "X must not be empty"),
        ("full_none", TypeError, "full must be True or False"),
        ("full_int", TypeError, "full must be True or False"),
    ],
)
def test_gmm_kernel_rejects_bad_arguments(change, error, match):
    X = _clusters(0, 100, 2, 2)
    centres, predict = np.array([0, 1]), X
    options = dict(full=True, **OPTIONS)
    if change == "centre_range":
        centres = np.array([0, 100])
    elif change == "centre_float":
        centres = np.array([0.0, 1.0])
    elif change == "centre_2d":
        centres = np.array([[0, 1]])
    elif change == "predict_columns":
        predict = X[:, :1]
    elif change == "nan":
        X = X.copy()
        X[3, 1] = np.nan
    elif change == "predict_inf":
        predict = X.copy()
        predict[0, 0] = np.inf
    elif change == "tol":
        options["tol"] = -1.0
    elif change == "reg":
        options["reg_covar"] = np.nan
    elif change == "max_iter":
        options["max_iter"] = 0
    elif change == "empty":
        X = X[:0]
    elif change == "full_none":
        options["full"] = None
    elif change == "full_int":
        options["full"] = 1
    with pytest.raises(error, match=match):
        mixreg.gaussian_mixture(X, centres, predict, **options)
