"""Radii: flip_radius against exact empirical W_p (POT), flip_top_positives, and their errors."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from certkit.performative import empirical_wasserstein, flip_radius, flip_top_positives

pytest.importorskip("ot")


def test_flip_radius_values():
    assert flip_radius(100, 25, 2.0) == pytest.approx(0.5)
    assert flip_radius(100, 25, 2.0, p=2) == pytest.approx(1.0)
    assert flip_radius(10, 0, 3.0, p=3) == 0.0
    assert flip_radius(7, 7, 3.0, p=1.5) == pytest.approx(3.0)


@pytest.mark.parametrize("p", [1, 2, 3])
@pytest.mark.parametrize("norm", [2, 1, np.inf])
def test_moving_m_atoms_by_at_most_d_stays_inside_the_flip_radius(p, norm):
    rng = np.random.default_rng(p)
    n, D = 40, 1.5
    for m in (1, 5, 17, 40):
        Z = rng.normal(size=(n, 3))
        moved = Z.copy()
        idx = rng.choice(n, m, replace=False)
        steps = rng.normal(size=(m, 3))
        lengths = np.linalg.norm(steps, ord=norm, axis=1, keepdims=True)
        steps *= D * rng.uniform(0.1, 1.0, size=(m, 1)) / lengths
        moved[idx] += steps
        w = empirical_wasserstein(Z, moved, p=p, norm=norm)
        assert w <= flip_radius(n, m, D, p=p) * (1 + 1e-9)


@pytest.mark.parametrize("p", [1, 2, 3])
def test_equality_when_the_moved_atoms_stay_isolated(p):
    """Atoms on a grid with spacing 3D, m of them moved by exactly D: every source is >= D from a moved
    point, so W_p^p = (m/n) D^p exactly."""
    rng = np.random.default_rng(10 + p)
    D = 0.7
    grid = 3 * D * np.array([[i, j] for i in range(6) for j in range(5)], dtype=float)  # n = 30
    n = grid.shape[0]
    for m in (1, 4, 30):
        moved = grid.copy()
        idx = rng.choice(n, m, replace=False)
        angle = rng.uniform(0, 2 * np.pi, size=m)
        moved[idx] += D * np.column_stack([np.cos(angle), np.sin(angle)])
        assert empirical_wasserstein(grid, moved, p=p) == pytest.approx(flip_radius(n, m, D, p=p), rel=1e-9)


def test_label_flips_as_moves_in_z_space():
    """z = (x, s*y): flipping a {-1,+1} label moves z by 2s; with distinct x the flips are isolated."""
    x = np.arange(20, dtype=float)[:, None] * 10.0
    y = np.where(np.arange(20) % 2 == 0, 1.0, -1.0)
    pred = np.linspace(0, 1, 20)
    flipped = flip_top_positives(pred, y, 0.4)  # ceil(0.4 * 10) = 4 positives flipped
    assert int((flipped != y).sum()) == 4
    scale = 0.5
    Z, Zf = np.column_stack([x, scale * y]), np.column_stack([x, scale * flipped])
    assert empirical_wasserstein(Z, Zf, p=2) == pytest.approx(flip_radius(20, 4, 2 * scale, p=2), rel=1e-9)


def test_flip_top_positives_by_hand():
    pred = np.array([0.9, 0.2, 0.8, 0.5, 0.95])
    y01 = np.array([1, 1, 1, 0, 0])
    np.testing.assert_array_equal(flip_top_positives(pred, y01, 0.5), [0, 1, 0, 0, 0])  # ceil(1.5) = 2
    ypm = 2 * y01 - 1
    np.testing.assert_array_equal(flip_top_positives(pred, ypm, 0.2), [-1, 1, 1, -1, -1])  # ceil(0.6) = 1
    np.testing.assert_array_equal(flip_top_positives(pred, ypm, 0.0), ypm)
    np.testing.assert_array_equal(flip_top_positives(pred, ypm, 1.0), -np.ones(5))
    # ties broken by position: the earlier unit flips first
    np.testing.assert_array_equal(flip_top_positives(np.ones(3), np.ones(3), 0.34), [0, 0, 1])
    # share * count is exact at integers despite rounding (0.1 * 30 = 3.0000000000000004)
    assert int((flip_top_positives(np.arange(30.0), np.ones(30), 0.1) == 0).sum()) == 3


def test_radii_errors():
    with pytest.raises(ValueError, match="m must be <= 10"):
        flip_radius(10, 11, 1.0)
    with pytest.raises(ValueError, match="diameter must be >= 0"):
        flip_radius(10, 1, -1.0)
    with pytest.raises(ValueError, match="p must be a finite number >= 1"):
        flip_radius(10, 1, 1.0, p=0.5)
    with pytest.raises(ValueError, match=r"y must be binary with labels \{0, 1\} or \{-1, \+1\}"):
        flip_top_positives([0.1, 0.2], [0, 2], 0.5)
    with pytest.raises(ValueError, match="share must lie in"):
        flip_top_positives([0.1, 0.2], [0, 1], 1.5)
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        flip_top_positives([0.1, 0.2, 0.3], [0, 1], 0.5)
    with pytest.raises(ValueError, match="same number of columns"):
        empirical_wasserstein(np.zeros((3, 2)), np.zeros((3, 3)))
    with pytest.raises(ValueError, match="weights_a must be nonnegative and sum to 1"):
        empirical_wasserstein(np.zeros((2, 1)), np.zeros((2, 1)), weights_a=[0.2, 0.2])


def test_missing_pot_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ot", None)
    with pytest.raises(ImportError, match=r"pip install \"certkit\[pot\]\""):
        empirical_wasserstein(np.zeros((2, 1)), np.ones((2, 1)))
