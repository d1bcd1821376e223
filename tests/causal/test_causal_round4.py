"""Issue 30: causal discovery, round 4 of first use and fuzzing (quiet failures, misleading errors, sizes)."""

from __future__ import annotations

import numpy as np
import pytest

from certkit.causal import cpdag, identified_orientations

CHAIN = np.array([[0, 1, 0], [0, 0, 1], [0, 0, 0]])
COLL = np.array([[0, 1, 0], [0, 0, 0], [0, 1, 0]])


# --- item 4: a CPDAG inconsistent with the DAG ---


def test_identified_orientations_refuses_a_cpdag_of_another_dag():
    with pytest.raises(ValueError, match=r"^cpdag_matrix is not a CPDAG of adjacency: it has the reverse of "
                                         r"the DAG's edge between nodes 1 and 2"):
        identified_orientations(CHAIN, cpdag(COLL))
    with pytest.raises(ValueError, match=r"cpdag_matrix is not a CPDAG of adjacency: it has no edge where "
                                         r"the DAG has one between nodes 0 and 1"):
        identified_orientations(CHAIN, np.zeros((3, 3), int))
    with pytest.raises(ValueError, match=r"it has an edge the DAG lacks between nodes 0 and 2"):
        identified_orientations(CHAIN, cpdag(CHAIN) + np.array([[0, 0, 1], [0, 0, 0], [1, 0, 0]]))
    assert identified_orientations(COLL, cpdag(COLL)).sum() == 2


# --- item 12: cpdag's time and memory ---


def test_cpdag_of_a_complete_dag_of_300_nodes():
    """94 s before, about 0.5 s now (measured, not asserted: no timed assertions in tests)."""
    A = np.triu(np.ones((300, 300), int), 1)
    out = cpdag(A, mixing_sets=[[150]])
    # Z -> 150 <- i for every i < 150, then 150 -> j and i -> j for j > 150; the rest stays undirected
    directed = (out == 1) & (out.T == 0)
    assert directed[:150, 150].all() and directed[150, 151:].all() and directed[:150, 151:].all()
    assert not directed[:150, :150].any() and not directed[151:, 151:].any()


def test_cpdag_refuses_huge_graphs_before_copying():
    with pytest.raises(ValueError, match=r"^adjacency has shape \(20000, 20000\); cpdag handles graphs of "
                                         r"up to 1000 nodes"):
        cpdag(np.zeros((20000, 20000), np.int8))
    subsets = [[j for j in range(10) if (k >> j) & 1] for k in range(1, 2**10)]  # 1023 distinct sets
    with pytest.raises(ValueError, match=r"^mixing_sets has more than 980 distinct sets; with the 20 nodes"):
        cpdag(np.zeros((20, 20), int), mixing_sets=subsets)


def test_equal_mixing_sets_count_once():
    many = cpdag(CHAIN, mixing_sets=[[0]] * 10**6)  # tried to allocate 931 GiB before
    np.testing.assert_array_equal(many, cpdag(CHAIN, mixing_sets=[[0]]))


# --- items 6 and 11: what certkit causal reads ---


def _table(n=60, seed=0):
    X = np.random.default_rng(seed).normal(size=(n, 3))
    return "a,b,c\n" + "\n".join(",".join(f"{v:.6f}" for v in row) for row in X) + "\n"


def test_cli_reads_a_utf8_file_with_a_byte_order_mark(tmp_path):
    from certkit.datasets._base import read_numeric_csv

    path = tmp_path / "bom.csv"
    path.write_bytes(_table().encode("utf-8-sig"))
    X, names = read_numeric_csv(str(path), how="")
    assert names == ["a", "b", "c"] and X.shape == (60, 3)  # the first name was "\ufeffa"


