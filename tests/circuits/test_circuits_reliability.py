"""Huge sizes refused up front, DataFrame concept sets, empty parts not materialised (issue 14 items 4, 9)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from certkit import _core
from certkit.circuits import (
    ScoreRule,
    certified_radius,
    certify_circuit,
    certify_circuit_partition,
    edit_bounds,
)


def _discover(X_subset):
    return np.asarray(X_subset).mean(axis=0) > 0


def _data():
    return np.random.default_rng(0).normal(size=(60, 5))


def test_insertion_radius_with_deletion_prob_near_one_needs_no_table():
    """deletion_prob = 1 - 1e-9 built a 5.2 GiB table for 24 s; Poisson radii are now read off the linear
    table r log(deletion_prob) in closed form, at any deletion_prob and n.  Oracle: the certificate
    condition mu p^r > 1/2 (padded) holds at the returned r and fails at r + 1."""
    p = 1 - 1e-12
    r = int(certified_radius(0.99, 1.0, 1000, deletion_prob=p, threat="insertion"))
    log_thr = math.log(0.5 / 0.99 * (1 + 1e-10))
    assert r * math.log(p) > log_thr >= (r + 1) * math.log(p)
    assert r == pytest.approx(math.log(0.99 / 0.5) / 1e-12, rel=1e-3)  # about 6.8e11 insertions
    # deletions with an exact vote: every example may go (capped at n), even for a huge n
    assert int(certified_radius(1.0, 1.0, 10**15, deletion_prob=0.5, threat="deletion")) == 10**15
    with pytest.raises(ValueError, match=r"n=10000000000000000000 is too large: Poisson-deletion radii"):
        certified_radius(1.0, 1.0, 10**19, deletion_prob=0.5, threat="deletion")
    with pytest.raises(ValueError, match=r"n=10000000000000 is too large: the deletion radius table"):
        certified_radius(0.99, 1.0, 10**13, 10, threat="edit")
    assert int(certified_radius(0.99, 1.0, 1000, deletion_prob=0.9, threat="insertion")) == 6


@pytest.mark.parametrize("threat", ["edit", "insertion", "deletion"])
def test_poisson_radius_equals_the_explicit_table(threat):
    """The closed form counts exactly the entries of the explicit table r log p above the threshold."""
    rng = np.random.default_rng(5)
    for p, n in [(0.5, 1), (0.9, 40), (0.97, 1000), (0.999, 3000), (float(rng.uniform(0.6, 0.99)), 200)]:
        lower = np.concatenate([[0.0, 0.5, 0.75, 1.0, 1 - 1e-15], rng.uniform(size=200)])
        upper = np.minimum(1.0, lower + np.concatenate([np.zeros(5), rng.uniform(0, 0.2, size=200)]))
        length = n + 1 if threat != "insertion" else math.ceil(math.log(0.5) / math.log(p)) + 2
        table = np.arange(length, dtype=np.float64) * math.log(p)

        def radius(mu, table=table):
            if threat == "edit":
                thr = 1.5 - mu
            elif threat == "deletion":
                thr = 2.0 * (1.0 - mu)
            else:
                thr = 0.5 / mu if mu > 0 else math.inf
            thr *= 1 + 1e-10
            log_thr = -math.inf if thr <= 0 else math.log(thr)
            return int(np.sum(table > log_thr)) - 1

        expect = [max(radius(lo), radius(1 - hi)) for lo, hi in zip(lower, upper)]
        got = certified_radius(lower, upper, n, deletion_prob=p, threat=threat)
        np.testing.assert_array_equal(got, expect)


def test_edit_bounds_with_huge_edits_use_the_short_product():
    """n_insert = 10**12 allocated a 10**12-term product; the m-term form gives the same P[T in C].
    Oracle: exact binomial ratios with integers."""
    lower, upper = np.array([0.2, 0.97]), np.array([0.3, 0.99])
    n, m = 100, 10
    for ins, sub in [(0, 3), (5, 2), (500, 1), (10**12, 0), (10**12, 4)]:
        n_c, n_new = n - sub, n + ins
        ps = math.comb(n_c, m) / math.comb(n, m)
        pt = math.exp(math.log(math.comb(n_c, m)) - math.log(math.comb(n_new, m)))
        exact_low = pt * np.maximum(0.0, 1 - (1 - lower) / ps)
        exact_high = pt * np.minimum(1.0, upper / ps) + 1 - pt
        low, high = edit_bounds(lower, upper, n, m, n_insert=ins, n_substitute=sub)
        assert np.all(low <= exact_low + 1e-15) and np.all(high >= exact_high - 1e-15)
        np.testing.assert_allclose(low, exact_low, atol=1e-12)
        np.testing.assert_allclose(high, exact_high, atol=1e-12)


def test_absurd_number_of_subsamples_refused_by_the_vote_kernel():
    """n_subsamples = 10**12 kept the vote kernel busy for days (its memory stays small)."""
    X = _data()
    with pytest.raises(ValueError, match=r"n_subsamples=1000000000000 is too large: .* score additions"):
        _core.votes.subsample(X, m=5, n_subsamples=10**12, top_k=1, seed=0)
    with pytest.raises(ValueError, match=r"n_subsamples=1000000000000 is too large: .* score additions"):
        certify_circuit(ScoreRule(X, top_k=1), subsample_size=5, n_subsamples=10**12, rng=0)


def test_partition_with_many_empty_parts_runs_only_the_used_ones():
    """n_parts=10**8 took 74 s and 7.3 GB; empty parts include nothing and are no longer built."""
    X = _data()
    cert = certify_circuit_partition(_discover, X, n_parts=10**8)
    assert cert.n_runs == 10**8 and cert.counts.max() <= 60  # at most one vote per non-empty part
    rule = ScoreRule(X, top_k=2)
    cert_rule = certify_circuit_partition(rule, n_parts=10**8)
    assert cert_rule.counts.sum() <= 2 * 60
    # same counts as running every part explicitly, on a size where that is cheap
    small = certify_circuit_partition(_discover, X, n_parts=7)
    part_of = np.arange(60) % 7
    explicit = sum(_discover(X[part_of == b]).astype(int) for b in range(7))
    np.testing.assert_array_equal(
        certify_circuit_partition(_discover, X, n_parts=7, part_of=part_of).counts, explicit
    )
    assert small.n_runs == 7


def test_huge_subsample_size_refused_before_allocating():
    X = _data()
    with pytest.raises(ValueError, match=r"is too large: .* GiB"):
        certify_circuit(ScoreRule(X, top_k=1), subsample_size=10**9, replacement=True, n_subsamples=50, rng=0)
    with pytest.raises(ValueError, match=r"is too large: .* GiB"):
        certify_circuit(_discover, X, subsample_size=10**9, replacement=True, n_subsamples=50, rng=0)


def test_dataframe_concept_set_uses_positions():
    """A DataFrame with a non-default index failed with KeyError '[29, 49, ...] not in index'."""
    X = _data()
    df = pd.DataFrame(X, index=np.arange(60) * 7 + 3)
    from_df = certify_circuit(_discover, df, subsample_size=10, n_subsamples=50, rng=0)
    from_array = certify_circuit(_discover, X, subsample_size=10, n_subsamples=50, rng=0)
    np.testing.assert_array_equal(from_df.counts, from_array.counts)


def test_partition_radius_checks_indices_and_shapes():
    """Item 7: idx_a=-1 was accepted; item 10: mismatched shapes gave numpy's broadcast message."""
    from certkit.circuits import partition_radius

    with pytest.raises(ValueError, match="idx_a and idx_b are class indices and must be >= 0"):
        partition_radius(30, 20, -1, 0)
    with pytest.raises(ValueError, match=r"votes_a has shape \(3,\), votes_b has shape \(2,\)"):
        partition_radius([3, 4, 5], [1, 2], 1, 0)
    assert int(partition_radius(30, 20, 1, 0)) == 4


