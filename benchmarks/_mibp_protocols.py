"""The data and initial networks of the scale protocols of ``benchmarks/mibp_scale.py``, in NumPy alone so
that certkit's process and AGT's (``benchmarks/agt_peer.py``, run in AGT's environment) build the same runs.

* ``mnist-pca``: AGT's MNIST-PCA recipe on synthetic data of its shape: 60,000 training rows of 32 features
  (a 10-class Gaussian mixture whose feature variances fall off like the leading principal components of
  MNIST pixels), a linear [32, 10] network, full batch, cross-entropy, learning rate ``5 / (1 + t)`` (floor
  1e-3), 2 epochs; label flips ``k`` (``LabelFlips(k)``), optionally with per-sample clipping by value.
* ``mnist-mlp``: a [784, 128, 10] ReLU network on 10,000 MNIST-shaped rows (28x28 images in [0, 1], about
  70 % zero pixels: class prototypes of a few blurred strokes plus noise), batches of 1,000, learning rate
  ``0.5 / (1 + 0.1 t)``, 2 epochs, ``Budget(FeatureBox(0.01), 10)``.
* ``regression``: AGT's UCI recipe on synthetic data of its shape: 20,000 rows of 11 standardised features,
  a smooth nonlinear target scaled to [0, 1], a [11, 50, 1] network, MSE, batches of 5,000, learning rate
  ``0.005 / (1 + 0.1 t)`` (floor 1e-5), 1 epoch; ``k`` targets off by at most ``label_epsilon``
  (``Budget(TargetBox(eps), k)``).
"""

from __future__ import annotations

import itertools

import numpy as np

PROTOCOLS = {
    "mnist-pca": dict(
        sizes=[32, 10],
        n_train=60_000,
        n_test=2_000,
        batch=None,
        epochs=2,
        lr=5.0,
        decay=1.0,
        lr_min=1e-3,
        loss="cross_entropy",
    ),
    "mnist-mlp": dict(
        sizes=[784, 128, 10],
        n_train=10_000,
        n_test=1_000,
        batch=1_000,
        epochs=2,
        lr=0.5,
        decay=0.1,
        lr_min=0.0,
        loss="cross_entropy",
    ),
    "regression": dict(
        sizes=[11, 50, 1],
        n_train=20_000,
        n_test=2_000,
        batch=5_000,
        epochs=1,
        lr=0.005,
        decay=0.1,
        lr_min=1e-5,
        loss="mse",
    ),
}


def data(protocol: str, seed: int = 0) -> dict[str, np.ndarray]:
    """``X_train, y_train, X_test, y_test`` (float64 features; int64 classes or float64 targets)."""
    spec = PROTOCOLS[protocol]
    gen = np.random.default_rng(seed)
    n = spec["n_train"] + spec["n_test"]
    if protocol == "mnist-pca":
        d, C = 32, 10
        scale = 2.4 * np.arange(1, d + 1) ** -0.6  # the PC standard deviations of MNIST pixels in [0, 1]
        means = gen.normal(size=(C, d)) * scale * 0.9
        y = gen.integers(0, C, size=n)
        X = means[y] + gen.normal(size=(n, d)) * scale
    elif protocol == "mnist-mlp":
        C, side = 10, 28
        grid = np.stack(np.meshgrid(np.arange(side), np.arange(side), indexing="ij"), axis=-1).reshape(-1, 2)
        protos = np.zeros((C, side * side))
        for c in range(C):
            for _ in range(3):  # three strokes of blurred points between two random ends
                a, b = gen.uniform(5, 22, size=2), gen.uniform(5, 22, size=2)
                for t in np.linspace(0, 1, 12):
                    p = a + t * (b - a)
                    protos[c] += np.exp(-((grid - p) ** 2).sum(axis=1) / 2.0)
            protos[c] /= protos[c].max()
        y = gen.integers(0, C, size=n)
        X = protos[y] * gen.uniform(0.6, 1.0, size=(n, 1)) + gen.normal(size=(n, side * side)) * 0.15
        X = np.clip(np.where(protos[y] > 0.15, X, 0.0), 0.0, 1.0)
    elif protocol == "regression":
        d = 11
        X = gen.normal(size=(n, d))
        w = gen.normal(size=d)
        t = np.tanh(X @ w / np.sqrt(d)) + 0.3 * np.sin(X[:, 0] * X[:, 1]) + gen.normal(size=n) * 0.05
        y = (t - t.min()) / (t.max() - t.min())
    else:
        raise ValueError(f"unknown protocol {protocol!r}; expected one of {sorted(PROTOCOLS)}")
    m = spec["n_train"]
    return {"X_train": X[:m], "y_train": y[:m], "X_test": X[m:], "y_test": y[m:]}


