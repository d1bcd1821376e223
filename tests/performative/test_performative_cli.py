"""The ``certkit performative`` subcommand, its demo section, the plot helper and the example."""

from __future__ import annotations

import argparse
import importlib.util
import re
from pathlib import Path

import numpy as np
import pytest

from certkit import cli
from certkit.performative import _cli, generalization_bound

ROOT = Path(__file__).resolve().parents[2]


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    _cli.add_arguments(parser)
    return parser.parse_args(list(argv))


def test_cli_prints_terms_risks_and_the_inverse(capsys):
    assert _cli.NAME == "performative" and _cli.HELP
    assert _cli.run(_args("--shares", "0.1,0.5", "--target", "80")) == 0
    out = capsys.readouterr().out
    # Thm 3.13 at share 0.1, n = 445, paper constants: complexity 67.1593, performative 17.7037, total 84.9918
    assert re.search(r"0\.1\s+67\.1593\s+0\.1288\s+17\.7037\s+84\.9918", out)
    assert "W_p sup (self-negating)" in out
    assert "largest share of affected units with thm3.13 bound <= 80: 0.5528" in out
    rows = [line.split() for line in out.splitlines() if re.match(r"^\s*0\.[15]\s+\d", line)]
    risk_rows = [r for r in rows if len(r) == 4]
    assert len(risk_rows) == 2 and all(float(r[2]) < 0.5911 < float(r[3]) for r in risk_rows)


def test_cli_errors_are_one_line_and_exit_2(capsys):
    assert _cli.run(_args("--shares", "0.1,x")) == 2
    assert capsys.readouterr().err.strip() == (
        "certkit performative: error: --shares must be comma-separated numbers, got '0.1,x'"
    )
    assert _cli.run(_args("--p", "0.5")) == 2
    err = capsys.readouterr().err
    assert err.startswith("certkit performative: error: --p must be") and err.count("\n") == 1
    for bad in ("1.5", "nan", "0.1,inf"):  # issue 36: the flag is named (it was share, the Python argument)
        assert _cli.run(_args("--shares", bad)) == 2
        err = capsys.readouterr().err
        assert (
            err.startswith("certkit performative: error: --shares must lie in [0, 1]")
            and err.count("\n") == 1
        )
    # an overflow names the flag that made the bound overflow (it named --diameter and loss_lipschitz)
    assert _cli.run(_args("--entropy-integral", "1e308")) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        "certkit performative: error: --entropy-integral=1e+308: the bound overflows float64"
    )


def test_cli_is_registered_and_the_demo_is_deterministic(capsys):
    assert "performative" in [mod.NAME for mod in cli._load_commands()]
    assert cli.main(["performative", "--kind", "rademacher", "--shares", "0.05"]) == 0
    assert "population_performative" in capsys.readouterr().out
    text = _cli.demo(np.random.default_rng(0))
    assert "Thm 3.13 bound (paper constants) at shares 0.01 / 0.1 / 0.5: 181.8 / 85.0 / 79.0" in text
    assert text == _cli.demo(np.random.default_rng(1))


def test_plot_bound_terms(tmp_path):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    from certkit.plot import plot_bound_terms

    shares = [0.05, 0.1, 0.2]
    kw = {
        "n": 1000,
        "diameter": 5.29,
        "loss_lipschitz": 28**0.5,
        "model_lipschitz": 0.25,
        "entropy_integral": 7.3855,
        "loss_range": 1.0,
    }
    bounds = [generalization_bound(kind="thm3.13", share=r, **kw) for r in shares]
    ax = plot_bound_terms(shares, bounds, title="t", log_scale=True)
    labels = [line.get_label() for line in ax.get_lines()]
    assert labels == ["total bound", "complexity term", "sampling term", "performative term"]
    np.testing.assert_allclose(ax.get_lines()[0].get_ydata(), [b.total for b in bounds])
    ax.figure.savefig(tmp_path / "f.png")
    with pytest.raises(ValueError, match="one result per share"):
        plot_bound_terms(shares[:2], bounds)
    with pytest.raises(ValueError, match=r"shares must lie in \[0, 1\]"):
        plot_bound_terms([0.1, 2.0, 0.3], bounds)


def test_example_runs(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    spec = importlib.util.spec_from_file_location(
        "performative_jobs", ROOT / "examples" / "performative_jobs.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out_png = tmp_path / "jobs.png"
    assert module.main(["x", str(out_png)]) == 0
    assert out_png.stat().st_size > 10_000
    assert "largest share keeping the Rademacher bound" in capsys.readouterr().out
