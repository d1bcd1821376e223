"""The whole-run budget (``scope="run"``) and the per-batch one (``scope="batch"``) of `LabelFlips`, `Budget`
and `Removals`: exact oracles that retrain every allowed dataset with several batches per epoch and shuffling,
the box carry's bound holding for both, and the keyword's checks."""

import itertools

import numpy as np
import pytest

from certkit.mibp import (
    MLP,
    Budget,
    FeatureBox,
    LabelFlips,
    Removals,
    certified_training,
)
from certkit.mibp.certification.cases import allowed_row_sets

GEN = np.random.default_rng(8)
X = GEN.normal(size=(9, 2))
Y = np.array([0, 1, 2, 0, 1, 2, 1, 0, 2])
RECIPE = dict(epochs=2, learning_rate=0.05, batch_size=3, shuffle=True, rng=4)


def _inside(res, path):
    for t in range(1, res.epochs + 1):
        v = path[t].to_vector()
        assert np.all(res.lower[t].to_vector() <= v) and np.all(v <= res.upper[t].to_vector()), t


@pytest.mark.parametrize("scope", ["run", "batch"])
def test_every_flip_set_of_the_scope_stays_in_the_box_carrys_boxes(scope):
    """Exact oracle: a network with a hidden layer (the box carry), 3 batches per epoch, shuffled; every set
    of changed labels the scope allows, each any other class, retrained."""
    model = MLP.random([2, 3, 3], rng=0)
    res = certified_training(
        model, X, Y, perturbation=LabelFlips(1, scope=scope), loss="cross_entropy", **RECIPE
    )
    assert res.carry == "box"
    count = 0
    for rows in allowed_row_sets(len(X), 1, scope, res.recipe):
        for labels in itertools.product(*[[c for c in range(3) if c != Y[j]] for j in rows]):
            y2 = Y.copy()
            y2[list(rows)] = labels
            _inside(res, model.run(X, y2, res.recipe))
            count += 1
    assert count == 1 + 9 * 2 if scope == "run" else count > 1 + 9 * 2
    assert np.max(res.upper[-1].to_vector() - res.lower[-1].to_vector()) < 1.0  # not a vacuous box


@pytest.mark.parametrize("scope", ["run", "batch"])
def test_every_removal_set_of_the_scope_stays_in_the_boxes(scope):
    """Exact oracle: every set of removed rows the scope allows (the batches without them), retrained."""
    model = MLP.random([2, 3, 3], rng=1)
    res = certified_training(
        model, X, Y, perturbation=Removals(1, scope=scope), loss="cross_entropy", **RECIPE
    )
    count = 0
    for rows in allowed_row_sets(len(X), 1, scope, res.recipe):
        _inside(res, model.run(X, Y, res.recipe.without(rows)))
        count += 1
    assert count == 10 if scope == "run" else count > 10


@pytest.mark.parametrize("scope", ["run", "batch"])
def test_every_vertex_of_a_scoped_feature_budget_stays_in_the_boxes(scope):
    """Exact oracle: every vertex of the input box of every row set the scope allows (the extremes of a
    one-row feature budget), retrained."""
    model = MLP.random([2, 3, 3], rng=2)
    pert = Budget(FeatureBox(0.1), 1, scope=scope)
    res = certified_training(model, X, Y, perturbation=pert, loss="cross_entropy", **RECIPE)
    for rows in itertools.islice(allowed_row_sets(len(X), 1, scope, res.recipe), 0, 40):
        for signs in itertools.product((-1.0, 1.0), repeat=2 * len(rows)):
            X2 = X.copy()
            X2[list(rows)] += 0.1 * np.reshape(signs, (len(rows), 2))
            _inside(res, model.run(X2, Y, res.recipe))


def test_the_scope_is_checked_and_shown():
    for make in (
        lambda s: LabelFlips(1, scope=s),
        lambda s: Removals(1, scope=s),
        lambda s: Budget(FeatureBox(0.1), 1, scope=s),
    ):
        with pytest.raises(ValueError, match=r"scope must be 'batch' .* or 'run'"):
            make("epoch")
        with pytest.raises(ValueError, match="scope must be"):
            make(None)
        assert "scope='run'" in repr(make("run")) and "scope" not in repr(make("batch"))
    assert LabelFlips(2, scope="run").sets(X).scope == "run"
    assert Budget(FeatureBox(0.1) & LabelFlips(1), 2, scope="run").sets(X).scope == "run"


def test_the_attack_samples_the_larger_sets_the_batch_scope_allows():
    """The soundness attack's per-batch label-flip sets: at most k rows in every batch, maximal (no row can
    join), and more than k rows in all where batches split the epoch or leave rows out."""
    from certkit.mibp.certification.attack import _batch_scope_rows
    from certkit.mibp.problem.recipe import make_recipe

    gen = np.random.default_rng(0)
    for options in (
        dict(batch_size=3, shuffle=True, rng=4),
        dict(batch_size=6, drop_last=True, shuffle=True, rng=1),
    ):
        recipe = make_recipe(9, loss="cross_entropy", epochs=2, learning_rate=0.1, **options)
        batches = [set(b.tolist()) for b in recipe.batches]
        sizes = set()
        for _ in range(50):
            rows = set(_batch_scope_rows(recipe, 9, 1, gen.permutation(9)).tolist())
            assert all(len(b & rows) <= 1 for b in batches)
            assert all(any(len(b & (rows | {r})) > 1 for b in batches) for r in set(range(9)) - rows)
            sizes.add(len(rows))
        assert max(sizes) > 1
