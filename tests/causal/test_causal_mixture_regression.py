import numpy as np
import pytest
from _reference_em import reference_em

from certkit._core import mixreg
from certkit.causal import ari, fit_mixture_regression
from certkit.causal.mixture_regression import BURN_IN, RIDGE, initial_responsibilities

EM_OPTIONS = {"max_iter": 60, "tol": 1e-7, "ridge": RIDGE}


def two_lines(n=600, noise=0.3, seed=0):
    gen = np.random.default_rng(seed)
    x = gen.normal(size=n)
    z = gen.integers(0, 2, n)
    y = np.where(z == 0, 1.0 + 2.0 * x, -1.0 - 1.5 * x) + noise * gen.normal(size=n)
    return x, y, z


# p = q + 1 columns: 1..8 run the kernel's p-specialised loops, 10 its generic ones.
@pytest.mark.parametrize(
    ("K", "q", "seed"), [(2, 1, 0), (3, 2, 1), (2, 0, 2), (4, 3, 3), (2, 7, 4), (3, 9, 5)]
)
def test_kernel_matches_numpy_reference(K, q, seed):
    gen = np.random.default_rng(seed)
    n = 400
    X = gen.normal(size=(n, q))
    z = gen.integers(0, K, n)
    y = X @ gen.normal(size=q) + 2.0 * z + 0.5 * gen.normal(size=n)
    design = np.column_stack([np.ones(n), X])
    for resp0 in initial_responsibilities(y, design, K, 3, gen):
        floor = 1e-3 * y.var()
        got = mixreg.em(y, design, resp0, min_variance=floor, **EM_OPTIONS)
        ref = reference_em(y, design, resp0, min_variance=floor, **EM_OPTIONS)
        assert got["loglik_trace"].shape == ref["loglik_trace"].shape
        np.testing.assert_allclose(got["loglik_trace"], ref["loglik_trace"], rtol=1e-10)
        for key in ("coef", "variance", "weights", "responsibilities"):
            np.testing.assert_allclose(got[key], ref[key], rtol=1e-7, atol=1e-9, err_msg=key)
        assert got["converged"] == ref["converged"]


def test_kernel_retires_starved_component_like_reference():
    # Component 2 starts with 2 samples: fewer than p + 1 = 3, so it is retired in the first M-step.
    x, y, _ = two_lines(n=200)
    design = np.column_stack([np.ones_like(x), x])
    labels = (x > 0).astype(int)
    labels[:2] = 2
    resp0 = np.eye(3)[labels]
    got = mixreg.em(y, design, resp0, min_variance=1e-3, **EM_OPTIONS)
    ref = reference_em(y, design, resp0, min_variance=1e-3, **EM_OPTIONS)
    assert got["weights"][2] == 0.0 and ref["weights"][2] == 0.0
    assert np.all(got["responsibilities"][:, 2] == 0.0)
    np.testing.assert_allclose(got["loglik_trace"], ref["loglik_trace"], rtol=1e-10)


@pytest.mark.parametrize("seed", range(8))
def test_em_loglik_never_decreases(seed):
    gen = np.random.default_rng(seed)
    n, q, K = 300, int(gen.integers(0, 3)), int(gen.integers(2, 5))
    X = gen.normal(size=(n, q))
    y = X.sum(axis=1) * gen.choice([-1, 1], n) + gen.standard_t(3, size=n)
    fit = fit_mixture_regression(y, X, K, rng=seed, max_iter=200, tol=1e-12)
    steps = np.diff(fit.loglik_trace)
    # Monotone up to floating-point rounding of a sum of n terms.
    assert np.all(steps >= -1e-10 * np.abs(fit.loglik_trace[1:])), steps.min()


def test_k1_is_closed_form_ols_with_gaussian_bic():
    x, y, _ = two_lines(n=250)
    fit = fit_mixture_regression(y, x, 1)
    slope, intercept = np.polyfit(x, y, 1)
    np.testing.assert_allclose(fit.coef[0], [intercept, slope], rtol=1e-12)
    rss = np.sum((y - intercept - slope * x) ** 2)
    var = rss / y.size
    loglik = -0.5 * y.size * (np.log(2 * np.pi * var) + 1.0)
    assert fit.loglik == pytest.approx(loglik, rel=1e-12)
    assert fit.bic == pytest.approx(-2 * loglik + 3 * np.log(y.size), rel=1e-12)  # p = 2, K = 1: 2 + 1
    assert fit.n_iter == 0 and fit.converged and np.all(fit.labels == 0)
    assert fit.scale[0] == pytest.approx(np.sqrt(var))


