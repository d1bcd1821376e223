"""Type aliases shared by every public signature."""

from __future__ import annotations

from typing import TYPE_CHECKING, Union

import numpy as np

if TYPE_CHECKING:  # pragma: no cover - typing only
    from certkit.parallel import ExecutorLike

__all__ = ["ExecutorArg", "Progress", "RNGLike"]

#: ``rng`` argument (SPEC 7): None (fresh OS entropy), an int seed or a ``numpy.random.Generator``.
RNGLike = Union[None, int, np.random.Generator]

#: ``executor`` argument: None (serial), an int number of local worker processes, or any object with
#: ``submit`` (a ``concurrent.futures.Executor``, a ``dask.distributed.Client``).
ExecutorArg = Union[None, int, "ExecutorLike"]

#: ``progress`` argument: False (silent), True (a progress bar) or a str (a progress bar with that label).
Progress = Union[bool, str]
