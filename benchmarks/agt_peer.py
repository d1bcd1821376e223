"""Side-by-side peer runner for Abstract Gradient Training (AGT) on the half-moons poisoning protocol.

AGT (Sosnin et al., https://github.com/psosnin/AbstractGradientTraining) is licensed GPL-3. This file
contains none of its code or text: it only imports AGT's public API from a checkout the user already has on
disk (``--agt-path``), in a Python environment the user set up for it, and runs it in this process. Nothing
from AGT is vendored, copied or redistributed with certkit.

The half-moons protocol (data, initial network, training budgets) is described here independently so that
certkit's own benchmark can import :func:`halfmoons_protocol` and :func:`initial_torch_model` and train on
exactly the same data from exactly the same starting weights:

* 3500 points from ``sklearn.datasets.make_moons(noise=0.1, random_state=0)``, class 0 moved up by 0.2 in the
  second coordinate, split 3000/500 by ``train_test_split(random_state=42)``, features ``[x, x**2, x**3]``;
* a 6-128-2 ReLU network in float64, initialised by torch's default initialisation after
  ``torch.manual_seed(1234)``;
* full-batch SGD, 4 epochs, learning rate 2.0 with decay 0.6 (floor 1e-3), cross-entropy loss;
* 16 poisoning budgets (:data:`AGT_BUDGETS`).

Usage, with the AGT environment's interpreter (torch, numpy, scikit-learn, pydantic, scipy, gurobipy)::

    python benchmarks/agt_peer.py --agt-path /path/to/AbstractGradientTraining \
        [--only 0,5] [--json out.json] [--dump-bounds DIR] [--threads N]
    python benchmarks/agt_peer.py --agt-path ... --protocol mnist-pca --k 10 [--clip 0.1] --threads 1
    python benchmarks/agt_peer.py --agt-path ... --privacy data.npz --privacy-protocol blobs --epsilons 0.1,1

The second form runs one of the scale protocols of ``benchmarks/_mibp_protocols.py`` (run by
``benchmarks/mibp_scale.py`` side by side with certkit) and prints one JSON object; the third AGT's private
prediction for ``benchmarks/mibp_privacy.py`` (one JSON object); ``--multiclass SPEC --k K`` likewise runs
one label-flip run of ``benchmarks/mibp_multiclass.py`` (data, weights and recipe in its files).

One JSON object is printed per configuration. ``certified_accuracy`` is the share of test points that the
final parameter box classifies correctly for every parameter in the box (AGT's worst-case test accuracy, no
test-time perturbation); ``nominal_accuracy`` is the accuracy of the nominally trained network.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

N_TRAIN = 3000
N_TEST = 500
SEED = 1234
HIDDEN = 128

# The 16 budgets of the half-moons study: k = number of poisoned training points, epsilon = l-inf radius of
# the feature perturbation, label_k = number of points whose label may be flipped (to any other class). In the
# "paired" sweep the same k points may have both their features and their labels poisoned.
AGT_BUDGETS: list[dict[str, Any]] = (
    [{"sweep": "features-k", "k": k, "epsilon": 0.01, "label_k": 0} for k in (50, 100, 200, 300)]
    + [{"sweep": "features-eps", "k": 10, "epsilon": eps, "label_k": 0} for eps in (0.05, 0.1, 0.15, 0.2)]
    + [{"sweep": "labels", "k": 0, "epsilon": 0.0, "label_k": lk} for lk in (1, 3, 5, 7)]
    + [{"sweep": "paired", "k": k, "epsilon": 0.1, "label_k": k} for k in (1, 3, 5, 7)]
)

# Training hyper-parameters shared by every budget.
TRAINING = {
    "learning_rate": 2.0,
    "n_epochs": 4,
    "loss": "cross_entropy",
    "lr_decay": 0.6,
    "lr_min": 1e-3,
    "paired_poison": True,
}


def halfmoons_protocol() -> dict[str, np.ndarray]:
    """Half-moons train/test data of the protocol (numpy and scikit-learn only).

    Returns float64 ``X_train`` (3000, 6), ``X_test`` (500, 6) with columns ``[x1, x2, x1**2, x2**2, x1**3,
    x2**3]`` and int64 labels ``y_train`` (3000,), ``y_test`` (500,) in {0, 1}.
    """
    from sklearn.datasets import make_moons
    from sklearn.model_selection import train_test_split

    n = N_TRAIN + N_TEST
    x, y = make_moons(n_samples=n, noise=0.1, random_state=0)
    x = np.asarray(x, dtype=np.float64)
    x[y == 0, 1] += 0.2
    x_tr, x_te, y_tr, y_te = train_test_split(x, y, test_size=N_TEST / n, random_state=42)

    def features(z: np.ndarray) -> np.ndarray:
        return np.hstack((z, z**2, z**3)).astype(np.float64)

    return {
        "X_train": features(x_tr),
        "y_train": np.asarray(y_tr, dtype=np.int64),
        "X_test": features(x_te),
        "y_test": np.asarray(y_te, dtype=np.int64),
    }


def initial_torch_model():
    """The protocol's initial network: Linear(6, 128) - ReLU - Linear(128, 2), float64, torch seed 1234.

    The global torch RNG state is left as it was.
    """
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)
        model = torch.nn.Sequential(
            torch.nn.Linear(6, HIDDEN),
            torch.nn.ReLU(),
            torch.nn.Linear(HIDDEN, 2),
        ).double()
    return model


PARAM_NAMES = ("W1", "b1", "W2", "b2")


def flat_params(params) -> np.ndarray:
    """Concatenate W1, b1, W2, b2 (each W in torch (out, in) layout) row-major into one float64 vector."""
    return np.concatenate([p.detach().cpu().numpy().astype(np.float64).reshape(-1) for p in params])


def _import_agt(agt_path: str | None):
    if agt_path is not None:
        root = Path(agt_path).resolve()
        if not (root / "abstract_gradient_training").is_dir():
            raise SystemExit(f"--agt-path {root} has no abstract_gradient_training package")
        sys.path.insert(0, str(root))
    import abstract_gradient_training as agt

    return agt


def run_budget(agt, budget: dict[str, Any], data: dict[str, np.ndarray]) -> tuple[dict[str, Any], Any]:
    """Train one budget with AGT on CPU from the seed-1234 weights; return the result row and the model."""
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    def loader(x: np.ndarray, y: np.ndarray, batch: int) -> DataLoader:
        ds = TensorDataset(torch.from_numpy(x).double(), torch.from_numpy(y))
        return DataLoader(ds, batch_size=batch, shuffle=False)

    dl_train = loader(data["X_train"], data["y_train"], N_TRAIN)
    dl_test = loader(data["X_test"], data["y_test"], N_TEST)

    config = agt.AGTConfig(
        **TRAINING,
        device="cpu",
        log_level="WARNING",
        k_poison=budget["k"],
        epsilon=budget["epsilon"],
        label_k_poison=budget["label_k"],
    )
    # A fresh model for every budget, so each starts from the same initial weights whatever AGT does with it.
    bounded = agt.bounded_models.IntervalBoundedModel(initial_torch_model())

    wall0, cpu0 = time.perf_counter(), time.process_time()
    agt.poison_certified_training(bounded, config, dl_train, dl_test)
    seconds, cpu_seconds = time.perf_counter() - wall0, time.process_time() - cpu0

    x_test = torch.from_numpy(data["X_test"]).double()
    y_test = torch.from_numpy(data["y_test"])
    worst, nominal, _best = agt.test_metrics.test_accuracy(bounded, x_test, y_test)
    row = {
        "sweep": budget["sweep"],
        "k": budget["k"],
        "epsilon": budget["epsilon"],
        "label_k": budget["label_k"],
        # AGT returns float32 means over the 500 test points; report the exact fractions.
        "nominal_accuracy": round(float(nominal) * N_TEST) / N_TEST,
        "certified_accuracy": round(float(worst) * N_TEST) / N_TEST,
        "seconds": seconds,
        "cpu_seconds": cpu_seconds,
    }
    return row, bounded


def run_unlearning(agt, k: int, data: dict[str, np.ndarray]) -> dict[str, Any]:
    """AGT's unlearning certificate (``k_unlearn=k``) on the half-moons protocol: certified test accuracy
    (the prediction is correct for every parameter in the final box, which holds the runs without any ``k``
    rows of each batch), CPU and wall seconds."""
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    ds = TensorDataset(torch.from_numpy(data["X_train"]).double(), torch.from_numpy(data["y_train"]))
    dl_train = DataLoader(ds, batch_size=N_TRAIN, shuffle=False)
    options = {key: value for key, value in TRAINING.items() if key != "paired_poison"}
    config = agt.AGTConfig(**options, device="cpu", log_level="WARNING", k_unlearn=k)
    bounded = agt.bounded_models.IntervalBoundedModel(initial_torch_model())
    wall0, cpu0 = time.perf_counter(), time.process_time()
    agt.unlearning_certified_training(bounded, config, dl_train)
    seconds, cpu_seconds = time.perf_counter() - wall0, time.process_time() - cpu0
    worst, nominal, _ = agt.test_metrics.test_accuracy(
        bounded, torch.from_numpy(data["X_test"]).double(), torch.from_numpy(data["y_test"])
    )
    return {
        "k": k,
        "certified_accuracy": round(float(worst) * N_TEST) / N_TEST,
        "nominal_accuracy": round(float(nominal) * N_TEST) / N_TEST,
        "seconds": seconds,
        "cpu_seconds": cpu_seconds,
    }


def run_finetune(agt, weights: str) -> list[dict[str, Any]]:
    """AGT's fine-tuning of the digits CNN's dense head behind its frozen convolutions
    (``benchmarks/mibp_finetune.py``), one row per budget of ``FINETUNE_BUDGETS``, then the peak memory."""
    import resource

    import torch
    from _mibp_protocols import FINETUNE, FINETUNE_BUDGETS, FROZEN, digits_binary, load_cnn
    from torch.utils.data import DataLoader, TensorDataset

    D = digits_binary()
    ds = TensorDataset(torch.from_numpy(D["X_train"]), torch.from_numpy(D["y_train"]))
    X_test, y_test = torch.from_numpy(D["X_test"]), torch.from_numpy(D["y_test"])
    rows = []
    for b in FINETUNE_BUDGETS:
        model = load_cnn(weights)
        frozen = agt.bounded_models.IntervalBoundedModel(model[:FROZEN], trainable=False)
        bounded = agt.bounded_models.IntervalBoundedModel(model[FROZEN:], transform=frozen)
        options: dict[str, Any] = dict(
            learning_rate=FINETUNE["lr"],
            lr_decay=FINETUNE["decay"],
            lr_min=FINETUNE["lr_min"],
            n_epochs=FINETUNE["epochs"],
            loss="binary_cross_entropy",
            device="cpu",
            log_level="WARNING",
        )
        if b["kind"] == "labels":
            options["label_k_poison"] = b["k"]
        else:
            options.update(k_poison=b["k"], epsilon=b["epsilon"])
        dl = DataLoader(ds, batch_size=FINETUNE["batch"], shuffle=False)
        cpu0 = time.process_time()
        agt.poison_certified_training(bounded, agt.AGTConfig(**options), dl)
        worst, nominal, _ = agt.test_metrics.test_accuracy(bounded, X_test, y_test)
        m = len(y_test)
        rows.append(
            {
                "certified_accuracy": round(float(worst) * m) / m,
                "nominal_accuracy": round(float(nominal) * m) / m,
                "cpu_seconds": time.process_time() - cpu0,
            }
        )
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return [dict(row, max_rss_bytes=rss) for row in rows]


def torch_net(weights: list[np.ndarray], biases: list[np.ndarray]):
    """A float64 ReLU network (Linear, ReLU, ..., Linear) with the given weights ``(out, in)`` and biases."""
    import torch

    layers: list = []
    for i, (w, b) in enumerate(zip(weights, biases)):
        lin = torch.nn.Linear(w.shape[1], w.shape[0]).double()
        with torch.no_grad():
            lin.weight.copy_(torch.from_numpy(w))
            lin.bias.copy_(torch.from_numpy(b))
        layers += [lin] + ([torch.nn.ReLU()] if i < len(weights) - 1 else [])
    return torch.nn.Sequential(*layers)


def _agt_recipe(spec: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """AGTConfig options of a protocol of ``benchmarks/_mibp_protocols.py`` (CPU, quiet): its rate, decay,
    floor, epochs and loss, and ``extra``."""
    return dict(
        learning_rate=spec["lr"],
        lr_decay=spec["decay"],
        lr_min=spec["lr_min"],
        n_epochs=spec["epochs"],
        loss=spec["loss"],
        device="cpu",
        log_level="WARNING",
        **extra,
    )


def run_privacy(agt, data_path: str, protocol: str, epsilons: list[float], repeats: int) -> dict[str, Any]:
    """AGT's private prediction on the data and initial network of ``data_path`` (written by
    ``benchmarks/mibp_privacy.py``): ``privacy_certified_training`` at every k of the protocol's ladder
    (``PRIVACY`` of ``benchmarks/_mibp_protocols.py``), stopped after a k that certifies no test point (as
    certkit's ladder stops), then ``privacy_utils``' smooth-sensitivity Cauchy mechanism and the global
    Laplace baseline at every ε: accuracy over ``repeats`` draws (mean, std) and its expectation from the
    noise scales; the ladder's CPU seconds and the process's peak memory."""
    import copy

    import torch
    from _mibp_protocols import PRIVACY
    from _timing import peak_memory_bytes
    from abstract_gradient_training import privacy_utils
    from torch.utils.data import DataLoader, TensorDataset

    spec = PRIVACY[protocol]
    D = np.load(data_path)
    n_layers = len(spec["sizes"]) - 1
    net = torch_net([D[f"w{i}"] for i in range(n_layers)], [D[f"b{i}"] for i in range(n_layers)])
    X, y = torch.from_numpy(D["X_train"]), torch.from_numpy(D["y_train"])
    Xq, yq = torch.from_numpy(D["X_test"]), torch.from_numpy(D["y_test"])
    dl = DataLoader(TensorDataset(X, y), batch_size=spec["batch"] or len(X), shuffle=False)
    options = _agt_recipe(spec, clip_gamma=spec["clip"], clip_method="clamp")
    if spec["momentum"]:
        options.update(optimizer="SGDM", optimizer_kwargs={"momentum": spec["momentum"]})
    models: dict[int, Any] = {}
    cpu0 = time.process_time()
    for k in spec["ks"]:
        bounded = agt.bounded_models.IntervalBoundedModel(copy.deepcopy(net))
        agt.privacy_certified_training(bounded, agt.AGTConfig(**options, k_private=k), dl)
        models[k] = bounded
        if not bool(agt.test_metrics.certified_predictions(bounded, Xq, return_proportion=False).any()):
            break
    ladder_cpu = time.process_time() - cpu0
    rss = peak_memory_bytes()
    nominal = models[spec["ks"][0]]
    logits = nominal.forward(Xq).detach()
    logit = logits[:, 1] - logits[:, 0] if logits.shape[1] == 2 else logits[:, 0]
    right = ((logit > 0).long() == yq).double()
    torch.manual_seed(0)
    rows = []
    for eps in epsilons:
        row: dict[str, Any] = {"epsilon": eps}
        for name, noise, kind in (
            (
                "smooth",
                privacy_utils.get_calibrated_noise_level(Xq, models, eps, noise_type="cauchy"),
                "cauchy",
            ),
            ("global", 1.0 / eps, "laplace"),
        ):
            m = len(yq)  # AGT returns float32 means: report the exact fractions
            accs = [
                round(
                    privacy_utils.noisy_test_accuracy(nominal, Xq, yq, noise_level=noise, noise_type=kind) * m
                )
                / m
                for _ in range(repeats)
            ]
            # P(the noisy threshold keeps the nominal label): its noise above -1/2 (label 1) or below 1/2
            scale = torch.as_tensor(noise, dtype=torch.float64) + 1e-7
            dist = (
                torch.distributions.Cauchy(0.0, scale)
                if kind == "cauchy"
                else torch.distributions.Laplace(0.0, scale)
            )
            keep = dist.cdf(torch.tensor(0.5, dtype=torch.float64))
            expected = float(torch.mean(right * keep + (1 - right) * (1 - keep)))
            row[name] = {
                "mean": float(np.mean(accs)),
                "std": float(np.std(accs)),
                "expected": expected,
                "agreement": float(torch.mean(keep.expand(len(yq)))),
            }
        rows.append(row)
    return {
        "ladder_cpu_seconds": ladder_cpu,
        "runs": len(models),
        "max_rss_bytes": rss,
        "k_max": privacy_utils.compute_max_certified_k(Xq, models).tolist(),
        "nominal_accuracy": float(right.mean()),
        "rows": rows,
    }


def run_scale(agt, protocol: str, k: int, *, clip: float | None, label_epsilon: float) -> dict[str, Any]:
    """One run of a scale protocol of ``benchmarks/_mibp_protocols.py`` with AGT (CPU, float64, one
    thread): certified test accuracy (classification) or the worst-case test MSE (regression), process and
    wall seconds of training and certification, and the process's peak resident memory."""
    import resource

    import torch
    from _mibp_protocols import PROTOCOLS, data, initial_weights
    from torch.utils.data import DataLoader, TensorDataset

    spec = PROTOCOLS[protocol]
    D = data(protocol)
    net = torch_net(*initial_weights(protocol))
    regression = spec["loss"] == "mse"
    y_train = torch.from_numpy(D["y_train"])
    y_train = y_train[:, None].double() if regression else y_train
    batch = spec["batch"] or len(D["X_train"])
    dl = DataLoader(TensorDataset(torch.from_numpy(D["X_train"]), y_train), batch_size=batch, shuffle=False)
    options = _agt_recipe(spec, fragsize=10_000)
    if protocol == "mnist-pca":
        options["label_k_poison"] = k
    elif protocol == "mnist-mlp":
        options.update(k_poison=k, epsilon=0.01)
    else:
        options.update(label_k_poison=k, label_epsilon=label_epsilon)  # AGT moves targets of label_k rows
    if clip is not None:
        options.update(clip_gamma=clip, clip_method="clamp")
    bounded = agt.bounded_models.IntervalBoundedModel(net)
    wall0, cpu0 = time.perf_counter(), time.process_time()
    agt.poison_certified_training(bounded, agt.AGTConfig(**options), dl)
    X_test = torch.from_numpy(D["X_test"])
    if regression:
        worst, nominal, _ = agt.test_metrics.test_mse(bounded, X_test, torch.from_numpy(D["y_test"]))
        result = {"worst_mse": float(worst), "nominal_mse": float(nominal)}
    else:
        worst, nominal, _ = agt.test_metrics.test_accuracy(bounded, X_test, torch.from_numpy(D["y_test"]))
        m = len(D["y_test"])
        result = {
            "certified_accuracy": round(float(worst) * m) / m,
            "nominal_accuracy": round(float(nominal) * m) / m,
        }
    result.update(
        cpu_seconds=time.process_time() - cpu0,
        seconds=time.perf_counter() - wall0,
        max_rss_bytes=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    )
    return result


def run_multiclass(agt, spec_path: str, k: int) -> dict[str, Any]:
    """One run of ``benchmarks/mibp_multiclass.py`` with AGT (``label_k_poison=k``, cross-entropy, constant
    rate, batches in the file's order): certified and nominal test accuracy, process and wall seconds of
    training and certification, the process's peak resident memory."""
    import resource

    import torch
    from _mibp_protocols import multiclass_modules
    from torch.utils.data import DataLoader, TensorDataset

    spec = json.loads(Path(spec_path).read_text())
    D = np.load(spec["data"])
    frozen, head = multiclass_modules(spec)
    if frozen is not None:
        transform = agt.bounded_models.IntervalBoundedModel(frozen, trainable=False)
        bounded = agt.bounded_models.IntervalBoundedModel(head, transform=transform)
    else:
        bounded = agt.bounded_models.IntervalBoundedModel(head)
    X_train, y_train = torch.from_numpy(D["X_train"]), torch.from_numpy(D["y_train"])
    dl = DataLoader(TensorDataset(X_train, y_train), batch_size=spec["batch"] or len(y_train), shuffle=False)
    config = agt.AGTConfig(
        learning_rate=spec["lr"],
        n_epochs=spec["epochs"],
        loss="cross_entropy",
        device="cpu",
        log_level="ERROR",
        fragsize=10_000,
        label_k_poison=k,
    )
    wall0, cpu0 = time.perf_counter(), time.process_time()
    agt.poison_certified_training(bounded, config, dl)
    worst, nominal, _ = agt.test_metrics.test_accuracy(
        bounded, torch.from_numpy(D["X_test"]), torch.from_numpy(D["y_test"])
    )
    m = len(D["y_test"])
    return {
        "certified_accuracy": round(float(worst) * m) / m,
        "nominal_accuracy": round(float(nominal) * m) / m,
        "cpu_seconds": time.process_time() - cpu0,
        "seconds": time.perf_counter() - wall0,
        "max_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }


def _parse_only(text: str | None) -> list[int]:
    if text is None:
        return list(range(len(AGT_BUDGETS)))
    idx = [int(t) for t in text.split(",") if t.strip()]
    bad = [i for i in idx if not 0 <= i < len(AGT_BUDGETS)]
    if bad:
        raise SystemExit(f"--only: indices out of range 0..{len(AGT_BUDGETS) - 1}: {bad}")
    return idx


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--agt-path", help="local checkout of AbstractGradientTraining (put on sys.path)")
    ap.add_argument("--only", help="comma-separated indices into AGT_BUDGETS (default: all 16)")
    ap.add_argument("--json", help="also write all result rows to this JSON file")
    ap.add_argument("--dump-bounds", metavar="DIR", help="write each budget's final parameter box as .npz")
    ap.add_argument("--threads", type=int, help="torch intra-op threads (default: torch's choice)")
    ap.add_argument(
        "--protocol",
        choices=("mnist-pca", "mnist-mlp", "regression"),
        help="run one scale protocol of benchmarks/_mibp_protocols.py instead (one JSON object)",
    )
    ap.add_argument(
        "--multiclass", metavar="SPEC", help="one run of benchmarks/mibp_multiclass.py (its .json spec)"
    )
    ap.add_argument("--k", type=int, default=0, help="--protocol, --multiclass: poisoned rows")
    ap.add_argument("--clip", type=float, default=None, help="--protocol: per-sample clipping by value")
    ap.add_argument("--label-epsilon", type=float, default=0.0, help="--protocol regression: target radius")
    ap.add_argument(
        "--unlearn", help="comma-separated k: AGT's unlearning certificate on the half-moons protocol instead"
    )
    ap.add_argument(
        "--finetune", help="the pretrained digits CNN (.npz): benchmarks/mibp_finetune.py's sweep"
    )
    ap.add_argument("--privacy", help="benchmarks/mibp_privacy.py's data and initial network (.npz)")
    ap.add_argument("--privacy-protocol", default="blobs", help="--privacy: the protocol of its recipe")
    ap.add_argument("--epsilons", default="1", help="--privacy: comma-separated epsilons")
    ap.add_argument("--repeats", type=int, default=10, help="--privacy: draws of every mechanism")
    args = ap.parse_args(argv)

    agt = _import_agt(args.agt_path)
    import torch

    if args.threads is not None:
        torch.set_num_threads(args.threads)
    if args.unlearn is not None:
        data = halfmoons_protocol()
        rows = [run_unlearning(agt, int(k), data) for k in args.unlearn.split(",") if k.strip()]
        for row in rows:
            print(json.dumps(row), flush=True)
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
        return 0
    if args.privacy is not None:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        epsilons = [float(e) for e in args.epsilons.split(",")]
        print(
            json.dumps(run_privacy(agt, args.privacy, args.privacy_protocol, epsilons, args.repeats)),
            flush=True,
        )
        return 0
    if args.finetune is not None:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        print(json.dumps(run_finetune(agt, args.finetune)), flush=True)
        return 0
    if args.multiclass is not None:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        print(json.dumps(run_multiclass(agt, args.multiclass, args.k)), flush=True)
        return 0
    if args.protocol is not None:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        row = run_scale(agt, args.protocol, args.k, clip=args.clip, label_epsilon=args.label_epsilon)
        print(json.dumps(row), flush=True)
        return 0
    dump = Path(args.dump_bounds) if args.dump_bounds else None
    if dump is not None:
        dump.mkdir(parents=True, exist_ok=True)

    data = halfmoons_protocol()
    rows = []
    for i in _parse_only(args.only):
        budget = AGT_BUDGETS[i]
        row, bounded = run_budget(agt, budget, data)
        rows.append(row)
        print(json.dumps(row), flush=True)
        if dump is not None:
            tag = f"k{budget['k']}_eps{budget['epsilon']:g}_lk{budget['label_k']}"
            name = f"{i:02d}_{budget['sweep']}_{tag}.npz"
            np.savez(
                dump / name,
                lower=flat_params(bounded.param_l),
                upper=flat_params(bounded.param_u),
                nominal=flat_params(bounded.param_n),
                names=np.array(PARAM_NAMES),
                sizes=np.array([p.numel() for p in bounded.param_n]),
                index=i,
                k=budget["k"],
                epsilon=budget["epsilon"],
                label_k=budget["label_k"],
            )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
