"""Issue 23: silent results, size caps and unclear errors of certkit.ope, each with the clear error (or the
result) that replaced it."""

import argparse

import numpy as np
import pytest
from sklearn.linear_model import LinearRegression

from certkit.ope import (
    LogNormalCostResponse,
    ObservedCostResponse,
    StrategicData,
    StrategicSimulator,
    _cli,
    direct_method,
    naive_dr,
    naive_ipw,
    plain_dr,
    sensitivity,
    strategic_dr,
    strategic_ipw,
)

ESTIMATORS = {
    "strategic_dr": (strategic_dr, True),
    "strategic_ipw": (strategic_ipw, True),
    "direct_method": (direct_method, True),
    "naive_dr": (naive_dr, False),
    "naive_ipw": (naive_ipw, False),
}


@pytest.fixture(scope="module")
def logged(sim, pi0):
    data = sim.sample(pi0, 400, rng=0)
    return data, LogNormalCostResponse().fit(data, policy=pi0)


def _call(name, data, pi, pi0, resp, **kw):
    fn, strategic = ESTIMATORS[name]
    if strategic:
        kw["response"] = resp
    return fn(data, target_policy=pi, logging_policy=pi0, **kw)


def _replace(data, **fields):
    keys = ("x_pre", "x_post", "moved", "action", "reward", "pscore")
    return StrategicData(**{k: fields.get(k, getattr(data, k)) for k in keys})


@pytest.mark.parametrize("name", ESTIMATORS)
def test_one_row_is_an_error_not_a_nan_std_error(logged, pi, pi0, name):
    data, resp = logged
    with pytest.raises(ValueError, match=r"data must have at least 2 rows"):
        _call(name, data.subset([0]), pi, pi0, resp)


def test_plain_dr_one_row_is_an_error():
    with pytest.raises(ValueError, match=r"reward must have at least 2 entries"):
        plain_dr([1.0], [0], [0.5], [[0.5, 0.5]], [[0.1, 0.2]])


@pytest.mark.parametrize("name", ESTIMATORS)
def test_huge_rewards_are_an_error_naming_reward(logged, pi, pi0, name):
    data, resp = logged
    huge = _replace(data, reward=data.reward * 1e308)
    with pytest.raises(ValueError, match=r"^reward: .* overflowed float64.*rescale"):
        _call(name, huge, pi, pi0, resp)


def test_plain_dr_huge_rewards_are_an_error_naming_reward():
    with pytest.raises(ValueError, match=r"^reward: the plain DR estimate overflowed"):
        plain_dr([1e308, -1e308], [0, 0], [0.5, 0.5], [[0.5, 0.5]] * 2, [[0.1, 0.2]] * 2)


def test_observed_cost_scale_at_rounding_level_is_rejected(sim):
    x, _ = sim.sample_costs(200, rng=0)
    noise = 1e-16 * np.random.default_rng(0).standard_normal(200)
    gamma = np.exp(0.2 + x @ [0.3, 0.2] + noise)  # residual scale ~2e-16: numerically exact
    with pytest.raises(ValueError, match=r"^gamma: .*scale s is 0 to working precision"):
        ObservedCostResponse().fit(x, gamma)
    # a small but real scale is still fitted
    small = 1e-6 * np.random.default_rng(1).standard_normal(200)
    fit = ObservedCostResponse().fit(x, np.exp(0.2 + x @ [0.3, 0.2] + small))
    assert fit.scale_ == pytest.approx(1e-6, rel=0.2)


@pytest.mark.parametrize("name", ["strategic_dr", "strategic_ipw", "direct_method"])
def test_float32_data_are_blamed_on_float32(logged, pi, pi0, name):
    data, resp = logged
    f32 = _replace(data, x_pre=data.x_pre.astype(np.float32), x_post=data.x_post.astype(np.float32))
    strict = LogNormalCostResponse(x_post_tol=1e-9).fit(data, policy=pi0)
    with pytest.raises(ValueError, match=r"float32 rounding \(the values passed through float32\); pass a "
                                         r"larger x_post_tol"):
        _call(name, f32, pi, pi0, strict)
    # the default tolerance (1e-6) accepts float32 data, with an estimate close to the float64 one
    assert _call(name, f32, pi, pi0, resp).value == pytest.approx(_call(name, data, pi, pi0, resp).value,
                                                                 abs=1e-4)


def test_gamma_from_moves_wrong_length_direction_names_direction(sim):
    x, _ = sim.sample_costs(20, rng=0)
    with pytest.raises(ValueError, match=r"direction must have shape \(2,\) or \(20, 2\).*got \(3,\)"):
        ObservedCostResponse.gamma_from_moves(x, x + 1.0, [1.0, 1.0, 1.0])


