"""certified_training / certify_predictions with the interval backend, and the shared checks."""

import sys

import numpy as np
import pytest

from certkit.mibp import (
    MLP,
    Budget,
    CertifiedTrainingResult,
    FeatureBox,
    LabelFlips,
    MissingValues,
    OrdinalShift,
    certified_training,
    certify_predictions,
)


def _data(n=12, d=2, rng=0, classes=None):
    gen = np.random.default_rng(rng)
    X = gen.normal(size=(n, d))
    if classes is None:
        y = np.where(X[:, 0] + 0.3 * X[:, 1] > 0, 1, -1)
    else:
        y = gen.integers(0, classes, n)
    return X, y


@pytest.mark.parametrize("backend", ["interval", "gurobi", "scip", "milp", "lp"])
@pytest.mark.parametrize(("sizes", "loss"), [([2, 5, 1], "hinge"), ([2, 4, 3], "hinge"), ([2, 4, 1], "mse")])
def test_eps_zero_is_one_gd_step(sizes, loss, backend):
    X, y = _data(classes=sizes[-1] if sizes[-1] > 1 else None)
    if loss == "mse":
        y = X[:, 0] - 0.5 * X[:, 1]
    model = MLP.random(sizes, rng=3)
    res = certified_training(
        model, X, y, perturbation=FeatureBox(0.0), loss=loss, epochs=2, learning_rate=0.2, backend=backend
    )
    path = model.train(X, y, loss=loss, epochs=2, learning_rate=0.2)
    for t in (1, 2):  # epoch 2 starts from the (padded, ~1e-15 wide) box of epoch 1
        np.testing.assert_allclose(res.lower[t].to_vector(), path[t].to_vector(), atol=1e-8, rtol=0)
        np.testing.assert_allclose(res.upper[t].to_vector(), path[t].to_vector(), atol=1e-8, rtol=0)
        assert res.contains(path[t], t)


@pytest.mark.parametrize(
    ("perturbation", "loss", "classes"),
    [
        (FeatureBox(0.05), "hinge", None),
        (FeatureBox(np.array([0.1, 0.0]), points=[0, 3, 5]), "hinge", None),
        (FeatureBox(0.05), "mse", None),
        (FeatureBox(0.03), "hinge", 3),
        (Budget(FeatureBox(0.3), 2), "hinge", None),
        (OrdinalShift([1], shifts=(-1, 0, 1), points=[0, 1]) & FeatureBox(0.02), "hinge", None),
        (MissingValues(np.eye(12, 2, dtype=bool), lower=-2.0, upper=2.0), "hinge", None),
        # the placeholder values lie outside [5, 6]: non-deviating points keep them
        (Budget(MissingValues(np.eye(12, 2, dtype=bool), lower=5.0, upper=6.0), 20), "hinge", None),
        (FeatureBox(0.02) & LabelFlips(2), "hinge", None),
        (LabelFlips(20), "hinge", None),
    ],
)
def test_interval_sound_monte_carlo(perturbation, loss, classes, assert_sound):
    X, y = _data(classes=classes)
    if loss == "mse":
        y = X[:, 0] - 0.5 * X[:, 1]
    model = MLP.random([2, 6, 3 if classes else 1], rng=1)
    res = certified_training(model, X, y, perturbation=perturbation, loss=loss, epochs=4, learning_rate=0.1)
    assert res.epochs == 4 and len(res.bounds) == 5
    assert assert_sound(res, X, y, perturbation, rng=0) == 80
    assert np.all(np.diff(res.widths()) >= 0)


def test_budget_tighter_than_unbudgeted():
    X, y = _data()
    model = MLP.random([2, 6, 1], rng=1)
    full = certified_training(model, X, y, loss="hinge", perturbation=FeatureBox(0.1), epochs=3)
    some = certified_training(model, X, y, loss="hinge", perturbation=Budget(FeatureBox(0.1), 2), epochs=3)
    none = certified_training(model, X, y, loss="hinge", perturbation=Budget(FeatureBox(0.1), 0), epochs=3)
    assert np.all(some.widths() <= full.widths()) and some.widths()[-1] < full.widths()[-1]
    # k = 0: nobody deviates, so only the nominal trajectory (up to rounding) remains
    assert none.widths()[-1] < 1e-10


def test_interval_monotone_in_epsilon():
    X, y = _data()
    model = MLP.random([2, 6, 1], rng=4)
    prev = None
    for eps in (0.0, 1e-3, 1e-2, 5e-2):
        res = certified_training(model, X, y, loss="hinge", perturbation=FeatureBox(eps), epochs=4)
        if prev is not None:
            for t in range(5):
                assert np.all(res.lower[t].to_vector() <= prev.lower[t].to_vector())
                assert np.all(res.upper[t].to_vector() >= prev.upper[t].to_vector())
        prev = res


def _box_samples(res, rng, count):
    lo, hi = res.lower[-1].to_vector(), res.upper[-1].to_vector()
    gen = np.random.default_rng(rng)
    out = [lo + gen.random(lo.size) * (hi - lo) for _ in range(count)]
    out += [np.where(gen.random(lo.size) < 0.5, lo, hi) for _ in range(count)]
    return [MLP.from_vector(v, res.lower[-1].sizes) for v in out]


