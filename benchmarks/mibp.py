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
    python benchmarks/mibp.py --agt --agt-path ~/AbstractGradientTraining --agt-python ~/agt-venv/bin/python
    python benchmarks/mibp.py --epochs-curve --plot docs/mibp_epochs.png
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import dataclass

import numpy as np

from certkit._results import format_table
from certkit.mibp import (
    MLP,
    FeatureBox,
    GurobiLicenseError,
    certified_training,
    certify_predictions,
    select_epoch,
)
from certkit.mibp._cli import load_data
from certkit.mibp.certification.attack import attack_predictions

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
        loss="hinge",
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


# ------------------------------------------------------------------ --paper: the MIBP-Cert protocol
# Two moons 100 train / 200 validation / 200 test (noise 0.1, raw coordinates); Iris 2-class
# (versicolor / virginica) 60 / 20 / 20, standardised with the training split's statistics.  PyTorch-default
# initialisation, a 2-layer ReLU MLP, binary hinge loss, full-batch GD; every epoch certified, the epoch
# with the best certified accuracy on the validation split is the one evaluated on the test split.
# Hidden width, learning rate and epoch budget were fixed once on the validation split (--tune) and are
# used for every method.
PAPER_EPSILONS = {"two_moons": (1e-4, 1e-3, 1e-2), "iris2": (0.3,)}
PAPER_SETTINGS = {"two_moons": (16, 0.2, 10), "iris2": (8, 0.1, 10)}
PAPER_TIME_LIMIT = 2.0  # seconds per solve (a stopped solve contributes its dual bound)
PAPER_PATIENCE = 2  # early stopping: certification stops 2 epochs after the best validation score
TUNE_GRID = {"learning_rate": (0.1, 0.2, 0.5, 1.0, 2.0), "epochs": (3, 5, 10, 20, 40)}
PAPER_HEADERS = [
    "dataset",
    "eps",
    "method",
    "backend",
    "cert. acc",
    "vs interval",
    "nominal acc",
    "attack bound",
    "sel. epoch",
    "epochs run",
    "s/epoch",
    "CPU s/epoch",
    "seeds",
]


@dataclass(frozen=True)
class PaperSplit:
    X: np.ndarray
    y: np.ndarray
    X_val: np.ndarray
    y_val: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray


def paper_data(name: str, seed: int) -> PaperSplit:
    """The paper's train / validation / test split of ``two_moons`` or ``iris2`` for one seed."""
    from certkit import datasets

    if name == "two_moons":
        ds = datasets.load_two_moons(n_train=100, n_test=400, noise=0.1, rng=seed)
        y_rest = ds.y_test_signed
        return PaperSplit(
            ds.X_train, ds.y_train_signed, ds.X_test[:200], y_rest[:200], ds.X_test[200:], y_rest[200:]
        )
    full = datasets.load_iris(binary=True)
    gen = np.random.default_rng(seed)
    parts: list[list[int]] = [[], [], []]
    for k in (0, 1):
        members = gen.permutation(np.flatnonzero(full.y == k))
        n_train, n_val = round(0.6 * members.size), round(0.2 * members.size)
        for part, idx in zip(parts, np.split(members, [n_train, n_train + n_val])):
            part.extend(idx)
    train, val, test = (gen.permutation(p) for p in parts)
    mean, std = full.X[train].mean(axis=0), full.X[train].std(axis=0)
    scale = np.where(std > 0, std, 1.0)
    X = (full.X - mean) / scale
    y = 2 * full.y - 1
    return PaperSplit(X[train], y[train], X[val], y[val], X[test], y[test])


def paper_methods() -> list[tuple[str, dict]]:
    """Every method the library offers: interval arithmetic, each formulation but the joint one (its
    programs exceed the pip Gurobi licence) and each non-box carry-over, with interval boxes per step (the
    carried zonotope is where its gain comes from; on top of per-sample programs it costs their time too)."""
    import certkit.mibp as mibp

    methods = [("interval", {"backend": "interval"})]
    methods += [(f, {"formulation": f}) for f in mibp.FORMULATIONS if f != "joint"]
    methods += [
        (f"{carry} carry", {"backend": "interval", "carry": carry})
        for carry in getattr(mibp, "CARRIES", ("box",))
        if carry != "box"
    ]
    return methods


def _exact_backend() -> str:
    """gurobi when installed (its size-limited licence holds the per-sample programs), else HiGHS (milp)."""
    try:
        import gurobipy  # noqa: F401
    except ImportError:
        return "milp"
    return "gurobi"


