import numpy as np
import pytest

from certkit.causal import ami, ari, edge_f1, edge_precision, edge_recall, make_mixture_sem, shd

TRUE = np.array([[0, 1, 1, 0], [0, 0, 0, 1], [0, 0, 0, 1], [0, 0, 0, 0]])  # 0->1, 0->2, 1->3, 2->3


def test_graph_metrics_by_hand():
    est = np.array([[0, 1, 0, 0], [0, 0, 0, 0], [1, 0, 0, 1], [0, 1, 0, 0]])  # 0->1, 2->0, 2->3, 3->1
    # pairs: (0,1) same; (0,2) reversed; (1,3) reversed; (2,3) same -> SHD 2
    assert shd(TRUE, est) == 2
    assert shd(TRUE, TRUE) == 0 and shd(TRUE, np.zeros((4, 4), int)) == 4
    assert shd(TRUE, TRUE + TRUE.T) == 4  # each edge doubled counts once per pair
    # directed: TP = {0->1, 2->3} = 2, FP = 2, FN = 2
    assert edge_precision(TRUE, est) == 0.5 and edge_recall(TRUE, est) == 0.5
    assert edge_f1(TRUE, est) == 0.5
    assert edge_f1(TRUE, TRUE) == 1.0 and edge_f1(TRUE, np.zeros((4, 4), int)) == 0.0
    assert edge_precision(TRUE, np.zeros((4, 4), int)) == 1.0
    assert edge_f1(TRUE, TRUE.astype(bool)) == 1.0


def test_group_metrics_are_permutation_invariant():
    z = np.array([0, 0, 1, 1, 2, 2])
    assert ari(z, [5, 5, 3, 3, 4, 4]) == pytest.approx(1.0)
    assert ami(z, [1, 1, 2, 2, 0, 0]) == pytest.approx(1.0)
    assert ari(z, [0, 1, 0, 1, 0, 1]) < 0.0
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        ari(z, [0, 1])


def test_metric_inputs_are_checked():
    with pytest.raises(ValueError, match="square"):
        shd(np.zeros((2, 3)), np.zeros((2, 3)))
    with pytest.raises(ValueError, match=r"estimate must have shape \(4, 4\)"):
        edge_f1(TRUE, np.zeros((3, 3)))
    with pytest.raises(ValueError, match="only 0 and 1"):
        edge_f1(TRUE, 2 * TRUE)
    with pytest.raises(TypeError, match="labels_pred must contain integers"):
        ami([0, 1], [0.5, 1.0])


def test_generator_structure_and_determinism():
    X, A, Z, sets = make_mixture_sem(8, 400, 0.5, 3, n_mixing=2, mixing_size=2, rng=4, return_sets=True)
    assert X.shape == (400, 8) and A.shape == (8, 8) and Z.shape == (400, 2)
    np.testing.assert_allclose(X.mean(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(X.std(axis=0), 1.0)
    assert set(np.unique(Z)) == {0, 1, 2}
    assert len(sets) == 2 and all(len(s) == 2 for s in sets) and not (sets[0] & sets[1])
    M = A.copy()  # acyclic: no power of A has a non-zero trace
    for _ in range(8):
        assert np.trace(M) == 0
        M = M @ A
    again = make_mixture_sem(8, 400, 0.5, 3, n_mixing=2, mixing_size=2, rng=4)
    np.testing.assert_array_equal(X, again[0])
    assert not np.array_equal(X, make_mixture_sem(8, 400, 0.5, 3, n_mixing=2, mixing_size=2, rng=5)[0])


def test_generator_mechanisms_switch_with_the_groups():
    # a two-node graph 0 -> 1 with node 1 switched: the within-group slopes have opposite signs
    for seed in range(20):
        X, A, Z, sets = make_mixture_sem(2, 4000, 1.0, 2, mixing_size=1, rng=seed, return_sets=True)
        if A.sum() == 1 and sets[0] == {int(np.flatnonzero(A.sum(axis=0))[0])}:
            break
    child = int(np.flatnonzero(A.sum(axis=0))[0])
    parent = 1 - child
    slopes = [np.polyfit(X[Z[:, 0] == g, parent], X[Z[:, 0] == g, child], 1)[0] for g in (0, 1)]
    assert slopes[0] * slopes[1] < 0
    means = [X[Z[:, 0] == g, child].mean() for g in (0, 1)]
    assert abs(means[0] - means[1]) > 0.5


def test_no_mixing_and_empty_graph():
    X, A, Z = make_mixture_sem(4, 100, 0.0, n_mixing=0, rng=0)
    assert A.sum() == 0 and Z.shape == (100, 0)
    assert np.all(np.abs(np.corrcoef(X.T) - np.eye(4)) < 0.35)


def test_generator_rejects_bad_arguments():
    with pytest.raises(ValueError, match="n_mixing \\* mixing_size must be <= n_nodes"):
        make_mixture_sem(4, 100, n_mixing=2, mixing_size=3)
    with pytest.raises(ValueError, match="edge_prob must lie in"):
        make_mixture_sem(4, 100, 1.5)
    with pytest.raises(ValueError, match="n_groups must be >= 2"):
        make_mixture_sem(4, 100, 0.3, 1)
    with pytest.raises(ValueError, match="noise_scale must be > 0"):
        make_mixture_sem(4, 100, noise_scale=0.0)


def test_metrics_reject_self_loops_naming_the_argument():
    loop = np.eye(3, dtype=int)
    with pytest.raises(ValueError, match="true has a self-loop"):
        shd(loop, np.zeros((3, 3)))
    with pytest.raises(ValueError, match="estimate has a self-loop"):
        edge_f1(np.zeros((3, 3)), loop)


def test_group_weights_retries_keep_the_sign_flip():
    from certkit.causal.generate import _group_weights

    gen = np.random.default_rng(0)
    previous = [np.full(20, 1.0), np.full(20, -1.0), np.full(20, 1.5)]
    for _ in range(20):
        new = _group_weights(gen, previous)
        assert np.all(np.sign(new) == -np.sign(previous[-1]))
