"""Certifying the run the user trained: their own batch order (``batches=``), what ``contains`` does not
prove, per-epoch certified accuracy, the affine carry's warning and progress on long program runs."""

import numpy as np
import pytest

from certkit.mibp import MLP, Budget, FeatureBox, LabelFlips, certified_training
from certkit.mibp.problem.recipe import make_recipe

torch = pytest.importorskip("torch")


def _blobs(n=90, rng=0):
    gen = np.random.default_rng(rng)
    y = np.arange(n) % 3
    X = gen.normal(size=(n, 2)) * 0.6 + np.array([[0.0, 0.0], [2.0, 0.0], [0.0, 2.0]])[y]
    return X, y


def _net(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(2, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3)).double()


def _torch_run(net, X, y, order, *, lr, momentum, weight_decay):
    """The user's loop on the given batch order: the models after each epoch."""
    opt = torch.optim.SGD(net.parameters(), lr=lr, momentum=momentum, weight_decay=weight_decay)
    Xt, yt = torch.tensor(X), torch.tensor(y)
    path = [MLP.from_torch(net)]
    for epoch in order:
        for idx in epoch:
            opt.zero_grad()
            torch.nn.functional.cross_entropy(net(Xt[idx]), yt[idx]).backward()
            opt.step()
        path.append(MLP.from_torch(net))
    return path


RECIPE = dict(lr=0.1, momentum=0.9, weight_decay=1e-3)


def test_the_nominal_run_is_the_users_torch_run_and_the_boxes_contain_it():
    X, y = _blobs()
    net = _net()
    start = MLP.from_torch(net)
    # the user's training loop, with a sampler-drawn order recorded as it goes
    loader = torch.utils.data.DataLoader(
        range(len(X)), batch_size=32, shuffle=True, generator=torch.Generator().manual_seed(0)
    )
    opt = torch.optim.SGD(net.parameters(), **RECIPE)
    Xt, yt = torch.tensor(X), torch.tensor(y)
    order, trained = [], [start]
    for _ in range(3):
        order.append([])
        for idx in loader:
            order[-1].append(idx)
            opt.zero_grad()
            torch.nn.functional.cross_entropy(net(Xt[idx]), yt[idx]).backward()
            opt.step()
        trained.append(MLP.from_torch(net))
    res = certified_training(
        start,
        X,
        y,
        perturbation=FeatureBox(0.01),
        loss="cross_entropy",
        learning_rate=RECIPE["lr"],
        momentum=RECIPE["momentum"],
        weight_decay=RECIPE["weight_decay"],
        batches=order,
    )
    assert res.epochs == 3 and res.recipe.steps_per_epoch == 3 and res.recipe.user_batches
    # float64 on both sides; torch and numpy sum the 32-row batches and the 8-unit layers in different
    # orders, so each step differs by a few ulps of O(1) values (~1e-15), carried through 9 momentum steps
    # whose Jacobian has norm ~1: 1e-10 leaves five orders of magnitude to spare, and a different order
    # (below) moves the parameters by ~1e-2
    for ours, theirs in zip(res.nominal_path, trained):
        np.testing.assert_allclose(ours.to_vector(), theirs.to_vector(), rtol=0, atol=1e-10)
    assert all(res.contains(m, t) for t, m in enumerate(trained))
    # torch runs on perturbed datasets (corners of the box) with the same order stay inside as well
    sets = FeatureBox(0.01).sets(X)
    gen = np.random.default_rng(1)
    for _ in range(4):
        path = _torch_run(_net(), sets.sample(gen, vertex=True), y, order, **RECIPE)
        assert all(res.contains(m, t) for t, m in enumerate(path))
    # the order is what was certified: the same recipe with a drawn order is another run
    drawn = start.train(
        X, y, loss="cross_entropy", epochs=3, learning_rate=0.1, momentum=0.9, weight_decay=1e-3,
        batch_size=32, shuffle=True, rng=0,
    )  # fmt: skip
    assert np.max(np.abs(drawn[-1].to_vector() - trained[-1].to_vector())) > 1e-3
    assert "your batch order (3 batches of 26-32 rows per epoch)" in res.summary()


