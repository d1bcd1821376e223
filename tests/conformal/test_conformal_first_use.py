"""Issue 23: RCP1 sets made uninformative by a sigma that does not suit the feature scale warn; the command
line validates its options before any work; evaluation summaries have no NaN columns; swapped metric
arguments are named."""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import pytest
from _conformal_models import LINEAR_MODEL

from certkit.conformal import RCP1Classifier, SplitConformalClassifier, _cli, coverage, evaluate_sets


def _data(n=400, seed=0):
    return LINEAR_MODEL.sample(n, np.random.default_rng(seed))


W = np.random.default_rng(1).normal(size=(4, 10))


def softmax_model(X):
    """Ten classes, logits 3 X W: informative at the features' unit scale, one-hot noise under sigma = 50."""
    z = 3.0 * X @ W
    z -= z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def _ten_class(n=400, seed=7):
    X = np.random.default_rng(seed).normal(size=(n, 4))
    return X, softmax_model(X).argmax(axis=1)


def test_rcp1_warns_when_sigma_drowns_the_features():
    X, y = _ten_class()
    with pytest.warns(UserWarning, match=r"RCP1Classifier: .*hold 10\.0 of 10 labels.*sigma=50 exceeds the "
                                         r"standard deviation of 4 of 4 features \(smallest: feature "):
        clf = RCP1Classifier(softmax_model, sigma=50.0, radius=0.1, rng=0).calibrate(X, y)
    assert clf.threshold_ == 0.0 and clf.predict_set(X).all()  # the trivial sets the warning is about


def test_rcp1_suited_sigma_does_not_warn():
    X, y = _ten_class()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        clf = RCP1Classifier(softmax_model, sigma=0.25, radius=0.1, rng=0).calibrate(X, y)
    assert clf.predict_set(X).sum(axis=1).mean() < 5


def test_set_evaluation_summary_has_no_nan_columns():
    X, y = _data()
    clf = SplitConformalClassifier(LINEAR_MODEL, rng=0).calibrate(X, y)
    text = evaluate_sets(clf, X, y).summary()
    assert "nan" not in text and "attacked" not in text
    attacked = evaluate_sets(clf, X, y, X_attacked=X + 0.01).summary()
    assert "coverage (attacked)" in attacked and "nan" not in attacked


def test_coverage_with_swapped_arguments_says_so():
    sets = np.ones((5, 3), dtype=bool)
    y = np.arange(5) % 3
    assert coverage(sets, y) == 1.0
    with pytest.raises(ValueError, match=r"arguments look swapped; the order is coverage\(sets, y\)"):
        coverage(y, sets)


@pytest.mark.parametrize(
    ("argv", "flag"),
    [(("--confidence-level", "1.5"), "confidence_level"), (("--sigma", "0"), "sigma"),
     (("--radius", "-1"), "radius"), (("--n-samples", "0"), "n_samples"),
     (("--attack-steps", "-1"), "attack_steps")],
)
def test_cli_options_are_validated_before_any_work(monkeypatch, argv, flag):
    def no_work(*args, **kwargs):
        raise AssertionError("the data and the model were loaded before the options were checked")

    monkeypatch.setattr("certkit.datasets.load_digits", no_work)
    monkeypatch.setattr("certkit._labelled_file.read_labelled", no_work)
    monkeypatch.setattr(_cli, "_centroid_model", no_work)
    parser = argparse.ArgumentParser()
    _cli.add_arguments(parser)
    start = time.perf_counter()
    with pytest.raises(ValueError, match=rf"^{flag}"):
        _cli.run(parser.parse_args(list(argv)))
    with pytest.raises(ValueError, match=rf"^{flag}"):  # a user's file is not read either
        _cli.run(parser.parse_args([*argv, "--data", "data.csv"]))
    assert time.perf_counter() - start < 1.0
