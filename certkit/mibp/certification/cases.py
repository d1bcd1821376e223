"""Random tiny certified-training configurations for the soundness sweeps (tests and
``benchmarks/mibp_soundness.py``): every perturbation type, and random training recipes with every option
of the recipe and chunk sizes down to one row."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import numpy as np

from certkit._optional import require
from certkit.mibp.problem.losses import label_classes
from certkit.mibp.problem.mlp import MLP
from certkit.mibp.problem.perturbation import (
    Budget,
    FeatureBox,
    LabelFlips,
    MissingValues,
    OrdinalShift,
    Removals,
    TargetBox,
)
from certkit.mibp.problem.recipe import InverseDecay

__all__ = [
    "PERTURBATION_KINDS",
    "RECIPE_KINDS",
    "allowed_row_sets",
    "random_case",
    "random_extractor",
    "random_recipe_case",
    "random_row_shape",
    "recipe_kind_supported",
]


def allowed_row_sets(n: int, k: int, scope: str, recipe) -> Iterator[tuple[int, ...]]:
    """Every set of rows (of ``n``) that a ``scope`` budget of ``k`` lets change under ``recipe``'s batch
    order, for exact oracles: at most ``k`` rows (``scope="run"``), or a fixed set with at most ``k`` rows in
    every batch (``scope="batch"``), which may be larger than ``k`` per epoch's batches — rows an epoch
    leaves out (``drop_last``, the user's own batches) may change freely as far as that epoch goes."""
    batches = [set(b.tolist()) for b in recipe.batches]
    limit = k
    if scope == "batch":
        sizes = []
        for e in range(recipe.epochs):
            epoch = batches[recipe.epoch_end(e) : recipe.epoch_end(e + 1)]
            sizes.append(sum(min(k, len(b)) for b in epoch) + n - len(set().union(*epoch)))
        limit = min(n, *sizes)
    for size in range(limit + 1):
        for rows in itertools.combinations(range(n), size):
            if scope == "run" or all(len(b.intersection(rows)) <= k for b in batches):
                yield rows


#: Perturbation types of `random_case`.
PERTURBATION_KINDS = ("feature_box", "missing_values", "ordinal_shift", "budget", "label_flips")


def random_case(
    gen: np.random.Generator, kind: str, *, max_hidden: int = 3, max_points: int = 8, max_epochs: int = 2
) -> dict:
    """A random tiny certified-training configuration with a perturbation of type ``kind``.

    Returns the keyword arguments of `certified_training` except the backend and formulation
    (``model``, ``X``, ``y``, ``perturbation``, ``loss``, ``epochs``, ``learning_rate``).
    """

    d = int(gen.integers(1, 3))
    n = int(gen.integers(2, max_points + 1))
    head = "binary" if kind == "label_flips" else str(gen.choice(["binary", "multiclass", "mse"]))
    out = 3 if head == "multiclass" else 1
    model = MLP.random([d, int(gen.integers(1, max_hidden + 1)), out], rng=gen)
    X = np.round(gen.normal(size=(n, d)), 2) if kind == "ordinal_shift" else gen.normal(size=(n, d))
    if head == "binary":
        y = np.where(gen.random(n) < 0.5, -1.0, 1.0)
    elif head == "multiclass":
        y = gen.integers(0, 3, size=n)
    else:
        y = gen.normal(size=n)
    eps = float(gen.choice([0.01, 0.1, 0.3]))
    if kind == "feature_box":
        pert = FeatureBox(eps)
    elif kind == "missing_values":
        mask = gen.random((n, d)) < 0.3
        mask[int(gen.integers(n)), int(gen.integers(d))] = True
        pert = MissingValues(mask, -1.0, 1.0)
    elif kind == "ordinal_shift":
        pert = OrdinalShift([0], shifts=(-1, 0, 1)) & FeatureBox(eps / 3)
    elif kind == "budget":
        pert = Budget(FeatureBox(eps * 3), int(gen.integers(1, max(2, n // 2))))
    elif kind == "label_flips":
        pert = FeatureBox(eps / 3) & LabelFlips(int(gen.integers(1, 3)))
    else:
        raise ValueError(f"unknown perturbation kind {kind!r}; expected one of {PERTURBATION_KINDS}")
    return dict(
        model=model,
        X=X,
        y=y,
        perturbation=pert,
        loss="mse" if head == "mse" else "hinge",
        epochs=int(gen.integers(1, max_epochs + 1)),
        learning_rate=float(gen.choice([0.1, 0.5, 1.0])),
    )


#: Perturbation types of `random_recipe_case`.
RECIPE_KINDS = ("feature_box", "budget", "label_flips", "paired", "target_box", "removals", "frozen_features")


def recipe_kind_supported(kind: str, carry: str) -> bool:
    """Whether ``carry`` certifies the perturbation type ``kind`` of `random_recipe_case` (the per-input
    affine carry has no target boxes, only the box carry certifies removals, the influence enclosure label
    flips alone)."""
    if carry == "influence":
        return kind == "label_flips"
    if kind == "removals":
        return carry == "box"
    return not (carry == "affine" and kind == "target_box")


def random_recipe_case(
    gen: np.random.Generator, kind: str, *, max_points: int = 12, carry: str = "box"
) -> dict:
    """A random tiny certified-training configuration with a random training recipe (loss among hinge,
    cross-entropy and binary cross-entropy, MSE for ``"target_box"``; constant or decaying rate; full batch
    or shuffled mini-batches; momentum; weight decay; the options of AGT's recipes that ``carry`` supports:
    an L1 penalty, per-sample gradient clipping by value or norm (``carry="box"``), targeted label flips)
    with a perturbation of type ``kind`` (`RECIPE_KINDS`: input boxes, budgets, label flips, paired,
    regression targets, unlearning removals, or input boxes on raw rows of rank 1-3 behind a random frozen
    extractor, ``features=``) and a chunk size down to one row.

    With ``carry="influence"`` (label flips only) the model is linear and the recipe one it bounds (see
    `_influence_case`).  Returns the keyword arguments of `certified_training` except the backend and carry.
    """
    if not recipe_kind_supported(kind, carry):
        raise ValueError(f"carry={carry!r} does not certify the perturbation type {kind!r}")
    if carry == "influence":
        return _influence_case(gen)
    d = int(gen.integers(1, 3))
    n = int(gen.integers(4, max_points + 1))
    if kind == "target_box":
        loss, out = "mse", int(gen.choice([1, 2]))
    else:
        loss = str(gen.choice(["hinge", "cross_entropy", "binary_cross_entropy"]))
        out = (
            1 if loss == "binary_cross_entropy" else int(gen.choice([2, 3])) if loss == "cross_entropy" else 3
        )
        if loss == "hinge" and gen.random() < 0.5:
            out = 1
    hidden = [int(gen.integers(1, 5)) for _ in range(int(gen.integers(1, 3)))]
    X = gen.normal(size=(n, d))
    extractor = None
    if kind == "frozen_features":  # raw rows of a random rank through a random frozen extractor
        row_shape = random_row_shape(gen)
        X = gen.normal(size=(n, *row_shape))
        extractor, d = random_extractor(gen, row_shape)
    model = MLP.random([d, *hidden, out], rng=gen)
    if loss == "mse":
        y = gen.normal(size=(n, out)) if out > 1 else gen.normal(size=n)
    else:
        y = label_classes(loss, out)[gen.integers(0, max(out, 2), size=n)]
    eps = float(gen.choice([0.01, 0.1, 0.3]))
    k = int(gen.integers(1, max(2, n // 2)))
    classes = None if loss == "mse" else label_classes(loss, out)
    # targeted flips (not for the affine carry): a changed label can only become one class
    target = None
    if classes is not None and carry != "affine" and gen.random() < 0.3:
        target = classes[int(gen.integers(len(classes)))].item()
    if kind == "feature_box":
        pert = FeatureBox(eps)
    elif kind == "budget":
        pert = Budget(FeatureBox(3 * eps), k)
    elif kind == "label_flips":
        flips = LabelFlips(k, target=target)
        pert = flips if gen.random() < 0.5 else FeatureBox(eps / 3) & flips
    elif kind == "paired":
        pert = Budget(FeatureBox(eps) & LabelFlips(1, target=target), k)
    elif kind == "frozen_features":
        choice = gen.random()
        if choice < 0.4:
            pert = Budget(FeatureBox(3 * eps), k)
        elif choice < 0.7:
            pert = FeatureBox(eps)
        else:
            pert = Budget(FeatureBox(eps) & LabelFlips(1, target=target), k)
    elif kind == "removals":
        k = int(gen.integers(1, 3))
        pert = Removals(k)
    elif kind == "target_box":
        radius = float(gen.choice([0.1, 0.5, 1.0]))
        choice = gen.random()
        if choice < 0.35:
            pert = Budget(TargetBox(radius), k)
        elif choice < 0.7:
            pert = Budget(FeatureBox(eps) & TargetBox(radius), k)
        else:
            pert = FeatureBox(eps / 3) & TargetBox(radius / 5)
    else:
        raise ValueError(f"unknown perturbation kind {kind!r}; expected one of {RECIPE_KINDS}")
    rate = float(gen.choice([0.05, 0.2, 0.5]))
    batch = None if gen.random() < 0.4 else int(gen.integers(1, n + 1))
    drop_last = batch is not None and bool(gen.random() < 0.3)
    if kind == "removals" and batch is not None:  # every batch keeps a row
        batch = max(batch, k + 1)
        drop_last = drop_last or 0 < n % batch <= k
    options: dict = {} if extractor is None else {"features": extractor}
    if carry != "affine" and gen.random() < 0.3:
        options["l1_penalty"] = float(gen.choice([0.001, 0.01, 0.1]))
    if carry == "box" and gen.random() < 0.4:
        name = "clip_value" if gen.random() < 0.5 else "clip_norm"
        options[name] = float(gen.choice([0.05, 0.3, 1.0]))
    return dict(
        model=model,
        X=X,
        y=y,
        perturbation=pert,
        loss=loss,
        epochs=int(gen.integers(1, 3)),
        learning_rate=InverseDecay(rate, 0.5, minimum=0.01) if gen.random() < 0.5 else rate,
        batch_size=batch,
        shuffle=batch is not None and bool(gen.random() < 0.5),
        drop_last=drop_last,
        momentum=float(gen.choice([0.0, 0.5, 0.9])),
        weight_decay=float(gen.choice([0.0, 0.01, 0.5])),
        rng=int(gen.integers(1000)),
        chunk_size=[None, 1, 2, 3][int(gen.integers(4))],
        **options,
    )


def _influence_case(gen: np.random.Generator) -> dict:
    """A random configuration the influence enclosure bounds: a linear model (one layer) trained with
    cross-entropy (2-6 classes) or binary cross-entropy on 16-60 rows, 1-3 label flips (any or targeted,
    either scope), a constant or decaying rate, full batch or shuffled mini-batches (some dropping the last
    partial batch), momentum and weight decay, 1-5 epochs; rates from 0.05, where the enclosure bounds the
    whole run, to 2, where its remainder's bound through the generators (`REMAINDER_ROUTE`) decides how
    far it gets (where it gives up, the result is the box carry's)."""
    d, n = int(gen.integers(1, 4)), int(gen.integers(16, 61))
    loss = str(gen.choice(["cross_entropy", "binary_cross_entropy"]))
    out = 1 if loss == "binary_cross_entropy" else int(gen.integers(2, 7))
    X = gen.normal(size=(n, d))
    classes = label_classes(loss, out)
    y = classes[gen.integers(0, max(out, 2), size=n)]
    target = classes[int(gen.integers(len(classes)))].item() if gen.random() < 0.3 else None
    scope = "run" if gen.random() < 0.5 else "batch"
    rate = float(gen.choice([0.05, 0.2, 0.5, 1.0, 2.0]))
    batch = None if gen.random() < 0.5 else int(gen.integers(n // 3, n + 1))
    return dict(
        drop_last=batch is not None and bool(gen.random() < 0.3),
        model=MLP.random([d, out], rng=gen),
        X=X,
        y=y,
        perturbation=LabelFlips(int(gen.integers(1, 4)), target=target, scope=scope),
        loss=loss,
        epochs=int(gen.integers(1, 6)),
        learning_rate=InverseDecay(rate, 0.5, minimum=0.01) if gen.random() < 0.5 else rate,
        batch_size=batch,
        shuffle=batch is not None and bool(gen.random() < 0.5),
        momentum=float(gen.choice([0.0, 0.5, 0.9])),
        weight_decay=float(gen.choice([0.0, 0.01, 0.5])),
        rng=int(gen.integers(1000)),
    )


def random_extractor(gen: np.random.Generator, row_shape: tuple[int, ...]) -> tuple:
    """A random frozen torch extractor of rows of shape ``row_shape`` (rank 1, 2 or 3: ``(L,)``,
    ``(C, L)`` or ``(C, H, W)``) and its number of outputs: two to four layers drawn among those the rows
    of the current shape accept — ``Linear`` on the last axis, convolutions with random padding and stride,
    eval-mode batch norm with random statistics, ReLU, max and average pooling (with padding and ceil mode),
    dropout, identity, a ``Flatten`` of the trailing axes — then ``Flatten``, sometimes a dense layer and
    ReLU.  torch's global generator is left as it was."""
    torch = require("torch", extra="torch", purpose="the frozen-extractor soundness cases")
    with torch.random.fork_rng(devices=[]):  # torch's own initialisation, leaving its global state as it was
        torch.manual_seed(int(gen.integers(2**31)))
        return _extractor_layers(torch, gen, tuple(int(s) for s in row_shape))


def random_row_shape(gen: np.random.Generator) -> tuple[int, ...]:
    """A small random row shape of rank 1, 2 or 3 for `random_extractor`."""
    rank = int(gen.integers(1, 4))
    if rank == 1:
        return (int(gen.integers(3, 7)),)
    if rank == 2:
        return (int(gen.integers(1, 3)), int(gen.integers(3, 6)))
    return (int(gen.integers(1, 3)), int(gen.integers(2, 4)), int(gen.integers(2, 4)))


def _extractor_layers(torch, gen: np.random.Generator, shape: tuple[int, ...]) -> tuple:
    nn = torch.nn
    layers: list = []
    rows = torch.zeros((2, *shape), dtype=torch.float64)  # two rows: torch never reads them as unbatched
    for _ in range(int(gen.integers(2, 5))):
        layer = _random_layer(nn, gen, tuple(rows.shape[1:])).double().eval()
        layers.append(layer)
        with torch.no_grad():
            rows = layer(rows)
    shape = tuple(rows.shape[1:])
    layers.append(nn.Flatten())
    net = nn.Sequential(*layers).double()
    for layer in net:
        if isinstance(layer, (nn.BatchNorm1d, nn.BatchNorm2d)):
            with torch.no_grad():
                layer.running_mean.uniform_(-0.5, 0.5)
                layer.running_var.uniform_(0.3, 2.0)
                layer.weight.uniform_(-1.5, 1.5)
                layer.bias.uniform_(-0.5, 0.5)
    net = net.eval()
    width = int(np.prod(shape))
    if gen.random() < 0.4:  # a frozen dense layer after the rest
        net.append(nn.Linear(width, 3).double())
        net.append(nn.ReLU())
        width = 3
    return net, width


def _random_layer(nn, gen: np.random.Generator, shape: tuple[int, ...]):
    """One layer that rows of ``shape`` accept, keeping every axis at least 1 long."""
    rank, last = len(shape), shape[-1]
    choices = ["linear", "relu", "identity"]
    if rank == 1 or rank == 2:
        choices += ["batchnorm1d", "pool1d"]
    if rank == 2:
        choices += ["conv1d", "pool2d"]
    if rank == 3:
        choices += ["conv2d", "batchnorm2d", "pool2d", "flatten_tail"]
    kind = str(gen.choice(choices))
    if kind == "linear":
        return nn.Linear(last, int(gen.integers(1, 5)))
    if kind == "relu":
        return nn.ReLU()
    if kind == "identity":
        return nn.Dropout(0.5) if gen.random() < 0.5 else nn.Identity()
    if kind == "batchnorm1d":
        return nn.BatchNorm1d(shape[0])
    if kind == "batchnorm2d":
        return nn.BatchNorm2d(shape[0])
    if kind == "conv1d":
        padding = int(gen.integers(0, 2))
        size = int(min(2, last + 2 * padding))
        stride = int(gen.integers(1, 3))
        return nn.Conv1d(shape[0], int(gen.integers(1, 3)), size, padding=padding, stride=stride)
    if kind == "conv2d":
        padding = int(gen.integers(0, 2))
        size = int(min(2, shape[1] + 2 * padding, shape[2] + 2 * padding))
        stride = int(gen.integers(1, 3))
        return nn.Conv2d(shape[0], int(gen.integers(1, 3)), size, padding=padding, stride=stride)
    if kind == "flatten_tail":
        return nn.Flatten(start_dim=2)  # (C, H, W) -> (C, H W)
    two = kind == "pool2d"
    spatial = shape[-2:] if two else shape[-1:]
    size = 2 if min(spatial) >= 2 else 1
    padding = int(gen.integers(0, 2)) if size == 2 else 0
    if gen.random() < 0.5:
        pool = nn.MaxPool2d if two else nn.MaxPool1d
        return pool(size, stride=1, padding=padding, ceil_mode=bool(gen.random() < 0.5))
    pool = nn.AvgPool2d if two else nn.AvgPool1d
    return pool(size, stride=1, padding=padding, ceil_mode=bool(gen.random() < 0.5))
