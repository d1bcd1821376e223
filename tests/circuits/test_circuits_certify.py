"""Tests of certify_circuit / certify_circuit_partition: kernel vs black-box paths, executors, coverage
of the Clopper–Pearson bounds, soundness against exact worst-case edits, and input validation."""

from __future__ import annotations

import itertools
import sys

import numpy as np
import pytest
from scipy import stats

from certkit.circuits import (
    CircuitCertificate,
    ScoreRule,
    certify_circuit,
    certify_circuit_partition,
    example_parts,
    partition_radius,
)


class MeanRule:
    """Black-box twin of ScoreRule: the rule applied to the column means of the subset (picklable)."""

    def __init__(self, top_k=None, threshold=None):
        self.top_k, self.threshold = top_k, threshold

    def __call__(self, X):
        mean = X.mean(axis=0)
        if self.top_k is not None:
            mask = np.zeros(mean.size, dtype=bool)
            mask[np.lexsort((np.arange(mean.size), -mean))[: self.top_k]] = True
            return mask
        return mean >= self.threshold


def integer_scores(n=40, n_comp=12, seed=0):
    # integer-valued scores: every subsample mean is computed exactly by both paths
    rng = np.random.default_rng(seed)
    return rng.integers(0, 6, size=(n, n_comp)).astype(np.float64) + np.arange(n_comp) % 3


SCHEME_KW = [
    {"subsample_size": 10},
    {"subsample_size": 15, "replacement": True},
    {"deletion_prob": 0.7, "n_selection": 0},
    {"deletion_prob": 0.8},  # the paper's procedure: 100 selection runs + estimation runs
]


@pytest.mark.parametrize("kw", SCHEME_KW)
@pytest.mark.parametrize("rule", [{"top_k": 4}, {"threshold": 3.0}])
def test_score_rule_path_equals_black_box_path(kw, rule):
    scores = integer_scores()
    kernel = certify_circuit(ScoreRule(scores, **rule), scores, n_subsamples=300, rng=5, progress=False, **kw)
    black = certify_circuit(MeanRule(**rule), scores, n_subsamples=300, rng=5, progress=False, **kw)
    assert np.array_equal(kernel.counts, black.counts)
    for field in ("included", "excluded", "abstained", "certified_radius", "smoothed", "lower", "upper"):
        assert np.array_equal(getattr(kernel, field), getattr(black, field)), field
    assert 0 < kernel.counts.sum() < 300 * scores.shape[1]


def test_kernel_threads_and_determinism():
    scores = np.random.default_rng(1).random((200, 64))
    rule = ScoreRule(scores, top_k=10)
    one = certify_circuit(rule, subsample_size=50, n_subsamples=2000, rng=3, n_threads=1)
    two = certify_circuit(rule, subsample_size=50, n_subsamples=2000, rng=3, n_threads=2)
    again = certify_circuit(rule, subsample_size=50, n_subsamples=2000, rng=np.random.default_rng(3))
    other = certify_circuit(rule, subsample_size=50, n_subsamples=2000, rng=4)
    assert np.array_equal(one.counts, two.counts) and np.array_equal(one.counts, again.counts)
    assert not np.array_equal(one.counts, other.counts)
    assert one.counts.sum() == 2000 * 10  # top-k includes exactly k per subsample


def test_kernel_matches_numpy_reference_counts():
    """Same subsamples (from subsample_indices) -> same counts as a NumPy evaluation of the rule."""
    from certkit import _core
    from certkit._validation import check_rng, seed_from_rng

    scores = integer_scores(n=30, n_comp=9, seed=2)
    res = certify_circuit(ScoreRule(scores, top_k=3), subsample_size=8, n_subsamples=500, rng=11)
    gen = check_rng(11)
    seed_from_rng(gen)  # the selection seed is drawn first
    idx = _core.subsample.indices(30, 8, 500, seed=seed_from_rng(gen))
    ref = np.zeros(9, dtype=np.int64)
    for row in idx:
        ref += MeanRule(top_k=3)(scores[row])
    assert np.array_equal(res.counts, ref)


