"""MIBP at scale: interval matrix products by BLAS, the streamed batch sum, and chunk sizes that change only
the memory."""

import itertools
from fractions import Fraction

import numpy as np
import pytest

from certkit.mibp import (
    MLP,
    Budget,
    FeatureBox,
    InverseDecay,
    LabelFlips,
    TargetBox,
    certified_training,
)
from certkit.mibp.enclosures.interval import interval_matmul
from certkit.mibp.enclosures.sgd_step import BudgetSum, sum_with_budget
from certkit.parallel import available_memory, rows_per_chunk


def _random_intervals(gen, shape, kind):
    """Intervals of one sign class (``pos``, ``neg``, ``cross``), points, or a mix of all."""
    a, b = gen.normal(size=shape), np.abs(gen.normal(size=shape))
    if kind == "pos":
        lo = np.abs(a)
        return lo, lo + b
    if kind == "neg":
        hi = -np.abs(a)
        return hi - b, hi
    if kind == "cross":
        return -np.abs(a) - 1e-3, b + 1e-3
    if kind == "point":
        return a, a
    pick = gen.integers(0, 4, size=shape)
    lo = np.choose(pick, [np.abs(a), -np.abs(a) - b, -np.abs(a) - 1e-3, a])
    hi = np.choose(pick, [np.abs(a) + b, -np.abs(a), b + 1e-3, a])
    return lo, hi


def _exact_product_sum(WL, WU, hL, hU):
    """Σ_t [w_t] [h_t] in exact rational arithmetic: each term's ends are the extreme products of the ends."""
    n, i = hL.shape
    o = WL.shape[0]
    lo = np.empty((n, o), dtype=object)
    hi = np.empty((n, o), dtype=object)
    for k in range(n):
        for j in range(o):
            s_lo = s_hi = Fraction(0)
            for t in range(i):
                ends = [Fraction(w) * Fraction(h) for w in (WL[j, t], WU[j, t]) for h in (hL[k, t], hU[k, t])]
                s_lo += min(ends)
                s_hi += max(ends)
            lo[k, j], hi[k, j] = s_lo, s_hi
    return lo, hi


@pytest.mark.parametrize("h_kind", ["pos", "neg", "cross", "point", "mixed"])
@pytest.mark.parametrize("w_kind", ["pos", "cross", "mixed"])
def test_interval_matmul_equals_the_exact_interval_sum(h_kind, w_kind):
    """Exact oracle: the sum of the exact interval products, in rational arithmetic; the bound contains it
    and is tight up to its rounding allowance."""
    gen = np.random.default_rng([len(h_kind), len(w_kind)])
    WL, WU = _random_intervals(gen, (4, 5), w_kind)
    hL, hU = _random_intervals(gen, (3, 5), h_kind)
    lo, hi, mag = interval_matmul(WL, WU, hL, hU)
    ex_lo, ex_hi = _exact_product_sum(WL, WU, hL, hU)
    for k, j in itertools.product(range(3), range(4)):
        assert Fraction(lo[k, j]) <= ex_lo[k, j] and ex_hi[k, j] <= Fraction(hi[k, j])
        slack = 1e-13 * (1.0 + mag[k, j])
        assert float(ex_lo[k, j]) - lo[k, j] <= slack and hi[k, j] - float(ex_hi[k, j]) <= slack


def test_interval_matmul_holds_sampled_products():
    gen = np.random.default_rng(3)
    WL, WU = _random_intervals(gen, (6, 7), "mixed")
    hL, hU = _random_intervals(gen, (5, 7), "mixed")
    lo, hi, _ = interval_matmul(WL, WU, hL, hU)
    for _ in range(200):
        W = WL + gen.random(WL.shape) * (WU - WL)
        h = hL + gen.random(hL.shape) * (hU - hL)
        v = h @ W.T
        assert np.all(lo <= v) and np.all(v <= hi)


def _brute_force_budget_sum(PL, PU, NL, NU, budget):
    """max / min over every set of at most ``budget`` deviating rows, entry by entry."""
    n, m = PL.shape
    lo, hi = np.full(m, np.inf), np.full(m, -np.inf)
    for size in range(min(budget, n) + 1):
        for rows in itertools.combinations(range(n), size):
            dev = np.zeros(n, dtype=bool)
            dev[list(rows)] = True
            lo = np.minimum(lo, np.where(dev[:, None], PL, NL).sum(axis=0))
            hi = np.maximum(hi, np.where(dev[:, None], PU, NU).sum(axis=0))
    return lo, hi


@pytest.mark.parametrize("budget", [0, 1, 3, 7, 20])
def test_budget_sum_equals_brute_force_for_any_chunks(budget):
    """Exact oracle (every deviating set enumerated), the same for chunks of 1, 2, 3 and 7 rows."""
    gen = np.random.default_rng(budget)
    n, m = 7, 4
    NL = gen.normal(size=(n, m))
    NU = NL + gen.random((n, m))
    PL = NL - gen.random((n, m)) * (gen.random((n, m)) < 0.7)
    PU = NU + gen.random((n, m)) * (gen.random((n, m)) < 0.7)
    ex_lo, ex_hi = _brute_force_budget_sum(PL, PU, NL, NU, budget)
    whole = sum_with_budget(PL, PU, NL, NU, budget)
    # the padding: (3n + 4 + 4) ulps of the summed magnitudes, and one of the end
    mag = (np.maximum(np.abs(PL), np.abs(PU)) + np.maximum(np.abs(NL), np.abs(NU))).sum(axis=0)
    allowance = (3 * n + 10) * 2.0**-52 * mag
    for chunk in (1, 2, 3, 7):
        acc = BudgetSum(m, n, budget)
        for start in range(0, n, chunk):
            rows = slice(start, start + chunk)
            acc.add(PL[rows], PU[rows], NL[rows], NU[rows])
        lo, hi = acc.bounds()
        assert np.all(lo <= ex_lo) and np.all(hi >= ex_hi)
        assert np.all(ex_lo - lo <= allowance) and np.all(hi - ex_hi <= allowance)
        # another order of the same sums: equal up to the rounding the padding covers
        assert np.all(np.abs(lo - whole[0]) <= allowance) and np.all(np.abs(hi - whole[1]) <= allowance)


