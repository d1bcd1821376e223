"""Compiled kernels of certkit._core against pure NumPy references (bit for bit).

The references below re-implement the counter-based generator of csrc/rng.hpp
and every kernel from its documented definition, in plain NumPy, so that an
exact equality test pins down both the random draws and the arithmetic.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from certkit import _core

# ----------------------------------------------------------------------------
# NumPy reference of the generator (csrc/rng.hpp)
# ----------------------------------------------------------------------------

GAMMA = 0x9E3779B97F4A7C15
RETRY_SHIFT = 40
U64 = np.uint64


def _u64(x) -> np.ndarray:
    """Python ints / arrays -> uint64 array, reducing Python ints modulo 2**64."""
    if isinstance(x, np.ndarray):
        return x.astype(U64)
    if isinstance(x, np.generic):
        x = int(x)
    return np.asarray(np.array(x, dtype=object) % 2**64, dtype=U64)


def mix64(z: np.ndarray) -> np.ndarray:
    z = _u64(z)
    with np.errstate(over="ignore"):
        z = (z ^ (z >> U64(30))) * U64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> U64(27))) * U64(0x94D049BB133111EB)
        return z ^ (z >> U64(31))


def stream_key(seed: int, stream) -> np.ndarray:
    with np.errstate(over="ignore"):
        return mix64(_u64(seed) + mix64(_u64(stream) + U64(GAMMA)))


def draw64(key, counter) -> np.ndarray:
    with np.errstate(over="ignore"):
        return mix64(_u64(key) + (_u64(counter) + U64(1)) * U64(GAMMA))


def uniform01(key, counter) -> np.ndarray:
    return (draw64(key, counter) >> U64(11)).astype(np.float64) * 2.0**-53


def mul128(a, b) -> tuple[np.ndarray, np.ndarray]:
    """Full 128-bit product of uint64 arrays as (high, low) 64-bit halves, by 32-bit limbs."""
    mask = U64(0xFFFFFFFF)
    a0, a1, b0, b1 = a & mask, a >> U64(32), b & mask, b >> U64(32)
    with np.errstate(over="ignore"):
        p00, p01, p10, p11 = a0 * b0, a0 * b1, a1 * b0, a1 * b1  # each < 2**64
        middle = (p00 >> U64(32)) + (p01 & mask) + (p10 & mask)  # < 3 * 2**32
        low = (middle << U64(32)) | (p00 & mask)
        high = p11 + (p01 >> U64(32)) + (p10 >> U64(32)) + (middle >> U64(32))
    return high, low


def bounded(key, counter, upper) -> np.ndarray:
    """Unbiased integers in [0, upper) by Lemire's method, elementwise.

    A draw r maps to the high half of r * upper; it is rejected (and replaced by the draw at counter
    + attempt << 40) when the low half is below 2**64 mod upper.
    """
    key, counter, upper = np.broadcast_arrays(_u64(key), _u64(counter), _u64(upper))
    threshold = np.array([2**64 % int(u) for u in upper.ravel()], dtype=U64).reshape(upper.shape)
    out = np.zeros(upper.shape, dtype=U64)
    pending = np.ones(upper.shape, dtype=bool)
    attempt = 0
    while pending.any():
        with np.errstate(over="ignore"):
            high, low = mul128(draw64(key, counter + U64(attempt << RETRY_SHIFT)), upper)
        accept = pending & (low >= threshold)
        out[accept] = high[accept]
        pending &= ~accept
        attempt += 1
    return out


# ----------------------------------------------------------------------------
# NumPy references of the kernels
# ----------------------------------------------------------------------------


def keys_for(seed: int, n_subsamples: int) -> np.ndarray:
    return stream_key(seed, np.arange(n_subsamples, dtype=U64))


def ref_subsample_indices(n, m, n_subsamples, replace, seed) -> np.ndarray:
    keys = keys_for(seed, n_subsamples)
    if replace:
        counters = np.arange(m, dtype=U64)
        return bounded(keys[:, None], counters[None, :], n).astype(np.int64)
    perm = np.tile(np.arange(n, dtype=np.int64), (n_subsamples, 1))
    rows = np.arange(n_subsamples)
    for i in range(m):  # partial Fisher-Yates, all subsamples at once
        j = i + bounded(keys, i, n - i).astype(np.int64)
        perm[rows, i], perm[rows, j] = perm[rows, j], perm[rows, i].copy()
    return perm[:, :m].copy()


def ref_deletion_masks(n, deletion_prob, n_subsamples, seed) -> np.ndarray:
    keys = keys_for(seed, n_subsamples)
    return uniform01(keys[:, None], np.arange(n, dtype=U64)[None, :]) < 1.0 - deletion_prob


def ref_select(mean: np.ndarray, top_k: int | None, threshold: float | None) -> np.ndarray:
    """Rule on the rows of `mean` (B, N): rank by (mean desc, index asc), or mean >= threshold."""
    if top_k is None:
        return mean >= threshold
    n_comp = mean.shape[1]
    idx = np.arange(n_comp)
    above = (mean[:, None, :] > mean[:, :, None]).sum(axis=2)
    tied_before = ((mean[:, None, :] == mean[:, :, None]) & (idx[None, :] < idx[:, None])[None]).sum(axis=2)
    return above + tied_before < top_k


def ref_subsample_means(scores, scheme, m, deletion_prob, n_subsamples, seed):
    """Means (B, N) summed from 0.0 row by row in subsample order, and the subsample sizes (B,)."""
    n, n_comp = scores.shape
    acc = np.zeros((n_subsamples, n_comp))
    if scheme == "poisson":
        masks = ref_deletion_masks(n, deletion_prob, n_subsamples, seed)
        for i in range(n):  # kept rows in increasing index
            acc[masks[:, i]] += scores[i]
        sizes = masks.sum(axis=1)
    else:
        idx = ref_subsample_indices(n, m, n_subsamples, scheme == "with_replacement", seed)
        for i in range(m):
            acc += scores[idx[:, i]]
        sizes = np.full(n_subsamples, m)
    with np.errstate(invalid="ignore", divide="ignore"):
        return acc / sizes[:, None], sizes


def ref_subsample_votes(
    scores,
    *,
    scheme="without_replacement",
    m=None,
    deletion_prob=None,
    n_subsamples,
    top_k=None,
    threshold=None,
    seed,
):
    mean, sizes = ref_subsample_means(scores, scheme, m, deletion_prob, n_subsamples, seed)
    selected = ref_select(mean, top_k, threshold) & (sizes > 0)[:, None]
    return selected.sum(axis=0).astype(np.int64)


def ref_partition_votes(scores, n_parts, part_of, *, top_k=None, threshold=None):
    acc = np.zeros((n_parts, scores.shape[1]))
    for i in range(scores.shape[0]):
        acc[part_of[i]] += scores[i]
    sizes = np.bincount(part_of, minlength=n_parts)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = acc / sizes[:, None]
    return ref_select(np.where(sizes[:, None] > 0, mean, 0.0), top_k, threshold) & (sizes > 0)[:, None]


def tied_scores(rng, n, n_comp):
    """Small-integer scores: many exact ties among component means."""
    return rng.integers(0, 3, size=(n, n_comp)).astype(np.float64)


# ----------------------------------------------------------------------------
# generator
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2**63 - 1, 123456789])
@pytest.mark.parametrize("stream", [0, 7, 2**64 - 1])
def test_random_uint64_matches_reference(seed, stream):
    counters = np.array([0, 1, 2, 1000, 2**40, 2**64 - 1], dtype=U64)
    expected = draw64(stream_key(seed, stream), counters)
    np.testing.assert_array_equal(_core.rng.random_uint64(seed, stream, counters), expected)


def test_reference_mix64_known_values():
    # SplitMix64's finaliser: mix64(GAMMA) is the first SplitMix64 output for state 0.
    assert int(mix64(GAMMA)) == 0xE220A8397B1DCDAF
    assert int(mix64(0)) == 0


def test_mul128_reference_matches_python_integers():
    rng = np.random.default_rng(4)
    edges = np.array([0, 1, 2**32 - 1, 2**32, 2**64 - 1], dtype=U64)
    a = np.concatenate([rng.integers(0, 2**64, size=200, dtype=U64), edges, edges[::-1]])
    b = np.concatenate([rng.integers(0, 2**64, size=200, dtype=U64), edges, edges])
    high, low = mul128(a, b)
    for x, y, hi, lo in zip(a.tolist(), b.tolist(), high.tolist(), low.tolist()):
        assert (hi << 64) | lo == x * y


def test_bounded_rejection_rule_is_reproduced():
    # n = 2**62 + 1 rejects about a quarter of the draws (threshold = 2**64 mod n = 2**62 - 3, compared
    # with the low half of draw * n), so the retries at counter i + (attempt << 40) are exercised.
    n = 2**62 + 1
    got = _core.subsample.indices(n, 64, 8, replacement=True, seed=5)
    np.testing.assert_array_equal(got, ref_subsample_indices(n, 64, 8, True, 5))
    keys = keys_for(5, 8)
    raw = draw64(keys[:, None], np.arange(64, dtype=U64)[None, :])
    _, low = mul128(raw, U64(n))
    rejected = low < U64(2**64 % n)
    assert 0.1 < rejected.mean() < 0.4
    assert np.all((got >= 0) & (got < n))
    # the accepted first draws give the high half of draw * n
    high, _ = mul128(raw, U64(n))
    np.testing.assert_array_equal(got[~rejected], high[~rejected].astype(np.int64))


# ----------------------------------------------------------------------------
# exact agreement with the references
# ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "m", "n_subsamples", "replace", "seed"),
    [
        (1, 1, 3, False, 0),
        (1, 4, 3, True, 0),
        (10, 10, 5, False, 1),
        (10, 3, 40, False, 2),
        (10, 25, 7, True, 3),
        (1000, 100, 20, False, 2**62),
        (1000, 100, 20, True, 11),
        (7, 1, 50, False, 9),
    ],
)
def test_subsample_indices_match_reference(n, m, n_subsamples, replace, seed):
    got = _core.subsample.indices(n, m, n_subsamples, replacement=replace, seed=seed)
    assert got.dtype == np.int64 and got.shape == (n_subsamples, m)
    np.testing.assert_array_equal(got, ref_subsample_indices(n, m, n_subsamples, replace, seed))


@pytest.mark.parametrize(
    ("n", "deletion_prob", "n_subsamples", "seed"),
    [(1, 0.5, 10, 0), (50, 1.0, 4, 1), (50, 0.0, 4, 1), (50, 0.7, 30, 2), (333, 0.1, 5, 2**63 - 1)],
)
def test_deletion_masks_match_reference(n, deletion_prob, n_subsamples, seed):
    got = _core.subsample.deletion_masks(n, n_subsamples, deletion_prob=deletion_prob, seed=seed)
    assert got.dtype == np.bool_ and got.shape == (n_subsamples, n)
    np.testing.assert_array_equal(got, ref_deletion_masks(n, deletion_prob, n_subsamples, seed))


VOTE_CASES = [
    # (n, N, scheme, m, deletion_prob, B, top_k, threshold, tied)
    (20, 9, "without_replacement", 5, None, 60, 3, None, False),
    (20, 9, "without_replacement", 5, None, 60, 3, None, True),
    (20, 9, "without_replacement", 20, None, 10, 4, None, True),
    (20, 9, "without_replacement", 7, None, 60, None, 1.0, True),
    (20, 9, "without_replacement", 6, None, 60, None, 0.1, False),
    (15, 6, "with_replacement", 9, None, 50, 2, None, True),
    (15, 6, "with_replacement", 40, None, 50, None, 1.0, True),
    (15, 6, "with_replacement", 3, None, 50, 6, None, False),
    (12, 8, "poisson", None, 0.8, 80, 3, None, True),  # some subsamples are empty
    (12, 8, "poisson", None, 0.4, 80, None, 1.0, True),
    (12, 8, "poisson", None, 1.0, 5, 2, None, False),  # every subsample empty
    (12, 8, "poisson", None, 0.0, 5, 1, None, True),
    (40, 33, "without_replacement", 13, None, 30, 1, None, False),  # N not a multiple of anything
    (3, 1, "without_replacement", 2, None, 10, 1, None, False),
]


@pytest.mark.parametrize(
    ("n", "n_comp", "scheme", "m", "deletion_prob", "n_sub", "top_k", "threshold", "tied"), VOTE_CASES
)
def test_subsample_votes_match_reference(n, n_comp, scheme, m, deletion_prob, n_sub, top_k, threshold, tied):
    rng = np.random.default_rng(n * 100 + n_comp)
    scores = tied_scores(rng, n, n_comp) if tied else rng.normal(size=(n, n_comp))
    kwargs = dict(
        scheme=scheme, m=m, deletion_prob=deletion_prob, n_subsamples=n_sub, top_k=top_k, threshold=threshold
    )
    for seed in (0, 17):
        expected = ref_subsample_votes(scores, seed=seed, **kwargs)
        for n_threads in (1, 2, 3):
            got = _core.votes.subsample(scores, seed=seed, n_threads=n_threads, **kwargs)
            assert got.dtype == np.int64 and got.shape == (n_comp,)
            np.testing.assert_array_equal(got, expected)


def test_votes_use_the_same_subsamples_as_indices_and_masks():
    rng = np.random.default_rng(3)
    scores = rng.normal(size=(30, 5))
    idx = _core.subsample.indices(30, 30, 4, seed=8)  # every subsample is the full set (shuffled)
    assert all(sorted(row) == list(range(30)) for row in idx)
    # top-1 of the full-set mean: each subsample selects the same component, so counts are (0, .., B, .., 0)
    got = _core.votes.subsample(scores, m=30, n_subsamples=4, top_k=1, seed=8)
    assert got.sum() == 4 and got.max() == 4
    # a single-row subsample selects the argmax of that row
    idx = _core.subsample.indices(30, 1, 50, replacement=False, seed=8)[:, 0]
    expected = np.bincount(np.argmax(scores[idx], axis=1), minlength=5)
    np.testing.assert_array_equal(
        _core.votes.subsample(scores, m=1, n_subsamples=50, top_k=1, seed=8), expected
    )
    masks = _core.subsample.deletion_masks(30, 40, deletion_prob=0.5, seed=8)
    means = np.array([scores[mk].mean(axis=0) if mk.any() else np.full(5, -np.inf) for mk in masks])
    expected = ((means >= 0.0) & masks.any(axis=1)[:, None]).sum(axis=0)
    got = _core.votes.subsample(
        scores, scheme="poisson", deletion_prob=0.5, n_subsamples=40, threshold=0.0, seed=8
    )
    np.testing.assert_array_equal(got, expected)


def test_larger_case_matches_reference_and_any_thread_count():
    rng = np.random.default_rng(0)
    scores = rng.normal(size=(300, 130))
    kwargs = dict(m=37, n_subsamples=101, top_k=17, seed=42)
    expected = ref_subsample_votes(scores, scheme="without_replacement", **kwargs)
    for n_threads in (1, 2, 3, 0, 200):  # 0: all hardware threads; more threads than subsamples
        np.testing.assert_array_equal(_core.votes.subsample(scores, n_threads=n_threads, **kwargs), expected)


@pytest.mark.parametrize(("n", "deletion_prob", "n_sub"), [(2000, 0.1, 100), (70_000, 0.01, 3)])
def test_large_poisson_subsamples_match_reference(n, deletion_prob, n_sub):
    # The kernel closes a chunk of subsamples once it holds 2**16 rows: ~1,800-row subsamples give
    # chunks of 37 (not 64), and ~69,000-row subsamples give chunks of one.
    rng = np.random.default_rng(n)
    scores = rng.normal(size=(n, 40))
    kwargs = dict(scheme="poisson", deletion_prob=deletion_prob, n_subsamples=n_sub, top_k=5, seed=3)
    expected = ref_subsample_votes(scores, **kwargs)
    for n_threads in (1, 2):
        np.testing.assert_array_equal(_core.votes.subsample(scores, n_threads=n_threads, **kwargs), expected)


@pytest.mark.parametrize("m", [1, 4, 60])
@pytest.mark.parametrize("kind", ["normal", "cauchy", "tied", "shifting"])
def test_top_k_with_many_components_matches_reference(m, kind):
    # k well below N: the kernel selects among candidates above a pivot carried over from earlier
    # subsamples; heavy tails, ties and a few dominant rows make that pivot fail often (fallback path).
    rng = np.random.default_rng(11)
    n, n_comp = 60, 200
    if kind == "normal":
        scores = rng.normal(size=(n, n_comp))
    elif kind == "cauchy":
        scores = rng.standard_cauchy(size=(n, n_comp))
    elif kind == "tied":
        scores = tied_scores(rng, n, n_comp)
    else:
        scores = rng.normal(size=(n, n_comp)) + 100.0 * (rng.random((n, 1)) < 0.1) * rng.normal(size=(n, 1))
    for top_k in (1, 7, 40):
        kwargs = dict(scheme="without_replacement", m=m, n_subsamples=150, top_k=top_k, seed=m)
        expected = ref_subsample_votes(scores, **kwargs)
        for n_threads in (1, 2):
            np.testing.assert_array_equal(
                _core.votes.subsample(scores, n_threads=n_threads, **kwargs), expected
            )


def test_ties_break_towards_lower_index():
    scores = np.ones((5, 6))
    got = _core.votes.subsample(scores, m=3, n_subsamples=11, top_k=2, seed=0)
    np.testing.assert_array_equal(got, [11, 11, 0, 0, 0, 0])
    # a near-tie must not be broken by index: the strictly larger mean wins
    scores[:, 5] += 1e-12
    got = _core.votes.subsample(scores, m=3, n_subsamples=11, top_k=2, seed=0)
    np.testing.assert_array_equal(got, [11, 0, 0, 0, 0, 11])


def test_threshold_is_inclusive():
    scores = np.array([[1.0, 2.0, 0.5], [1.0, 0.0, 0.5]])
    got = _core.votes.subsample(scores, m=2, n_subsamples=3, threshold=1.0, seed=1)
    np.testing.assert_array_equal(got, [3, 3, 0])


@pytest.mark.parametrize(("top_k", "threshold"), [(2, None), (None, 0.5), (None, 1.0), (5, None)])
def test_partition_votes_match_reference(top_k, threshold):
    rng = np.random.default_rng(5)
    for scores in (rng.normal(size=(40, 5)), tied_scores(rng, 40, 5)):
        part_of = rng.integers(0, 9, size=40)
        part_of[part_of == 4] = 5  # part 4 is empty
        got = _core.votes.partition(scores, 9, part_of, top_k=top_k, threshold=threshold)
        assert got.dtype == np.bool_ and got.shape == (9, 5)
        np.testing.assert_array_equal(
            got, ref_partition_votes(scores, 9, part_of, top_k=top_k, threshold=threshold)
        )
        assert not got[4].any()


def test_partition_votes_many_components_and_parts():
    rng = np.random.default_rng(8)
    scores = np.concatenate([rng.standard_cauchy(size=(150, 120)), tied_scores(rng, 150, 120)])
    part_of = rng.integers(0, 60, size=300)
    for top_k in (1, 6, 30, 119):
        np.testing.assert_array_equal(
            _core.votes.partition(scores, 60, part_of, top_k=top_k),
            ref_partition_votes(scores, 60, part_of, top_k=top_k),
        )


def test_partition_votes_by_hand():
    scores = np.array([[1.0, 0.0, 3.0], [3.0, 4.0, 3.0], [0.0, 5.0, 1.0]])
    part_of = np.array([0, 0, 2], dtype=np.int32)  # means: part 0 (2, 2, 3), part 1 empty, part 2 (0, 5, 1)
    np.testing.assert_array_equal(
        _core.votes.partition(scores, 3, part_of, top_k=2),
        [[True, False, True], [False, False, False], [False, True, True]],
    )
    np.testing.assert_array_equal(
        _core.votes.partition(scores, 3, part_of, threshold=2.0),
        [[True, True, True], [False, False, False], [False, True, False]],
    )


# ----------------------------------------------------------------------------
# properties
# ----------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 60),
    data=st.data(),
    n_sub=st.integers(1, 20),
    replace=st.booleans(),
    seed=st.integers(0, 2**63 - 1),
)
def test_rows_are_valid_index_sets(n, data, n_sub, replace, seed):
    m = data.draw(st.integers(1, 80 if replace else n))
    idx = _core.subsample.indices(n, m, n_sub, replacement=replace, seed=seed)
    assert idx.shape == (n_sub, m)
    assert np.all((idx >= 0) & (idx < n))
    if not replace:
        assert all(len(set(row.tolist())) == m for row in idx)
    again = _core.subsample.indices(n, m, n_sub, replacement=replace, seed=seed)
    np.testing.assert_array_equal(idx[-1:], again[-1:])


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 25),
    n_comp=st.integers(1, 12),
    data=st.data(),
    n_sub=st.integers(1, 30),
    scheme=st.sampled_from(["without_replacement", "with_replacement", "poisson"]),
    seed=st.integers(0, 2**63 - 1),
    tied=st.booleans(),
)
def test_vote_counts_properties(n, n_comp, data, n_sub, scheme, seed, tied):
    rng = np.random.default_rng(seed % 1000)
    scores = tied_scores(rng, n, n_comp) if tied else rng.normal(size=(n, n_comp))
    k = data.draw(st.integers(1, n_comp))
    if scheme == "poisson":
        deletion_prob = data.draw(st.floats(0.0, 1.0))
        kwargs = dict(scheme=scheme, deletion_prob=deletion_prob, n_subsamples=n_sub, seed=seed)
        masks = _core.subsample.deletion_masks(n, n_sub, deletion_prob=deletion_prob, seed=seed)
        n_nonempty = int(masks.any(axis=1).sum())
    else:
        m = data.draw(st.integers(1, n if scheme == "without_replacement" else 40))
        kwargs = dict(scheme=scheme, m=m, n_subsamples=n_sub, seed=seed)
        n_nonempty = n_sub
    counts = _core.votes.subsample(scores, top_k=k, **kwargs)
    assert np.all((counts >= 0) & (counts <= n_sub))
    assert counts.sum() == n_nonempty * k
    np.testing.assert_array_equal(counts, ref_subsample_votes(scores, top_k=k, **kwargs))
    np.testing.assert_array_equal(counts, _core.votes.subsample(scores, top_k=k, n_threads=2, **kwargs))
    tau = float(np.median(scores))
    counts = _core.votes.subsample(scores, threshold=tau, **kwargs)
    assert np.all((counts >= 0) & (counts <= n_nonempty))
    # lowering the threshold can only add components
    assert np.all(_core.votes.subsample(scores, threshold=tau - 0.5, **kwargs) >= counts)


# ----------------------------------------------------------------------------
# statistical sanity (fixed seeds; 5 standard deviations per index)
# ----------------------------------------------------------------------------


def _within_binomial(counts, trials, p, z=5.0):
    sd = np.sqrt(trials * p * (1 - p))
    return np.abs(counts - trials * p) <= z * sd


def test_inclusion_frequencies_without_replacement():
    n, m, n_sub = 50, 10, 20000
    idx = _core.subsample.indices(n, m, n_sub, replacement=False, seed=2024)
    incl = np.zeros((n_sub, n), dtype=bool)
    incl[np.arange(n_sub)[:, None], idx] = True
    assert np.all(_within_binomial(incl.sum(axis=0), n_sub, m / n))
    # every position is uniform too, and pairs are included with probability m(m-1)/(n(n-1))
    for col in (0, m - 1):
        assert np.all(_within_binomial(np.bincount(idx[:, col], minlength=n), n_sub, 1 / n))
    pair = incl[:, 0] & incl[:, 1]
    assert _within_binomial(pair.sum(), n_sub, m * (m - 1) / (n * (n - 1)))


def test_inclusion_frequencies_with_replacement_and_poisson():
    n, m, n_sub = 40, 15, 20000
    idx = _core.subsample.indices(n, m, n_sub, replacement=True, seed=77)
    assert np.all(_within_binomial(np.bincount(idx.ravel(), minlength=n), n_sub * m, 1 / n))
    masks = _core.subsample.deletion_masks(n, n_sub, deletion_prob=0.7, seed=77)
    assert np.all(_within_binomial(masks.sum(axis=0), n_sub, 0.3))
    huge = _core.subsample.indices(2**62 + 1, 20000, 1, replacement=True, seed=3).ravel() / float(2**62 + 1)
    assert abs(huge.mean() - 0.5) <= 5 * np.sqrt(1 / 12 / huge.size)


def test_vote_frequencies_match_exact_probability():
    # one component with score 1 on c of the n rows, threshold "at least t of the m rows":
    # the vote probability is hypergeometric, P(X >= t) with X ~ Hyp(n, c, m).
    from scipy.stats import hypergeom

    n, c, m, t, n_sub = 30, 12, 8, 4, 20000
    scores = np.zeros((n, 1))
    scores[:c] = 1.0
    counts = _core.votes.subsample(scores, m=m, n_subsamples=n_sub, threshold=t / m, seed=5)
    p = hypergeom(n, c, m).sf(t - 1)
    assert _within_binomial(counts[0], n_sub, p)


# ----------------------------------------------------------------------------
# errors
# ----------------------------------------------------------------------------

SCORES = np.zeros((10, 4))


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ((5, 6, 3, False, 0), "m .* must be <= n"),
        ((0, 1, 3, True, 0), "n .* must be >= 1"),
        ((5, 0, 3, True, 0), "m .* must be >= 1"),
        ((5, 2, 0, True, 0), "n_subsamples must be >= 1"),
        ((5, 2, 3, True, -1), "seed must be >= 0"),
    ],
)
def test_subsample_indices_errors(args, match):
    n, m, n_subsamples, replacement, seed = args
    with pytest.raises(ValueError, match=match):
        _core.subsample.indices(n, m, n_subsamples, replacement=replacement, seed=seed)


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ((0, 0.5, 3, 0), "n .* must be >= 1"),
        ((5, -0.1, 3, 0), "deletion_prob"),
        ((5, 1.5, 3, 0), "deletion_prob"),
        ((5, np.nan, 3, 0), "deletion_prob"),
        ((5, 0.5, 0, 0), "n_subsamples"),
        ((5, 0.5, 3, -2), "seed"),
    ],
)
def test_deletion_masks_errors(args, match):
    n, deletion_prob, n_subsamples, seed = args
    with pytest.raises(ValueError, match=match):
        _core.subsample.deletion_masks(n, n_subsamples, deletion_prob=deletion_prob, seed=seed)


@pytest.mark.parametrize(
    ("scores", "kwargs", "match"),
    [
        (SCORES, dict(m=3, n_subsamples=5, seed=0), "exactly one of top_k and threshold .*neither"),
        (SCORES, dict(m=3, n_subsamples=5, seed=0, top_k=1, threshold=0.0), "exactly one .*both"),
        (SCORES, dict(m=3, n_subsamples=5, seed=0, top_k=0), "top_k must be in"),
        (SCORES, dict(m=3, n_subsamples=5, seed=0, top_k=5), "top_k must be in"),
        (SCORES, dict(m=11, n_subsamples=5, seed=0, top_k=1), "must be <= n"),
        (SCORES, dict(m=0, n_subsamples=5, seed=0, top_k=1), "m .* must be >= 1"),
        (SCORES, dict(m=3, n_subsamples=0, seed=0, top_k=1), "n_subsamples"),
        (SCORES, dict(m=3, n_subsamples=5, seed=-1, top_k=1), "seed must be >= 0"),
        (SCORES, dict(m=3, n_subsamples=5, seed=0, top_k=1, n_threads=-1), "n_threads"),
        (SCORES, dict(m=3, n_subsamples=5, seed=0, top_k=1, scheme="bootstrap"), "scheme must be one of"),
        (SCORES, dict(m=3, n_subsamples=5, seed=0, top_k=1, deletion_prob=0.5), "deletion_prob is only used"),
        (SCORES, dict(n_subsamples=5, seed=0, top_k=1), "m \\(subsample size\\) is required"),
        (SCORES, dict(m=3, n_subsamples=5, seed=0, threshold=np.nan), "threshold must be finite"),
        (SCORES, dict(m=3, n_subsamples=5, seed=0, threshold=np.inf), "threshold must be finite"),
        (SCORES, dict(scheme="poisson", n_subsamples=5, seed=0, top_k=1), "deletion_prob is required"),
        (
            SCORES,
            dict(scheme="poisson", deletion_prob=1.2, n_subsamples=5, seed=0, top_k=1),
            "deletion_prob must be",
        ),
        (
            SCORES,
            dict(scheme="poisson", deletion_prob=0.5, m=3, n_subsamples=5, seed=0, top_k=1),
            "m is not used",
        ),
        (np.zeros(10), dict(m=3, n_subsamples=5, seed=0, top_k=1), "2-D"),
        (np.zeros((2, 3, 4)), dict(m=1, n_subsamples=5, seed=0, top_k=1), "2-D"),
        (np.zeros((0, 4)), dict(m=1, n_subsamples=5, seed=0, top_k=1), "non-empty"),
        (np.zeros((4, 0)), dict(m=1, n_subsamples=5, seed=0, threshold=0.0), "non-empty"),
        (np.full((3, 2), np.nan), dict(m=1, n_subsamples=5, seed=0, top_k=1), "finite"),
        (np.array([[0.0, np.inf]]), dict(m=1, n_subsamples=5, seed=0, top_k=1), "finite"),
    ],
)
def test_subsample_votes_errors(scores, kwargs, match):
    with pytest.raises(ValueError, match=match):
        _core.votes.subsample(scores, **kwargs)


@pytest.mark.parametrize(
    ("scores", "n_parts", "part_of", "kwargs", "match"),
    [
        (SCORES, 3, np.zeros(10, dtype=np.int64), {}, "exactly one"),
        (SCORES, 3, np.zeros(10, dtype=np.int64), dict(top_k=2, threshold=0.0), "exactly one"),
        (SCORES, 3, np.zeros(10, dtype=np.int64), dict(top_k=7), "top_k must be in"),
        (SCORES, 0, np.zeros(10, dtype=np.int64), dict(top_k=1), "n_parts must be >= 1"),
        (SCORES, 3, np.zeros(9, dtype=np.int64), dict(top_k=1), "part_of must be a 1-D array"),
        (SCORES, 3, np.zeros((10, 1), dtype=np.int64), dict(top_k=1), "part_of must be a 1-D array"),
        (SCORES, 3, np.full(10, 3), dict(top_k=1), r"part labels in \[0, n_parts\)"),
        (SCORES, 3, np.full(10, -1), dict(top_k=1), "part labels"),
        (np.full((10, 4), np.nan), 3, np.zeros(10, dtype=np.int64), dict(top_k=1), "finite"),
    ],
)
def test_partition_votes_errors(scores, n_parts, part_of, kwargs, match):
    with pytest.raises(ValueError, match=match):
        _core.votes.partition(scores, n_parts, part_of, **kwargs)


def test_type_errors():
    with pytest.raises(TypeError):  # float part labels are not silently truncated
        _core.votes.partition(SCORES, 3, np.zeros(10), top_k=1)
    with pytest.raises(TypeError):  # options are keyword-only
        _core.votes.subsample(SCORES, "without_replacement", 3)
    with pytest.raises(TypeError):
        _core.votes.subsample(SCORES, m=3, top_k=1)  # n_subsamples and seed are required
    with pytest.raises(ValueError, match=r"seed must be <= 9223372036854775807, got 9223372036854775808"):
        _core.subsample.indices(5, 2, 3, seed=2**63)  # seeds are 63-bit


def test_accepts_non_contiguous_and_other_dtypes():
    rng = np.random.default_rng(1)
    scores = rng.normal(size=(12, 10))
    expected = _core.votes.subsample(scores[:, ::2].copy(), m=4, n_subsamples=20, top_k=2, seed=3)
    np.testing.assert_array_equal(
        _core.votes.subsample(scores[:, ::2], m=4, n_subsamples=20, top_k=2, seed=3), expected
    )
    ints = rng.integers(0, 5, size=(12, 3))
    np.testing.assert_array_equal(
        _core.votes.subsample(ints, m=4, n_subsamples=20, top_k=2, seed=3),
        _core.votes.subsample(ints.astype(np.float64), m=4, n_subsamples=20, top_k=2, seed=3),
    )


# ------------------------------------------------------------- issue 14: arguments checked at the binding
def test_absurd_n_threads_rejected_and_threads_capped():
    """Item 2: n_threads=3000 on a (4, 100000) matrix reached 20 GB; now capped at the hardware threads."""
    scores = np.ones((4, 100000))
    with pytest.raises(ValueError, match=r"n_threads must be <= 1024, got 3000"):
        _core.votes.subsample(scores, m=2, n_subsamples=3000, top_k=1, seed=1, n_threads=3000)
    with pytest.raises(ValueError, match=r"n_threads must be <= 1024, got 9223372036854775808"):
        _core.votes.subsample(SCORES, m=2, n_subsamples=5, top_k=1, seed=1, n_threads=2**63)
    # 1024 requested threads run on the hardware threads: same counts, no per-thread buffers for 1024
    small = np.random.default_rng(0).normal(size=(6, 2000))
    ref = _core.votes.subsample(small, m=3, n_subsamples=200, top_k=5, seed=4, n_threads=1)
    np.testing.assert_array_equal(
        _core.votes.subsample(small, m=3, n_subsamples=200, top_k=5, seed=4, n_threads=1024), ref
    )


@pytest.mark.parametrize(
    ("scores", "match"),
    [
        (np.ones((4, 3)).astype(str), "scores must be an array of real numbers .* got dtype <U32"),
        (np.ones((4, 3)).astype(complex), "got dtype complex128"),
        (np.ones((4, 3), dtype=bool), "got dtype bool"),
        (np.ones((4, 3)).astype(object), "got dtype object"),
        ([["1", "2"], ["3", "4"]], "got dtype <U1"),
    ],
)
def test_scores_dtype_not_coerced(scores, match):
    """Item 8: strings were parsed, complex lost its imaginary part, bool and object were converted."""
    with pytest.raises(TypeError, match=match):
        _core.votes.subsample(scores, m=1, n_subsamples=3, top_k=1, seed=0)
    with pytest.raises(TypeError, match=match):
        _core.votes.partition(scores, 2, np.zeros(len(scores), dtype=np.int64), top_k=1)


def test_partition_part_of_must_be_integers():
    with pytest.raises(TypeError, match=r"part_of must be an array of integers .* got dtype bool"):
        _core.votes.partition(SCORES, 2, np.zeros(10, dtype=bool), top_k=1)
    with pytest.raises(ValueError, match=r"n_parts=1000000000000 is too large: .* GiB"):
        _core.votes.partition(SCORES, 10**12, np.zeros(10, dtype=np.int64), top_k=1)


@pytest.mark.parametrize(
    ("counters", "error", "match"),
    [
        ([-1], ValueError, r"counters must be >= 0, got -1 at index 0"),
        ([1.5], TypeError, "counters must be an array of integers .* float64"),
        ([np.nan], TypeError, "counters must be an array of integers"),
        (["1"], TypeError, "counters must be an array of integers .* <U1"),
        ([True], TypeError, "counters must be an array of integers .* bool"),
        ([[1]], ValueError, "counters must be a 1-D array, got a 2-D array"),
    ],
)
def test_random_uint64_counters_checked(counters, error, match):
    with pytest.raises(error, match=match):
        _core.rng.random_uint64(1, 2, counters)


def test_random_uint64_accepts_the_full_uint64_range():
    top = np.array([2**64 - 1], dtype=np.uint64)
    assert _core.rng.random_uint64(2**64 - 1, 0, top).dtype == np.uint64
    with pytest.raises(ValueError, match=r"seed must be an integer in \[0, 2\*\*64 - 1\]"):
        _core.rng.random_uint64(2**64, 0, [0])
    with pytest.raises(TypeError, match="stream must be an integer, got float"):
        _core.rng.random_uint64(1, 1.5, [0])


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (dict(replacement=1), TypeError, "replacement must be True or False, got 1"),
        (dict(replacement=None), TypeError, "replacement must be True or False, got None"),
        (dict(replacement=0.0), TypeError, "replacement must be True or False, got 0.0"),
        (dict(seed=1.5), TypeError, "seed must be an integer, got float"),
        (dict(seed=2**63), ValueError, "seed must be <= 9223372036854775807"),
        (dict(seed=-1), ValueError, "seed must be >= 0, got -1"),
    ],
)
def test_subsample_indices_arguments(kwargs, error, match):
    """Items 8 and 10: replace=1 | None | 0.0 and m=True were accepted; seed=2**63 / 1.5 were unclear."""
    with pytest.raises(error, match=match):
        _core.subsample.indices(10, 3, 2, **{"seed": 0, **kwargs})
    with pytest.raises(TypeError, match="m \\(subsample size\\) must be an integer, got bool"):
        _core.subsample.indices(10, True, 2, seed=0)


def test_huge_sizes_refused_before_allocating():
    """Item 4 at the kernel level: sizes whose buffers cannot fit are refused with the estimate."""
    with pytest.raises(ValueError, match=r"n_subsamples \* m = 1000000 \* 1000000000 is too large: .* GiB"):
        _core.subsample.indices(10, 10**9, 10**6, replacement=True, seed=0)
    with pytest.raises(ValueError, match=r"n_subsamples \* n = .* is too large"):
        _core.subsample.deletion_masks(10**7, 10**7, deletion_prob=0.5, seed=0)
    with pytest.raises(ValueError, match=r"m=100000000000 is too large: the subsample vote kernel"):
        _core.votes.subsample(SCORES, scheme="with_replacement", m=10**11, n_subsamples=3, top_k=1, seed=0)
