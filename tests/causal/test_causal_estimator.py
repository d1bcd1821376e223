import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

from certkit.causal import CausalMixtureModel, edge_stability, make_mixture_sem


@pytest.fixture(scope="module")
def data():
    X, A, Z = make_mixture_sem(5, 300, rng=7)
    return X, A, Z


def _same_fit(a, b):
    np.testing.assert_array_equal(a.adjacency_, b.adjacency_)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    np.testing.assert_array_equal(a.node_scores_, b.node_scores_)
    assert a.order_ == b.order_ and a.mixing_sets_ == b.mixing_sets_ and a.score_ == b.score_


def test_fitted_attributes_and_summary(data):
    X, _, _ = data
    model = CausalMixtureModel(rng=0).fit(X)
    n, d = X.shape
    assert model.adjacency_.shape == (d, d) and model.adjacency_.dtype == np.int64
    assert np.all(np.diag(model.adjacency_) == 0)
    position = {v: i for i, v in enumerate(model.order_)}
    assert sorted(model.order_) == list(range(d))
    for i, j in zip(*np.nonzero(model.adjacency_)):
        assert position[i] < position[j]  # edges follow the order: acyclic
    assert model.labels_.shape == (n, d)
    assert all(model.labels_[:, j].max() < model.n_components_[j] for j in range(d))
    assert [r.shape for r in model.responsibilities_] == [(n, k) for k in model.n_components_]
    # The total score: each mixing variable's joint BIC plus every invariant node's own BIC.
    grouped = {j for s in model.mixing_sets_ for j in s}
    invariant = sum(model.mechanisms_[j].bic for j in range(d) if j not in grouped)
    assert model.score_ == pytest.approx(sum(v.bic for v in model.mixing_variables_) + invariant)
    assert all(model.n_components_[j] == 1 for j in range(d) if j not in grouped)
    for m, variable in enumerate(model.mixing_variables_):
        assert frozenset(variable.nodes) == model.mixing_sets_[m]
        for j in variable.nodes:  # one latent per set: its nodes share the labels of the joint fit
            np.testing.assert_array_equal(model.labels_[:, j], model.group_labels_[:, m])
            assert model.n_components_[j] == variable.n_components
    text = model.summary()
    assert "Causal mixture model" in text and "x0" in text
    assert model.feature_names_in_ == tuple(f"x{j}" for j in range(d))


def test_deterministic_given_rng(data):
    X, _, _ = data
    _same_fit(CausalMixtureModel(rng=3).fit(X), CausalMixtureModel(rng=3).fit(X))


def test_process_pool_and_dask_equal_serial(data, dask_client, dispatch_every_batch):
    X, _, _ = data
    serial = CausalMixtureModel(rng=1).fit(X)
    _same_fit(serial, CausalMixtureModel(rng=1, executor=2).fit(X))
    dask_fit = CausalMixtureModel(rng=1, executor=dask_client).fit(X)
    dask_stab = edge_stability(
        X[:150], n_bootstrap=3, executor=dask_client, rng=5, estimator=CausalMixtureModel(max_components=2)
    )
    _same_fit(serial, dask_fit)
    serial_stab = edge_stability(
        X[:150], n_bootstrap=3, rng=5, estimator=CausalMixtureModel(max_components=2)
    )
    np.testing.assert_array_equal(serial_stab.edge_frequency, dask_stab.edge_frequency)
    assert serial_stab.mixing_set_frequency == dask_stab.mixing_set_frequency


def test_dataframe_input_keeps_names(data):
    X, _, _ = data
    frame = pd.DataFrame(X, columns=["a", "b", "c", "d", "e"])
    model = CausalMixtureModel(rng=0).fit(frame)
    np.testing.assert_array_equal(model.adjacency_, CausalMixtureModel(rng=0).fit(X).adjacency_)
    assert model.feature_names_in_ == ("a", "b", "c", "d", "e")
    assert all(a in "abcde" and b in "abcde" for a, b in model.edges())


