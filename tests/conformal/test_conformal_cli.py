"""The ``certkit conformal`` subcommand module and its demo section."""

from __future__ import annotations

import argparse

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
