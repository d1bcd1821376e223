"""Identified orientations against the equivalence class enumerated by brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from certkit.causal import CausalMixtureModel, cpdag, identified_orientations
from certkit.causal.orient import covered_parents


def _v_structures(G: np.ndarray) -> set[tuple[int, int, int]]:
    adjacent = G | G.T
    out = set()
    for c in range(G.shape[0]):
        parents = np.flatnonzero(G[:, c])
        for a, b in itertools.combinations(parents, 2):
            if not adjacent[a, b]:
                out.add((int(a), int(b), int(c)))
    return out


def _acyclic(G: np.ndarray) -> bool:
    G = G.copy()
    alive = np.ones(G.shape[0], dtype=bool)
    while alive.any():
        sources = [v for v in np.flatnonzero(alive) if not G[alive, v].any()]
        if not sources:
            return False
        alive[sources] = False
    return True


def _members(A: np.ndarray, sets: list[list[int]]) -> list[np.ndarray]:
    """Brute force: every orientation of the augmented skeleton with the same v-structures, acyclic, and
    each mixing variable a source; each member's observed part."""
    d = A.shape[0]
    D = d + len(sets)
    G = np.zeros((D, D), dtype=bool)
    G[:d, :d] = A.astype(bool)
    for m, s in enumerate(sets):
        G[d + m, s] = True
    target = _v_structures(G)
    free = [(int(i), int(j)) for i, j in zip(*np.nonzero(np.triu(A | A.T)))]
    members = []
    for flips in itertools.product((False, True), repeat=len(free)):
        H = G.copy()
        H[:d, :d] = False
        for (i, j), flip in zip(free, flips):
            a, b = (j, i) if flip else (i, j)
            H[a, b] = True
        if _acyclic(H) and _v_structures(H) == target:
            members.append(H[:d, :d])
    return members


def _class_orientations(A: np.ndarray, sets: list[list[int]]) -> np.ndarray:
    """1 where the observed edge i -> j holds in every member, and 1 in both directions where members
    disagree."""
    return np.logical_or.reduce(_members(A, sets)).astype(np.int64)


def _random_dag(gen: np.random.Generator, d: int, p: float) -> np.ndarray:
    order = gen.permutation(d)
    A = np.zeros((d, d), dtype=np.int64)
    for a, b in itertools.combinations(range(d), 2):
        if gen.uniform() < p:
            A[order[a], order[b]] = 1
    return A


@pytest.mark.parametrize("seed", range(60))
def test_cpdag_equals_the_enumerated_class(seed):
    gen = np.random.default_rng(seed)
    d = 4 + seed % 2  # 4 or 5 nodes
    A = _random_dag(gen, d, 0.5)
    n_sets = seed % 3
    nodes = gen.permutation(d)
    sets = [sorted(int(v) for v in nodes[m :: max(n_sets, 1)][: 1 + (seed + m) % 2]) for m in range(n_sets)]
    expected = _class_orientations(A, sets)
    got = cpdag(A, mixing_sets=sets)
    np.testing.assert_array_equal(got, expected)
    # identified_ marks exactly the edges whose orientation every member shares (sound and complete).
    ident = identified_orientations(A, got)
    for i, j in zip(*np.nonzero(A)):
        assert ident[i, j] == (expected[j, i] == 0)
    assert not ident[A == 0].any()
    # score_orientations tests an undirected edge i - j where it is covered: some member has
    # pa(i) = D and pa(j) = D + {i}, D the directed parents i and j share in the CPDAG.
    members = [[tuple(np.flatnonzero(H[:, v]).tolist()) for v in range(d)] for H in _members(A, sets)]
    for i, j in zip(*np.nonzero(got & got.T)):
        shared = covered_parents(got, int(i), int(j))
        assert shared is not None
        assert (tuple(sorted(shared)), tuple(sorted(shared | {int(i)}))) in {
            (pa[i], pa[j]) for pa in members
        }


def test_hand_cases():
    chain = np.array([[0, 1, 0], [0, 0, 1], [0, 0, 0]])
    # A chain alone: nothing identified.
    assert not identified_orientations(chain, cpdag(chain)).any()
    # A latent switching the last node: Z -> 2 <- 1 is a v-structure, then 0 - 1 stays open.
    ident = identified_orientations(chain, cpdag(chain, mixing_sets=[{2}]))
    assert ident.tolist() == [[False, False, False], [False, False, True], [False, False, False]]
    # A latent switching the middle node orients 0 -> 1 (v-structure), then 1 -> 2 by Meek's rule 1.
    ident = identified_orientations(chain, cpdag(chain, mixing_sets=[{1}]))
    assert ident[0, 1] and ident[1, 2]
    # A collider is identified without any latent.
    collider = np.array([[0, 0, 1], [0, 0, 1], [0, 0, 0]])
    assert identified_orientations(collider, cpdag(collider)).sum() == 2


