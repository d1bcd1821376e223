"""certkit.parallel: every executor kind gives the serial results, in order."""

import functools
import math
import operator
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool

import numpy as np
import pytest

import certkit.parallel as parallel
from certkit.parallel import (
    MAX_LOCAL_WORKERS,
    available_cpus,
    parallel_map,
    resolve_executor,
    single_threaded,
)

# Functions sent to process pools and Dask workers come from importable modules (the tests directory
# is not a package, so workers could not import functions defined here).
FN = functools.partial(operator.mul, 3)
ITEMS = list(range(-5, 40))
EXPECTED = [3 * i for i in ITEMS]


def _seeded_draws(seed):
    return np.random.default_rng(seed).normal(size=4)


def test_serial_default():
    assert parallel_map(FN, ITEMS) == EXPECTED
    assert parallel_map(FN, iter(ITEMS)) == EXPECTED  # any iterable, consumed once
    assert parallel_map(FN, []) == []


def test_int_one_is_serial():
    with resolve_executor(1) as ex:
        assert ex is None
    with resolve_executor(None) as ex:
        assert ex is None
    assert parallel_map(_seeded_draws, [0, 1], executor=1)[1].tolist() == _seeded_draws(1).tolist()


@pytest.fixture
def many_cpus(monkeypatch):
    """Pretend the machine has 8 CPUs, so that pools of 2+ workers start even on a 1-CPU runner."""
    monkeypatch.setattr(parallel, "available_cpus", lambda: 8)


def test_int_pool_equals_serial_and_is_shut_down(many_cpus):
    assert parallel_map(math.factorial, range(60), executor=2) == [math.factorial(i) for i in range(60)]
    with resolve_executor(np.int64(2)) as pool:
        assert pool.submit(abs, -4).result() == 4
    with pytest.raises(RuntimeError, match="shutdown"):
        pool.submit(abs, -4)


def test_thread_pool_is_used_and_left_running():
    with ThreadPoolExecutor(max_workers=3) as pool:
        out = parallel_map(_seeded_draws, range(20), executor=pool)
        serial = parallel_map(_seeded_draws, range(20))
        assert all(np.array_equal(a, b) for a, b in zip(out, serial))
        assert pool.submit(abs, -1).result() == 1  # not shut down by parallel_map


def test_order_is_preserved_when_items_finish_out_of_order():
    import time

    def slow_first(i):
        time.sleep(0.02 * (5 - i))
        return i

    with ThreadPoolExecutor(max_workers=5) as pool:
        assert parallel_map(slow_first, range(5), executor=pool) == [0, 1, 2, 3, 4]


def test_exceptions_propagate():
    with pytest.raises(ZeroDivisionError):
        parallel_map(functools.partial(operator.truediv, 1), [1, 0, 2])
    with ThreadPoolExecutor(max_workers=2) as pool, pytest.raises(ZeroDivisionError):
        parallel_map(functools.partial(operator.truediv, 1), [1, 0, 2], executor=pool)


@pytest.mark.parametrize("executor", [None, 2])
def test_progress_bar_on_a_terminal(capsys, monkeypatch, executor):
    monkeypatch.setattr(parallel, "_to_terminal", lambda: True)
    out = parallel_map(FN, ITEMS, executor=executor, progress="solving")
    assert out == EXPECTED
    err = capsys.readouterr().err
    assert "solving" in err and f"/{len(ITEMS)}" in err and "\r" in err  # a tqdm bar, redrawn in place
    parallel_map(FN, ITEMS, progress=True)
    assert f"/{len(ITEMS)}" in capsys.readouterr().err
    parallel_map(FN, ITEMS, progress=False)
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("executor", [None, 2])
def test_progress_in_a_log_is_a_plain_line_when_the_map_ends(capsys, executor):
    """Issue 43 item 5: on a standard error that is not a terminal (capsys, a log file, CI) a bar wrote an
    update per item; now one plain line at the end, and one per LOG_INTERVAL seconds while it runs."""
    assert not parallel._to_terminal()
    assert parallel_map(FN, ITEMS, executor=executor, progress="solving") == EXPECTED
    err = capsys.readouterr().err
    assert re.fullmatch(rf"solving: {len(ITEMS)}/{len(ITEMS)} in \d+\.\d s\n", err), err
    parallel_map(FN, ITEMS, progress=True)
    assert capsys.readouterr().err.startswith(f"progress: {len(ITEMS)}/{len(ITEMS)} in ")
    parallel_map(FN, ITEMS, progress=False)
    assert capsys.readouterr().err == ""


