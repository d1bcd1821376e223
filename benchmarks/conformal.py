"""Benchmark: RCP1 (one noisy pass per input) against BinCP, RSCP+ and vanilla split CP on digits.

For each smoothing level sigma in {0.12, 0.25, 0.5} a small torch MLP is trained on scikit-learn's digits
(8x8, scaled to [0, 1]) with Gaussian noise augmentation of that sigma.  For each certified l2 radius
r in {sigma/4, sigma} the 997 held-out images are attacked once with smoothed PGD (20 steps, 16 noise
draws per step), then split at random into 600 calibration / 397 test images (5 splits, averaged).
Reported per method: set size and coverage on clean and attacked test images, forward passes and wall
time per test input, and the ratios of RCP1 to each baseline measured in this same run.

Run: ``python benchmarks/conformal.py``  (about two minutes on two CPU cores).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

from certkit._results import format_table
from certkit.conformal import (
    BinCPClassifier,
    RCP1Classifier,
    RSCPPlusClassifier,
    SplitConformalClassifier,
    evaluate_sets,
)
from certkit.conformal.attacks import smoothed_pgd
from certkit.datasets import load_digits

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from conformal_digits import train_mlp

LEVEL = 0.9
N_SPLITS = 5
N_CAL = 600


def methods(net, sigma: float, radius: float, rng: np.random.Generator) -> dict:
    common = {"confidence_level": LEVEL, "output": "logits", "rng": rng}
    smooth = {"sigma": sigma, "radius": radius, **common}
    return {
        "vanilla (clean)": SplitConformalClassifier(net, **common),
        "noisy CP (uncorr.)": SplitConformalClassifier(net, noise="gaussian", sigma=sigma, **common),
        "RCP1": RCP1Classifier(net, **smooth),
        "BinCP m=32": BinCPClassifier(net, n_samples=32, **smooth),
        "BinCP m=64": BinCPClassifier(net, n_samples=64, **smooth),
        "BinCP m=150": BinCPClassifier(net, n_samples=150, **smooth),
        "RSCP+ n_s=256": RSCPPlusClassifier(net, n_samples=256, **smooth),
    }


def main() -> None:
    start_all = time.perf_counter()
    rng = np.random.default_rng(0)
    data = load_digits()
    perm = rng.permutation(len(data.y))
    train, held = perm[:800], perm[800:]
    rows, ratio_rows = [], []
    for sigma in (0.12, 0.25, 0.5):
        net = train_mlp(data.X[train], data.y[train], sigma=sigma, seed=0)
        for radius in (sigma / 4, sigma):
            X, y = data.X[held], data.y[held]
            X_att = smoothed_pgd(net, X, y, radius, sigma, steps=20, n_noise=16, output="logits", rng=rng)
            acc: dict[str, list] = {}
            for _ in range(N_SPLITS):
                order = rng.permutation(len(y))
                cal, test = order[:N_CAL], order[N_CAL:]
                for name, est in methods(net, sigma, radius, rng).items():
                    est.calibrate(X[cal], y[cal])
                    res = evaluate_sets(est, X[test], y[test], X_attacked=X_att[test], method=name)
                    acc.setdefault(name, []).append(res.row()[1:])
            means = {name: np.mean(vals, axis=0) for name, vals in acc.items()}
            for name, m in means.items():
                rows.append([sigma, round(radius, 4), name, *m])
            r1 = means["RCP1"]
            for name, m in means.items():
                if name.startswith(("BinCP", "RSCP")):
                    # size ratio (RCP1 / baseline), passes and time ratios (baseline / RCP1)
                    ratio_rows.append(
                        [
                            sigma,
                            round(radius, 4),
                            f"RCP1 vs {name}",
                            r1[0] / m[0],
                            r1[2] / m[2],
                            m[4] / r1[4],
                            m[5] / r1[5],
                        ]
                    )
    headers = (
        "sigma",
        "r",
        "method",
        "size",
        "coverage",
        "size (att.)",
        "cov. (att.)",
        "passes/input",
        "ms/input",
    )
    print(
        format_table(
            headers,
            rows,
            title=f"digits, target coverage {LEVEL} under l2 attack of radius r "
            f"(smoothed PGD), mean of {N_SPLITS} calibration/test splits "
            f"({N_CAL} / {len(held) - N_CAL})",
        )
    )
    print()
    print(
        format_table(
            ("sigma", "r", "comparison", "size ratio", "size ratio (att.)", "passes saved x", "speed-up x"),
            ratio_rows,
            title="ratios measured in this run: size = RCP1 / baseline (< 1: RCP1 smaller); "
            "passes and speed-up = baseline / RCP1",
        )
    )
    print(f"\ntotal {time.perf_counter() - start_all:.0f} s")


if __name__ == "__main__":
    main()
