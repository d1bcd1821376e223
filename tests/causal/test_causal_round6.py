"""Issue 43: causal discovery, round 6 of first use (carried-over defects, summary caveats)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from certkit._core import mixreg
from certkit.causal import (
    CausalMixtureModel,
    LatentBIC,
    ScoreSettings,
    cpdag,
    fit_mixture_regression,
    identified_orientations,
    score_orientations,
    spline_basis,
)
from certkit.causal.batches import (
    CHUNK_WORK,
    JOINT_WORK,
    MIN_BATCH_WORK,
    START_WORK,
    StartingPool,
    chunk_count,
    em_work,
    map_chunks,
)
from certkit.causal.mixture_regression import RIDGE

CHAIN = np.array([[0, 1, 0], [0, 0, 1], [0, 0, 0]])


# --- cpdag of an empty graph ---


@pytest.mark.parametrize("dtype", [np.int64, np.float64, bool])
def test_cpdag_of_a_graph_without_nodes_is_empty(dtype):
    """A (0, 0) adjacency raised ZeroDivisionError (integer input) or 'must not be empty' (float)."""
    empty = np.zeros((0, 0), dtype=dtype)
    out = cpdag(empty)
    assert out.shape == (0, 0) and out.dtype == np.int64
    assert cpdag(empty, oriented=np.zeros((0, 0), bool)).shape == (0, 0)
    assert identified_orientations(empty, out).shape == (0, 0)


def test_cpdag_of_nodes_without_edges_has_no_edges():
    np.testing.assert_array_equal(cpdag(np.zeros((3, 3), int), mixing_sets=[{0, 2}]), np.zeros((3, 3)))


# --- score_orientations checks its inputs ---


@pytest.fixture(scope="module")
def chain_score():
    gen = np.random.default_rng(0)
    x = gen.standard_normal(300)
    y = np.tanh(2 * x) + 0.3 * gen.standard_normal(300)
    X = np.column_stack([x, y, y + 0.5 * gen.standard_normal(300)])
    return LatentBIC(X, ScoreSettings(max_components=1, mechanism="spline"))


@pytest.mark.parametrize(
    ("threshold", "error", "message"),
    [
        (-1.0, ValueError, r"^threshold must be >= 0, got -1.0"),
        (float("nan"), ValueError, r"^threshold must be finite"),
        (-np.inf, ValueError, r"^threshold must be finite"),
        ("10", TypeError, r"^threshold must be a real number, got str"),
        (None, TypeError, r"^threshold must be a real number, got NoneType"),
    ],
)
def test_score_orientations_refuses_a_bad_threshold(chain_score, threshold, error, message):
    with pytest.raises(error, match=message):
        score_orientations(chain_score, CHAIN, cpdag(CHAIN), threshold)


def test_score_orientations_refuses_a_graph_of_another_size(chain_score):
    four = np.zeros((4, 4), int)
    four[0, 1] = four[1, 2] = four[2, 3] = 1
    with pytest.raises(ValueError, match=r"^adjacency has 4 nodes, which is more than the score covers: the "
                                         r"score covers 3 variables"):
        score_orientations(chain_score, four, cpdag(four), 10.0)
    with pytest.raises(ValueError, match=r"^cpdag_matrix must have shape \(3, 3\)"):
        score_orientations(chain_score, CHAIN, cpdag(four), 10.0)
    with pytest.raises(ValueError, match=r"^adjacency must be square"):
        score_orientations(chain_score, np.zeros((3, 2), int), cpdag(CHAIN), 10.0)


def test_score_orientations_refuses_a_cpdag_of_another_dag(chain_score):
    collider = np.array([[0, 1, 0], [0, 0, 0], [0, 1, 0]])
    with pytest.raises(ValueError, match=r"^cpdag_matrix is not a CPDAG of adjacency: it has the reverse of "
                                         r"the DAG's edge between nodes 1 and 2"):
        score_orientations(chain_score, CHAIN, cpdag(collider), 10.0)
    with pytest.raises(ValueError, match=r"^cpdag_matrix is not a CPDAG of adjacency: it has an edge the DAG "
                                         r"lacks between nodes 0 and 2"):
        score_orientations(chain_score, CHAIN, np.ones((3, 3), int) - np.eye(3, dtype=int), 10.0)
    # 0 -> 1 directed but 1 - 2 left undirected: Meek's first rule orients 1 -> 2 (0 and 2 are not
    # adjacent), so no DAG with mixing variables has this CPDAG; it used to leave 1 - 2 silently untested
    partial = cpdag(CHAIN)
    partial[1, 0] = 0
    with pytest.raises(ValueError, match=r"^cpdag_matrix is not a CPDAG of adjacency: Meek's rules orient "
                                         r"its undirected edge 1 - 2 as 1 -> 2"):
        score_orientations(chain_score, CHAIN, partial, 10.0)
    with pytest.raises(ValueError, match=r"^cpdag_matrix is not a CPDAG of adjacency: Meek's rules orient"):
        identified_orientations(CHAIN, partial)
    with pytest.raises(ValueError, match=r"^adjacency must be a DAG \(acyclic\)"):
        cycle = CHAIN.copy()
        cycle[2, 0] = 1
        score_orientations(chain_score, cycle, np.maximum(cycle, cycle.T), 10.0)


@pytest.mark.parametrize("score", [object(), len, "bic", np.var])
def test_score_orientations_refuses_what_is_not_a_score(score):
    with pytest.raises(TypeError, match=r"^score must be a LocalScore \(callable as score\(node, parents\) "
                                        r"with a prefetch\(keys\) method"):
        score_orientations(score, CHAIN, cpdag(CHAIN), 10.0)


def test_score_orientations_still_orients_valid_input(chain_score):
    """The checks refuse nothing valid: a CPDAG from cpdag(), with and without mixing sets."""
    for sets in ([], [{2}]):
        known = cpdag(CHAIN, mixing_sets=sets)
        out = score_orientations(chain_score, CHAIN, known, 10.0)
        undirected = (known == 1) & (known.T == 1)
        assert not (out & ~undirected).any()  # only edges the class leaves open
    gain = chain_score(0, [1]) + chain_score(1, []) - chain_score(1, [0]) - chain_score(0, [])
    assert score_orientations(chain_score, CHAIN, cpdag(CHAIN), 10.0)[0, 1] == (gain > 10.0)


# --- spline_basis on a variable with few values ---


@pytest.mark.parametrize("values", [2, 3])
def test_spline_basis_refuses_fewer_than_four_distinct_values(values):
    """[1, basis] had rank `values` for 4 columns, against the docstring's full column rank."""
    x = np.tile(np.arange(values, dtype=float), 20)
    with pytest.raises(ValueError, match=rf"^x has {values} distinct values; a cubic B-spline basis needs at "
                                         r"least 4"):
        spline_basis(x, 0)


