"""Private prediction, certkit against Abstract Gradient Training (AGT) side by side, with DP-SGD (Opacus).

AGT's privacy-paper protocols (``scripts/privacy_paper``; ``PRIVACY`` of ``benchmarks/_mibp_protocols.py``):

* ``blobs``: two Gaussians (``--position``, ``--spread``, ``--seed``), features ``[x, x², x³]``, a linear
  [6, 2] model (torch's initialisation after ``torch.manual_seed(seed)``, as AGT's script), cross-entropy,
  one full-batch step of 5,000 rows at rate 2.0, per-sample clipping at 0.06, k = 0..199;
* ``finetune``: AGT's OCT-MNIST recipe on scikit-learn's digits: the dense head [64, 32, 1] of a CNN
  pretrained on the digits 0-7 (``benchmarks/mibp_finetune.py``), fine-tuned on every training row's frozen
  features (binary cross-entropy, full batch, momentum 0.5, 2 epochs, clipping 0.9), k = 0..99;
* ``text``: a sentiment-like task on fixed embeddings (AGT's IMDB shape), a [64, 32, 1] head, 3 full-batch
  epochs at rate 5, clipping 0.04, k = 0..99.

Each method runs in a process of its own (one thread): certkit's ladder (`stability_profile`) and AGT's
(``privacy_certified_training`` per k, ``benchmarks/agt_peer.py --privacy``, from the user's checkout; AGT
is GPL-3 and nothing of it is copied here), both stopped after the first k that certifies no test point;
their CPU seconds (``time.process_time``) and peak memory (``VmHWM``: `_timing.peak_memory_bytes`).  Then
at every ε of the grid the test accuracy of the private predictions, the mean of ``--repeats`` draws:
global sensitivity (Laplace on the label), AGT's smooth sensitivity (its Cauchy mechanism on its ladder),
certkit's (`private_predict`, ``mechanism="cauchy"``).  Last the query budget: the ε per query that
composes (dp-accounting) to a total (ε, δ) over Q queries, and DP-SGD (Opacus) trained at that total,
whose model answers any number::

    python benchmarks/mibp_privacy.py --agt-path ~/agt --agt-python ~/agt-venv/bin/python
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _mibp_protocols import FROZEN, PRIVACY, blobs, digits_binary, load_cnn, text_like  # noqa: E402

from certkit._results import format_table  # noqa: E402

ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
EPSILONS = [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0]
QUERIES = [10, 100, 1000, 10000]


def prepare(protocol: str, path: Path, args: argparse.Namespace) -> None:
    """Write the protocol's data and initial network to ``path`` (``.npz``): what every process loads."""
    gen = np.random.default_rng(args.seed + 1)
    if protocol == "blobs":  # AGT's: the data and the linear model's torch initialisation share the seed
        import torch

        D = blobs(args.seed, args.position, args.spread)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(args.seed)
            linear = torch.nn.Linear(6, 2)
        weights = {"w0": linear.weight.detach().double().numpy(), "b0": linear.bias.detach().double().numpy()}
        np.savez(path, **D, **weights)
        return
    if protocol == "text":
        D = text_like(args.seed)
    else:
        import torch
        from mibp_finetune import pretrain

        pretrain(path.with_suffix(".cnn.npz"))
        cnn = load_cnn(path.with_suffix(".cnn.npz"))
        digits = digits_binary()
        with torch.no_grad():
            D = {
                "X_train": cnn[:FROZEN](torch.from_numpy(digits["X_train"])).numpy(),
                "y_train": digits["y_train"],
                "X_test": cnn[:FROZEN](torch.from_numpy(digits["X_test"])).numpy(),
                "y_test": digits["y_test"],
            }
        head = cnn[FROZEN:]
        weights = {f"w{i}": head[2 * i].weight.detach().numpy() for i in range(2)}
        weights.update({f"b{i}": head[2 * i].bias.detach().numpy() for i in range(2)})
        np.savez(path, **D, **weights)
        return
    sizes = PRIVACY[protocol]["sizes"]
    weights = {}
    for i, (fan_in, fan_out) in enumerate(itertools.pairwise(sizes)):  # PyTorch's default initialisation
        bound = 1.0 / np.sqrt(fan_in)
        weights[f"w{i}"] = gen.uniform(-bound, bound, size=(fan_out, fan_in))
        weights[f"b{i}"] = gen.uniform(-bound, bound, size=fan_out)
    np.savez(path, **D, **weights)


