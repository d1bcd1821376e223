"""Runs whose boxes stop meaning anything: one warning naming the epoch certification was lost and what drives
the growth, a line in ``summary()``, and an overflow that keeps the finite epochs and names only what the run
has."""

import warnings

import numpy as np
import pytest

from certkit.mibp import (
    MLP,
    BoundsOverflowError,
    Budget,
    FeatureBox,
    LabelFlips,
    TargetBox,
    certified_training,
)
from certkit.mibp.enclosures.interval import interval_margin


def _data(n=60, d=4, classes=3, seed=0):
    gen = np.random.default_rng(seed)
    X = gen.normal(size=(n, d))
    y = np.argmax(X[:, :classes] + 0.3 * gen.normal(size=(n, classes)), axis=1)
    return X, y


def _certifies_a_training_row(res, X, t):
    """Brute force: does the box of epoch t certify any training row's nominal prediction?"""
    pred = res.nominal_path[t].predict(X)
    return bool(np.any(interval_margin(res.lower[t], res.upper[t], X, pred) > 0))


def test_a_run_whose_boxes_stop_certifying_warns_once_with_the_epoch_and_the_drivers():
    X, y = _data()
    kwargs = dict(
        perturbation=LabelFlips(2), loss="cross_entropy", epochs=6, learning_rate=1.5, batch_size=20
    )
    with pytest.warns(UserWarning, match="stopped meaning anything at epoch") as record:
        res = certified_training(MLP.random([4, 8, 3], rng=0), X, y, **kwargs)
    assert len(record) == 1 and record[0].filename == __file__
    lost = res.certification_lost
    assert lost is not None and 1 <= lost <= 6
    # the oracle: every epoch from `lost` on certifies nothing, the one before certifies something
    assert not any(_certifies_a_training_row(res, X, t) for t in range(lost, 7))
    assert lost == 1 or _certifies_a_training_row(res, X, lost - 1)
    message = str(record[0].message)
    assert f"at epoch {lost} of 6" in message
    for part in (
        "learning_rate up to 1.5 over 3 step(s) per epoch",
        "LabelFlips(2) counted per batch",
        "2 of each batch of 20 rows",
        "no per-sample clipping",
        "6 epoch(s)",
    ):
        assert part in message
    assert "epsilon" not in message  # a label-flip run has none
    assert f"Certification lost at epoch {lost}" in res.summary()


def test_a_run_that_certifies_is_silent():
    X, y = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = certified_training(
            MLP.random([4, 8, 3], rng=0),
            X,
            y,
            perturbation=LabelFlips(1),
            loss="cross_entropy",
            epochs=2,
            learning_rate=0.05,
        )
    assert res.certification_lost is None and _certifies_a_training_row(res, X, 2)
    assert "Certification lost" not in res.summary()


def test_a_regression_run_whose_output_bounds_explode_warns():
    X, _ = _data()
    y = X @ np.array([1.0, -2.0, 0.5, 0.0])
    with pytest.warns(UserWarning, match="bound the training outputs more than 1000 times wider") as record:
        res = certified_training(
            MLP.random([4, 16, 1], rng=0),
            X,
            y,
            perturbation=FeatureBox(0.5) & TargetBox(1.0),
            loss="mse",
            epochs=8,
            learning_rate=0.01,
        )
    assert res.certification_lost is not None
    assert "inputs moving by up to 1" in str(record[0].message)


def test_an_overflow_keeps_the_finite_epochs_and_names_only_what_the_run_has():
    X, y = _data()
    with pytest.raises(BoundsOverflowError) as info:
        certified_training(
            MLP.random([4, 16, 3], rng=0),
            X,
            y,
            perturbation=LabelFlips(3),
            loss="cross_entropy",
            epochs=60,
            learning_rate=3.0,
            batch_size=10,
        )
    exc = info.value
    assert isinstance(exc, FloatingPointError) and isinstance(exc, ValueError)
    assert exc.epoch is not None and exc.result.epochs == exc.epoch - 1
    finite = [np.all(np.isfinite(b.to_vector())) for b in (*exc.result.lower, *exc.result.upper)]
    assert all(finite)
    message = str(exc)
    assert (
        f"epoch {exc.epoch} of 60" in message and "finite epoch(s) are in this exception's .result" in message
    )
    assert "epsilon" not in message and "a smaller k" in message and "per-sample clipping" in message
    # a feature budget's overflow names epsilon and no clipping advice (no label moves)
    with pytest.raises(BoundsOverflowError) as info:
        certified_training(
            MLP.random([4, 16, 3], rng=0),
            X,
            y,
            perturbation=Budget(FeatureBox(0.5), 5),
            loss="cross_entropy",
            epochs=60,
            learning_rate=3.0,
            batch_size=10,
        )
    message = str(info.value)
    assert "a smaller epsilon" in message and "clip" not in message
