"""certkit against Abstract Gradient Training (AGT) on AGT's half-moons poisoning protocol, side by side.

AGT (GPL-3) runs from the user's own checkout in its own Python environment, through
``benchmarks/agt_peer.py`` in a subprocess; certkit trains the identical run (same data, same torch initial
weights, cross-entropy, full batch of 3000, 4 epochs, learning rate ``InverseDecay(2.0, 0.6, minimum=1e-3)``)
in this process.  For each of the 16 budgets the table gives both tools' certified test accuracy (test points
whose prediction is correct for every parameter in the final box) with certkit's default (interval, box
carry) and with ``carry="shared"``, the mean width of the final parameter box, and CPU seconds (process
time) per configuration, all measured in one run.

certkit's budgets: ``Budget(FeatureBox(eps), k)`` (features of at most k points), ``LabelFlips(k)`` (at most
k labels changed), ``Budget(FeatureBox(eps) & LabelFlips(1), k)`` (paired: at most k points, each may move and
change its label).  Run through ``python benchmarks/mibp.py --agt --agt-path PATH --agt-python PYTHON``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from certkit._results import format_table
from certkit.mibp import (
    MLP,
    Budget,
    FeatureBox,
    InverseDecay,
    LabelFlips,
    Removals,
    certified_training,
    certify_predictions,
)

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from agt_peer import AGT_BUDGETS, halfmoons_protocol, initial_torch_model  # noqa: E402

#: The recipe of AGT's half-moons run, in certkit's terms.
RECIPE = dict(loss="cross_entropy", epochs=4, learning_rate=InverseDecay(2.0, 0.6, minimum=1e-3))


def perturbation(budget: dict):
    """certkit's perturbation model for one of AGT's budgets."""
    if budget["sweep"] == "labels":
        return LabelFlips(budget["label_k"])
    if budget["sweep"] == "paired":
        return Budget(FeatureBox(budget["epsilon"]) & LabelFlips(1), budget["k"])
    return Budget(FeatureBox(budget["epsilon"]), budget["k"])


def run_certkit(budget: dict, data: dict, model: MLP, **options) -> dict:
    """Certified training and certification of one budget; process and wall seconds of both together."""
    cpu, wall = time.process_time(), time.perf_counter()
    res = certified_training(
        model, data["X_train"], data["y_train"], perturbation=perturbation(budget), **RECIPE, **options
    )
    cert = certify_predictions(res, data["X_test"])
    return {
        "certified_accuracy": cert.certified_accuracy(data["y_test"]),
        "nominal_accuracy": float(np.mean(res.nominal.predict(data["X_test"]) == data["y_test"])),
        "cpu_seconds": time.process_time() - cpu,
        "seconds": time.perf_counter() - wall,
        "mean_width": float(res.mean_widths()[-1]),
    }


def run_agt(agt_path: str, agt_python: str, dump: Path) -> list[dict]:
    """AGT's 16 configurations in one subprocess of its own environment."""
    out = dump / "agt.json"
    cmd = [agt_python, str(HERE / "agt_peer.py"), "--agt-path", agt_path, "--json", str(out)]
    cmd += ["--dump-bounds", str(dump)]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    rows = json.loads(out.read_text())
    for i, row in enumerate(rows):
        box = np.load(next(dump.glob(f"{i:02d}_*.npz")))
        row["mean_width"] = float(np.mean(box["upper"] - box["lower"]))
    return rows


