"""Issue 30: performative bounds and the command line, round 4 of first use and fuzzing."""

from __future__ import annotations

import math

import numpy as np
import pytest

from certkit.performative import _cli, generalization_bound


def _rademacher_kw():
    X, y, theta, b = _cli.lalonde_model()
    return {"kind": "rademacher", "theta": theta, "X": X, "y": y, "loss": "logistic", "share": 0.1,
            "diameter": 2.0, "weight_norm": 5.0, "feature_norm": math.sqrt(X.shape[1]), "intercept": b}


def test_rademacher_refuses_a_loss_bound_below_the_observed_losses():
    kw = _rademacher_kw()
    with pytest.raises(ValueError, match=r"^loss_bound = 0 is below the largest logistic loss on the sample "
                                         r"\(.*\); loss_bound must bound the loss over the whole class"):
        generalization_bound(loss_bound=0.0, **kw)
    largest = float(np.logaddexp(0.0, -kw["y"] * (kw["X"] @ kw["theta"] + kw["intercept"])).max())
    res = generalization_bound(loss_bound=largest, **kw)  # the largest observed loss is accepted
    assert res.terms["sampling"] > 0


def test_overflowing_norms_are_named_on_the_command_line(capsys):
    from certkit.cli import main

    assert main(["performative", "--kind", "rademacher", "--weight-norm", "1e308"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        "certkit performative: error: --weight-norm = 1e+308 times feature_norm = ")
    assert "overflows float64" in err[0]


def test_zero_radius_is_a_plain_value_error():
    kw = {"n": 1000, "diameter": 5.29, "loss_lipschitz": 28**0.5, "model_lipschitz": 0.25,
          "entropy_integral": 7.3855, "loss_range": 1.0}
    with pytest.raises(ValueError, match=r"share=0 gives the radius R = 0") as info:
        generalization_bound(kind="thm3.13", share=0.0, **kw)
    assert type(info.value) is ValueError