@pytest.mark.parametrize(
    ("adjacency", "match"),
    [
        (np.ones((2, 3)), "square"),
        (np.array([[0, 2], [0, 0]]), "0 and 1"),
        (np.array([[0, 1], [1, 0]]), "DAG"),
        (np.array([[0, 1, 0], [0, 0, 1], [1, 0, 0]]), "cycle"),
    ],
)
def test_bad_adjacency(adjacency, match):
    with pytest.raises(ValueError, match=match):
        cpdag(adjacency)


def test_bad_mixing_set():
    with pytest.raises(ValueError, match="mixing_sets"):
        cpdag(np.zeros((3, 3)), mixing_sets=[{3}])


def test_the_estimator_reports_identified_orientations():
    gen = np.random.default_rng(0)
    n = 1500
    z = gen.integers(0, 2, n)
    x0 = gen.standard_normal(n)
    x1 = 0.8 * x0 + 0.6 * gen.standard_normal(n)
    x2 = np.where(z == 1, -0.8 * x1 + 3.0, 0.8 * x1) + 0.6 * gen.standard_normal(n)
    model = CausalMixtureModel(max_components=3, rng=0).fit(np.column_stack([x0, x1, x2]))
    assert model.mixing_sets_ == [frozenset({2})]
    np.testing.assert_array_equal(model.cpdag_, cpdag(model.adjacency_, mixing_sets=model.mixing_sets_))
    np.testing.assert_array_equal(model.identified_, identified_orientations(model.adjacency_, model.cpdag_))
    # The mixing variable orients the edge into x2; the edge between x0 and x1 stays arbitrary.
    assert model.adjacency_[1, 2] == 1 and model.identified_[1, 2]
    assert model.adjacency_[0, 1] + model.adjacency_[1, 0] == 1
    assert not model.identified_[0, 1] and not model.identified_[1, 0]
    assert "identified" in model.summary()


def test_plot_draws_unidentified_orientations_without_arrowheads():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from certkit.plot import plot_causal_graph

    chain = np.array([[0, 1, 0], [0, 0, 1], [0, 0, 0]])
    ident = identified_orientations(chain, cpdag(chain, mixing_sets=[{2}]))  # only 1 -> 2
    fig, ax = plt.subplots()
    plot_causal_graph(chain, identified=ident, ax=ax)
    styles = [type(t.arrow_patch.get_arrowstyle()).__name__ for t in ax.texts if t.get_text() == ""]
    assert styles == ["Curve", "CurveFilledB"]  # 0 - 1 a plain line, 1 -> 2 an arrow
    plt.close(fig)
    with pytest.raises(ValueError, match="identified"):
        plot_causal_graph(chain, identified=np.ones((2, 2), bool))


@pytest.mark.parametrize(
    ("mixing_sets", "error", "match"),
    [
        ([[1.7]], TypeError, "mixing_sets must be an integer"),
        ([["1"]], TypeError, "mixing_sets must be an integer"),
        (["12"], TypeError, "sequence of node sets"),
        ([0, 1], TypeError, "sequence of node sets"),
        (None, TypeError, "mixing_sets must be a sequence"),
        ([[True]], TypeError, "mixing_sets must be an integer"),
    ],
)
def test_mixing_sets_are_checked_not_coerced(mixing_sets, error, match):
    """Review finding: 1.7 was truncated to 1, "12" read as nodes {1, 2}, True as 1."""
    with pytest.raises(error, match=match):
        cpdag(np.array([[0, 1, 0], [0, 0, 1], [0, 0, 0]]), mixing_sets=mixing_sets)


def test_bool_adjacency_and_checked_cpdag_matrix():
    chain = np.array([[0, 1, 0], [0, 0, 1], [0, 0, 0]])
    np.testing.assert_array_equal(cpdag(chain.astype(bool)), cpdag(chain))
    with pytest.raises(ValueError, match="cpdag_matrix must have shape"):
        identified_orientations(chain, np.zeros((2, 2)))
    with pytest.raises(ValueError, match="cpdag_matrix must hold only 0 and 1"):
        identified_orientations(chain, np.full((3, 3), 7))
