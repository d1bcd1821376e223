"""Finite-sample conformal quantile: exact ranks, coverage guarantee, rounding of the rank, bad input."""

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from certkit.stats import conformal_quantile, conformal_rank


def test_rank_examples_by_hand():
    assert conformal_rank(9, 0.9) == 9  # (9 + 1) * 0.9 = 9
    assert conformal_rank(8, 0.9) == 9  # ceil(8.1) = 9 > 8 -> infinite quantile
    assert conformal_rank(99, 0.07) == 7  # 100 * 0.07 is 7.000000000000001 in float64
    assert conformal_rank(19, 0.95) == 19
    assert conformal_rank(100, 0.9) == 91  # ceil(90.9)
    assert conformal_rank(1, 0.3) == 1  # ceil(0.6)


@pytest.mark.parametrize("denominator", [10, 100, 1000])
def test_rank_equals_exact_rational_rank_for_decimal_levels(denominator):
    """For levels written as decimals j / denominator, the rank is the exact rational ceiling."""
    for j in range(1, denominator, max(1, denominator // 97)):
        level = j / denominator
        for n in range(1, 400):
            exact = math.ceil(Fraction(j, denominator) * (n + 1))
            assert conformal_rank(n, level) == exact, (n, level)


@settings(max_examples=500, deadline=None)
@given(n=st.integers(1, 10**7), level=st.floats(1e-6, 1 - 1e-6))
def test_rank_agrees_with_exact_arithmetic_away_from_integers(n, level):
    """The rounding slack only matters within a few ulps of an integer (it never drops a full rank)."""
    exact = Fraction(level) * (n + 1)
    rank = conformal_rank(n, level)
    assert rank in (math.ceil(exact), math.ceil(exact) - 1)
    if rank == math.ceil(exact) - 1:  # only when the exact product exceeds an integer by < 8 ulps
        assert exact - rank < 8 * np.finfo(np.float64).eps * exact


def test_quantile_is_the_ranked_order_statistic():
    rng = np.random.default_rng(0)
    for n in [1, 2, 9, 10, 57, 500]:
        scores = rng.normal(size=n)
        for level in [0.1, 0.5, 0.8, 0.9, 0.95]:
            rank = conformal_rank(n, level)
            expected = np.sort(scores)[rank - 1] if rank <= n else math.inf
            assert conformal_quantile(scores, confidence_level=level) == expected


def test_quantile_examples_by_hand():
    scores = [0.3, 0.1, 0.2, 0.5, 0.4, 0.9, 0.8, 0.7, 0.6]
    assert conformal_quantile(scores, confidence_level=0.9) == 0.9  # rank 9 of 9
    assert conformal_quantile(scores, confidence_level=0.5) == 0.5  # rank ceil(5) = 5
    assert conformal_quantile(scores, confidence_level=0.51) == 0.6  # rank ceil(5.1) = 6
    assert conformal_quantile(scores[:8], confidence_level=0.9) == math.inf
    assert conformal_quantile([2.0], confidence_level=0.4) == 2.0
    assert conformal_quantile([1.0, 3.0, 1.0, 1.0], confidence_level=0.6) == 1.0  # rank 3: ties kept
    assert conformal_quantile([1.0, 3.0, 1.0, 1.0], confidence_level=0.7) == 3.0  # rank ceil(3.5) = 4


def test_return_type_and_input_untouched():
    scores = np.array([3.0, 1.0, 2.0])
    q = conformal_quantile(scores, confidence_level=0.5)
    assert type(q) is float and q == 2.0
    assert np.array_equal(scores, [3.0, 1.0, 2.0])
    assert conformal_quantile([3, 1, 2], confidence_level=0.5) == 2.0  # integers accepted


def test_accepts_torch_tensors():
    torch = pytest.importorskip("torch")
    assert conformal_quantile(torch.tensor([3.0, 1.0, 2.0]), confidence_level=0.5) == 2.0


@settings(max_examples=100, deadline=None)
@given(
    scores=st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=60),
    level=st.floats(0.01, 0.99),
    seed=st.integers(0, 2**32 - 1),
)
def test_permutation_invariant_and_monotone_in_level(scores, level, seed):
    q = conformal_quantile(scores, confidence_level=level)
    shuffled = np.random.default_rng(seed).permutation(scores)
    assert conformal_quantile(shuffled, confidence_level=level) == q
    assert conformal_quantile(scores, confidence_level=min(0.999, level + 0.05)) >= q
    # at least a level fraction of the scores (plus the unseen one) lies at or below q
    assert np.sum(np.asarray(scores) <= q) >= level * (len(scores) + 1) - 1e-9 or q == math.inf


@pytest.mark.parametrize(("n", "level"), [(9, 0.9), (19, 0.9), (50, 0.8), (200, 0.95), (30, 0.5)])
def test_finite_sample_coverage_simulated(n, level):
    """Exchangeable continuous scores: P(S_test <= q) = rank / (n + 1) >= level, checked by simulation."""
    rng = np.random.default_rng(n)
    reps = 4000
    data = rng.standard_exponential(size=(reps, n + 1))
    covered = np.array(
        [data[i, n] <= conformal_quantile(data[i, :n], confidence_level=level) for i in range(reps)]
    )
    exact = conformal_rank(n, level) / (n + 1)
    assert exact >= level
    assert exact < level + 1 / (n + 1)
    se = np.sqrt(exact * (1 - exact) / reps)
    assert abs(covered.mean() - exact) <= 4 * se


@pytest.mark.slow
def test_coverage_with_ties_is_conservative():
    """Discrete scores (many ties): coverage stays >= level, within binomial error."""
    rng = np.random.default_rng(7)
    n, level, reps = 40, 0.85, 20_000
    data = rng.integers(0, 5, size=(reps, n + 1)).astype(float)
    covered = np.array(
        [data[i, n] <= conformal_quantile(data[i, :n], confidence_level=level) for i in range(reps)]
    )
    assert covered.mean() >= level - 3 * np.sqrt(level * (1 - level) / reps)


@pytest.mark.parametrize(
    ("scores", "level", "error", "match"),
    [
        ([1.0, np.nan], 0.9, ValueError, "scores must be finite"),
        ([1.0, np.inf], 0.9, ValueError, "scores must be finite"),
        ([[1.0, 2.0]], 0.9, ValueError, "scores must be 1-D"),
        (1.0, 0.9, ValueError, "scores must be 1-D"),
        ([], 0.9, ValueError, "scores must not be empty"),
        (["a", "b"], 0.9, TypeError, "scores"),
        ([True, False], 0.9, TypeError, "scores"),
        (None, 0.9, TypeError, "scores"),
        ([1.0, 2.0], 0.0, ValueError, "confidence_level"),
        ([1.0, 2.0], 1.0, ValueError, "confidence_level"),
        ([1.0, 2.0], -0.5, ValueError, "confidence_level"),
        ([1.0, 2.0], np.nan, ValueError, "confidence_level"),
        ([1.0, 2.0], None, TypeError, "confidence_level"),
    ],
)
def test_quantile_bad_input(scores, level, error, match):
    with pytest.raises(error, match=match):
        conformal_quantile(scores, confidence_level=level)


@pytest.mark.parametrize(
    ("n", "level", "error", "match"),
    [
        (0, 0.9, ValueError, "n must be >= 1"),
        (-3, 0.9, ValueError, "n must be >= 1"),
        (10.0, 0.9, TypeError, "n must be an integer"),
        (True, 0.9, TypeError, "n must be an integer"),
        (10, 1.0, ValueError, "confidence_level"),
        (10, np.nan, ValueError, "confidence_level"),
    ],
)
def test_rank_bad_input(n, level, error, match):
    with pytest.raises(error, match=match):
        conformal_rank(n, level)


def test_level_is_keyword_only():
    with pytest.raises(TypeError):
        conformal_quantile([1.0, 2.0], 0.5)


@pytest.mark.parametrize("decimals", [1, 2, 3, 4])
def test_rank_never_below_exact_for_decimal_levels(decimals):
    """Every level with <= 4 decimals and every n <= 5000: written directly, the rank is the exact rational
    ceiling of the decimal; passed as 1 - alpha (cancellation can push the float a few ulps above the
    decimal) it is never below it.  Coverage therefore holds for the level as written."""
    denominator = 10**decimals
    n = np.arange(1, 5001)
    slack = 4 * np.finfo(np.float64).eps
    for j in range(1, denominator):
        for level, numerator, written in ((j / denominator, j, True),
                                          (1 - j / denominator, denominator - j, False)):
            exact = -(-((n + 1) * numerator) // denominator)
            x = (n + 1) * level
            ranks = np.ceil(x - slack * x).astype(np.int64)  # conformal_rank, vectorised (checked below)
            sample = n[(j * 7) % 97::97]
            assert [conformal_rank(int(k), level) for k in sample] == list(ranks[sample - 1])
            assert np.all(ranks >= exact), (level, n[ranks < exact][:3])
            if written:
                assert np.array_equal(ranks, exact), (level, n[ranks != exact][:3])


def test_rank_shortfall_for_arbitrary_floats_is_below_six_ulps():
    """Documented worst case: one rank below the exact ceiling, only within 5.5 eps of an integer."""
    assert conformal_rank(9, 0.9000000000000001) == 9  # exact ceiling is 10: coverage 0.9 < level by 1e-16
    rng = np.random.default_rng(0)
    eps = np.finfo(np.float64).eps
    for _ in range(20000):
        n = int(rng.integers(1, 10**6))
        k = int(rng.integers(1, n + 1))
        base = k / (n + 1)  # make (n + 1) * level land within a few ulps of the integer k
        level = float(np.nextafter(base, 1.0)) if rng.random() < 0.5 else base
        for _ in range(int(rng.integers(0, 4))):
            level = float(np.nextafter(level, 1.0))
        if not 0 < level < 1:
            continue
        rank = conformal_rank(n, level)
        assert rank >= math.ceil(Fraction(level) * (n + 1)) - 1
        assert Fraction(rank, n + 1) >= Fraction(level) * (1 - Fraction(55, 10) * Fraction(eps))