def test_executors_process_pool_and_dask_equal_serial(dask_client):
    cloudpickle = pytest.importorskip("cloudpickle")
    scores = integer_scores(n=50, n_comp=10, seed=4)
    kw = {"subsample_size": 12, "n_subsamples": 200, "rng": 9, "progress": False}
    serial = certify_circuit(MeanRule(top_k=3), scores, **kw)
    pool = certify_circuit(MeanRule(top_k=3), scores, executor=2, **kw)
    assert np.array_equal(serial.counts, pool.counts)
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    try:
        dask_res = certify_circuit(MeanRule(top_k=3), scores, executor=dask_client, **kw)
        dask_part = certify_circuit_partition(
            MeanRule(top_k=3), scores, n_parts=7, executor=dask_client, progress=False
        )
    finally:
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    assert np.array_equal(serial.counts, dask_res.counts)
    assert np.array_equal(serial.certified_radius, dask_res.certified_radius)
    serial_part = certify_circuit_partition(MeanRule(top_k=3), scores, n_parts=7, progress=False)
    assert np.array_equal(serial_part.counts, dask_part.counts)


def test_radius_zero_is_majority_vote_and_radii_nested():
    rng = np.random.default_rng(0)
    # components with clearly separated inclusion probabilities
    scores = np.concatenate([rng.normal(3, 1, (100, 5)), rng.normal(0, 1, (100, 15))], axis=1)
    kw = {"subsample_size": 20, "n_subsamples": 3000, "rng": 0}
    res = certify_circuit(ScoreRule(scores, threshold=1.5), radius=0, **kw)
    assert np.array_equal(res.included, res.smoothed)
    assert np.array_equal(res.excluded, ~res.smoothed)
    assert not res.abstained.any()
    assert np.array_equal(res.smoothed, res.vote_fraction > 0.5)
    # nested: certified at r implies certified at every r' < r
    prev_in, prev_out = res.at_radius(0).included, res.at_radius(0).excluded
    for r in range(1, 12):
        at = res.at_radius(r)
        inc, exc, abst = at.included, at.excluded, at.abstained
        assert np.all(inc <= prev_in) and np.all(exc <= prev_out)
        assert np.array_equal(inc | exc | abst, np.ones(20, bool)) and not np.any(inc & exc)
        prev_in, prev_out = inc, exc
    r1 = certify_circuit(ScoreRule(scores, threshold=1.5), radius=2, **kw)
    assert np.array_equal(r1.included, res.at_radius(2).included)
    # in general (noisy votes) radius-0 decisions agree with the majority vote wherever they are made
    noisy = certify_circuit(
        ScoreRule(rng.random((60, 40)), top_k=20), subsample_size=10, n_subsamples=200, radius=0, rng=0
    )
    assert np.all(noisy.included <= noisy.smoothed) and np.all(noisy.excluded <= ~noisy.smoothed)
    assert noisy.abstained.any()


def _exact_threshold_p(kind, n, c, t, m=None, p_del=None):
    """P[#feature examples in the subsample >= t] for c feature examples among n."""
    if kind == "without":
        return stats.hypergeom.sf(t - 1, n, c, m)
    if kind == "with":
        return stats.binom.sf(t - 1, m, c / n)
    return stats.binom.sf(t - 1, c, 1 - p_del)