def initial_weights(protocol: str, seed: int = 1) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """PyTorch's default initialisation of ``nn.Linear`` (uniform in ``±1 / sqrt(fan_in)``), drawn by NumPy:
    weights ``(out, in)`` and biases per layer."""
    gen = np.random.default_rng(seed)
    sizes = PROTOCOLS[protocol]["sizes"]
    weights, biases = [], []
    for fan_in, fan_out in itertools.pairwise(sizes):
        bound = 1.0 / np.sqrt(fan_in)
        weights.append(gen.uniform(-bound, bound, size=(fan_out, fan_in)))
        biases.append(gen.uniform(-bound, bound, size=fan_out))
    return weights, biases


#: Fine-tuning behind frozen convolutions (AGT's OCT-MNIST recipe on scikit-learn's digits): pixel budgets.
FINETUNE_BUDGETS = (
    [{"kind": "features", "k": k, "epsilon": 0.02} for k in (10, 50, 100)]
    + [{"kind": "features", "k": 20, "epsilon": eps} for eps in (0.01, 0.05, 0.1)]
    + [{"kind": "labels", "k": k, "epsilon": 0.0} for k in (5, 20, 50)]
)
FINETUNE = dict(lr=0.05, decay=5.0, lr_min=0.001, epochs=2, batch=650, n_train=1300)


