"""`Neighbours(k)`: rows added to or removed from every batch.  Exact oracles (every allowed run on tiny data
retrained, checked against every epoch's box), projected gradient ascent on added rows, the exact inclusion
in floating point of a neighbouring dataset's boxes at ``k - 1`` (what the private mechanisms rely on),
refusals."""

import itertools
from dataclasses import replace

import numpy as np
import pytest

from certkit.mibp import MLP, Neighbours, Removals, certified_training
from certkit.mibp.certification.attack import _torch_train, _violation

torch = pytest.importorskip("torch")

GEN = np.random.default_rng(3)
X7 = np.clip(GEN.normal(size=(7, 2)), -2.9, 2.9)
Y7 = np.array([0, 1, 1, 0, 1, 0, 1])
# rows a neighbouring dataset may add: extreme inputs and both labels, inside the domain [-3, 3]^2
POOL = np.array([[3.0, 3.0], [-3.0, 3.0], [3.0, -3.0], [0.0, 0.0]])


def _per_epoch(recipe):
    per = recipe.steps_per_epoch
    return [list(recipe.batches[e * per : (e + 1) * per]) for e in range(recipe.epochs)]


def _allowed_runs(model, X, y, res, k, pool):
    """Every run `Neighbours(k)` allows on tiny data, one choice per step: each batch loses up to k of its
    rows and gains pool rows (with either label), at most k changes (the pool rows appended to X)."""
    recipe = res.recipe
    labels = np.unique(y)
    added = [(p, c) for p in range(len(pool)) for c in labels]
    X_all = np.vstack([X, pool[[p for p, _ in added]]])
    y_all = np.concatenate([y, np.array([c for _, c in added], dtype=y.dtype)])
    choices = []
    for rows in recipe.batches:
        options = []
        for r in range(k + 1):
            for gone in itertools.combinations(range(len(rows)), r):
                kept = np.delete(rows, gone)
                for a in range(k - r + 1):
                    for new in itertools.combinations(range(len(added)), a):
                        options.append(np.concatenate([kept, len(X) + np.asarray(new, dtype=np.int64)]))
        choices.append(options)
    for batches in itertools.product(*choices):
        yield model.run(X_all, y_all, replace(recipe, batches=tuple(batches)))


@pytest.mark.parametrize(
    ("options", "k"),
    [
        ({"epochs": 2, "clip_value": 0.2}, 1),
        ({"epochs": 2, "batch_size": 4, "drop_last": True, "clip_norm": 0.3, "momentum": 0.3}, 1),
        ({"epochs": 1, "clip_value": 0.2, "weight_decay": 0.05}, 2),
    ],
)
def test_every_allowed_run_stays_in_the_boxes(options, k):
    """Exhaustive on tiny data: every run with up to ``k`` rows removed from or added to each step's batch
    (additions from a pool of extreme rows with either label) lies in every epoch's box."""
    model = MLP.random([2, 3, 2], rng=1)
    kwargs = dict(loss="cross_entropy", learning_rate=0.5, **options)
    res = certified_training(model, X7, Y7, perturbation=Neighbours(k), **kwargs)
    count = 0
    for path in _allowed_runs(model, X7, Y7, res, k, POOL):
        assert _violation(res, path) <= 0
        count += 1
    assert count > 50


def test_every_neighbouring_dataset_of_a_domain_stays_in_the_boxes():
    """Without clipping, the domain bounds the added rows: every run with up to 2 rows added (extreme rows
    of the domain [-3, 3]^2, either label) or removed, retrained full batch, lies in the boxes."""
    model = MLP.random([2, 3, 1], rng=2)
    pert = Neighbours(2, domain=(-3.0, 3.0))
    res = certified_training(
        model, X7, Y7, perturbation=pert, loss="binary_cross_entropy", learning_rate=0.1, epochs=2
    )
    assert res.certification_lost is None
    count = 0
    for path in _allowed_runs(model, X7, Y7.astype(float), res, 1, POOL):
        assert _violation(res, path) <= 0
        count += 1
    assert count > 100


