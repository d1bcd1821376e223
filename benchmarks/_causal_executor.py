"""Section 6 of ``benchmarks/causal.py``: the default fit with ``executor=2`` against the serial fit.

``CausalMixtureModel.fit`` opens one process pool for all its fits (the four fits of ``"auto"``) and
hands a batch of local scores or joint fits to it only when the batch's estimated work reaches
``certkit.causal.batches.START_WORK`` (the first batch, which starts the workers) or ``MIN_BATCH_WORK``
(later ones), in chunks of about ``CHUNK_WORK``; the calling process runs every chunk no worker has
started. This section measures, in one run: per data set the wall seconds of
the serial fit and of the ``executor=2`` fit (the same process, alternating, best of ``repeats``; the
pool's workers start inside each parallel fit), their ratio, whether the fits are the same (``score_``,
graph, K, labels and mixing sets), and how many chunks the pool got and how many of those the calling
process took back. Then what the thresholds rest on: the serial throughput of local scores (work units
per CPU second, ``em_work``) and the cost of one chunk's dispatch on a running pool with Sachs-sized
designs.
"""

from __future__ import annotations

import functools
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from typing import ClassVar
from unittest import mock

import numpy as np
from _causal_invariance import user_sem

import certkit.parallel as parallel
from certkit.causal import CausalMixtureModel, make_mixture_sem
from certkit.causal.batches import CHUNK_WORK, MIN_BATCH_WORK, START_WORK, em_work
from certkit.causal.score import ScoreSettings, _score_batch
from certkit.causal.spline import NodeDesigns
from certkit.datasets import load_sachs

HEADERS = [
    "data", "n x d", "serial s", "executor=2 s", "executor / serial", "same fit", "chunks to the pool",
    "taken back",
]


class _CountingPool(ProcessPoolExecutor):
    """A process pool that counts the chunks submitted to it and keeps their futures."""

    futures: ClassVar[list] = []

    def submit(self, *args, **kwargs):
        future = super().submit(*args, **kwargs)
        _CountingPool.futures.append(future)
        return future


def _same(a: CausalMixtureModel, b: CausalMixtureModel) -> bool:
    return (
        a.score_ == b.score_
        and a.mechanism_ == b.mechanism_
        and np.array_equal(a.adjacency_, b.adjacency_)
        and np.array_equal(a.n_components_, b.n_components_)
        and np.array_equal(a.labels_, b.labels_)
        and a.mixing_sets_ == b.mixing_sets_
    )


def _cases(quick: bool) -> list[tuple[str, np.ndarray, dict, int]]:
    """(name, X, estimator options, repeats multiplier: 0 = one run whatever ``repeats``)."""
    cases = [
        ("make_mixture_sem(10, 500) (small)", make_mixture_sem(10, 500, 0.4, 2, rng=0)[0], {}, 1),
        ("user's nonlinear data, seed 0", user_sem(0)[0], {}, 1),
    ]
    if not quick:
        cases.append(("make_mixture_sem(10, 5000)", make_mixture_sem(10, 5000, 0.4, 2, rng=0)[0], {}, 0))
        sachs = {"search_samples": 2000, "max_groups": 10}
        cases.append(("Sachs (log), search_samples=2000, max_groups=10", np.log(load_sachs().X), sachs, 0))
    return cases


def bench_executor(repeats: int, quick: bool) -> tuple[list[list], list[str]]:
    """Rows of ``HEADERS`` and the lines on the threshold."""
    rows = []
    with mock.patch.object(parallel, "ProcessPoolExecutor", _CountingPool):
        for name, X, options, times in _cases(quick):
            serial_s, pooled_s, same, chunks, taken = [], [], True, 0, 0
            for _ in range(repeats if times else 1):
                start = time.perf_counter()
                serial = CausalMixtureModel(rng=0, **options).fit(X)
                serial_s.append(time.perf_counter() - start)
                _CountingPool.futures = []
                start = time.perf_counter()
                pooled = CausalMixtureModel(rng=0, executor=2, **options).fit(X)
                pooled_s.append(time.perf_counter() - start)
                same = same and _same(serial, pooled)
                chunks = len(_CountingPool.futures)
                taken = sum(future.cancelled() for future in _CountingPool.futures)
            rows.append([
                name, f"{X.shape[0]} x {X.shape[1]}", f"{min(serial_s):.1f}", f"{min(pooled_s):.1f}",
                f"{min(pooled_s) / min(serial_s):.2f}", "yes" if same else "NO", chunks, taken,
            ])
            print(f"  {name}: done", file=sys.stderr, flush=True)
    return rows, _threshold_lines()


def _threshold_lines() -> list[str]:
    """The serial throughput of local scores and the dispatch cost of a chunk, on Sachs-sized data."""
    X = np.log(load_sachs().X)
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    settings = ScoreSettings(max_components=5)
    designs = NodeDesigns(X[:2000], "linear")
    # wide parent sets, as in the large batches where the threshold decides (a small score is mostly the
    # fixed cost of a call)
    keys = [(j, tuple(p for p in range(11) if p != j)) for j in range(11)]
    fn = functools.partial(_score_batch, designs, settings)
    start = time.process_time()
    fn(keys)
    seconds = time.process_time() - start
    work = sum(em_work(2000, [designs.width(*key)], range(1, 6)) for key in keys)
    rate = work / seconds
    empty = functools.partial(_score_batch, NodeDesigns(X, "linear"), settings)  # all 7466 rows
    with parallel.resolve_executor(2) as pool:
        parallel.parallel_map(empty, [[], []], executor=pool)  # the workers start
        start = time.perf_counter()
        parallel.parallel_map(empty, [[] for _ in range(32)], executor=pool)
        dispatch = (time.perf_counter() - start) / 32
    return [
        f"local scores, serially: {rate:.3g} work units per CPU second ({len(keys)} scores of 2000 Sachs "
        f"rows, {seconds:.2f} s): the first batch of START_WORK = {START_WORK:.3g} units is about "
        f"{START_WORK / rate:.1f} s of fits, a later one of MIN_BATCH_WORK = {MIN_BATCH_WORK:.3g} about "
        f"{MIN_BATCH_WORK / rate:.2f} s, a chunk of CHUNK_WORK = {CHUNK_WORK:.3g} about "
        f"{CHUNK_WORK / rate:.3f} s",
        f"dispatch of one chunk (Sachs-sized designs) on a running pool: {dispatch * 1e3:.1f} ms, "
        f"{dispatch / (CHUNK_WORK / rate):.1%} of a chunk",
    ]
