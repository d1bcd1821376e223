"""Batches of independent fits (local scores, joint fits of candidate mixing sets) through an executor,
sent only where they pay for it.

Handing fits to worker processes costs, once per pool, the workers' start (a fresh interpreter importing
certkit, scikit-learn and SciPy: 2-4 s of CPU per worker on the shared 2-core machine), and per chunk the
pickling of the data's designs and a round trip (1-7 ms). Most batches of a small fit take milliseconds.
So a pool that ``CausalMixtureModel.fit`` opened (`StartingPool`) gets its first batch only when that
batch's estimated work reaches `START_WORK` (several seconds of fits, what the workers' start costs);
from then on, and with an executor that runs already (a pool or Dask client of the caller), a batch goes
to it from `MIN_BATCH_WORK`. A batch is cut into chunks of about `CHUNK_WORK` each (a tenth of a second),
small enough that the last chunks of a batch, which the workers hold when the calling process has run
out of others, are short. The work of an EM fit is estimated as rows x components x (design columns +
1)^2 (one fused pass accumulates a weighted Gram matrix per component) summed over the components
tried. ``benchmarks/causal.py --only executor`` measures the throughput and the dispatch cost behind
the constants. Where a batch runs changes no result: every fit is seeded by its own key.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor, Future
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

from certkit._typing import ExecutorLike
from certkit.parallel import parallel_map

__all__ = [
    "CHUNK_WORK",
    "JOINT_WORK",
    "MIN_BATCH_WORK",
    "START_WORK",
    "StartingPool",
    "chunk_count",
    "em_work",
    "map_chunks",
]

T = TypeVar("T")
R = TypeVar("R")

#: Estimated work (`em_work`) of the first batch a `StartingPool` gets: about 6 s of fits on one core
#: (``benchmarks/causal.py --only executor``), more than its two workers' start costs. The batches of a fit
#: of 5000 rows and 10 variables stay below it (the workers would cost more than they save there), a
#: third of the work of a Sachs fit comes in batches above it.
START_WORK = 5e8

#: Estimated work below which a batch runs serially in the calling process once the executor runs:
#: about three chunks of `CHUNK_WORK`.
MIN_BATCH_WORK = 3e7

#: Estimated work of one chunk of a batch that goes to the executor: about 0.1 s of fits, some 30 times
#: the dispatch of a chunk with Sachs-sized designs on a running pool.
CHUNK_WORK = 1e7


#: A unit of `em_work` of a joint fit (``certkit.causal.mixing``) costs about this many of a node's local
#: score: its Gaussian-mixture and anchor starts, and warm starts run to convergence (measured per fit,
#: serially, on Sachs: 6 and 3 times for a fit from the default starts and from a warm start with linear
#: mechanisms, 2 and 1 times with the wider spline designs).
JOINT_WORK = 3.0


def em_work(n_rows: int, widths: Iterable[int], components: Iterable[int], *, joint: bool = False) -> float:
    """Estimated work of the EM fits of one node or one set (``joint``): ``n_rows`` rows, the nodes'
    design widths (intercept included) and the numbers of components tried."""
    per_component = n_rows * sum((p + 1) ** 2 for p in widths)
    return float(per_component * sum(components)) * (JOINT_WORK if joint else 1.0)


class StartingPool(Executor):
    """A process pool opened for one fit, whose workers start with the first batch handed to it: until
    then `chunk_count` asks a batch for `START_WORK` instead of `MIN_BATCH_WORK`."""

    def __init__(self, pool: Executor) -> None:
        self.pool = pool
        self.started = False

    def submit(self, fn: Callable[..., R], /, *args: Any, **kwargs: Any) -> Future[R]:
        self.started = True
        return self.pool.submit(fn, *args, **kwargs)


def chunk_count(executor: ExecutorLike | None, work: float, n_items: int, max_chunks: int) -> int:
    """Chunks to split a batch of ``n_items`` fits of total estimated ``work`` into: 1 (run it serially
    here) without an executor or below `MIN_BATCH_WORK` (`START_WORK` for a `StartingPool` that has not
    started), else about one per `CHUNK_WORK`, at most ``max_chunks`` and one per item."""
    if executor is None:
        return 1
    starting = isinstance(executor, StartingPool) and not executor.started
    if work < (START_WORK if starting else MIN_BATCH_WORK):
        return 1
    return max(1, min(n_items, max_chunks, round(work / CHUNK_WORK)))


def map_chunks(
    fn: Callable[[list[T]], list[R]], items: Sequence[T], n_chunks: int, executor: ExecutorLike
) -> list[R]:
    """``fn`` over ``n_chunks`` strided chunks of ``items`` (``items[i::n_chunks]``: neighbouring items,
    often of similar cost, go to different chunks) through ``executor``, flattened back in input order.

    With a ``concurrent.futures`` executor (a process or thread pool) the calling process takes, from the
    last chunk back, every chunk no worker has started yet and runs it itself: it never waits idle while
    the workers start (a process pool's workers start with the first batch it gets) or are busy. Other
    executors (a Dask client) get every chunk through `certkit.parallel.parallel_map`.
    """
    chunks = [list(items[i::n_chunks]) for i in range(n_chunks)]
    if isinstance(executor, Executor):
        futures = [executor.submit(fn, chunk) for chunk in chunks]
        taken = {}
        for i in reversed(range(n_chunks)):
            if futures[i].cancel():  # not started by a worker: run it here
                taken[i] = fn(chunks[i])
        per_chunk = [taken[i] if i in taken else _result(futures[i]) for i in range(n_chunks)]
    else:
        per_chunk = parallel_map(fn, chunks, executor=executor)
    out: list[Any] = [None] * len(items)
    for i, results in enumerate(per_chunk):
        out[i::n_chunks] = results
    return out


def _result(future: Future) -> Any:
    try:
        return future.result()
    except BrokenProcessPool as exc:
        raise BrokenProcessPool(
            "a worker process of the causal fit died (out of memory, or killed); refit with executor=None or "
            "fewer workers"
        ) from exc
