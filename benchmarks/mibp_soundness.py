"""Soundness sweep of MIBP certified training: random tiny configurations, every backend × formulation ×
perturbation type, each result attacked by projected gradient ascent through the unrolled training
(`certkit.mibp.certification.attack.attack_violation`) and by vertex/uniform samples of the perturbation.

The backends and formulations come from `certkit.mibp.BACKENDS` / `certkit.mibp.FORMULATIONS`, so a new
formulation joins the sweep once it is in the library.  Every solve runs under a time limit (a solve
stopped early contributes its dual bound, so the check stays meaningful) and every case (one
configuration, all its runs) under a budget: each run's solves share equally what is left of the case's
budget for the runs still to come (at least ``--min-time-limit`` each; building programs and the
attacks are not limited, so a case can overrun it).  ``--max-seconds`` stops starting new cases (every
perturbation type gets its share).  A progress line per case goes to stderr; the final table, per
backend × formulation × perturbation type, to stdout:

- ``configs``: runs certified and attacked; ``trajectories``: perturbed datasets trained;
- ``violations``: runs with a trajectory outside its box (must be 0), ``max violation``: the largest
  excess over a box edge (0 when none);
- ``closest margin``: the smallest distance by which an attacked trajectory stayed inside the edge of a
  box of positive width (after epochs 1..T);
- ``early``: solves stopped by the time limit (dual bound used); ``guard``: runs stopped by the runtime
  guard (`UnsoundBoundError`: a solver bound beaten by a known trajectory); ``failed``: other errors
  (licence size limit, solver error; the first message of each kind is printed);
- ``seconds``: certification plus attack time.

    python benchmarks/mibp_soundness.py                     # 20 configurations per perturbation type
    python benchmarks/mibp_soundness.py --configs 60 --restarts 8 --steps 10 --case-budget 120
    python benchmarks/mibp_soundness.py --recipes --configs 50  # training recipes, interval, every carry
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from collections import defaultdict

import numpy as np

from certkit._results import format_table
from certkit.mibp import BACKENDS, FORMULATIONS, GurobiLicenseError, UnsoundBoundError, certified_training
from certkit.mibp.certification.attack import attack_violation
from certkit.mibp.certification.cases import (
    PERTURBATION_KINDS,
    RECIPE_KINDS,
    random_case,
    random_recipe_case,
    recipe_kind_supported,
)

#: optional module each program backend needs
_MODULES = {"gurobi": "gurobipy", "scip": "pyscipopt", "milp": "highspy", "lp": "highspy"}
_ORDER = ("interval", "lp", "milp", "scip", "gurobi")


def combos() -> list[tuple[str, str]]:
    """(backend, formulation) pairs of the installed backends; the interval backend has no formulation."""
    found = [b for b in BACKENDS if b == "interval" or importlib.util.find_spec(_MODULES.get(b, b))]
    found.sort(key=lambda b: _ORDER.index(b) if b in _ORDER else len(_ORDER))
    pairs = []
    for backend in found:
        pairs.extend([("interval", "-")] if backend == "interval" else [(backend, f) for f in FORMULATIONS])
    return pairs


def estimated_solves(config: dict, formulation: str) -> int:
    """Objectives a run gives to the solvers: 2 per parameter per program per epoch."""
    n, m = len(config["X"]), config["model"].n_params
    sets = config["perturbation"].sets(config["X"])
    per_sample = n * (2 if sets.budget is not None or sets.label_flips is not None else 1)
    programs = {"joint": 1, "decomposed": per_sample, "hybrid": per_sample + 1}.get(formulation, per_sample)
    return 2 * m * programs * config["epochs"]


def describe(config: dict) -> str:
    model, loss = config["model"], config["loss"]
    head = "mse" if loss == "mse" else ("binary" if model.sizes[-1] == 1 else "multiclass")
    return (
        f"{list(model.sizes)} {head}, n={len(config['X'])}, {config['epochs']} epoch(s), "
        f"lr={config['learning_rate']}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--configs", type=int, default=20, help="configurations per perturbation type (default 20)"
    )
    parser.add_argument("--restarts", type=int, default=4, help="attack restarts per result (default 4)")
    parser.add_argument("--steps", type=int, default=6, help="gradient-ascent steps per restart (default 6)")
    parser.add_argument("--max-hidden", type=int, default=3, help="most hidden units (default 3)")
    parser.add_argument("--max-points", type=int, default=8, help="most training points (default 8)")
    parser.add_argument("--time-limit", type=float, default=2.0, help="most seconds per solve (default 2.0)")
    parser.add_argument(
        "--min-time-limit",
        type=float,
        default=0.05,
        help="least seconds per solve when the budget is split (default 0.05)",
    )
    parser.add_argument(
        "--case-budget",
        type=float,
        default=20.0,
        help="seconds per configuration, all its runs and attacks (default 20)",
    )
    parser.add_argument(
        "--kinds",
        nargs="+",
        default=list(PERTURBATION_KINDS),
        choices=PERTURBATION_KINDS,
        help="perturbation types (default: all)",
    )
    parser.add_argument(
        "--max-seconds",
        type=float,
        default=np.inf,
        help="start no new case after this many seconds (default: no limit)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the configurations (default 0)")
    parser.add_argument(
        "--recipes",
        action="store_true",
        help="sweep random training recipes (losses, schedules, mini-batches, momentum, weight decay) and "
        "their perturbations (features, budget, label flips, paired) with the interval backend, every carry",
    )
    args = parser.parse_args()
    if args.recipes:
        recipe_sweep(args)
        return

    pairs = combos()
    stats: dict = defaultdict(
        lambda: {
            "configs": 0,
            "traj": 0,
            "violations": 0,
            "max_violation": 0.0,
            "closest": np.inf,
            "early": 0,
            "guard": 0,
            "failed": 0,
            "s": 0.0,
        }
    )
    messages: set[str] = set()
    gen = np.random.default_rng(args.seed)
    start = time.perf_counter()
    n_cases = len(args.kinds) * args.configs
    case = 0
    for i, kind in enumerate(args.kinds):
        for c in range(args.configs):
            config = random_case(gen, kind, max_hidden=args.max_hidden, max_points=args.max_points)
            attack_seed = int(gen.integers(2**31))
            # every perturbation type gets an equal share of --max-seconds
            if time.perf_counter() - start > args.max_seconds * (i + 1) / len(args.kinds):
                continue
            case += 1
            case_start = time.perf_counter()
            worst_case, done, notes, slowest = -np.inf, 0, [], (0.0, "")
            for r, (backend, formulation) in enumerate(pairs):
                st = stats[backend, formulation, kind]
                time_limit = None
                if backend != "interval":
                    share = (args.case_budget - (time.perf_counter() - case_start)) / (len(pairs) - r)
                    per_solve = share / estimated_solves(config, formulation)
                    time_limit = min(args.time_limit, max(args.min_time_limit, per_solve))
                t0 = time.perf_counter()
                try:
                    res = certified_training(
                        **config,
                        backend=backend,
                        formulation="decomposed" if backend == "interval" else formulation,
                        time_limit=time_limit,
                    )
                except UnsoundBoundError as err:
                    st["guard"] += 1
                    notes.append(f"GUARD {backend}/{formulation}: {err}")
                    st["s"] += time.perf_counter() - t0
                    continue
                except (GurobiLicenseError, RuntimeError, ValueError) as err:
                    st["failed"] += 1
                    label = f"{backend}/{formulation}: {type(err).__name__}: {str(err).splitlines()[0][:160]}"
                    if label not in messages:
                        messages.add(label)
                        notes.append(f"failed {label}")
                    st["s"] += time.perf_counter() - t0
                    continue
                violation, count = attack_violation(
                    res,
                    config["X"],
                    config["y"],
                    config["perturbation"],
                    restarts=args.restarts,
                    steps=args.steps,
                    rng=attack_seed,
                )
                st["s"] += time.perf_counter() - t0
                st["configs"] += 1
                st["traj"] += count
                st["early"] += sum(s["not_optimal"] for s in res.solver_stats)
                if violation > 0:
                    st["violations"] += 1
                    st["max_violation"] = max(st["max_violation"], violation)
                    notes.append(f"VIOLATION {backend}/{formulation} by {violation:.3g} (seed {args.seed})")
                else:
                    st["closest"] = min(st["closest"], -violation)
                worst_case = max(worst_case, violation)
                done += 1
                slowest = max(slowest, (time.perf_counter() - t0, f"{backend}/{formulation}"))
            print(
                f"[{case}/{n_cases}] {kind} #{c} ({describe(config)}): {done}/{len(pairs)} runs, "
                f"worst {worst_case:.3g}, {time.perf_counter() - case_start:.0f} s "
                f"(slowest {slowest[1]} {slowest[0]:.0f} s) "
                f"(total {time.perf_counter() - start:.0f} s)",
                file=sys.stderr,
                flush=True,
            )
            for note in notes:
                print(f"    {note}", file=sys.stderr, flush=True)
    rows = []
    for backend, formulation in pairs:
        for kind in args.kinds:
            s = stats[backend, formulation, kind]
            rows.append(
                [
                    backend,
                    formulation,
                    kind,
                    s["configs"],
                    s["traj"],
                    s["violations"],
                    f"{s['max_violation']:.3g}",
                    f"{s['closest']:.2g}",
                    s["early"],
                    s["guard"],
                    s["failed"],
                    f"{s['s']:.0f}",
                ]
            )
    print(
        format_table(
            [
                "backend",
                "formulation",
                "perturbation",
                "configs",
                "trajectories",
                "violations",
                "max violation",
                "closest margin",
                "early",
                "guard",
                "failed",
                "seconds",
            ],
            rows,
            title=(
                f"MIBP soundness sweep: {args.configs} configurations per perturbation type, "
                f"<= {args.max_hidden} hidden, <= {args.max_points} points, <= 2 epochs, attack "
                f"{args.restarts}x{args.steps}, <= {args.time_limit} s per solve, "
                f"{args.case_budget} s per case, "
                f"seed {args.seed}: {case} of {n_cases} cases ({time.perf_counter() - start:.0f} s in all)"
            ),
        )
    )


def recipe_sweep(args) -> None:
    """`--recipes`: random recipe configurations (`random_recipe_case`), each certified with the interval
    backend under every carry and attacked; one table row per perturbation type and carry."""
    gen = np.random.default_rng(args.seed)
    start = time.perf_counter()
    rows = []
    for kind in RECIPE_KINDS:
        for carry in ("box", "affine", "shared", "influence"):
            if not recipe_kind_supported(kind, carry):
                continue
            st = {"configs": 0, "traj": 0, "violations": 0, "max": 0.0, "closest": np.inf, "failed": 0}
            losses: set[str] = set()
            t0 = time.perf_counter()
            for _ in range(args.configs):
                config = random_recipe_case(gen, kind, carry=carry)
                try:
                    res = certified_training(**config, carry=carry)
                except ValueError as err:  # bounds that overflow float64 (long, fast runs)
                    st["failed"] += 1
                    print(f"    {kind}/{carry}: {type(err).__name__}: {err}", file=sys.stderr)
                    continue
                violation, count = attack_violation(
                    res,
                    config["X"],
                    config["y"],
                    config["perturbation"],
                    restarts=args.restarts,
                    steps=args.steps,
                    rng=gen,
                )
                st["configs"] += 1
                st["traj"] += count
                losses.add(config["loss"])
                if violation > 0:
                    st["violations"] += 1
                    st["max"] = max(st["max"], violation)
                    print(f"    VIOLATION {kind}/{carry} by {violation:.3g}: {config}", file=sys.stderr)
                else:
                    st["closest"] = min(st["closest"], -violation)
            rows.append(
                [
                    kind,
                    carry,
                    st["configs"],
                    st["traj"],
                    st["violations"],
                    f"{st['max']:.3g}",
                    f"{st['closest']:.2g}",
                    st["failed"],
                    ", ".join(sorted(losses)),
                    f"{time.perf_counter() - t0:.0f}",
                ]
            )
            print(f"{kind}/{carry} done ({time.perf_counter() - start:.0f} s)", file=sys.stderr, flush=True)
    print(
        format_table(
            [
                "perturbation",
                "carry",
                "configs",
                "trajectories",
                "violations",
                "max violation",
                "closest margin",
                "overflowed",
                "losses",
                "seconds",
            ],
            rows,
            title=(
                f"MIBP recipe soundness sweep: {args.configs} random recipes per perturbation type and carry "
                f"(losses, schedules, mini-batches, momentum, weight decay, L1, clipping, targeted flips, "
                f"target boxes, chunk sizes 1-3 and automatic), attack {args.restarts}x"
                f"{args.steps}, seed {args.seed} ({time.perf_counter() - start:.0f} s in all)"
            ),
        )
    )


if __name__ == "__main__":
    main()
