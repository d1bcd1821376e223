"""Tests for certkit.datasets: shapes, dtypes, determinism, embedded-file integrity and input validation."""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
from importlib import resources

import numpy as np
import pytest
from scipy.sparse.csgraph import connected_components

from certkit import datasets
from certkit.datasets import Dataset, GraphDataset, SplitDataset, TreatmentDataset

DATA = resources.files("certkit.datasets") / "data"


# ----------------------------------------------------------------------------- two moons


def test_two_moons_shapes_dtypes_labels():
    ds = datasets.load_two_moons(n_train=31, n_test=17, noise=0.2, rng=3)
    assert isinstance(ds, SplitDataset)
    assert ds.X_train.shape == (31, 2) and ds.X_test.shape == (17, 2)
    assert ds.X_train.dtype == np.float64 and ds.X_test.dtype == np.float64
    assert ds.y_train.dtype == np.int64 and ds.y_test.dtype == np.int64
    assert np.all(np.isfinite(ds.X_train)) and np.all(np.isfinite(ds.X_test))
    # make_moons puts n // 2 points on the first moon and the rest on the second
    assert np.bincount(ds.y_train).tolist() == [15, 16]
    assert np.bincount(ds.y_test).tolist() == [8, 9]
    assert ds.feature_names == ("x1", "x2") and ds.target_names == ("outer", "inner")
    np.testing.assert_array_equal(ds.y_train_signed, np.where(ds.y_train == 1, 1.0, -1.0))
    np.testing.assert_array_equal(ds.y_test_signed, np.where(ds.y_test == 1, 1.0, -1.0))
    assert ds.y_train_signed.dtype == np.float64


def test_two_moons_noise_free_points_lie_on_the_two_half_circles():
    ds = datasets.load_two_moons(n_train=40, n_test=10, noise=0.0, rng=0)
    for X, y in ((ds.X_train, ds.y_train), (ds.X_test, ds.y_test)):
        outer, inner = X[y == 0], X[y == 1]
        # class 0: unit upper half circle around (0, 0); class 1: unit lower half circle around (1, 0.5)
        np.testing.assert_allclose(np.hypot(outer[:, 0], outer[:, 1]), 1.0, atol=1e-12)
        assert np.all(outer[:, 1] >= -1e-12)
        np.testing.assert_allclose(np.hypot(inner[:, 0] - 1.0, inner[:, 1] - 0.5), 1.0, atol=1e-12)
        assert np.all(inner[:, 1] <= 0.5 + 1e-12)


def test_two_moons_deterministic_given_rng():
    a = datasets.load_two_moons(rng=7)
    b = datasets.load_two_moons(rng=7)
    c = datasets.load_two_moons(rng=np.random.default_rng(7))
    for name in ("X_train", "y_train", "X_test", "y_test"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
        np.testing.assert_array_equal(getattr(a, name), getattr(c, name))
    # rng=None (the default) draws fresh OS entropy: two calls differ
    assert datasets.load_two_moons().X_train.tolist() != datasets.load_two_moons().X_train.tolist()


def test_two_moons_different_rng_gives_different_data():
    a = datasets.load_two_moons(rng=1)
    b = datasets.load_two_moons(rng=2)
    assert not np.array_equal(a.X_train, b.X_train)
    assert not np.array_equal(a.X_test, b.X_test)
    # a shared Generator advances, so two consecutive calls differ
    gen = np.random.default_rng(5)
    first, second = datasets.load_two_moons(rng=gen), datasets.load_two_moons(rng=gen)
    assert not np.array_equal(first.X_train, second.X_train)
    # training and test samples are drawn independently
    same_size = datasets.load_two_moons(n_train=50, n_test=50, rng=4)
    assert not np.array_equal(same_size.X_train, same_size.X_test)


def test_two_moons_noise_scales_the_spread():
    clean = datasets.load_two_moons(n_train=400, noise=0.0, rng=0)
    noisy = datasets.load_two_moons(n_train=400, noise=0.3, rng=0)
    r_clean = np.hypot(*clean.X_train[clean.y_train == 0].T)
    r_noisy = np.hypot(*noisy.X_train[noisy.y_train == 0].T)
    assert np.std(r_clean) < 1e-12 < np.std(r_noisy)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"n_train": 0}, ValueError, "n_train"),
        ({"n_train": 1}, ValueError, "n_train"),
        ({"n_test": -3}, ValueError, "n_test"),
        ({"n_train": 10.0}, TypeError, "n_train"),
        ({"n_test": True}, TypeError, "n_test"),
        ({"noise": -0.1}, ValueError, "noise"),
        ({"noise": float("nan")}, ValueError, "noise"),
        ({"noise": float("inf")}, ValueError, "noise"),
        ({"noise": "0.1"}, TypeError, "noise"),
        ({"rng": "seed"}, TypeError, "rng"),
        ({"rng": 1.5}, TypeError, "rng"),
        ({"rng": -1}, ValueError, "rng"),
        ({"rng": np.random.RandomState(0)}, TypeError, "rng"),
    ],
)
def test_two_moons_rejects_bad_input(kwargs, error, match):
    with pytest.raises(error, match=match):
        datasets.load_two_moons(**kwargs)


