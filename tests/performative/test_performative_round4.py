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