def paper_run(
    split: PaperSplit, eps: float, options: dict, *, hidden, lr, epochs, seed, time_limit, workers=None
):
    """Certified training of one method, the epoch selected on validation, its test scores."""
    model = MLP.random([split.X.shape[1], hidden, 1], init="torch", rng=seed)
    cpu = time.process_time()
    res = certified_training(
        model,
        split.X,
        split.y,
        perturbation=FeatureBox(eps),
        loss="hinge",
        epochs=epochs,
        learning_rate=lr,
        time_limit=time_limit,
        validation=(split.X_val, split.y_val),
        patience=PAPER_PATIENCE,
        executor=workers,
        **options,
    )
    cpu = time.process_time() - cpu
    # one hidden layer and a fixed input: every parameter occurs once in f, so interval bounds on the
    # prediction are exact (the certificate's looseness is all in the parameter box)
    sel = select_epoch(res, split.X_val, split.y_val)
    cert = certify_predictions(res, split.X_test, epoch=sel.epoch)
    return {
        "certified": cert.certified_accuracy(split.y_test),
        "nominal": float(np.mean(cert.prediction == split.y_test)),
        "epoch": sel.epoch,
        "s_per_epoch": float(np.mean(res.epoch_seconds)),
        "epochs_run": res.epochs,
        # this process's CPU time; not measured with worker processes (their CPU time is not visible here)
        "cpu_per_epoch": cpu / res.epochs if (workers or 1) <= 1 else None,
        "not_optimal": sum(st["not_optimal"] for st in res.solver_stats),
    }


def attack_bound(split: PaperSplit, eps: float, at_epochs, *, hidden, lr, epochs, seed) -> dict:
    """For the epochs ``at_epochs``: the fraction of test points correct and not flipped by the prediction
    attack, an upper bound on the certified accuracy of any sound method at that epoch."""
    model = MLP.random([split.X.shape[1], hidden, 1], init="torch", rng=seed)
    flipped = attack_predictions(
        model,
        split.X,
        split.y,
        FeatureBox(eps),
        split.X_test,
        epochs=epochs,
        learning_rate=lr,
        restarts=1,
        steps=8,
        at_epochs=at_epochs,
        rng=seed,
    )
    path = model.train(split.X, split.y, epochs=epochs, learning_rate=lr)
    return {
        str(t): float(np.mean((path[t].predict(split.X_test) == split.y_test) & ~flipped[t]))
        for t in at_epochs
    }


def _mean_std(values) -> str:
    values = np.asarray(values, dtype=np.float64)
    return f"{values.mean():.3f} ± {values.std():.3f}"


def _settings(name: str, args) -> tuple[int, float, int]:
    hidden, lr, epochs = PAPER_SETTINGS[name]
    return args.hidden or hidden, args.learning_rate or lr, args.epochs or epochs


def _load_records(paths) -> list[dict]:
    """The records of the files, the first of each (data set, ε, seed, method) only, attack bounds merged."""
    records: dict = {}
    for path in paths or ():
        if os.path.exists(path):
            with open(path) as fh:
                for record in (json.loads(line) for line in fh if line.strip()):
                    key = (record["dataset"], record["eps"], record["seed"], record["method"])
                    if key not in records:
                        records[key] = record
                    elif record["method"] == "attack":
                        records[key]["bound"] = {**record["bound"], **records[key]["bound"]}
    return list(records.values())