@pytest.mark.parametrize("clip", [{"clip_value": 0.15}, {"clip_norm": 0.1}, {}])
def test_added_rows_placed_by_gradient_ascent_stay_inside(clip):
    """Projected gradient ascent on two added rows (inside the domain [-3, 3]^2, or unconstrained within
    [-20, 20]^2 with clipping alone), through the unrolled training, toward a random parameter's bound."""
    gen = np.random.default_rng(0)
    X = np.clip(gen.normal(size=(48, 2)), -3, 3)
    y = np.argmax(X @ np.array([[2.0, -1.0, 0.0], [0.0, 1.5, -1.0]]), axis=1)
    model = MLP.random([2, 4, 3], rng=0)
    pert = Neighbours(2) if clip else Neighbours(2, domain=(-3.0, 3.0))
    box = 20.0 if clip else 3.0
    rate = 0.5 if clip else 0.02  # the domain alone bounds an added row's gradient far more loosely
    kwargs = dict(loss="cross_entropy", learning_rate=rate, epochs=2, batch_size=12, **clip)
    res = certified_training(model, X, y, perturbation=pert, **kwargs)
    recipe, sizes = res.recipe, model.sizes
    theta0 = [
        torch.tensor(a, dtype=torch.float64, requires_grad=True)
        for w, b in zip(model.weights, model.biases)
        for a in (w, b)
    ]
    tried = 0
    for _ in range(6):
        added = gen.uniform(-box, box, size=(2, 2))
        labels = gen.integers(0, 3, size=2)
        batches = tuple(np.concatenate([b, [48, 49]]) for b in recipe.batches)  # both rows in every batch
        run = replace(recipe, batches=batches)
        y_all = torch.tensor(np.concatenate([y, labels]))
        p_goal, sign = int(gen.integers(model.n_params)), gen.choice([-1.0, 1.0])
        for _step in range(8):
            xa = torch.tensor(added, requires_grad=True)
            X_all = torch.cat([torch.tensor(X), xa])
            last = _torch_train(torch, theta0, X_all, y_all, run, sizes)[-1]
            goal = sign * torch.cat([p.reshape(-1) for p in last])[p_goal]
            (g,) = torch.autograd.grad(goal, xa)
            added = np.clip(added + 0.5 * np.sign(g.numpy()), -box, box)
            path = model.run(np.vstack([X, added]), np.concatenate([y, labels]), run)
            assert _violation(res, path) <= 0
            tried += 1
    assert tried == 48


def _neighbour_batches(B, n, gen):
    """The batches ``B`` (per epoch) with row ``n`` added to one batch of every epoch."""
    out = []
    for epoch in B:
        j = int(gen.integers(len(epoch)))
        out.append([np.append(b, n) if i == j else b for i, b in enumerate(epoch)])
    return out


def _inside(small, big):
    return all(
        np.all(big.lower[t].to_vector() <= small.lower[t].to_vector())
        and np.all(small.upper[t].to_vector() <= big.upper[t].to_vector())
        for t in range(len(big.lower))
    )


@pytest.mark.parametrize("trial", range(6))
def test_a_neighbours_boxes_at_k_minus_1_lie_inside_the_boxes_at_k(trial):
    """Exactly, in floating point: the boxes of the training set at k - 1, of the training set with a row
    added (to one batch of every epoch) at k - 1, and without a row at k - 1, lie inside the boxes at k —
    every loss, both clippings, a declared domain, momentum and weight decay."""
    gen = np.random.default_rng(trial)
    n, d = int(gen.integers(16, 30)), 3
    X = gen.normal(size=(n, d))
    loss = ("cross_entropy", "binary_cross_entropy", "hinge")[trial % 3]
    C = 3 if loss == "cross_entropy" else 1
    y = np.argmax(X @ gen.normal(size=(d, 3)), axis=1) if C > 1 else (X[:, 0] > 0).astype(int)
    y = 2 * y - 1 if loss == "hinge" else y
    model = MLP.random([d, 5, C], rng=trial)
    clip = ({"clip_value": 0.2}, {"clip_norm": 0.5}, {})[trial % 3 if trial < 5 else 0]
    make = (lambda k: Neighbours(k, domain=(-5.0, 5.0))) if not clip else Neighbours
    kwargs = dict(
        loss=loss,
        learning_rate=0.2 if clip else 0.01,
        epochs=2,
        momentum=0.3 * (trial % 2),
        weight_decay=0.01,
        **clip,
    )
    base = certified_training(
        model, X, y, perturbation=make(0), batch_size=8, shuffle=True, drop_last=True, rng=trial, **kwargs
    )
    B = _per_epoch(base.recipe)
    k = 2
    big = certified_training(model, X, y, perturbation=make(k), batches=B, **kwargs)
    assert _inside(certified_training(model, X, y, perturbation=make(k - 1), batches=B, **kwargs), big)
    z = gen.uniform(-4.0, 4.0, size=(1, d))
    plus = certified_training(
        model,
        np.vstack([X, z]),
        np.append(y, y[0]),
        perturbation=make(k - 1),
        batches=_neighbour_batches(B, n, gen),
        **kwargs,
    )
    assert _inside(plus, big)
    gone = int(np.concatenate(B[0])[0])  # a row that is in a batch
    keep = np.delete(np.arange(n), gone)
    index = -np.ones(n, dtype=np.int64)
    index[keep] = np.arange(n - 1)
    minus_batches = [[index[b[b != gone]] for b in epoch] for epoch in B]
    minus = certified_training(
        model, X[keep], y[keep], perturbation=make(k - 1), batches=minus_batches, **kwargs
    )
    assert _inside(minus, big)