def test_score_rule_rows_must_be_valid_indices():
    """Item 6: rows=[-1] silently used the last row."""
    rule = ScoreRule(_data(), top_k=2)
    with pytest.raises(ValueError, match=r"rows must be example indices in \[0, 59\]"):
        rule.discover(rows=[-1])
    with pytest.raises(ValueError, match="rows must be example indices"):
        rule.discover(rows=[60])
    np.testing.assert_array_equal(rule.discover(rows=[59]), rule.select(rule.scores[59]))


@pytest.mark.parametrize(
    ("X_concept", "error", "match"),
    [
        (np.zeros((0, 5)), ValueError, "X_concept must not be empty"),
        ([], ValueError, "X_concept must not be empty"),
        ({0: [1.0], 1: [2.0]}, TypeError, "X_concept must be an array, tensor or sequence of examples"),
        (np.where(np.eye(4, 5) > 0, np.nan, 0.0), ValueError, r"X_concept must be finite"),
        ("abcdef", TypeError, "X_concept must be an array, tensor or sequence of examples, got a str"),
        (b"abcdef", TypeError, "X_concept must be an array, tensor or sequence of examples, got a bytes"),
    ],
)
def test_bad_concept_sets_rejected(X_concept, error, match):
    """Item 7: empty input, NaN rows and dicts reached example_parts and the user's callable."""
    from certkit.circuits import example_parts

    with pytest.raises(error, match=match):
        example_parts(X_concept, 3)
    with pytest.raises(error, match=match):
        certify_circuit(_discover, X_concept, subsample_size=1, n_subsamples=5, rng=0)


