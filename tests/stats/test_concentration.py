"""Hoeffding and empirical-Bernstein bounds: formulas by hand, exact and simulated coverage, bad input."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from certkit.stats import empirical_bernstein_bound, hoeffding_bound

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


# ---------------------------------------------------------------- formulas by hand
def test_hoeffding_by_hand():
    low, high = hoeffding_bound(0.5, 100, confidence_level=0.95, alternative="greater")
    assert_below(low, 0.5 - np.sqrt(np.log(20) / 200))
    assert round(float(low), 6) == 0.377613
    assert high == 1.0
    low, high = hoeffding_bound(0.5, 100, confidence_level=0.95, alternative="less")
    assert low == 0.0
    assert_above(high, 0.5 + np.sqrt(np.log(20) / 200))
    low, high = hoeffding_bound(0.5, 100, confidence_level=0.95)  # two-sided: ln(2 / alpha) = ln 40
    width = np.sqrt(np.log(40) / 200)
    assert_below(low, 0.5 - width)
    assert_above(high, 0.5 + width)


def test_hoeffding_scales_with_the_range():
    low01, _ = hoeffding_bound(0.75, 50, confidence_level=0.9, alternative="greater")
    low, high = hoeffding_bound(0.5, 50, confidence_level=0.9, value_range=(-1.0, 1.0), alternative="greater")
    # X in [-1, 1] is 2 Y - 1 with Y in [0, 1]
    assert low == pytest.approx(2 * low01 - 1, rel=0, abs=1e-12)
    assert high == 1.0


def test_hoeffding_clips_to_the_range():
    low, high = hoeffding_bound(0.98, 10, confidence_level=0.99)
    assert high == 1.0 and 0.0 < low < 0.98
    low, _ = hoeffding_bound(0.02, 10, confidence_level=0.99, alternative="greater")
    assert low == 0.0


def test_empirical_bernstein_by_hand():
    # Maurer & Pontil (2009), Theorem 4: mean - sqrt(2 V ln(2/delta) / n) - 7 ln(2/delta) / (3 (n - 1)).
    low, high = empirical_bernstein_bound(0.95, 0.0475, 1000, confidence_level=0.95, alternative="greater")
    log_term = np.log(2 / 0.05)
    expected = 0.95 - np.sqrt(2 * 0.0475 * log_term / 1000) - 7 * log_term / (3 * 999)
    assert_below(low, expected)
    assert round(float(low), 4) == 0.9227
    assert high == 1.0
    # two-sided: delta / 2 per side -> ln(4 / delta); range [0, 10] scales the 1/n term only
    low, high = empirical_bernstein_bound(5.0, 4.0, 200, confidence_level=0.9, value_range=(0, 10))
    log_term = np.log(4 / 0.1)
    width = np.sqrt(2 * 4.0 * log_term / 200) + 7 * 10 * log_term / (3 * 199)
    assert_below(low, 5.0 - width, scale=10)
    assert_above(high, 5.0 + width, scale=10)


def test_empirical_bernstein_beats_hoeffding_at_low_variance():
    n = 2000
    eb_low, _ = empirical_bernstein_bound(0.99, 0.0099, n, alternative="greater")
    h_low, _ = hoeffding_bound(0.99, n, alternative="greater")
    assert eb_low > h_low
    # and loses at maximal variance (the 7 / (3 (n - 1)) term)
    eb_low, _ = empirical_bernstein_bound(0.5, 0.25, 100, alternative="greater")
    h_low, _ = hoeffding_bound(0.5, 100, alternative="greater")
    assert eb_low < h_low


def test_broadcasting_and_scalar_types():
    low, high = hoeffding_bound([0.2, 0.5, 0.8], [[10], [100]], confidence_level=0.9)
    assert low.shape == high.shape == (2, 3) and low.dtype == np.float64
    lo, hi = hoeffding_bound(0.5, 10, confidence_level=0.9)
    assert isinstance(lo, float) and isinstance(hi, float)
    low, high = empirical_bernstein_bound([0.2, 0.5], [0.1, 0.2], 50)
    assert low.shape == (2,)
    assert low[1] == empirical_bernstein_bound(0.5, 0.2, 50)[0]


@settings(max_examples=200, deadline=None)
@given(
    mean=st.floats(0, 1),
    n=st.integers(2, 10**6),
    level=st.floats(0.5, 0.999),
    alternative=st.sampled_from(ALTERNATIVES),
)
def test_intervals_contain_the_mean_and_shrink_with_n(mean, n, level, alternative):
    var = mean * (1 - mean)  # a valid Bernoulli-type variance
    for low, high in (
        hoeffding_bound(mean, n, confidence_level=level, alternative=alternative),
        empirical_bernstein_bound(mean, var, n, confidence_level=level, alternative=alternative),
    ):
        assert 0.0 <= low <= mean <= high <= 1.0
    low_n, high_n = hoeffding_bound(mean, n, confidence_level=level)
    low_4n, high_4n = hoeffding_bound(mean, 4 * n, confidence_level=level)
    assert low_4n >= low_n and high_4n <= high_n
    low_hi, high_hi = hoeffding_bound(mean, n, confidence_level=min(0.9999, level + 0.01))
    assert low_hi <= low_n and high_hi >= high_n


# ---------------------------------------------------------------- coverage
@pytest.mark.parametrize("n", [5, 30, 200])
@pytest.mark.parametrize("alternative", ALTERNATIVES)
def test_exact_coverage_for_bernoulli_samples(n, alternative):
    """Bernoulli samples: enumerate every count k, so coverage is computed exactly (no Monte Carlo)."""
    level = 0.9
    k = np.arange(n + 1)
    mean = k / n
    var = k * (n - k) / (n * (n - 1))
    bounds = [
        hoeffding_bound(mean, n, confidence_level=level, alternative=alternative),
        empirical_bernstein_bound(mean, var, n, confidence_level=level, alternative=alternative),
    ]
    p = np.linspace(0, 1, 1001)
    pmf = stats.binom.pmf(k[None, :], n, p[:, None])
    for low, high in bounds:
        covered = (low[None, :] <= p[:, None]) & (p[:, None] <= high[None, :])
        assert (pmf * covered).sum(axis=1).min() >= level - 1e-12


@pytest.mark.slow
@pytest.mark.parametrize("alternative", ALTERNATIVES)
def test_simulated_coverage_continuous_samples(alternative):
    """Beta samples scaled to [-2, 3]; coverage of both bounds >= level within binomial error."""
    rng = np.random.default_rng(11)
    level, reps, n, a, b = 0.9, 10_000, 40, -2.0, 3.0
    alpha_, beta_ = 0.3, 4.0  # skewed, small variance: where empirical Bernstein shines
    mu = a + (b - a) * alpha_ / (alpha_ + beta_)
    x = a + (b - a) * rng.beta(alpha_, beta_, size=(reps, n))
    mean, var = x.mean(axis=1), x.var(axis=1, ddof=1)
    se = np.sqrt(level * (1 - level) / reps)
    options = {"confidence_level": level, "value_range": (a, b), "alternative": alternative}
    hoeffding = hoeffding_bound(mean, n, **options)
    bernstein = empirical_bernstein_bound(mean, var, n, **options)
    for low, high in (hoeffding, bernstein):
        assert np.mean((low <= mu) & (mu <= high)) >= level - 3 * se


# ---------------------------------------------------------------- bad input
COMMON_BAD = [
    ({"confidence_level": 1.0}, ValueError, "confidence_level"),
    ({"confidence_level": 0.0}, ValueError, "confidence_level"),
    ({"confidence_level": np.nan}, ValueError, "confidence_level"),
    ({"alternative": "above"}, ValueError, "alternative"),
    ({"value_range": (1.0, 0.0)}, ValueError, "value_range must satisfy low < high"),
    ({"value_range": (0.0, np.inf)}, ValueError, "value_range must be finite"),
    ({"value_range": 1.0}, TypeError, "value_range must be a pair"),
    ({"value_range": (0.0, 1.0, 2.0)}, TypeError, "value_range must be a pair"),
]


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        *COMMON_BAD,
        ({"mean": np.nan}, ValueError, "mean must be finite"),
        ({"mean": 1.5}, ValueError, "mean must be <= 1.0"),
        ({"mean": -0.5}, ValueError, "mean must be >= 0.0"),
        ({"mean": "0.5"}, TypeError, "mean"),
        ({"n": 0}, ValueError, "n must be >= 1"),
        ({"n": 10.5}, TypeError, "n must contain integers"),
        ({"mean": [0.1, 0.2, 0.3], "n": [10, 20]}, ValueError, "broadcast"),
        ({"mean": []}, ValueError, "mean must not be empty"),
    ],
)
def test_hoeffding_bad_input(kwargs, error, match):
    full = {"mean": 0.5, "n": 10, **kwargs}
    mean, n = full.pop("mean"), full.pop("n")
    with pytest.raises(error, match=match):
        hoeffding_bound(mean, n, **full)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        *COMMON_BAD,
        ({"mean": np.inf}, ValueError, "mean must be finite"),
        ({"mean": 2.0}, ValueError, "mean must be <= 1.0"),
        ({"variance": -0.1}, ValueError, "variance must be >= 0.0"),
        ({"variance": np.nan}, ValueError, "variance must be finite"),
        ({"n": 1}, ValueError, "n must be >= 2"),
        ({"n": True}, TypeError, "n must contain integers"),
        ({"variance": [0.1, 0.2], "n": [10, 20, 30]}, ValueError, "broadcast"),
        ({"variance": 5.0}, ValueError, r"variance 5 is larger than any sample of 10 values in value_range"),
        ({"mean": 0.1, "variance": 0.11}, ValueError, r"variance 0.11 is larger.* = 0.1\b"),
        ({"mean": 0.0, "variance": 1e-6}, ValueError, "with mean 0 can have"),
    ],
)
def test_empirical_bernstein_bad_input(kwargs, error, match):
    full = {"mean": 0.5, "variance": 0.1, "n": 10, **kwargs}
    mean, var, n = full.pop("mean"), full.pop("variance"), full.pop("n")
    with pytest.raises(error, match=match):
        empirical_bernstein_bound(mean, var, n, **full)


def test_options_are_keyword_only():
    with pytest.raises(TypeError):
        hoeffding_bound(0.5, 10, 0.9)
    with pytest.raises(TypeError):
        empirical_bernstein_bound(0.5, 0.1, 10, 0.9)


def test_empirical_bernstein_variance_limit_is_attained_exactly():
    """Bhatia–Davis limit (mean - a)(b - mean) n/(n - 1): reached by samples at the two ends, and accepted."""
    for samples, value_range in [([0, 0, 1, 1], (0, 1)), ([0, 1, 1, 1, 1], (0, 1)), ([-2, 3, 3], (-2, 3))]:
        x = np.asarray(samples, dtype=float)
        a, b = value_range
        limit = (x.mean() - a) * (b - x.mean()) * len(x) / (len(x) - 1)
        assert np.var(x, ddof=1) == pytest.approx(limit, rel=1e-15)
        low, high = empirical_bernstein_bound(x.mean(), np.var(x, ddof=1), len(x), value_range=value_range)
        assert a <= low <= x.mean() <= high <= b
        with pytest.raises(ValueError, match=r"variance .* is larger than any sample"):
            empirical_bernstein_bound(x.mean(), limit * 1.001 + 1e-9, len(x), value_range=value_range)


def test_empirical_bernstein_accepts_every_simulated_sample_variance():
    rng = np.random.default_rng(0)
    for n in (2, 3, 10, 100):
        x = rng.uniform(size=(2000, n)) ** rng.uniform(0.05, 20, size=(2000, 1))
        x[:200] = rng.integers(0, 2, size=(200, n))  # two-point samples sit on the limit
        empirical_bernstein_bound(x.mean(axis=1), x.var(axis=1, ddof=1), n)
