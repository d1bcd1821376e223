import itertools

import numpy as np
import pytest

from certkit.causal import CausalMixtureModel, LatentBIC, ScoreSettings, ari, make_mixture_sem, topic_search
from certkit.causal.search import refine_parents


class PlainGaussianBIC:
    """Independent linear-Gaussian BIC (least squares by numpy.linalg.lstsq): -2 loglik + (p + 1) log n."""

    def __init__(self, X):
        self.X = X
        self.calls = 0

    def __call__(self, node, parents):
        parents = sorted(parents)
        n = self.X.shape[0]
        design = np.column_stack([np.ones(n), self.X[:, parents]])
        coef, *_ = np.linalg.lstsq(design, self.X[:, node], rcond=None)
        var = np.mean((self.X[:, node] - design @ coef) ** 2)
        self.calls += 1
        return n * (np.log(2 * np.pi * var) + 1.0) + (len(parents) + 2) * np.log(n)

    def prefetch(self, keys):
        pass


def standardise(X):
    return (X - X.mean(axis=0)) / X.std(axis=0)


def chain_with_two_mechanisms(n=1000, noise=0.1, seed=0):
    """X1 -> X2 -> X3 with X3 = +X2 (z = 0) or -X2 + 3 (z = 1)."""
    gen = np.random.default_rng(seed)
    z = gen.integers(0, 2, n)
    x1 = gen.normal(size=n)
    x2 = 0.8 * x1 + 0.6 * gen.normal(size=n)
    x3 = np.where(z == 0, x2, -x2 + 3.0) + noise * gen.normal(size=n)
    return np.column_stack([x1, x2, x3]), z


def two_shifted_nodes(n=1000, *, shared, seed=0):
    """X0 -> X1 and X2 -> X3; X1 and X3 shift by 3 with one shared Z or with two independent Zs."""
    gen = np.random.default_rng(seed)
    z1 = gen.integers(0, 2, n)
    z2 = z1 if shared else gen.integers(0, 2, n)
    x0, x2 = gen.normal(size=n), gen.normal(size=n)
    x1 = 0.8 * x0 + 0.5 * gen.normal(size=n) + 3.0 * z1
    x3 = -0.7 * x2 + 0.5 * gen.normal(size=n) + 3.0 * z2
    return np.column_stack([x0, x1, x2, x3]), np.column_stack([z1, z2])


def test_k1_score_is_the_plain_gaussian_bic():
    X, _, _ = make_mixture_sem(5, 300, rng=1)
    latent = LatentBIC(X, ScoreSettings(max_components=1))
    plain = PlainGaussianBIC(X)
    for node, parents in [(0, ()), (1, (0,)), (4, (0, 2, 3)), (2, (4, 1))]:
        assert latent(node, parents) == pytest.approx(plain(node, parents), rel=1e-10)


def test_a_spline_score_whose_parents_enter_linearly_is_the_linear_score():
    """Where the knot rule enters every parent linearly the spline design is the linear one, and so are
    the EM starts and fits: the same BIC and K bit for bit, which is what lets LatentBIC share them."""
    from certkit.causal.score import fit_node
    from certkit.causal.spline import LINEAR, NodeDesigns

    X, _, _ = make_mixture_sem(5, 400, 0.5, 2, mixing_size=2, rng=4)
    linear, spline = ScoreSettings(seed=5), ScoreSettings(seed=5, mechanism="spline")
    designs = NodeDesigns(X, "spline", "bic")
    compared = 0
    for node in range(5):
        for parents in itertools.chain.from_iterable(
            itertools.combinations([v for v in range(5) if v != node], r) for r in range(3)
        ):
            if all(designs.knots(p)[node] == LINEAR for p in parents):
                a = fit_node(X, node, parents, linear)
                b = fit_node(X, node, parents, spline, designs=designs)
                assert (a.bic, a.n_components) == (b.bic, b.n_components)
                np.testing.assert_array_equal(a.responsibilities, b.responsibilities)
                compared += 1
    assert compared >= 20