def test_budget_sum_without_a_budget_sums_every_deviating_row():
    gen = np.random.default_rng(1)
    PL = gen.normal(size=(5, 3))
    PU = PL + 1.0
    acc = BudgetSum(3, 5, None)
    for r in range(5):
        acc.add(PL[r : r + 1], PU[r : r + 1])
    lo, hi = acc.bounds()
    assert np.all(lo <= PL.sum(axis=0)) and np.all(hi >= PU.sum(axis=0))
    np.testing.assert_allclose(lo, PL.sum(axis=0), atol=1e-13)


def test_budget_sum_refuses_rows_beyond_its_batch():
    acc = BudgetSum(2, 1, 1)
    acc.add(np.zeros((1, 2)), np.zeros((1, 2)), np.zeros((1, 2)), np.zeros((1, 2)))
    with pytest.raises(RuntimeError, match="more rows"):
        acc.add(np.zeros((1, 2)), np.zeros((1, 2)), np.zeros((1, 2)), np.zeros((1, 2)))
    with pytest.raises(RuntimeError, match="before all its rows"):
        BudgetSum(2, 3, 1).bounds()


def _moons(n, seed=0):
    gen = np.random.default_rng(seed)
    X = gen.normal(size=(n, 2))
    return X, (X[:, 0] * X[:, 1] > 0).astype(np.int64)


CHUNK_CASES = [
    ("cross_entropy", Budget(FeatureBox(0.05), 3), "box", {}),
    ("cross_entropy", LabelFlips(2), "box", {"momentum": 0.5, "batch_size": 9}),
    ("cross_entropy", Budget(FeatureBox(0.05) & LabelFlips(1, target=1), 2), "box", {"clip_value": 0.2}),
    ("cross_entropy", FeatureBox(0.02) & LabelFlips(1), "box", {"clip_norm": 0.5, "l1_penalty": 0.01}),
    ("cross_entropy", LabelFlips(3), "shared", {"learning_rate": InverseDecay(1.0, 0.5)}),
    ("cross_entropy", Budget(FeatureBox(0.05) & LabelFlips(1), 2), "shared", {"l1_penalty": 0.01}),
    ("mse", Budget(FeatureBox(0.05) & TargetBox(0.2), 3), "box", {"weight_decay": 0.01}),
    ("mse", Budget(TargetBox(0.2), 3), "shared", {}),
]


@pytest.mark.parametrize(("loss", "perturbation", "carry", "options"), CHUNK_CASES)
def test_chunk_size_changes_nothing_but_rounding(loss, perturbation, carry, options):
    """The boxes for chunks of 1, 4 and 23 rows and the automatic size agree to the rounding of sums taken
    in another order (relative 1e-12 here; the padding covers any order), and all hold the nominal run."""
    X, y = _moons(23)
    if loss == "mse":
        y = X @ np.array([1.0, -0.5])
        model = MLP.random([2, 5, 1], rng=1)
    else:
        model = MLP.random([2, 5, 2], rng=1)
    kwargs = dict(perturbation=perturbation, loss=loss, epochs=2, carry=carry)
    kwargs.update({"learning_rate": 0.3, **options})
    runs = [certified_training(model, X, y, chunk_size=c, **kwargs) for c in (1, 4, 23, None)]
    for t in range(1, 3):
        ref_lo, ref_hi = runs[0].lower[t].to_vector(), runs[0].upper[t].to_vector()
        scale = 1.0 + np.abs(ref_lo) + np.abs(ref_hi)
        for res in runs[1:]:
            lo, hi = res.lower[t].to_vector(), res.upper[t].to_vector()
            assert np.all(np.abs(lo - ref_lo) <= 1e-12 * scale) and np.all(
                np.abs(hi - ref_hi) <= 1e-12 * scale
            )
            theta = res.nominal_path[t].to_vector()
            assert np.all(lo <= theta) and np.all(theta <= hi)


def test_chunk_size_is_checked():
    X, y = _moons(10)
    model = MLP.random([2, 3, 2], rng=0)
    for bad, error in ((0, ValueError), (-2, ValueError), (1.5, TypeError), ("8", TypeError)):
        with pytest.raises(error, match="chunk_size"):
            certified_training(model, X, y, perturbation=LabelFlips(1), loss="cross_entropy", chunk_size=bad)


def test_rows_per_chunk_follows_the_memory_and_the_override():
    assert rows_per_chunk(1000.0, 7) == 7
    auto = rows_per_chunk(1000.0)
    room = available_memory()
    assert auto >= 32 * 2**20 // 1000 and auto <= 256 * 2**20 // 1000
    if room is not None:
        assert auto * 1000 <= max(room / 8, 32 * 2**20) + 1000
    assert rows_per_chunk(1e12) == 1  # a row larger than the budget: one row at a time