@pytest.mark.filterwarnings("ignore:carry='affine' relaxes:UserWarning")  # soundness, not advice
@pytest.mark.parametrize("carry", ["box", "affine", "shared"])
def test_a_given_order_with_a_budget_is_sound_under_attack(carry):
    from certkit.mibp.certification.attack import attack_violation

    X, y = _blobs(30, rng=2)
    gen = np.random.default_rng(3)
    # uneven batches that skip some rows and revisit others within an epoch, as a custom sampler may
    order = [[gen.choice(30, size=s, replace=False) for s in (11, 7, 12)] for _ in range(2)]
    pert = Budget(FeatureBox(0.2), 3)
    res = certified_training(
        MLP.random([2, 4, 3], rng=0),
        X,
        y,
        perturbation=pert,
        loss="cross_entropy",
        learning_rate=0.5,
        momentum=0.5,
        batches=order,
        carry=carry,
    )
    violation, trajectories = attack_violation(res, X, y, pert, restarts=3, steps=4, rng=gen)
    assert trajectories >= 3 and violation <= 0.0


def _order(n=10):
    return [[np.arange(0, 5), np.arange(5, n)], [np.arange(5, n), np.arange(0, 5)]]


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        (dict(batch_size=4), ValueError, r"batches\[0\]\[0\] has 5 rows but batch_size=4, drop_last=False"),
        (dict(batch_size=6), ValueError, r"batches\[0\]\[0\] has 5 rows but batch_size=6.*contradict"),
        (dict(batch_size=0), ValueError, "batch_size must be >= 1"),
        (dict(drop_last=True), ValueError, r"drop_last=True says how batches of batch_size rows are cut"),
        (dict(shuffle="yes"), TypeError, "shuffle must be a bool"),
        (dict(epochs=3), ValueError, r"epochs=3 but batches holds 2 epoch\(s\)"),
        (dict(batches=[]), ValueError, "batches holds no epoch"),
        (dict(batches=5), TypeError, "batches holds one sequence of batches per epoch.*got int"),
        (dict(batches="0,1"), TypeError, "got str"),
        (
            dict(batches=[np.arange(5), np.arange(5, 10)]),
            TypeError,
            r"batches\[0\]\[0\] is a single row index",
        ),
        (dict(batches=[3, 4]), TypeError, r"batches\[0\] is a single row index, not an epoch's batches"),
        (dict(batches=[[]]), ValueError, r"batches\[0\] holds no batch"),
        (dict(batches=[[np.arange(5)], [np.arange(5), [5]]]), ValueError, r"batches\[1\] has 2 batches but"),
        (
            dict(batches=[[[0, 10]]]),
            ValueError,
            r"batches\[0\]\[0\] holds row 10, outside 0..9 \(10 training",
        ),
        (dict(batches=[[[-1, 2]]]), ValueError, r"holds row -1, outside 0..9"),
        (dict(batches=[[[1, 2, 1]]]), ValueError, r"lists row 1 more than once.*with replacement"),
        (dict(batches=[[[]]]), ValueError, r"batches\[0\]\[0\] is empty"),
        (dict(batches=[[[0.0, 1.0]]]), TypeError, r"integer row indices, got dtype float64"),
        (dict(batches=[[np.ones(3, dtype=bool)]]), TypeError, "got dtype bool"),
        (dict(batches=[[np.zeros((2, 2), dtype=int)]]), TypeError, r"got an array of shape \(2, 2\)"),
        (dict(learning_rate=[0.1, 0.2]), ValueError, r"one rate per gradient step \(4 = epochs"),
    ],
)
def test_bad_batch_orders_are_refused(options, error, match):
    X, y = _blobs(10)
    kw = dict(perturbation=FeatureBox(0.01), loss="cross_entropy", learning_rate=0.1, batches=_order())
    with pytest.raises(error, match=match):
        certified_training(MLP.random([2, 3, 3], rng=0), X, y, **(kw | options))


