"""Random tiny certified-training configurations for the soundness sweeps (tests and
``benchmarks/mibp_soundness.py``): every perturbation type, and random training recipes with every option
of the recipe and chunk sizes down to one row."""

from __future__ import annotations

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
    "random_case",
    "random_recipe_case",
    "recipe_kind_supported",
]


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
    affine carry has no target boxes, and only the box carry certifies removals)."""
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
    regression targets, unlearning removals, or input boxes on raw images behind a random frozen
    extractor, ``features=``) and a chunk size down to one row.

    Returns the keyword arguments of `certified_training` except the backend and carry.
    """
    if not recipe_kind_supported(kind, carry):
        raise ValueError(f"carry={carry!r} does not certify the perturbation type {kind!r}")
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
    if kind == "frozen_features":  # raw 3x3 images through a random frozen convolution
        X = gen.normal(size=(n, 1, 3, 3))
        extractor, d = _random_extractor(gen)
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


def _random_extractor(gen: np.random.Generator) -> tuple:
    """A random frozen torch extractor of 3x3 one-channel images (a convolution with random padding and
    stride, sometimes eval-mode batch norm with random statistics, ReLU, sometimes average or max pooling,
    flatten, sometimes a dense layer and ReLU) and its number of outputs."""
    torch = require("torch", extra="torch", purpose="the frozen-extractor soundness cases")
    with torch.random.fork_rng(devices=[]):  # torch's own initialisation, leaving its global state as it was
        torch.manual_seed(int(gen.integers(2**31)))
        return _extractor_layers(torch, gen)


def _extractor_layers(torch, gen: np.random.Generator) -> tuple:
    nn = torch.nn
    channels = int(gen.integers(1, 3))
    padding = int(gen.integers(0, 2))
    stride = 2 if padding and gen.random() < 0.5 else 1  # the output stays at least 2x2
    layers = [nn.Conv2d(1, channels, 2, padding=padding, stride=stride)]
    if gen.random() < 0.5:
        norm = nn.BatchNorm2d(channels)
        with torch.no_grad():
            norm.running_mean.uniform_(-0.5, 0.5)
            norm.running_var.uniform_(0.3, 2.0)
            norm.weight.uniform_(-1.5, 1.5)
            norm.bias.uniform_(-0.5, 0.5)
        layers.append(norm)
    layers.append(nn.ReLU())
    pool = gen.random()
    if pool < 0.3:
        layers.append(
            nn.AvgPool2d(2, stride=1, padding=int(gen.integers(0, 2)), ceil_mode=bool(gen.random() < 0.5))
        )
    elif pool < 0.6:
        layers.append(nn.MaxPool2d(2, stride=1, padding=int(gen.integers(0, 2))))
    layers.append(nn.Flatten())
    net = nn.Sequential(*layers).double().eval()
    width = int(net(torch.zeros((1, 1, 3, 3), dtype=torch.float64)).shape[1])
    if gen.random() < 0.4:  # a frozen dense layer after the convolution
        net.append(nn.Linear(width, 3).double())
        net.append(nn.ReLU())
        width = 3
    return net, width