def main(agt_path: str | None, agt_python: str | None) -> None:
    data = halfmoons_protocol()
    model = MLP.from_torch(initial_torch_model())
    run_certkit(AGT_BUDGETS[0], data, model)  # warm-up (imports, caches)
    ours = [run_certkit(b, data, model) for b in AGT_BUDGETS]
    shared = [run_certkit(b, data, model, carry="shared") for b in AGT_BUDGETS]
    theirs: list[dict | None] = [None] * len(AGT_BUDGETS)
    if agt_path is not None:
        with tempfile.TemporaryDirectory() as tmp:
            theirs = run_agt(agt_path, agt_python or sys.executable, Path(tmp))
    rows, wins, ties, shared_wins = [], 0, 0, 0
    for b, c, sh, a in zip(AGT_BUDGETS, ours, shared, theirs):
        label = {
            "features-k": "features eps=0.01",
            "features-eps": "features k=10",
            "labels": "label flips",
            "paired": "paired eps=0.1",
        }[b["sweep"]]
        size = (
            b["epsilon"]
            if b["sweep"] == "features-eps"
            else b["label_k"]
            if b["sweep"] == "labels"
            else b["k"]
        )
        row = [label, size, c["certified_accuracy"], sh["certified_accuracy"]]
        if a is not None:
            wins += c["certified_accuracy"] > a["certified_accuracy"]
            ties += c["certified_accuracy"] == a["certified_accuracy"]
            shared_wins += sh["certified_accuracy"] > a["certified_accuracy"]
            row += [
                a["certified_accuracy"],
                c["mean_width"] / a["mean_width"],
                c["cpu_seconds"],
                sh["cpu_seconds"],
                a["cpu_seconds"],
            ]
        else:
            row += ["-", "-", c["cpu_seconds"], sh["cpu_seconds"], "-"]
        rows.append(row)
    print(
        format_table(
            [
                "budget",
                "k / eps",
                "certkit box",
                "certkit shared",
                "AGT",
                "width ratio",
                "box CPU s",
                "shared CPU s",
                "AGT CPU s",
            ],
            rows,
            title=(
                "AGT half-moons protocol: certified test accuracy (nominal "
                f"{ours[0]['nominal_accuracy']:.3f}) of certkit's default (interval, carry='box') and of "
                "carry='shared', final box width certkit (box) / AGT, CPU seconds per configuration"
            ),
        )
    )
    if agt_path is not None:
        agt_cpu = sum(a["cpu_seconds"] for a in theirs)
        cpu = sum(c["cpu_seconds"] for c in ours) / agt_cpu
        shared_cpu = sum(c["cpu_seconds"] for c in shared) / agt_cpu
        print(
            f"certkit (interval, default) certifies more than AGT at {wins} of {len(ours)} budgets, "
            f"as much at {ties}, less at {len(ours) - wins - ties}; total CPU time certkit / AGT = {cpu:.2f}"
        )
        print(
            f"certkit (carry='shared') certifies more than AGT at {shared_wins} of {len(ours)} budgets; "
            f"total CPU time / AGT = {shared_cpu:.2f}"
        )
    else:
        print("AGT not run: give --agt-path (a checkout of AbstractGradientTraining) and --agt-python")


#: Budgets of the accuracy/certification trade-off curve (one of each kind of AGT's sweeps).
CURVE_BUDGETS = (
    {"sweep": "features-k", "k": 100, "epsilon": 0.01, "label_k": 0},
    {"sweep": "labels", "k": 0, "epsilon": 0.0, "label_k": 3},
    {"sweep": "paired", "k": 3, "epsilon": 0.1, "label_k": 3},
)


#: Carries of the trade-off curve: the default box and the shared-generator affine carry (the per-input
#: ``affine`` carry does not run at this scale: 757 CPU s for 4 epochs of one budget).
CURVE_CARRIES = ("box", "shared")