def test_outcome_model_class_instead_of_instance(logged, pi, pi0):
    data, resp = logged
    with pytest.raises(TypeError, match=r"outcome_model must be an estimator instance.*LinearRegression\(\)"):
        strategic_dr(data, target_policy=pi, logging_policy=pi0, response=resp,
                     outcome_model=LinearRegression)


class _LosingExecutor:
    """An executor whose futures return None instead of the function's result."""

    def submit(self, fn, *args, **kwargs):
        class Future:
            def result(self, timeout=None):
                return None

        return Future()


def test_executor_that_loses_results_is_named(logged, pi, pi0):
    data, resp = logged
    with pytest.raises(TypeError, match=r"^executor: bootstrap replicate 0 came back as NoneType"):
        strategic_ipw(data, target_policy=pi, logging_policy=pi0, response=resp, bootstrap=4,
                      executor=_LosingExecutor())


@pytest.mark.parametrize("name", ESTIMATORS)
def test_bootstrap_is_capped_before_any_work(logged, pi, pi0, name):
    data, resp = logged
    with pytest.raises(ValueError, match=r"^bootstrap=1000000000 is too large.*reduce bootstrap"):
        _call(name, data, pi, pi0, resp, bootstrap=10**9)


def test_sensitivity_n_points_is_capped(logged, pi, pi0):
    data, resp = logged
    with pytest.raises(ValueError, match=r"^n_points=1000000 is too large.*reduce n_points"):
        sensitivity(data, target_policy=pi, logging_policy=pi0, response=resp, n_points=10**6)


def test_simulator_n_is_capped(pi0):
    sim = StrategicSimulator()
    with pytest.raises(ValueError, match=r"^n=1000000000000 is too large.*reduce n"):
        sim.sample(pi0, 10**12)
    with pytest.raises(ValueError, match=r"^n=1000000000000 is too large"):
        sim.sample_costs(10**12)


def test_response_models_have_a_repr():
    assert repr(LogNormalCostResponse(benefit=2.0)) == "LogNormalCostResponse(benefit=2.0)"
    assert repr(LogNormalCostResponse(max_iter=5)) == "LogNormalCostResponse(benefit=1.0, max_iter=5)"
    assert repr(ObservedCostResponse()) == "ObservedCostResponse(benefit=1.0)"


# ------------------------------------------------------------------------------------------ command line
def _run(capsys, *argv):
    parser = argparse.ArgumentParser()
    _cli.add_arguments(parser)
    status = _cli.run(parser.parse_args(list(argv)))
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1 and err.startswith("certkit ope: error: ")
    return err


def test_cli_data_not_npz_says_which_format(capsys, tmp_path):
    csv = tmp_path / "x.csv"
    csv.write_text("a,b\n1,2\n")
    err = _run(capsys, "--data", str(csv))
    assert "--data" in err and ".npz archive" in err and "allow_pickle" not in err
    npy = tmp_path / "x.npy"
    np.save(npy, np.zeros(3))
    assert ".npz archive" in _run(capsys, "--data", str(npy))
    objects = tmp_path / "objects.npz"
    keys = ("x_pre", "x_post", "moved", "action", "reward", "pscore")
    np.savez(objects, **{k: np.array([[1, "a"]], dtype=object) for k in keys})
    err = _run(capsys, "--data", str(objects))
    assert "arrays of Python objects" in err and "allow_pickle" not in err


@pytest.mark.parametrize("flag", ["--logging-theta", "--target-theta"])
def test_cli_theta_length_errors_name_the_option(capsys, flag):
    err = _run(capsys, flag, "1,1,1")
    assert err.startswith(f"certkit ope: error: {flag} has 3 entries")


def test_cli_theta_length_against_data_names_the_option(capsys, tmp_path, sim, pi0):
    data = sim.sample(pi0, 300, rng=1)
    path = tmp_path / "logged.npz"
    keys = ("x_pre", "x_post", "moved", "action", "reward", "pscore")
    np.savez(path, **{k: getattr(data, k) for k in keys})
    err = _run(capsys, "--data", str(path), "--logging-theta", "1,1,1", "--target-theta", "1,0,0")
    assert "--logging-theta has 3 entries; the data have 2 covariates" in err


def test_cli_huge_benefit_names_the_benefit(capsys):
    err = _run(capsys, "--benefit", "1e308", "--n", "500")
    assert "benefit=1e+308" in err and "simulated data" in err


def test_cli_caps_n_and_bootstrap(capsys):
    assert "--n=10000000000 is too large" in _run(capsys, "--n", "10000000000")
    assert "--bootstrap=1000000000 is too large" in _run(capsys, "--n", "500", "--bootstrap", "1000000000")


def test_cli_help_states_each_default_once():
    parser = argparse.ArgumentParser()
    _cli.add_arguments(parser)
    text = parser.format_help()
    assert "(default: None)" not in text and "(default: 0)" not in text and text.count("(default 4000)") == 1
    assert "(default 4000) (default" not in " ".join(text.split())