def test_bic_counts_mixture_parameters():
    x, y, _ = two_lines()
    fit = fit_mixture_regression(y, x, 3, rng=0)
    assert fit.bic == pytest.approx(-2 * fit.loglik + (3 * 2 + 3 + 2) * np.log(y.size))


def test_recovers_two_regression_lines_and_labels():
    x, y, z = two_lines(n=1000, noise=0.2)
    fit = fit_mixture_regression(y, x, 2, rng=0)
    order = np.argsort(fit.coef[:, 1])  # component with the negative slope first
    np.testing.assert_allclose(fit.coef[order], [[-1.0, -1.5], [1.0, 2.0]], atol=0.05)
    np.testing.assert_allclose(fit.scale, 0.2, atol=0.02)
    np.testing.assert_allclose(np.sort(fit.weights), np.sort(np.bincount(z) / z.size), atol=0.02)
    # Labels agree with the Bayes classifier under the true parameters (z itself is ambiguous where the lines
    # cross).
    weight1 = np.mean(z == 1)
    log_odds = (
        np.log(weight1 / (1 - weight1)) - 0.5 * ((y + 1.0 + 1.5 * x) ** 2 - (y - 1.0 - 2.0 * x) ** 2) / 0.2**2
    )
    assert ari((log_odds > 0).astype(int), fit.labels) > 0.95
    np.testing.assert_allclose(fit.responsibilities.sum(axis=1), 1.0)
    assert fit_mixture_regression(y, x, 2, rng=0).bic < fit_mixture_regression(y, x, 1).bic


def test_source_node_is_a_one_dimensional_gaussian_mixture():
    gen = np.random.default_rng(5)
    z = gen.integers(0, 2, 800)
    y = np.where(z == 1, 4.0, 0.0) + gen.normal(size=800)
    for X in (None, np.empty((800, 0))):
        fit = fit_mixture_regression(y, X, 2, rng=1)
        assert fit.coef.shape == (2, 1)
        np.testing.assert_allclose(np.sort(fit.coef[:, 0]), [0.0, 4.0], atol=0.15)
        assert ari(z, fit.labels) > 0.9


def test_seeded_and_deterministic():
    x, y, _ = two_lines(seed=3)
    a = fit_mixture_regression(y, x, 3, rng=11)
    b = fit_mixture_regression(y, x, 3, rng=np.random.default_rng(11))
    np.testing.assert_array_equal(a.responsibilities, b.responsibilities)
    assert a.loglik == b.loglik
    assert "Mixture of 3 linear regression(s)" in a.summary()


def test_best_start_after_burn_in_is_run_to_convergence():
    x, y, _ = two_lines(seed=4)
    design = np.column_stack([np.ones_like(x), x])
    starts = initial_responsibilities(y, design, 2, 5, np.random.default_rng(2))
    options = {"tol": 1e-5, "ridge": RIDGE, "min_variance": 1e-3 * y.var()}
    short = [mixreg.em(y, design, r, max_iter=BURN_IN, **options) for r in starts]
    best = max(short, key=lambda f: f["loglik_trace"][-1])
    fit = fit_mixture_regression(y, x, 2, rng=np.random.default_rng(2), n_init=5)
    np.testing.assert_array_equal(fit.loglik_trace[: BURN_IN + 1], best["loglik_trace"])
    # continuing from the responsibilities is the same EM path as one uninterrupted run of that start
    whole = mixreg.em(y, design, starts[short.index(best)], max_iter=100, **options)
    np.testing.assert_allclose(fit.loglik_trace, whole["loglik_trace"], rtol=1e-12)
    assert fit.loglik >= max(f["loglik_trace"][-1] for f in short)