def _binary_setting(kind, seed):
    rng = np.random.default_rng(seed)
    n, n_comp = 40, 12
    c = rng.integers(5, n - 5, size=n_comp)
    c[:3] = (36, 38, 4)  # a few components with stable decisions
    feats = np.zeros((n, n_comp))
    for j in range(n_comp):
        feats[rng.permutation(n)[: c[j]], j] = 1.0
    if kind == "poisson":
        kw = {"deletion_prob": 0.8, "n_selection": 0}
        t = 3
        thr = None
    else:
        m = 10
        kw = {"subsample_size": m, "replacement": kind == "with"}
        t = 5
        thr = (t - 0.5) / m  # mean >= thr  <=>  count >= t, away from float ties
    # (Poisson subsample means divide by the random size: the tests use a count rule as a black box there)
    return n, c, t, feats, kw, thr


class CountRule:
    def __init__(self, t):
        self.t = t

    def __call__(self, X):
        return X.sum(axis=0) >= self.t


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["without", "with", "poisson", "poisson-selection"])
def test_clopper_pearson_family_wise_coverage_in_simulation(kind):
    selection = kind == "poisson-selection"
    kind = "poisson" if selection else kind
    n, c, t, feats, kw, thr = _binary_setting(kind, 0)
    if selection:
        kw = {"deletion_prob": 0.8}  # default: 100 selection runs, one-sided bound on the agreement
    m = kw.get("subsample_size")
    p_true = np.array([_exact_threshold_p(kind, n, cj, t, m, kw.get("deletion_prob")) for cj in c])
    level, reps = 0.8, 200 if kind == "poisson" else 400
    misses = 0
    for rep in range(reps):
        if kind == "poisson":
            res = certify_circuit(
                CountRule(t), feats, n_subsamples=60, confidence_level=level, rng=rep, progress=False, **kw
            )
        else:
            res = certify_circuit(
                ScoreRule(feats, threshold=thr), n_subsamples=60, confidence_level=level, rng=rep, **kw
            )
        misses += not np.all((res.lower <= p_true) & (p_true <= res.upper))
    # family-wise coverage >= level, up to 3 binomial standard errors
    assert misses / reps <= (1 - level) + 3 * np.sqrt(level * (1 - level) / reps)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["without", "with", "poisson"])
def test_no_certified_decision_is_violated_by_exact_worst_case_edits(kind):
    """For the count rule the worst edits are known (remove/insert feature examples); the exact vote
    probability after every (ins, del, sub) split within the certified radius keeps the decision."""
    checked = 0
    for seed in range(4):
        n, c, t, feats, kw, thr = _binary_setting(kind, seed)
        m, p_del = kw.get("subsample_size"), kw.get("deletion_prob")
        if kind == "poisson":
            res = certify_circuit(CountRule(t), feats, n_subsamples=500, rng=seed, progress=False, **kw)
        else:
            res = certify_circuit(ScoreRule(feats, threshold=thr), n_subsamples=2000, rng=seed, **kw)
        for j in np.flatnonzero(res.certified_radius >= 0):
            inc = res.lower[j] > 0.5
            for ins, dele, sub in itertools.product(range(res.certified_radius[j] + 1), repeat=3):
                if ins + dele + sub > res.certified_radius[j]:
                    continue
                n2 = n - dele + ins
                # inclusion: delete / substitute away feature examples, insert plain ones; exclusion: mirror
                c2 = c[j] - dele - sub if inc else c[j] + ins + sub
                c2 = min(max(c2, 0), n2)
                if kind == "without" and n2 < m:
                    raise AssertionError("certified beyond the smallest dataset that can be subsampled")
                p2 = _exact_threshold_p(kind, n2, c2, t, m, p_del)
                assert (p2 > 0.5) if inc else (p2 < 0.5), (kind, j, ins, dele, sub)
                checked += 1
    assert checked > 50


def test_poisson_empty_subsample_includes_nothing_without_calling_discover():
    def strict(X):
        if len(X) == 0:
            raise AssertionError("discover called on an empty subsample")
        return np.ones(3, dtype=bool)

    X = np.arange(3.0).reshape(3, 1)
    res = certify_circuit(
        strict, X, deletion_prob=0.9, n_subsamples=400, n_selection=0, rng=0, progress=False
    )
    empty_runs = 400 - res.counts[0]
    assert empty_runs > 200  # P(all 3 deleted) = 0.729
    assert np.all(res.counts == res.counts[0])