def test_progress_bar_does_not_change_the_fit(data, capsys):
    X, _, _ = data
    _same_fit(CausalMixtureModel(rng=0, progress=True).fit(X), CausalMixtureModel(rng=0).fit(X))


def test_ges_variant_with_latent_score(data):
    pytest.importorskip("causallearn")
    X, _, _ = data
    model = CausalMixtureModel(search="ges", rng=0).fit(X)
    A = model.adjacency_
    assert A.shape == (5, 5) and not np.any(A & A.T)
    position = {v: i for i, v in enumerate(model.order_)}
    for i, j in zip(*np.nonzero(A)):
        assert position[i] < position[j]
    # GES with K = 1 recovers the plain-BIC equivalence class: same skeleton as the TOPIC search here
    chain = np.random.default_rng(0).normal(size=(400, 3)).cumsum(axis=1)
    ges = CausalMixtureModel(max_components=1, search="ges", rng=0).fit(chain)
    skeleton = np.maximum(ges.adjacency_, ges.adjacency_.T)
    np.testing.assert_array_equal(skeleton, [[0, 1, 0], [1, 0, 1], [0, 1, 0]])


def test_search_on_a_subsample_fits_mechanisms_on_all_rows(data):
    X, _, _ = data
    model = CausalMixtureModel(rng=0, search_samples=150).fit(X)
    assert model.labels_.shape == (300, 5)
    assert all(r.shape[0] == 300 for r in model.responsibilities_)
    _same_fit(model, CausalMixtureModel(rng=0, search_samples=150).fit(X))
    _same_fit(CausalMixtureModel(rng=0, search_samples=300).fit(X), CausalMixtureModel(rng=0).fit(X))


def test_sklearn_clone_and_not_fitted():
    model = CausalMixtureModel(max_components=3, rng=2)
    assert clone(model).get_params() == model.get_params()
    with pytest.raises(NotFittedError):
        model.summary()
    for name in ("adjacency_", "mixing_sets_", "identified_"):  # issue 23: was a bare AttributeError
        with pytest.raises(NotFittedError, match=f"call fit\\(X\\) before reading {name}"):
            getattr(model, name)
    assert not hasattr(model, "adjacency_")


@pytest.mark.parametrize(
    ("kwargs", "X_change", "error", "match"),
    [
        ({}, "constant", ValueError, "constant column"),
        ({}, "nan", ValueError, "X must be finite"),
        ({}, "inf", ValueError, "X must be finite"),
        ({}, "few", ValueError, "fewer than the .* parameters"),
        ({}, "one_column", ValueError, "at least 2 columns"),
        ({"max_components": 0}, None, ValueError, "max_components must be >= 1"),
        ({"max_components": 2.5}, None, TypeError, "max_components must be an integer"),
        ({"search": "pc"}, None, ValueError, "unknown search"),
        ({"component_search": "all"}, None, ValueError, "unknown component_search"),
        ({"mixing_threshold": -0.1}, None, ValueError, "mixing_threshold must be >= 0"),
        ({"refine_threshold": -1.0}, None, ValueError, "refine_threshold must be >= 0"),
        ({"rng": -1}, None, ValueError, "rng seed must be >= 0"),
        ({"search_samples": 3}, None, ValueError, "search_samples must be >="),
        ({"n_init": 10**9}, None, ValueError, "n_init must be <= 1000"),
        ({"max_groups": 0}, None, ValueError, "max_groups must be >= 1"),
        ({"max_groups": 2.0}, None, TypeError, "max_groups must be an integer"),
        ({"mixing_threshold": float("nan")}, None, ValueError, "mixing_threshold"),
        ({"executor": "many"}, None, TypeError, "executor must be"),
        ({"progress": 3}, None, TypeError, "progress must be"),
    ],
)
def test_bad_inputs_name_the_argument(data, kwargs, X_change, error, match):
    X = data[0].copy()
    if X_change == "constant":
        X[:, 2] = 1.5
    elif X_change == "nan":
        X[4, 1] = np.nan
    elif X_change == "inf":
        X[4, 1] = np.inf
    elif X_change == "few":
        X = X[:20]
    elif X_change == "one_column":
        X = X[:, :1]
    with pytest.raises(error, match=match):
        CausalMixtureModel(**kwargs).fit(X)


