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

Machine limit.  The script also measures one core's float64 add peak in the same run: a loop of 12
independent 4-wide vector adds (``vaddpd`` on AVX2 registers: 48 float64 adds per iteration, no loads,
no dependency shorter than 12 instructions, so it runs at the adder throughput) compiled on the fly
with the system C compiler (``cc -O2``, inline assembly on x86-64, vector extensions elsewhere) and
called through ``ctypes`` (which releases the GIL, so two threads run it at once for the two-core
peak).  On CPUs with AVX-512 the 8-wide peak is printed too.  It then prints

* the vote kernel's throughput, B·m·N float64 additions per second (the additions the floating-point
  contract prescribes; selection and drawing are in the time but not in the count), as a fraction of
  the 4-wide add peak (the width the kernel is compiled for), and its two-thread speedup next to the
  peak loop's own two-thread speedup (below 2 when other jobs share the cores);
* the EM kernel's (``mixreg.em``) throughput in float64 vector-lane operations per second, where a
  fused multiply-add counts as one operation (the AVX2 clone fuses them; an FMA takes an adder slot)
  and the count is the model in `em_operations`, as a fraction of the same peak, per pass (a 31-pass
  run minus a 1-pass run); the fixed cost of a call is printed beside it.  EM runs on one thread (it
  has no thread option; the causal search parallelises over candidate sets).  The same for the
  expanded designs of ``mechanism="spline"`` (per parent, centred cubic B-splines at quantile knots
  but the first: p = 7, 10 and 19 columns), with the pass time relative to the linear p = 4 design's,
  and the joint EM (``mixreg.joint_em``) of one latent over three nodes with these designs, with and
  without its tiled Gram accumulation (``tiled=True``, which wide designs use).

Run: ``python benchmarks/kernels.py [--repeats 5]``.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import platform
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable

import numpy as np
from _timing import best_time
from threadpoolctl import threadpool_info, threadpool_limits

from certkit import _core
from certkit._results import format_table

N_EXAMPLES, SUBSAMPLE, N_SUBSAMPLES, N_COMPONENTS, TOP_K = 1000, 100, 10_000, 512, 50
DELETION_PROB = 0.9
SEED = 1
EM_SAMPLES, EM_DIM, EM_COMPONENTS, EM_ITERATIONS = 20_000, 4, 3, 30
#: (parents, interior knots per parent) of the spline designs: p = 1 + parents * (knots + 3).
SPLINE_DESIGNS, SPLINE_PARENTS = ((1, 3), (3, 0), (3, 3)), 3
PEAK_ITERATIONS = 50_000_000

PEAK_SOURCE = r"""
#include <stdint.h>
#if defined(__x86_64__)
#define ADDS(R) \
    "vaddpd %%" R "15,%%" R "0,%%" R "0\n vaddpd %%" R "15,%%" R "1,%%" R "1\n" \
    "vaddpd %%" R "15,%%" R "2,%%" R "2\n vaddpd %%" R "15,%%" R "3,%%" R "3\n" \
    "vaddpd %%" R "15,%%" R "4,%%" R "4\n vaddpd %%" R "15,%%" R "5,%%" R "5\n" \
    "vaddpd %%" R "15,%%" R "6,%%" R "6\n vaddpd %%" R "15,%%" R "7,%%" R "7\n" \
    "vaddpd %%" R "15,%%" R "8,%%" R "8\n vaddpd %%" R "15,%%" R "9,%%" R "9\n" \
    "vaddpd %%" R "15,%%" R "10,%%" R "10\n vaddpd %%" R "15,%%" R "11,%%" R "11\n"
#define CLOBBER "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", \
    "xmm10", "xmm11", "xmm15", "cc"
/* iterations * 48 float64 adds (12 independent 4-wide adds per iteration). */
__attribute__((target("avx2"))) void add_peak4(int64_t iterations) {
    __asm__ volatile("vxorpd %%ymm15,%%ymm15,%%ymm15\n 1:\n" ADDS("ymm") "dec %0\n jnz 1b\n vzeroupper\n"
                     : "+r"(iterations) : : CLOBBER);
}
/* iterations * 96 float64 adds (12 independent 8-wide adds per iteration). */
__attribute__((target("avx512f"))) void add_peak8(int64_t iterations) {
    __asm__ volatile("vxorpd %%zmm15,%%zmm15,%%zmm15\n 1:\n" ADDS("zmm") "dec %0\n jnz 1b\n vzeroupper\n"
                     : "+r"(iterations) : : CLOBBER);
}
int has_avx512(void) { __builtin_cpu_init(); return __builtin_cpu_supports("avx512f"); }
#else
typedef double lanes __attribute__((vector_size(32)));
double sink;
void add_peak4(int64_t iterations) {
    lanes a0 = {0}, a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0, a8 = a0, a9 = a0,
          a10 = a0, a11 = a0, one = a0 + 1e-300;
    for (int64_t i = 0; i < iterations; ++i) {
        a0 += one; a1 += one; a2 += one; a3 += one; a4 += one; a5 += one;
        a6 += one; a7 += one; a8 += one; a9 += one; a10 += one; a11 += one;
    }
    lanes s = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11;
    sink = s[0];
}
void add_peak8(int64_t iterations) { (void)iterations; }
int has_avx512(void) { return 0; }
#endif
"""


