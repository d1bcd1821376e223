"""The influence enclosure (``carry="influence"``, the default's choice for linear models under label flips):
exact oracles that retrain every allowed dataset, both scopes, every recipe option it bounds, float
summation orders, attacks, the automatic choice and where it gives up."""

import itertools

import numpy as np
import pytest

from certkit.mibp import (
    MLP,
    FeatureBox,
    LabelFlips,
    Removals,
    certified_training,
    certify_predictions,
)
from certkit.mibp.certification.attack import attack_violation
from certkit.mibp.certification.cases import allowed_row_sets


def _data(n, d, C, seed):
    gen = np.random.default_rng(seed)
    X = gen.normal(size=(n, d))
    if C == 1:
        return X, (X[:, 0] + 0.5 * gen.normal(size=n) > 0).astype(float)
    W = gen.normal(size=(C, d))
    return X, np.argmax(X @ W.T + 0.5 * gen.normal(size=(n, C)), axis=1)


def _allowed(y, classes, k, scope, recipe, target=None):
    """Every labelling the perturbation allows: at most k changed labels (scope='run'), or at most k in every
    batch of the run's batch order (scope='batch'); each changed label any other class (or the target)."""
    for rows in allowed_row_sets(len(y), k, scope, recipe):
        options = [[c for c in classes if c != y[j] and (target is None or c == target)] for j in rows]
        for labels in itertools.product(*options):
            y2 = y.copy()
            y2[list(rows)] = labels
            yield y2


def _margins(model, X, pred):
    f = model.forward(X)
    if f.shape[1] == 1:
        return np.where(pred > 0, f[:, 0], -f[:, 0])
    own = f[np.arange(len(X)), pred]
    f = f.copy()
    f[np.arange(len(X)), pred] = -np.inf
    return own - f.max(axis=1)


def _oracle(res, X, y, classes, k, scope, X_test, target=None):
    """Retrain every allowed dataset: the largest excess over the boxes (every epoch) and, per test point, the
    smallest margin of the nominal prediction over the allowed datasets."""
    pred = res.nominal.predict(X_test)
    excess, smallest = -np.inf, np.full(len(X_test), np.inf)
    count = 0
    for y2 in _allowed(y, classes, k, scope, res.recipe, target):
        path = res.nominal_path[0].run(X, y2, res.recipe)
        for t in range(1, res.epochs + 1):
            v = path[t].to_vector()
            lo, hi = res.lower[t].to_vector(), res.upper[t].to_vector()
            excess = max(excess, float(np.max(np.maximum(lo - v, v - hi))))
        smallest = np.minimum(smallest, _margins(path[-1], X_test, pred))
        count += 1
    return excess, smallest, count


CASES = [  # (n, C, k, scope, recipe options)
    (30, 3, 1, "run", dict(epochs=3, learning_rate=0.5)),
    (24, 3, 2, "run", dict(epochs=2, learning_rate=0.4, weight_decay=0.05)),
    (30, 3, 1, "run", dict(epochs=3, learning_rate=0.3, momentum=0.5)),
    (30, 1, 2, "run", dict(epochs=3, learning_rate=0.8)),
    (36, 3, 1, "run", dict(epochs=2, learning_rate=0.2, batch_size=12, shuffle=True, rng=3)),
    (36, 3, 1, "batch", dict(epochs=2, learning_rate=0.2, batch_size=18)),
    (36, 1, 1, "batch", dict(epochs=2, learning_rate=0.4, batch_size=12, shuffle=True, rng=1)),
    # one step per epoch on part of the rows: the batch scope lets rows left out in different epochs change
    (10, 3, 1, "batch", dict(epochs=2, learning_rate=0.3, batch_size=7, shuffle=True, drop_last=True, rng=1)),
    (10, 3, 1, "batch", dict(epochs=2, learning_rate=0.3, batches=[[np.arange(7)], [np.arange(3, 10)]])),
    (12, 1, 1, "batch", dict(epochs=3, learning_rate=0.2, batch_size=8, shuffle=True, drop_last=True, rng=2)),
]


