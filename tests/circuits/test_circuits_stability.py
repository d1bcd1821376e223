"""Tests of circuit_stability and jaccard: exact oracles, determinism, validity of the intervals."""

from __future__ import annotations

import concurrent.futures
import math

import numpy as np
import pytest
from scipy import stats

from certkit._results import ConfidenceInterval
from certkit.circuits import CircuitStability, ScoreRule, circuit_stability, jaccard

CERT = {"subsample_size": 4, "n_subsamples": 300}


class Constant:
    """A discovery that ignores its data: always the same circuit."""

    def __init__(self, mask):
        self.mask = np.asarray(mask, dtype=bool)

    def __call__(self, X):
        return self.mask.copy()


class PresentIds:
    """Component j is included iff example j (pool rows hold their own index) is in the set."""

    def __init__(self, n, set_size):
        self.n, self.set_size = n, set_size

    def __call__(self, X):
        assert len(X) == self.set_size
        mask = np.zeros(self.n, dtype=bool)
        mask[np.asarray(X, dtype=int).ravel()] = True
        return mask


class PresentValues:
    """Component v is included iff some example of the set has value v."""

    def __init__(self, n_values):
        self.n_values = n_values

    def __call__(self, X):
        mask = np.zeros(self.n_values, dtype=bool)
        mask[np.asarray(X, dtype=int).ravel()] = True
        return mask


class TopKMean:
    def __init__(self, k):
        self.k = k

    def __call__(self, X):
        return ScoreRule(np.asarray(X), top_k=self.k).discover()


# ----------------------------------------------------------------------------------------------
# jaccard: exact oracle


def test_jaccard_hand_computed():
    a = np.array([1, 1, 0, 0, 1, 0], dtype=bool)
    b = np.array([1, 0, 1, 0, 1, 0], dtype=bool)
    # intersection {0, 4} = 2, union {0, 1, 2, 4} = 4
    assert jaccard(a, b) == 0.5
    assert jaccard(a, a) == 1.0
    assert jaccard(a, ~a) == 0.0
    # one component shared out of 5 in the union
    c = np.array([1, 1, 1, 0, 0, 0], dtype=bool)
    d = np.array([0, 0, 1, 1, 1, 0], dtype=bool)
    assert jaccard(c, d) == 1 / 5
    # both empty: identical circuits
    z = np.zeros(6, dtype=bool)
    assert jaccard(z, z) == 1.0
    assert jaccard(z, a) == 0.0
    # batched over leading axes, with broadcasting
    out = jaccard(np.stack([a, c, z]), np.stack([b, d, z]))
    np.testing.assert_array_equal(out, [0.5, 0.2, 1.0])
    # c vs b: intersection {0, 2}, union {0, 1, 2, 4}
    np.testing.assert_array_equal(jaccard(np.stack([a, c]), b), [0.5, 0.5])


def test_jaccard_rejects_bad_input():
    with pytest.raises(TypeError, match="mask_a must be a boolean array"):
        jaccard([1, 0, 1], [True, False, True])
    with pytest.raises(ValueError, match="same number"):
        jaccard([True, False], [True, False, True])
    with pytest.raises(ValueError, match="mask_a must not be empty"):
        jaccard(np.zeros(0, bool), np.zeros(0, bool))


# ----------------------------------------------------------------------------------------------
# circuit_stability: exact cases


def test_deterministic_discovery_has_stability_one():
    pool = np.arange(40.0).reshape(20, 2)
    disc = Constant([True, False, True, True, False])
    # m = 2 of 10: radius 2 needs a vote bound above 1/2 + 1 - C(8, 2)/C(10, 2) = 0.878 (unanimous: 0.97)
    opts = {"subsample_size": 2, "n_subsamples": 300}
    res = circuit_stability(disc, pool, set_size=10, n_pairs=5, radii=(0, 1, 2), certify_options=opts, rng=0)
    assert isinstance(res, CircuitStability)
    assert res.methods == ("plain", "smoothed", "certified r=0", "certified r=1", "certified r=2")
    np.testing.assert_array_equal(res.jaccard, 1.0)
    np.testing.assert_array_equal(res.mean, 1.0)
    assert all(ci == ConfidenceInterval(1.0, 1.0) for ci in res.intervals)
    # every vote is unanimous, so the certified circuits are the circuit itself (nothing abstained)
    np.testing.assert_array_equal(res.sizes, 3)
    assert res.difference("certified r=1") == (0.0, ConfidenceInterval(0.0, 0.0))


