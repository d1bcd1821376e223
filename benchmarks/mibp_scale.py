"""certkit against Abstract Gradient Training (AGT) at AGT's scale, side by side: certified accuracy (or the
certified worst-case test MSE), CPU time and peak memory of each method, each run in a process of its own.

Protocols (``benchmarks/_mibp_protocols.py``, synthetic data of the shapes of AGT's experiments):

* ``pca``: AGT's MNIST-PCA label-flip sweep, 60,000 rows x 32 features, linear [32, 10], full batch,
  cross-entropy, learning rate 5 / (1 + t), 2 epochs, ``LabelFlips(k)`` for k = 0, 10, ..., 100; certkit's
  default (``carry="box"``) and ``carry="shared"`` against AGT.
* ``pca-clip``: the same with per-sample gradient clipping by value (``clip_value=0.1``, AGT's
  ``clip_gamma=0.1, clip_method="clamp"``); the default carry against AGT.
* ``mlp``: a [784, 128, 10] ReLU network on 10,000 MNIST-shaped rows, batches of 1,000, learning rate
  0.5 / (1 + 0.1 t), 2 epochs, ``Budget(FeatureBox(0.01), 10)``.
* ``regression``: AGT's UCI recipe, 20,000 rows x 11 features, [11, 50, 1], MSE, batches of 5,000, 1 epoch,
  ``Budget(TargetBox(0.1), k)`` (AGT's ``k_poison=k, label_epsilon=0.1``): the certified worst-case test MSE.

Every run uses one BLAS / torch thread.  CPU is the process time of training and certification; peak memory
is the process's ``ru_maxrss`` (imports included, the same for both tools).  AGT runs from the user's own
checkout in its own environment (``benchmarks/agt_peer.py``; GPL-3, nothing of it is copied here)::

    python benchmarks/mibp_scale.py --agt-path ~/AbstractGradientTraining --agt-python ~/agt-venv/bin/python
    python benchmarks/mibp_scale.py --only pca --ks 0,50,100      # a part, certkit alone without --agt-path
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _mibp_protocols import PROTOCOLS, data, initial_weights  # noqa: E402

from certkit._results import format_table  # noqa: E402

SECTIONS = ("pca", "pca-clip", "mlp", "regression")
CLIP = 0.1
TARGET_EPSILON = 0.1
ONE_THREAD = {
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "BLIS_NUM_THREADS": "1",
}


def worker(protocol: str, k: int, carry: str, clip: float | None) -> dict:
    """certkit's run of one configuration in this process (``--worker``)."""
    import resource

    import numpy as np

    from certkit.mibp import (
        MLP,
        Budget,
        FeatureBox,
        InverseDecay,
        LabelFlips,
        TargetBox,
        certified_training,
        certify_predictions,
        certify_regression,
    )

    spec = PROTOCOLS[protocol]
    D = data(protocol)
    model = MLP(*initial_weights(protocol))
    if protocol == "mnist-pca":
        perturbation = LabelFlips(k)
    elif protocol == "mnist-mlp":
        perturbation = Budget(FeatureBox(0.01), k)
    else:
        perturbation = Budget(TargetBox(TARGET_EPSILON), k)
    cpu, wall = time.process_time(), time.perf_counter()
    res = certified_training(
        model,
        D["X_train"],
        D["y_train"],
        perturbation=perturbation,
        loss=spec["loss"],
        epochs=spec["epochs"],
        learning_rate=InverseDecay(spec["lr"], spec["decay"], minimum=spec["lr_min"]),
        batch_size=spec["batch"],
        carry=carry,
        clip_value=clip,
    )
    if spec["loss"] == "mse":
        cert = certify_regression(res, D["X_test"])
        out = {
            "worst_mse": cert.mse_bound(D["y_test"]),
            "nominal_mse": float(np.mean((res.nominal.forward(D["X_test"])[:, 0] - D["y_test"]) ** 2)),
        }
    else:
        out = {
            "certified_accuracy": certify_predictions(res, D["X_test"]).certified_accuracy(D["y_test"]),
            "nominal_accuracy": float(np.mean(res.nominal.predict(D["X_test"]) == D["y_test"])),
        }
    out.update(
        cpu_seconds=time.process_time() - cpu,
        seconds=time.perf_counter() - wall,
        max_rss_bytes=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    )
    return out


