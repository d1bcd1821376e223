"""Issue 23: silent infinities, overflows, the Rademacher intercept, vacuous bounds and the command line's
option checks of certkit.performative."""

from __future__ import annotations

import argparse
import math

import numpy as np
import pytest

from certkit.performative import (
    _cli,
    generalization_bound,
    max_affected_share,
    retraining_bound,
    wasserstein_risk,
)

PAPER = {"n": 445, "loss_lipschitz": math.sqrt(28), "entropy_integral": 7.3855, "loss_range": 1.0}
KIND_EXTRA = {"thm3.13": {"model_lipschitz": 0.25}, "thm3.15": {"wasserstein_constant": 0.001}}
RETRAIN = {"n": 100, "share": 0.1, "diameter": 1.0, "loss_lipschitz": 1.0, "map_lipschitz": 1.0,
           "dimension": 2.0}


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("direction", ["sup", "inf"])
def test_wasserstein_risk_huge_intercept_is_an_error_naming_intercept(p, direction):
    X, y, theta = np.array([[1.0, 0.0], [0.0, 2.0]]), np.array([-1.0, -1.0]), np.array([1.0, -1.0])
    with pytest.raises(ValueError, match=r"^intercept=1e\+308 is too large: the risk overflows float64"):
        wasserstein_risk(theta, X, y, loss="hinge", radius=0.1, p=p, intercept=1e308, direction=direction)


def test_wasserstein_risk_large_finite_values_are_still_computed():
    X, y, theta = np.array([[1.0, 0.0], [0.0, 2.0]]), np.array([1.0, -1.0]), np.array([1.0, -1.0])
    value = wasserstein_risk(theta, X, y, loss="hinge", radius=0.1, p=2, intercept=1e100)
    assert value == pytest.approx(0.5e100, rel=1e-9)  # hinge 1 + 1e100 on the negative row, 0 on the other


@pytest.mark.parametrize("kind", ["thm3.13", "thm3.15"])
@pytest.mark.parametrize(("share", "diameter", "zero"), [(0.0, 5.29, "share=0"), (0.1, 0.0, "diameter=0")])
def test_zero_radius_is_an_error_not_inf(kind, share, diameter, zero):
    with pytest.raises(ValueError, match=rf"^{zero} gives the radius R = 0.*infinite.*vacuous"):
        generalization_bound(kind=kind, share=share, diameter=diameter, **PAPER, **KIND_EXTRA[kind])


def test_thm3_13_zero_radius_with_p_1_is_finite():
    bound = generalization_bound(kind="thm3.13", share=0.0, diameter=5.29, p=1, **PAPER,
                                 **KIND_EXTRA["thm3.13"])
    assert math.isfinite(bound.total)


@pytest.mark.parametrize("kind", ["thm3.13", "thm3.15"])
def test_huge_diameter_is_the_same_clear_error_for_both_kinds(kind):
    with pytest.raises(ValueError, match=r"^diameter=1e\+308.*overflows float64.*vacuous"):
        generalization_bound(kind=kind, share=0.1, diameter=1e308, **PAPER, **KIND_EXTRA[kind])


def test_max_affected_share_still_skips_share_zero():
    kw = {**PAPER, **KIND_EXTRA["thm3.13"], "diameter": 5.29}
    share = max_affected_share(80.0, kind="thm3.13", **kw)
    assert 0 < share < 1
    assert generalization_bound(kind="thm3.13", share=share, **kw).total <= 80.0


def test_retraining_many_rounds_is_a_clear_error_or_exact():
    with pytest.raises(ValueError, match=r"^n_rounds=1000000 is too large for contraction=2.0"):
        retraining_bound(contraction=2.0, n_rounds=10**6, **RETRAIN)
    # κ = 1: T - 1 terms of L; κ < 1: the geometric series' limit L / (1 - κ), both without a loop over T
    flat = retraining_bound(contraction=1.0, n_rounds=10**12, **RETRAIN)
    assert flat.terms["performative"] == pytest.approx((10**12 - 1) * 0.1**0.5, rel=1e-12)
    shrinking = retraining_bound(contraction=0.5, n_rounds=10**12, **RETRAIN)
    assert shrinking.terms["performative"] == pytest.approx(2.0 * 0.1**0.5, rel=1e-12)
    # the closed form beyond 10,000 rounds continues the exact sum
    a = retraining_bound(contraction=1.0001, n_rounds=10_001, **RETRAIN).terms["performative"]
    b = retraining_bound(contraction=1.0001, n_rounds=10_002, **RETRAIN).terms["performative"]
    assert b - a == pytest.approx(1.0001**10_000 * 0.1**0.5, rel=1e-9)