def test_disjoint_sets_give_zero_overlap_of_example_indicators():
    """Sets are disjoint and of size set_size: circuits that list their examples never overlap."""
    n, size = 12, 5
    pool = np.arange(n).reshape(n, 1)
    res = circuit_stability(PresentIds(n, size), pool, set_size=size, n_pairs=20, radii=(), rng=1)
    assert res.methods == ("plain",)
    np.testing.assert_array_equal(res.jaccard, 0.0)
    np.testing.assert_array_equal(res.sizes, size)
    assert res.n_pairs == 20 and res.n_pool == n and res.set_size == size


def test_exact_expected_overlap_on_a_tiny_pool():
    """Pool values [0, 0, 1, 2], sets of 2: enumerate all splits for the exact mean overlap.

    The draw is a uniform random permutation, so each of the 6 ordered splits of the 4 rows into (A, B)
    is equally likely; the overlap of a split depends on where the two 0s go (exact mean 2/9).
    """
    values = np.array([0, 0, 1, 2])
    disc = PresentValues(3)
    exact = []
    import itertools

    for rows_a in itertools.combinations(range(4), 2):
        rows_b = [i for i in range(4) if i not in rows_a]
        exact.append(jaccard(disc(values[list(rows_a)]), disc(values[rows_b])))
    # hand values: A={0,0} vs B={1,2}: 0; A={0,1} vs B={0,2}: 1/3 (and its variants)
    assert sorted(exact) == sorted([0.0, 1 / 3, 1 / 3, 1 / 3, 1 / 3, 0.0])
    assert np.mean(exact) == pytest.approx(2 / 9)
    res = circuit_stability(disc, values.reshape(4, 1), set_size=2, n_pairs=4000, radii=(), rng=3)
    assert set(np.unique(res.jaccard)) <= {0.0, 1 / 3}
    ci = res.confidence_interval()
    assert ci.low <= np.mean(exact) <= ci.high


def test_interval_formulas():
    """Student t, Hoeffding and Bernstein intervals match their closed forms on a known sample."""
    pool = np.arange(10).reshape(10, 1)
    res = circuit_stability(PresentValues(10), pool, set_size=3, n_pairs=6, radii=(), rng=0)
    vals = res.jaccard[0]
    n = vals.size
    half = stats.t.ppf(0.975, n - 1) * vals.std(ddof=1) / math.sqrt(n)
    low, high = res.confidence_interval("plain")
    assert low == pytest.approx(max(0.0, vals.mean() - half), abs=1e-12)
    assert high == pytest.approx(min(1.0, vals.mean() + half), abs=1e-12)
    hoef = circuit_stability(
        PresentValues(10), pool, set_size=3, n_pairs=6, radii=(), rng=0, interval="hoeffding"
    )
    width = math.sqrt(math.log(1 / 0.025) / (2 * n))
    assert hoef.intervals[0].low == pytest.approx(max(0.0, vals.mean() - width), abs=1e-9)
    assert hoef.intervals[0].high == pytest.approx(min(1.0, vals.mean() + width), abs=1e-9)
    bern = circuit_stability(
        PresentValues(10),
        pool,
        set_size=3,
        n_pairs=6,
        radii=(),
        rng=0,
        interval="bernstein",
        confidence_level=0.9,
    )
    assert bern.interval == "bernstein" and bern.confidence_level == 0.9
    assert bern.intervals[0].low <= vals.mean() <= bern.intervals[0].high


def test_score_rule_path_equals_callable_path():
    """A ScoreRule over the pool's score rows gives the same result as the same rule as a callable."""
    rng = np.random.default_rng(0)
    scores = rng.normal(size=(40, 12)) + np.linspace(0.0, 1.5, 12)
    kw = {"set_size": 12, "n_pairs": 6, "radii": (0, 1), "certify_options": CERT, "rng": 7}
    fast = circuit_stability(ScoreRule(scores, top_k=4), **kw)
    slow = circuit_stability(TopKMean(4), scores, **kw)
    assert fast.methods == slow.methods
    np.testing.assert_array_equal(fast.jaccard, slow.jaccard)
    np.testing.assert_array_equal(fast.sizes, slow.sizes)
    # the plain circuits differ between sets (the rule is unstable here), so the test is not vacuous
    assert fast.mean[0] < 1.0


def test_executor_and_torch_inputs_give_the_serial_result():
    torch = pytest.importorskip("torch")
    scores = np.random.default_rng(1).normal(size=(30, 8))
    kw = {"set_size": 10, "n_pairs": 4, "radii": (1,), "certify_options": CERT, "rng": 2}
    serial = circuit_stability(TopKMean(3), scores, **kw)
    with concurrent.futures.ThreadPoolExecutor(2) as ex:
        threaded = circuit_stability(TopKMean(3), scores, executor=ex, **kw)
    np.testing.assert_array_equal(serial.jaccard, threaded.jaccard)
    as_tensor = circuit_stability(TopKMean(3), torch.from_numpy(scores), **kw)
    np.testing.assert_array_equal(serial.jaccard, as_tensor.jaccard)
    as_list = circuit_stability(TopKMean(3), list(scores), **kw)
    np.testing.assert_array_equal(serial.jaccard, as_list.jaccard)