def test_progress_lines_in_a_log_come_once_per_interval(capsys, monkeypatch):
    clock = iter(range(0, 1000, 10))  # each reading of the clock 10 s after the last
    monkeypatch.setattr(parallel.time, "monotonic", lambda: next(clock))
    monkeypatch.setattr(parallel, "LOG_INTERVAL", 25.0)
    assert parallel_map(FN, list(range(8)), progress="fits") == [3 * i for i in range(8)]
    lines = capsys.readouterr().err.splitlines()
    # items end at 10, 20, ..., 80 s: a line when 30 and 60 s have passed since the last, and the last one
    assert lines == ["fits: 3/8 after 30 s", "fits: 6/8 after 60 s", "fits: 8/8 in 90.0 s"]


@pytest.mark.parametrize(
    ("executor", "error", "match"),
    [
        ("threads", TypeError, "str \\(it has no submit method\\)"),
        (2.5, TypeError, "float \\(it has no submit method\\)"),
        (object(), TypeError, "executor must be None, an int number of workers"),
        (True, TypeError, "executor must be None, an int number of workers"),
        (0, ValueError, "executor as a number of workers must be >= 1, got 0"),
        (-3, ValueError, "must be >= 1, got -3"),
        (10**6, ValueError, "executor=1000000 local worker processes is more than certkit starts"),
        (MAX_LOCAL_WORKERS + 1, ValueError, f"at most {MAX_LOCAL_WORKERS}"),
    ],
)
def test_bad_executor(executor, error, match):
    with pytest.raises(error, match=match):
        parallel_map(FN, ITEMS, executor=executor)


def test_pool_never_larger_than_items_or_cpus(many_cpus):
    """Issue 14 item 3: executor=50 for 3 items started 50 processes; now min(50, 3, CPUs)."""
    with resolve_executor(50, n_items=3) as pool:
        assert pool._max_workers == 3
    with resolve_executor(50) as pool:
        assert pool._max_workers == 8  # the (patched) CPU count
    with resolve_executor(5, n_items=1) as ex:
        assert ex is None  # one item: serial, no process started
    pids = parallel_map(operator.methodcaller("__call__"), [os.getpid] * 3, executor=50)
    assert len(set(pids)) <= 3 and os.getpid() not in pids


def test_available_cpus_respects_affinity():
    expected = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert available_cpus() == expected >= 1


def test_pool_workers_are_not_forked(many_cpus):
    """Issue 14 item 1: local pools start from a clean interpreter (forkserver or spawn), never fork."""
    with resolve_executor(2, n_items=4) as pool:
        assert pool._mp_context.get_start_method() in ("forkserver", "spawn")


def _native_threads():
    from threadpoolctl import threadpool_info

    return sorted({pool["num_threads"] for pool in threadpool_info()})


def test_single_threaded_limits_the_block_and_restores_after_the_last_of_nested_and_concurrent_blocks():
    from threading import Barrier

    before = _native_threads()
    with single_threaded():
        assert _native_threads() == [1]
        with single_threaded():
            assert _native_threads() == [1]
        assert _native_threads() == [1]  # the outer block still holds the limit
    assert _native_threads() == before
    with pytest.raises(KeyError), single_threaded():  # an exception in the block restores too
        raise KeyError("x")
    assert _native_threads() == before
    # Three threads in blocks at once: the limit is held until the last of them leaves.
    inside, left = Barrier(3), Barrier(3)

    def block(last):
        with single_threaded():
            inside.wait()
            if last:
                left.wait()  # the other two have left their blocks
                return parallel._SINGLE.depth, parallel._SINGLE.shared.limiters != []
        left.wait()
        return None

    with ThreadPoolExecutor(3) as pool:
        seen = list(pool.map(block, [True, False, False]))
    assert seen[0] == (1, True)
    assert parallel._SINGLE.depth == 0 and parallel._SINGLE.shared.limiters == []
    assert _native_threads() == before