def test_circuit_accuracy_labels_the_model_cannot_output():
    """Item 5: y = [7] * 20 for a 3-class model returned accuracy 0.0."""
    torch = pytest.importorskip("torch")
    from certkit.circuits import circuit_accuracy

    torch.manual_seed(0)
    model = torch.nn.Sequential()
    model.add_module("hidden", torch.nn.Linear(5, 4))
    model.add_module("act", torch.nn.ReLU())
    model.add_module("head", torch.nn.Linear(4, 3))
    X = _data()[:20]
    match = r"y must hold class labels in \[0, 2\] \(the model has 3 outputs\), got 7"
    with pytest.raises(ValueError, match=match):
        circuit_accuracy(model, "act", np.ones(4, bool), X, [7] * 20)
    with pytest.raises(ValueError, match="y must hold class labels >= 0"):
        circuit_accuracy(model, "act", np.ones(4, bool), X, [-1] * 20)
    assert 0 <= circuit_accuracy(model, "act", np.ones(4, bool), X, [1] * 20) <= 1


def test_fuzzed_sizes_and_missing_options_name_their_argument():
    """Found by the kernel fuzz: n_parts beyond int64 overflowed, selection runs too large for the kernels
    were reported as n_subsamples, and a missing deletion_prob asked only for subsample_size."""
    X = _data()
    with pytest.raises(ValueError, match=r"n_parts must be <= 9223372036854775807"):
        certify_circuit_partition(_discover, X, n_parts=2**63)
    from certkit.circuits import example_parts

    with pytest.raises(ValueError, match=r"n_parts must be <= 9223372036854775807"):
        example_parts(X, 10**30)
    with pytest.raises(ValueError, match=r"n_selection=1000000000000 selection runs: .* too large"):
        certify_circuit(_discover, X, deletion_prob=0.5, n_subsamples=20, n_selection=10**12, rng=0)
    with pytest.raises(ValueError, match=r"n_selection=1000000000000 selection runs: .* score additions"):
        certify_circuit(ScoreRule(X, top_k=1), deletion_prob=0.5, n_subsamples=20, n_selection=10**12, rng=0)
    with pytest.raises(ValueError, match=r"subsample_size \(m\) is required .*\(or give deletion_prob"):
        certify_circuit(_discover, X, n_subsamples=20, rng=0)