def _load(path: str, protocol: str):
    D = dict(np.load(path))
    n = len(PRIVACY[protocol]["sizes"]) - 1
    return D, [D[f"w{i}"] for i in range(n)], [D[f"b{i}"] for i in range(n)]


def certkit_worker(path: str, protocol: str, epsilons: list[float], repeats: int) -> dict:
    """certkit's ladder and mechanisms in this process."""
    from _timing import peak_memory_bytes

    from certkit.mibp import MLP, InverseDecay, private_predict, release_probabilities, stability_profile

    spec = PRIVACY[protocol]
    D, weights, biases = _load(path, protocol)
    cpu0 = time.process_time()
    profile = stability_profile(
        MLP(weights, biases),
        D["X_train"],
        D["y_train"],
        D["X_test"],
        ks=spec["ks"],
        loss=spec["loss"],
        learning_rate=InverseDecay(spec["lr"], spec["decay"], minimum=spec["lr_min"]),
        epochs=spec["epochs"],
        batch_size=spec["batch"],
        clip_value=spec["clip"],
        momentum=spec["momentum"],
    )
    ladder_cpu = time.process_time() - cpu0
    rss = peak_memory_bytes()
    y = D["y_test"]
    right = profile.predictions == y
    rows = []
    for eps in epsilons:
        row: dict = {"epsilon": eps}
        for name in ("cauchy", "global"):
            stay = release_probabilities(profile, epsilon=eps, mechanism=name)
            accs = [
                # seeded generators: reproducible accuracies (a release would leave rng=None)
                np.mean(private_predict(profile, epsilon=eps, mechanism=name, rng=gen) == y)
                for gen in map(np.random.default_rng, range(repeats))
            ]
            expected = float(np.mean(np.where(right, stay, 1.0 - stay)))
            row[name] = {
                "mean": float(np.mean(accs)),
                "std": float(np.std(accs)),
                "expected": expected,
                "agreement": float(np.mean(stay)),
            }
        rows.append(row)
    return {
        "ladder_cpu_seconds": ladder_cpu,
        "runs": profile.runs,
        "max_rss_bytes": rss,
        "k_max": profile.k_max.tolist(),
        "nominal_accuracy": float(np.mean(right)),
        "rows": rows,
    }


def opacus_worker(path: str, protocol: str, total_epsilon: float, total_delta: float) -> dict:
    """DP-SGD (Opacus) at the total (ε, δ): the protocol's network, loss, rate and clipping (ℓ2 norm), batches
    of a tenth of the rows, 10 epochs; its test accuracy."""
    import opacus
    import torch
    from _timing import peak_memory_bytes
    from agt_peer import torch_net

    spec = PRIVACY[protocol]
    D, weights, biases = _load(path, protocol)
    torch.manual_seed(0)
    net = torch_net(weights, biases)
    data = torch.utils.data.TensorDataset(torch.from_numpy(D["X_train"]), torch.from_numpy(D["y_train"]))
    loader = torch.utils.data.DataLoader(data, batch_size=max(1, len(data) // 10), shuffle=True)
    optimizer = torch.optim.SGD(net.parameters(), lr=spec["lr"], momentum=spec["momentum"])
    cpu0 = time.process_time()
    net, optimizer, loader = opacus.PrivacyEngine().make_private_with_epsilon(
        module=net,
        optimizer=optimizer,
        data_loader=loader,
        target_epsilon=total_epsilon,
        target_delta=total_delta,
        max_grad_norm=spec["clip"],
        epochs=10,
    )
    for _ in range(10):
        for xb, yb in loader:
            optimizer.zero_grad()
            out = net(xb)
            if spec["loss"] == "cross_entropy":
                loss = torch.nn.functional.cross_entropy(out, yb)
            else:
                loss = torch.nn.functional.binary_cross_entropy_with_logits(out[:, 0], yb.double())
            loss.backward()
            optimizer.step()
    with torch.no_grad():
        out = net(torch.from_numpy(D["X_test"]))
    pred = out.argmax(dim=1) if out.shape[1] > 1 else (out[:, 0] > 0).long()
    return {
        "accuracy": float((pred.numpy() == D["y_test"]).mean()),
        "cpu_seconds": time.process_time() - cpu0,
        "max_rss_bytes": peak_memory_bytes(),
    }


def _run(cmd: list[str]) -> dict:
    done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **ONE_THREAD})
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def per_query_epsilon(total_epsilon: float, total_delta: float, queries: int) -> float:
    """The largest ε per query whose ``queries`` releases compose (dp-accounting) to ``total_epsilon``."""
    from certkit.mibp.privacy.budget import composed_epsilon

    lo = total_epsilon / queries  # their sum fits; double until the composition does not
    hi = 2.0 * lo
    while hi < total_epsilon and composed_epsilon(hi, 0.0, queries, total_delta) <= total_epsilon:
        lo, hi = hi, 2.0 * hi
    hi = min(hi, total_epsilon)
    for _ in range(30):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if composed_epsilon(mid, 0.0, queries, total_delta) <= total_epsilon else (lo, mid)
    return lo


