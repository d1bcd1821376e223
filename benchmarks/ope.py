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
import time  # noqa: E402

import numpy as np  # noqa: E402
from _timing import best_time  # noqa: E402

from certkit._results import format_table  # noqa: E402
from certkit.ope import (  # noqa: E402
    LinearThresholdPolicy,
    LogNormalCostResponse,
    StrategicSimulator,
    direct_method,
    naive_dr,
    naive_ipw,
    strategic_dr,
    strategic_ipw,
)

SIM = StrategicSimulator()
PI0 = LinearThresholdPolicy([1.0, 1.0], 1.0, temperature=1.0)
PI = LinearThresholdPolicy([1.0, 0.0], 1.0, temperature=0.25)
ESTIMATORS = ("strategic DR", "strategic IPW", "direct method", "naive DR", "naive IPW")


def one_replication(n: int, seed: int) -> np.ndarray:
    """(value, std_error) of every estimator on one logged data set, shape (5, 2)."""
    data = SIM.sample(PI0, n, rng=seed)
    resp = LogNormalCostResponse().fit(data, policy=PI0)
    kw = dict(target_policy=PI, logging_policy=PI0)
    results = (
        strategic_dr(data, response=resp, **kw),
        strategic_ipw(data, response=resp, **kw),
        direct_method(data, response=resp, **kw),
        naive_dr(data, **kw),
        naive_ipw(data, **kw),
    )
    return np.array([[r.value, r.std_error] for r in results])


def accuracy_table(replications: int, truth: float) -> str:
    rows, ratios = [], []
    for n in (500, 2000, 8000):
        start = time.perf_counter()
        out = np.array([one_replication(n, 1_000_000 * n + r) for r in range(replications)])
        elapsed = time.perf_counter() - start
        values, ses = out[:, :, 0], out[:, :, 1]
        bias = values.mean(axis=0) - truth
        rmse = np.sqrt(np.mean((values - truth) ** 2, axis=0))
        cover = np.mean(np.abs(values - truth) <= 1.959963984540054 * ses, axis=0)
        for j, name in enumerate(ESTIMATORS):
            rows.append([n, name, bias[j], values[:, j].std(ddof=1) / np.sqrt(replications), rmse[j], cover[j]])
        ratios.append([n, abs(bias[3]) / max(abs(bias[0]), 1e-12), rmse[3] / rmse[0], f"{elapsed:.0f} s"])
    out = format_table(
        ["n", "estimator", "bias", "MC s.e. of bias", "RMSE", "95% CI coverage"], rows,
        title=f"Accuracy over {replications} replications (true value {truth:.4f})",
    )
    out += "\n\n" + format_table(
        ["n", "|bias| naive DR / strategic DR", "RMSE naive DR / strategic DR", "wall time"], ratios,
        title="Strategic DR vs the naive-DR baseline",
    )
    return out


def bootstrap_table(replications: int, b: int, truth: float, n: int = 2000) -> str:
    normal, pct, ratio = 0, 0, []
    start = time.perf_counter()
    for r in range(replications):
        data = SIM.sample(PI0, n, rng=7_000_000 + r)
        resp = LogNormalCostResponse().fit(data, policy=PI0)
        res = strategic_dr(data, target_policy=PI, logging_policy=PI0, response=resp, bootstrap=b, rng=r)
        lo, hi = res.confidence_interval(0.95)
        normal += lo <= truth <= hi
        lo, hi = res.confidence_interval(0.95, method="percentile")
        pct += lo <= truth <= hi
        ratio.append(res.bootstrap_std_error / res.std_error)
    elapsed = time.perf_counter() - start
    rows = [
        ["influence function (normal)", normal / replications],
        [f"bootstrap percentile (B = {b})", pct / replications],
        ["mean bootstrap s.e. / IF s.e.", float(np.mean(ratio))],
    ]
    return format_table(["strategic DR interval", "value"], rows,
                        title=f"Bootstrap vs IF intervals at n = {n}, {replications} replications ({elapsed:.0f} s)")


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
    return format_table(["n = 10^6, one core", "seconds", ""], rows,
                        title=f"Wall time (strategic DR = {res.value:.4f} ± {res.std_error:.4f})")


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
