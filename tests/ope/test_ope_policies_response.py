"""Policies, move thresholds and response models (probit MLE, observed-γ OLS): exact oracles, recovery."""

import numpy as np
import pytest
from scipy.special import expit, ndtr
from sklearn.exceptions import NotFittedError

from certkit.ope import (
    ExplainingPolicy,
    LinearThresholdPolicy,
    LogNormalCostResponse,
    ObservedCostResponse,
    StrategicData,
    StrategicSimulator,
    move_threshold,
)


def test_linear_threshold_policy_by_hand():
    pol = LinearThresholdPolicy([3.0, 4.0], 5.0, temperature=2.0)
    x = np.array([[0.0, 0.0], [3.0, 4.0], [1.0, 0.0]])
    np.testing.assert_allclose(pol.score(x), [-5.0, 20.0, -2.0])
    np.testing.assert_allclose(pol.action_proba(x), expit(np.array([-5.0, 20.0, -2.0]) / 2.0))
    np.testing.assert_allclose(pol.distance(x), [1.0, 0.0, 0.4])
    cf = pol.counterfactual(x)
    np.testing.assert_allclose(cf, [[0.6, 0.8], [3.0, 4.0], [1.24, 0.32]])
    np.testing.assert_allclose(cf @ pol.theta, [5.0, 25.0, 5.0])  # on the boundary, or unchanged
    assert isinstance(pol, ExplainingPolicy)
    assert pol == LinearThresholdPolicy([3.0, 4.0], 5.0, temperature=2.0)
    assert pol != LinearThresholdPolicy([3.0, 4.0], 5.0, temperature=1.0)


def test_move_threshold_by_hand():
    pol = LinearThresholdPolicy([3.0, 4.0], 5.0)
    x = np.array([[0.0, 0.0], [3.0, 4.0], [1.0, 0.0]])
    _, c, accepted = move_threshold(pol, x, 2.0)
    np.testing.assert_array_equal(accepted, [False, True, False])
    np.testing.assert_allclose(c[[0, 2]], [np.log(4.0 / 1.0), np.log(4.0 / 0.16)])
    assert np.isnan(c[1])


@pytest.mark.parametrize(
    ("kwargs", "err", "match"),
    [
        ({"theta": [0.0, 0.0], "tau": 1.0}, ValueError, "theta"),
        ({"theta": [1.0, np.nan], "tau": 1.0}, ValueError, "theta"),
        ({"theta": [1.0, 1.0], "tau": 1.0, "temperature": 0.0}, ValueError, "temperature"),
        ({"theta": [1.0, 1.0], "tau": np.inf}, ValueError, "tau"),
        ({"theta": [[1.0, 1.0]], "tau": 1.0}, ValueError, "theta"),
    ],
)
def test_policy_bad_inputs(kwargs, err, match):
    with pytest.raises(err, match=match):
        LinearThresholdPolicy(**kwargs)


def test_policy_checks_feature_count():
    with pytest.raises(ValueError, match="x"):
        LinearThresholdPolicy([1.0, 1.0], 0.0).action_proba(np.zeros((3, 3)))


def _statsmodels_probit(data, policy, benefit=1.0):
    import statsmodels.api as sm

    _, c, accepted = move_threshold(policy, data.x_pre, benefit)
    w = np.column_stack([c, np.ones(c.size), data.x_pre])[~accepted]
    res = sm.Probit(data.moved[~accepted].astype(float), w).fit(disp=0, method="newton", tol=1e-12)
    return res


