"""Estimators: exact oracles (π = π₀, γ → ∞, OBP parity, hand-computed action distribution), standard-error
machinery, bootstrap/executors, cross-fitting, sensitivity and input validation."""

import dataclasses

import numpy as np
import pytest
from _ope_models import ConstantOutcome, KnownOutcome
from scipy.special import ndtr

from certkit._results import ConfidenceInterval
from certkit.ope import (
    LinearThresholdPolicy,
    LogNormalCostResponse,
    OPEResult,
    StrategicSimulator,
    direct_method,
    naive_dr,
    naive_ipw,
    plain_dr,
    sensitivity,
    strategic_dr,
    strategic_ipw,
    target_action_proba,
)
from certkit.ope.estimators import _target_proba


def obp_doubly_robust(reward, action, action_dist, estimated_rewards_by_reg_model, pscore, position=None):
    """Transcription of Open Bandit Pipeline's DoublyRobust.estimate_policy_value (lambda_ = inf).

    action_dist and estimated_rewards_by_reg_model have shape (n_rounds, n_actions, len_list).
    """
    if position is None:
        position = np.zeros(action_dist.shape[0], dtype=int)
    n = action.shape[0]
    iw = action_dist[np.arange(n), action, position] / pscore
    q_hat_at_position = estimated_rewards_by_reg_model[np.arange(n), :, position]
    q_hat_factual = estimated_rewards_by_reg_model[np.arange(n), action, position]
    pi_e_at_position = action_dist[np.arange(n), :, position]
    estimated_rewards = np.average(q_hat_at_position, weights=pi_e_at_position, axis=1)
    estimated_rewards += iw * (reward - q_hat_factual)
    return estimated_rewards.mean()


def test_plain_dr_equals_obp_transcription():
    rng = np.random.default_rng(0)
    n, k = 500, 3
    action_dist = rng.dirichlet(np.ones(k), size=n)
    pscore_all = rng.dirichlet(np.ones(k), size=n)
    action = np.array([rng.choice(k, p=p) for p in pscore_all])
    pscore = pscore_all[np.arange(n), action]
    q_hat = rng.random((n, k))
    reward = rng.normal(size=n)
    with pytest.warns(UserWarning, match="heavy importance weights"):  # Dirichlet propensities reach ~0.01
        ours = plain_dr(reward, action, pscore, action_dist, q_hat)
    ref = obp_doubly_robust(reward, action, action_dist[:, :, None], q_hat[:, :, None], pscore)
    assert ours.value == pytest.approx(ref, rel=1e-13, abs=1e-15)


def test_naive_dr_equals_obp_transcription_on_the_logged_arrays(sim, pi0, pi):
    data = sim.sample(pi0, 2000, rng=1)
    res = naive_dr(data, target_policy=pi, logging_policy=pi0, outcome_model=KnownOutcome())
    p1 = pi.action_proba(data.x_post)
    action_dist = np.column_stack([1 - p1, p1])[:, :, None]
    q = np.empty((data.n, 2))
    for a in (0, 1):
        q[:, a] = KnownOutcome().fit(None, data.reward[data.action == a]).predict(data.x_post)
    ref = obp_doubly_robust(data.reward, data.action, action_dist, q[:, :, None], data.pscore)
    assert res.value == pytest.approx(ref, rel=1e-13)


def test_ipw_of_logging_policy_is_the_mean_reward_exactly(sim, pi0):
    data = sim.sample(pi0, 3000, rng=2)
    resp = LogNormalCostResponse().fit(data, policy=pi0)
    mean = float(np.mean(data.reward))
    # With a response model: π = π₀ reproduces the logged behaviour row by row (weights exactly 1).
    assert strategic_ipw(data, target_policy=pi0, logging_policy=pi0, response=resp).value == pytest.approx(
        mean, rel=1e-12
    )
    assert naive_ipw(data, target_policy=pi0, logging_policy=pi0).value == pytest.approx(mean, rel=1e-12)
    # Without any strategic response (γ → ∞: nobody moves).
    static = StrategicSimulator(coef=[60.0, 0.0, 0.0], scale=0.5)
    data = static.sample(pi0, 3000, rng=3)
    assert not data.moved.any()
    res = strategic_ipw(data, target_policy=pi0, logging_policy=pi0, response=static.response())
    assert res.value == pytest.approx(float(np.mean(data.reward)), rel=1e-12)