def test_loaders_take_keyword_only_options():
    with pytest.raises(TypeError):
        datasets.load_two_moons(100)  # type: ignore[misc]
    with pytest.raises(TypeError):
        datasets.load_iris(True)  # type: ignore[misc]
    with pytest.raises(TypeError):
        datasets.load_lalonde("cps")  # type: ignore[misc]


# ----------------------------------------------------------------------------- scikit-learn bundled data


def test_iris_multiclass():
    ds = datasets.load_iris()
    assert isinstance(ds, Dataset)
    assert ds.X.shape == (150, 4) and ds.X.dtype == np.float64 and ds.y.dtype == np.int64
    assert ds.n_samples == 150 and ds.n_features == 4
    assert np.bincount(ds.y).tolist() == [50, 50, 50]
    assert ds.target_names == ("setosa", "versicolor", "virginica")
    assert len(ds.feature_names) == 4 and "sepal length (cm)" in ds.feature_names
    assert np.all(np.isfinite(ds.X)) and np.all(ds.X > 0)
    with pytest.raises(ValueError, match="binary"):
        _ = ds.y_signed


def test_iris_binary_is_versicolor_vs_virginica():
    full = datasets.load_iris()
    ds = datasets.load_iris(binary=True)
    assert ds.X.shape == (100, 4) and ds.target_names == ("versicolor", "virginica")
    assert np.bincount(ds.y).tolist() == [50, 50]
    np.testing.assert_array_equal(ds.X, full.X[full.y > 0])
    np.testing.assert_array_equal(ds.y, full.y[full.y > 0] - 1)
    np.testing.assert_array_equal(ds.y_signed, 2.0 * ds.y - 1.0)
    assert "versicolor (0) vs virginica (1)" in ds.description


def test_breast_cancer():
    ds = datasets.load_breast_cancer()
    assert ds.X.shape == (569, 30) and ds.X.dtype == np.float64 and ds.y.dtype == np.int64
    assert ds.target_names == ("malignant", "benign")
    assert np.bincount(ds.y).tolist() == [212, 357]
    assert np.all(np.isfinite(ds.X)) and len(ds.feature_names) == 30
    assert set(np.unique(ds.y_signed)) == {-1.0, 1.0}


def test_digits_scaled_and_raw():
    scaled = datasets.load_digits()
    raw = datasets.load_digits(scaled=False)
    assert scaled.X.shape == raw.X.shape == (1797, 64)
    assert scaled.X.dtype == raw.X.dtype == np.float64
    assert scaled.X.min() == 0.0 and scaled.X.max() == 1.0
    assert raw.X.min() == 0.0 and raw.X.max() == 16.0
    np.testing.assert_array_equal(raw.X, np.round(raw.X))
    np.testing.assert_array_equal(scaled.X * 16.0, raw.X)
    assert scaled.target_names == tuple(str(d) for d in range(10))
    assert np.bincount(scaled.y).min() >= 170
    assert scaled.feature_names[9] == "pixel_1_1"


@pytest.mark.parametrize("loader", [datasets.load_iris, datasets.load_digits])
def test_bool_options_reject_non_bools(loader):
    option = "binary" if loader is datasets.load_iris else "scaled"
    with pytest.raises(TypeError, match=option):
        loader(**{option: 1})


# ----------------------------------------------------------------------------- split


def test_split_is_stratified_disjoint_and_complete():
    ds = datasets.load_iris()
    parts = ds.split(test_size=0.2, rng=11)
    assert parts.X_train.shape == (120, 4) and parts.X_test.shape == (30, 4)
    assert np.bincount(parts.y_train).tolist() == [40, 40, 40]
    assert np.bincount(parts.y_test).tolist() == [10, 10, 10]
    # rows (with labels) of train + test are exactly the rows of the full data set
    X_joined = np.vstack([parts.X_train, parts.X_test])
    joined = np.column_stack([X_joined, np.concatenate([parts.y_train, parts.y_test])])
    full = np.column_stack([ds.X, ds.y])
    np.testing.assert_array_equal(np.unique(joined, axis=0), np.unique(full, axis=0))
    assert parts.feature_names == ds.feature_names and parts.description == ds.description
    # the parts are shuffled (iris is stored sorted by class)
    assert not np.all(np.diff(parts.y_train) >= 0)


