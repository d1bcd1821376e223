"""The counter-based generator of the kernels (`csrc/rng.hpp`)."""

import numpy as np
import numpy.typing as npt

def random_uint64(seed: int, stream: int, counters: npt.ArrayLike) -> npt.NDArray[np.uint64]:
    """Raw 64-bit draws of the counter-based generator.

    Parameters
    ----------
    seed : int
        Seed (taken modulo 2**64).
    stream : int
        Stream index (taken modulo 2**64).
    counters : array_like of uint64, shape (k,)
        Counters to evaluate.

    Returns
    -------
    numpy.ndarray of uint64, shape (k,)
        `mix64(stream_key(seed, stream) + (counter + 1) * GAMMA)` for each counter.
    """
