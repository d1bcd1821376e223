"""Executors for the independent solves and subsample runs of every capability.

``executor`` is accepted everywhere parallel work happens:

* ``None`` - run serially in this process;
* an ``int`` ``k`` - a local process pool created for the call and shut down afterwards
  (``1`` means serial).  It starts ``min(k, number of items, usable CPUs)`` workers, from a clean
  ``forkserver`` process (``spawn`` where forkserver is unavailable), never by ``fork``ing this
  process, so no solver, thread or lock state is inherited; ``k`` above `MAX_LOCAL_WORKERS` is
  rejected;
* any object with ``submit`` (a `concurrent.futures.Executor`, or a
  ``dask.distributed.Client`` - how users scale past one machine) - used as is and
  left running (pass your own pool to run more workers than CPUs).

Results always come back in the order of the inputs, so parallel runs equal
serial ones whenever ``fn`` is deterministic (pass per-item seeds, never share a
generator across workers).
"""

from __future__ import annotations

import ast
import contextlib
import io
import multiprocessing
import numbers
import os
import pickle
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from types import FunctionType
from typing import Any, TypeVar

from certkit._typing import ExecutorArg, ExecutorLike, Progress
from certkit._validation import check_progress
from certkit.parallel._memory import available_memory, rows_per_chunk

__all__ = [
    "MAX_LOCAL_WORKERS",
    "ExecutorLike",
    "available_cpus",
    "available_memory",
    "parallel_map",
    "resolve_executor",
    "rows_per_chunk",
    "single_threaded",
]

T = TypeVar("T")
R = TypeVar("R")

#: Largest ``executor=k`` accepted: more local processes than this is a mistake (a seed or a size
#: passed as ``executor``), not a request; pass your own executor to run more.
MAX_LOCAL_WORKERS = 1024