def test_split_deterministic_and_rng_dependent():
    ds = datasets.load_breast_cancer()
    a, b, c = ds.split(rng=1), ds.split(rng=1), ds.split(rng=2)
    np.testing.assert_array_equal(a.X_test, b.X_test)
    assert not np.array_equal(a.X_test, c.X_test)
    np.testing.assert_array_equal(a.y_train_signed, 2.0 * a.y_train - 1.0)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"test_size": 0.0}, ValueError),
        ({"test_size": 1.0}, ValueError),
        ({"test_size": 1.5}, ValueError),
        ({"test_size": "0.2"}, TypeError),
        ({"rng": "x"}, TypeError),
        ({"test_size": 0.001}, ValueError),  # rounds to an empty test part
    ],
)
def test_split_rejects_bad_input(kwargs, error):
    with pytest.raises(error, match=r"test_size|rng"):
        datasets.load_iris().split(**kwargs)


# ----------------------------------------------------------------------------- Sachs


def test_sachs_data_and_graph():
    ds = datasets.load_sachs()
    assert isinstance(ds, GraphDataset)
    assert ds.X.shape == (7466, 11) and ds.X.dtype == np.float64
    assert np.all(np.isfinite(ds.X)) and np.all(ds.X > 0)
    assert ds.feature_names == (
        "praf", "pmek", "plcg", "PIP2", "PIP3", "p44/42", "pakts473", "PKA", "PKC", "P38", "pjnk",
    )
    A = ds.adjacency
    assert A.shape == (11, 11) and A.dtype == np.int64
    assert set(np.unique(A)) == {0, 1} and A.sum() == 18 and np.trace(A) == 0
    assert len(ds.edges) == 18
    for cause, effect in ds.edges:
        assert A[ds.feature_names.index(cause), ds.feature_names.index(effect)] == 1
    assert ("praf", "pmek") in ds.edges and ("pmek", "p44/42") in ds.edges
    assert "consensus" in ds.graph_description and "cdt 0.6.0" in ds.description


def test_sachs_graph_has_exactly_the_documented_cycle():
    # The shipped graph is not a DAG: its only non-trivial strongly connected component is {plcg, PIP2, PIP3}
    # (cycle PIP3 -> plcg -> PIP2 -> PIP3); removing the edge PIP2 -> PIP3 leaves an acyclic graph.
    ds = datasets.load_sachs()
    n_comp, labels = connected_components(ds.adjacency, directed=True, connection="strong")
    sizes = np.bincount(labels)
    assert n_comp == 9 and sorted(sizes.tolist())[-1] == 3 and np.sum(sizes > 1) == 1
    cyclic = {ds.feature_names[i] for i in np.flatnonzero(labels == np.argmax(sizes))}
    assert cyclic == {"plcg", "PIP2", "PIP3"}
    assert {("PIP3", "plcg"), ("plcg", "PIP2"), ("PIP2", "PIP3")} <= set(ds.edges)
    A = ds.adjacency.copy()
    A[ds.feature_names.index("PIP2"), ds.feature_names.index("PIP3")] = 0
    assert connected_components(A, directed=True, connection="strong")[0] == 11
    assert "PIP3 -> plcg -> PIP2 -> PIP3" in ds.graph_description


def test_sachs_experiment_labels():
    ds = datasets.load_sachs()
    assert ds.experiment.shape == (7466,) and ds.experiment.dtype == np.int64
    assert np.all(np.diff(ds.experiment) >= 0)
    assert np.bincount(ds.experiment).tolist() == [853, 902, 911, 723, 810, 799, 848, 913, 707]
    assert ds.experiment_names[4] == "cd3cd28+psitect" and ds.experiment_names[5] == "cd3cd28+u0126"
    # first rows of the condition files (values of the original Sachs files 1 and 2)
    first_row_1 = [26.4, 13.2, 8.82, 18.3, 58.8, 6.61, 17.0, 414.0, 17.0, 44.9, 40.0]
    first_row_2 = [36.5, 22.3, 17.5, 142.0, 9.06, 16.1, 22.1, 661.0, 6.55, 27.6, 20.2]
    np.testing.assert_array_equal(ds.X[0], first_row_1)
    np.testing.assert_array_equal(ds.X[853], first_row_2)
    # inhibitor signatures: psitectorigenin lowers PIP2, U0126 lowers p44/42 (Erk) below all other blocks
    log_median = np.array([np.median(np.log(ds.X[ds.experiment == k]), axis=0) for k in range(9)])
    pip2, erk = ds.feature_names.index("PIP2"), ds.feature_names.index("p44/42")
    assert np.argmin(log_median[:, pip2]) == 4 and np.argmin(log_median[:, erk]) == 5