def compile_peak() -> ctypes.CDLL:
    """The add-peak loops of PEAK_SOURCE, compiled with the system C compiler into a temporary library."""
    folder = tempfile.mkdtemp(prefix="certkit_peak_")
    source, library = os.path.join(folder, "peak.c"), os.path.join(folder, "peak.so")
    with open(source, "w") as fh:
        fh.write(PEAK_SOURCE)
    subprocess.run([os.environ.get("CC", "cc"), "-O2", "-shared", "-fPIC", source, "-o", library], check=True)
    lib = ctypes.CDLL(library)
    lib.add_peak4.argtypes = lib.add_peak8.argtypes = [ctypes.c_int64]
    return lib


def add_peak(fn: Callable[[int], None], adds_per_iteration: int, threads: int, repeats: int) -> float:
    """Best float64 adds per second of ``fn(PEAK_ITERATIONS)`` run in ``threads`` threads at once."""
    best = np.inf
    for _ in range(repeats):
        workers = [threading.Thread(target=fn, args=(PEAK_ITERATIONS,)) for _ in range(threads)]
        start = time.perf_counter()
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        best = min(best, time.perf_counter() - start)
    return threads * PEAK_ITERATIONS * adds_per_iteration / best


def em_operations(n: int, p: int, k: int, passes: int) -> float:
    """Float64 vector-lane operations of ``passes`` E-step passes of ``mixreg.em`` (an FMA counts as one).

    Per sample and live component: the mean (p FMA), the log-density (3), exp (18: rounding 2,
    reduction 2, degree-13 Horner 13, scaling 1), the posterior sum (1), the responsibility (1) and
    the statistics (L = p(p+1)/2 + p + 2 FMA); per sample: the expanded row (L - 1 products), the
    reciprocal (1) and the log-likelihood (2).  The M-steps (O(K p^3) per pass) are not counted.
    """
    stats = p * (p + 1) // 2 + p + 2
    return float(passes) * n * (k * (p + 3 + 18 + 2 + stats) + stats - 1 + 3)


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

    machine_limit(scores, t_k1, t_k2, reps)

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


