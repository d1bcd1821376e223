"""Benchmark of certkit.circuits.

1. Subsamples per second of the certificate for a top-k rule over a per-example score matrix:
   the ScoreRule path (C++ kernel ``_core.votes.subsample``, 1 and 2 threads) against a pure-NumPy loop
   over subsamples, the best vectorised NumPy (batched gather + argpartition), and the black-box
   path (a Python callable per subsample).  Target: 10,000 subsamples x 512 neurons certified
   (votes, Clopper–Pearson bounds and radii) in under 2 s.
2. The accuracy / compactness table of ``examples/circuits_digits.py`` (skip with ``--no-example``).
3. Where discovery is unstable (``examples/circuits_stability.py``; skip with ``--no-stability``): a
   256-channel CNN on Fashion-MNIST, concept sets of 32 images, 10 classes x 5 seeds: circuit size,
   clean and shifted accuracy of the circuit alone and Jaccard stability for plain, smoothed and
   certified (r = 1, 2, 5) circuits, means with 95% intervals; saves ``circuits_stability.png`` and
   the per-unit records ``circuits_stability.json``.  Needs the Debian package
   ``dataset-fashion-mnist`` (skipped with a message otherwise); 45 min measured on one shared core.
4. Edge circuits (``examples/circuits_edges.py``): a 2-layer attention-only transformer on an
   IOI-style task, 5 seeds: size, faithfulness, accuracy and stability of plain, smoothed and
   certified edge circuits.

Run: ``python benchmarks/circuits.py``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from _timing import best_time

from certkit._results import format_table
from certkit.circuits import ScoreRule, certify_circuit

N_EXAMPLES, N_NEURONS, M, TOP_K = 1000, 512, 100, 32


def numpy_loop(scores: np.ndarray, idx: np.ndarray, k: int) -> np.ndarray:
    """One subsample at a time (the straightforward Python implementation)."""
    counts = np.zeros(scores.shape[1], dtype=np.int64)
    for row in idx:
        mean = scores[row].mean(axis=0)
        counts[np.argpartition(-mean, k - 1)[:k]] += 1
    return counts


def numpy_batched(scores: np.ndarray, idx: np.ndarray, k: int, batch: int = 16) -> np.ndarray:
    """Vectorised over batches of subsamples: gather (batch, m, N), mean, argpartition per row."""
    counts = np.zeros(scores.shape[1], dtype=np.int64)
    for start in range(0, idx.shape[0], batch):
        means = scores[idx[start : start + batch]].mean(axis=1)
        top = np.argpartition(-means, k - 1, axis=1)[:, :k]
        counts += np.bincount(top.ravel(), minlength=scores.shape[1])
    return counts


class TopKMean:
    """The same rule as a black-box callable."""

    def __init__(self, k: int) -> None:
        self.k = k

    def __call__(self, X: np.ndarray) -> np.ndarray:
        mean = X.mean(axis=0)
        mask = np.zeros(mean.size, dtype=bool)
        mask[np.argpartition(-mean, self.k - 1)[: self.k]] = True
        return mask


def throughput_table(n_subsamples: int = 10_000) -> str:
    from certkit import _core

    rng = np.random.default_rng(0)
    scores = rng.normal(size=(N_EXAMPLES, N_NEURONS)) + np.linspace(0, 1, N_NEURONS)
    rule = ScoreRule(scores, top_k=TOP_K)
    idx = _core.subsample.indices(N_EXAMPLES, M, n_subsamples, seed=1)
    rows = []

    t_loop_small, _ = best_time(lambda: numpy_loop(scores, idx[:1000], TOP_K), repeats=1)
    t_loop = t_loop_small * n_subsamples / 1000  # extrapolated from 1,000 subsamples
    rows.append(["NumPy loop (baseline, from 1k)", t_loop, n_subsamples / t_loop, 1.0])
    t_batch, _ = best_time(lambda: numpy_batched(scores, idx, TOP_K))
    rows.append(["NumPy batched", t_batch, n_subsamples / t_batch, t_loop / t_batch])
    for threads in (1, 2):
        t_kernel, res = best_time(  # best of 3
            lambda threads=threads: certify_circuit(
                rule, subsample_size=M, n_subsamples=n_subsamples, rng=0, n_threads=threads
            )
        )
        rows.append(
            [
                f"certify_circuit ScoreRule, {threads} thread(s)",
                t_kernel,
                n_subsamples / t_kernel,
                t_loop / t_kernel,
            ]
        )
    n_bb = 1000
    t_bb, _ = best_time(
        lambda: certify_circuit(
            TopKMean(TOP_K), scores, subsample_size=M, n_subsamples=n_bb, rng=0, progress=False
        ),
        repeats=1,
    )
    t_bb_full = t_bb * n_subsamples / n_bb
    rows.append(
        ["certify_circuit black box (from 1k)", t_bb_full, n_subsamples / t_bb_full, t_loop / t_bb_full]
    )
    title = (
        f"{n_subsamples:,} subsamples (m = {M} of n = {N_EXAMPLES}) x {N_NEURONS} neurons, top-{TOP_K}; "
        f"ratios vs the NumPy loop ({res.included.sum()} certified included at r = 1)"
    )
    return format_table(["method", "seconds", "subsamples / s", "speed-up"], rows, title=title)


def stability_study(n_seeds: int, plot_path: str | None) -> str:
    """Section 3: 10 Fashion-MNIST classes x ``n_seeds`` models (one seed = one trained CNN)."""
    import json

    import circuits_stability

    from certkit.datasets import FASHION_MNIST_PATH

    if not (Path(FASHION_MNIST_PATH) / "train-images-idx3-ubyte.gz").is_file():
        return (
            f"stability study skipped: Fashion-MNIST is not installed at {FASHION_MNIST_PATH} "
            "(apt-get install dataset-fashion-mnist)"
        )
    start = time.perf_counter()
    records = []
    for seed in range(n_seeds):
        records += circuits_stability.run_seed(seed, log=lambda msg: print(msg, file=sys.stderr, flush=True))
    if plot_path:
        circuits_stability.plot(records, plot_path)
        Path(plot_path).with_suffix(".json").write_text(json.dumps(records, indent=1))
    return (
        circuits_stability.summary_tables(records)
        + f"\n({time.perf_counter() - start:.0f} s on a CPU core shared with other jobs)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description="certkit.circuits benchmark")
    parser.add_argument("--n-subsamples", type=int, default=10_000)
    parser.add_argument("--no-example", action="store_true", help="skip the digits accuracy table")
    parser.add_argument("--no-stability", action="store_true", help="skip the Fashion-MNIST stability study")
    parser.add_argument("--no-edges", action="store_true", help="skip the edge-circuit table")
    parser.add_argument("--no-throughput", action="store_true", help="skip the kernel throughput table")
    parser.add_argument("--seeds", type=int, default=5, help="seeds of the stability and edge studies")
    parser.add_argument("--plot", default="circuits_stability.png", help="figure of the stability study")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
    if not args.no_throughput:
        print(throughput_table(args.n_subsamples))
    if not args.no_stability:
        print()
        print(stability_study(args.seeds, args.plot))
    if not args.no_edges:
        import circuits_edges

        start = time.perf_counter()
        records = [rec for seed in range(args.seeds) for rec in circuits_edges.run_seed(seed)]
        print()
        print(circuits_edges.table(records))
        print(f"({time.perf_counter() - start:.0f} s)")
    if not args.no_example:
        import circuits_digits

        start = time.perf_counter()
        headers, rows = circuits_digits.run(plot_path=None)
        print()
        print(
            format_table(
                headers,
                rows,
                title="Digits CNN: concept-class accuracy with non-circuit channels "
                "mean-ablated, and circuit size (mean over digits)",
            )
        )
        print(f"({time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    main()