@pytest.mark.parametrize(("n", "C", "k", "scope", "options"), CASES)
def test_every_allowed_dataset_retrained_stays_in_the_boxes_and_keeps_certified_predictions(
    n, C, k, scope, options
):
    """Exact oracle: every labelling the perturbation allows (both scopes, with mini-batches, shuffling,
    momentum, weight decay, one output) retrained by `MLP.train`; its parameters lie in every epoch's box
    and every certified test prediction is the retrained model's; the certificate is close to the truth."""
    X, y = _data(n, 3, C, seed=n + C + k)
    loss = "cross_entropy" if C > 1 else "binary_cross_entropy"
    res = certified_training(
        MLP.random([3, C], rng=1), X, y, perturbation=LabelFlips(k, scope=scope), loss=loss, **options
    )
    assert res.carry == "influence" and res.auto_carry and res.influence is not None
    X_test = np.random.default_rng(0).normal(size=(40, 3))
    cert = certify_predictions(res, X_test)
    classes = list(range(C)) if C > 1 else [0.0, 1.0]
    excess, smallest, count = _oracle(res, X, y, classes, k, scope, X_test)
    assert count > n  # the enumeration covered every allowed labelling
    assert excess <= 0.0, f"a retrained run leaves its box by {excess}"
    assert np.all(smallest >= cert.margin_lower, where=cert.certified)
    assert np.all(smallest[cert.certified] > 0)
    stable = np.mean(smallest > 0)
    assert np.mean(cert.certified) >= stable - 0.2 and np.mean(cert.certified) > 0.3


@pytest.mark.parametrize(
    "order",
    [
        dict(batch_size=6, shuffle=True, drop_last=True, rng=1),
        dict(batches=[[np.arange(6)], [np.arange(2, 8)]]),
    ],
)
def test_one_partial_batch_per_epoch_lets_the_left_out_rows_change_too(order):
    """The per-batch budget with one step per epoch on part of the rows: a fixed set may change a row that
    epoch 1 leaves out and one that epoch 2 leaves out (more than k rows in all); every such labelling of 8
    rows retrained stays in the boxes and keeps the certified predictions (a top-k over all rows did not)."""
    gen = np.random.default_rng(1)
    X, y = gen.normal(size=(8, 2)) * 2.0, gen.integers(0, 3, 8)
    res = certified_training(
        MLP.random([2, 3], rng=1),
        X,
        y,
        perturbation=LabelFlips(1),
        loss="cross_entropy",
        epochs=2,
        learning_rate=0.3,
        **order,
    )
    assert res.carry == "influence" and res.recipe.steps_per_epoch == 1
    X_test = gen.normal(size=(200, 2)) * 2.0
    cert = certify_predictions(res, X_test)
    excess, smallest, count = _oracle(res, X, y, [0, 1, 2], 1, "batch", X_test)
    assert count > 1 + 8 * 2  # sets of two changed rows were retrained
    assert excess <= 0.0, f"a retrained run leaves its box by {excess}"
    assert np.all(smallest >= cert.margin_lower, where=cert.certified) and np.mean(cert.certified) > 0.3


def test_targeted_flips_and_the_scopes_nest():
    """Targeted flips retrained exactly; the run scope's bound is never looser than the batch scope's (it
    allows fewer datasets), and with the full batch both are the same."""
    X, y = _data(30, 3, 3, seed=5)
    kw = dict(loss="cross_entropy", epochs=2, learning_rate=0.4)
    res = certified_training(MLP.random([3, 3], rng=1), X, y, perturbation=LabelFlips(1, target=2), **kw)
    X_test = np.random.default_rng(1).normal(size=(30, 3))
    cert = certify_predictions(res, X_test)
    excess, smallest, _ = _oracle(res, X, y, [0, 1, 2], 1, "run", X_test, target=2)
    assert excess <= 0.0 and np.all(smallest[cert.certified] > 0)
    full = [
        certify_predictions(
            certified_training(MLP.random([3, 3], rng=1), X, y, perturbation=LabelFlips(2, scope=s), **kw),
            X_test,
        ).margin_lower
        for s in ("run", "batch")
    ]
    np.testing.assert_array_equal(full[0], full[1])
    mini = [
        certify_predictions(
            certified_training(
                MLP.random([3, 3], rng=1), X, y, perturbation=LabelFlips(1, scope=s), batch_size=10, **kw
            ),
            X_test,
        ).margin_lower
        for s in ("run", "batch")
    ]
    assert np.all(mini[0] >= mini[1])


