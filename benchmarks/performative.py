"""Benchmark: closed forms and 1-D duals of the Wasserstein risks against the cvxpy programs.

For n in {100, 1000, 10^4} (d = 10, Gaussian features, random labels and model, radius 0.3) each exact route
of `wasserstein_risk` is compared with the cvxpy program on the same problem: the finite-support LP (HiGHS)
for ``sup`` of the piecewise-linear losses and the conic program over shifts (Clarabel) for ``inf``. Reported:
the absolute difference (the programs' raw values, no padding), the wall times and their ratio (program time /
exact-route time, measured in this run). Then the closed forms alone at n = 10^6.

Run: ``python benchmarks/performative.py``  (a few minutes on two shared CPU cores, dominated by the n = 10^4
programs; ``--quick`` stops at n = 1000).
"""

from __future__ import annotations

import sys
from functools import partial

import numpy as np
from _timing import best_time

from certkit._results import format_table
from certkit.performative import wasserstein_risk
from certkit.performative.lp import lp_risk

RADIUS = 0.3
D = 10
# (loss, p, direction, exact method): every exact route that has a cvxpy counterpart
CASES = [
    ("linear", 1, "sup", "closed_form"),
    ("hinge", 1, "sup", "closed_form"),
    ("hinge", 2, "sup", "closed_form"),
    ("hinge", 2, "sup", "dual"),
    ("hinge", 1, "inf", "closed_form"),
    ("hinge", 2, "inf", "closed_form"),
    ("hinge", 2, "inf", "dual"),
    ("logistic", 1, "inf", "closed_form"),
    ("logistic", 2, "inf", "dual"),
    ("squared", 2, "inf", "closed_form"),
]


def problem(n: int, seed: int, squared: bool = False):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, D))
    theta = rng.normal(size=D) / np.sqrt(D)
    y = X @ theta + rng.normal(size=n) if squared else np.where(rng.random(n) < 0.5, -1.0, 1.0)
    return theta, X, y


def compare(sizes: list[int]) -> list[list]:
    rows = []
    for n in sizes:
        lp_cache: dict = {}
        for loss, p, direction, method in CASES:
            theta, X, y = problem(n, seed=n, squared=loss == "squared")
            args = {"loss": loss, "radius": RADIUS, "p": p, "direction": direction}
            t_exact, value = best_time(
                partial(wasserstein_risk, theta, X, y, method=method, **args), repeats=5
            )
            key = (loss, p, direction)
            if key not in lp_cache:
                solve = partial(lp_risk, theta, X, y, loss, RADIUS, float(p), 2.0, direction, pad=False)
                lp_cache[key] = best_time(solve, repeats=1)
            t_lp, lp_value = lp_cache[key]
            program = "LP" if direction == "sup" else "conic"
            rows.append(
                [
                    n,
                    f"{loss} W{p} {direction}",
                    method,
                    program,
                    abs(value - lp_value),
                    t_exact,
                    t_lp,
                    t_lp / t_exact,
                ]
            )
            print(f"  n={n} {loss} W{p} {direction} {method}: done", file=sys.stderr)
    return rows


def closed_forms_at_scale(n: int) -> list[list]:
    rows = []
    for loss, p, direction in [
        ("linear", 2, "sup"),
        ("hinge", 1, "sup"),
        ("hinge", 2, "sup"),
        ("hinge", 2, "inf"),
        ("logistic", 1, "sup"),
        ("logistic", 1, "inf"),
        ("squared", 2, "sup"),
    ]:
        theta, X, y = problem(n, seed=1, squared=loss == "squared")
        solve = partial(wasserstein_risk, theta, X, y, loss=loss, radius=RADIUS, p=p, direction=direction)
        t, value = best_time(solve, repeats=3)
        rows.append([n, f"{loss} W{p} {direction}", value, t])
    return rows


def main(argv: list[str]) -> int:
    quick = "--quick" in argv
    sizes = [100, 1000] if quick else [100, 1000, 10_000]
    rows = compare(sizes)
    print(
        format_table(
            ["n", "functional", "exact route", "program", "|diff|", "exact s", "program s", "speed-up"],
            rows,
            title="exact routes vs cvxpy programs (same problems, one run)",
        )
    )
    at_1000 = [r[-1] for r in rows if r[0] == 1000 and r[2] == "closed_form"]
    print(
        f"\nclosed forms at n = 1000: speed-up over the programs {min(at_1000):.0f}x (min) "
        f"to {max(at_1000):.0f}x (max); largest |diff| over all rows {max(r[4] for r in rows):.2e}"
    )
    if not quick:
        print()
        print(
            format_table(
                ["n", "functional", "value", "seconds"],
                closed_forms_at_scale(1_000_000),
                title="closed forms alone",
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