def paper_main(args) -> None:
    """``--paper``: every method under the paper's protocol, mean ± std over the seeds.

    Each finished (data set, ε, seed, method) is appended to ``--records`` as one JSON line and skipped when
    the file already holds it, so a run can be resumed, split over processes (one file each) and reported
    with ``--report`` from all files, seeds that finished only.
    """
    methods = paper_methods()
    if args.methods:
        methods = [m for m in methods if m[0] in args.methods]
    backend = args.backend or _exact_backend()
    time_limit = args.time_limit or PAPER_TIME_LIMIT
    records = _load_records(args.records)
    done = {(r["dataset"], r["eps"], r["seed"], r["method"]) for r in records}
    out = args.records[0] if args.records else None
    for name in [] if args.report else args.datasets:
        hidden, lr, epochs = _settings(name, args)
        kw = {"hidden": hidden, "lr": lr, "epochs": epochs}
        for eps in sorted(PAPER_EPSILONS[name], reverse=True):
            if args.eps and eps not in args.eps:
                continue
            for seed in range(args.seeds):
                split = paper_data(name, seed)
                todo = [(label, {"backend": backend, **opt}) for label, opt in methods] + [("attack", None)]
                for label, options in todo:
                    if options is None:  # at the epochs this seed's methods selected, those not yet attacked
                        mine = [
                            r for r in records if (r["dataset"], r["eps"], r["seed"]) == (name, eps, seed)
                        ]
                        covered = {int(e) for r in mine if r["method"] == "attack" for e in r["bound"]}
                        at = sorted({r["epoch"] for r in mine if r["method"] != "attack"} - covered)
                        if not at:
                            continue
                        result = {"bound": attack_bound(split, eps, at, seed=seed, **kw)}
                    elif (name, eps, seed, label) in done:
                        continue
                    else:
                        result = paper_run(
                            split, eps, options, seed=seed, time_limit=time_limit, workers=args.workers, **kw
                        )
                        result["backend"] = options["backend"]
                    record = {"dataset": name, "eps": eps, "seed": seed, "method": label, **result, **kw}
                    records.append(record)
                    done.add((name, eps, seed, label))
                    if out:
                        with open(out, "a") as fh:
                            fh.write(json.dumps(record) + "\n")
                    print(
                        f"{name} ε={eps:g} seed {seed} {label}: "
                        + ", ".join(f"{k}={v}" for k, v in result.items() if k != "bound"),
                        flush=True,
                    )
    print(paper_table(records, [label for label, _ in methods], args.datasets))
    for name in args.datasets:
        hidden, lr, epochs = _settings(name, args)
        best = []
        for seed in range(args.seeds):
            split = paper_data(name, seed)
            model = MLP.random([split.X.shape[1], hidden, 1], init="torch", rng=seed)
            path = model.train(split.X, split.y, epochs=epochs, learning_rate=lr)
            best.append(max(np.mean(m.predict(split.X_test) == split.y_test) for m in path[1:]))
        print(
            f"note: {name}: nominal test accuracy at the best of epochs 1..{epochs} chosen on the test "
            f"split (a ceiling for any epoch choice): {_mean_std(best)} over {args.seeds} seeds"
        )


def paper_table(records: list[dict], methods: list[str], datasets) -> str:
    """The --paper table from the records: seeds with both the method and the attack bound finished."""
    rows, notes = [], []
    for name in datasets:
        for eps in PAPER_EPSILONS.get(name, ()):
            bounds: dict = {}  # seed -> {epoch: bound}, merged over the records of several processes
            for r in records:
                if (r["dataset"], r["eps"], r["method"]) == (name, eps, "attack"):
                    bounds.setdefault(r["seed"], {}).update(r["bound"])
            for label in methods:
                runs = [
                    r
                    for r in records
                    if (r["dataset"], r["eps"], r["method"]) == (name, eps, label)
                    and str(r["epoch"]) in bounds.get(r["seed"], {})
                ]
                if not runs:
                    continue
                base = {
                    r["seed"]: r["certified"]
                    for r in records
                    if (r["dataset"], r["eps"], r["method"]) == (name, eps, "interval")
                }
                paired = [r["certified"] - base[r["seed"]] for r in runs if r["seed"] in base]
                rows.append(
                    [
                        name,
                        f"{eps:g}",
                        label,
                        runs[0]["backend"],
                        _mean_std([r["certified"] for r in runs]),
                        f"{np.mean(paired):+.3f}" if paired else "-",
                        _mean_std([r["nominal"] for r in runs]),
                        _mean_std([bounds[r["seed"]][str(r["epoch"])] for r in runs]),
                        f"{np.mean([r['epoch'] for r in runs]):.1f}",
                        f"{np.mean([r['epochs_run'] for r in runs]):.1f}",
                        float(np.mean([r["s_per_epoch"] for r in runs])),
                        (
                            float(np.mean(cpu))
                            if None not in (cpu := [r["cpu_per_epoch"] for r in runs])
                            else "-"
                        ),
                        len(runs),
                    ]
                )
                stopped = sum(r["not_optimal"] for r in runs)
                if stopped:
                    notes.append(f"{name} ε={eps:g} {label}: {stopped} solves stopped at the time limit")
        if name in PAPER_SETTINGS:
            hidden, lr, epochs = PAPER_SETTINGS[name]
            notes.insert(
                0,
                f"{name}: 2-{hidden}-1 MLP (torch init), lr {lr}, at most {epochs} epochs, "
                f"patience {PAPER_PATIENCE}",
            )
    title = (
        "MIBP certified training, paper protocol (test scores at the validation-selected epoch), mean ± std "
        "over seeds; attack bound: correct test points no found training set flips (a ceiling for every "
        "sound method at that epoch)"
    )
    return "\n".join([format_table(PAPER_HEADERS, rows, title=title)] + [f"note: {n}" for n in notes])