def _run(cmd: list[str]) -> dict:
    env = {**os.environ, **ONE_THREAD}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_certkit(protocol: str, k: int, carry: str = "box", clip: float | None = None) -> dict:
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--worker",
        protocol,
        "--k",
        str(k),
        "--carry",
        carry,
    ]
    if clip is not None:
        cmd += ["--clip", str(clip)]
    return _run(cmd)


def run_agt(args, protocol: str, k: int, clip: float | None = None) -> dict | None:
    if args.agt_path is None:
        return None
    cmd = [args.agt_python or sys.executable, str(HERE / "agt_peer.py"), "--agt-path", args.agt_path]
    cmd += ["--protocol", protocol, "--k", str(k), "--threads", "1"]
    if clip is not None:
        cmd += ["--clip", str(clip)]
    if protocol == "regression":
        cmd += ["--label-epsilon", str(TARGET_EPSILON)]
    return _run(cmd)


def _gb(row: dict | None) -> str:
    return "-" if not row or "max_rss_bytes" not in row else f"{row['max_rss_bytes'] / 2**30:.2f}"


def _get(row: dict | None, key: str, fmt: str = "{:.3f}") -> str:
    if not row:
        return "-"
    if "error" in row:
        return "error"
    return fmt.format(row[key])


def _ratio(a: dict | None, b: dict | None, key: str) -> str:
    if not a or not b or key not in a or key not in b:
        return "-"
    return f"{a[key] / b[key]:.2f}"


def _verdict(ours: dict, theirs: dict | None, key: str, better) -> str:
    if not theirs or key not in theirs or key not in ours:
        return ""
    return "yes" if better(ours[key], theirs[key]) else "NO"


def section_pca(args, clip: float | None) -> None:
    carries = ("box",) if clip is not None else ("box", "shared")
    rows, wins = [], {c: 0 for c in carries}
    for k in args.ks:
        agt = run_agt(args, "mnist-pca", k, clip)
        ours = {c: run_certkit("mnist-pca", k, c, clip) for c in carries}
        row = [k, _get(agt, "certified_accuracy")]
        row += [_get(ours[c], "certified_accuracy") for c in carries]
        row += [_get(agt, "cpu_seconds", "{:.1f}")] + [
            _get(ours[c], "cpu_seconds", "{:.1f}") for c in carries
        ]
        row += [_gb(agt)] + [_gb(ours[c]) for c in carries]
        row += [_ratio(ours[c], agt, "cpu_seconds") for c in carries]
        row += [_ratio(ours["box"], agt, "max_rss_bytes")]
        row += [_verdict(ours["box"], agt, "certified_accuracy", lambda a, b: a >= b)]
        for c in carries:
            wins[c] += bool(agt) and ours[c].get("certified_accuracy", -1) >= agt.get("certified_accuracy", 2)
        rows.append(row)
        print(f"  pca{'-clip' if clip else ''} k={k} done", file=sys.stderr, flush=True)
    head = ["k", "AGT"] + [f"certkit {c}" for c in carries]
    head += (
        ["CPU s AGT"] + [f"CPU s {c}" for c in carries] + ["RSS GB AGT"] + [f"RSS GB {c}" for c in carries]
    )
    head += [f"CPU {c}/AGT" for c in carries] + ["RSS box/AGT", "box >= AGT"]
    title = (
        "MNIST-PCA label flips (60,000 x 32, linear [32, 10], full batch, CE, lr 5/(1+t), 2 epochs"
        + (f", clip_value={clip}" if clip else "")
        + "): certified test accuracy, CPU, peak RSS"
    )
    print(format_table(head, rows, title=title))
    if args.agt_path:
        print(
            "certkit >= AGT at " + ", ".join(f"{c}: {wins[c]}/{len(args.ks)}" for c in carries) + " budgets\n"
        )


