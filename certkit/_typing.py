"""Type aliases shared by every public signature (for annotations; modules import annotations lazily)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

if TYPE_CHECKING:  # pragma: no cover - typing only
    import numpy as np

__all__ = ["ExecutorArg", "ExecutorLike", "Progress", "RNGLike"]


class ExecutorLike(Protocol):
    """Anything with ``submit(fn, *args) -> future`` whose futures have ``result()``."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any: ...


#: ``rng`` argument (SPEC 7): None (fresh OS entropy), an int seed or a ``numpy.random.Generator``.
RNGLike: TypeAlias = "int | np.random.Generator | None"

#: ``executor`` argument: None (serial), an int number of local worker processes, or any object with
#: ``submit`` (a ``concurrent.futures.Executor``, a ``dask.distributed.Client``).
ExecutorArg: TypeAlias = "int | ExecutorLike | None"

#: ``progress`` argument: False (silent), True (a progress bar) or a str (a progress bar with that label).
Progress: TypeAlias = "bool | str"
