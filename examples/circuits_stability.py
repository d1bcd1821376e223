"""Certified circuits where discovery is unstable: a wide CNN on Fashion-MNIST, small concept sets.

Setting (all choices fixed before looking at any shifted test image; nothing is tuned on them):

* data: Fashion-MNIST read from the Debian package ``dataset-fashion-mnist`` (never downloaded);
  1,000 training and 200 test images per class;
* model: conv(1->32) - pool - conv(32->64) - pool - conv(64->256) "relu3" - global average pool -
  linear(256->10), trained for 2 epochs with Adam (2-5 min on one heavily shared CPU core);
* concept: a class; concept sets of ``SET_SIZE`` = 32 training images of it, drawn from a pool of
  512; discovery (the black box): the ``TOP_K`` = 32 channels of relu3 with the largest mean
  attribution-patching score for the class logit;
* certification: Poisson deletion with p_del = 0.9 (the paper's mechanism), 1,000 runs, family-wise
  confidence 0.999, edit-distance radii 1, 2, 5;
* circuits compared: ``plain`` (the rule on the concept set), ``smoothed`` (majority vote over
  subsamples), ``certified r`` (certified included; abstained channels left out) and ``plain top-|r=1|``
  (the rule with k = the size of the certified r = 1 circuit: the size-matched control);
* evaluation: class accuracy of the model with every non-circuit channel of relu3 mean-ablated, on
  clean test images and under Gaussian noise, rotation, translation and contrast reduction; the
  Jaccard stability of each method over pairs of disjoint concept sets (:func:`circuit_stability`).

Run ``python examples/circuits_stability.py --seeds 1`` for one seed (7-11 min measured); the benchmark
(``benchmarks/circuits.py``) runs 10 classes x 5 seeds and draws ``circuits_stability.png``.
"""

from __future__ import annotations

import argparse
import time
from collections import OrderedDict

import numpy as np

from certkit._results import ConfidenceInterval, format_table
from certkit.circuits import (
    ScoreRule,
    certify_circuit,
    circuit_accuracy,
    circuit_stability,
    layer_mean,
    neuron_scores,
)

LAYER = "relu3"
SET_SIZE = 32
POOL_SIZE = 512
TOP_K = 32
RADII = (1, 2, 5)
CERTIFY = {"deletion_prob": 0.9, "n_subsamples": 1000, "confidence_level": 0.999}
METHODS = ("plain", "smoothed", *(f"certified r={r}" for r in RADII), "plain top-|r=1|")
SHIFTS = ("noise", "rotation", "translation", "contrast")


def load_images(seed: int, *, n_train: int = 1000, n_test: int = 200):
    """Fashion-MNIST as (n, 1, 28, 28) float32 images in [0, 1] (class-balanced subsets)."""
    from certkit.datasets import load_fashion_mnist

    ds = load_fashion_mnist(n_train_per_class=n_train, n_test_per_class=n_test, rng=seed)
    shape = (-1, 1, 28, 28)
    return (
        ds.X_train.reshape(shape).astype(np.float32),
        ds.y_train,
        ds.X_test.reshape(shape).astype(np.float32),
        ds.y_test,
    )


def make_cnn():
    """Three convolutions; the last one (256 channels, "relu3") holds the circuit's neurons."""
    from torch import nn

    return nn.Sequential(
        OrderedDict(
            conv1=nn.Conv2d(1, 32, 3, padding=1),
            relu1=nn.ReLU(),
            pool1=nn.MaxPool2d(2),
            conv2=nn.Conv2d(32, 64, 3, padding=1),
            relu2=nn.ReLU(),
            pool2=nn.MaxPool2d(2),
            conv3=nn.Conv2d(64, 256, 3, padding=1),
            relu3=nn.ReLU(),
            gap=nn.AdaptiveAvgPool2d(1),
            flat=nn.Flatten(),
            fc=nn.Linear(256, 10),
        )
    )