def test_probit_mle_matches_statsmodels(sim, pi0):
    data = sim.sample(pi0, 3000, rng=1)
    resp = LogNormalCostResponse().fit(data, policy=pi0)
    ref = _statsmodels_probit(data, pi0)
    a, b = ref.params[0], ref.params[1:]
    np.testing.assert_allclose(resp.scale_, 1 / a, rtol=1e-7)
    np.testing.assert_allclose(resp.coef_, -b / a, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(resp._eta_cov, np.linalg.inv(-ref.model.hessian(ref.params)), rtol=1e-6)
    assert resp.n_fit_ == int((pi0.distance(data.x_pre) > 0).sum())
    assert "scale s" in resp.summary()


def test_probit_mle_recovers_parameters_at_root_n_rate(sim, pi0):
    truth = np.array([*sim.coef, sim.scale])
    rmse = []
    for n in (1000, 4000, 16000):
        errs, ses = [], []
        for r in range(25):
            resp = LogNormalCostResponse().fit(sim.sample(pi0, n, rng=1000 * n + r), policy=pi0)
            errs.append(np.array([*resp.coef_, resp.scale_]) - truth)
            ses.append(resp.std_errors_)
        errs = np.array(errs)
        rmse.append(np.sqrt(np.mean(errs**2, axis=0)))
        # Observed-information standard errors match the spread of the estimates.
        ratio = np.sqrt(np.mean(errs**2, axis=0)) / np.mean(ses, axis=0)
        assert np.all((ratio > 0.6) & (ratio < 1.6)), (n, ratio)
    rmse = np.array(rmse)
    # Quadrupling n halves the error (1/sqrt(n)), per parameter, within Monte Carlo noise.
    for k in range(2):
        ratio = rmse[k] / rmse[k + 1]
        assert np.all((ratio > 1.4) & (ratio < 2.9)), ratio
    assert np.all(np.abs(np.mean(errs, axis=0)) < 4 * rmse[-1] / np.sqrt(25) + 0.02)


def _data(x_pre, x_post, n_rows=None):
    n = x_pre.shape[0]
    moved = np.any(x_post != x_pre, axis=1)
    return StrategicData(
        x_pre=x_pre,
        x_post=x_post,
        moved=moved,
        action=np.ones(n, int),
        reward=np.zeros(n),
        pscore=np.full(n, 0.5),
    )


def test_identification_errors(sim, pi0):
    data = sim.sample(pi0, 500, rng=2)
    none = data.subset(~data.moved)
    with pytest.raises(ValueError, match="no agent moved"):
        LogNormalCostResponse().fit(none, policy=pi0)
    below = pi0.distance(data.x_pre) > 0
    with pytest.raises(ValueError, match="every agent below the threshold moved"):
        LogNormalCostResponse().fit(data.subset(data.moved | ~below), policy=pi0)
    with pytest.raises(ValueError, match="no agent is below"):
        LogNormalCostResponse().fit(data.subset(~below), policy=pi0)
    # All agents at the same distance from the threshold: c constant.
    rng = np.random.default_rng(0)
    t = rng.normal(size=200)
    x_pre = np.column_stack([t, -t])  # θᵀx = 0 for θ = (1, 1): distance 1/sqrt(2) for everyone
    x_post = pi0.counterfactual(x_pre)
    stay = rng.random(200) < 0.5
    x_post[stay] = x_pre[stay]
    with pytest.raises(ValueError, match="does not vary"):
        LogNormalCostResponse().fit(_data(x_pre, x_post), policy=pi0)


def test_contradicting_data_raise(pi0):
    # Agents far from the threshold move, near ones stay: coefficient on c is negative.
    rng = np.random.default_rng(3)
    x_pre = rng.normal(size=(2000, 2)) - 0.5
    d = pi0.distance(x_pre)
    move = (d > 0) & (rng.random(2000) < expit(4 * np.log(np.maximum(d, 1e-12) / np.median(d[d > 0]))))
    x_post = np.where(move[:, None], pi0.counterfactual(x_pre), x_pre)
    with pytest.raises(ValueError, match="contradict"):
        LogNormalCostResponse().fit(_data(x_pre, x_post), policy=pi0)


def test_response_fitted_under_other_policy_is_detected(sim, pi0, pi):
    data = sim.sample(pi0, 500, rng=4)
    with pytest.raises(ValueError, match="another policy"):
        LogNormalCostResponse().fit(data, policy=pi)


def test_response_bad_inputs(sim, pi0):
    with pytest.raises(ValueError, match="benefit"):
        LogNormalCostResponse(benefit=-1.0)
    with pytest.raises(TypeError, match="policy"):
        LogNormalCostResponse().fit(sim.sample(pi0, 200, rng=0), policy=object())
    with pytest.raises(NotFittedError):
        LogNormalCostResponse().log_cdf(np.zeros(2), np.zeros((2, 2)))
    with pytest.raises(ValueError, match="scale"):
        LogNormalCostResponse.from_params([0.0, 0.0, 0.0], 0.0)
    with pytest.raises(ValueError, match="covariance"):
        LogNormalCostResponse.from_params([0.0, 0.0, 0.0], 1.0, covariance=-np.eye(4))


def test_from_params_cdf_by_hand():
    resp = LogNormalCostResponse.from_params([0.5, -1.0, 2.0], 0.5, benefit=2.0)
    x = np.array([[1.0, 0.0], [0.0, 1.0]])
    c = np.array([0.3, 1.0])
    mu = np.array([0.5 - 1.0, 0.5 + 2.0])
    np.testing.assert_allclose(np.exp(resp.log_cdf(c, x)), ndtr((c - mu) / 0.5))
    np.testing.assert_allclose(np.exp(resp.log_sf(c, x)), 1 - ndtr((c - mu) / 0.5))
    np.testing.assert_allclose(resp.coef_, [0.5, -1.0, 2.0])
    assert resp.scale_ == 0.5 and resp.benefit == 2.0
    cov = np.diag([0.01, 0.02, 0.03, 0.04])
    with_cov = LogNormalCostResponse.from_params([0.5, -1.0, 2.0], 0.5, covariance=cov)
    np.testing.assert_allclose(with_cov.covariance_, cov, atol=1e-12)


def test_observed_cost_response_recovers_parameters():
    sim = StrategicSimulator(coef=[0.3, 0.5, -0.2], scale=0.4)
    x0, gamma = sim.sample_costs(20000, rng=5)
    g = np.array([1.0, 2.0])
    x_post = x0 + g / gamma[:, None]
    np.testing.assert_allclose(ObservedCostResponse.gamma_from_moves(x0, x_post, g), gamma, rtol=1e-10)
    resp = ObservedCostResponse().fit(x0, gamma)
    est = np.array([*resp.coef_, resp.scale_])
    assert np.all(np.abs(est - [0.3, 0.5, -0.2, 0.4]) < 4 * resp.std_errors_)
    # OLS by hand.
    design = np.column_stack([np.ones(20000), x0])
    beta = np.linalg.lstsq(design, np.log(gamma), rcond=None)[0]
    np.testing.assert_allclose(resp.coef_, beta, rtol=1e-9)
    with pytest.raises(ValueError, match="direction"):
        ObservedCostResponse.gamma_from_moves(x0, x_post, -g)
    with pytest.raises(ValueError, match="gamma"):
        ObservedCostResponse().fit(x0, -gamma)


def test_calibration_table(sim, pi0):
    data = sim.sample(pi0, 6000, rng=6)
    resp = LogNormalCostResponse().fit(data, policy=pi0)
    held_out = sim.sample(pi0, 6000, rng=7)
    table = resp.calibration(held_out, n_bins=8)
    assert table.count.sum() == int((pi0.distance(held_out.x_pre) > 0).sum())
    assert np.all(np.diff(table.predicted) >= 0)
    assert table.max_z < 4.0
    assert "predicted" in table.summary()
    with pytest.raises(ValueError, match="n_bins"):
        resp.calibration(held_out, n_bins=0)


def test_plot_move_calibration(sim, pi0):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    from certkit.plot import plot_move_calibration

    data = sim.sample(pi0, 2000, rng=8)
    ax = plot_move_calibration(LogNormalCostResponse().fit(data, policy=pi0).calibration())
    assert ax.get_xlabel() and len(ax.lines) >= 2