def test_other_summation_orders_stay_inside():
    """The boxes hold the float run of any summation order: the same batches with their rows in another order
    (a user's DataLoader), retrained on allowed labellings, stay in the boxes."""
    X, y = _data(40, 4, 3, seed=7)
    res = certified_training(
        MLP.random([4, 3], rng=2),
        X,
        y,
        perturbation=LabelFlips(1),
        loss="cross_entropy",
        epochs=3,
        learning_rate=0.5,
        batch_size=20,
    )
    gen = np.random.default_rng(3)
    shuffled = [[gen.permutation(b) for b in res.recipe.batches[e * 2 : e * 2 + 2]] for e in range(3)]
    for y2 in itertools.islice(_allowed(y, [0, 1, 2], 1, "batch", res.recipe), 0, None, 97):
        other = certified_training(  # only the nominal run of this order matters here
            MLP.random([4, 3], rng=2),
            X,
            y2,
            perturbation=LabelFlips(0),
            loss="cross_entropy",
            learning_rate=0.5,
            batches=shuffled,
            carry="box",
        )
        for t in range(1, 4):
            assert res.contains(other.nominal_path[t], t)


def test_attacks_stay_inside_the_influence_boxes():
    X, y = _data(40, 3, 3, seed=9)
    pert = LabelFlips(2, scope="run")
    res = certified_training(
        MLP.random([3, 3], rng=0),
        X,
        y,
        perturbation=pert,
        loss="cross_entropy",
        epochs=3,
        learning_rate=0.5,
        batch_size=20,
        momentum=0.3,
    )
    assert res.carry == "influence"
    violation, count = attack_violation(res, X, y, pert, restarts=6, steps=4, rng=0)
    assert count >= 6 and violation <= 0.0


def test_the_default_chooses_the_carry_and_says_so():
    X, y = _data(30, 3, 3, seed=2)
    kw = dict(loss="cross_entropy", learning_rate=0.3, epochs=2)
    linear = certified_training(MLP.random([3, 3], rng=0), X, y, perturbation=LabelFlips(1), **kw)
    assert linear.carry == "influence" and "carry=influence (chosen by carry=auto)" in linear.summary()
    box = certified_training(MLP.random([3, 3], rng=0), X, y, perturbation=LabelFlips(1), carry="box", **kw)
    assert box.influence is None and not box.auto_carry
    # the influence boxes are inside the box carry's, and certify at least as much
    for t in range(1, 3):
        assert np.all(linear.lower[t].to_vector() >= box.lower[t].to_vector())
        assert np.all(linear.upper[t].to_vector() <= box.upper[t].to_vector())
    X_test = np.random.default_rng(4).normal(size=(50, 3))
    assert np.all(
        certify_predictions(linear, X_test).margin_lower >= certify_predictions(box, X_test).margin_lower
    )
    hidden = certified_training(MLP.random([3, 4, 3], rng=0), X, y, perturbation=LabelFlips(1), **kw)
    assert hidden.carry == "box" and hidden.auto_carry
    for model, pert, why in [
        (MLP.random([3, 4, 3], rng=0), LabelFlips(1), "a model with hidden layers"),
        (MLP.random([3, 3], rng=0), Removals(1), "this perturbation"),
        (MLP.random([3, 3], rng=0), FeatureBox(0.1) & LabelFlips(1), "moving inputs"),
    ]:
        with pytest.raises(ValueError, match=f"carry='influence' cannot bound {why}"):
            certified_training(model, X, y, perturbation=pert, carry="influence", **kw)
    with pytest.raises(ValueError, match="carry='influence' cannot bound per-sample clipping"):
        certified_training(
            MLP.random([3, 3], rng=0),
            X,
            y,
            perturbation=LabelFlips(1),
            carry="influence",
            clip_value=0.1,
            **kw,
        )


