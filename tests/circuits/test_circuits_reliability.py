"""Huge sizes refused up front, DataFrame concept sets, empty parts not materialised (issue 14 items 4, 9)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from certkit.circuits import ScoreRule, certified_radius, certify_circuit, certify_circuit_partition


def _discover(X_subset):
    return np.asarray(X_subset).mean(axis=0) > 0


def _data():
    return np.random.default_rng(0).normal(size=(60, 5))


def test_insertion_radius_with_huge_table_refused():
    """deletion_prob = 1 - 1e-9 built a 5.2 GiB table for 24 s; hopeless sizes are refused at once."""
    with pytest.raises(ValueError, match=r"deletion_prob=0\.999999999999 is too large: .* TiB"):
        certified_radius(0.99, 1.0, 1000, deletion_prob=1 - 1e-12, threat="insertion")
    with pytest.raises(ValueError, match=r"n=10000000000000 is too large: the deletion radius table"):
        certified_radius(0.99, 1.0, 10**13, 10, threat="edit")
    assert int(certified_radius(0.99, 1.0, 1000, deletion_prob=0.9, threat="insertion")) == 6


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