def test_rademacher_accepts_the_fitted_intercept():
    X, y, theta, b = _cli.lalonde_model()
    kw = {"kind": "rademacher", "theta": theta, "X": X, "y": y, "loss": "logistic", "share": 0.1,
          "diameter": 2.0, "weight_norm": 5.0, "feature_norm": math.sqrt(X.shape[1])}
    with_b = generalization_bound(intercept=b, **kw)
    true_risk = float(np.logaddexp(0.0, -y * (X @ theta + b)).mean())
    assert with_b.assumptions["empirical_risk"] == pytest.approx(true_risk, rel=1e-12)
    assert with_b.assumptions["empirical_risk"] == pytest.approx(0.5911, abs=1e-4)
    best = wasserstein_risk(theta, X, y, loss="logistic", radius=0.1**0.5 * 2.0, p=2, direction="inf",
                            intercept=b)
    assert with_b.terms["sample_performative"] == pytest.approx(true_risk - best, rel=1e-9)
    # the affine class: ||(theta, b)|| <= Lambda and the features augmented by 1 in the complexity term
    assert with_b.terms["complexity"] == pytest.approx(2 * 5.0 * math.hypot(math.sqrt(X.shape[1]), 1.0)
                                                       / math.sqrt(X.shape[0]))
    with pytest.raises(ValueError, match=r"\|\|\(theta, intercept\)\|\|_2 = .* exceeds weight_norm"):
        generalization_bound(intercept=10.0, **kw)
    with pytest.raises(TypeError, match="does not use intercept"):
        generalization_bound(kind="thm3.13", share=0.1, diameter=5.29, intercept=b, **PAPER,
                             **KIND_EXTRA["thm3.13"])


def test_summary_says_vacuous_above_the_loss_range():
    vacuous = generalization_bound(kind="thm3.13", share=0.1, diameter=5.29, **PAPER, **KIND_EXTRA["thm3.13"])
    assert vacuous.total > 1.0 and vacuous.vacuous
    assert "vacuous: the total 84.99 exceeds the loss range 1" in vacuous.summary()
    tight = generalization_bound(kind="thm3.13", share=0.1, diameter=5.29,
                                 **{**PAPER, "n": 10**9, "loss_range": 100.0}, **KIND_EXTRA["thm3.13"])
    assert not tight.vacuous and "vacuous" not in tight.summary()


# ------------------------------------------------------------------------------------------ command line
def _run(capsys, *argv):
    parser = argparse.ArgumentParser()
    _cli.add_arguments(parser)
    status = _cli.run(parser.parse_args(list(argv)))
    out = capsys.readouterr()
    return status, out.out, out.err


def _error(capsys, *argv):
    status, _, err = _run(capsys, *argv)
    assert status == 2 and err.count("\n") == 1 and err.startswith("certkit performative: error: ")
    return err


def test_cli_empty_shares_is_an_error(capsys):
    assert "--shares must list at least one share" in _error(capsys, "--shares", "")


@pytest.mark.parametrize(
    ("argv", "flags"),
    [
        (("--kind", "rademacher", "--n", "0"), "--n"),
        (("--kind", "rademacher", "--diameter", "2"), "--diameter"),
        (("--kind", "thm3.13", "--weight-norm", "3"), "--weight-norm"),
        (("--kind", "thm3.13", "--wasserstein-constant", "1"), "--wasserstein-constant"),
        (("--kind", "thm3.15", "--model-lipschitz", "1"), "--model-lipschitz"),
    ],
)
def test_cli_rejects_options_the_kind_does_not_use(capsys, argv, flags):
    assert f"does not use {flags}" in _error(capsys, *argv)


def test_cli_zero_share_and_huge_diameter_are_errors(capsys):
    assert "share=0 gives the radius R = 0" in _error(capsys, "--shares", "0,0.1")
    assert "--diameter=1e+308" in _error(capsys, "--kind", "thm3.15", "--diameter", "1e308")


def test_cli_flags_vacuous_totals_and_uses_the_intercept(capsys):
    status, out, _ = _run(capsys, "--shares", "0.1")
    assert status == 0 and "vacuous (total above the loss range 1) at shares 0.1" in out
    status, out, _ = _run(capsys, "--kind", "rademacher", "--shares", "0.1", "--weight-norm", "5")
    assert status == 0 and "vacuous" not in out
