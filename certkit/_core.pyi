"""Type stubs for the compiled module certkit._core."""

import numpy as np
import numpy.typing as npt

def random_uint64(seed: int, stream: int, counters: npt.ArrayLike) -> npt.NDArray[np.uint64]: ...