_SECOND_THREAD = """
import os
import threading
import numpy as np
from threadpoolctl import threadpool_info
from certkit.parallel import single_threaded

seen = {}

def second():
    import scipy.linalg, sklearn.utils._openmp_helpers  # a second OpenBLAS and OpenMP, loaded now
    with single_threaded():
        seen["inside"] = {(p["internal_api"], p["filepath"]): p["num_threads"] for p in threadpool_info()}
    seen["after"] = threadpool_info()  # this thread's OpenMP; OpenBLAS while main's block is open

with single_threaded():
    thread = threading.Thread(target=second)
    thread.start()
    thread.join()
assert set(seen["inside"].values()) == {1}, seen["inside"]
assert {p["internal_api"] for p in seen["after"]} >= {"openblas", "openmp"}
# restored after the last block (OpenBLAS caps its default at the CPU count)
assert os.cpu_count() == 1 or min(p["num_threads"] for p in threadpool_info()) > 1, threadpool_info()

def alone():  # a block in a thread, when no other block is open
    with single_threaded():
        seen["alone"] = {p["filepath"]: p["num_threads"] for p in threadpool_info()}

thread = threading.Thread(target=alone)
thread.start()
thread.join()
assert set(seen["alone"].values()) == {1}, seen["alone"]
"""


def test_single_threaded_holds_in_a_second_thread_for_libraries_loaded_after_the_first_block():
    """Issue 30 item 5: a block opened in a second thread after the main thread opened one left the
    OpenBLAS loaded since (scipy's) and that thread's OpenMP at their default thread counts."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "3", "OMP_NUM_THREADS": "3"}
    proc = subprocess.run(
        [sys.executable, "-c", _SECOND_THREAD], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]


_CONCURRENT_THREADS = """
import threading
import numpy as np
import scipy.linalg, sklearn.utils._openmp_helpers  # a second OpenBLAS and an OpenMP pool
from threadpoolctl import threadpool_info, threadpool_limits
from certkit.parallel import single_threaded

def pools():
    return {(p["internal_api"], p["filepath"]): p["num_threads"] for p in threadpool_info()}

threadpool_limits(limits=2)  # a plain call: the main thread keeps threadpoolctl's right to set OpenBLAS
before = pools()
n = 4
entered, checked = threading.Barrier(n), threading.Barrier(n)
inside = {}

def block(i):
    entered.wait()  # the n threads open their blocks at once
    with single_threaded():
        with single_threaded():  # nested in the same thread
            checked.wait()  # every thread is inside its block now
            inside[i] = pools()
            np.linalg.svd(np.ones((50, 50)))  # BLAS work inside the block
        checked.wait()  # no thread leaves before all have looked

threads = [threading.Thread(target=block, args=(i,)) for i in range(n)]
for t in threads:
    t.start()
for t in threads:
    t.join()
assert len(inside) == n
for i, seen in inside.items():
    assert set(seen.values()) == {1}, (i, seen)
assert pools() == before, (before, pools())  # every pool back at its limit from before the blocks
"""


def test_single_threaded_entered_in_several_threads_at_once_limits_every_pool_in_each():
    """Issue 36 (fuzz round 4): blocks entered in several threads at once left one pool at 2 threads. A
    thread that set OpenBLAS's limit with a plain ``threadpool_limits`` call keeps threadpoolctl's right to
    set it, and the blocks of the other threads were silently ignored; now every pool holds one thread in
    every block, and the limits from before come back after the last block."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "2", "OMP_NUM_THREADS": "2"}
    proc = subprocess.run(
        [sys.executable, "-c", _CONCURRENT_THREADS], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]


_TWO_THREADS = """
import threading
import numpy as np
import scipy.linalg  # a second OpenBLAS
from threadpoolctl import threadpool_info
from certkit.parallel import single_threaded

def pools():
    return {(p["internal_api"], p["filepath"]): p["num_threads"] for p in threadpool_info()}

before = pools()
assert min(before.values()) == 2, before
first_open, second_closed = threading.Event(), threading.Event()
seen = {}

def first():
    with single_threaded():
        first_open.set()
        second_closed.wait()
        seen["first, after the second closed"] = pools()  # its block is still open
        # an OpenMP library loaded while the block is open (by another thread): limited by a nested block
        loader = threading.Thread(target=lambda: __import__("sklearn.utils._openmp_helpers"))
        loader.start()
        loader.join()
        with single_threaded():
            seen["first, nested, after a new OpenMP library"] = pools()

def second():
    first_open.wait()
    with single_threaded():
        seen["second"] = pools()
    second_closed.set()

threads = [threading.Thread(target=first), threading.Thread(target=second)]
for t in threads:
    t.start()
for t in threads:
    t.join()
for when, limits in seen.items():
    assert set(limits.values()) == {1}, (when, limits)
assert len(seen) == 3 and "openmp" in {api for api, _ in seen["first, nested, after a new OpenMP library"]}
after = pools()
assert all(after[pool] == n for pool, n in before.items()) and set(after.values()) == {2}, (before, after)
"""


