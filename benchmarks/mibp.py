"""Benchmark of MIBP certified training: certified accuracy, seconds per epoch and bound width for each
backend/formulation against the interval-arithmetic baseline measured in the same run.

Data sets (spec): two moons (100 train, noise 0.1, 200 test), Iris 2-class (versicolor/virginica) and
3-class, Breast Cancer (30 features); 2-layer ReLU MLP, hinge loss, full-batch GD, feature-box ε in
{1e-4, 1e-3, 1e-2} (Iris also 0.3).  The default run takes a few minutes on 2 cores: program backends
run where the per-sample programs fit the pip Gurobi licence (two moons, Iris 2-class) and are skipped
with a reason elsewhere; ``--full`` adds SCIP / MILP / joint runs, more epochs and all data sets.

    python benchmarks/mibp.py                       # quick
    python benchmarks/mibp.py --seeds 10 --full     # closer to the paper's protocol (hours)
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from certkit._results import format_table
from certkit.mibp import MLP, FeatureBox, GurobiLicenseError, certified_training, certify_predictions
from certkit.mibp._cli import load_data

EPSILONS = {
    "two_moons": (1e-4, 1e-3, 1e-2),
    "iris2": (1e-4, 1e-3, 1e-2, 0.3),
    "iris3": (1e-4, 1e-3, 1e-2, 0.3),
    "breast_cancer": (1e-4, 1e-3, 1e-2),
}
QUICK_PROGRAMS = {
    "two_moons": [("gurobi", "decomposed"), ("lp", "decomposed")],
    "iris2": [("gurobi", "decomposed")],
}
FULL_PROGRAMS = [
    ("gurobi", "decomposed"),
    ("scip", "decomposed"),
    ("milp", "decomposed"),
    ("lp", "decomposed"),
    ("gurobi", "joint"),
    ("scip", "joint"),
]


def run_one(data, eps, backend, formulation, *, hidden, epochs, lr, seed, time_limit, workers):
    model = MLP.random([data.X.shape[1], hidden, data.n_outputs], rng=seed)
    res = certified_training(
        model,
        data.X,
        data.y,
        perturbation=FeatureBox(eps),
        epochs=epochs,
        learning_rate=lr,
        backend=backend,
        formulation=formulation,
        time_limit=time_limit,
        executor=workers,
    )
    start = time.perf_counter()
    cert = certify_predictions(res, data.X_test, backend=backend, time_limit=time_limit, executor=workers)
    return {
        "nominal": float(np.mean(res.nominal.predict(data.X_test) == data.y_test)),
        "certified": cert.certified_accuracy(data.y_test),
        "s_per_epoch": float(np.mean(res.epoch_seconds)),
        "predict_s": time.perf_counter() - start,
        "width": float(res.mean_widths()[-1]),
        "not_optimal": sum(s["not_optimal"] for s in res.solver_stats),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--datasets", nargs="+", default=list(EPSILONS), choices=list(EPSILONS))
    parser.add_argument("--seeds", type=int, default=1, help="seeds (data split + initialisation); paper: 10")
    parser.add_argument("--epochs", type=int, default=None, help="default 4 (quick) / 10 (--full)")
    parser.add_argument("--hidden", type=int, default=8)
    parser.add_argument("--learning-rate", type=float, default=0.1)
    parser.add_argument("--time-limit", type=float, default=None, help="seconds per solve")
    parser.add_argument("--workers", type=int, default=None, help="worker processes for the solves")
    parser.add_argument("--full", action="store_true", help="all program backends on all data sets")
    args = parser.parse_args()
    epochs = args.epochs or (10 if args.full else 4)
    rows, notes = [], []
    for name in args.datasets:
        for eps in EPSILONS[name]:
            programs = FULL_PROGRAMS if args.full else QUICK_PROGRAMS.get(name, [])
            configs = [("interval", "-"), *programs]
            results: dict = {c: [] for c in configs}
            for seed in range(args.seeds):
                data = load_data(name, rng=seed)
                for backend, formulation in configs:
                    if (backend, formulation) not in results:
                        continue
                    try:
                        r = run_one(
                            data,
                            eps,
                            backend,
                            "decomposed" if formulation == "-" else formulation,
                            hidden=args.hidden,
                            epochs=epochs,
                            lr=args.learning_rate,
                            seed=seed,
                            time_limit=args.time_limit,
                            workers=args.workers,
                        )
                    except GurobiLicenseError:
                        notes.append(
                            f"{name} ε={eps:g} {backend}/{formulation}: exceeds the size-limited Gurobi "
                            "licence (use --full with scip, or a full licence)"
                        )
                        results.pop((backend, formulation))
                        continue
                    results[backend, formulation].append(r)
            base = results["interval", "-"]
            b_width = np.mean([r["width"] for r in base])
            b_time = np.mean([r["s_per_epoch"] for r in base])
            for (backend, formulation), rs in results.items():
                width = np.mean([r["width"] for r in rs])
                spe = np.mean([r["s_per_epoch"] for r in rs])
                rows.append(
                    [
                        name,
                        f"{eps:g}",
                        backend,
                        formulation,
                        np.mean([r["nominal"] for r in rs]),
                        np.mean([r["certified"] for r in rs]),
                        spe,
                        width,
                        width / b_width,
                        spe / b_time if b_time > 0 else float("nan"),
                        sum(r["not_optimal"] for r in rs),
                    ]
                )
            if not programs:
                notes.append(
                    f"{name} ε={eps:g}: program backends not run in the quick mode (per-sample programs "
                    "exceed the pip Gurobi licence; use --full)"
                )
            print(
                format_table(
                    [
                        "dataset",
                        "eps",
                        "backend",
                        "form.",
                        "nominal acc",
                        "cert. acc",
                        "s/epoch",
                        "mean width",
                        "width/interval",
                        "time/interval",
                        "early stops",
                    ],
                    rows[-len(results) :],
                ),
                flush=True,
            )
    print()
    print(
        format_table(
            [
                "dataset",
                "eps",
                "backend",
                "form.",
                "nominal acc",
                "cert. acc",
                "s/epoch",
                "mean width",
                "width/interval",
                "time/interval",
                "early stops",
            ],
            rows,
            title=f"MIBP certified training: {args.seeds} seed(s), {epochs} epochs, 2-layer MLP with "
            f"{args.hidden} hidden units, lr {args.learning_rate}",
        )
    )
    for note in dict.fromkeys(notes):
        print("note:", note)


if __name__ == "__main__":
    main()
