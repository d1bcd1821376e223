"""One answer for the same data: row order and rng do not change a fit; the default (``mechanism="auto"``)
is the linear fit on linear data and the spline fit on nonlinear data; where identified orientations
come from."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pandas as pd
import pytest

from certkit.causal import CausalMixtureModel, ari, cpdag, edge_f1, make_mixture_sem
from certkit.causal.data import canonical_order, data_seed
from certkit.causal.equivalence import identified_orientations, orientation_sources
from certkit.causal.estimator import AUTO_MARGIN


def _user_data(seed: int, n: int = 1500):
    """A new user's 6-variable nonlinear mixture (issue 37): an N(0, 1) source, curved mechanisms, and a
    hidden Bernoulli Z moving the intercept of x3."""
    gen = np.random.default_rng([seed, 37])
    z = gen.integers(0, 2, n)
    x0 = gen.standard_normal(n)
    x1 = np.tanh(2 * x0) + 0.3 * gen.standard_normal(n)
    x2 = x0**2 + 0.4 * gen.standard_normal(n)
    x3 = np.sin(2 * x1) + 0.6 * x2 + 2.0 * z + 0.3 * gen.standard_normal(n)
    x4 = 1.5 * np.tanh(x3) + 0.3 * gen.standard_normal(n)
    x5 = x2**2 / 3 - np.sin(x4) + 0.3 * gen.standard_normal(n)
    A = np.zeros((6, 6), dtype=np.int64)
    for i, j in [(0, 1), (0, 2), (1, 3), (2, 3), (3, 4), (2, 5), (4, 5)]:
        A[i, j] = 1
    return np.column_stack([x0, x1, x2, x3, x4, x5]), A, z


def _equal(a, b, rows: np.ndarray, where: str) -> None:
    """``b`` is ``a`` with every per-row array (first axis of length n) taken at ``rows``, bit for bit."""
    if dataclasses.is_dataclass(a):
        assert type(a) is type(b), where
        for field in dataclasses.fields(a):
            _equal(getattr(a, field.name), getattr(b, field.name), rows, f"{where}.{field.name}")
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for key in a:
            _equal(a[key], b[key], rows, f"{where}[{key!r}]")
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _equal(x, y, rows, f"{where}[{i}]")
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype, where
        expected = a[rows] if a.ndim and a.shape[0] == rows.size else a
        np.testing.assert_array_equal(expected, b, err_msg=where)
    else:
        assert type(a) is type(b) and a == b, where


def _same(
    a: CausalMixtureModel, b: CausalMixtureModel, rows: np.ndarray, *, but: tuple[str, ...] = ()
) -> None:
    """``b`` was fitted on ``X[rows]``: every fitted attribute of ``a`` but those named in ``but`` (the same
    scores, bit for bit on one machine: the same rows in the same order), its per-row outputs taken at
    ``rows``."""
    fitted = sorted(k for k in vars(a) if k.endswith("_") and not k.startswith("_") and k not in but)
    assert fitted == sorted(k for k in vars(b) if k.endswith("_") and not k.startswith("_") and k not in but)
    assert {"labels_", "mechanisms_", "mixing_variables_", "score_", "data_key_"} <= set(fitted)
    for name in fitted:
        _equal(getattr(a, name), getattr(b, name), rows, name)


@pytest.mark.slow
def test_the_users_data_get_one_answer_over_seeds_and_a_permutation():
    X, A, z = _user_data(0)
    first = CausalMixtureModel(rng=0).fit(X)
    identity = np.arange(X.shape[0])
    for seed in (1, 2, 3):
        _same(first, CausalMixtureModel(rng=seed).fit(X), identity)
    rows = np.random.default_rng(99).permutation(X.shape[0])
    _same(first, CausalMixtureModel(rng=0).fit(X[rows]), rows)
    # the default is the spline fit here, and it is right
    assert first.mechanism_ == "spline"
    assert first.mechanism_scores_["linear"] > first.mechanism_scores_["spline"] + AUTO_MARGIN
    assert edge_f1(A, first.adjacency_) >= 0.8
    assert first.n_components_.tolist() == [1, 1, 1, 2, 1, 1]  # the source x0 does not change
    assert ari(z, first.group_labels_[:, 0]) > 0.9
    spline = CausalMixtureModel(mechanism="spline", rng=7).fit(X)
    _same(first, spline, identity, but=("mechanism_scores_", "n_scores_"))  # auto fitted both


def test_rows_are_sorted_by_value_and_the_seed_ignores_their_order():
    gen = np.random.default_rng(0)
    X = gen.integers(0, 3, size=(50, 3)).astype(float)
    X[::7, 0] = -0.0
    order = canonical_order(X)
    keys = [tuple(r) for r in X[order]]
    assert keys == sorted(keys)
    rows = gen.permutation(50)
    np.testing.assert_array_equal(X[order], X[rows][canonical_order(X[rows])])
    assert data_seed(X[order] + 0.0) == data_seed(X[rows][canonical_order(X[rows])] + 0.0)
    assert data_seed(X[order] + 0.0) != data_seed(X[order] + 1.0)
    assert 0 <= data_seed(X) < 2**63


@pytest.mark.parametrize("options", [{}, {"search_samples": 150, "rng": 3}, {"standardize": False}])
def test_a_permutation_gives_the_same_fit_on_linear_mixtures(options):
    X, _, _ = make_mixture_sem(5, 300, 0.4, 2, mixing_size=2, rng=2)
    X[:20] = X[20:40]  # duplicate rows sort next to each other
    rows = np.random.default_rng(1).permutation(X.shape[0])
    a = CausalMixtureModel(max_components=3, **options).fit(X)
    b = CausalMixtureModel(max_components=3, **options).fit(X[rows])
    _same(a, b, rows)


@pytest.mark.parametrize(
    ("data", "options"),
    [
        ("linear", {}),
        ("nonlinear", {}),
        ("linear", {"search": "ges"}),
        ("linear", {"search_samples": 250, "rng": 1, "n_knots": 3}),
    ],
)
def test_shared_local_scores_change_no_fitted_attribute(monkeypatch, data, options):
    """The fits of "auto" share their local scores (a spline score whose parents all enter linearly is
    the linear one): the fit is the one each fit gives with its own scores, with fewer scores computed."""
    from certkit.causal import mechanism_fit
    from certkit.causal.score import LatentBIC

    if data == "linear":
        X, _, _ = make_mixture_sem(5, 400, 0.5, 2, mixing_size=2, rng=4)
    else:
        X = _user_data(1, n=500)[0]
    options = {"rng": 0, **options}
    shared = CausalMixtureModel(max_components=3, **options).fit(X)

    class OwnScores(LatentBIC):
        def __init__(self, X, settings, *, executor=None, shared_scores=None):
            super().__init__(X, settings, executor=executor)

    monkeypatch.setattr(mechanism_fit, "LatentBIC", OwnScores)
    own = CausalMixtureModel(max_components=3, **options).fit(X)
    _same(shared, own, np.arange(X.shape[0]), but=("n_scores_",))
    assert shared.n_scores_ < own.n_scores_


def _on_graph(X, mechanism, graph_of, **options):
    """A fit with ``mechanism`` on the graph (adjacency, order) of the fitted model ``graph_of``."""
    model = CausalMixtureModel(mechanism=mechanism, **options)
    model._fit(X, None, mechanism, graph=(graph_of.adjacency_, graph_of.order_))
    model.mechanism_ = mechanism
    return model


@pytest.mark.parametrize(
    ("n", "seed", "options", "better"),
    [
        (400, 3, {"max_components": 3}, "linear"),  # the linear mechanisms gain on the spline graph
        (600, 0, {}, "spline"),  # the spline mechanisms gain on the linear search's own graph
    ],
)
def test_auto_on_linear_data_is_the_best_fit_of_either_search(n, seed, options, better):
    X, _, _ = make_mixture_sem(6, n, 0.4, 2, mixing_size=3, rng=seed)
    auto = CausalMixtureModel(rng=0, **options).fit(X)
    linear = CausalMixtureModel(mechanism="linear", rng=0, **options).fit(X)
    spline = CausalMixtureModel(mechanism="spline", rng=0, **options).fit(X)
    assert not np.array_equal(linear.adjacency_, spline.adjacency_)  # the searches disagree here
    # each mechanism on the other search's own graph (the spline one too: the linear fit wins)
    linear_there = _on_graph(X, "linear", spline, rng=0, **options)
    spline_there = _on_graph(X, "spline", linear, rng=0, **options)
    best_linear = min(linear, linear_there, key=lambda m: m.score_)
    best_spline = min(spline, spline_there, key=lambda m: m.score_)
    gained = {
        "linear": linear_there.score_ < linear.score_ - 1, "spline": spline_there.score_ < spline.score_ - 1
    }
    assert gained[better]
    assert auto.mechanism_ == "linear" and linear.mechanism_ == "linear"
    assert auto.mechanism_scores_ == {"linear": best_linear.score_, "spline": best_spline.score_}
    assert not best_spline.score_ < best_linear.score_ - AUTO_MARGIN
    _same(best_linear, auto, np.arange(X.shape[0]), but=("mechanism_scores_", "n_scores_"))
    assert linear.mechanism_scores_ == {"linear": linear.score_}
    assert "mechanisms: linear (total BIC linear" in auto.summary()


def test_auto_on_nonlinear_data_refits_only_the_linear_mechanisms_on_the_spline_graph():
    x = np.random.default_rng(0).standard_normal(600)
    gen = np.random.default_rng(1)
    X = np.column_stack([x, np.tanh(2 * x) + x**2 + 0.3 * gen.standard_normal(600), gen.standard_normal(600)])
    X[:, 2] += np.sin(2 * X[:, 1])
    auto = CausalMixtureModel(max_components=2, rng=0).fit(X)
    linear = CausalMixtureModel(max_components=2, mechanism="linear", rng=0).fit(X)
    spline = CausalMixtureModel(max_components=2, mechanism="spline", rng=0).fit(X)
    linear_there = _on_graph(X, "linear", spline, max_components=2, rng=0)
    assert auto.mechanism_ == "spline"
    assert auto.mechanism_scores_ == {
        "linear": min(linear.score_, linear_there.score_), "spline": spline.score_
    }
    _same(spline, auto, np.arange(X.shape[0]), but=("mechanism_scores_", "n_scores_"))


def test_auto_falls_back_to_linear_when_the_rows_are_too_few_for_splines():
    X, _, _ = make_mixture_sem(4, 40, 0.5, 2, rng=0)
    with pytest.raises(ValueError, match="mechanism='linear'"):
        CausalMixtureModel(max_components=2, mechanism="spline").fit(X)
    auto = CausalMixtureModel(max_components=2).fit(X)
    assert auto.mechanism_ == "linear" and list(auto.mechanism_scores_) == ["linear"]
    assert "mechanisms: linear (auto: spline not tried, too few rows" in auto.summary()


def test_auto_falls_back_to_linear_when_search_samples_are_too_few_for_splines():
    X, _, _ = make_mixture_sem(4, 200, 0.5, 2, rng=0)
    # 30 rows: enough for the linear mixtures on all other variables (11 parameters), not the spline (41)
    with pytest.raises(ValueError, match="search_samples must be >= 41"):
        CausalMixtureModel(max_components=2, mechanism="spline", search_samples=30).fit(X)
    auto = CausalMixtureModel(max_components=2, search_samples=30, rng=0).fit(X)
    linear = CausalMixtureModel(max_components=2, search_samples=30, mechanism="linear", rng=0).fit(X)
    assert auto.mechanism_ == "linear" and auto.mechanism_scores_ == {"linear": linear.score_}


def test_a_fit_that_raises_leaves_the_estimator_as_it_was():
    X, _, _ = make_mixture_sem(4, 200, 0.5, 2, rng=0)
    model = CausalMixtureModel(max_components=2, rng=0).fit(X)
    before = {k: v for k, v in vars(model).items() if k.endswith("_")}
    model.set_params(search_samples=5)  # fewer than the linear mixtures' 11 parameters
    with pytest.raises(ValueError, match="search_samples must be >= 11"):
        model.fit(X)
    after = {k: v for k, v in vars(model).items() if k.endswith("_")}
    assert after.keys() == before.keys() and all(after[k] is before[k] for k in before)


@pytest.mark.parametrize("failing_fit", [2, 3])  # the spline fit, the first cross fit
def test_a_fit_that_raises_late_leaves_the_estimator_as_it_was(monkeypatch, failing_fit):
    X, _, _ = make_mixture_sem(6, 400, 0.4, 2, mixing_size=3, rng=3)
    model = CausalMixtureModel(max_components=3, rng=0).fit(X)
    before = {k: v for k, v in vars(model).items() if k.endswith("_") or k.startswith("_fit")}
    fit_one, calls = CausalMixtureModel._fit, []

    def failing(self, *args, **kwargs):
        calls.append(args[2])
        if len(calls) == failing_fit:
            raise RuntimeError("stop")
        return fit_one(self, *args, **kwargs)

    monkeypatch.setattr(CausalMixtureModel, "_fit", failing)
    with pytest.raises(RuntimeError, match="stop"):
        model.set_params(n_init=2).fit(X)
    assert calls[-1] == ("spline" if failing_fit == 2 else "linear")
    after = {k: v for k, v in vars(model).items() if k.endswith("_") or k.startswith("_fit")}
    assert after.keys() == before.keys() and all(after[k] is before[k] for k in before)


def test_auto_draws_one_search_subsample_for_all_its_fits(monkeypatch):
    X, _, _ = make_mixture_sem(4, 300, 0.5, 2, rng=1)
    fit_one, seeds = CausalMixtureModel._fit, []

    def recording(self, *args, **kwargs):
        seeds.append(self.rng)
        return fit_one(self, *args, **kwargs)

    monkeypatch.setattr(CausalMixtureModel, "_fit", recording)
    gen = np.random.default_rng(5)
    CausalMixtureModel(max_components=2, search_samples=200, rng=gen).fit(X)
    assert len(seeds) >= 2 and len(set(seeds)) == 1 and isinstance(seeds[0], int)
    seeds.clear()
    CausalMixtureModel(max_components=2, search_samples=200, rng=None).fit(X)
    assert len(seeds) >= 2 and len(set(seeds)) == 1 and isinstance(seeds[0], int)
    seeds.clear()
    CausalMixtureModel(max_components=2, search_samples=200, rng=3).fit(X)
    assert seeds == [3] * len(seeds)  # an int rng is every fit's own seed


def test_summary_reports_the_mechanism_the_fit_was_asked_for():
    X, _, _ = make_mixture_sem(4, 200, 0.5, 2, rng=0)
    model = CausalMixtureModel(max_components=2, mechanism="linear", rng=0).fit(X)
    model.set_params(mechanism="auto")
    assert "mechanisms: linear\n" in model.summary() + "\n" and "auto" not in model.summary()


def test_repeated_column_names_are_refused():
    X, _, _ = make_mixture_sem(3, 100, rng=0)
    with pytest.raises(ValueError, match="X has repeated column name\\(s\\) 'a'"):
        CausalMixtureModel().fit(pd.DataFrame(X, columns=["a", "b", "a"]))


@pytest.mark.parametrize("bad", ["Auto", "cubic", 1])
def test_an_unknown_mechanism_is_named(bad):
    X, _, _ = make_mixture_sem(3, 100, rng=0)
    with pytest.raises((ValueError, TypeError), match="mechanism"):
        CausalMixtureModel(mechanism=bad).fit(X)


def _sources_by_hand(A, identified, sets, oriented):
    """The documented rule, pair by pair: the first of v-structure, mixing variable, score, Meek."""
    d = A.shape[0]
    out = {}
    for i, j in itertools.product(range(d), range(d)):
        if not identified[i, j]:
            continue
        if any(A[k, j] and k != i and not A[i, k] and not A[k, i] for k in range(d)):
            out[i, j] = "v-structure"
        elif any(j in s and i not in s for s in sets):
            out[i, j] = "mixing variable"
        elif oriented is not None and oriented[i, j]:
            out[i, j] = "spline score"
        else:
            out[i, j] = "Meek's rules"
    return out


def test_orientation_sources_by_hand():
    # a -> c <- b (v-structure), c -> d (Meek R1 from the v-structure), e - f undirected, a mixing
    # variable on f alone (orients e -> f), g -> h oriented by the score, h -> i then by Meek
    names = "abcdefghi"
    A = np.zeros((9, 9), dtype=np.int64)
    for i, j in ["ac", "bc", "cd", "ef", "gh", "hi"]:
        A[names.index(i), names.index(j)] = 1
    oriented = np.zeros((9, 9), dtype=bool)
    oriented[names.index("g"), names.index("h")] = True
    sets = [frozenset({names.index("f")})]
    identified = identified_orientations(A, cpdag(A, mixing_sets=sets, oriented=oriented))
    sources = orientation_sources(A, identified, sets, oriented)
    got = {(names[i], names[j]): s for (i, j), s in sources.items()}
    assert got == {
        ("a", "c"): "v-structure", ("b", "c"): "v-structure", ("c", "d"): "Meek's rules",
        ("e", "f"): "mixing variable", ("g", "h"): "spline score", ("h", "i"): "Meek's rules",
    }


@pytest.mark.parametrize("seed", range(30))
def test_orientation_sources_match_the_rule_on_random_graphs(seed):
    gen = np.random.default_rng(seed)
    d = int(gen.integers(3, 8))
    A = np.triu(gen.random((d, d)) < 0.4, 1).astype(np.int64)
    order = gen.permutation(d)
    A = A[np.ix_(order, order)]
    sets = [frozenset(int(v) for v in gen.choice(d, size=int(gen.integers(1, 3)), replace=False))]
    oriented = (gen.random((d, d)) < 0.3) & (A == 1)
    identified = identified_orientations(A, cpdag(A, mixing_sets=sets, oriented=oriented))
    got = orientation_sources(A, identified, sets, oriented)
    assert got == _sources_by_hand(A, identified, sets, oriented)
    assert set(got) == {(int(i), int(j)) for i, j in zip(*np.nonzero(identified))}


def _counting_pools(monkeypatch):
    """Count the process pools opened, the chunks of fits submitted to them and those their workers ran
    (the others were taken back by the calling process)."""
    import certkit.parallel as parallel

    counts = {"pools": 0, "chunks": 0, "futures": []}

    class CountingPool(parallel.ProcessPoolExecutor):
        def __init__(self, *args, **kwargs):
            counts["pools"] += 1
            super().__init__(*args, **kwargs)

        def submit(self, *args, **kwargs):
            counts["chunks"] += 1
            counts["futures"].append(super().submit(*args, **kwargs))
            return counts["futures"][-1]

    monkeypatch.setattr(parallel, "ProcessPoolExecutor", CountingPool)
    return counts


def test_executor_gives_the_serial_fit_with_one_pool_for_every_fit_of_auto(monkeypatch, dispatch_every_batch):
    """Issue 43: each fit of "auto" opened its own process pool (81 s against 1.3 s serially). One pool now
    serves the four fits (both searches and both cross fits), and every fitted attribute is the serial
    one, bit for bit."""
    from certkit.parallel import available_cpus

    if available_cpus() < 2:
        pytest.skip("an executor of 2 workers runs serially on one CPU")
    X, _, _ = make_mixture_sem(6, 400, 0.4, 2, mixing_size=3, rng=3)  # the searches disagree: 4 fits
    serial = CausalMixtureModel(rng=0, max_components=3).fit(X)
    fits = []
    fit_one = CausalMixtureModel._fit

    def counted_fit(self, *args, **kwargs):
        fits.append(args[2])  # the mechanism
        return fit_one(self, *args, **kwargs)

    monkeypatch.setattr(CausalMixtureModel, "_fit", counted_fit)
    counts = _counting_pools(monkeypatch)
    pooled = CausalMixtureModel(rng=0, max_components=3, executor=2).fit(X)
    assert sorted(fits) == ["linear", "linear", "spline", "spline"]
    assert counts["pools"] == 1 and counts["chunks"] > 0
    assert any(not future.cancelled() for future in counts["futures"])  # the workers ran some
    _same(serial, pooled, np.arange(X.shape[0]))


def test_small_batches_stay_in_the_calling_process(monkeypatch):
    """A pool the fit opened gets no batch below START_WORK: a small fit with executor=2 hands nothing out,
    so no worker starts."""
    X, _, _ = make_mixture_sem(5, 300, rng=7)
    counts = _counting_pools(monkeypatch)
    pooled = CausalMixtureModel(rng=1, executor=2).fit(X)
    assert counts["chunks"] == 0 and counts["pools"] <= 1
    _same(CausalMixtureModel(rng=1).fit(X), pooled, np.arange(X.shape[0]))