def test_infinite_cost_reduces_to_plain_dr_at_x_pre(pi0, pi):
    static = StrategicSimulator(coef=[60.0, 0.0, 0.0], scale=0.5)
    data = static.sample(pi0, 3000, rng=4)
    res = strategic_dr(
        data, target_policy=pi, logging_policy=pi0, response=static.response(), outcome_model=KnownOutcome()
    )
    p1 = pi.action_proba(data.x_pre)
    q = np.column_stack(
        [KnownOutcome().fit(None, data.reward[data.action == a]).predict(data.x_pre) for a in (0, 1)]
    )
    ref = plain_dr(data.reward, data.action, data.pscore, np.column_stack([1 - p1, p1]), q)
    assert res.value == pytest.approx(ref.value, rel=1e-12)
    assert res.std_error == pytest.approx(ref.std_error, rel=1e-9)
    assert res.response_std_error == 0.0


def test_target_action_proba_by_hand():
    pi0 = LinearThresholdPolicy([1.0, 0.0], 1.0, temperature=0.5)
    pi = LinearThresholdPolicy([1.0, 0.0], 1.5, temperature=0.5)
    resp = LogNormalCostResponse.from_params([0.2, 0.3, 0.0], 0.8, benefit=1.0)
    # rows: accepted by π; accepted by π₀ only; mover; stayer
    x0 = np.array([[2.0, 0.0], [1.2, 0.0], [0.5, 0.0], [0.0, 1.0]])
    x_post = x0.copy()
    x_post[2] = [1.0, 0.0]
    from certkit.ope import StrategicData

    data = StrategicData(
        x_pre=x0,
        x_post=x_post,
        moved=np.array([False, False, True, False]),
        action=np.array([1, 1, 0, 0]),
        reward=np.zeros(4),
        pscore=np.array([0.5, 0.5, 0.5, 0.5]),
    )

    def F(c, x):
        return ndtr((c - 0.2 - 0.3 * x[0]) / 0.8)

    sig = pi.action_proba
    d_t = np.array([0.0, 0.3, 1.0, 1.5])
    d_0 = np.array([0.0, 0.0, 0.5, 1.0])
    c_t, c_0 = np.log(2 / d_t[1:] ** 2), np.log(2 / d_0[2:] ** 2)
    p_move = np.array(
        [
            0.0,
            F(c_t[0], x0[1]),
            F(c_t[1], x0[2]) / F(c_0[0], x0[2]),  # c_t < c_0 for the mover
            0.0,  # c_t < c_0 for the stayer: still stays
        ]
    )
    cf = pi.counterfactual(x0)
    expected = p_move * sig(cf) + (1 - p_move) * sig(x0)
    got = target_action_proba(data, target_policy=pi, logging_policy=pi0, response=resp)
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    # A laxer target: the stayer may move now, by [F(c_π) − F(c₀)]/(1 − F(c₀)); the mover moves for sure.
    lax = LinearThresholdPolicy([1.0, 0.0], 0.8, temperature=0.5)
    d_l = np.array([0.0, 0.0, 0.3, 0.8])
    c_l = np.log(2 / d_l[2:] ** 2)
    p_move = np.array([0.0, 0.0, 1.0, (F(c_l[1], x0[3]) - F(c_0[1], x0[3])) / (1 - F(c_0[1], x0[3]))])
    cf = lax.counterfactual(x0)
    expected = p_move * lax.action_proba(cf) + (1 - p_move) * lax.action_proba(x0)
    got = target_action_proba(data, target_policy=lax, logging_policy=pi0, response=resp)
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_response_gradient_matches_finite_differences(sim, pi0, pi):
    data = sim.sample(pi0, 2000, rng=5)
    resp = LogNormalCostResponse().fit(data, policy=pi0)
    for target in (pi, LinearThresholdPolicy([1.0, 0.5], 0.5, temperature=0.25)):
        _, grad = _target_proba(data, target, pi0, resp, gradient=True)
        eta = resp._eta
        for j in range(eta.size):
            h = 1e-6 * max(1.0, abs(eta[j]))
            up, down = eta.copy(), eta.copy()
            up[j] += h
            down[j] -= h
            p_up = _target_proba(data, target, pi0, resp._with_eta(up), gradient=False)[0]
            p_down = _target_proba(data, target, pi0, resp._with_eta(down), gradient=False)[0]
            np.testing.assert_allclose(grad[:, j], (p_up - p_down) / (2 * h), atol=1e-6)