def test_inputs_of_several_types_and_summary():
    import torch

    X = np.random.default_rng(0).random((30, 4))

    def top2(Xs):
        arr = Xs.numpy() if isinstance(Xs, torch.Tensor) else np.asarray(Xs)
        return MeanRule(top_k=2)(arr)

    a = certify_circuit(top2, X, subsample_size=8, n_subsamples=50, rng=0, progress=False)
    b = certify_circuit(top2, torch.from_numpy(X), subsample_size=8, n_subsamples=50, rng=0, progress=False)
    c = certify_circuit(top2, [row for row in X], subsample_size=8, n_subsamples=50, rng=0, progress=False)
    assert np.array_equal(a.counts, b.counts) and np.array_equal(a.counts, c.counts)
    assert isinstance(a, CircuitCertificate)
    text = a.summary()
    assert "certified included" in text and str(a.included.sum()) in text
    assert set(a.to_dict()) >= {"included", "certified_radius", "vote_fraction"}
    assert np.array_equal(a.circuit, np.flatnonzero(a.included))
    with pytest.raises(AttributeError):
        a.radius = 3  # frozen


# ------------------------------------------------------------------------------------------------
# partition (DPA) variant


def _dpa_decisions(S, discover, n_parts):
    parts = example_parts(np.array(S, dtype=np.float64).reshape(-1, 1), n_parts) if S else np.zeros(0, int)
    votes = np.zeros(3, dtype=np.int64)
    for b in range(n_parts):
        rows = [S[i] for i in range(len(S)) if parts[i] == b]
        if rows:
            votes += discover(np.array(rows, dtype=np.float64).reshape(-1, 1))
    return votes > n_parts - votes


class FeatureCount:
    """D(T)_j = 1[#examples of T with feature j >= 1] on scalar examples 0..9 (features of v mod 5)."""

    FEATURES = np.array([[1, 1, 0], [1, 0, 1], [0, 1, 1], [1, 1, 1], [0, 0, 0]], dtype=bool)

    def __call__(self, X):
        return self.FEATURES[X[:, 0].astype(int) % 5].sum(axis=0) >= 1


def test_partition_brute_force_every_certified_decision_holds():
    pool = tuple(range(10))
    rng = np.random.default_rng(0)
    checked = 0
    decisions = {}  # S' -> its DPA decisions: the edit threat's S' include every other threat's
    for _ in range(10):
        S = tuple(int(v) for v in rng.choice(pool, size=9))
        n_parts = 5
        for threat, ops in (("edit", "ids"), ("insertion", "i"), ("deletion", "d"), ("substitution", "s")):
            res = certify_circuit_partition(
                FeatureCount(),
                np.array(S, float).reshape(-1, 1),
                n_parts=n_parts,
                threat=threat,
                progress=False,
            )
            base = _dpa_decisions(list(S), FeatureCount(), n_parts)
            assert np.array_equal(base, res.smoothed)
            # enumerate S' within distance 2
            frontier, seen = [tuple(sorted(S))], {tuple(sorted(S)): 0}
            for dist in range(1, 3):
                nxt = []
                for cur in frontier:
                    cand = []
                    if "i" in ops:
                        cand += [tuple(sorted((*cur, v))) for v in pool]
                    if "d" in ops:
                        cand += [cur[:i] + cur[i + 1 :] for i in range(len(cur))]
                    if "s" in ops:
                        cand += [
                            tuple(sorted((*cur[:i], v, *cur[i + 1 :]))) for i in range(len(cur)) for v in pool
                        ]
                    for cnd in cand:
                        if cnd not in seen:
                            seen[cnd] = dist
                            nxt.append(cnd)
                frontier = nxt
            for S2, dist in seen.items():
                if S2 not in decisions:
                    decisions[S2] = _dpa_decisions(list(S2), FeatureCount(), n_parts)
                dec = decisions[S2]
                ok = res.certified_radius >= dist
                assert np.array_equal(dec[ok], base[ok]), (S, S2, threat)
                checked += int(ok.sum()) if dist >= 1 else 0
    assert checked > 100


