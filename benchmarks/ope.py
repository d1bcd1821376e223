"""Benchmark of certkit.ope.

1. Bias, RMSE and 95% CI coverage of every estimator over R replications (default 1,000) at
   n ∈ {500, 2000, 8000} logged agents, on the default `StrategicSimulator` with a logging threshold
   (θ = (1, 1), τ = 1, T = 1) and a target (θ = (1, 0), τ = 1, T = 0.25). The baseline to beat is naive DR,
   which ignores the strategic response; ratios |bias| and RMSE of strategic DR vs naive DR are printed.
2. Coverage of bootstrap percentile intervals (response and outcome models refitted on each replicate) at
   n = 2000 over fewer replications (default 200 × B = 100).
3. Wall time of strategic DR with the response fit at n = 10⁶ logged rows on one core (target < 5 s), against
   naive DR at the same n.

Run: ``python benchmarks/ope.py`` (``--replications``, ``--boot-replications``, ``--boot-b`` to shorten).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
from _timing import best_time  # noqa: E402

from certkit._results import format_table  # noqa: E402
from certkit.ope import LogNormalCostResponse, naive_dr, strategic_dr  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from ope_strategic import ESTIMATORS, PI, PI0, SIM, SIZES, metrics, replicate  # noqa: E402


def accuracy_table(replications: int, truth: float) -> str:
    rows, ratios = [], []
    for n in SIZES:
        start = time.perf_counter()
        m = metrics(*replicate(n, replications), truth)
        elapsed = time.perf_counter() - start
        for j, name in enumerate(ESTIMATORS):
            rows.append([n, name, m["bias"][j], m["mc_se"][j], m["rmse"][j], m["coverage"][j]])
        ratios.append(
            [
                n,
                abs(m["bias"][3]) / max(abs(m["bias"][0]), 1e-12),
                m["rmse"][3] / m["rmse"][0],
                m["failed"],
                f"{elapsed:.0f} s",
            ]
        )
    out = format_table(
        ["n", "estimator", "bias", "MC s.e. of bias", "RMSE", "95% CI coverage"],
        rows,
        title=f"Accuracy over {replications} replications (true value {truth:.4f})",
    )
    out += "\n\n" + format_table(
        [
            "n",
            "|bias| naive / strategic DR",
            "RMSE naive / strategic DR",
            "failed response fits",
            "wall time",
        ],
        ratios,
        title="Strategic DR vs the naive-DR baseline",
    )
    return out


def bootstrap_table(replications: int, b: int, truth: float, n: int = 2000) -> str:
    normal, pct, ratio, failures = 0, 0, [], 0
    start = time.perf_counter()
    for r in range(replications):
        data = SIM.sample(PI0, n, rng=7_000_000 + r)
        resp = LogNormalCostResponse().fit(data, policy=PI0)  # n = 2000: every fit succeeds in practice
        # (a bootstrap resample can still fail to identify the response; such replicates are left out)
        res = strategic_dr(data, target_policy=PI, logging_policy=PI0, response=resp, bootstrap=b, rng=r)
        lo, hi = res.confidence_interval(0.95)
        normal += lo <= truth <= hi
        lo, hi = res.confidence_interval(0.95, method="percentile")
        pct += lo <= truth <= hi
        ratio.append(res.bootstrap_std_error / res.std_error)
        failures += res.bootstrap_failures
    elapsed = time.perf_counter() - start
    rows = [
        ["influence function (normal)", normal / replications],
        [f"bootstrap percentile (B = {b})", pct / replications],
        ["mean bootstrap s.e. / IF s.e.", float(np.mean(ratio))],
        ["bootstrap replicates left out (response refit failed)", failures],
    ]
    title = f"Bootstrap vs IF intervals at n = {n}, {replications} replications ({elapsed:.0f} s)"
    return format_table(["strategic DR interval", "value"], rows, title=title)


def timing_table(n: int = 1_000_000) -> str:
    data = SIM.sample(PI0, n, rng=0)

    def strategic():
        resp = LogNormalCostResponse().fit(data, policy=PI0)
        return strategic_dr(data, target_policy=PI, logging_policy=PI0, response=resp)

    def naive():
        return naive_dr(data, target_policy=PI, logging_policy=PI0)

    t_fit, _ = best_time(lambda: LogNormalCostResponse().fit(data, policy=PI0), repeats=2)
    t_s, res = best_time(strategic, repeats=2)
    t_n, _ = best_time(naive, repeats=2)
    rows = [
        ["response fit (probit MLE)", t_fit, ""],
        ["strategic DR incl. response fit", t_s, "target < 5 s"],
        ["naive DR (baseline)", t_n, f"strategic / naive = {t_s / t_n:.2f}"],
    ]
    return format_table(
        ["n = 10^6, one core", "seconds", ""],
        rows,
        title=f"Wall time (strategic DR = {res.value:.4f} ± {res.std_error:.4f})",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replications", type=int, default=1000)
    parser.add_argument("--boot-replications", type=int, default=200)
    parser.add_argument("--boot-b", type=int, default=100)
    parser.add_argument("--skip", action="append", default=[], choices=("accuracy", "bootstrap", "timing"))
    args = parser.parse_args()
    truth = SIM.true_value(PI, n_mc=4_000_000)
    if "timing" not in args.skip:
        print(timing_table(), "\n", flush=True)
    if "accuracy" not in args.skip:
        print(accuracy_table(args.replications, truth), "\n", flush=True)
    if "bootstrap" not in args.skip:
        print(bootstrap_table(args.boot_replications, args.boot_b, truth), flush=True)


if __name__ == "__main__":
    main()