def machine_limit(scores: np.ndarray, t_votes1: float, t_votes2: float, reps: int) -> None:
    """Prints the vote and EM kernels' throughput as a fraction of the add peak measured now."""
    lib = compile_peak()
    peak1 = add_peak(lib.add_peak4, 48, 1, reps)
    peak2 = add_peak(lib.add_peak4, 48, 2, reps)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"\nadd peak ({platform.machine()}, 4-wide): {peak1 / 1e9:.2f} G float64 adds/s on one thread, "
        f"{peak2 / 1e9:.2f} G on two ({peak2 / peak1:.2f}x); 1-min load average {load:.2f}"
    )
    if lib.has_avx512():
        peak512 = add_peak(lib.add_peak8, 96, 1, reps)
        print(f"add peak, 8-wide (AVX-512): {peak512 / 1e9:.2f} G float64 adds/s on one thread")
    vote_adds = float(N_SUBSAMPLES) * SUBSAMPLE * N_COMPONENTS
    rate1, rate2 = vote_adds / t_votes1, vote_adds / t_votes2
    print(
        f"votes.subsample: {rate1 / 1e9:.2f} G adds/s = {rate1 / peak1:.0%} of the 1-thread peak; "
        f"2 threads {rate2 / 1e9:.2f} G adds/s = {t_votes1 / t_votes2:.2f}x "
        f"({rate2 / peak2:.0%} of the 2-thread peak)"
    )
    rng = np.random.default_rng(SEED)
    parents = rng.normal(size=(EM_SAMPLES, SPLINE_PARENTS))
    linear = np.column_stack([np.ones(EM_SAMPLES), parents[:, : EM_DIM - 1]])
    group = rng.integers(0, EM_COMPONENTS, size=EM_SAMPLES)
    coef = rng.normal(size=(EM_COMPONENTS, EM_DIM))
    y = np.einsum("ij,ij->i", linear, coef[group]) + 0.3 * rng.normal(size=EM_SAMPLES)
    resp0 = rng.dirichlet(np.ones(EM_COMPONENTS), size=EM_SAMPLES)
    per_pass, ops, t_one, t_em, calls = em_pass_rate(y, linear, resp0, reps)
    print(
        f"mixreg.em (n={EM_SAMPLES:,}, p={EM_DIM}, K={EM_COMPONENTS}): {per_pass * 1e3:.3f} ms per pass = "
        f"{ops / 1e9:.2f} G float64 ops/s = {ops / peak1:.0%} of the 1-thread add peak (one thread); "
        f"fixed cost of a call {t_one * 1e3:.1f} ms ({t_one / t_em:.0%} of a {calls}-pass call)"
    )
    # The spline mechanism's expanded design: per parent, cubic B-splines at quantile knots (the first
    # dropped, the rest centred), the same y and starting responsibilities.
    designs = []
    for n_parents, knots in SPLINE_DESIGNS:
        design = np.column_stack(
            [np.ones(EM_SAMPLES), *(spline_columns(parents[:, i], knots) for i in range(n_parents))]
        )
        spline_pass, spline_ops, _, _, _ = em_pass_rate(y, design, resp0, reps)
        print(
            f"mixreg.em, spline design ({n_parents} parent(s) x {knots} interior knots: p={design.shape[1]}, "
            f"K={EM_COMPONENTS}): {spline_pass * 1e3:.3f} ms per pass ({spline_pass / per_pass:.1f}x the "
            f"p={EM_DIM} pass) = {spline_ops / 1e9:.2f} G float64 ops/s = {spline_ops / peak1:.0%} of the "
            "1-thread add peak"
        )
        designs.append(design)
    # The joint EM of one latent over nodes with these designs, with and without the tiled Gram
    # accumulation that wide designs use.
    Y = np.column_stack([y + 0.5 * rng.normal(size=EM_SAMPLES) for _ in designs])
    untiled, tiled = (joint_pass_time(Y, designs, resp0, flag, reps) for flag in (False, True))
    widths = ", ".join(str(d.shape[1]) for d in designs)
    print(
        f"mixreg.joint_em, {len(designs)} nodes with the spline designs above (p = {widths}), "
        f"K={EM_COMPONENTS}: {untiled * 1e3:.3f} ms per pass untiled, {tiled * 1e3:.3f} ms tiled "
        f"({untiled / tiled:.2f}x)"
    )


def spline_columns(x: np.ndarray, knots: int) -> np.ndarray:
    """Centred cubic B-splines of ``x`` with ``knots`` interior knots at its quantiles, the first
    dropped (they sum to one, as the intercept): ``knots + 3`` columns."""
    from scipy.interpolate import BSpline

    inner = np.quantile(x, np.arange(1, knots + 1) / (knots + 1))
    t = np.concatenate([[x.min()] * 4, inner, [x.max()] * 4])
    basis = BSpline.design_matrix(x, t, 3).toarray()[:, 1:]
    return basis - basis.mean(axis=0)


def joint_pass_time(Y: np.ndarray, designs: list, resp0: np.ndarray, tiled: bool, reps: int) -> float:
    """Seconds per pass of ``mixreg.joint_em`` (an (EM_ITERATIONS + 1)-pass call minus a 1-pass call)."""

    def em(max_iter: int) -> Callable[[], dict]:
        floors = np.full(Y.shape[1], 1e-12)
        return lambda: _core.mixreg.joint_em(
            Y, designs, resp0, max_iter=max_iter, tol=0.0, ridge=1e-10, min_variance=floors, tiled=tiled
        )

    t_em, out = best_time(em(EM_ITERATIONS), reps)
    t_one, one = best_time(em(0), reps)
    return (t_em - t_one) / (len(out["loglik_trace"]) - len(one["loglik_trace"]))


def em_pass_rate(y: np.ndarray, design: np.ndarray, resp0: np.ndarray, reps: int):
    """Seconds per EM pass, float64 ops per second (`em_operations`), the times of a 1-pass and of an
    (EM_ITERATIONS + 1)-pass call, and that call's passes."""

    def em(max_iter: int) -> Callable[[], dict]:
        return lambda: _core.mixreg.em(
            y, design, resp0, max_iter=max_iter, tol=0.0, ridge=1e-10, min_variance=1e-12
        )

    # The pass rate is the difference of a run of EM_ITERATIONS + 1 passes and a run of one pass, so
    # that the fixed cost of a call (argument checks, transposing the design) is not in it.
    t_em, out = best_time(em(EM_ITERATIONS), reps)
    t_one, one = best_time(em(0), reps)
    passes = len(out["loglik_trace"]) - len(one["loglik_trace"])
    k = int(np.count_nonzero(out["weights"] > 0))
    ops = em_operations(len(y), design.shape[1], k, passes) / (t_em - t_one)
    return (t_em - t_one) / passes, ops, t_one, t_em, len(out["loglik_trace"])


if __name__ == "__main__":
    main()
