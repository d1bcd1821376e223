"""The ``certkit mibp`` subcommand, its demo section, the data helper and the plot helper."""

import argparse

import numpy as np
import pytest

from certkit.mibp import _cli
from certkit.plot import plot_certified_accuracy


@pytest.mark.parametrize("carry", ["box", "affine"])
def test_run_prints_summary(capsys, carry):
    parser = argparse.ArgumentParser()
    _cli.add_arguments(parser)
    args = parser.parse_args(
        ["--dataset", "iris2", "--epochs", "2", "--epsilon", "0.001", "--hidden", "4", "--carry", carry]
    )
    assert _cli.run(args) == 0
    out = capsys.readouterr().out
    assert "certified accuracy" in out and "max width" in out
    assert f"carry={carry}" in out and f"carry {carry}" in out
    acc = float(out.split("certified accuracy")[1].split()[0])
    assert 0.0 <= acc <= 1.0


def test_run_licence_limit_is_a_clear_message(capsys, monkeypatch):
    from certkit.mibp import GurobiLicenseError

    def too_big(*args, **kwargs):
        raise GurobiLicenseError("the Gurobi licence is size-limited", fits={"hidden": 3, "backend": "scip"})

    monkeypatch.setattr("certkit.mibp.certified_training", too_big)
    parser = argparse.ArgumentParser()
    _cli.add_arguments(parser)
    args = parser.parse_args(["--dataset", "iris2", "--backend", "gurobi", "--formulation", "hybrid"])
    assert _cli.run(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("certkit mibp: error: ") and "size-limited" in err
    assert "--hidden 3" in err and "--backend scip" in err and 'backend="scip"' not in err


def test_run_licence_limit_names_cli_flags_that_fit(capsys):
    from certkit.mibp.solvers import gurobi_size_limited

    pytest.importorskip("gurobipy")
    if not gurobi_size_limited():
        pytest.skip("the installed Gurobi licence is not size-limited")
    parser = argparse.ArgumentParser()
    _cli.add_arguments(parser)
    argv = [
        "--dataset",
        "iris2",
        "--backend",
        "gurobi",
        "--formulation",
        "joint",
        "--hidden",
        "1",
        "--epochs",
        "2",
    ]
    assert _cli.run(parser.parse_args(argv)) == 2
    err = capsys.readouterr().err
    assert "--formulation decomposed" in err and "--backend scip" in err
    assert "--hidden" not in err and 'formulation="' not in err  # no hidden count fits a joint program


def _certified(text, label):
    row = next(line for line in text.splitlines() if line.strip().startswith(label))
    return float(row[len(row) - len(row.lstrip()) + len(label):].split()[-3])


def test_demo_section_shows_the_exact_certificate_beating_the_interval_one():
    backend = _cli._exact_backend()
    if backend is None:
        pytest.skip("needs gurobipy or pyscipopt")
    text = _cli.demo(np.random.default_rng(0))
    assert _cli.NAME == "mibp" and _cli.HELP
    exact, interval = _certified(text, "exact per-sample"), _certified(text, "interval arithmetic")
    assert exact >= interval + 0.05  # visibly better: at least two more of the 36 test points
    assert "What to see" in text and "nan" not in text


def test_demo_section_without_an_exact_solver_says_what_an_extra_adds(monkeypatch):
    monkeypatch.setattr(_cli, "_exact_backend", lambda: None)
    text = _cli.demo(np.random.default_rng(0))
    assert 0 <= _certified(text, "interval arithmetic") <= 1
    assert "exact per-sample" not in text
    assert text.splitlines()[-1].startswith('pip install "certkit[gurobi]" or "certkit[scip]" adds')


@pytest.mark.parametrize("name", _cli.DATASETS)
def test_load_data(name):
    data = _cli.load_data(name, rng=0)
    assert data.X.shape[0] == len(data.y) and data.X_test.shape[1] == data.X.shape[1]
    if data.n_outputs == 1:
        assert set(np.unique(data.y)) <= {-1, 1}
    else:
        assert set(np.unique(data.y)) == {0, 1, 2}
    if name != "two_moons":
        np.testing.assert_allclose(data.X.mean(axis=0), 0.0, atol=1e-12)
        np.testing.assert_allclose(data.X.std(axis=0), 1.0, rtol=1e-12)
    with pytest.raises(ValueError, match="unknown dataset"):
        _cli.load_data("mnist")


def test_plot_certified_accuracy():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    ax = plot_certified_accuracy([1e-3, 1e-2], {"interval": [0.8, 0.5], "gurobi": [0.85, 0.6]}, title="t")
    assert len(ax.lines) == 2 and ax.get_xscale() == "log" and ax.get_title() == "t"
    ax = plot_certified_accuracy([1e-3, 1e-2], {"interval": [0.8, 0.5]}, nominal=0.9)
    reference = [line for line in ax.lines if line.get_linestyle() == "--"]
    assert len(reference) == 1 and list(reference[0].get_ydata()) == [0.9, 0.9]
    assert "nominal accuracy 0.900" in [t.get_text() for t in ax.get_legend().get_texts()]
    with pytest.raises(ValueError, match="nominal"):
        plot_certified_accuracy([1e-3], {"a": [0.5]}, nominal=1.5)
    with pytest.raises(ValueError, match="shape"):
        plot_certified_accuracy([1e-3, 1e-2], {"a": [0.5]})
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        plot_certified_accuracy([1e-3], {"a": [1.5]})
    with pytest.raises(ValueError, match="at least one"):
        plot_certified_accuracy([1e-3], {})
    with pytest.raises(ValueError, match=">= 0"):
        plot_certified_accuracy([-1.0], {"a": [0.5]})


def test_run_gives_every_solve_a_default_time_limit(monkeypatch, capsys):
    import certkit.mibp as mibp

    seen = {}
    real_train, real_certify = mibp.certified_training, mibp.certify_predictions

    def train(*args, **kwargs):
        seen["train"] = kwargs["time_limit"]
        return real_train(*args, **kwargs)

    def certify(*args, **kwargs):
        seen["certify"] = kwargs["time_limit"]
        return real_certify(*args, **kwargs)

    monkeypatch.setattr("certkit.mibp.certified_training", train)
    monkeypatch.setattr("certkit.mibp.certify_predictions", certify)
    parser = argparse.ArgumentParser()
    _cli.add_arguments(parser)
    args = parser.parse_args(["--dataset", "iris2", "--epochs", "1", "--hidden", "2"])
    assert _cli.run(args) == 0
    assert seen == {"train": _cli.DEFAULT_TIME_LIMIT, "certify": _cli.DEFAULT_TIME_LIMIT}
    assert _cli.DEFAULT_TIME_LIMIT > 0
    help_text = parser.format_help()
    assert f"default {_cli.DEFAULT_TIME_LIMIT:g}" in help_text
