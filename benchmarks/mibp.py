"""Benchmark of MIBP certified training: certified accuracy, seconds per epoch and bound width for each
backend/formulation and each carry between steps (``box``, or the ``affine`` zonotope carry-over; ``--carry``)
against the interval-arithmetic box-per-step baseline measured in the same run.

Data sets as in the paper (Lorenz et al., NeurIPS 2025): two moons (100 train, noise 0.1, 200 test, raw
coordinates), Iris 2-class (versicolor/virginica) and 3-class, Breast Cancer (30 features); tabular sets
split 75/25 and standardised with the training split's statistics.  2-layer ReLU MLP from a random
initialisation, hinge loss, full-batch GD, every training point perturbed in every feature by an l-inf box
of radius ε in {1e-4, 1e-3, 1e-2} (Iris also 0.3); certified accuracy = fraction of test points whose
prediction is correct and provably the same for every parameter in the final box.  The default run takes a
few minutes on 2 cores: exact decomposed Gurobi where the per-sample programs fit the pip Gurobi licence
(two moons, Iris 2-class), the decomposed LP relaxation (HiGHS) and, for two moons at ε = 0.01, the hybrid
formulation (decomposed Gurobi ∩ joint LP); Breast Cancer and Iris at ε = 0.3 are interval-only (per-sample
programs beyond the licence, LPs taking minutes per epoch, boxes that have grown so wide that the exact
programs branch for minutes).  ``--full`` runs Gurobi, SCIP, MILP and LP (decomposed),
hybrid, joint LP and the joint exact formulations for every data set and ε (hours; the joint exact ones
need a full Gurobi licence, SCIP joint only returns interval-level dual bounds within short time limits).

    python benchmarks/mibp.py                       # quick
    python benchmarks/mibp.py --seeds 10 --full     # closer to the paper's protocol (hours)
    python benchmarks/mibp.py --datasets two_moons --workers 2
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
# hidden units, learning rate and epochs per data set.  Data as in the paper: two moons 100 train / 200
# test (noise 0.1, raw coordinates), the tabular sets split 75/25 and standardised with the training
# split's mean and standard deviation; every training point is perturbed in every feature (l-inf box).
# 16 hidden units keep two-moons per-sample programs within the pip Gurobi licence (<= 200 variables).
SETTINGS = {
    "two_moons": (16, 0.1, 6),
    "iris2": (8, 0.2, 6),
    "iris3": (8, 0.2, 6),
    "breast_cancer": (8, 0.1, 6),
}
# quick mode: (backend, formulation, epsilons or None for all)
QUICK_PROGRAMS = {
    "two_moons": [
        ("gurobi", "decomposed", None),
        ("lp", "decomposed", (1e-2,)),
        ("gurobi", "hybrid", (1e-2,)),
    ],
    "iris2": [("gurobi", "decomposed", (1e-3, 1e-2)), ("lp", "decomposed", (1e-2,))],
    "iris3": [("lp", "decomposed", (1e-3, 1e-2))],
}
FULL_PROGRAMS = [
    ("gurobi", "decomposed", None),
    ("gurobi", "hybrid", None),
    ("scip", "decomposed", None),
    ("milp", "decomposed", None),
    ("lp", "decomposed", None),
    ("lp", "joint", None),
    ("gurobi", "joint", None),
    ("scip", "joint", None),
]
HEADERS = [
    "dataset",
    "eps",
    "backend",
    "form.",
    "carry",
    "nominal acc",
    "cert. acc",
    "s/epoch",
    "mean width",
    "width/interval",
    "time/interval",
    "early stops",
]


def run_one(data, eps, backend, formulation, carry, *, hidden, epochs, lr, seed, time_limit, workers):
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
        carry=carry,
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
    parser.add_argument("--epochs", type=int, default=None, help="override the per-data-set epochs")
    parser.add_argument("--hidden", type=int, default=None, help="override the per-data-set hidden units")
    parser.add_argument(
        "--learning-rate", type=float, default=None, help="override the per-data-set step size"
    )
    parser.add_argument("--time-limit", type=float, default=None, help="seconds per solve")
    parser.add_argument("--workers", type=int, default=None, help="worker processes for the solves")
    parser.add_argument("--full", action="store_true", help="all program backends on all data sets and ε")
    parser.add_argument(
        "--carry",
        nargs="+",
        default=["box", "affine"],
        choices=["box", "affine"],
        help="what is carried between steps (each configuration runs once per carry)",
    )
    args = parser.parse_args()
    rows, notes, used = [], [], []
    for name in args.datasets:
        hidden, lr, epochs = SETTINGS[name]
        hidden = args.hidden or hidden
        lr = args.learning_rate or lr
        epochs = args.epochs or epochs
        used.append(f"{name}: {hidden} hidden, lr {lr}, {epochs} epochs")
        programs = FULL_PROGRAMS if args.full else QUICK_PROGRAMS.get(name, [])
        if not programs:
            notes.append(
                f"{name}: program backends not run in the quick mode (per-sample programs exceed the "
                "pip Gurobi licence, decomposed LPs take minutes per epoch; use --full)"
            )
        for eps in EPSILONS[name]:
            configs = [("interval", "-", c) for c in dict.fromkeys(["box", *args.carry])] + [
                (b, f, c) for b, f, sel in programs if sel is None or eps in sel for c in args.carry
            ]
            if programs and len(configs) == len(dict.fromkeys(["box", *args.carry])):
                notes.append(
                    f"{name} ε={eps:g}: program backends skipped in the quick mode (time); use --full"
                )
            results: dict = {c: [] for c in configs}
            for seed in range(args.seeds):
                data = load_data(name, rng=seed)
                for backend, formulation, carry in configs:
                    if (backend, formulation, carry) not in results:
                        continue
                    try:
                        r = run_one(
                            data,
                            eps,
                            backend,
                            "decomposed" if formulation == "-" else formulation,
                            carry,
                            hidden=hidden,
                            epochs=epochs,
                            lr=lr,
                            seed=seed,
                            time_limit=args.time_limit,
                            workers=args.workers,
                        )
                    except GurobiLicenseError:
                        notes.append(
                            f"{name} ε={eps:g} {backend}/{formulation}: a step program exceeds the "
                            "size-limited Gurobi licence (use scip or a full licence)"
                        )
                        results.pop((backend, formulation, carry))
                        continue
                    results[backend, formulation, carry].append(r)
            base = results["interval", "-", "box"]
            b_width = np.mean([r["width"] for r in base])
            b_time = np.mean([r["s_per_epoch"] for r in base])
            block = []
            for (backend, formulation, carry), rs in results.items():
                width = np.mean([r["width"] for r in rs])
                spe = np.mean([r["s_per_epoch"] for r in rs])
                block.append(
                    [
                        name,
                        f"{eps:g}",
                        backend,
                        formulation,
                        carry,
                        np.mean([r["nominal"] for r in rs]),
                        np.mean([r["certified"] for r in rs]),
                        spe,
                        width,
                        width / b_width if b_width > 0 else float("nan"),
                        spe / b_time if b_time > 0 else float("nan"),
                        sum(r["not_optimal"] for r in rs),
                    ]
                )
            rows.extend(block)
            print(format_table(HEADERS, block), flush=True)
    print()
    title = f"MIBP certified training (hinge loss, feature box ε), {args.seeds} seed(s); " + "; ".join(used)
    print(format_table(HEADERS, rows, title=title))
    for note in dict.fromkeys(notes):
        print("note:", note)


if __name__ == "__main__":
    main()
