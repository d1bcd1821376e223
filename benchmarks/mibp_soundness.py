"""Soundness sweep of MIBP certified training: random tiny configurations, every backend × formulation ×
perturbation type, each result attacked by projected gradient ascent through the unrolled training
(`certkit.mibp._attack.attack_violation`) and by vertex/uniform samples of the perturbation.

Prints, per backend and formulation: runs, trajectories checked, the largest violation found (a number
<= 0 means every trajectory stayed inside its box), runs stopped by the runtime guard
(`UnsoundBoundError`), runs that failed otherwise (licence limit, solver error) and the seconds spent.

    python benchmarks/mibp_soundness.py                     # 20 configurations per perturbation type
    python benchmarks/mibp_soundness.py --configs 60 --restarts 8 --steps 10
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from collections import defaultdict

import numpy as np

from certkit._results import format_table
from certkit.mibp import GurobiLicenseError, UnsoundBoundError, certified_training
from certkit.mibp._attack import PERTURBATION_KINDS, attack_violation, random_case

COMBOS = [
    ("interval", "decomposed"),
    *list(
        itertools.product(["lp", "milp", "scip", "gurobi"], ["joint", "decomposed", "hybrid", "lagrangian"])
    ),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--configs", type=int, default=20, help="configurations per perturbation type (default 20)"
    )
    parser.add_argument("--restarts", type=int, default=6, help="attack restarts per result (default 6)")
    parser.add_argument("--steps", type=int, default=8, help="gradient-ascent steps per restart (default 8)")
    parser.add_argument("--max-hidden", type=int, default=3, help="most hidden units (default 3)")
    parser.add_argument("--max-points", type=int, default=8, help="most training points (default 8)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the configurations (default 0)")
    args = parser.parse_args()

    stats: dict = defaultdict(
        lambda: {"runs": 0, "traj": 0, "worst": -np.inf, "guard": 0, "failed": 0, "s": 0.0}
    )
    gen = np.random.default_rng(args.seed)
    start = time.perf_counter()
    for kind in PERTURBATION_KINDS:
        for _ in range(args.configs):
            config = random_case(gen, kind, max_hidden=args.max_hidden, max_points=args.max_points)
            attack_seed = int(gen.integers(2**31))
            for backend, formulation in COMBOS:
                st = stats[backend, formulation]
                t0 = time.perf_counter()
                try:
                    res = certified_training(**config, backend=backend, formulation=formulation)
                except UnsoundBoundError:
                    st["guard"] += 1
                    continue
                except (GurobiLicenseError, RuntimeError):
                    st["failed"] += 1
                    continue
                finally:
                    st["s"] += time.perf_counter() - t0
                violation, count = attack_violation(
                    res,
                    config["X"],
                    config["y"],
                    config["perturbation"],
                    restarts=args.restarts,
                    steps=args.steps,
                    rng=attack_seed,
                )
                st["runs"] += 1
                st["traj"] += count
                st["worst"] = max(st["worst"], violation)
        print(f"{kind}: done ({time.perf_counter() - start:.0f} s)", file=sys.stderr, flush=True)
    rows = [
        [b, f, s["runs"], s["traj"], f"{s['worst']:.3g}", s["guard"], s["failed"], f"{s['s']:.1f}"]
        for (b, f), s in stats.items()
    ]
    print(
        format_table(
            ["backend", "formulation", "runs", "trajectories", "max violation", "guard", "failed", "seconds"],
            rows,
            title=(
                f"MIBP soundness sweep: {args.configs} configurations × {len(PERTURBATION_KINDS)} "
                f"perturbation types, <= {args.max_hidden} hidden, <= {args.max_points} points, <= 2 epochs "
                f"({time.perf_counter() - start:.0f} s in all)"
            ),
        )
    )


if __name__ == "__main__":
    main()