def _cell(stats: dict) -> str:
    return f"{stats['mean']:.3f} ± {stats['std']:.3f}"


def report(protocol: str, ours: dict, theirs: dict | None, opacus: dict | None, budget: list, args) -> None:
    """Print the accuracy table, the ladders' cost and the query budget of one protocol."""
    n_eps = len(EPSILONS)
    rows = []
    wins = 0
    for i in range(n_eps):
        c, a = ours["rows"][i], None if theirs is None else theirs["rows"][i]
        row = [
            f"{EPSILONS[i]:g}",
            _cell(c["global"]),
            "-" if a is None else _cell(a["smooth"]),
            _cell(c["cauchy"]),
        ]
        row.append(f"{c['cauchy']['expected']:.3f}")
        row.append("-" if a is None else f"{a['smooth']['expected']:.3f}")
        if a is not None:
            wins += c["cauchy"]["mean"] >= a["smooth"]["mean"]
        rows.append(row)
    head = ["ε", "global", "AGT smooth", "certkit smooth", "certkit expected", "AGT expected"]
    title = (
        f"{protocol}: private test accuracy, mean ± std of {args.repeats} draws (nominal certkit "
        f"{ours['nominal_accuracy']:.3f}"
        + ("" if theirs is None else f", AGT {theirs['nominal_accuracy']:.3f}")
        + ")"
    )
    print(format_table(head, rows, title=title))
    if theirs is not None:
        agree = sum(
            ours["rows"][i]["cauchy"]["agreement"] >= theirs["rows"][i]["smooth"]["agreement"]
            for i in range(n_eps)
        )
        print(
            f"certkit >= AGT at {wins} of {n_eps} epsilons; its releases agree with the nominal prediction "
            f"at least as often as AGT's at {agree} of {n_eps}"
        )
    gb = 2.0**30
    cost = []
    for name, run in (("certkit", ours), ("AGT", theirs)):
        if run is not None:
            per = run["ladder_cpu_seconds"] / run["runs"]
            cpu, memory = f"{run['ladder_cpu_seconds']:.2f}", f"{run['max_rss_bytes'] / gb:.3f}"
            cost.append([name, run["runs"], cpu, f"{per:.3f}", memory])
    if theirs is not None:
        ratio = theirs["ladder_cpu_seconds"] / max(ours["ladder_cpu_seconds"], 1e-9)
        per = (theirs["ladder_cpu_seconds"] / theirs["runs"]) / max(
            ours["ladder_cpu_seconds"] / ours["runs"], 1e-9
        )
        cost.append(["AGT / certkit", "", f"{ratio:.1f}x", f"{per:.1f}x", ""])
    head = ["ladder", "rungs trained", "CPU s", "CPU s per rung", "peak memory GB"]
    print(
        format_table(
            head, cost, title=f"{protocol}: the k ladder (each stopped after a k certifying no query)"
        )
    )
    k_ours, k_theirs = np.asarray(ours["k_max"]), None if theirs is None else np.asarray(theirs["k_max"])
    line = f"median k_max certkit {np.median(k_ours):.0f}"
    if k_theirs is not None:
        line += (
            f", AGT {np.median(k_theirs):.0f}; certkit's k_max >= AGT's on {np.mean(k_ours >= k_theirs):.1%}"
        )
    print(line)
    rows = []
    for q, eps, c, a in budget:
        rows.append(
            [
                q,
                f"{eps:.4g}",
                f"{c['cauchy']['expected']:.3f}",
                "-" if a is None else f"{a['smooth']['expected']:.3f}",
                f"{c['global']['expected']:.3f}",
                "-" if opacus is None else f"{opacus['accuracy']:.3f}",
            ]
        )
    title = (
        f"{protocol}: Q queries within a total (ε, δ) = ({args.total_epsilon:g}, {args.total_delta:g}) "
        "(expected accuracies; DP-SGD answers any number)"
    )
    print(
        format_table(["Q", "ε per query", "certkit", "AGT", "global", "DP-SGD (Opacus)"], rows, title=title)
    )
    print()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--agt-path", help="a checkout of AbstractGradientTraining (without it: certkit alone)")
    ap.add_argument("--agt-python", help="the Python of AGT's environment (default: this one)")
    ap.add_argument(
        "--protocols", default="blobs,finetune,text", help="comma-separated: blobs, finetune, text"
    )
    ap.add_argument("--seed", type=int, default=0, help="the data's seed")
    ap.add_argument(
        "--position", type=float, default=1.25, help="blobs: the centres at ±(position, position)"
    )
    ap.add_argument("--spread", type=float, default=0.35, help="blobs: the clusters' standard deviation")
    ap.add_argument("--repeats", type=int, default=100, help="draws of every mechanism at every ε")
    ap.add_argument("--total-epsilon", type=float, default=10.0, help="the query budget's total ε")
    ap.add_argument("--total-delta", type=float, default=1e-5, help="the query budget's total δ")
    ap.add_argument("--no-opacus", action="store_true", help="skip DP-SGD")
    ap.add_argument("--worker", nargs=2, metavar=("DATA", "PROTOCOL"), help=argparse.SUPPRESS)
    ap.add_argument("--opacus-worker", nargs=2, metavar=("DATA", "PROTOCOL"), help=argparse.SUPPRESS)
    ap.add_argument("--epsilons", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker is not None:
        epsilons = [float(e) for e in args.epsilons.split(",")]
        print(json.dumps(certkit_worker(*args.worker, epsilons, args.repeats)), flush=True)
        return
    if args.opacus_worker is not None:
        print(
            json.dumps(opacus_worker(*args.opacus_worker, args.total_epsilon, args.total_delta)), flush=True
        )
        return
    budget_eps = [per_query_epsilon(args.total_epsilon, args.total_delta, q) for q in QUERIES]
    epsilons = ",".join(f"{e!r}" for e in EPSILONS + budget_eps)
    me = [sys.executable, str(Path(__file__).resolve())]
    start = time.perf_counter()
    for protocol in args.protocols.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / f"{protocol}.npz"
            prepare(protocol, path, args)
            common = ["--epsilons", epsilons, "--repeats", str(args.repeats)]
            ours = _run([*me, "--worker", str(path), protocol, *common])
            theirs = None
            if args.agt_path is not None:
                agt = [
                    args.agt_python or sys.executable,
                    str(HERE / "agt_peer.py"),
                    "--agt-path",
                    args.agt_path,
                ]
                theirs = _run(
                    [*agt, "--privacy", str(path), "--privacy-protocol", protocol, *common, "--threads", "1"]
                )
            opacus = None
            if not args.no_opacus:
                totals = ["--total-epsilon", str(args.total_epsilon), "--total-delta", str(args.total_delta)]
                opacus = _run([*me, "--opacus-worker", str(path), protocol, *totals])
        n = len(EPSILONS)
        budget = [
            (q, e, ours["rows"][n + i], None if theirs is None else theirs["rows"][n + i])
            for i, (q, e) in enumerate(zip(QUERIES, budget_eps))
        ]
        report(protocol, ours, theirs, opacus, budget, args)
    print(f"({time.perf_counter() - start:.0f} s in all)")


if __name__ == "__main__":
    main()