def available_cpus() -> int:
    """CPUs this process may run on (its affinity mask where the OS has one, else ``os.cpu_count()``)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def _clean_context() -> multiprocessing.context.BaseContext:
    """``forkserver`` where available (fast, clean), else ``spawn``; never ``fork``.

    A forked worker inherits the parent's memory as it is, including the state of native solvers
    (HiGHS, Gurobi, SCIP), their thread pools and locks held by other threads; a worker that
    inherits a held lock spins or waits forever.  Workers started from a fresh interpreter import
    what they need themselves.
    """
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")


def _check_workers(executor: Any) -> int:
    workers = int(executor)
    if workers < 1:
        raise ValueError(f"executor as a number of workers must be >= 1, got {workers}")
    if workers > MAX_LOCAL_WORKERS:
        raise ValueError(
            f"executor={workers} local worker processes is more than certkit starts (at most "
            f"{MAX_LOCAL_WORKERS}; this machine has {available_cpus()} usable CPUs); pass an int up to the "
            "CPU count, or your own concurrent.futures executor or dask.distributed.Client"
        )
    return workers


@contextlib.contextmanager
def resolve_executor(executor: ExecutorArg, *, n_items: int | None = None) -> Iterator[ExecutorLike | None]:
    """Context manager yielding ``None`` (serial) or an executor-like object.

    Parameters
    ----------
    executor : None, int or executor-like
        See the module docstring.  An int creates a process pool (forkserver or spawn start
        method) that is shut down on exit; a user-supplied executor is never shut down.
    n_items : int, optional
        Number of work items: an int ``executor`` starts no more workers than this (nor than
        `available_cpus`); with one worker left the work runs serially in this process.

    Raises
    ------
    TypeError
        ``executor`` is not None, an int or an object with ``submit``.
    ValueError
        An int ``executor`` below 1 or above `MAX_LOCAL_WORKERS`.
    """
    if executor is None:
        yield None
        return
    if isinstance(executor, bool):
        raise TypeError(
            "executor must be None, an int number of workers or an executor with submit(), got bool"
        )
    if isinstance(executor, numbers.Integral):
        workers = min(_check_workers(executor), available_cpus())
        if n_items is not None:
            workers = min(workers, n_items)
        if workers <= 1:
            yield None
            return
        with ProcessPoolExecutor(max_workers=workers, mp_context=_clean_context()) as pool:
            yield pool
        return
    if not callable(getattr(executor, "submit", None)):
        raise TypeError(
            "executor must be None, an int number of workers, a concurrent.futures.Executor or a "
            f"dask.distributed.Client; got {type(executor).__name__} (it has no submit method)"
        )
    yield executor


def _per_thread(lib: Any) -> bool:
    """Whether a thread pool's limit is per calling thread: OpenMP's (and BLAS built on OpenMP)."""
    return lib.internal_api == "openmp" or getattr(lib, "threading_layer", None) == "openmp"


def _blas_control(*, take: bool) -> None:
    """Take (``take=True``) or release the right to set OpenBLAS's process-wide thread limit.

    threadpoolctl (>= 3.6) lets only the thread that last set an OpenBLAS limit set it again, until that
    thread releases it, and ignores the others silently. A thread that set a limit with a plain
    ``threadpool_limits(...)`` call (not a ``with`` block) keeps that right while it lives, so a block opened
    in any other thread left OpenBLAS at that thread's limit. `single_threaded` serialises its own changes
    with its lock, takes the right before each change (the pool is process-wide: its limit is the process's)
    and releases it after, so that the next change, from any thread, applies. Without threadpoolctl's
    controlling thread (< 3.6) every thread may set the limit and there is nothing to do.
    """
    from threadpoolctl import OpenBLASController

    clear = getattr(OpenBLASController, "clear_controlling_thread", None)
    if clear is not None:
        clear(force=take)


class _Limits:
    """One-thread limits held on a set of thread pools, added to as libraries appear, restored at once."""

    def __init__(self) -> None:
        self.limiters: list[Any] = []
        self.limited: set[str] = set()  # the libraries they hold, by file path

    def add(self, libraries: Any, filepaths: list[str]) -> None:
        """Limit those of ``filepaths`` (pools of ``libraries``, a ThreadpoolController) not held yet."""
        new = [path for path in filepaths if path not in self.limited]
        if new:
            self.limiters.append(libraries.select(filepath=new).limit(limits=1))
            self.limited.update(new)

    def restore(self) -> None:
        for limiter in reversed(self.limiters):
            limiter.restore_original_limits()
        self.limiters.clear()
        self.limited.clear()


class _SingleThreaded:
    """State of `single_threaded`: the blocks open in this process and in each thread, and their limits.

    Process-wide pools (OpenBLAS or BLIS on pthreads, MKL) are limited when the first block in the process
    opens and restored when the last closes. OpenMP's limit belongs to the calling thread, so each thread
    limits its own OpenMP pools when its first block opens and restores them when its last closes. A pool of
    either kind loaded by an import made while blocks are open (in any thread) is limited when the next
    block opens.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.depth = 0
        self.shared = _Limits()  # process-wide pools, held while depth > 0
        self.controller: Any = None
        self.modules = -1  # len(sys.modules) when the controller was made
        self.thread = threading.local()  # the calling thread's depth and OpenMP limits

    def _libraries(self) -> Any:
        if self.modules != len(sys.modules):  # a library imported since may bring a thread pool
            from threadpoolctl import ThreadpoolController

            self.controller = ThreadpoolController()
            self.modules = len(sys.modules)
        return self.controller

    def enter(self) -> None:
        with self.lock:
            libraries = self._libraries()
            shared = [lib.filepath for lib in libraries.lib_controllers if not _per_thread(lib)]
            if any(path not in self.shared.limited for path in shared):
                _blas_control(take=True)
                self.shared.add(libraries, shared)
                _blas_control(take=False)
            self.depth += 1
            if getattr(self.thread, "depth", 0) == 0:
                self.thread.depth, self.thread.limits = 0, _Limits()
            own = [lib.filepath for lib in libraries.lib_controllers if _per_thread(lib)]
            self.thread.limits.add(libraries, own)
            self.thread.depth += 1

    def exit(self) -> None:
        with self.lock:
            self.thread.depth -= 1
            if self.thread.depth == 0:
                self.thread.limits.restore()
            self.depth -= 1
            if self.depth == 0:
                _blas_control(take=True)
                self.shared.restore()
                _blas_control(take=False)


_SINGLE = _SingleThreaded()


@contextlib.contextmanager
def single_threaded() -> Iterator[None]:
    """Run the block with one thread in every BLAS and OpenMP thread pool of this process.

    Work that runs serially in the calling process or item by item in worker processes wraps both in this
    block: every process then computes with one native thread, so a result does not depend on where its item
    ran (a BLAS reduction can round differently with another thread count), and workers do not oversubscribe
    the CPUs (two workers with two OpenBLAS threads each on two cores were 40% slower in the causal graph
    search). Blocks nest and may be open in several threads at once, and the limit holds in every thread
    inside a block: process-wide pools (OpenBLAS, BLIS, MKL) are limited when the first block in the process
    opens and restored when the last closes (a block closing in one thread leaves them limited while a block
    is open in another), OpenBLAS also while another thread holds threadpoolctl's right to set its limit (a
    plain ``threadpool_limits(...)`` call keeps it); OpenMP pools, whose limit belongs to the calling thread,
    are limited by each thread's first block and restored when that thread's last block closes. A pool of a
    library imported while blocks are open is limited when the next block opens, in a thread's nested
    block too. Libraries are found with ``threadpoolctl``.
    """
    _SINGLE.enter()
    try:
        yield
    finally:
        _SINGLE.exit()


class _MainReferences(pickle.Pickler):
    """A pickler that records the functions and classes it pickles by reference to ``__main__``."""

    def __init__(self, file: Any) -> None:
        super().__init__(file)
        self.main_objects: list[Any] = []

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, (type, FunctionType)) and getattr(obj, "__module__", None) == "__main__":
            self.main_objects.append(obj)
        return NotImplemented


