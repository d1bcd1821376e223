"""Clopper–Pearson bounds: SciPy oracle, closed forms, exact coverage, simulation, bad input."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from certkit.stats import clopper_pearson

# SciPy's proportion_ci(method="exact") finds each bound with brentq (xtol=2e-12, rtol=4 eps), so it
# is only accurate to about 2e-12 absolute; our Beta quantiles are exact to a few ulps.
SCIPY_ATOL = 2.5e-12

ALTERNATIVES = ("two-sided", "greater", "less")

# Computed bounds are padded outward by 1e-13 relative plus 8 machine epsilons (certkit.stats docs); these
# check the direction of the padding and that it stays within twice that margin of the closed form.
PAD = 2e-13


def assert_below(actual, exact, scale=1.0):
    actual, exact = np.asarray(actual), np.asarray(exact)
    assert np.all(actual <= exact)
    assert np.all(actual >= exact - PAD * np.abs(exact) - 1e-14 * scale)


def assert_above(actual, exact, scale=1.0):
    actual, exact = np.asarray(actual), np.asarray(exact)
    assert np.all(actual >= exact)
    assert np.all(actual <= exact + PAD * np.abs(exact) + 1e-14 * scale)


@pytest.mark.parametrize("alternative", ALTERNATIVES)
@pytest.mark.parametrize("level", [0.5, 0.9, 0.95, 0.999])
@pytest.mark.parametrize(("k", "n"), [(0, 1), (1, 1), (0, 10), (3, 10), (10, 10), (990, 1000), (17, 250)])
def test_matches_scipy_binomtest(k, n, level, alternative):
    ci = stats.binomtest(k, n, alternative=alternative).proportion_ci(confidence_level=level, method="exact")
    low, high = clopper_pearson(k, n, confidence_level=level, alternative=alternative)
    assert low == pytest.approx(ci.low, abs=SCIPY_ATOL, rel=0)
    assert high == pytest.approx(ci.high, abs=SCIPY_ATOL, rel=0)


def test_matches_scipy_on_random_cases():
    rng = np.random.default_rng(1)
    n = rng.integers(1, 400, size=60)
    k = rng.integers(0, n + 1)
    level = 0.9
    for alternative in ALTERNATIVES:
        low, high = clopper_pearson(k, n, confidence_level=level, alternative=alternative)
        for i in range(len(n)):
            ci = stats.binomtest(int(k[i]), int(n[i]), alternative=alternative).proportion_ci(
                confidence_level=level, method="exact"
            )
            assert low[i] == pytest.approx(ci.low, abs=SCIPY_ATOL, rel=0)
            assert high[i] == pytest.approx(ci.high, abs=SCIPY_ATOL, rel=0)


def test_closed_forms_at_the_edges():
    # k = n: lower bound solves p^n = alpha (one-sided) or alpha/2 (two-sided); upper is exactly 1.
    low, high = clopper_pearson(1000, 1000, confidence_level=0.999, alternative="greater")
    assert_below(low, 0.001 ** (1 / 1000))
    assert round(float(low), 6) == 0.993116
    assert high == 1.0
    low, high = clopper_pearson(20, 20, confidence_level=0.9)
    assert_below(low, 0.05 ** (1 / 20))
    assert high == 1.0
    # k = 0: lower exactly 0, upper solves (1 - p)^n = alpha.
    low, high = clopper_pearson(0, 20, confidence_level=0.9, alternative="less")
    assert low == 0.0
    assert_above(high, 1 - 0.1 ** (1 / 20))
    low, high = clopper_pearson(0, 20, confidence_level=0.9)
    assert low == 0.0
    assert_above(high, 1 - 0.05 ** (1 / 20))
    # n = 1, k = 1: Beta(1, 1) quantile is the identity.
    low, _ = clopper_pearson(1, 1, confidence_level=0.8, alternative="greater")
    assert_below(low, 0.2)


def test_defining_tail_equations():
    # Lower bound: P(Bin(n, low) >= k) = alpha/2; upper: P(Bin(n, high) <= k) = alpha/2.
    k = np.array([1, 5, 50, 99])
    n = np.array([10, 10, 100, 100])
    low, high = clopper_pearson(k, n, confidence_level=0.95)
    np.testing.assert_allclose(stats.binom.sf(k - 1, n, low), 0.025, rtol=1e-9)
    np.testing.assert_allclose(stats.binom.cdf(k, n, high), 0.025, rtol=1e-9)


def test_scalar_and_broadcast_shapes():
    low, high = clopper_pearson(3, 10)
    assert isinstance(low, float) and isinstance(high, float)
    assert np.ndim(low) == 0
    low, high = clopper_pearson([[0], [3], [10]], [10, 20])
    assert low.shape == high.shape == (3, 2)
    assert low.dtype == np.float64
    for i, k in enumerate([0, 3, 10]):
        for j, n in enumerate([10, 20]):
            lo, hi = clopper_pearson(k, n)
            assert low[i, j] == lo and high[i, j] == hi


def test_accepts_integer_valued_floats_and_numpy_ints():
    assert clopper_pearson(np.int32(3), 10.0) == clopper_pearson(3, 10)


def test_family_wise_bonferroni():
    k = np.array([90, 95, 99])
    single = clopper_pearson(k, 100, confidence_level=1 - 0.05 / 3)
    family = clopper_pearson(k, 100, confidence_level=0.95, n_tests=3)
    np.testing.assert_allclose(family, single, rtol=1e-14)
    plain = clopper_pearson(k, 100, confidence_level=0.95)
    assert np.all(family[0] < plain[0]) and np.all(family[1] > plain[1])


def test_tiny_alpha_keeps_precision():
    # M = 1e5 components at level 0.999: alpha per test 1e-8; still strictly inside (0, 1) and ordered.
    low, high = clopper_pearson([0, 500, 1000], 1000, confidence_level=0.999, n_tests=100_000)
    assert np.all(np.diff(low) > 0) and np.all(np.diff(high) > 0)
    np.testing.assert_allclose(stats.binom.cdf(0, 1000, high[0]), 0.5e-8, rtol=1e-8)
    assert_below(low[2], 0.5e-8 ** (1 / 1000))


def test_monotone_in_successes_and_level():
    n = 50
    k = np.arange(n + 1)
    low, high = clopper_pearson(k, n, confidence_level=0.9)
    assert np.all(np.diff(low) > 0) and np.all(np.diff(high) > 0)
    low2, high2 = clopper_pearson(k, n, confidence_level=0.99)
    assert np.all(low2 <= low) and np.all(high2 >= high)
    assert np.all(low2[1:] < low[1:]) and np.all(high2[:-1] > high[:-1])


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(1, 5000),
    frac=st.floats(0, 1),
    level=st.floats(0.5, 0.999),
    alternative=st.sampled_from(ALTERNATIVES),
)
def test_interval_contains_the_estimate(n, frac, level, alternative):
    k = round(frac * n)
    low, high = clopper_pearson(k, n, confidence_level=level, alternative=alternative)
    assert 0.0 <= low <= k / n <= high <= 1.0
    two_low, two_high = clopper_pearson(k, n, confidence_level=level)
    # a one-sided bound at the same level is tighter on its side
    if alternative == "greater":
        assert low >= two_low and high == 1.0
    if alternative == "less":
        assert high <= two_high and low == 0.0


@pytest.mark.parametrize("alternative", ALTERNATIVES)
@pytest.mark.parametrize("n", [1, 7, 40, 200])
def test_exact_coverage_by_enumeration(n, alternative):
    """Coverage computed exactly over all k is >= level for every p on a fine grid."""
    level = 0.9
    k = np.arange(n + 1)
    low, high = clopper_pearson(k, n, confidence_level=level, alternative=alternative)
    p = np.linspace(0.0, 1.0, 2001)
    pmf = stats.binom.pmf(k[None, :], n, p[:, None])
    covered = (low[None, :] <= p[:, None]) & (p[:, None] <= high[None, :])
    coverage = (pmf * covered).sum(axis=1)
    assert coverage.min() >= level - 1e-12


@pytest.mark.slow
def test_simulated_coverage():
    rng = np.random.default_rng(12)
    level, reps = 0.95, 20_000
    se = np.sqrt(level * (1 - level) / reps)
    for n, p in [(30, 0.5), (100, 0.03), (1000, 0.99)]:
        k = rng.binomial(n, p, size=reps)
        low, high = clopper_pearson(k, n, confidence_level=level)
        coverage = np.mean((low <= p) & (p <= high))
        assert coverage >= level - 3 * se
        low, _ = clopper_pearson(k, n, confidence_level=level, alternative="greater")
        assert np.mean(low <= p) >= level - 3 * se


def test_family_wise_coverage_simulated():
    rng = np.random.default_rng(3)
    level, reps, m = 0.9, 4000, 20
    p = rng.uniform(0.05, 0.95, size=m)
    k = rng.binomial(100, p, size=(reps, m))
    low, high = clopper_pearson(k, 100, confidence_level=level, n_tests=m)
    all_covered = np.all((low <= p) & (p <= high), axis=1).mean()
    assert all_covered >= level - 3 * np.sqrt(level * (1 - level) / reps)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"successes": np.nan, "trials": 10}, TypeError, "successes"),
        ({"successes": 2.5, "trials": 10}, TypeError, "successes must contain integers"),
        ({"successes": True, "trials": 10}, TypeError, "successes"),
        ({"successes": "3", "trials": 10}, TypeError, "successes"),
        ({"successes": 3, "trials": np.inf}, TypeError, "trials"),
        ({"successes": 11, "trials": 10}, ValueError, r"successes must lie in \[0, trials\]"),
        ({"successes": -1, "trials": 10}, ValueError, r"successes must lie in \[0, trials\]"),
        ({"successes": 0, "trials": 0}, ValueError, "trials must be >= 1"),
        ({"successes": [1, 2, 3], "trials": [5, 6]}, ValueError, "broadcast"),
        ({"successes": [], "trials": 5}, ValueError, "successes must not be empty"),
        ({"successes": 1, "trials": 5, "confidence_level": 1.0}, ValueError, "confidence_level"),
        ({"successes": 1, "trials": 5, "confidence_level": 0.0}, ValueError, "confidence_level"),
        ({"successes": 1, "trials": 5, "confidence_level": np.nan}, ValueError, "confidence_level"),
        ({"successes": 1, "trials": 5, "confidence_level": 95}, ValueError, "confidence_level"),
        ({"successes": 1, "trials": 5, "confidence_level": "0.9"}, TypeError, "confidence_level"),
        ({"successes": 1, "trials": 5, "alternative": "upper"}, ValueError, "alternative"),
        ({"successes": 1, "trials": 5, "alternative": None}, TypeError, "alternative"),
        ({"successes": 1, "trials": 5, "n_tests": 0}, ValueError, "n_tests"),
        ({"successes": 1, "trials": 5, "n_tests": 2.0}, TypeError, "n_tests"),
    ],
)
def test_bad_input(kwargs, error, match):
    with pytest.raises(error, match=match):
        clopper_pearson(**kwargs)


def test_options_are_keyword_only():
    with pytest.raises(TypeError):
        clopper_pearson(1, 5, 0.9)
