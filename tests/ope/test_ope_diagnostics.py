"""Importance-weight diagnostics (max weight, Kish ESS, heavy-weight warning) and the input checks added after
review: logged data consistent with the logging policy's disclosure, action_dist rows summing to 1."""

import warnings

import numpy as np
import pytest

from certkit.ope import (
    LinearThresholdPolicy,
    LogNormalCostResponse,
    StrategicData,
    direct_method,
    move_threshold,
    naive_ipw,
    plain_dr,
    strategic_dr,
    strategic_ipw,
    target_action_proba,
)


def test_weight_diagnostics_by_hand():
    # Weights action_dist[i, aᵢ]/pscoreᵢ = [2, 0, 1, 1]: max 2, ESS = (Σw)²/Σw² = 16/6.
    action = np.array([1, 1, 0, 0])
    pscore = np.array([0.5, 0.5, 0.5, 1.0])
    action_dist = np.array([[0.0, 1.0], [1.0, 0.0], [0.5, 0.5], [1.0, 0.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # max 2 = √4 and ESS 2.67 ≥ 0.4: no warning
        res = plain_dr(np.ones(4), action, pscore, action_dist, np.zeros((4, 2)))
    assert res.max_weight == 2.0
    assert res.effective_sample_size == pytest.approx(16 / 6, rel=1e-15)
    assert "max. importance weight" in res.summary() and "effective sample size" in res.summary()


def test_heavy_weights_warn_with_cause_and_fix():
    n = 100
    action = np.ones(n, dtype=int)
    pscore = np.full(n, 0.5)
    pscore[0] = 0.05  # weight 20 > √100
    action_dist = np.column_stack([np.zeros(n), np.ones(n)])
    with pytest.warns(UserWarning, match=r"(?s)max 20.*bootstrap=.*closer to the logging.*softer"):
        res = plain_dr(np.ones(n), action, pscore, action_dist, np.zeros((n, 2)))
    w = 1 / pscore
    assert res.max_weight == pytest.approx(20.0, rel=1e-14)
    assert res.effective_sample_size == pytest.approx(w.sum() ** 2 / (w**2).sum(), rel=1e-14)


def test_strategic_weights_exact_and_warning(sim, pi0):
    data = sim.sample(pi0, 2000, rng=11)
    resp = LogNormalCostResponse().fit(data, policy=pi0)
    # π = π₀: every weight is exactly 1.
    res = strategic_ipw(data, target_policy=pi0, logging_policy=pi0, response=resp)
    assert res.max_weight == pytest.approx(1.0, rel=1e-12)
    assert res.effective_sample_size == pytest.approx(2000.0, rel=1e-12)
    # A sharp logging policy and a target far from it: weights from p̂_π/π₀, warning.
    sharp = LinearThresholdPolicy([1.0, 1.0], 1.0, temperature=0.1)
    data = sim.sample(sharp, 2000, rng=11)
    resp = LogNormalCostResponse().fit(data, policy=sharp)
    far = LinearThresholdPolicy([1.0, 0.0], 2.0, temperature=0.05)
    with pytest.warns(UserWarning, match="effective sample size"):
        res = strategic_dr(data, target_policy=far, logging_policy=sharp, response=resp)
    p1 = target_action_proba(data, target_policy=far, logging_policy=sharp, response=resp)
    w = np.where(data.action == 1, p1, 1 - p1) / data.pscore
    assert res.max_weight == pytest.approx(w.max(), rel=1e-12)
    assert res.effective_sample_size == pytest.approx(w.sum() ** 2 / (w**2).sum(), rel=1e-12)
    assert res.effective_sample_size < 200 or res.max_weight > np.sqrt(2000)
    # The direct method uses no weights.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        dm = direct_method(data, target_policy=far, logging_policy=sharp, response=resp)
    assert dm.max_weight is None and dm.effective_sample_size is None
    assert "importance weight" not in dm.summary()
    naive = naive_ipw(data, target_policy=sharp, logging_policy=sharp)
    assert naive.max_weight == pytest.approx(1.0) and naive.effective_sample_size == pytest.approx(2000.0)


def _tampered(data, **fields):
    base = {k: getattr(data, k) for k in ("x_pre", "x_post", "moved", "action", "reward", "pscore")}
    base.update(fields)
    return StrategicData(**base)


def test_estimators_check_data_against_the_logging_disclosure(sim, pi0, pi):
    data = sim.sample(pi0, 1000, rng=12)
    known = sim.response()  # fixed parameters: no fit-time check on the data
    est = (strategic_dr, strategic_ipw, direct_method)
    # A mover whose x_post is not π₀'s counterfactual explanation.
    i = int(np.flatnonzero(data.moved)[0])
    x_post = data.x_post.copy()
    x_post[i] += 0.5
    p = pi0.action_proba(x_post)
    pscore = np.where(data.action == 1, p, 1 - p)
    bad = _tampered(data, x_post=x_post, pscore=pscore)
    for fn in est:
        with pytest.raises(ValueError, match="counterfactual explanation disclosed by logging_policy"):
            fn(bad, target_policy=pi, logging_policy=pi0, response=known)
    # An agent π₀ already accepted marked as moved.
    _, _, accepted = move_threshold(pi0, data.x_pre, known.benefit)
    j = int(np.flatnonzero(accepted & ~data.moved)[0])
    x_post = data.x_post.copy()
    x_post[j] += 0.1
    moved = data.moved.copy()
    moved[j] = True
    p = pi0.action_proba(x_post)
    bad = _tampered(data, x_post=x_post, moved=moved, pscore=np.where(data.action == 1, p, 1 - p))
    for fn in est:
        with pytest.raises(ValueError, match="already accepted by logging_policy moved"):
            fn(bad, target_policy=pi, logging_policy=pi0, response=known)


def test_probit_scores_stacked_only_on_the_same_moves(sim, pi0, pi):
    from certkit.ope.estimators import _same_rows

    data = sim.sample(pi0, 1000, rng=13)
    resp = LogNormalCostResponse().fit(data, policy=pi0)
    assert _same_rows(resp, data)
    # Same x_pre, a random subset of the movers: not the rows the probit was fitted on.
    other = sim.sample(pi0, 1000, rng=14)
    relogged = _tampered(
        data,
        x_post=np.where(other.moved[:, None], data.x_post, data.x_pre),
        moved=data.moved & other.moved,
    )
    assert not np.array_equal(relogged.moved, data.moved)
    assert not _same_rows(resp, relogged)
    assert not _same_rows(sim.response(), data)


def test_plain_dr_action_dist_rows_must_sum_to_one_tightly():
    reward, action, pscore, q = np.ones(3), np.array([0, 1, 1]), np.full(3, 0.5), np.zeros((3, 2))
    # Off by 5e-6: accepted by a 1e-5 relative tolerance before, an error now (no silent renormalisation).
    dist = np.array([[0.5, 0.5], [0.5, 0.5 + 5e-6], [0.3, 0.7]])
    with pytest.raises(ValueError, match=r"action_dist rows must sum to 1 within 1e-9 \(1 rows"):
        plain_dr(reward, action, pscore, dist, q)
    with pytest.raises(ValueError, match="action_dist must be >= 0"):
        plain_dr(reward, action, pscore, np.array([[1.1, -0.1], [0.5, 0.5], [0.3, 0.7]]), q)
    ok = np.array([[0.5, 0.5], [0.5, 0.5 + 1e-12], [0.3, 0.7]])
    expected = (0.5 + 0.5 + 1e-12 + 0.7) / 0.5 / 3
    assert plain_dr(reward, action, pscore, ok, q).value == pytest.approx(expected, rel=1e-15)
