"""Issue 43: causal discovery, round 6 of first use (carried-over defects, summary caveats)."""

from __future__ import annotations

import numpy as np
import pytest

from certkit.causal import cpdag, identified_orientations


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
