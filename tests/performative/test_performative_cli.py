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


def _write(path, header, rows):
    path.write_text(header + "\n" + "\n".join(",".join(str(v) for v in row) for row in rows) + "\n")
    return str(path)


def test_data_takes_the_class_names_mibp_takes_and_says_where_the_labels_are(tmp_path, capsys):
    """Issue 43 item 4: one reader of a labelled CSV for both commands. performative refused class names
    that mibp took on the same file, and with the label column first it did not suggest --label."""
    gen = np.random.default_rng(0)
    X = gen.normal(size=(80, 2))
    employed = X[:, 0] + 0.5 * gen.normal(size=80) > 0
    names = _write(tmp_path / "names.csv", "outcome,a,b",
                   [("yes" if e else "no", a, b) for e, (a, b) in zip(employed, X)])
    coded = _write(tmp_path / "coded.csv", "outcome,a,b", [(int(e), a, b) for e, (a, b) in zip(employed, X)])
    out = {}
    for path in (names, coded):
        assert cli.main(["performative", "--data", path, "--label", "outcome", "--shares", "0.1"]) == 0
        out[path] = re.sub(rf"{re.escape(path)}|\(\d+\.\d+ s\)", "", capsys.readouterr().out)
    assert out[names] == out[coded] and "on its 80 rows" in out[names]  # "yes" is +1, as 1 is
    assert cli.main(["mibp", "--data", names, "--label", "outcome"]) == 0
    assert "names.csv (label column 'outcome')" in capsys.readouterr().out
    # the label column first, no --label: both commands say where the labels were looked for, alike
    errors = []
    for command in ("performative", "mibp"):
        assert cli.main([command, "--data", coded]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"certkit {command}: error: --data: the labels (label column 'b') must be ")
        errors.append(err.split(": error: ")[1])
    assert errors[0] == errors[1]
    assert errors[0].endswith(
        "; the label column is the last, 'b', unless --label names another of ['outcome', 'a', 'b']\n"
    )
    assert cli.main(["performative", "--data", names]) == 2  # text in a feature column: the same hint
    assert capsys.readouterr().err == (
        f"certkit performative: error: {names} line 2, column 'outcome': {'yes' if employed[0] else 'no'!r} "
        "is not a number; the label column is the last, 'b', unless --label names another of "
        "['outcome', 'a', 'b']\n"
    )
    three = _write(tmp_path / "three.csv", "a,b,y", [(a, b, "abc"[i % 3]) for i, (a, b) in enumerate(X)])
    assert cli.main(["performative", "--data", three]) == 2
    assert capsys.readouterr().err == (
        "certkit performative: error: --data labels must be two classes coded 0/1 or -1/+1, got values "
        "['a', 'b', 'c']; or two class names (text), the later in sorted order taken as +1\n"
    )


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