def _guarded_names(path: str) -> set[str]:
    """Names the script at ``path`` defines only inside ``if __name__ == "__main__":`` blocks (worker
    processes import the script without running those blocks, so they cannot find these names)."""
    try:
        with open(path, encoding="utf-8") as fh:
            tree = ast.parse(fh.read(), filename=path)
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return set()

    def is_main_guard(node: ast.stmt) -> bool:
        if not isinstance(node, ast.If):
            return False
        test = ast.unparse(node.test)
        return "__name__" in test and "__main__" in test

    def defined(nodes: Iterable[ast.AST]) -> set[str]:
        names: set[str] = set()
        for node in nodes:
            for sub in ast.walk(node):
                if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    names.add(sub.name)
                elif isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                    names.add(sub.id)
        return names

    guards = [node for node in tree.body if is_main_guard(node)]
    others = [node for node in tree.body if not is_main_guard(node)]
    # names defined at module level outside the guards (function bodies' locals do not count there, but a
    # superset only makes the check more lenient)
    return defined(guards) - defined(others)


def _check_sendable(fn: Callable[..., Any]) -> None:
    """``fn`` can reach a worker process by pickle (standard-library pools pickle by reference)."""
    target = getattr(fn, "func", fn)  # functools.partial
    main = sys.modules.get("__main__")
    if getattr(target, "__module__", None) == "__main__" and not hasattr(main, "__file__"):
        raise TypeError(
            f"fn {getattr(target, '__qualname__', target)!r} is defined in an interactive session, which "
            "worker processes cannot import; move it to a module (or use executor=None, a "
            "ThreadPoolExecutor or a dask.distributed.Client, which pickles by value)"
        )
    pickler = _MainReferences(io.BytesIO())
    try:
        pickler.dump(fn)
    except Exception as exc:
        raise TypeError(
            "fn must be picklable to run in worker processes (a module-level function or a "
            f"functools.partial of one; lambdas and nested functions are not): {exc}"
        ) from None
    path = getattr(main, "__file__", None)
    if pickler.main_objects and path:
        guarded = _guarded_names(path)
        hidden = [obj.__qualname__ for obj in pickler.main_objects if obj.__qualname__ in guarded]
        if hidden:
            raise TypeError(
                f'{hidden[0]!r} is defined inside the `if __name__ == "__main__":` block of {path}; worker '
                "processes import the script without running that block, so they cannot find it. Define "
                f"{hidden[0]!r} at module level, above the block (keep only the calls under it), or use "
                "executor=None"
            )


