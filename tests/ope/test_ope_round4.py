"""Issue 30: movers' x_post rounded to a few decimals is accepted within `x_post_tol` and diagnosed as
rounding beyond it."""

import numpy as np
import pytest

from certkit.ope import LinearThresholdPolicy, LogNormalCostResponse, StrategicData, strategic_dr


def _rounded(data, decimals):
    keys = ("x_pre", "x_post", "moved", "action", "reward", "pscore")
    fields = {k: getattr(data, k) for k in keys}
    fields["x_post"] = np.where(data.moved[:, None], np.round(data.x_post, decimals), data.x_post)
    return StrategicData(**fields)


@pytest.fixture(scope="module")
def data(sim, pi0):
    return sim.sample(pi0, 600, rng=0)


@pytest.mark.parametrize("decimals", [6, 7, 8])
def test_x_post_rounded_to_six_or_more_decimals_is_accepted(data, pi, pi0, decimals):
    rounded = _rounded(data, decimals)
    resp = LogNormalCostResponse().fit(rounded, policy=pi0)
    exact = LogNormalCostResponse().fit(data, policy=pi0)
    assert resp.coef_ == pytest.approx(exact.coef_, rel=1e-4)
    value = strategic_dr(rounded, target_policy=pi, logging_policy=pi0, response=resp).value
    reference = strategic_dr(data, target_policy=pi, logging_policy=pi0, response=exact).value
    assert value == pytest.approx(reference, rel=1e-4)


def test_coarser_rounding_is_diagnosed_as_rounding_and_x_post_tol_accepts_it(data, pi, pi0):
    rounded = _rounded(data, 3)
    with pytest.raises(
        ValueError,
        match=r"x_post is the explanation rounded to 3 decimals; pass a larger "
        r"x_post_tol .*x_post_tol=0\.001",
    ):
        LogNormalCostResponse().fit(rounded, policy=pi0)
    resp = LogNormalCostResponse(x_post_tol=1e-3).fit(rounded, policy=pi0)
    assert resp.x_post_tol == 1e-3 and "x_post_tol=0.001" in repr(resp)
    # the estimators check the data with the response model's tolerance, the bootstrap refits keep it
    res = strategic_dr(rounded, target_policy=pi, logging_policy=pi0, response=resp, bootstrap=3, rng=0)
    assert np.isfinite(res.value) and res.bootstrap_failures == 0


def test_another_policy_is_still_named(data):
    stricter = LinearThresholdPolicy([1.0, 1.0], 1.2, temperature=1.0)  # explanations 0.14 further out
    with pytest.raises(ValueError, match=r"by policy by up to 0\.1.*logged under another policy"):
        LogNormalCostResponse().fit(data, policy=stricter)


def test_negative_x_post_tol_is_refused():
    with pytest.raises(ValueError, match=r"x_post_tol"):
        LogNormalCostResponse(x_post_tol=-1.0)


@pytest.mark.parametrize("n_features", [3, 10**6])
def test_simulator_names_a_policy_of_another_dimension(pi0, n_features):
    from certkit.ope import StrategicSimulator

    sim = StrategicSimulator(n_features=n_features)
    message = (
        r"^policy has 2 coefficients \(theta\) but the simulator draws agents with "
        rf"n_features={n_features}; use StrategicSimulator\(n_features=2\)"
    )
    with pytest.raises(ValueError, match=message):
        sim.sample(pi0, n=10, rng=0)
    with pytest.raises(ValueError, match=message):
        sim.true_value(pi0, n_mc=10)


def test_sensitivity_names_an_extreme_scale_range(data, pi, pi0):
    from certkit.ope import sensitivity

    resp = LogNormalCostResponse().fit(data, policy=pi0)
    with pytest.raises(
        ValueError,
        match=r"^scale_range=\(1e-300, 1e\+300\): at s = 1e-300 x the fitted "
        r"scale the estimate failed .*use a narrower scale_range",
    ):
        sensitivity(data, target_policy=pi, logging_policy=pi0, response=resp, scale_range=(1e-300, 1e300))


def test_cli_x_post_tol(tmp_path, capsys, data):
    from certkit.cli import main

    rounded = _rounded(data, 3)
    path = tmp_path / "logged.npz"
    np.savez(
        path, **{k: getattr(rounded, k) for k in ("x_pre", "x_post", "moved", "action", "reward", "pscore")}
    )
    assert main(["ope", "--data", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("certkit ope: error: --data: the movers' x_post differs")
    assert (
        "movers are beyond --x-post-tol 1e-06): x_post is the explanation rounded to 3 decimals; pass a "
        "larger --x-post-tol, e.g. --x-post-tol 0.001, or log x_post" in err
    )
    assert "x_post_tol" not in err and "LogNormalCostResponse" not in err  # issue 36: the flag, not Python
    assert len(err.splitlines()) == 1
    assert main(["ope", "--data", str(path), "--x-post-tol", "1e-3"]) == 0
    assert "naive_ipw" in capsys.readouterr().out


def test_cli_names_the_flag_when_x_post_is_not_the_explanation(tmp_path, capsys, data, pi0):
    """Issue 36: the OPE command's x_post errors name --x-post-tol, never the Python argument."""
    from certkit.cli import main

    shifted = np.where(data.moved[:, None], data.x_post + 0.3, data.x_post)
    path = tmp_path / "logged.npz"
    fields = {k: getattr(data, k) for k in ("x_pre", "moved", "action", "reward", "pscore")}
    np.savez(path, x_post=shifted, **fields)
    assert main(["ope", "--data", str(path), "--x-post-tol", "1e-9"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("certkit ope: error: --data: the movers' x_post differs")
    assert "movers are beyond --x-post-tol 1e-09): the data were logged under another policy" in err
    assert err.endswith("if x_post was stored with limited precision, pass a larger --x-post-tol")
    assert "x_post_tol" not in err and len(err.splitlines()) == 1
    # the Python API names its own argument
    with pytest.raises(
        ValueError, match=r"beyond x_post_tol=1e-09\).*LogNormalCostResponse\(x_post_tol=\.\.\.\)"
    ):
        LogNormalCostResponse(x_post_tol=1e-9).fit(StrategicData(x_post=shifted, **fields), policy=pi0)