def test_boxes_do_not_depend_on_the_chunking_and_removals_lie_inside():
    """A row's bound does not depend on the rows beside it: any chunk size gives the very same boxes; the
    unlearning boxes (rows removed only) lie inside Neighbours' at the same k; ``scope="run"`` (k rows in the
    whole set, so at most k in any batch) keeps the per-batch boxes."""
    gen = np.random.default_rng(5)
    X, y = gen.normal(size=(40, 2)), gen.integers(0, 2, size=40)
    kwargs = dict(loss="cross_entropy", learning_rate=0.5, epochs=2, batch_size=20, clip_value=0.1)
    model = MLP.random([2, 4, 2], rng=0)
    results = [
        certified_training(model, X, y, perturbation=Neighbours(3), chunk_size=c, **kwargs)
        for c in (1, 7, None)
    ]
    for other in results[1:]:
        for t in range(3):
            assert np.array_equal(other.lower[t].to_vector(), results[0].lower[t].to_vector())
            assert np.array_equal(other.upper[t].to_vector(), results[0].upper[t].to_vector())
    unlearn = certified_training(model, X, y, perturbation=Removals(3), **kwargs)
    assert _inside(unlearn, results[0])
    whole = certified_training(model, X, y, perturbation=Neighbours(3, scope="run"), **kwargs)
    for t in range(3):
        assert np.array_equal(whole.lower[t].to_vector(), results[0].lower[t].to_vector())
        assert np.array_equal(whole.upper[t].to_vector(), results[0].upper[t].to_vector())


def test_public_rows_are_never_removed():
    """With every row public only additions remain: the box is narrower than without, and it holds the run
    with an added row (but needs not hold a run without a public row)."""
    gen = np.random.default_rng(7)
    X, y = gen.normal(size=(12, 2)), gen.integers(0, 2, size=12)
    kwargs = dict(loss="cross_entropy", learning_rate=0.5, epochs=1, clip_value=0.2)
    model = MLP.random([2, 2], rng=0)
    public = certified_training(model, X, y, perturbation=Neighbours(1, public=range(12)), **kwargs)
    private = certified_training(model, X, y, perturbation=Neighbours(1), **kwargs)
    assert _inside(public, private)
    assert not _inside(private, public)
    X_all = np.vstack([X, [[2.0, -2.0]]])
    path = model.run(X_all, np.append(y, 1), replace(public.recipe, batches=(np.arange(13),)))
    assert _violation(public, path) <= 0


def test_neighbours_behind_a_frozen_extractor():
    """Fine-tuning a head behind frozen convolutions: a domain on the raw pixels becomes a feature box; every
    dataset with a row of the domain added (corners) or removed stays in the boxes."""
    gen = np.random.default_rng(2)
    images = gen.uniform(0, 1, size=(10, 1, 4, 4))
    labels = (images[:, 0, :2].mean(axis=(1, 2)) > images[:, 0, 2:].mean(axis=(1, 2))).astype(int)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        cnn = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.ReLU(), torch.nn.Flatten()).double()
    head = MLP.random([8, 1], rng=0)
    pert = Neighbours(1, domain=(0.0, 1.0))
    res = certified_training(
        head, images, labels, perturbation=pert, features=cnn, loss="binary_cross_entropy", learning_rate=0.5
    )
    feats = res.features.features(images.reshape(10, -1), rows_per_call=1)
    for corner in (0.0, 1.0):
        row = res.features.features(np.full((1, 16), corner), rows_per_call=1)
        for label in (0.0, 1.0):
            path = head.run(
                np.vstack([feats, row]),
                np.append(labels, label),
                replace(res.recipe, batches=(np.arange(11),)),
            )
            assert _violation(res, path) <= 0
    for gone in range(10):
        keep = np.delete(np.arange(10), gone)
        path = head.run(feats[keep], labels[keep].astype(float), replace(res.recipe, batches=(np.arange(9),)))
        assert _violation(res, path) <= 0