def train_cnn(X: np.ndarray, y: np.ndarray, *, seed: int, epochs: int = 2, batch: int = 64):
    """Mini-batch Adam; the global torch RNG is left as it was."""
    import torch

    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = make_cnn()
        order_rng = np.random.default_rng(seed)
        opt = torch.optim.Adam(model.parameters(), lr=3e-3)
        xt, yt = torch.from_numpy(X), torch.from_numpy(y)
        for _ in range(epochs):
            for idx in np.array_split(order_rng.permutation(len(y)), len(y) // batch):
                opt.zero_grad()
                loss = torch.nn.functional.cross_entropy(model(xt[idx]), yt[idx])
                loss.backward()
                opt.step()
    return model.eval()


def shift_images(X: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Clean and shifted test images (severities fixed a priori)."""
    from scipy import ndimage

    mean = X.mean(axis=(2, 3), keepdims=True)
    return {
        "clean": X,
        "noise": np.clip(X + rng.normal(0.0, 0.3, X.shape), 0.0, 1.0).astype(np.float32),
        "rotation": ndimage.rotate(X, 20.0, axes=(2, 3), reshape=False, order=1),
        "translation": ndimage.shift(X, (0, 0, 3, 3), order=0),
        "contrast": (mean + 0.4 * (X - mean)).astype(np.float32),
    }


def concept_circuits(scores: np.ndarray, rows: np.ndarray, seed: int) -> dict[str, np.ndarray]:
    """Every compared circuit of one concept set (``rows`` of the pool's score matrix)."""
    rule = ScoreRule(scores[rows], top_k=TOP_K)
    res = certify_circuit(rule, radius=0, rng=seed, progress=False, **CERTIFY)
    masks = {"plain": rule.discover(), "smoothed": np.asarray(res.smoothed, dtype=bool)}
    for r in RADII:
        masks[f"certified r={r}"] = res.at_radius(r).included
    k = int(masks["certified r=1"].sum())
    masks["plain top-|r=1|"] = (
        ScoreRule(scores[rows], top_k=k).discover() if k else np.zeros(scores.shape[1], bool)
    )
    return masks


def run_seed(seed: int, classes=range(10), *, n_pairs: int = 10, log=print) -> list[dict]:
    """Train one model and measure every class: one record per (class, method)."""
    import torch

    torch.set_num_threads(1)
    start = time.perf_counter()
    X_train, y_train, X_test, y_test = load_images(seed)
    model = train_cnn(X_train, y_train, seed=seed)
    with torch.no_grad():
        full_acc = float((model(torch.from_numpy(X_test)).argmax(1).numpy() == y_test).mean())
    log(f"seed {seed}: trained in {time.perf_counter() - start:.0f} s, test accuracy {full_acc:.3f}")
    gen = np.random.default_rng(seed)
    conditions = shift_images(X_test, gen)
    ref_mean = layer_mean(model, LAYER, X_train[gen.choice(len(y_train), 1000, replace=False)])
    records = []
    for c in classes:
        pool = X_train[gen.choice(np.flatnonzero(y_train == c), POOL_SIZE, replace=False)]
        scores = neuron_scores(model, LAYER, pool, method="attribution", target=c)
        masks = concept_circuits(scores, gen.choice(POOL_SIZE, SET_SIZE, replace=False), seed)
        stab = circuit_stability(
            ScoreRule(scores, top_k=TOP_K),
            set_size=SET_SIZE,
            n_pairs=n_pairs,
            radii=RADII,
            certify_options=CERTIFY,
            rng=gen,
        )
        sel = y_test == c
        for method, mask in [("full model", np.ones(scores.shape[1], bool)), *masks.items()]:
            acc = {
                cond: circuit_accuracy(model, LAYER, mask, X[sel], y_test[sel], reference_mean=ref_mean)
                for cond, X in conditions.items()
            }
            rec = {
                "seed": seed,
                "class": c,
                "method": method,
                "size": int(mask.sum()),
                **acc,
                "shifted": float(np.mean([acc[s] for s in SHIFTS])),
            }
            if method in stab.methods:
                rec["jaccard"] = float(stab.mean[stab.methods.index(method)])
            records.append(rec)
    log(f"seed {seed}: done in {time.perf_counter() - start:.0f} s")
    return records


def mean_ci(values: np.ndarray, level: float = 0.95) -> tuple[float, ConfidenceInterval]:
    """Mean and Student t interval over the (class, seed) units."""
    from scipy import stats

    values = np.asarray(values, dtype=np.float64)
    half = stats.t.ppf(0.5 + level / 2, values.size - 1) * values.std(ddof=1) / np.sqrt(values.size)
    return float(values.mean()), ConfidenceInterval(float(values.mean() - half), float(values.mean() + half))


def _column(records: list[dict], method: str, key: str) -> np.ndarray:
    rows = sorted(
        (r for r in records if r["method"] == method and key in r), key=lambda r: (r["seed"], r["class"])
    )
    return np.array([r[key] for r in rows], dtype=np.float64)


def _paired(records: list[dict], method: str, key: str) -> np.ndarray:
    """``method - plain`` per unit (empty where the method has no ``key``)."""
    a, b = _column(records, method, key), _column(records, "plain", key)
    return a - b if a.size == b.size else np.zeros(0)


def summary_tables(records: list[dict]) -> str:
    """Mean [95% interval] over (class, seed) units per method, and paired differences vs plain."""

    def cell(values: np.ndarray, digits: int = 3) -> str:
        if values.size < 2:
            return "-"
        m, ci = mean_ci(values)
        return f"{m:.{digits}f} [{ci.low:.{digits}f}, {ci.high:.{digits}f}]"

    methods = ("full model", *METHODS)
    units = len({(r["seed"], r["class"]) for r in records})
    rows = [
        [
            m,
            cell(_column(records, m, "size"), 1),
            cell(_column(records, m, "clean")),
            cell(_column(records, m, "shifted")),
            cell(_column(records, m, "jaccard")),
        ]
        for m in methods
    ]
    out = [
        format_table(
            ["circuit", "size (channels)", "clean acc", "shifted acc (4 shifts)", "Jaccard stability"],
            rows,
            title=f"Means over {units} (class, seed) units, 95% t intervals",
        )
    ]
    rows = [[m] + [cell(_column(records, m, s)) for s in ("clean", *SHIFTS)] for m in methods]
    out.append(format_table(["circuit", "clean", *SHIFTS], rows, title="Circuit accuracy per condition"))
    rows = []
    for m in METHODS[1:]:
        rows.append(
            [f"{m} - plain"]
            + [
                cell(_paired(records, m, key), 3 if key != "size" else 1)
                for key in ("size", "clean", "shifted", "jaccard")
            ]
        )
    out.append(
        format_table(
            ["paired difference", "size", "clean acc", "shifted acc", "Jaccard"],
            rows,
            title="Paired differences against the plain circuit (same unit), 95% t intervals",
        )
    )
    return "\n\n".join(out)


def plot(records: list[dict], path: str) -> None:
    """Shifted accuracy vs circuit size (left) and Jaccard stability (right), means with 95% intervals."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover
        raise ImportError('plotting needs matplotlib: pip install "certkit[plot]"') from exc
    fig, axes = plt.subplots(1, 2, figsize=(11, 5.0))
    cmap = plt.get_cmap("tab10")
    for i, m in enumerate(METHODS):
        size, size_ci = mean_ci(_column(records, m, "size"))
        for key, marker in (("clean", "o"), ("shifted", "s")):
            acc, acc_ci = mean_ci(_column(records, m, key))
            axes[0].errorbar(
                size,
                acc,
                xerr=[[size - size_ci.low], [size_ci.high - size]],
                yerr=[[acc - acc_ci.low], [acc_ci.high - acc]],
                fmt=marker,
                color=cmap(i),
                capsize=3,
                label=f"{m} ({key})" if key == "clean" else None,
                mfc="white" if key == "shifted" else cmap(i),
            )
    axes[0].set(
        xlabel="circuit size (channels of 256)",
        ylabel="class accuracy, circuit alone",
        title="accuracy vs size (filled: clean, open: mean of 4 shifts)",
    )
    axes[0].legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=3)
    stab = [
        (m, *mean_ci(_column(records, m, "jaccard"))) for m in METHODS if _column(records, m, "jaccard").size
    ]
    xs = np.arange(len(stab))
    axes[1].bar(
        xs,
        [s[1] for s in stab],
        color=[cmap(METHODS.index(s[0])) for s in stab],
        yerr=[[s[1] - s[2].low for s in stab], [s[2].high - s[1] for s in stab]],
        capsize=4,
    )
    axes[1].set_xticks(xs, [s[0] for s in stab], rotation=20, fontsize=8)
    axes[1].set(
        ylabel="Jaccard overlap, disjoint concept sets",
        ylim=(0, 1),
        title=f"stability (sets of {SET_SIZE}; machine shared)",
    )
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=1, help="number of seeds (models), 0..seeds-1")
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--n-pairs", type=int, default=10)
    parser.add_argument("--plot", default="circuits_stability.png")
    args = parser.parse_args()
    start = time.perf_counter()
    records = []
    for seed in range(args.seeds):
        records += run_seed(seed, range(args.classes), n_pairs=args.n_pairs)
    print(summary_tables(records))
    if args.plot:
        plot(records, args.plot)
        print(f"plot saved to {args.plot}")
    print(f"total {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