def test_sachs_embedded_files_match_recorded_checksums():
    raw = gzip.decompress((DATA / "sachs_cyto_full_data.csv.gz").read_bytes())
    target = (DATA / "sachs_cyto_full_target.csv").read_bytes()
    assert hashlib.sha256(raw).hexdigest() == (
        "fc331dcd0bc1d8765986b88cd1d23dd5a3f52e4ffc299fdf96de9d522ddf01aa"
    )
    assert hashlib.sha256(target).hexdigest() == (
        "398bc137b2669432ef12e0c57d3783fa876c1c7e2377577d3e75410f085485f6"
    )


# ----------------------------------------------------------------------------- LaLonde


def test_lalonde_experimental_sample():
    ds = datasets.load_lalonde()
    assert isinstance(ds, TreatmentDataset)
    assert ds.X.shape == (445, 8) and ds.X.dtype == np.float64
    assert ds.treatment.dtype == np.int64 and ds.outcome.dtype == np.float64 and ds.outcome.shape == (445,)
    assert ds.feature_names == ("age", "educ", "black", "hisp", "marr", "nodegree", "re74", "re75")
    assert ds.outcome_name == "re78"
    assert int(ds.treatment.sum()) == 185 and int((ds.treatment == 0).sum()) == 260
    assert np.all(np.isfinite(ds.X)) and np.all(np.isfinite(ds.outcome)) and np.all(ds.outcome >= 0)
    for binary in ("black", "hisp", "marr", "nodegree"):
        assert set(np.unique(ds.X[:, ds.feature_names.index(binary)])) == {0.0, 1.0}
    # the experimental benchmark estimate of Dehejia & Wahba (1999): $1794
    assert ds.difference_in_means() == pytest.approx(1794.34, abs=0.01)
    # first row of the NSW treated sample
    np.testing.assert_array_equal(ds.X[0], [37, 11, 1, 0, 1, 1, 0, 0])
    assert ds.outcome[0] == 9930.046


def test_lalonde_cps_controls():
    exp = datasets.load_lalonde()
    cps = datasets.load_lalonde(controls="cps")
    assert cps.X.shape == (16177, 8) and cps.name == "lalonde_cps"
    assert int(cps.treatment.sum()) == 185 and int((cps.treatment == 0).sum()) == 15992
    treated = cps.treatment == 1
    np.testing.assert_array_equal(cps.X[treated], exp.X[exp.treatment == 1])
    np.testing.assert_array_equal(cps.outcome[treated], exp.outcome[exp.treatment == 1])
    # the CPS comparison group earns far more: the naive contrast is strongly negative
    assert cps.difference_in_means() < -8000


@pytest.mark.parametrize(("controls", "error"), [("psid", ValueError), ("", ValueError), (1, TypeError)])
def test_lalonde_rejects_unknown_controls(controls, error):
    with pytest.raises(error, match="controls"):
        datasets.load_lalonde(controls=controls)


# ----------------------------------------------------------------------------- containers and packaging


@pytest.mark.parametrize(
    "loader",
    [
        datasets.load_two_moons,
        datasets.load_iris,
        datasets.load_breast_cancer,
        datasets.load_digits,
        datasets.load_sachs,
        datasets.load_lalonde,
    ],
)
def test_results_are_frozen_with_summary_and_description(loader):
    ds = loader()
    with pytest.raises(dataclasses.FrozenInstanceError):
        ds.name = "changed"
    text = ds.summary()
    assert isinstance(text, str) and ds.name in text and str(ds) == text
    assert set(ds.to_dict()) == {f.name for f in dataclasses.fields(ds)}
    assert "licen" in ds.description.lower()


def test_embedded_files_are_package_resources():
    names = {entry.name for entry in DATA.iterdir()}
    assert {
        "sachs_cyto_full_data.csv.gz",
        "sachs_cyto_full_target.csv",
        "lalonde_nsw_dw.csv",
        "lalonde_cps1_controls.csv.gz",
        "PROVENANCE.md",
    } <= names