def test_standard_error_includes_the_response_model(sim, pi0, pi):
    data = sim.sample(pi0, 4000, rng=6)
    resp = LogNormalCostResponse().fit(data, policy=pi0)
    known = LogNormalCostResponse.from_params(resp.coef_, resp.scale_)
    fitted = strategic_dr(data, target_policy=pi, logging_policy=pi0, response=resp)
    fixed = strategic_dr(data, target_policy=pi, logging_policy=pi0, response=known)
    assert fitted.value == pytest.approx(fixed.value, rel=1e-9)
    assert fitted.response_std_error > 0 and fixed.response_std_error == 0
    # The same parameters with their covariance but fitted "elsewhere": delta method G'ΣG.
    external = LogNormalCostResponse.from_params(resp.coef_, resp.scale_, covariance=resp.covariance_)
    ext = strategic_dr(data, target_policy=pi, logging_policy=pi0, response=external)
    np.testing.assert_allclose(external._eta_cov, resp._eta_cov, atol=1e-12)
    # Inverse information (external) vs the sandwich of the stacked scores: equal to first order.
    assert 0.6 < ext.response_std_error / fitted.response_std_error < 1.6
    assert ext.std_error > fixed.std_error


def test_result_object(sim, pi0, pi):
    data = sim.sample(pi0, 1000, rng=7)
    resp = LogNormalCostResponse().fit(data, policy=pi0)
    res = strategic_dr(data, target_policy=pi, logging_policy=pi0, response=resp)
    assert isinstance(res, OPEResult) and res.n == 1000 and res.estimator == "dr"
    ci = res.confidence_interval(confidence_level=0.9)
    assert isinstance(ci, ConfidenceInterval)
    assert ci.low == pytest.approx(res.value - 1.6448536269514722 * res.std_error)
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.value = 0.0
    assert "strategic DR" in res.summary() and "95% CI" in str(res)
    with pytest.raises(ValueError, match="confidence_level"):
        res.confidence_interval(confidence_level=1.0)
    with pytest.raises(ValueError, match="method"):
        res.confidence_interval(method="bca")
    with pytest.raises(ValueError, match="bootstrap"):
        res.confidence_interval(method="percentile")


def test_bootstrap_refits_and_is_executor_independent(sim, pi0, pi):
    data = sim.sample(pi0, 800, rng=8)
    resp = LogNormalCostResponse().fit(data, policy=pi0)
    kw = dict(target_policy=pi, logging_policy=pi0, response=resp, bootstrap=30, rng=3)
    serial = strategic_dr(data, **kw)
    pooled = strategic_dr(data, executor=2, **kw)
    np.testing.assert_array_equal(serial.bootstrap_estimates, pooled.bootstrap_estimates)
    assert serial.bootstrap_estimates.shape == (30,)
    assert 0.4 < serial.bootstrap_std_error / serial.std_error < 2.5
    lo, hi = serial.confidence_interval(method="percentile")
    assert lo < serial.value < hi
    # Refitting the response matters: a fixed response gives different replicates.
    known = LogNormalCostResponse.from_params(resp.coef_, resp.scale_)
    fixed = strategic_dr(data, **{**kw, "response": known})
    assert not np.allclose(fixed.bootstrap_estimates, serial.bootstrap_estimates)
    assert "percentile" in serial.summary()


def test_bootstrap_on_dask(sim, pi0, pi, dask_client):
    data = sim.sample(pi0, 500, rng=9)
    resp = LogNormalCostResponse().fit(data, policy=pi0)
    kw = dict(target_policy=pi, logging_policy=pi0, response=resp, bootstrap=6, rng=1)
    res = strategic_ipw(data, executor=dask_client, **kw)
    np.testing.assert_array_equal(res.bootstrap_estimates, strategic_ipw(data, **kw).bootstrap_estimates)


