"""Executors for the independent solves and subsample runs of every capability.

``executor`` is accepted everywhere parallel work happens:

* ``None`` - run serially in this process;
* an ``int`` ``k`` - a local `concurrent.futures.ProcessPoolExecutor` with ``k``
  workers, created for the call and shut down afterwards (``1`` means serial);
* any object with ``submit`` (a `concurrent.futures.Executor`, or a
  ``dask.distributed.Client`` - how users scale past one machine) - used as is and
  left running.

Results always come back in the order of the inputs, so parallel runs equal
serial ones whenever ``fn`` is deterministic (pass per-item seeds, never share a
generator across workers).
"""

from __future__ import annotations

import contextlib
import numbers
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any, TypeVar

from certkit._typing import ExecutorArg, ExecutorLike, Progress

__all__ = ["ExecutorLike", "parallel_map", "resolve_executor"]

T = TypeVar("T")
R = TypeVar("R")


@contextlib.contextmanager
def resolve_executor(executor: ExecutorArg) -> Iterator[ExecutorLike | None]:
    """Context manager yielding ``None`` (serial) or an executor-like object.

    Parameters
    ----------
    executor : None, int or executor-like
        See the module docstring.  An int creates a process pool that is shut
        down on exit; a user-supplied executor is never shut down.
    """
    if executor is None:
        yield None
        return
    if isinstance(executor, bool):
        raise TypeError("executor must be None, an int number of workers or an executor with submit()")
    if isinstance(executor, numbers.Integral):
        workers = int(executor)
        if workers < 1:
            raise ValueError(f"executor as a number of workers must be >= 1, got {workers}")
        if workers == 1:
            yield None
            return
        with ProcessPoolExecutor(max_workers=workers) as pool:
            yield pool
        return
    if not callable(getattr(executor, "submit", None)):
        raise TypeError(
            "executor must be None, an int number of workers, a concurrent.futures.Executor or a "
            f"dask.distributed.Client; got {type(executor).__name__} (it has no submit method)"
        )
    yield executor


def _progress_bar(total: int, progress: Progress) -> Any:
    if not progress:
        return None
    from tqdm.auto import tqdm

    desc = progress if isinstance(progress, str) else None
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
        A picklable function of one argument (module-level functions and
        ``functools.partial`` of them are picklable; lambdas are not, for process
        pools and Dask).
    items : iterable
        The inputs.
    executor : None, int or executor-like
        Where to run (see `certkit.parallel`).
    progress : bool or str
        Show a tqdm progress bar (a string becomes its description).

    Returns
    -------
    list
        ``[fn(item) for item in items]``, in input order.
    """
    items_list: Sequence[T] = list(items)
    bar = _progress_bar(len(items_list), progress)
    try:
        with resolve_executor(executor) as ex:
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
                results.append(future.result())
                if bar is not None:
                    bar.update(1)
            return results
    finally:
        if bar is not None:
            bar.close()