def test_latent_bic_shares_scores_of_the_same_data_and_settings():
    X, _, _ = make_mixture_sem(5, 300, 0.5, 2, mixing_size=2, rng=4)
    linear, spline = ScoreSettings(max_components=2), ScoreSettings(max_components=2, mechanism="spline")
    store: dict = {}
    first = LatentBIC(X, linear, shared_scores=store)
    keys = [(0, ()), (1, (0,)), (2, (0, 1)), (3, (1, 2))]
    first.prefetch(keys)
    assert first.n_evaluations == 4 and len(store) == 4
    again = LatentBIC(X, linear, shared_scores=store)  # read, not computed
    assert [again(*k) for k in keys] == [first(*k) for k in keys] and again.n_evaluations == 0
    other = LatentBIC(X + 1e-3 * np.arange(5), linear, shared_scores=store)  # other data: computed
    other.prefetch(keys)
    assert other.n_evaluations == 4
    # a spline score reads the linear one only where every parent enters linearly
    curved = LatentBIC(X, spline, shared_scores=store)
    read = [k for k in keys if all(curved.designs.knots(p)[k[0]] == -1 for p in k[1])]
    assert (0, ()) in read and len(read) < len(keys)  # no parents: linear; some parent curved here
    curved.prefetch(keys)
    assert curved.n_evaluations == len(keys) - len(read)
    alone = LatentBIC(X, spline)
    assert [curved(*k) for k in keys] == [alone(*k) for k in keys]
    reseeded = LatentBIC(X, ScoreSettings(max_components=2, seed=1), shared_scores=store)  # other starts
    reseeded.prefetch(keys)
    assert reseeded.n_evaluations == 4
    # the scores are those of the values given: a later change to the caller's array reads nothing
    changed = X.copy()
    late = LatentBIC(changed, linear, shared_scores=store)
    changed[:, 1] **= 3
    assert late(1, (0,)) == first(1, (0,)) and late.n_evaluations == 0
    with pytest.raises(TypeError, match="shared_scores must be a dict or None"):
        LatentBIC(X, linear, shared_scores=[])


def test_score_settings_hold_python_floats():
    """A float32 tolerance equals the float64 one under NumPy's comparison but is another number: the
    settings keep Python floats, so equal settings fit with equal numbers (and hash alike)."""
    a, b = ScoreSettings(tol=np.float32(1e-5)), ScoreSettings(tol=1e-5)
    assert type(a.tol) is float and a.tol == float(np.float32(1e-5)) and a != b
    assert ScoreSettings(min_variance=np.float64(1e-3)) == ScoreSettings() and hash(
        ScoreSettings(min_variance=np.float64(1e-3))
    ) == hash(ScoreSettings())


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_k1_model_equals_plain_linear_gaussian_bic_search(seed):
    X, _, _ = make_mixture_sem(6, 400, rng=seed)
    model = CausalMixtureModel(max_components=1, mechanism="linear", rng=0).fit(X)
    plain = topic_search(PlainGaussianBIC(standardise(X)), 6)
    np.testing.assert_array_equal(model.adjacency_, plain.adjacency)
    assert model.order_ == plain.order
    assert np.all(model.n_components_ == 1) and np.all(model.labels_ == 0)
    assert model.mixing_sets_ == []


def _acyclic(A):
    M = A.copy()
    for _ in range(A.shape[0]):
        if np.trace(M):
            return False
        M = M @ A
    return True