@pytest.mark.parametrize("values", [4, 5, 6, 9])
@pytest.mark.parametrize("n_knots", [0, 3, 10])
def test_spline_basis_is_full_rank_from_four_distinct_values(values, n_knots):
    x = np.tile(np.arange(values, dtype=float) ** 1.5, 15)
    design = np.column_stack([np.ones(x.size), spline_basis(x, n_knots)])
    assert np.linalg.matrix_rank(design) == design.shape[1]


def test_spline_callers_fit_a_variable_with_few_values():
    """The callers enter a parent with at most 4 distinct values linearly: a full-rank design, a fit."""
    gen = np.random.default_rng(2)
    for values in (2, 3):
        x = gen.integers(0, values, 400).astype(float)
        y = 1.5 * x + 0.3 * gen.standard_normal(400)
        fit = fit_mixture_regression(y, x, 1, mechanism="spline")
        assert fit.coef.shape == (1, 2)  # intercept and one linear column
        np.testing.assert_allclose(fit.coef[0, 1], 1.5, atol=0.1)


# --- a singular design names the design, not the samples ---


def _two_starts(n):
    resp = np.zeros((n, 2))
    resp[: n // 2, 0] = resp[n // 2 :, 1] = 1.0
    return resp


@pytest.mark.parametrize("column", ["duplicate", "multiple", "zero"])
def test_em_blames_a_singular_design(column):
    gen = np.random.default_rng(0)
    n = 300
    x = gen.standard_normal(n)
    y = x + 0.5 * gen.standard_normal(n)
    extra = {"duplicate": x, "multiple": -3.0 * x, "zero": np.zeros(n)}[column]
    design = np.column_stack([np.ones(n), x, extra])
    with pytest.raises(ValueError, match=r"^the weighted Gram matrix of every component left was singular: "
                                         r"design is rank deficient \(collinear columns.*drop or combine the "
                                         r"collinear columns of design, or pass ridge > 0"):
        mixreg.em(y, design, _two_starts(n), max_iter=10, tol=1e-6, ridge=0.0, min_variance=1e-3)
    with pytest.raises(ValueError, match=r"^a weighted Gram matrix of a group was singular: a design is rank "
                                         r"deficient.*pass ridge > 0"):
        mixreg.joint_em(y[:, None], [design], _two_starts(n), max_iter=10, tol=1e-6, ridge=0.0,
                        min_variance=np.array([1e-3]))
    # the library's ridge makes the same design solvable (a zero column gets the absolute ridge)
    out = mixreg.em(y, design, _two_starts(n), max_iter=10, tol=1e-6, ridge=RIDGE, min_variance=1e-3)
    assert np.all(out["weights"] > 0)


def test_em_still_blames_too_few_samples():
    gen = np.random.default_rng(1)
    n = 6
    design = np.column_stack([np.ones(n), gen.standard_normal(n), gen.standard_normal(n)])
    y = gen.standard_normal(n)
    with pytest.raises(ValueError, match=r"^every mixture component was retired \(fewer than p \+ 1 "
                                         r"effective samples each\)"):
        mixreg.em(y, design, _two_starts(n), max_iter=5, tol=1e-6, ridge=RIDGE, min_variance=1e-3)
    with pytest.raises(ValueError, match=r"^every group was retired \(fewer than p \+ 1 effective samples "
                                         r"each\); use fewer groups or more samples"):
        mixreg.joint_em(y[:, None], [design], _two_starts(n), max_iter=5, tol=1e-6, ridge=RIDGE,
                        min_variance=np.array([1e-3]))


@pytest.mark.parametrize("mechanism", ["linear", "spline"])
def test_fit_mixture_regression_refuses_collinear_regressors(mechanism):
    """The wrapper's ridge hid a singular design: an arbitrary split of the coefficients, and a BIC that
    counted a column the data cannot determine. Now the design is checked and the column named."""
    gen = np.random.default_rng(3)
    n = 400
    x, z = gen.standard_normal(n), gen.standard_normal(n)
    y = x - z + 0.3 * gen.standard_normal(n)
    for X, column in ((np.column_stack([x, 2.0 * x]), 1), (np.column_stack([z, x, x + z]), 2)):
        with pytest.raises(ValueError, match=rf"^X is collinear: its design \[1, X\] has rank .* column "
                                             rf"{column} of X is a combination of the intercept and the "
                                             r"columns before it.*drop or combine the collinear columns"):
            fit_mixture_regression(y, X, 2, mechanism=mechanism)
    assert fit_mixture_regression(y, np.column_stack([x, z]), 2, mechanism=mechanism).coef.shape[0] == 2



# --- batches through an executor only where they pay ---


def test_chunk_count_follows_the_work():
    pool = object()  # any executor
    assert chunk_count(None, 1e15, 100, 8) == 1  # no executor: serial
    assert chunk_count(pool, 0.99 * MIN_BATCH_WORK, 100, 64) == 1  # a batch too small to pay: serial
    assert chunk_count(pool, MIN_BATCH_WORK, 1000, 1000) == round(MIN_BATCH_WORK / CHUNK_WORK)
    assert chunk_count(pool, 5.4 * MIN_BATCH_WORK, 1000, 1000) == round(5.4 * MIN_BATCH_WORK / CHUNK_WORK)
    assert chunk_count(pool, 1e6 * MIN_BATCH_WORK, 100, 8) == 8  # at most max_chunks
    assert chunk_count(pool, 1e6 * MIN_BATCH_WORK, 3, 8) == 3  # at most one item per chunk


def test_a_pool_of_the_fit_starts_only_for_a_batch_that_pays_for_its_workers():
    with ThreadPoolExecutor(1) as threads:
        pool = StartingPool(threads)
        assert chunk_count(pool, 0.99 * START_WORK, 1000, 1000) == 1  # not worth starting the workers
        assert not pool.started
        n_chunks = chunk_count(pool, START_WORK, 1000, 1000)
        assert n_chunks == round(START_WORK / CHUNK_WORK)
        assert map_chunks(_squares, list(range(7)), 3, pool) == [i * i for i in range(7)]
        assert pool.started  # running now: a batch from MIN_BATCH_WORK goes to it
        assert chunk_count(pool, MIN_BATCH_WORK, 1000, 1000) == round(MIN_BATCH_WORK / CHUNK_WORK)


def test_em_work_grows_with_rows_columns_and_components():
    base = em_work(1000, [3], range(1, 4))
    assert base == 1000 * 16 * 6
    assert em_work(2000, [3], range(1, 4)) == 2 * base
    assert em_work(1000, [3, 3], range(1, 4)) == 2 * base
    assert em_work(1000, [7], range(1, 4)) == 4 * base
    assert em_work(1000, [3], range(1, 4), joint=True) == JOINT_WORK * base


def test_map_chunks_keeps_the_input_order():
    items = list(range(23))
    with ThreadPoolExecutor(2) as pool:
        for n_chunks in (1, 2, 5, 23):
            assert map_chunks(_squares, items, n_chunks, pool) == [i * i for i in items]


def _squares(chunk):
    return [i * i for i in chunk]


# --- summary() flags the documented caveats its fit meets ---


def _chain(root_noise, n=1000, seed=0):
    gen = np.random.default_rng(seed)
    x0 = root_noise(gen, n)
    x1 = 0.8 * x0 + 0.6 * gen.standard_normal(n)
    return np.column_stack([x0, x1, 0.8 * x1 + 0.6 * gen.standard_normal(n)])


def _caveats(model):
    return [line for line in model.summary().splitlines() if line.startswith("caveat: ")]


def test_summary_flags_a_root_switched_by_a_latent_of_its_own():
    """docs/causal.md, Caveats: uniform noise inflates K. A uniform root was reported as switching
    between three groups, and its latent oriented both edges by Meek's rules, with no word of doubt."""
    model = CausalMixtureModel(rng=0).fit(_chain(lambda gen, n: gen.uniform(-1.7, 1.7, n)))
    assert model.mixing_sets_ == [frozenset({0})] and model.n_components_[0] > 1
    (line,) = _caveats(model)
    K = model.n_components_[0]
    assert line.startswith(f"caveat: x0 has no parents and Z0 switches it alone (K = {K})")
    assert "non-Gaussian noise (uniform, skewed, heavy-tailed)" in line
    gaussian = CausalMixtureModel(rng=0).fit(_chain(lambda gen, n: gen.standard_normal(n)))
    assert gaussian.mixing_sets_ == [] and _caveats(gaussian) == []


def test_summary_flags_a_latent_at_the_cap_of_its_groups():
    """docs/causal.md, Caveats: a K at max_groups (max_components by default) may be the cap, not the data."""
    gen = np.random.default_rng(1)
    n = 900
    z = np.repeat([0, 1, 2], n // 3)
    x0 = gen.standard_normal(n)
    x1 = np.array([-6.0, 0.0, 6.0])[z] + x0 + 0.5 * gen.standard_normal(n)  # three groups, one parent
    X = np.column_stack([x0, x1])
    capped = CausalMixtureModel(rng=0, max_components=2).fit(X)
    assert capped.n_components_.max() == 2
    cap_line = "caveat: Z0 has K = 2 groups, the most max_groups allows"
    assert any(line.startswith(cap_line) for line in _caveats(capped))
    free = CausalMixtureModel(rng=0, max_components=5).fit(X)
    assert free.n_components_.max() == 3 and not any("max_groups allows" in line for line in _caveats(free))
    grouped = CausalMixtureModel(rng=0, max_components=5, max_groups=3).fit(X)
    assert any(line.startswith("caveat: Z0 has K = 3 groups") for line in _caveats(grouped))


def _two_groups(n, seed=2):
    gen = np.random.default_rng(seed)
    x0 = gen.standard_normal(n)
    x1 = np.where(np.arange(n) < n // 2, 4.0, -4.0) + x0 + 0.5 * gen.standard_normal(n)
    return np.column_stack([x0, x1])


def test_summary_flags_mixing_on_few_samples():
    """docs/causal.md, Caveats: below about 100 samples spurious mixing is frequent."""
    few = CausalMixtureModel(rng=0, max_components=3).fit(_two_groups(80))
    assert few.mixing_sets_
    assert "caveat: 80 samples: below about 100 spurious mixing variables are frequent" in few.summary()
    enough = CausalMixtureModel(rng=0, max_components=3).fit(_two_groups(200))
    assert enough.mixing_sets_ and "samples: below about" not in enough.summary()