def test_bad_inputs_name_the_argument():
    x, y, _ = two_lines(n=50)
    with pytest.raises(ValueError, match="n_components must be >= 1"):
        fit_mixture_regression(y, x, 0)
    with pytest.raises(TypeError, match="n_components"):
        fit_mixture_regression(y, x, 2.0)
    with pytest.raises(ValueError, match=r"fewer than the .* free parameters"):
        fit_mixture_regression(y[:8], x[:8], 3)
    with pytest.raises(ValueError, match="y is constant"):
        fit_mixture_regression(np.ones(50), x, 2)
    with pytest.raises(ValueError, match="y must be finite"):
        fit_mixture_regression(np.where(np.arange(50) == 3, np.nan, y), x, 2)
    with pytest.raises(ValueError, match="X must be finite"):
        fit_mixture_regression(y, np.where(np.arange(50) == 3, np.inf, x), 2)
    with pytest.raises(ValueError, match="X must have as many rows"):
        fit_mixture_regression(y, x[:40], 2)
    with pytest.raises(ValueError, match="min_variance must be > 0"):
        fit_mixture_regression(y, x, 2, min_variance=0.0)
    with pytest.raises(ValueError, match="n_init must be >= 1"):
        fit_mixture_regression(y, x, 2, n_init=0)


def test_kernel_validates_shapes():
    y = np.arange(10.0)
    with pytest.raises(ValueError, match="design must have n = 10 rows"):
        mixreg.em(y, np.ones((9, 1)), np.ones((10, 1)), max_iter=5, tol=1e-5, ridge=0.0, min_variance=1.0)
    with pytest.raises(ValueError, match="min_variance must be finite and > 0"):
        mixreg.em(y, np.ones((10, 1)), np.ones((10, 1)), max_iter=5, tol=1e-5, ridge=0.0, min_variance=0.0)


@pytest.mark.parametrize("seed", [0, 1])
def test_fit_is_invariant_to_rescaling_columns(seed):
    # The M-step ridge is per column (ridge * G_aa), so units of X change only the slopes.
    gen = np.random.default_rng(seed)
    n = 300
    X = gen.normal(size=(n, 3))
    z = gen.random(n) < 0.5
    y = np.where(z, 1.0 + X @ [2.0, -1.0, 0.5], -1.0 - X @ [1.0, 0.5, 2.0]) + 0.3 * gen.normal(size=n)
    base = fit_mixture_regression(y, X, 2, rng=seed)
    for scales in ([1e-4, 1e-4, 1e-4], [1e4, 1e4, 1e4], [1e-4, 1.0, 1e4]):
        s = np.asarray(scales)
        fit = fit_mixture_regression(y, X * s, 2, rng=seed)
        assert fit.loglik == pytest.approx(base.loglik, rel=1e-8)
        np.testing.assert_allclose(fit.coef[:, 1:] * s, base.coef[:, 1:], rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(fit.coef[:, 0], base.coef[:, 0], rtol=1e-6, atol=1e-9)


def test_weights_sum_to_one_after_retirement():
    # Pure noise with n = 40 and K = 4: the first M-step retires components (reviewer's case).
    gen = np.random.default_rng(0)
    y, X = gen.normal(size=40), gen.normal(size=(40, 1))
    fit = fit_mixture_regression(y, X, 4, rng=273, max_iter=1)
    assert fit.weights.sum() == pytest.approx(1.0, abs=1e-12)
    assert fit.n_components == np.count_nonzero(fit.weights > 0)


def test_em_monotone_between_retirements_and_weights_renormalised():
    # Many small pure-noise starts with K = 4 retire components; the log-likelihood may drop only at
    # an iteration that retires one (the retired component's share is lost), never otherwise.
    checked_retirements = 0
    for seed in range(12):
        gen = np.random.default_rng(seed)
        n = int(gen.integers(30, 80))
        y = gen.normal(size=n)
        design = np.column_stack([np.ones(n), gen.normal(size=(n, int(gen.integers(0, 3))))])
        opts = {"tol": 1e-300, "ridge": RIDGE, "min_variance": 1e-3 * y.var()}
        for resp0 in initial_responsibilities(y, design, 4, 3, gen):
            live = []
            for t in range(20):
                out = mixreg.em(y, design, resp0, max_iter=t, **opts)
                assert out["weights"].sum() == pytest.approx(1.0, abs=1e-12)
                live.append(np.count_nonzero(out["weights"]))
            trace = out["loglik_trace"]
            for t in range(1, trace.size):
                if live[t] == live[t - 1]:
                    assert trace[t] >= trace[t - 1] - 1e-10 * abs(trace[t - 1])
                else:
                    checked_retirements += 1
    assert checked_retirements > 0
