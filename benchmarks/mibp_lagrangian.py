"""Lagrangian decomposition vs the decomposed and hybrid formulations of MIBP certified training.

Two moons (100 train, noise 0.1), 2-layer ReLU MLP [2, 16, 1], hinge loss, lr 0.1, every training point
perturbed by an l-inf box of radius ε = 0.01.  Prints, per formulation: mean parameter-box width after
each epoch, CPU seconds per epoch (process time, all solver threads) and wall seconds per epoch, the
largest per-sample program (variables) and the ratios of width and CPU time against ``hybrid`` and
``decomposed``, all measured in the same run.

    python benchmarks/mibp_lagrangian.py                          # gurobi, 4 epochs, seed 0
    python benchmarks/mibp_lagrangian.py --backend lp --epochs 6 --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from certkit._results import format_table
from certkit.mibp import MLP, FeatureBox, certified_training
from certkit.mibp._cli import load_data

FORMULATIONS = ("decomposed", "hybrid", "lagrangian")


def run(formulation: str, *, backend: str, epochs: int, eps: float, seed: int, workers) -> dict:
    data = load_data("two_moons", rng=seed)
    model = MLP.random([2, 16, 1], rng=seed)
    cpu = time.process_time()
    res = certified_training(
        model,
        data.X,
        data.y,
        perturbation=FeatureBox(eps),
        loss="hinge",
        epochs=epochs,
        learning_rate=0.1,
        backend=backend,
        formulation=formulation,
        executor=workers,
    )
    return {
        "widths": res.mean_widths()[1:],
        "cpu": (time.process_time() - cpu) / epochs,
        "wall": float(np.mean(res.epoch_seconds)),
        "max_vars": max(s["max_vars"] for s in res.solver_stats),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", default="gurobi", help="program backend (default gurobi)")
    parser.add_argument("--epochs", type=int, default=4, help="epochs (default 4)")
    parser.add_argument("--eps", type=float, default=0.01, help="perturbation radius (default 0.01)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="seeds (default 0)")
    parser.add_argument("--workers", type=int, default=None, help="worker processes (default: serial)")
    args = parser.parse_args()

    out = {
        f: [
            run(f, backend=args.backend, epochs=args.epochs, eps=args.eps, seed=s, workers=args.workers)
            for s in args.seeds
        ]
        for f in FORMULATIONS
    }
    width = {f: np.mean([r["widths"] for r in rs], axis=0) for f, rs in out.items()}
    cpu = {f: float(np.mean([r["cpu"] for r in rs])) for f, rs in out.items()}
    rows = []
    for f, rs in out.items():
        rows.append(
            [
                f,
                *[f"{w:.4g}" for w in width[f]],
                f"{cpu[f]:.2f}",
                f"{np.mean([r['wall'] for r in rs]):.2f}",
                max(r["max_vars"] for r in rs),
                f"{width[f][-1] / width['hybrid'][-1]:.3f}",
                f"{width[f][-1] / width['decomposed'][-1]:.3f}",
                f"{cpu[f] / cpu['hybrid']:.2f}",
                f"{cpu[f] / cpu['decomposed']:.2f}",
            ]
        )
    headers = [
        "formulation",
        *[f"width ep{t + 1}" for t in range(args.epochs)],
        "CPU s/epoch",
        "wall s/epoch",
        "max vars",
        "width/hybrid",
        "width/decomp.",
        "CPU/hybrid",
        "CPU/decomp.",
    ]
    print(
        format_table(
            headers,
            rows,
            title=(
                f"two moons [2, 16, 1], eps {args.eps}, backend {args.backend}, {args.epochs} epochs, "
                f"seeds {args.seeds} (mean); ratios use the last epoch's width"
            ),
        )
    )


if __name__ == "__main__":
    main()
