"""certkit: statistical guarantees for machine learning.

Capabilities live in submodules that are imported on first use, so that
``import certkit`` stays light:

========================  ====================================================
``certkit.stats``         binomial, smoothing and conformal bounds
``certkit.parallel``      executors (serial, local pool, Dask)
``certkit.datasets``      embedded data sets
``certkit.mibp``          MIBP certified training
``certkit.conformal``     RCP1 robust conformal prediction
``certkit.circuits``      certified circuits
========================  ====================================================
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

try:
    from certkit import _core  # noqa: F401  (compiled kernels)
except ImportError as exc:  # pragma: no cover - exercised only on a broken install
    raise ImportError(
        "certkit's compiled extension certkit._core could not be imported "
        f"({exc}). Build it from the source tree with `pip install -e .` "
        "(needs a C++17 compiler; scikit-build-core and pybind11 are fetched by pip)."
    ) from exc

_SUBMODULES = ("stats", "parallel", "datasets", "mibp", "conformal", "circuits", "plot")

__all__ = ["__version__", *_SUBMODULES]


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"certkit.{name}")
    raise AttributeError(f"module 'certkit' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
