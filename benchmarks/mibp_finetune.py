"""Fine-tuning behind frozen convolutions, certkit against Abstract Gradient Training (AGT), side by side.

AGT's OCT-MNIST experiment on scikit-learn's digits (``benchmarks/_mibp_protocols.py``): a small CNN
(three convolutions with ReLUs, Flatten, Linear 64->32, ReLU, Linear 32->1) is pretrained here in
float64 on the training rows without digits 8 and 9 (binary task: digit >= 5), then its dense head is
fine-tuned on every training row behind the frozen convolutions (binary cross-entropy, batches of 650,
learning rate 0.05 / (1 + 5 t) with floor 1e-3, 2 epochs) under poisoning budgets in pixel space
(``Budget(FeatureBox(eps), k)``: AGT's ``k_poison``, ``epsilon``) and label flips (``LabelFlips(k)``,
AGT's ``label_k_poison``).  Certified accuracy: the share of the 497 test digits whose prediction is
correct for every head parameter in the final box.  The pretrained weights are written once and both tools
start from them; each tool runs its sweep in a process of its own (CPU seconds of training and
certification per budget; the process's peak memory).  AGT (GPL-3) runs from the user's checkout
(``benchmarks/agt_peer.py --finetune``; nothing of it is copied here)::

    python benchmarks/mibp_finetune.py --agt-path ~/agt --agt-python ~/agt-venv/bin/python
"""

from __future__ import annotations

import argparse
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

from _mibp_protocols import FINETUNE, FINETUNE_BUDGETS, FROZEN, cnn, digits_binary, load_cnn  # noqa: E402

from certkit._results import format_table  # noqa: E402

ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def pretrain(path: Path) -> None:
    """Pretrain the CNN on the training rows without digits 8 and 9 (Adam, 30 epochs, batches of 100, one
    thread) and save its state as ``.npz``."""
    import torch

    torch.set_num_threads(1)
    D = digits_binary()
    model = cnn()
    X = torch.from_numpy(D["X_train"][D["pretrain"]])
    y = torch.from_numpy(D["y_train"][D["pretrain"]]).double()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    gen = torch.Generator().manual_seed(0)
    for _ in range(30):
        for rows in torch.randperm(len(X), generator=gen).split(100):
            opt.zero_grad()
            torch.nn.functional.binary_cross_entropy_with_logits(model(X[rows])[:, 0], y[rows]).backward()
            opt.step()
    np.savez(path, **{k: v.detach().numpy() for k, v in model.state_dict().items()})


def worker(weights: Path, carry: str) -> list[dict]:
    """certkit's sweep in this process: one row per budget, then the process's peak memory."""
    import resource

    from certkit.mibp import (
        MLP,
        Budget,
        FeatureBox,
        InverseDecay,
        LabelFlips,
        certified_training,
        certify_predictions,
    )

    D = digits_binary()
    model = load_cnn(weights)
    frozen, head = model[:FROZEN], MLP.from_torch(model[FROZEN:])
    rows = []
    for b in FINETUNE_BUDGETS:
        pert = LabelFlips(b["k"]) if b["kind"] == "labels" else Budget(FeatureBox(b["epsilon"]), b["k"])
        cpu = time.process_time()
        res = certified_training(
            head,
            D["X_train"],
            D["y_train"],
            perturbation=pert,
            features=frozen,
            loss="binary_cross_entropy",
            epochs=FINETUNE["epochs"],
            learning_rate=InverseDecay(FINETUNE["lr"], FINETUNE["decay"], minimum=FINETUNE["lr_min"]),
            batch_size=FINETUNE["batch"],
            carry=carry,
        )
        cert = certify_predictions(res, D["X_test"])
        rows.append(
            {
                "certified_accuracy": cert.certified_accuracy(D["y_test"]),
                "nominal_accuracy": float(np.mean((cert.prediction > 0) == D["y_test"])),
                "cpu_seconds": time.process_time() - cpu,
            }
        )
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return [dict(row, max_rss_bytes=rss) for row in rows]


def _run(cmd: list[str]) -> list[dict]:
    done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **ONE_THREAD}, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--agt-path", help="a checkout of AbstractGradientTraining (without it: certkit alone)")
    ap.add_argument("--agt-python", help="the Python of AGT's environment (default: this one)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--carry", default="box", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker is not None:
        print(json.dumps(worker(Path(args.worker), args.carry)), flush=True)
        return
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        weights = Path(tmp) / "cnn.npz"
        pretrain(weights)
        me = [sys.executable, str(Path(__file__).resolve()), "--worker", str(weights)]
        ours = _run([*me, "--carry", "box"])
        shared = _run([*me, "--carry", "shared"])
        theirs = None
        if args.agt_path is not None:
            cmd = [args.agt_python or sys.executable, str(HERE / "agt_peer.py"), "--agt-path", args.agt_path]
            theirs = _run([*cmd, "--finetune", str(weights), "--threads", "1"])
    rows, wins = [], 0
    for i, b in enumerate(FINETUNE_BUDGETS):
        label = f"labels k={b['k']}" if b["kind"] == "labels" else f"pixels k={b['k']}, eps={b['epsilon']:g}"
        c, s, a = ours[i], shared[i], None if theirs is None else theirs[i]
        row = [label, c["certified_accuracy"], s["certified_accuracy"]]
        row += ["-" if a is None else a["certified_accuracy"]]
        row += [
            f"{c['cpu_seconds']:.2f}",
            f"{s['cpu_seconds']:.2f}",
            "-" if a is None else f"{a['cpu_seconds']:.2f}",
        ]
        if a is not None:
            wins += min(c["certified_accuracy"], s["certified_accuracy"]) >= a["certified_accuracy"]
        rows.append(row)
    head = ["budget", "certkit box", "certkit shared", "AGT", "box CPU s", "shared CPU s", "AGT CPU s"]
    title = (
        "Fine-tuning a CNN's dense head behind its frozen convolutions (digits, digit >= 5, BCE, 1,300 rows, "
        f"batches of 650, 2 epochs): certified test accuracy (nominal {ours[0]['nominal_accuracy']:.3f})"
    )
    print(format_table(head, rows, title=title))
    gb = 2.0**30
    memory = f"peak RSS certkit box {ours[0]['max_rss_bytes'] / gb:.2f} GB"
    memory += f", shared {shared[0]['max_rss_bytes'] / gb:.2f} GB"
    if theirs is not None:
        memory += f", AGT {theirs[0]['max_rss_bytes'] / gb:.2f} GB"
        print(f"certkit (box and shared) >= AGT at {wins} of {len(rows)} budgets")
    print(f"{memory} ({time.perf_counter() - start:.0f} s in all)")


if __name__ == "__main__":
    main()
