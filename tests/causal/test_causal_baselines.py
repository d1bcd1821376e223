import numpy as np
import pytest

from certkit.causal import CausalMixtureModel, edge_f1, make_mixture_sem
from certkit.causal.baselines import cpdag_adjacency, run_direct_lingam, run_ges, run_pc

pytest.importorskip("causallearn")


def test_cpdag_conversion_by_hand():
    G = np.zeros((3, 3), int)
    G[1, 0], G[0, 1] = 1, -1  # 0 -> 1
    G[1, 2] = G[2, 1] = -1  # 1 -- 2
    np.testing.assert_array_equal(cpdag_adjacency(G), [[0, 1, 0], [0, 0, 1], [0, 1, 0]])


def test_baselines_find_a_v_structure():
    gen = np.random.default_rng(0)
    n = 2000
    x0, x1 = gen.uniform(-1, 1, n), gen.uniform(-1, 1, n)
    x2 = x0 - x1 + 0.3 * gen.uniform(-1, 1, n)
    X = np.column_stack([x0, x1, x2])
    v = [[0, 0, 1], [0, 0, 1], [0, 0, 0]]
    np.testing.assert_array_equal(run_ges(X), v)
    np.testing.assert_array_equal(run_pc(X), v)
    np.testing.assert_array_equal(run_direct_lingam(X), v)


@pytest.mark.slow
def test_cmm_beats_ges_and_pc_on_the_synthetic_benchmark():
    """The spec's oracle: mean edge F1 over generator seeds (defaults: d = 10, n = 500, one Z on 3 nodes)."""
    f1 = {"cmm": [], "ges": [], "pc": []}
    for seed in range(5):
        X, A, _ = make_mixture_sem(rng=seed)
        f1["cmm"].append(edge_f1(A, CausalMixtureModel(rng=seed).fit(X).adjacency_))
        f1["ges"].append(edge_f1(A, run_ges(X)))
        f1["pc"].append(edge_f1(A, run_pc(X)))
    means = {k: np.mean(v) for k, v in f1.items()}
    assert means["cmm"] > means["ges"] and means["cmm"] > means["pc"], means