@pytest.mark.parametrize(("encoding", "kind"), [
    ("utf-16", r"UTF-16 text: re-save it as UTF-8"),
    ("latin-1", r"text in another encoding than UTF-8, such as latin-1 or cp1252: re-save it as UTF-8"),
])
def test_cli_says_to_resave_other_encodings_as_utf8(tmp_path, capsys, encoding, kind):
    from certkit.cli import main

    path = tmp_path / "data.csv"
    path.write_bytes(_table().replace("a,b,c", "a,b,é").encode(encoding))
    assert main(["causal", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith(f"certkit causal: error: {path} is not a UTF-8 text CSV file ({kind})")


# --- items 9, 10 and 11: errors that name the cause ---


@pytest.fixture(scope="module")
def sem():
    from certkit.causal import make_mixture_sem

    X, _, _ = make_mixture_sem(4, 200, rng=0)
    return X


def test_sparse_input_says_sparse_is_not_supported(sem):
    import scipy.sparse as sp

    from certkit.causal import CausalMixtureModel

    with pytest.raises(TypeError, match=r"^X is a scipy.sparse csr_matrix; sparse input is not supported: "
                                        r"pass a dense array \(X.toarray\(\)"):
        CausalMixtureModel().fit(sp.csr_matrix(sem))


def test_one_row_says_too_few_samples(sem, tmp_path, capsys):
    from certkit.causal import CausalMixtureModel
    from certkit.cli import main

    with pytest.raises(ValueError, match=r"^X has 1 sample: too few samples"):
        CausalMixtureModel().fit(sem[:1])
    path = tmp_path / "one_row.csv"
    path.write_text("a,b,c\n1,2,3\n")
    assert main(["causal", str(path)]) == 2
    assert capsys.readouterr().err.strip() == (
        "certkit causal: error: X has 1 sample: too few samples to fit a mechanism (a variance needs 2, a "
        "mixture of regressions on the other variables many more)")


def test_fit_joint_mixture_bad_parents_and_starts(sem):
    from certkit.causal import fit_joint_mixture

    with pytest.raises(TypeError, match=r"^parents must be a list of parent lists, one per node .* got 0 for "
                                        r"node 1"):
        fit_joint_mixture(sem, [1], [0], 2)
    with pytest.raises(TypeError, match=r"^starts must be a sequence of starting points .* got NoneType"):
        fit_joint_mixture(sem, [1], [[0]], 2, starts=None)


@pytest.mark.parametrize(("scale", "what"), [(1e-300, "all magnitudes below 1e-150"),
                                             (1e307, "magnitudes above 1e100")])
def test_data_out_of_the_squares_range_are_told_to_rescale(sem, scale, what):
    from certkit.causal import CausalMixtureModel, fit_joint_mixture

    message = rf"^X has {what} in column\(s\) .*; rescale them"
    with pytest.raises(ValueError, match=message):
        fit_joint_mixture(sem * scale, [1], [[0]], 2)  # said "use fewer groups" at 1e-300
    with pytest.raises(ValueError, match=message):
        CausalMixtureModel().fit(sem * scale)  # said "node 0 is constant" at 1e307


def test_latent_bic_checks_x_up_front(sem):
    from certkit.causal import LatentBIC, ScoreSettings

    bad = sem.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match=r"^X must be finite"):
        LatentBIC(bad, ScoreSettings())


def test_edge_stability_names_a_too_small_sample_fraction(sem):
    from certkit.causal import edge_stability

    # the default ("auto") tries splines on 200 rows: its refits must hold their 5 x 19 + 9 parameters
    with pytest.raises(ValueError, match=r"^sample_fraction=0.001 draws 2 of the 200 rows per fit, "
                                         r"fewer than the 104 parameters .* spline mixture .*"
                                         r"use sample_fraction >= 0.52"):
        edge_stability(sem, sample_fraction=0.001, n_bootstrap=2)


# --- item 17: names of the mixing sets, the progress bar ---


def test_mixing_sets_have_column_names_too():
    import pandas as pd

    from certkit.causal import CausalMixtureModel, make_mixture_sem

    X, _, _ = make_mixture_sem(5, 800, 0.4, 2, mixing_size=2, rng=3)
    names = ["age", "dose", "bp", "hr", "temp"]
    model = CausalMixtureModel(rng=0).fit(pd.DataFrame(X, columns=names))
    assert model.mixing_sets_
    assert model.mixing_set_names_ == [tuple(names[j] for j in sorted(s)) for s in model.mixing_sets_]


def test_the_search_progress_bar_reaches_its_total(capsys):
    from certkit.causal import CausalMixtureModel, make_mixture_sem

    X, _, _ = make_mixture_sem(6, 600, 0.4, 2, mixing_size=2, rng=0)
    CausalMixtureModel(rng=0, progress=True).fit(X)
    err = capsys.readouterr().err
    assert "7/7" in err  # 6 search steps and the refinement; the bar stopped at 3/7 before clearing