def test_non_numeric_dataframe_column_is_named(data):
    frame = pd.DataFrame(data[0][:, :3], columns=["a", "b", "c"])
    frame["cell"] = "T"
    with pytest.raises(TypeError, match="X column 'cell' has non-numeric dtype"):
        CausalMixtureModel().fit(frame)
    frame = pd.DataFrame(data[0][:, :3], columns=["a", "b", "c"]).assign(flag=True)
    with pytest.raises(TypeError, match="X column 'flag'"):
        CausalMixtureModel().fit(frame)


def test_stability_frequencies_and_summary():
    gen = np.random.default_rng(0)
    n = 300
    x0 = gen.normal(size=n)
    x1 = 0.9 * x0 + 0.4 * gen.normal(size=n)
    x2 = gen.normal(size=n)  # independent of both
    X = np.column_stack([x0, x1, x2])
    res = edge_stability(X, n_bootstrap=6, rng=1, estimator=CausalMixtureModel(max_components=2))
    assert res.adjacency_frequency[0, 1] == 1.0  # the strong dependence is always found
    assert res.adjacency_frequency[0, 2] == res.adjacency_frequency[1, 2] == 0.0
    assert np.all((res.edge_frequency >= 0) & (res.edge_frequency <= 1))
    assert res.edge_frequency[0, 1] + res.edge_frequency[1, 0] == 1.0
    assert np.all(res.change_frequency == 0.0) and res.mixing_set_frequency == {}
    assert "Edge stability over 6 bootstrap fits" in res.summary()
    again = edge_stability(
        X, n_bootstrap=6, rng=1, estimator=CausalMixtureModel(max_components=2), executor=2
    )
    np.testing.assert_array_equal(res.edge_frequency, again.edge_frequency)
    boot = edge_stability(
        X,
        n_bootstrap=2,
        rng=1,
        replace=True,
        sample_fraction=1.0,
        estimator=CausalMixtureModel(max_components=1),
    )
    assert boot.adjacency_frequency[0, 1] == 1.0 and boot.n_bootstrap == 2
    with pytest.raises(ValueError, match="sample_fraction must be <= 1 without replacement"):
        edge_stability(X, n_bootstrap=2, sample_fraction=1.5)
    with pytest.raises(ValueError, match="n_bootstrap must be >= 1"):
        edge_stability(X, n_bootstrap=0)
    with pytest.raises(TypeError, match="estimator must be a CausalMixtureModel"):
        edge_stability(X, n_bootstrap=2, estimator=object())


def test_stability_sees_the_mixing_set():
    gen = np.random.default_rng(3)
    z = gen.integers(0, 2, 400)
    x0 = gen.normal(size=400)
    x1 = 0.8 * x0 + 0.4 * gen.normal(size=400) + 3.0 * z
    res = edge_stability(
        np.column_stack([x0, x1]), n_bootstrap=4, rng=0, estimator=CausalMixtureModel(max_components=2)
    )
    assert res.change_frequency[1] == 1.0
    assert res.mixing_set_frequency.get(frozenset({1}), 0.0) >= 0.75


def test_near_constant_column_is_rejected():
    from certkit.causal import CausalMixtureModel

    gen = np.random.default_rng(0)
    X = gen.normal(size=(50, 3))
    X[:, 1] = 1.0 + 1e-14 * gen.normal(size=50)
    with pytest.raises(ValueError, match="constant column"):
        CausalMixtureModel().fit(X)