def tune_main(args) -> None:
    """``--tune``: validation certified accuracy (interval) and nominal validation accuracy at the
    validation-selected epoch over a grid of learning rates and epoch budgets; the test split is not read."""
    for name in args.datasets:
        if name not in PAPER_EPSILONS:
            continue
        hidden = args.hidden or PAPER_SETTINGS[name][0]
        eps = max(PAPER_EPSILONS[name])
        splits = [paper_data(name, seed) for seed in range(args.seeds)]
        rows = []
        for lr in TUNE_GRID["learning_rate"]:
            for epochs in TUNE_GRID["epochs"]:
                cert, nominal, chosen, best_nominal = [], [], [], []
                for seed, sp in enumerate(splits):
                    model = MLP.random([sp.X.shape[1], hidden, 1], init="torch", rng=seed)
                    res = certified_training(
                        model,
                        sp.X,
                        sp.y,
                        perturbation=FeatureBox(eps),
                        loss="hinge",
                        epochs=epochs,
                        learning_rate=lr,
                        validation=(sp.X_val, sp.y_val),
                        patience=PAPER_PATIENCE,
                    )
                    sel = select_epoch(res, sp.X_val, sp.y_val)
                    cert.append(sel.certified_accuracy[sel.epoch])
                    nominal.append(sel.nominal_accuracy[sel.epoch])
                    chosen.append(sel.epoch)
                    path = model.train(sp.X, sp.y, epochs=epochs, learning_rate=lr)
                    best_nominal.append(max(np.mean(m.predict(sp.X_val) == sp.y_val) for m in path[1:]))
                rows.append(
                    [
                        name,
                        f"{eps:g}",
                        lr,
                        epochs,
                        _mean_std(cert),
                        _mean_std(nominal),
                        f"{np.mean(chosen):.1f}",
                        _mean_std(best_nominal),
                    ]
                )
        print(
            format_table(
                [
                    "dataset",
                    "eps",
                    "lr",
                    "epochs",
                    "val. cert. acc (interval)",
                    "val. nominal acc",
                    "epoch",
                    "best val. nominal acc",
                ],
                rows,
                title=f"validation split only, {args.seeds} seeds, 2-{hidden}-1 MLP, torch init",
            ),
            flush=True,
        )


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
    parser.add_argument("--paper", action="store_true", help="the paper's protocol, every method")
    parser.add_argument("--tune", action="store_true", help="validation grid behind --paper")
    parser.add_argument("--methods", nargs="+", default=None, help="--paper: only these methods")
    parser.add_argument("--backend", default=None, help="--paper: backend of the program methods")
    parser.add_argument(
        "--records", nargs="+", default=None, help="--paper: JSON-lines files (results appended to the first)"
    )
    parser.add_argument("--report", action="store_true", help="--paper: only print the table of --records")
    parser.add_argument("--eps", nargs="+", type=float, default=None, help="--paper: only these ε")
    parser.add_argument(
        "--carry",
        nargs="+",
        default=["box", "affine"],
        choices=["box", "affine"],
        help="what is carried between steps (each configuration runs once per carry)",
    )
    parser.add_argument(
        "--agt",
        action="store_true",
        help="AGT's half-moons protocol, 16 budgets, certkit against AGT (benchmarks/mibp_agt.py)",
    )
    parser.add_argument(
        "--agt-path", default=None, help="--agt: a local checkout of AbstractGradientTraining"
    )
    parser.add_argument("--agt-python", default=None, help="--agt: the Python of AGT's environment")
    parser.add_argument(
        "--epochs-curve",
        action="store_true",
        help="--agt: nominal and certified accuracy per epoch (1..10) for one budget, drawn to --plot",
    )
    parser.add_argument("--plot", default=None, help="--epochs-curve: write the figure here (PNG)")
    parser.add_argument(
        "--unlearning",
        action="store_true",
        help="unlearning certificates (Removals(k), k = 1, 5, 10, 50) on AGT's half-moons protocol and AGT's",
    )
    args = parser.parse_args()
    if args.agt or args.epochs_curve or args.unlearning:
        import mibp_agt

        if args.epochs_curve:
            mibp_agt.epochs_curve(args.plot)
        elif args.unlearning:
            mibp_agt.unlearning(args.agt_path, args.agt_python)
        else:
            mibp_agt.main(args.agt_path, args.agt_python)
        return
    if not args.paper and (args.report or args.records or args.methods or args.eps):
        parser.error("--report, --records, --methods and --eps apply to --paper only")
    if args.paper or args.tune:
        if args.datasets == list(EPSILONS):
            args.datasets = list(PAPER_EPSILONS)
        (tune_main if args.tune else paper_main)(args)
        return
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
