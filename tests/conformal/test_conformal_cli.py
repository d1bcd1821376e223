"""The ``certkit conformal`` subcommand module and its demo section."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from certkit.conformal import _cli


def _rows(text):
    return {line.split("  ")[0].strip(): line for line in text.splitlines() if "  " in line}


def test_cli_module_shape_and_run(capsys):
    assert _cli.NAME == "conformal" and _cli.HELP
    parser = argparse.ArgumentParser()
    _cli.add_arguments(parser)
    args = parser.parse_args(["--method", "rcp1", "--method", "noisy", "--radius", "0.1",
                              "--attack-steps", "2", "--seed", "1"])
    assert _cli.run(args) == 0
    out = capsys.readouterr().out
    assert "radius=0.1" in out
    rows = [line.split() for line in out.splitlines() if line.strip().startswith(("RCP1", "noisy"))]
    assert len(rows) == 2
    rcp1 = next(r for r in rows if r[0] == "RCP1")
    size, cov, passes = float(rcp1[1]), float(rcp1[2]), float(rcp1[5])
    assert 1.0 <= size <= 10.0 and 0.0 <= cov <= 1.0 and passes == 1.0


def test_demo_is_deterministic_and_lists_methods():
    a = _cli.demo(np.random.default_rng(0))
    b = _cli.demo(np.random.default_rng(0))
    # timing columns differ between runs; compare everything else
    def strip(text):
        return [line.split()[:-1] for line in text.splitlines()[3:]]

    assert strip(a) == strip(b)
    for name in ("RCP1", "noisy CP", "BinCP"):
        assert name in a


def test_plugs_into_the_certkit_command(capsys):
    from certkit import cli

    assert "certkit.conformal._cli" in cli._COMMANDS
    assert cli.main(["conformal", "--method", "rcp1", "--attack-steps", "0", "--sigma", "0.5",
                     "--radius", "0.25", "--confidence-level", "0.8"]) == 0
    out = capsys.readouterr().out
    assert "RCP1" in out and "confidence_level=0.8" in out and "no attack" in out
    assert cli.main(["demo", "--only", "conformal"]) == 0
    assert "== conformal" in capsys.readouterr().out


def test_trivial_method_is_flagged_and_defaults_are_informative():
    rng = np.random.default_rng(0)
    few = _cli.compare(sigma=0.25, radius=0.125, confidence_level=0.9, methods=("rcp1", "rscp+"),
                       n_samples=16, attack_steps=0, rng=rng)
    assert "RSCP+ (n_s=16) *" in few and "* trivial: every prediction set holds all 10 labels" in few
    parser = argparse.ArgumentParser()
    _cli.add_arguments(parser)
    args = parser.parse_args([])
    table = _cli.compare(sigma=args.sigma, radius=args.radius, confidence_level=args.confidence_level,
                         methods=("rscp+",), score=args.score, n_samples=args.n_samples, attack_steps=0,
                         rng=np.random.default_rng(args.seed))
    assert "trivial" not in table and " *" not in table
    size = float(_rows(table)[f"RSCP+ (n_s={args.n_samples})"].split()[2])
    assert size < 10


def test_without_torch_the_table_has_no_nan_and_says_what_torch_adds(monkeypatch):
    def numpy_model(coef, intercept):  # what _linear_model returns when torch is not installed
        return (lambda X: X @ coef.T + intercept), False

    monkeypatch.setattr(_cli, "_linear_model", numpy_model)
    text = _cli.compare(sigma=0.25, radius=0.125, confidence_level=0.9, methods=("noisy", "rcp1"),
                        attack_steps=5, rng=np.random.default_rng(0))
    assert "nan" not in text and "attacked" not in text.splitlines()[1]
    assert 'pip install "certkit[torch]" adds the attacked columns' in text


def _iris_csv(path):
    from certkit.datasets import load_iris

    iris = load_iris()
    names = np.array(iris.target_names)[iris.y]
    rows = [f"{name}," + ",".join(f"{v:g}" for v in x) for name, x in zip(names, iris.X)]
    path.write_text("species,sl,sw,pl,pw\n" + "\n".join(rows) + "\n")
    return str(path), iris.X, names


def test_data_takes_a_users_labelled_file(tmp_path, capsys):
    """Issue 43 item 4: certkit conformal could not take a user's data; --data FILE --label COLUMN read as
    certkit mibp and certkit performative read it, the same model and report as for digits."""
    from certkit import cli

    path, X, names = _iris_csv(tmp_path / "iris.csv")
    argv = ["conformal", "--label", "species", "--attack-steps", "2", "--radius", "0.1", "--seed", "3"]
    assert cli.main([*argv, "--data", path]) == 0
    out = capsys.readouterr().out
    title, header = out.splitlines()[:2]
    assert title.startswith("iris.csv (label column 'species'), nearest-centroid softmax; sigma=0.25, "
                            "radius=0.1")
    assert "67 calibration / 33 test points; attack: smoothed PGD, 2 steps" in title  # 50 / 67 / 33 of 150
    assert header.split() == ["method", "size", "coverage", "size", "(attacked)", "coverage", "(attacked)",
                              "passes/input", "ms/input"]
    methods = ["split CP (clean)", "noisy CP (uncorrected)", "RCP1", "BinCP (m=256)", "RSCP+ (n_s=256)"]
    rows = {line.strip()[: len(m)]: line for line in out.splitlines()[3:] for m in methods if m in line}
    assert list(rows) == methods
    size, coverage = (float(v) for v in rows["RCP1"].split()[1:3])
    assert 1.0 <= size <= 3.0 and coverage >= 0.85  # 3 classes; 90% coverage, on 33 test points
    # the same rows as an .npz archive (class names as y): the same table but for its title and timings
    np.savez(tmp_path / "iris.npz", X=X, y=names)
    assert cli.main([*argv[:1], *argv[3:], "--data", str(tmp_path / "iris.npz")]) == 0
    npz = capsys.readouterr().out
    assert "iris.npz (arrays X and y)" in npz

    def table(text):
        return [line.split()[:-1] for line in text.splitlines()[3:]]

    assert table(npz) == table(out)


def test_data_mistakes_are_one_line(tmp_path, capsys):
    from certkit import cli

    path = _iris_csv(tmp_path / "iris.csv")[0]
    cases = [
        (["--label", "species"], "--label names a column of a --data CSV file"),
        (["--data", path], f"{path} line 2, column 'species': 'setosa' is not a number; the label column "
                           "is the last, 'pw', unless --label names another of ['species', 'sl', 'sw', 'pl', "
                           "'pw']"),
        (["--data", path, "--label", "kind"], "--label 'kind' is not a column of the CSV file; its columns "
                                              "are ['species', 'sl', 'sw', 'pl', 'pw']"),
    ]
    lone = tmp_path / "lone.csv"  # one row of a fourth class: it cannot be in the training third
    lone.write_text(Path(path).read_text() + "emu,5,3,2,1\n")
    cases.append((["--data", str(lone), "--label", "species", "--seed", "0"],
                  "--data: the class 'emu' has no row among the 50 that train the model (a third of the "
                  "rows, drawn with --seed; it has 1 of 151): give more rows of it, or leave it out"))
    two = tmp_path / "two.csv"
    two.write_text("a,y\n1,0\n2,1\n")
    cases.append((["--data", str(two)], f"--data: {two} has 2 rows; it needs at least 3 (to train, calibrate "
                                        "and test)"))
    for argv, message in cases:
        assert cli.main(["conformal", *argv]) == 2, argv
        captured = capsys.readouterr()
        assert captured.out == "" and captured.err == f"certkit conformal: error: {message}\n", argv