def test_single_threaded_in_two_threads_holds_until_the_last_block_closes():
    """Issue 43 item 7: a block closing in one thread must not restore a pool while a block is open in
    another, and a pool loaded while a thread's block is open (an OpenMP library imported by another thread)
    is limited by that thread's next, nested block; every pool is back at 2 threads after the last block."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "2", "OMP_NUM_THREADS": "2"}
    proc = subprocess.run(
        [sys.executable, "-c", _TWO_THREADS], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_serial_then_pool_with_highs_does_not_hang(many_cpus):
    """Issue 14 item 1: a HiGHS solve in this process, then the same call with executor=2.

    Forked workers inherited HiGHS's scheduler state and spun forever inside run(); workers from a
    clean interpreter finish in seconds and give the serial bounds.
    """
    pytest.importorskip("highspy")
    from certkit.mibp import MLP, FeatureBox, certified_training

    gen = np.random.default_rng(11)
    X = gen.normal(size=(3, 2))
    y = np.where(X[:, 0] > 0, 1.0, -1.0)
    kwargs = dict(loss="hinge", perturbation=FeatureBox(0.1), epochs=1, learning_rate=0.3, backend="milp")
    model = MLP.random([2, 2, 1], rng=4)
    serial = certified_training(model, X, y, **kwargs)
    pooled = certified_training(model, X, y, executor=2, **kwargs)
    for a, b in zip(serial.lower + serial.upper, pooled.lower + pooled.upper):
        assert np.array_equal(a.to_vector(), b.to_vector())


@pytest.mark.parametrize(
    ("fn", "items", "kwargs", "error", "match"),
    [
        (5, [1, 2], {}, TypeError, "fn must be callable, got int"),
        (abs, 5, {}, TypeError, "items must be iterable, got int"),
        (abs, [1], {"progress": 1}, TypeError, "progress must be a bool or a str, got int"),
        (abs, [1], {"progress": None}, TypeError, "progress must be a bool or a str, got NoneType"),
        (abs, [1], {"progress": 2.5}, TypeError, "progress must be a bool or a str, got float"),
        (lambda x: x, [1, 2], {"executor": 2}, TypeError, "fn must be picklable to run in worker processes"),
    ],
)
def test_bad_fn_items_progress(fn, items, kwargs, error, match, many_cpus):
    """Issue 14 items 7 and 10: parallel_map(fn=5) and unpicklable functions give clear errors."""
    with pytest.raises(error, match=match):
        parallel_map(fn, items, **kwargs)


def test_unpicklable_fn_is_fine_serially_and_in_threads():
    assert parallel_map(lambda x: x + 1, [1, 2]) == [2, 3]
    with ThreadPoolExecutor(2) as pool:
        assert parallel_map(lambda x: x + 1, [1, 2], executor=pool) == [2, 3]


def test_dead_worker_names_the_main_guard(many_cpus):
    with pytest.raises(BrokenProcessPool, match='if __name__ == "__main__"'):
        parallel_map(os._exit, [3, 3], executor=2)


def test_executor_is_keyword_only():
    with pytest.raises(TypeError):
        parallel_map(FN, ITEMS, None)


@pytest.mark.slow
def test_dask_local_cluster_equals_serial(dask_client):
    assert parallel_map(FN, ITEMS, executor=dask_client) == EXPECTED
    factorials = parallel_map(math.factorial, range(50), executor=dask_client, progress="dask")
    assert factorials == [math.factorial(i) for i in range(50)]
    arrays = [np.random.default_rng(i).normal(size=(30,)) for i in range(12)]
    sorted_remote = parallel_map(np.sort, arrays, executor=dask_client)
    assert all(np.array_equal(a, np.sort(b)) for a, b in zip(sorted_remote, arrays))
    # the work really ran in the worker processes, and the client is left running
    pids = parallel_map(operator.methodcaller("__call__"), [os.getpid] * 4, executor=dask_client)
    assert os.getpid() not in pids
    assert dask_client.status == "running"