#: Seconds between two progress lines on a standard error that is not a terminal (a log file, CI).
LOG_INTERVAL = 30.0


class _LogProgress:
    """Progress for a log: plain lines on standard error, one every `LOG_INTERVAL` seconds while the work
    runs and one when it ends (a redrawn bar would write hundreds of updates into the file)."""

    def __init__(self, total: int, desc: str | None) -> None:
        self.total, self.desc, self.done = total, desc or "progress", 0
        self.start = self.last = time.monotonic()

    def _line(self, text: str) -> None:
        print(f"{self.desc}: {self.done}/{self.total} {text}", file=sys.stderr, flush=True)

    def update(self, n: int = 1) -> None:
        self.done += n
        now = time.monotonic()
        if now - self.last >= LOG_INTERVAL and self.done < self.total:
            self.last = now
            self._line(f"after {now - self.start:.0f} s")

    def close(self) -> None:
        self._line(f"in {time.monotonic() - self.start:.1f} s")


def _to_terminal() -> bool:
    """Whether standard error is a terminal (or a notebook, where tqdm draws a widget)."""
    from tqdm import autonotebook, std

    if autonotebook.tqdm is not std.tqdm:
        return True
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced by an object without isatty, or closed
        return False


def _progress_bar(total: int, progress: Progress) -> Any:
    """A tqdm bar on a terminal, plain occasional lines (`_LogProgress`) elsewhere; None without progress."""
    if not progress:
        return None
    desc = progress if isinstance(progress, str) else None
    if not _to_terminal():
        return _LogProgress(total, desc)
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, leave=False)


def parallel_map(
    fn: Callable[[T], R],
    items: Iterable[T],
    *,
    executor: ExecutorArg = None,
    progress: Progress = False,
) -> list[R]:
    """Apply ``fn`` to every item, in parallel when ``executor`` asks for it.

    Parameters
    ----------
    fn : callable
        A function of one argument; for process pools a picklable one (module-level functions and
        ``functools.partial`` of them; lambdas and nested functions are not), checked before any
        worker starts.
    items : iterable
        The inputs.
    executor : None, int or executor-like
        Where to run (see `certkit.parallel`); an int starts at most ``min(executor, len(items),
        available_cpus())`` worker processes.
    progress : bool or str
        Show a tqdm progress bar (a string becomes its description).

    Returns
    -------
    list
        ``[fn(item) for item in items]``, in input order.

    Raises
    ------
    TypeError
        ``fn`` is not callable (or not picklable for a process pool), ``items`` is not iterable,
        ``progress`` is not a bool or str, or ``executor`` is of the wrong kind.
    ValueError
        ``executor`` is an int below 1 or above `MAX_LOCAL_WORKERS`.
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    progress = check_progress(progress)
    try:
        items_list: Sequence[T] = list(items)
    except TypeError:
        raise TypeError(f"items must be iterable, got {type(items).__name__}") from None
    with resolve_executor(executor, n_items=len(items_list)) as ex:
        if isinstance(ex, ProcessPoolExecutor):
            _check_sendable(fn)
        bar = _progress_bar(len(items_list), progress)
        try:
            if ex is None:
                results = []
                for item in items_list:
                    results.append(fn(item))
                    if bar is not None:
                        bar.update(1)
                return results
            futures = [ex.submit(fn, item) for item in items_list]
            results = []
            for future in futures:
                try:
                    results.append(future.result())
                except BrokenProcessPool as exc:
                    raise BrokenProcessPool(
                        "a worker process died while starting or running fn. Worker processes start from a "
                        "fresh interpreter that imports your main script: put the script's calls under "
                        '`if __name__ == "__main__":` and define the functions they pass to certkit at '
                        "module level, above that block. Otherwise the process ran out of memory or fn "
                        "crashed it."
                    ) from exc
                if bar is not None:
                    bar.update(1)
            return results
        finally:
            if bar is not None:
                bar.close()
