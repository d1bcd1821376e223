"""The ``certkit ope`` subcommand, its demo section and the simulator on a finite population."""

import argparse

import numpy as np
import pytest
from scipy.special import ndtr

from certkit.ope import LinearThresholdPolicy, StrategicSimulator, _cli


def _args(*argv):
    parser = argparse.ArgumentParser()
    _cli.add_arguments(parser)
    return parser.parse_args(list(argv))


def test_cli_run_prints_every_estimator(capsys):
    assert _cli.run(_args("--n", "1500", "--seed", "2")) == 0
    out = capsys.readouterr().out
    for name in ("dr", "ipw", "dm", "naive_dr", "naive_ipw", "true value", "scale s"):
        assert name in out


def test_cli_reads_logged_data(tmp_path, capsys, sim, pi0):
    data = sim.sample(pi0, 1500, rng=3)
    path = tmp_path / "logged.npz"
    keys = ("x_pre", "x_post", "moved", "action", "reward", "pscore")
    np.savez(path, **{k: getattr(data, k) for k in keys})
    assert _cli.run(_args("--data", str(path), "--bootstrap", "5")) == 0
    out = capsys.readouterr().out
    assert "bootstrap CI" in out and "true value" not in out


@pytest.mark.parametrize(
    "argv",
    [("--logging-tau", "nan"), ("--n", "0"), ("--confidence-level", "1.5"), ("--data", "/nonexistent.npz"),
     ("--target-theta", "1,0,0")],
)
def test_cli_errors_are_one_line_with_status_2(capsys, argv):
    assert _cli.run(_args(*argv)) == 2
    err = capsys.readouterr().err
    assert err.startswith("certkit ope: error: ") and err.count("\n") == 1


def test_cli_bad_vector_is_an_argparse_error():
    with pytest.raises(SystemExit) as exc:
        _args("--target-theta", "a,b")
    assert exc.value.code == 2


def test_demo_is_deterministic_and_plugged_in():
    from certkit import cli

    assert "certkit.ope._cli" in cli._COMMANDS
    a = _cli.demo(np.random.default_rng(0))
    b = _cli.demo(np.random.default_rng(0))
    assert a.splitlines()[:-1] == b.splitlines()[:-1]
    assert "naive_dr" in a and "true value" in a


def test_simulator_on_a_finite_population_by_hand():
    feats = np.array([[0.0, 0.0], [2.0, 0.0], [0.5, -0.5]])
    sim = StrategicSimulator(features=feats, coef=[0.2, 0.1, 0.0], scale=0.5, benefit=1.0)
    pol = LinearThresholdPolicy([1.0, 0.0], 1.0, temperature=0.5)
    d = np.array([1.0, 0.0, 0.5])
    c = np.log(2 / np.where(d > 0, d, 1.0) ** 2)
    p_move = np.where(d > 0, ndtr((c - 0.2 - 0.1 * feats[:, 0]) / 0.5), 0.0)
    cf = pol.counterfactual(feats)
    p1 = p_move * pol.action_proba(cf) + (1 - p_move) * pol.action_proba(feats)
    expected = np.mean((1 - p1) * sim.expected_reward(feats, 0) + p1 * sim.expected_reward(feats, 1))
    assert sim.true_value(pol) == pytest.approx(expected, rel=1e-12)
    data = sim.sample(pol, 50, rng=0)
    assert all(any(np.array_equal(row, f) for f in feats) for row in data.x_pre)
    with pytest.raises(ValueError, match="features"):
        StrategicSimulator(features=feats, n_features=3)


def test_simulator_true_value_matches_simulation(sim, pi):
    # Sampled rewards under the policy average to the (expected-reward) true value.
    data = sim.sample(pi, 400_000, rng=1)
    assert np.mean(data.reward) == pytest.approx(sim.true_value(pi), abs=4 * 0.5 / np.sqrt(400_000))