def test_same_seed_same_result_and_summary():
    scores = np.random.default_rng(2).normal(size=(30, 8))
    kw = {"set_size": 10, "n_pairs": 5, "certify_options": CERT}
    a = circuit_stability(ScoreRule(scores, top_k=3), rng=11, **kw)
    b = circuit_stability(ScoreRule(scores, top_k=3), rng=11, **kw)
    np.testing.assert_array_equal(a.jaccard, b.jaccard)
    text = a.summary()
    assert "certified r=1" in text and "mean Jaccard" in text and "pairs both empty" in text
    assert set(a.to_dict()) >= {"jaccard", "sizes", "mean", "intervals"}


# ----------------------------------------------------------------------------------------------
# validity of the intervals (simulation)


def test_interval_coverage_in_simulation():
    """Over many repetitions the intervals cover the true expected overlap (computed exactly)."""
    import itertools

    values = np.array([0, 0, 0, 1, 1, 2, 3, 4])  # pool of 8, sets of 3
    disc = PresentValues(5)
    true = []
    for perm_a in itertools.combinations(range(8), 3):
        rest = [i for i in range(8) if i not in perm_a]
        for perm_b in itertools.combinations(rest, 3):
            true.append(jaccard(disc(values[list(perm_a)]), disc(values[list(perm_b)])))
    mu = float(np.mean(true))
    rng = np.random.default_rng(0)
    hits = {"t": 0, "hoeffding": 0}
    reps = 300
    for _ in range(reps):
        seed = int(rng.integers(2**32))
        for method in hits:
            res = circuit_stability(
                disc, values.reshape(8, 1), set_size=3, n_pairs=30, radii=(), rng=seed, interval=method
            )
            low, high = res.confidence_interval()
            hits[method] += low <= mu <= high
    # Hoeffding is distribution-free: coverage >= 95% (allow 3 standard errors of simulation noise)
    se = math.sqrt(0.95 * 0.05 / reps)
    assert hits["hoeffding"] / reps >= 0.95 - 3 * se
    # the t interval is asymptotic; with 30 pairs it is close to nominal
    assert hits["t"] / reps >= 0.95 - 3 * se - 0.02


# ----------------------------------------------------------------------------------------------
# input validation


def test_rejects_bad_arguments():
    pool = np.zeros((10, 2))
    disc = Constant([True, False])
    with pytest.raises(ValueError, match="need 12 examples but the pool has 10"):
        circuit_stability(disc, pool, set_size=6, n_pairs=3, radii=())
    with pytest.raises(ValueError, match="n_pairs"):
        circuit_stability(disc, pool, set_size=2, n_pairs=1, radii=())
    with pytest.raises(ValueError, match="radii"):
        circuit_stability(disc, pool, set_size=2, n_pairs=3, radii=(-1,))
    with pytest.raises(ValueError, match="repeat"):
        circuit_stability(disc, pool, set_size=2, n_pairs=3, radii=(1, 1))
    with pytest.raises(ValueError, match=r"must not set \['rng'\]"):
        circuit_stability(disc, pool, set_size=2, n_pairs=3, certify_options={"rng": 0, "subsample_size": 1})
    with pytest.raises(ValueError, match="interval"):
        circuit_stability(disc, pool, set_size=2, n_pairs=3, radii=(), interval="bootstrap")
    with pytest.raises(ValueError, match="confidence_level"):
        circuit_stability(disc, pool, set_size=2, n_pairs=3, radii=(), confidence_level=1.5)
    with pytest.raises(ValueError, match="X_pool is required"):
        circuit_stability(disc, set_size=2, n_pairs=3, radii=())
    with pytest.raises(TypeError, match="discover must be a callable"):
        circuit_stability("top-k", pool, set_size=2, n_pairs=3, radii=())
    with pytest.raises(TypeError, match="boolean mask"):
        circuit_stability(lambda X: np.ones(2), pool, set_size=2, n_pairs=3, radii=())
    with pytest.raises(ValueError, match="different lengths"):
        circuit_stability(
            lambda X: np.ones(int(X[0, 0]) + 2, bool),
            np.arange(20.0).reshape(10, 2),
            set_size=2,
            n_pairs=3,
            radii=(),
        )
    with pytest.raises(ValueError, match="scores for 5"):
        circuit_stability(ScoreRule(np.zeros((5, 3)), top_k=1), pool, set_size=2, n_pairs=3)
    res = circuit_stability(disc, pool, set_size=2, n_pairs=3, radii=())
    with pytest.raises(ValueError, match="method"):
        res.confidence_interval("certified r=1")