def test_k1_finds_the_brute_force_bic_optimum_of_a_v_structure():
    gen = np.random.default_rng(0)
    n = 2000
    x0, x1 = gen.normal(size=n), gen.normal(size=n)
    x2 = 0.9 * x0 - 0.8 * x1 + 0.5 * gen.normal(size=n)
    X = np.column_stack([x0, x1, x2])
    plain = PlainGaussianBIC(standardise(X))
    dags = [np.array(bits).reshape(3, 3) for bits in itertools.product((0, 1), repeat=9)]
    dags = [A for A in dags if np.trace(A) == 0 and _acyclic(A)]
    assert len(dags) == 25
    scores = [sum(plain(j, np.flatnonzero(A[:, j])) for j in range(3)) for A in dags]
    best = np.argsort(scores)
    assert scores[best[1]] > scores[best[0]] + 1.0  # unique optimum: the v-structure is identifiable
    model = CausalMixtureModel(max_components=1, rng=0).fit(X)
    np.testing.assert_array_equal(model.adjacency_, dags[best[0]])
    np.testing.assert_array_equal(model.adjacency_, [[0, 0, 1], [0, 0, 1], [0, 0, 0]])


def test_three_node_chain_with_two_mechanisms():
    X, z = chain_with_two_mechanisms()
    model = CausalMixtureModel(rng=0).fit(X)
    assert model.n_components_.tolist() == [1, 1, 2]
    assert ari(z, model.labels_[:, 2]) >= 0.9
    assert ari(1 - z, model.labels_[:, 2]) >= 0.9  # label-permutation invariant
    assert model.mixing_sets_ == [frozenset({2})]
    assert ari(z, model.group_labels_[:, 0]) >= 0.9
    # the edge X2 -> X3 is found (its direction is what the mixture identifies)
    assert model.adjacency_[1, 2] == 1 and model.adjacency_[2, 1] == 0


@pytest.mark.parametrize("seed", [0, 1])
def test_no_mixing_gives_one_mechanism_per_node(seed):
    X, _, _ = make_mixture_sem(6, 1000, n_mixing=0, rng=seed)
    model = CausalMixtureModel(rng=0).fit(X)
    assert np.all(model.n_components_ == 1)
    assert model.mixing_sets_ == [] and model.group_labels_.shape == (1000, 0)


@pytest.mark.parametrize("seed", [0, 1])
def test_one_shared_z_gives_one_mixing_set_two_independent_zs_give_two(seed):
    X, Z = two_shifted_nodes(shared=True, seed=seed)
    model = CausalMixtureModel(rng=0).fit(X)
    assert model.mixing_sets_ == [frozenset({1, 3})]
    assert ari(Z[:, 0], model.group_labels_[:, 0]) > 0.9
    X, Z = two_shifted_nodes(shared=False, seed=seed)
    model = CausalMixtureModel(rng=0).fit(X)
    assert model.mixing_sets_ == [frozenset({1}), frozenset({3})]
    assert ari(Z[:, 0], model.group_labels_[:, 0]) > 0.9
    assert ari(Z[:, 1], model.group_labels_[:, 1]) > 0.9


def test_scores_are_memoised_and_order_independent():
    X, _, _ = make_mixture_sem(5, 300, rng=3)
    a = LatentBIC(X, ScoreSettings(seed=4))
    b = LatentBIC(X, ScoreSettings(seed=4))
    keys = [(j, ps) for j in range(5) for ps in [(), ((j + 1) % 5,), ((j + 1) % 5, (j + 2) % 5)]]
    a.prefetch(keys)
    for node, parents in reversed(keys):
        assert b(node, parents[::-1]) == a(node, parents)
    assert a.n_evaluations == b.n_evaluations == len(keys)


def test_refinement_keeps_smallest_subset_within_threshold():
    table = {(): 10.0, (0,): 5.0, (1,): 7.0, (0, 1): 4.5}

    class Table:
        def __call__(self, node, parents):
            return table[tuple(sorted(parents))]

        def prefetch(self, keys):
            list(keys)

    assert refine_parents(Table(), 2, [0, 1], threshold=1.0) == {0}
    assert refine_parents(Table(), 2, [0, 1], threshold=0.1) == {0, 1}
    assert refine_parents(Table(), 2, [0, 1], threshold=6.0) == set()
    assert refine_parents(Table(), 2, [0, 1], threshold=1.0, max_exhaustive=0) == {0}
