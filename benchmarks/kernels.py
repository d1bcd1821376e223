"""Benchmark of the compiled kernels against the best vectorised NumPy versions.

Setting of issue 2: B = 10,000 subsamples of m = 100 out of n = 1,000 examples, N = 512 components,
top-k with k = 50.  Every time is the best of ``--repeats`` runs measured in this process.

NumPy baselines for the votes get the kernel's own subsample indices for free (their generation is not
timed), so that their counts can be checked against the kernel's; three formulations are timed and the
fastest is the reference of the ratio:

* ``matmul``: per chunk of subsamples, a (chunk, n) count matrix (bincount) times the score matrix (BLAS);
* ``gather``: ``scores[idx].sum(axis=1)`` per chunk;
* ``row loop``: ``acc += scores[idx[:, i]]`` for i < m per chunk (the kernel's summation order);
each followed by ``argpartition`` per row.  BLAS is limited to one thread for the one-thread comparison
(threadpoolctl) and left at its default for the other column.

Run: ``python benchmarks/kernels.py [--repeats 5]``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import numpy as np
from _timing import best_time
from threadpoolctl import threadpool_info, threadpool_limits

from certkit import _core
from certkit._results import format_table

N_EXAMPLES, SUBSAMPLE, N_SUBSAMPLES, N_COMPONENTS, TOP_K = 1000, 100, 10_000, 512, 50
DELETION_PROB = 0.9
SEED = 1


def _top_k_counts(means: np.ndarray, k: int, counts: np.ndarray) -> None:
    top = np.argpartition(means, means.shape[1] - k, axis=1)[:, -k:]
    counts += np.bincount(top.ravel(), minlength=means.shape[1])


def numpy_votes_matmul(scores: np.ndarray, idx: np.ndarray, k: int, chunk: int = 250) -> np.ndarray:
    n, n_comp = scores.shape
    counts = np.zeros(n_comp, dtype=np.int64)
    for start in range(0, idx.shape[0], chunk):
        block = idx[start : start + chunk]
        rows = block.shape[0]
        flat = (np.arange(rows)[:, None] * n + block).ravel()
        weights = np.bincount(flat, minlength=rows * n).reshape(rows, n).astype(np.float64)
        _top_k_counts((weights @ scores) / idx.shape[1], k, counts)
    return counts


def numpy_votes_gather(scores: np.ndarray, idx: np.ndarray, k: int, chunk: int = 16) -> np.ndarray:
    counts = np.zeros(scores.shape[1], dtype=np.int64)
    for start in range(0, idx.shape[0], chunk):
        _top_k_counts(scores[idx[start : start + chunk]].sum(axis=1) / idx.shape[1], k, counts)
    return counts


def numpy_votes_row_loop(scores: np.ndarray, idx: np.ndarray, k: int, chunk: int = 1000) -> np.ndarray:
    counts = np.zeros(scores.shape[1], dtype=np.int64)
    for start in range(0, idx.shape[0], chunk):
        block = idx[start : start + chunk]
        acc = np.zeros((block.shape[0], scores.shape[1]))
        for i in range(block.shape[1]):
            acc += scores[block[:, i]]
        _top_k_counts(acc / block.shape[1], k, counts)
    return counts


def numpy_indices_argpartition(rng: np.random.Generator, n: int, m: int, n_sub: int) -> np.ndarray:
    return np.argpartition(rng.random((n_sub, n)), m, axis=1)[:, :m]


def numpy_indices_permuted(rng: np.random.Generator, n: int, m: int, n_sub: int) -> np.ndarray:
    return rng.permuted(np.tile(np.arange(n), (n_sub, 1)), axis=1)[:, :m]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per entry (best is kept)")
    args = parser.parse_args(argv)
    reps = args.repeats

    rng = np.random.default_rng(0)
    scores = rng.normal(size=(N_EXAMPLES, N_COMPONENTS))
    blas_threads = max((p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"), default=1)
    print(
        f"B={N_SUBSAMPLES:,} subsamples, n={N_EXAMPLES:,}, m={SUBSAMPLE}, N={N_COMPONENTS}, top-k k={TOP_K}; "
        f"best of {reps}; BLAS default threads = {blas_threads}"
    )

    rows = []

    # -- votes.subsample ----------------------------------------------------------------------------
    def kernel_votes(n_threads: int) -> Callable[[], np.ndarray]:
        return lambda: _core.votes.subsample(
            scores, m=SUBSAMPLE, n_subsamples=N_SUBSAMPLES, top_k=TOP_K, seed=SEED, n_threads=n_threads
        )

    t_k1, counts = best_time(kernel_votes(1), reps)
    t_k2, counts2 = best_time(kernel_votes(2), reps)
    assert np.array_equal(counts, counts2)
    idx = _core.subsample.indices(N_EXAMPLES, SUBSAMPLE, N_SUBSAMPLES, seed=SEED)
    baselines = {
        "matmul": numpy_votes_matmul,
        "gather": numpy_votes_gather,
        "row loop": numpy_votes_row_loop,
    }
    timings = {}
    for name, fn in baselines.items():
        with threadpool_limits(1, user_api="blas"):
            t_one, out = best_time(lambda fn=fn: fn(scores, idx, TOP_K), reps)
        t_default, _ = best_time(lambda fn=fn: fn(scores, idx, TOP_K), reps)
        timings[name] = (t_one, t_default, bool(np.array_equal(out, counts)))
    for name, (t_one, t_default, same) in timings.items():
        print(
            f"  numpy votes [{name:8s}]: {t_one:.3f} s (1 BLAS thread), {t_default:.3f} s (default); "
            f"counts equal kernel's: {same}"
        )
    best_one = min(timings, key=lambda key: timings[key][0])
    best_default = min(timings, key=lambda key: timings[key][1])
    t_np1, t_npd = timings[best_one][0], timings[best_default][1]
    rows.append(
        [
            f"votes.subsample (numpy: {best_one} / {best_default})",
            t_k1,
            t_k2,
            t_np1,
            t_npd,
            f"{t_np1 / t_k1:.1f}x",
            f"{t_npd / t_k2:.1f}x",
        ]
    )

    # end to end: numpy also draws its own subsamples (fastest way found below), then the fastest votes
    gen = np.random.default_rng(SEED)
    fastest = baselines[best_one]

    def numpy_end_to_end() -> np.ndarray:
        own = numpy_indices_argpartition(gen, N_EXAMPLES, SUBSAMPLE, N_SUBSAMPLES)
        return fastest(scores, own, TOP_K)

    with threadpool_limits(1, user_api="blas"):
        t_e2e, _ = best_time(numpy_end_to_end, reps)
    rows.append(
        [
            f"votes.subsample incl. drawing (numpy: argpartition + {best_one})",
            t_k1,
            t_k2,
            t_e2e,
            "-",
            f"{t_e2e / t_k1:.1f}x",
            "-",
        ]
    )

    # -- subsample.indices ----------------------------------------------------------------------------
    t_idx, _ = best_time(
        lambda: _core.subsample.indices(N_EXAMPLES, SUBSAMPLE, N_SUBSAMPLES, seed=SEED), reps
    )
    t_arg, _ = best_time(lambda: numpy_indices_argpartition(gen, N_EXAMPLES, SUBSAMPLE, N_SUBSAMPLES), reps)
    t_perm, _ = best_time(lambda: numpy_indices_permuted(gen, N_EXAMPLES, SUBSAMPLE, N_SUBSAMPLES), reps)
    name, t_np = ("argpartition", t_arg) if t_arg <= t_perm else ("permuted", t_perm)
    rows.append(
        [
            f"subsample.indices, no replacement (numpy: {name})",
            t_idx,
            "-",
            t_np,
            "-",
            f"{t_np / t_idx:.1f}x",
            "-",
        ]
    )

    t_idx, _ = best_time(
        lambda: _core.subsample.indices(N_EXAMPLES, SUBSAMPLE, N_SUBSAMPLES, replacement=True, seed=SEED),
        reps,
    )
    t_np, _ = best_time(lambda: gen.integers(0, N_EXAMPLES, size=(N_SUBSAMPLES, SUBSAMPLE)), reps)
    rows.append(
        [
            "subsample.indices, replacement (numpy: integers)",
            t_idx,
            "-",
            t_np,
            "-",
            f"{t_np / t_idx:.1f}x",
            "-",
        ]
    )

    # -- subsample.deletion_masks ------------------------------------------------------------------
    t_mask, _ = best_time(
        lambda: _core.subsample.deletion_masks(
            N_EXAMPLES, N_SUBSAMPLES, deletion_prob=DELETION_PROB, seed=SEED
        ),
        reps,
    )
    keep = 1.0 - DELETION_PROB
    t_np, _ = best_time(lambda: gen.random((N_SUBSAMPLES, N_EXAMPLES)) < keep, reps)
    rows.append(
        [
            f"subsample.deletion_masks, delete {DELETION_PROB} (numpy: random < 1 - p)",
            t_mask,
            "-",
            t_np,
            "-",
            f"{t_np / t_mask:.1f}x",
            "-",
        ]
    )

    print()
    print(
        format_table(
            [
                "kernel",
                "certkit 1 thr [s]",
                "certkit 2 thr [s]",
                "numpy 1 BLAS thr [s]",
                f"numpy {blas_threads} BLAS thr [s]",
                "ratio 1 thr",
                "ratio 2 thr",
            ],
            rows,
            title="certkit._core vs best vectorised NumPy (ratio = numpy time / certkit time)",
        )
    )
    print(
        "\nThe first row gives the numpy vote baselines the kernel's subsample indices (not timed);\n"
        "certkit's times always include drawing them (second row: numpy draws its own).\n"
        "The machine is shared, so absolute times are noisy; the ratios are from the same run."
    )


if __name__ == "__main__":
    main()