def test_it_gives_up_where_the_linearisation_breaks_and_the_box_carry_stands():
    """One flip in a batch of 4 rows at a large rate moves the model far from its linearisation: the enclosure
    stops (unbounded, no per-query bound) and the result is the box carry's."""
    X, y = _data(12, 2, 3, seed=1)
    kw = dict(loss="cross_entropy", learning_rate=2.0, epochs=4, batch_size=4)
    res = certified_training(MLP.random([2, 3], rng=0), X, y, perturbation=LabelFlips(1), **kw)
    box = certified_training(MLP.random([2, 3], rng=0), X, y, perturbation=LabelFlips(1), carry="box", **kw)
    assert res.influence.valid_steps < res.recipe.n_steps
    for t in range(res.influence.valid_steps // res.recipe.steps_per_epoch + 1, res.epochs + 1):
        np.testing.assert_array_equal(res.lower[t].to_vector(), box.lower[t].to_vector())
    X_test = np.random.default_rng(0).normal(size=(20, 2))
    np.testing.assert_array_equal(
        certify_predictions(res, X_test).margin_lower, certify_predictions(box, X_test).margin_lower
    )


@pytest.mark.slow
@pytest.mark.parametrize(("epochs", "rate"), [(5, 1.0), (12, 0.8)])
def test_a_ten_class_digits_run_certifies_with_the_default_call(epochs, rate):
    """The 10-class runs where every interval method certified nothing: scikit-learn's digits, a linear
    model, the full batch, rate 1 for 5 epochs or rate 0.8 for 12; the default call certifies most test
    predictions against one flipped label and many against five (the box carry: none; over 12 steps the
    five flips' remainder needs its generators' seminorm and the classes' zero sum)."""
    from certkit.datasets import load_digits

    data = load_digits().split(test_size=0.2, rng=0)
    X, X_test = data.X_train, data.X_test  # pixels in [0, 1]
    kw = dict(loss="cross_entropy", epochs=epochs, learning_rate=rate)
    accuracy = {}
    for k in (1, 5):
        res = certified_training(
            MLP.random([64, 10], init="torch", rng=0), X, data.y_train, perturbation=LabelFlips(k), **kw
        )
        accuracy[k] = certify_predictions(res, X_test).certified_accuracy(data.y_test)
    nominal = float(np.mean(res.nominal.predict(X_test) == data.y_test))
    assert res.influence.valid_steps == epochs
    assert accuracy[1] >= 0.75 * nominal and accuracy[5] >= 0.4 * nominal, (accuracy, nominal)


@pytest.mark.parametrize(
    ("k", "scope", "options"),
    [
        (2, "run", dict(epochs=3, learning_rate=0.5)),
        (1, "batch", dict(epochs=2, learning_rate=0.3, batch_size=20, shuffle=True, rng=2)),
        (2, "run", dict(epochs=2, learning_rate=0.1, batch_size=15, momentum=0.5)),
    ],
)
def test_the_competitors_left_out_by_their_norm_bound_never_hold_the_smallest_margin(k, scope, options):
    """Per query, the exact worst case is computed only for the competitors whose norm-based lower bound is
    below the smallest exact bound found: the result equals the minimum over every competitor's exact
    bound (computed here for all of them) for every certified query of a 6-class run, and is at most it for
    the others."""
    X, y = _data(60, 4, 6, seed=7)
    res = certified_training(
        MLP.random([4, 6], rng=0),
        X,
        y,
        perturbation=LabelFlips(k, scope=scope),
        loss="cross_entropy",
        **options,
    )
    enclosure = res.influence
    assert enclosure.valid_steps == res.recipe.n_steps
    X_test = np.random.default_rng(1).normal(size=(50, 4)) * 2.0
    pred = res.nominal.predict(X_test)
    pruned = enclosure.margin_lower_bounds(res.epochs, X_test, pred)
    calls = []

    def every_competitor(groups, z, slack, spread, rounding, p):
        n_q, C = z.shape
        index = np.arange(n_q)
        margin = (z[index, p] - slack[index, p])[:, None] - (z + slack)
        per_row = rounding * (spread[index, p][:, None] + spread)
        qi, qc = np.nonzero(np.arange(C)[None] != p[:, None])
        calls.append(len(qi))
        out = np.full(n_q, np.inf)
        pairs = enclosure._pair_differences(groups, p)
        np.minimum.at(out, qi, margin[qi, qc] - enclosure._pair_worst(pairs, qi, qc, per_row))
        return out

    enclosure._competitor_bounds = every_competitor
    exhaustive = enclosure.margin_lower_bounds(res.epochs, X_test, pred)
    assert sum(calls) == 50 * 5 and np.all(np.isfinite(exhaustive))
    certified = exhaustive > 0  # the same bound where it certifies; below it (uncertified) elsewhere
    assert 0 < np.sum(certified) < 50
    np.testing.assert_allclose(pruned[certified], exhaustive[certified], rtol=1e-12, atol=1e-12)
    assert np.all(pruned[~certified] <= exhaustive[~certified] + 1e-12)


def test_targeted_flips_leave_the_rows_already_at_the_target_unchanged():
    """Two classes, LabelFlips(k, target=1): a row labelled 1 may not change, so its flip extremes are 0
    (every other row's only change is to the target), and the bound is tighter than the untargeted one."""
    gen = np.random.default_rng(0)
    X = gen.normal(size=(40, 3))
    y = (X[:, 0] + 0.3 * gen.normal(size=40) > 0).astype(int)
    kw = dict(loss="cross_entropy", epochs=3, learning_rate=0.5)
    res = certified_training(MLP.random([3, 2], rng=0), X, y, perturbation=LabelFlips(3, target=1), **kw)
    values = np.random.default_rng(1).normal(size=(2, len(y)))
    up, down = res.influence._flip_extremes(values)
    at_target = y == 1
    assert np.all(up[at_target] == 0.0) and np.all(down[at_target] == 0.0)
    change = values[0, ~at_target] - values[1, ~at_target]  # label 0 -> 1: value[y] - value[1]
    np.testing.assert_array_equal(up[~at_target], np.maximum(change, 0.0))
    np.testing.assert_array_equal(down[~at_target], np.maximum(-change, 0.0))
    X_test = gen.normal(size=(200, 3))
    untargeted = certified_training(MLP.random([3, 2], rng=0), X, y, perturbation=LabelFlips(3), **kw)
    tight, loose = (certify_predictions(r, X_test).margin_lower for r in (res, untargeted))
    assert np.all(tight >= loose - 1e-12) and np.mean(tight > loose) > 0.5


def test_a_run_whose_influences_exceed_the_memory_limit_takes_the_box_carry(monkeypatch):
    """The influences take about 24 × rows × classes × parameters bytes: above INFLUENCE_MAX_BYTES the
    default call takes the box carry and carry='influence' says why, naming the limit."""
    from certkit.mibp.enclosures import influence

    X, y = _data(30, 3, 3, seed=1)
    kw = dict(perturbation=LabelFlips(1), loss="cross_entropy", epochs=1, learning_rate=0.1)
    need = 24 * 30 * 3 * 12
    assert (
        influence.influence_bytes(
            MLP.random([3, 3], rng=0), certified_training(MLP.random([3, 3], rng=0), X, y, **kw).recipe
        )
        == need
    )
    monkeypatch.setattr(influence, "INFLUENCE_MAX_BYTES", need - 1)
    res = certified_training(MLP.random([3, 3], rng=0), X, y, **kw)
    assert res.carry == "box" and res.auto_carry
    with pytest.raises(
        ValueError,
        match=r"^carry='influence' cannot bound 30 rows x 3 classes x 12 parameters \(its influences would "
        r"take about 0\.0 GiB, above INFLUENCE_MAX_BYTES = .* GiB of certkit\.mibp\.enclosures\.influence\)",
    ):
        certified_training(MLP.random([3, 3], rng=0), X, y, carry="influence", **kw)
    monkeypatch.setattr(influence, "INFLUENCE_MAX_BYTES", need)
    assert certified_training(MLP.random([3, 3], rng=0), X, y, **kw).carry == "influence"


@pytest.mark.parametrize("classes", [1, 4])
@pytest.mark.parametrize("gram", [False, True])
def test_the_remainders_generator_bound_holds_at_every_vertex_of_their_hull(classes, gram):
    """Exact oracle of `_generator_seminorm`: the largest ``‖K ρ‖_G`` over a step's ℓ1 remainders of unit
    mass is attained at a vertex of their hull (``±(e_a - e_b) ⊗ x̃_j / 2`` with several classes, their
    rows summing to 0 over the classes; ``±e_0 ⊗ x̃_j`` with one output); the bound is at least every
    vertex's value, for random responses ``K`` and positive semidefinite Grams, and random points of the hull
    stay below it."""
    C = classes
    X, y = _data(9, 3, C, seed=C)
    loss = "cross_entropy" if C > 1 else "binary_cross_entropy"
    res = certified_training(
        MLP.random([3, C], rng=0), X, y, perturbation=LabelFlips(1), loss=loss, epochs=1, batch_size=5
    )
    enc = res.influence
    q, m = enc.q, enc.m
    gen = np.random.default_rng(C + 10 * gram)
    rows = enc.recipe.batches[1]
    for trial in range(20):
        P = gen.normal(size=(m, m)) * gen.choice([1e-3, 1.0, 30.0])
        if trial % 4 == 0:  # a response that moves every class alike (the remainders cancel it)
            P = np.tile(gen.normal(size=(m, q)), (1, C))
        K = enc._response_matrix(1, P)  # the δ part's response to a gradient-space vector
        if gram:
            R = gen.normal(size=(C, q, q)) * gen.uniform(0.1, 3.0, size=(C, 1, 1))
            G = np.matmul(R.transpose(0, 2, 1), R)
            absG = float(np.abs(G).max())
            root = float(np.sqrt(max(np.linalg.eigvalsh(g).max() for g in G)) * 1.001)
            bound = enc._generator_seminorm(K, rows, G, absG * 1.001, root)
        else:
            G = np.broadcast_to(np.eye(q), (C, q, q))
            bound = enc._generator_seminorm(K, rows)

        def seminorm(rho, K=K, G=G):  # rho (C, q): a gradient-space vector (Θ order)
            v = (K @ rho.ravel()).reshape(C, q)
            return float(np.sqrt(sum(v[c] @ G[c] @ v[c] for c in range(C))))

        # this oracle's own rounding (a response that cancels exactly leaves ~1e-16 here, 0 in the bound)
        slack = 1e-12 * np.abs(K).sum() * np.abs(enc.Xt).max() * (1.0 + np.abs(G).max())

        vertices = []
        for j in rows:
            for a in range(C):
                for b in range(C) if C > 1 else [None]:
                    if b == a:
                        continue
                    rho = np.zeros((C, q))
                    rho[a] += enc.Xt[j] / (2.0 if C > 1 else 1.0)
                    if b is not None:
                        rho[b] -= enc.Xt[j] / 2.0
                    vertices.append(seminorm(rho))
        assert bound >= max(vertices) - slack
        for _ in range(20):  # random points: rows' remainders of total ℓ1 mass 1, each summing to 0
            w = gen.normal(size=(len(rows), C))
            if C > 1:
                w -= w.mean(axis=1, keepdims=True)
            w /= np.abs(w).sum()
            rho = sum(np.outer(w[i], enc.Xt[j]) for i, j in enumerate(rows))
            assert seminorm(rho) <= bound + slack


@pytest.mark.slow
@pytest.mark.parametrize(
    ("n", "C", "k", "kw"),
    [
        (100, 4, 1, dict(epochs=6, learning_rate=1.0)),
        (80, 4, 2, dict(epochs=5, learning_rate=0.5)),
        (100, 5, 1, dict(epochs=8, learning_rate=0.8)),
        (100, 4, 1, dict(epochs=6, learning_rate=0.5, momentum=0.5)),
        (100, 4, 1, dict(epochs=4, learning_rate=0.5, batch_size=50, shuffle=True, rng=1)),
    ],
)
def test_where_the_remainder_is_bounded_through_its_generators_every_labelling_retrained_agrees(
    n, C, k, kw, monkeypatch
):
    """Exact oracle where the remainder's energy takes the generator route (`REMAINDER_ROUTE`, checked by a
    spy) and the margins its centred form: every allowed labelling retrained; it stays in the boxes, every
    query's margin is at least its lower bound (certified or not) and the certificate is close to the
    truth."""
    from certkit.mibp.enclosures import influence

    routed = []
    original = influence.InfluenceEnclosure._generator_seminorm

    def spy(self, K, rows, G=None, *args):
        routed.append(G is not None)
        return original(self, K, rows, G, *args)

    monkeypatch.setattr(influence.InfluenceEnclosure, "_generator_seminorm", spy)
    X, y = _data(n, 2, C, seed=3)
    pert = LabelFlips(k, scope="run")
    res = certified_training(MLP.random([2, C], rng=1), X, y, perturbation=pert, loss="cross_entropy", **kw)
    assert any(routed) and res.influence.valid_steps == res.recipe.n_steps
    X_test = np.random.default_rng(0).normal(size=(60, 2)) * 2.0
    cert = certify_predictions(res, X_test)
    excess, smallest, count = _oracle(res, X, y, list(range(C)), k, "run", X_test)
    assert count > n * (C - 1)
    assert excess <= 0.0, f"a retrained run leaves its box by {excess}"
    assert np.all(smallest >= cert.margin_lower)
    assert np.mean(cert.certified) >= 0.3 and np.mean(cert.certified) >= np.mean(smallest > 0) - 0.4