def epochs_curve(plot: str | None, epochs: int = 10) -> None:
    """Nominal and certified test accuracy after each of 1..``epochs`` epochs of AGT's recipe (the decaying
    rate continues), for the budgets of `CURVE_BUDGETS` and the carries of `CURVE_CARRIES`; optionally drawn
    to ``plot``."""
    data = halfmoons_protocol()
    model = MLP.from_torch(initial_torch_model())
    recipe = RECIPE | {"epochs": epochs}
    curves, rows = {}, []
    for budget in CURVE_BUDGETS:
        name = (
            repr(perturbation(budget))
            if budget["sweep"] == "labels"
            else (f"{budget['sweep']} k={budget['k']} eps={budget['epsilon']:g}")
        )
        for carry in CURVE_CARRIES:
            start = time.process_time()
            res = certified_training(
                model,
                data["X_train"],
                data["y_train"],
                perturbation=perturbation(budget),
                **recipe,
                carry=carry,
            )
            seconds = time.process_time() - start
            nominal = [
                float(np.mean(m.predict(data["X_test"]) == data["y_test"])) for m in res.nominal_path[1:]
            ]
            certified = [
                certify_predictions(res, data["X_test"], epoch=t).certified_accuracy(data["y_test"])
                for t in range(1, epochs + 1)
            ]
            curves[name, carry] = (nominal, certified)
            widths = res.mean_widths()
            rows += [
                [name, carry, t + 1, nominal[t], certified[t], float(widths[t + 1])] for t in range(epochs)
            ]
            rows.append([name, carry, "CPU s", seconds, "", ""])
    print(
        format_table(
            ["budget", "carry", "epoch", "nominal", "certified", "mean width"],
            rows,
            title="AGT half-moons recipe: accuracy and certified accuracy per epoch (interval backend)",
        )
    )
    if plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6.4, 3.8))
        steps = np.arange(1, epochs + 1)
        ax.plot(steps, curves[next(iter(curves))][0], "k-", marker="o", label="nominal (all budgets)")
        styles = {"box": "--", "shared": ":"}
        colours = dict(zip([b for b, _ in curves][:: len(CURVE_CARRIES)], ("C0", "C1", "C2")))
        for (name, carry), (_, certified) in curves.items():
            ax.plot(
                steps,
                certified,
                styles[carry],
                color=colours[name],
                marker="s",
                ms=3,
                label=f"certified ({carry}): {name}",
            )
        ax.set_xlabel("epoch")
        ax.set_ylabel("test accuracy")
        ax.set_ylim(0, 1)
        ax.set_xticks(steps)
        ax.legend(fontsize=7, loc="center right")
        ax.set_title("Half moons, AGT's recipe: accuracy vs certified accuracy per epoch", fontsize=9)
        fig.tight_layout()
        fig.savefig(plot, dpi=120)
        print(f"figure written to {plot}")


#: The unlearning budgets: up to k training rows removed.
UNLEARN_KS = (1, 5, 10, 50)


def unlearning(agt_path: str | None, agt_python: str | None) -> None:
    """Unlearning certificates on the half-moons protocol, certkit (``Removals(k)``) beside AGT
    (``k_unlearn=k``): the share of test points whose prediction is correct for every parameter in the
    final box, i.e. the model retrained without any k rows predicts them the same."""
    data = halfmoons_protocol()
    model = MLP.from_torch(initial_torch_model())
    ours = []
    for k in UNLEARN_KS:
        cpu = time.process_time()
        res = certified_training(model, data["X_train"], data["y_train"], perturbation=Removals(k), **RECIPE)
        acc = certify_predictions(res, data["X_test"]).certified_accuracy(data["y_test"])
        ours.append({"certified_accuracy": acc, "cpu_seconds": time.process_time() - cpu})
    theirs: list[dict | None] = [None] * len(UNLEARN_KS)
    if agt_path is not None:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "agt.json"
            cmd = [agt_python or sys.executable, str(HERE / "agt_peer.py"), "--agt-path", agt_path]
            cmd += ["--unlearn", ",".join(map(str, UNLEARN_KS)), "--json", str(out)]
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            theirs = json.loads(out.read_text())
    rows = []
    for k, c, a in zip(UNLEARN_KS, ours, theirs):
        row = [k, c["certified_accuracy"], "-" if a is None else a["certified_accuracy"]]
        row += [f"{c['cpu_seconds']:.2f}", "-" if a is None else f"{a['cpu_seconds']:.2f}"]
        row += ["-" if a is None else ("yes" if c["certified_accuracy"] >= a["certified_accuracy"] else "NO")]
        rows.append(row)
    head = ["k removed", "certkit", "AGT", "certkit CPU s", "AGT CPU s", "certkit >= AGT"]
    title = (
        "Unlearning on AGT's half-moons protocol (3,000 rows, [6, 128, 2], full batch, 4 epochs): certified "
        "test accuracy, the retrained model without any k rows predicting every certified point the same"
    )
    print(format_table(head, rows, title=title))