def test_cross_fit_and_user_outcome_models(sim, pi0, pi):
    from sklearn.linear_model import LinearRegression, LogisticRegression

    data = sim.sample(pi0, 3000, rng=10)
    resp = LogNormalCostResponse().fit(data, policy=pi0)
    kw = dict(target_policy=pi, logging_policy=pi0, response=resp)
    base = strategic_dr(data, **kw)
    a = strategic_dr(data, cross_fit=5, rng=0, **kw)
    b = strategic_dr(data, cross_fit=5, rng=0, **kw)
    assert a.value == b.value and abs(a.value - base.value) < 0.5 * base.std_error
    logit = strategic_dr(data, outcome_model=LogisticRegression(C=1e8), **kw)
    assert logit.value == pytest.approx(base.value, abs=1e-4)  # the same model as statsmodels Logit
    ols = strategic_dr(data, outcome_model="ols", **kw)
    lin = strategic_dr(data, outcome_model=LinearRegression(), **kw)
    assert ols.value == pytest.approx(lin.value, rel=1e-9)
    dm = direct_method(data, **kw)
    dm_user = direct_method(data, outcome_model=LogisticRegression(C=1e8), **kw)
    assert dm.value == pytest.approx(dm_user.value, abs=1e-4)
    assert dm.std_error > dm_user.std_error  # the GLM's estimation error is stacked in only for the default


def test_sensitivity_over_the_scale(sim, pi0, pi):
    data = sim.sample(pi0, 3000, rng=11)
    resp = LogNormalCostResponse().fit(data, policy=pi0)
    res = sensitivity(
        data, target_policy=pi, logging_policy=pi0, response=resp, scale_range=(0.5, 2.0), n_points=5
    )
    assert res.scales.shape == (5,) and res.scales[2] == pytest.approx(resp.scale_)
    dr = strategic_dr(data, target_policy=pi, logging_policy=pi0, response=resp)
    assert res.values[2] == pytest.approx(dr.value, abs=1e-7)  # the profile at ŝ is the MLE
    assert np.ptp(res.values) > 0
    assert "scale s" in res.summary()
    with pytest.raises(ValueError, match="scale_range"):
        sensitivity(data, target_policy=pi, logging_policy=pi0, response=resp, scale_range=(2.0, 1.0))
    with pytest.raises(ValueError, match="estimator"):
        sensitivity(data, target_policy=pi, logging_policy=pi0, response=resp, estimator="naive_dr")


def test_plot_sensitivity(sim, pi0, pi):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    from certkit.plot import plot_sensitivity

    data = sim.sample(pi0, 1000, rng=12)
    resp = LogNormalCostResponse().fit(data, policy=pi0)
    ax = plot_sensitivity(sensitivity(data, target_policy=pi, logging_policy=pi0, response=resp, n_points=3))
    assert ax.get_xlabel() == "response scale s"
    with pytest.raises(TypeError, match="result"):
        plot_sensitivity(resp)


class _NoExplanation:
    def action_proba(self, x):
        return np.full(x.shape[0], 0.5)


def _fields(data):
    return {f.name: getattr(data, f.name) for f in dataclasses.fields(data)}