def test_partition_score_rule_equals_black_box_and_radius_formula():
    scores = integer_scores(n=60, n_comp=8, seed=7)
    kern = certify_circuit_partition(ScoreRule(scores, top_k=3), scores, n_parts=11, radius=1)
    black = certify_circuit_partition(MeanRule(top_k=3), scores, n_parts=11, radius=1, progress=False)
    assert np.array_equal(kern.counts, black.counts)
    assert np.array_equal(kern.certified_radius, black.certified_radius)
    inc = kern.counts > 11 - kern.counts
    k_star = np.where(
        inc,
        partition_radius(kern.counts, 11 - kern.counts, 1, 0),
        partition_radius(11 - kern.counts, kern.counts, 0, 1),
    )
    assert np.array_equal(kern.certified_radius, k_star // 2)  # a substitution touches two parts
    ins = certify_circuit_partition(ScoreRule(scores, top_k=3), scores, n_parts=11, threat="insertion")
    assert np.array_equal(ins.certified_radius, k_star)
    assert np.array_equal(kern.lower, kern.vote_fraction) and kern.confidence_level == 1.0
    # explicit parts, and parts from the score rows when X_concept is omitted
    parts = example_parts(scores, 11)
    same = certify_circuit_partition(ScoreRule(scores, top_k=3), n_parts=11, part_of=parts)
    assert np.array_equal(same.counts, kern.counts)
    # the hash depends on the example's content only
    assert np.array_equal(example_parts(scores[::-1], 11), parts[::-1])
    assert np.array_equal(example_parts(["a", "b", "a"], 4)[[0, 2]], example_parts(["a", "a"], 4))


# ------------------------------------------------------------------------------------------------
# bad inputs


def _float_mask(X):
    return np.ones(3)


def test_bad_masks_from_callable():
    X = np.zeros((10, 2))
    with pytest.raises(TypeError, match="dtype float64 for subsample 0; it must return a boolean"):
        certify_circuit(_float_mask, X, subsample_size=3, n_subsamples=5, progress=False)
    with pytest.raises(TypeError, match="dtype int64"):
        certify_circuit(lambda X: np.array([1, 0, 1]), X, subsample_size=3, n_subsamples=5, progress=False)
    with pytest.raises(TypeError, match="it must return a boolean"):
        certify_circuit(lambda X: None, X, subsample_size=3, n_subsamples=5, progress=False)
    with pytest.raises(ValueError, match="must be 1-D"):
        certify_circuit(lambda X: np.ones((2, 2), bool), X, subsample_size=3, n_subsamples=5, progress=False)
    calls = iter(range(100))

    def changing(X):
        return np.ones(3 + (next(calls) == 4), dtype=bool)

    with pytest.raises(ValueError, match="masks of changing length"):
        certify_circuit(changing, X, subsample_size=3, n_subsamples=10, progress=False)
    # changing length across chunks (executor path collects chunk results)
    calls2 = iter(range(1000))

    def changing_late(X):
        return np.ones(3 + (next(calls2) >= 150), dtype=bool)

    with pytest.raises(ValueError, match="masks of changing length"):
        certify_circuit(changing_late, X, subsample_size=3, n_subsamples=300, progress=False)


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"subsample_size": 11}, ValueError, "subsample_size must be <= n = 10"),
        ({}, ValueError, "subsample_size \\(m\\) is required"),
        ({"subsample_size": 0}, ValueError, "subsample_size must be >= 1"),
        ({"subsample_size": 3, "n_subsamples": 0}, ValueError, "n_subsamples must be >= 1"),
        ({"subsample_size": 3, "radius": -1}, ValueError, "radius must be >= 0"),
        ({"subsample_size": 3, "confidence_level": 1.0}, ValueError, "confidence_level must lie strictly"),
        ({"subsample_size": 3, "threat": "swap"}, ValueError, "unknown threat"),
        ({"subsample_size": 3, "scheme": "bootstrap"}, ValueError, "unknown scheme"),
        ({"scheme": "poisson"}, ValueError, "needs deletion_prob"),
        ({"deletion_prob": 0.5, "subsample_size": 3}, ValueError, "takes deletion_prob only"),
        ({"deletion_prob": 1.5}, ValueError, "deletion_prob must lie in"),
        ({"subsample_size": 3, "deletion_prob": 0.5, "scheme": "subsample"}, ValueError, "only used with"),
        ({"subsample_size": 3, "replacement": 1}, TypeError, "replacement must be a bool"),
        ({"subsample_size": 3, "n_selection": -1}, ValueError, "n_selection must be >= 0"),
        ({"subsample_size": 3, "executor": "dask"}, TypeError, "executor must be"),
        ({"subsample_size": 3, "progress": 2}, TypeError, "progress must be"),
    ],
)
def test_certify_circuit_bad_options(kwargs, exc, match):
    X = np.zeros((10, 2))
    with pytest.raises(exc, match=match):
        certify_circuit(MeanRule(top_k=1), X, **{"progress": False, **kwargs})