@pytest.mark.parametrize("classes", [None, 3])
def test_certify_predictions_sound(classes):
    X, y = _data(n=20, classes=classes)
    model = MLP.random([2, 6, classes or 1], rng=0)
    res = certified_training(
        model, X, y, loss="hinge", perturbation=FeatureBox(0.02), epochs=3, learning_rate=0.2
    )
    X_test, y_test = _data(n=200, rng=9, classes=classes)
    cert = certify_predictions(res, X_test)
    assert 0 < cert.certified.sum() < 200
    np.testing.assert_array_equal(cert.prediction, res.nominal.predict(X_test))
    for m in _box_samples(res, 1, 100):
        pred = m.predict(X_test)
        assert np.all(pred[cert.certified] == cert.prediction[cert.certified])
    acc = cert.certified_accuracy(y_test)
    assert acc == np.mean(cert.certified & (cert.prediction == y_test))
    assert "certified" in cert.summary()


def test_certify_point_box_certifies_nonzero_margins():
    X, y = _data()
    model = MLP.random([2, 4, 1], rng=0)
    res = certified_training(model, X, y, loss="hinge", perturbation=FeatureBox(0.0), epochs=1)
    X_test, _ = _data(n=50, rng=3)
    cert = certify_predictions(res, X_test)
    assert cert.certified.all()  # the box is (numerically) a point and no output is exactly 0
    f = res.nominal.forward(X_test)[:, 0]
    np.testing.assert_allclose(cert.margin_lower, np.abs(f), atol=1e-10)


def test_result_object():
    X, y = _data()
    res = certified_training(
        MLP.random([2, 4, 1], rng=0), X, y, loss="hinge", perturbation=FeatureBox(0.01), epochs=2
    )
    assert isinstance(res, CertifiedTrainingResult)
    text = res.summary()
    assert "interval" in text and "max width" in text and len(text.splitlines()) == 7
    assert "contains(model) does not prove that a model\ncame from this run" in text
    d = res.to_dict()
    assert d["backend"] == "interval" and len(d["lower"]) == 3
    assert res.epoch_seconds.shape == (2,)
    with pytest.raises(AttributeError):
        res.backend = "scip"


def test_bad_arguments(monkeypatch):
    X, y = _data()
    model = MLP.random([2, 4, 1], rng=0)
    box = FeatureBox(0.01)
    with pytest.raises(ValueError, match="unknown backend"):
        certified_training(model, X, y, loss="hinge", perturbation=box, backend="cplex")
    with pytest.raises(ValueError, match="unknown formulation"):
        certified_training(model, X, y, loss="hinge", perturbation=box, backend="scip", formulation="split")
    with pytest.raises(ValueError, match="features but the model expects"):
        certified_training(model, X[:, :1], y, loss="hinge", perturbation=box)
    with pytest.raises(ValueError, match="finite"):
        certified_training(model, np.where(X > 1, np.nan, X), y, loss="hinge", perturbation=box)
    with pytest.raises(ValueError, match="-1 or \\+1"):
        certified_training(model, X, (y + 1) // 2, loss="hinge", perturbation=box)
    with pytest.raises(ValueError, match="inconsistent"):
        certified_training(model, X, y[:-1], loss="hinge", perturbation=box)
    with pytest.raises(TypeError, match="Perturbation"):
        certified_training(model, X, y, loss="hinge", perturbation=0.01)
    with pytest.raises(ValueError, match="LabelFlips needs a classification loss"):
        certified_training(model, X, X[:, 0], perturbation=LabelFlips(1), loss="mse")
    with pytest.raises(TypeError, match="MLP"):
        certified_training("net", X, y, loss="hinge", perturbation=box)
    # issue 36: no default loss (a cross-entropy model was certified as a hinge run)
    with pytest.raises(TypeError, match="missing 1 required keyword-only argument: 'loss'"):
        certified_training(model, X, y, perturbation=box)
    with pytest.raises(ValueError, match="epochs must be >= 1"):
        certified_training(model, X, y, loss="hinge", perturbation=box, epochs=0)
    with pytest.raises(ValueError, match="time_limit"):
        certified_training(model, X, y, loss="hinge", perturbation=box, backend="scip", time_limit=-1.0)
    with pytest.raises(ValueError, match="solver= applies"):
        certified_training(model, X, y, loss="hinge", perturbation=box, backend="scip", solver="HIGHS")
    with pytest.raises(ValueError, match="not installed"):
        certified_training(model, X, y, loss="hinge", perturbation=box, backend="milp", solver="NOPE")
    monkeypatch.setitem(sys.modules, "pyscipopt", None)
    with pytest.raises(ImportError, match=r"certkit\[scip\]"):
        certified_training(model, X, y, loss="hinge", perturbation=box, backend="scip")
    res = certified_training(model, X, y, loss="hinge", perturbation=box)
    with pytest.raises(ValueError, match="must have shape"):
        certify_predictions(res, np.zeros((3, 5)))
    with pytest.raises(TypeError, match="CertifiedTrainingResult"):
        certify_predictions((model, model), X)
    with pytest.raises(ValueError, match="labels"):
        certify_predictions(res, X).certified_accuracy(y[:3])


def test_overflowing_bounds_raise_clear_error():
    X, y = _data()
    model = MLP.random([2, 8, 1], rng=0)
    with pytest.raises(FloatingPointError, match="overflowed"):
        certified_training(
            model, X, y, loss="hinge", perturbation=FeatureBox(1.0), epochs=400, learning_rate=5.0
        )
