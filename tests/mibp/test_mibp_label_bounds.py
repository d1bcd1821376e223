"""The box carry's per-row gradient bounds under label flips with cross-entropy: a changed label is one class,
so the last hidden derivative is bounded label by label (the hull over the labels a row may take), not only
through the box of the output derivative, whose entries would all move at once."""

import numpy as np
import pytest

from certkit.mibp import MLP
from certkit.mibp.enclosures.interval import (
    allowed_labels,
    interval_backward,
    interval_forward,
    interval_gradients,
    output_derivative,
)


@pytest.mark.parametrize("sizes", [[3, 8, 5], [3, 8, 6, 5]])
@pytest.mark.parametrize(("labels", "target"), [("other", None), ("any", None), ("other", 2)])
def test_changed_labels_are_bounded_label_by_label(sizes, labels, target):
    """Parameters sampled in the box (corners included) and every label a row may take: the true per-row
    gradient lies in the bounds; with any other label allowed, the first layer's bounds are far narrower
    than those of the output derivative's box alone."""
    gen = np.random.default_rng(len(sizes))
    C = sizes[-1]
    model = MLP.random(sizes, rng=1)
    v = model.to_vector()
    r = 0.02 * gen.random(v.size)
    lower, upper = MLP.from_vector(v - r, model.sizes), MLP.from_vector(v + r, model.sizes)
    X = gen.normal(size=(12, 3))
    y = gen.integers(0, C, 12)
    gL, gU = interval_gradients(lower, upper, X, X, y, "cross_entropy", labels, target=target)
    allowed = allowed_labels(y, np.arange(C), labels, target)
    for draw in range(40):
        pick = gen.random(v.size) < 0.5 if draw % 2 else gen.random(v.size)
        theta = MLP.from_vector(np.where(draw % 2, np.where(pick, v - r, v + r), v - r + 2 * r * pick), sizes)
        for i in range(12):
            for a in np.flatnonzero(allowed[i]):
                g = theta._gradient_vector(X[i : i + 1], np.array([a]), "cross_entropy")
                assert np.all(gL[i] <= g) and np.all(g <= gU[i])
    if labels == "other" and target is None:
        acts, pre = interval_forward(lower, upper, X, X)
        out = output_derivative(lower, upper, acts, pre, y, "cross_entropy", labels)
        oL, oU, _ = interval_backward(lower, upper, acts, pre, out, y, "cross_entropy")
        first = slice(0, 3 * 8)
        assert np.all(oL <= gL) and np.all(gU <= oU)
        assert (gU - gL)[:, first].mean() < 0.6 * (oU - oL)[:, first].mean()