def test_a_loaders_own_options_may_describe_its_order():
    X, y = _blobs(10)
    kw = dict(perturbation=FeatureBox(0.01), loss="cross_entropy", learning_rate=0.1)
    model = MLP.random([2, 3, 3], rng=0)
    uneven = [[np.arange(0, 4), np.arange(4, 8), np.arange(8, 10)]] * 2  # a DataLoader(batch_size=4)
    res = certified_training(model, X, y, batches=uneven, batch_size=4, shuffle=True, **kw)
    assert res.recipe.batch_size == 4 and res.recipe.shuffle and not res.recipe.drop_last
    assert "your batch order (3 batches of 2-4 rows per epoch, shuffled)" in res.summary()
    plain = certified_training(model, X, y, batches=uneven, **kw)  # the options change nothing
    np.testing.assert_array_equal(res.upper[-1].to_vector(), plain.upper[-1].to_vector())
    dropped = [[np.arange(0, 4), np.arange(4, 8)]] * 2  # DataLoader(batch_size=4, drop_last=True)
    assert certified_training(
        model, X, y, batches=dropped, batch_size=4, drop_last=True, **kw
    ).recipe.drop_last
    with pytest.raises(ValueError, match=r"batches\[0\]\[2\] has 2 rows but batch_size=4, drop_last=True"):
        certified_training(model, X, y, batches=uneven, batch_size=4, drop_last=True, **kw)


def test_a_given_order_is_used_step_by_step():
    order = [[torch.tensor([4, 1]), np.array([0, 2, 3])], [[3, 2, 1, 0, 4], np.array([1])]]
    recipe = make_recipe(5, loss="hinge", epochs=None, learning_rate=0.1, batches=order)
    assert recipe.epochs == 2 and recipe.steps_per_epoch == 2 and recipe.n_steps == 4
    assert [b.tolist() for b in recipe.batches] == [[4, 1], [0, 2, 3], [3, 2, 1, 0, 4], [1]]
    assert recipe.batch_size == 5 and not recipe.plain
    assert "your batch order (2 batches of 1-5 rows per epoch)" in recipe.describe()
    # a generator of epochs is read once, as a list would be
    again = make_recipe(5, loss="hinge", epochs=2, learning_rate=0.1, batches=(e for e in order))
    assert all(np.array_equal(a, b) for a, b in zip(again.batches, recipe.batches))
    with pytest.raises(TypeError, match="epochs must be an integer"):
        make_recipe(5, loss="hinge", epochs=None, learning_rate=0.1)
    # the program backends certify full-batch gradient descent only
    X, y = _blobs(5)
    with pytest.raises(ValueError, match=r"does not support .*a given batch order"):
        certified_training(
            MLP.random([2, 3, 1], rng=0), X, np.where(y > 0, 1, -1), perturbation=FeatureBox(0.01),
            loss="hinge", batches=order, backend="lp",
        )  # fmt: skip


def test_certified_accuracy_per_epoch_without_a_loop():
    from certkit.mibp import CertifiedTrainingResult, certify_predictions

    X, y = _blobs(60)
    X_test, y_test = _blobs(45, rng=5)
    res = certified_training(
        MLP.random([2, 6, 3], init="torch", rng=0), X, y, perturbation=FeatureBox(0.02),
        loss="cross_entropy", epochs=4, learning_rate=0.5, momentum=0.5,
    )  # fmt: skip
    series = res.certified_accuracy(X_test, y_test)
    by_hand = [certify_predictions(res, X_test, epoch=t).certified_accuracy(y_test) for t in range(5)]
    np.testing.assert_array_equal(series, by_hand)
    assert series.shape == (5,) and len(set(series.tolist())) > 1
    nominal = res.nominal_accuracy(X_test, y_test)
    np.testing.assert_array_equal(nominal, [np.mean(m.predict(X_test) == y_test) for m in res.nominal_path])
    assert np.all(series <= nominal)
    with pytest.raises(ValueError, match=r"X must have shape \(any, 2\)"):
        res.certified_accuracy(X_test[:, :1], y_test)
    with pytest.raises(ValueError, match=r"labels y must be integers in 0..2"):
        res.certified_accuracy(X_test, y_test + 1)
    with pytest.raises(ValueError, match="inconsistent"):
        res.nominal_accuracy(X_test, y_test[:-1])
    with pytest.raises(ValueError, match="unknown backend"):
        res.certified_accuracy(X_test, y_test, backend="exact")
    # binary cross-entropy: 0/1 labels, as it was trained with
    yb = (y > 0).astype(float)
    binary = certified_training(
        MLP.random([2, 4, 1], rng=0), X, yb, perturbation=FeatureBox(0.02), loss="binary_cross_entropy",
        epochs=2, learning_rate=0.5,
    )  # fmt: skip
    np.testing.assert_array_equal(
        binary.certified_accuracy(X_test, (y_test > 0).astype(int)),
        binary.certified_accuracy(X_test, np.where(y_test > 0, 1, -1)),
    )
    # what contains() does not prove, in its docstring and in every summary
    doc = " ".join(CertifiedTrainingResult.contains.__doc__.split())
    assert "What it does not prove" in doc and "another order or recipe" in doc
    assert "says nothing about one trained with another batch order or recipe" in res.summary()