def test_bad_inputs_name_the_argument(sim, pi0, pi):
    data = sim.sample(pi0, 500, rng=13)
    resp = LogNormalCostResponse().fit(data, policy=pi0)
    kw = dict(target_policy=pi, logging_policy=pi0, response=resp)
    d = _fields(data)
    with pytest.raises(ValueError, match="pscore"):
        strategic_dr({**d, "pscore": np.where(np.arange(500) == 0, 0.0, d["pscore"])}, **kw)
    with pytest.raises(ValueError, match="pscore"):
        strategic_dr({**d, "pscore": d["pscore"] * 1.01}, **kw)
    with pytest.raises(ValueError, match="pscore"):
        strategic_dr({**d, "pscore": d["pscore"] + 1.0}, **kw)
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        strategic_dr({**d, "reward": d["reward"][:-1]}, **kw)
    for key in ("x_pre", "reward"):
        bad = np.array(d[key], dtype=float)
        bad.flat[3] = np.nan
        with pytest.raises(ValueError, match=key):
            strategic_dr({**d, key: bad}, **kw)
    with pytest.raises(ValueError, match="action"):
        strategic_dr({**d, "action": np.full(500, 2)}, **kw)
    with pytest.raises(ValueError, match="moved"):
        strategic_dr({**d, "moved": ~d["moved"]}, **kw)
    with pytest.raises(ValueError, match="unknown keys"):
        strategic_dr({**d, "weights": 1}, **kw)
    with pytest.raises(TypeError, match=r"target_policy.*counterfactual"):
        strategic_dr(data, **{**kw, "target_policy": _NoExplanation()})
    with pytest.raises(TypeError, match="logging_policy"):
        strategic_ipw(data, **{**kw, "logging_policy": object()})
    other = LinearThresholdPolicy([1.0, 1.0], 1.0, temperature=0.3)
    with pytest.raises(ValueError, match="response was fitted to another policy"):
        strategic_dr(data, **{**kw, "logging_policy": other})
    with pytest.raises(ValueError, match="outcome_model"):
        strategic_dr(data, outcome_model="probit", **kw)
    with pytest.raises(TypeError, match="outcome_model"):
        strategic_dr(data, outcome_model=object(), **kw)
    with pytest.raises(ValueError, match="cross_fit"):
        strategic_dr(data, cross_fit=1, **kw)
    with pytest.raises(ValueError, match="bootstrap"):
        strategic_dr(data, bootstrap=1, **kw)
    with pytest.raises(TypeError, match="progress"):
        strategic_dr(data, progress=None, **kw)
    with pytest.raises(TypeError, match="response"):
        strategic_dr(data, **{**kw, "response": None})
    with pytest.raises(TypeError, match="data"):
        strategic_dr([1, 2, 3], **kw)
    # naive estimators need no explanation
    assert np.isfinite(naive_ipw(data, target_policy=_NoExplanation(), logging_policy=pi0).value)
    with pytest.raises(ValueError, match="action"):
        plain_dr(np.zeros(3), np.array([0, 1, 5]), np.full(3, 0.5), np.full((3, 2), 0.5), np.zeros((3, 2)))
    with pytest.raises(ValueError, match="action_dist"):
        plain_dr(np.zeros(3), np.array([0, 1, 1]), np.full(3, 0.5), np.full((3, 2), 0.7), np.zeros((3, 2)))


def test_constant_outcome_model_runs(sim, pi0, pi):
    data = sim.sample(pi0, 500, rng=14)
    resp = LogNormalCostResponse().fit(data, policy=pi0)
    res = strategic_dr(
        data, target_policy=pi, logging_policy=pi0, response=resp, outcome_model=ConstantOutcome(0.0)
    )
    ipw = strategic_ipw(data, target_policy=pi, logging_policy=pi0, response=resp)
    # q̂ = 0 turns DR into IPW exactly.
    assert res.value == pytest.approx(ipw.value, rel=1e-12)
    assert res.std_error == pytest.approx(ipw.std_error, rel=1e-9)


def test_bootstrap_replicates_with_failed_response_refits(sim, pi0, pi):
    # At n = 60 a few resamples have no identifiable response model: they are left out and counted ...
    data = sim.sample(pi0, 60, rng=0)
    resp = LogNormalCostResponse().fit(data, policy=pi0)
    res = strategic_ipw(data, target_policy=pi, logging_policy=pi0, response=resp, bootstrap=40, rng=0)
    assert res.bootstrap_failures == 1 and res.bootstrap_estimates.shape == (39,)
    assert np.all(np.isfinite(res.bootstrap_estimates)) and "left out" in res.summary()
    # ... and more than 10% of failures raise.
    data = sim.sample(pi0, 40, rng=0)
    resp = LogNormalCostResponse().fit(data, policy=pi0)
    with pytest.raises(ValueError, match="bootstrap: the response model could not be refitted"):
        strategic_ipw(data, target_policy=pi, logging_policy=pi0, response=resp, bootstrap=40, rng=0)