def test_neighbours_refuse_what_they_cannot_bound():
    model = MLP.random([2, 2], rng=0)
    kw = dict(loss="cross_entropy", learning_rate=0.5)
    with pytest.raises(ValueError, match=r"clip the per-sample gradients.*or declare the input domain"):
        certified_training(model, X7, Y7, perturbation=Neighbours(1), **kw)
    with pytest.raises(ValueError, match="Neighbours stands alone"):
        certified_training(model, X7, Y7, perturbation=Removals(1) & Neighbours(1), clip_value=0.1, **kw)
    with pytest.raises(ValueError, match=r"Neighbours\(7\) may remove every row of batch 0"):
        certified_training(model, X7, Y7, perturbation=Neighbours(7), clip_value=0.1, **kw)
    with pytest.raises(ValueError, match="does not support l1_penalty"):
        certified_training(model, X7, Y7, perturbation=Neighbours(1), clip_value=0.1, l1_penalty=0.01, **kw)
    with pytest.raises(ValueError, match="carry='shared' does not support Neighbours"):
        certified_training(model, X7, Y7, perturbation=Neighbours(1), clip_value=0.1, carry="shared", **kw)
    with pytest.raises(ValueError, match="X\\[0\\] lies outside Neighbours' domain"):
        certified_training(model, X7 + 10, Y7, perturbation=Neighbours(1, domain=(-3, 3)), **kw)
    with pytest.raises(ValueError, match=r"labels \(of an added row\) needs domain"):
        Neighbours(1, labels=[0, 1])
    with pytest.raises(
        ValueError,
        match=r"^labels of an added row \(Neighbours\(labels=\.\.\.\)\) must be integers in 0\.\.1",
    ):
        certified_training(model, X7, Y7, perturbation=Neighbours(1, domain=(-3, 3), labels=[0, 5]), **kw)
    with pytest.raises(
        TypeError, match=r"labels of an added row \(Neighbours\(labels=\.\.\.\)\) must be real"
    ):
        certified_training(model, X7, Y7, perturbation=Neighbours(1, domain=(-3, 3), labels=["a"]), **kw)
    with pytest.raises(ValueError, match="needs per-sample clipping"):
        certified_training(
            MLP.random([2, 1], rng=0), X7, X7[:, 0], perturbation=Neighbours(1, domain=(-3, 3)), loss="mse"
        )
    with pytest.raises(ValueError, match="scope must be 'batch'"):
        Neighbours(1, scope="epoch")
    with pytest.raises(ValueError, match="k must be"):
        Neighbours(-1)
    with pytest.raises(TypeError, match="domain must be a tuple"):
        Neighbours(1, domain=[0, 1])
    with pytest.raises(ValueError, match="public must be row indices"):
        certified_training(model, X7, Y7, perturbation=Neighbours(1, public=[9]), clip_value=0.1, **kw)


def test_neighbours_labels_must_hold_every_label_of_y():
    """A training row whose label is outside ``labels`` could be added back to the dataset without it, which
    the bounds of that dataset would not cover (on ten rows of label 1 and one of label 0, the dataset
    without the latter got level 9 where the full one predicts otherwise): refused, naming labels and the
    expected set, for every loss."""
    kw = dict(learning_rate=0.1, epochs=1)
    X = np.clip(X7, -2.9, 2.9)
    with pytest.raises(
        ValueError,
        match=r"Neighbours\(labels=\.\.\.\) must hold every label of y.*"
        r"superset of \[0, 1\], got \[1\] \(missing \[0\]\)",
    ):
        certified_training(
            MLP.random([2, 2], rng=0),
            X,
            Y7,
            perturbation=Neighbours(1, domain=(-3, 3), labels=[1]),
            loss="cross_entropy",
            **kw,
        )
    with pytest.raises(ValueError, match=r"missing \[0\.0\]"):
        certified_training(
            MLP.random([2, 1], rng=0),
            X,
            Y7,
            perturbation=Neighbours(1, domain=(-3, 3), labels=[1]),
            loss="binary_cross_entropy",
            **kw,
        )
    with pytest.raises(ValueError, match=r"missing \[-1\.0\]"):
        certified_training(
            MLP.random([2, 1], rng=0),
            X,
            2 * Y7 - 1,
            perturbation=Neighbours(1, domain=(-3, 3), labels=[1]),
            loss="hinge",
            **kw,
        )
    from certkit.mibp import stability_profile

    with pytest.raises(ValueError, match="must hold every label of y"):
        stability_profile(
            MLP.random([2, 1], rng=0),
            X,
            Y7,
            X,
            ks=range(3),
            loss="binary_cross_entropy",
            perturbation=Neighbours(0, domain=(-3, 3), labels=[1]),
            **kw,
        )
    ones = np.ones(len(X), dtype=int)  # every label of y among labels: accepted
    res = certified_training(
        MLP.random([2, 1], rng=0),
        X,
        ones,
        perturbation=Neighbours(1, domain=(-3, 3), labels=[1]),
        loss="binary_cross_entropy",
        **kw,
    )
    assert res.lower[-1].n_params == 3
