"""Type aliases shared by every public signature (for annotations; modules import annotations lazily)."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:  # pragma: no cover - typing only
    import numpy as np

    from certkit.parallel import ExecutorLike

__all__ = ["ExecutorArg", "Progress", "RNGLike"]

#: ``rng`` argument (SPEC 7): None (fresh OS entropy), an int seed or a ``numpy.random.Generator``.
RNGLike: TypeAlias = "int | np.random.Generator | None"

#: ``executor`` argument: None (serial), an int number of local worker processes, or any object with
#: ``submit`` (a ``concurrent.futures.Executor``, a ``dask.distributed.Client``).
ExecutorArg: TypeAlias = "int | ExecutorLike | None"

#: ``progress`` argument: False (silent), True (a progress bar) or a str (a progress bar with that label).
Progress: TypeAlias = "bool | str"