def test_bad_concept_sets_and_rules():
    with pytest.raises(ValueError, match="X_concept must not be empty"):
        certify_circuit(MeanRule(top_k=1), np.zeros((0, 3)), subsample_size=1)
    with pytest.raises(ValueError, match="X_concept is required"):
        certify_circuit(MeanRule(top_k=1), subsample_size=1)
    with pytest.raises(TypeError, match="discover must be a callable"):
        certify_circuit("top-k", np.zeros((5, 2)), subsample_size=1)
    with pytest.raises(TypeError, match="X_concept must be a sized collection"):
        certify_circuit(MeanRule(top_k=1), 5, subsample_size=1)
    with pytest.raises(ValueError, match="X_concept has 4 examples but the ScoreRule has scores for 5"):
        certify_circuit(ScoreRule(np.zeros((5, 2)), top_k=1), np.zeros((4, 2)), subsample_size=1)
    with pytest.raises(ValueError, match="exactly one of top_k and threshold"):
        ScoreRule(np.zeros((5, 2)))
    with pytest.raises(ValueError, match="exactly one of top_k and threshold"):
        ScoreRule(np.zeros((5, 2)), top_k=1, threshold=0.5)
    with pytest.raises(ValueError, match="top_k must be <= 2"):
        ScoreRule(np.zeros((5, 2)), top_k=3)
    with pytest.raises(ValueError, match="scores must be finite"):
        ScoreRule(np.full((5, 2), np.nan), top_k=1)
    with pytest.raises(ValueError, match="scores must be 2-D"):
        ScoreRule(np.zeros(5), top_k=1)
    with pytest.raises(ValueError, match="scores must not be empty"):
        ScoreRule(np.zeros((0, 2)), top_k=1)
    with pytest.raises(ValueError, match="part_of must lie in"):
        certify_circuit_partition(ScoreRule(np.zeros((5, 2)), top_k=1), n_parts=2, part_of=[0, 1, 2, 0, 0])
    with pytest.raises(ValueError, match="n_parts must be >= 1"):
        certify_circuit_partition(MeanRule(top_k=1), np.zeros((5, 2)), n_parts=0)
    with pytest.raises(ValueError, match="every subsample was empty"):
        certify_circuit(
            MeanRule(top_k=1),
            np.zeros((1, 2)),
            deletion_prob=0.999,
            n_subsamples=3,
            n_selection=0,
            progress=False,
        )
