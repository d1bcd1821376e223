"""Issue 30: causal discovery, round 4 of first use and fuzzing (quiet failures, misleading errors, sizes)."""

from __future__ import annotations

import time

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


def test_cpdag_of_a_complete_dag_of_300_nodes_is_fast():
    A = np.triu(np.ones((300, 300), int), 1)
    start = time.perf_counter()
    out = cpdag(A, mixing_sets=[[150]])
    assert time.perf_counter() - start < 15  # 94 s before; about 0.5 s now
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
    start = time.perf_counter()
    many = cpdag(CHAIN, mixing_sets=[[0]] * 10**6)  # tried to allocate 931 GiB before
    assert time.perf_counter() - start < 30
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