@pytest.mark.parametrize(
    ("perturbation", "what"),
    [
        (Budget(FeatureBox(0.05), 4), "a Budget"),
        (LabelFlips(2), "label flips"),
        (FeatureBox(0.05) & LabelFlips(1), "label flips"),
        (Budget(FeatureBox(0.05) & LabelFlips(1), 3), "a Budget with relabelling"),
    ],
)
def test_the_affine_carry_warns_where_it_is_measured_to_add_nothing(perturbation, what):
    X, y = _blobs(40)
    kw = dict(perturbation=perturbation, loss="cross_entropy", epochs=2, learning_rate=0.3)
    model = MLP.random([2, 3, 3], rng=0)
    with pytest.warns(UserWarning, match=f"carry='affine' relaxes {what} to every row deviating") as seen:
        affine = certified_training(model, X, y, carry="affine", **kw)
    assert len(seen) == 1 and "use carry='shared'" in str(seen[0].message)
    assert seen[0].filename == __file__  # points at the caller's line
    box = certified_training(model, X, y, **kw)  # no warning for the other carries
    assert np.all(box.lower[-1].to_vector() <= affine.lower[-1].to_vector() + 1e-12)


def test_the_affine_carry_is_silent_where_it_can_help(recwarn):
    X, y = _blobs(40)
    model = MLP.random([2, 3, 3], rng=0)
    for perturbation in (FeatureBox(0.05), Budget(FeatureBox(0.05), 5), Budget(FeatureBox(0.05), 40)):
        certified_training(
            model, X, y, perturbation=perturbation, loss="cross_entropy", epochs=1, carry="affine"
        )
    assert not [w for w in recwarn if issubclass(w.category, UserWarning)]


def test_long_program_runs_show_progress_by_default(capsys, monkeypatch):
    pytest.importorskip("highspy")
    from certkit.mibp import _setup

    X, y = _blobs(6)
    y = np.where(y > 0, 1, -1)
    kw = dict(perturbation=FeatureBox(0.05), loss="hinge", epochs=2, learning_rate=0.2, backend="lp")
    model = MLP.random([2, 2, 1], rng=0)
    certified_training(model, X, y, **kw)  # 2 x 6 x 2 x 9 solves: about 0.2 s, silent
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(_setup, "LONG_RUN_SECONDS", 0.1)  # the same run counted as long
    certified_training(model, X, y, **kw)
    err = capsys.readouterr().err
    assert "epoch 1/2" in err and "epoch 2/2" in err
    certified_training(model, X, y, progress=False, **kw)  # never when asked not to
    certified_training(model, X, y, **(kw | {"backend": "interval"}))  # interval: milliseconds
    assert capsys.readouterr().err == ""


def test_the_expected_time_of_a_run():
    from certkit.mibp.training import LONG_RUN_SECONDS, expected_seconds

    X, _ = _blobs(100)
    recipe = make_recipe(100, loss="hinge", epochs=1, learning_rate=0.1)
    m = MLP.random([2, 16, 1], rng=0).n_params  # 65: two moons' protocol network
    box, budget = FeatureBox(0.01).sets(X), Budget(FeatureBox(0.01), 3).sets(X)
    # 100 rows x 130 objectives per epoch
    assert expected_seconds("lp", "decomposed", recipe, box, m) == pytest.approx(13.0)
    assert expected_seconds("scip", "joint", recipe, box, m) == pytest.approx(130.0)
    assert expected_seconds("lp", "hybrid", recipe, budget, m) == pytest.approx(52.0)
    assert expected_seconds("gurobi", "decomposed", recipe, box, m) == pytest.approx(3.9)
    assert expected_seconds("interval", "decomposed", recipe, box, m) == 0.0
    assert expected_seconds("lp", "decomposed", recipe, box, m) >= LONG_RUN_SECONDS