def digits_binary() -> dict[str, np.ndarray]:
    """scikit-learn's digits as a binary task (label 1 for digits 5-9), images ``(n, 1, 8, 8)`` in [0, 1],
    shuffled once (seed 0) and split 1,300 / 497; ``pretrain`` marks the training rows without digits 8
    and 9 (the pretraining set; fine-tuning sees every training row)."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    order = np.random.default_rng(0).permutation(len(digits.target))
    X = (digits.images[order] / 16.0)[:, None, :, :].astype(np.float64)
    d = digits.target[order]
    y = (d >= 5).astype(np.int64)
    m = FINETUNE["n_train"]
    return {
        "X_train": X[:m],
        "y_train": y[:m],
        "X_test": X[m:],
        "y_test": y[m:],
        "pretrain": d[:m] < 8,
    }


FROZEN = 7  # modules of the CNN before the dense head


def cnn(outputs: int = 1):
    """The fine-tuning CNN (Conv 1->8 3x3, ReLU, Conv 8->16 4x4 stride 2, ReLU, Conv 16->16 4x4 stride 2,
    ReLU, Flatten, Linear 64->32, ReLU, Linear 32->``outputs``; strided convolutions instead of pooling,
    which AGT's interval model does not bound), float64, PyTorch's default initialisation after
    ``torch.manual_seed(0)``."""
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return torch.nn.Sequential(
            torch.nn.Conv2d(1, 8, 3, padding=1),
            torch.nn.ReLU(),
            torch.nn.Conv2d(8, 16, 4, stride=2, padding=1),
            torch.nn.ReLU(),
            torch.nn.Conv2d(16, 16, 4, stride=2, padding=1),
            torch.nn.ReLU(),
            torch.nn.Flatten(),
            torch.nn.Linear(64, 32),
            torch.nn.ReLU(),
            torch.nn.Linear(32, outputs),
        ).double()


def load_cnn(path, outputs: int = 1):
    """The CNN with the weights saved at ``path`` (``.npz`` of its state dict)."""
    import torch

    model = cnn(outputs)
    model.load_state_dict({k: torch.from_numpy(v) for k, v in np.load(path).items()})
    return model


#: The private-prediction protocols of ``benchmarks/mibp_privacy.py`` (AGT's ``scripts/privacy_paper``), one
#: recipe each: the network, the loss, the learning rate ``lr / (1 + decay t)`` (floor ``lr_min``), epochs,
#: batch (None: full batch), per-sample clipping by value (AGT's ``clip_gamma``, ``clip_method="clamp"``),
#: heavy-ball momentum, and the ladder of k.
PRIVACY = {
    # AGT's blobs: a linear model on [x, x², x³] of two Gaussians, one full-batch step
    "blobs": dict(sizes=[6, 2], loss="cross_entropy", lr=2.0, decay=0.6, epochs=1, clip=0.06, momentum=0.0),
    # AGT's OCT-MNIST recipe on the digits CNN's features: the dense head fine-tuned with momentum
    "finetune": dict(
        sizes=[64, 32, 1], loss="binary_cross_entropy", lr=1.0, decay=0.5, epochs=4, clip=0.5, momentum=0.5
    ),
    # AGT's IMDB recipe on fixed text embeddings: an MLP head
    "text": dict(
        sizes=[64, 32, 1], loss="binary_cross_entropy", lr=5.0, decay=0.5, epochs=3, clip=0.04, momentum=0.0
    ),
}
for _name, _spec in PRIVACY.items():  # every one full batch, rate floor 1e-3, the ladder k = 0..199 / 0..99
    _spec.update(batch=None, lr_min=1e-3, ks=tuple(range(200 if _name == "blobs" else 100)))


def blobs(
    seed: int = 0, position: float = 1.25, spread: float = 0.35, n_train: int = 5000
) -> dict[str, np.ndarray]:
    """AGT's privacy blobs: ``1.25 n_train`` points of two Gaussians centred at ``±(position, position)`` with
    standard deviation ``spread`` (``make_blobs``, ``random_state=seed``), split 80 / 20
    (``train_test_split(random_state=seed)``), features ``[x, x², x³]``; labels 0 and 1."""
    from sklearn.datasets import make_blobs
    from sklearn.model_selection import train_test_split

    centres = np.array([[position, position], [-position, -position]])
    x, y = make_blobs(
        n_samples=int(n_train * 1.25), centers=centres, cluster_std=[spread, spread], random_state=seed
    )
    x_tr, x_te, y_tr, y_te = train_test_split(x, y, test_size=0.2, random_state=seed)

    def features(z):
        return np.hstack((z, z**2, z**3)).astype(np.float64)

    return {
        "X_train": features(x_tr),
        "y_train": y_tr.astype(np.int64),
        "X_test": features(x_te),
        "y_test": y_te.astype(np.int64),
    }


def text_like(seed: int = 0, n_train: int = 4000, n_test: int = 1000, dim: int = 64) -> dict[str, np.ndarray]:
    """A sentiment-like task on fixed embeddings: a vocabulary of 2,000 words with fixed random embeddings
    (``dim`` values each), documents of 20-200 words drawn from a Zipf law tilted toward 100 positive or
    100 negative words by the document's label (and a little noise: 10 % of the documents are labelled
    against their words), each represented by the mean of its words' embeddings — the shape of AGT's IMDB
    task (GPT-2 embeddings of reviews) at a size a CPU trains in seconds."""
    gen = np.random.default_rng(seed)
    vocab = 2000
    embed = gen.normal(size=(vocab, dim)) / np.sqrt(dim)
    base = 1.0 / np.arange(1, vocab + 1)
    positive, negative = gen.choice(vocab, size=(2, 100), replace=False)
    n = n_train + n_test
    y = gen.integers(0, 2, size=n)
    X = np.empty((n, dim))
    for i in range(n):
        weights = base.copy()
        weights[positive if y[i] else negative] *= 4.0
        words = gen.choice(vocab, size=int(gen.integers(20, 201)), p=weights / weights.sum())
        X[i] = embed[words].mean(axis=0)
    X = (X - X[:n_train].mean(axis=0)) / X[:n_train].std(axis=0)
    flip = gen.random(n) < 0.1
    y = np.where(flip, 1 - y, y)
    return {"X_train": X[:n_train], "y_train": y[:n_train], "X_test": X[n_train:], "y_test": y[n_train:]}


def dense(sizes):
    """``Linear`` layers of widths ``sizes`` separated by ``ReLU`` (float64), PyTorch's default
    initialisation from the global torch generator (seed it first)."""
    import torch

    layers: list = []
    for i, (fan_in, fan_out) in enumerate(itertools.pairwise(sizes)):
        layers += [torch.nn.Linear(fan_in, fan_out)] + ([torch.nn.ReLU()] if i < len(sizes) - 2 else [])
    return torch.nn.Sequential(*layers).double()


def multiclass_modules(spec: dict):
    """The frozen extractor (None without one) and the initial head of a run of
    ``benchmarks/mibp_multiclass.py``: ``spec["sizes"]`` the head's widths, ``spec["weights"]`` an ``.npz`` of
    its state dict (keys ``head.*``, and ``frozen.*`` for the first ``FROZEN`` modules of ``cnn(10)``)."""
    import torch

    saved = np.load(spec["weights"])
    head = dense(spec["sizes"])
    head.load_state_dict({k[5:]: torch.from_numpy(saved[k]) for k in saved.files if k.startswith("head.")})
    frozen = None
    if any(k.startswith("frozen.") for k in saved.files):
        frozen = cnn(spec["sizes"][-1])[:FROZEN]
        state = {k[7:]: torch.from_numpy(saved[k]) for k in saved.files if k.startswith("frozen.")}
        frozen.load_state_dict(state)
        frozen.eval()
    return frozen, head