def section_mlp(args) -> None:
    agt = run_agt(args, "mnist-mlp", 10)
    ours = run_certkit("mnist-mlp", 10)
    rows = [
        ["AGT", _get(agt, "certified_accuracy"), _get(agt, "cpu_seconds", "{:.0f}"), _gb(agt), "", ""],
        [
            "certkit (box)",
            _get(ours, "certified_accuracy"),
            _get(ours, "cpu_seconds", "{:.0f}"),
            _gb(ours),
            _ratio(ours, agt, "cpu_seconds"),
            _ratio(ours, agt, "max_rss_bytes"),
        ],
    ]
    title = (
        "[784, 128, 10] on 10,000 MNIST-shaped rows, batches of 1,000, lr 0.5/(1+0.1t), 2 epochs, "
        "Budget(FeatureBox(0.01), 10)"
    )
    print(
        format_table(["method", "certified", "CPU s", "RSS GB", "CPU / AGT", "RSS / AGT"], rows, title=title)
    )


def section_regression(args) -> None:
    rows = []
    for k in args.reg_ks:
        agt = run_agt(args, "regression", k)
        ours = run_certkit("regression", k)
        rows.append(
            [
                k,
                _get(ours, "nominal_mse", "{:.5f}"),
                _get(agt, "worst_mse", "{:.6f}"),
                _get(ours, "worst_mse", "{:.6f}"),
                _get(agt, "cpu_seconds", "{:.1f}"),
                _get(ours, "cpu_seconds", "{:.1f}"),
                _gb(agt),
                _gb(ours),
                _ratio(ours, agt, "cpu_seconds"),
                _verdict(ours, agt, "worst_mse", lambda a, b: a <= b),
            ]
        )
        print(f"  regression k={k} done", file=sys.stderr, flush=True)
    head = [
        "k",
        "nominal MSE",
        "AGT worst MSE",
        "certkit worst MSE",
        "CPU s AGT",
        "CPU s certkit",
        "RSS GB AGT",
        "RSS GB certkit",
        "CPU certkit/AGT",
        "certkit <= AGT",
    ]
    title = (
        "Regression target poisoning (20,000 x 11, [11, 50, 1], MSE, batches of 5,000, 1 epoch, "
        f"Budget(TargetBox({TARGET_EPSILON}), k) per batch): certified worst-case test MSE"
    )
    print(format_table(head, rows, title=title))


def _ints(text: str) -> list[int]:
    return [int(t) for t in text.split(",") if t.strip()]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--agt-path", help="a local checkout of AbstractGradientTraining (without it: certkit alone)"
    )
    ap.add_argument("--agt-python", help="the Python of AGT's environment (default: this one)")
    ap.add_argument("--only", default=",".join(SECTIONS), help=f"sections, of {', '.join(SECTIONS)}")
    ap.add_argument("--ks", type=_ints, default=list(range(0, 101, 10)), help="label-flip budgets (pca)")
    ap.add_argument("--reg-ks", type=_ints, default=[10, 100, 500], help="target-poisoning budgets")
    ap.add_argument("--worker", choices=sorted(PROTOCOLS), help=argparse.SUPPRESS)
    ap.add_argument("--k", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--carry", default="box", help=argparse.SUPPRESS)
    ap.add_argument("--clip", type=float, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker is not None:
        print(json.dumps(worker(args.worker, args.k, args.carry, args.clip)), flush=True)
        return
    sections = [s.strip() for s in args.only.split(",") if s.strip()]
    bad = [s for s in sections if s not in SECTIONS]
    if bad:
        raise SystemExit(f"--only: unknown sections {bad}; expected some of {list(SECTIONS)}")
    start = time.perf_counter()
    if "pca" in sections:
        section_pca(args, None)
    if "pca-clip" in sections:
        section_pca(args, CLIP)
    if "mlp" in sections:
        section_mlp(args)
    if "regression" in sections:
        section_regression(args)
    print(f"({time.perf_counter() - start:.0f} s in all)")


if __name__ == "__main__":
    main()
