"""Conformity scores against brute-force definitions."""

from __future__ import annotations

import numpy as np
import pytest

from certkit.conformal.scores import APSScore, CallableScore, RAPSScore, THRScore, get_score


def _brute_aps(p, u, penalty=0.0, k_reg=0):
    n, k = p.shape
    out = np.empty_like(p)
    for i in range(n):
        order = sorted(range(k), key=lambda j: (-p[i, j], j))
        for rank, j in enumerate(order, start=1):
            e = sum(p[i, m] for m in order[: rank - 1]) + u[i] * p[i, j]
            out[i, j] = 1 - e - penalty * max(0, rank - k_reg)
    return out


def _probs(n=40, k=5, seed=0):
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.ones(k), size=n)
    p[0] = [0.4, 0.4, 0.1, 0.05, 0.05]  # a tie
    return p


def test_thr_is_probability():
    p = _probs()
    np.testing.assert_array_equal(THRScore()(p, np.random.default_rng(0)), p)
    assert get_score("lac") == THRScore()


def test_aps_matches_brute_force():
    p = _probs()
    got = APSScore()(p, np.random.default_rng(1))
    u = np.random.default_rng(1).uniform(size=(p.shape[0], 1))[:, 0]
    np.testing.assert_allclose(got, _brute_aps(p, u), atol=1e-12)
    got = APSScore(randomized=False)(p, np.random.default_rng(1))
    np.testing.assert_allclose(got, _brute_aps(p, np.ones(p.shape[0])), atol=1e-12)
    assert np.all((got >= 0) & (got <= 1))


def test_raps_matches_brute_force():
    p = _probs()
    got = RAPSScore(penalty=0.2, k_reg=2)(p, np.random.default_rng(2))
    u = np.random.default_rng(2).uniform(size=(p.shape[0], 1))[:, 0]
    np.testing.assert_allclose(got, _brute_aps(p, u, 0.2, 2), atol=1e-12)
    assert not RAPSScore().bounded and APSScore().bounded and THRScore().bounded


def test_aps_hand_example():
    p = np.array([[0.5, 0.3, 0.2]])
    s = APSScore(randomized=False)(p, np.random.default_rng(0))
    np.testing.assert_allclose(s, [[0.5, 0.2, 0.0]], atol=1e-15)


def test_callable_and_nonconformity_flip():
    p = _probs()
    s = get_score(lambda q: 2 * q)(p, np.random.default_rng(0))
    np.testing.assert_allclose(s, 2 * p)
    s = CallableScore(lambda q: 1 - q, nonconformity=True)(p, np.random.default_rng(0))
    np.testing.assert_allclose(s, p - 1)
    with pytest.raises(ValueError, match="shape"):
        get_score(lambda q: q[:, 0])(p, np.random.default_rng(0))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        CallableScore(lambda q: 2 * q, bounded=True)(p, np.random.default_rng(0))


def test_bad_scores():
    with pytest.raises(ValueError, match="unknown score"):
        get_score("nope")
    with pytest.raises(TypeError, match="score must be"):
        get_score(3)
    with pytest.raises(ValueError, match="penalty"):
        RAPSScore(penalty=-1.0)
    with pytest.raises(ValueError, match="k_reg"):
        RAPSScore(k_reg=-1)
    with pytest.raises(TypeError, match="callable"):
        CallableScore(3)
