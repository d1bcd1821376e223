"""certkit: statistical guarantees for machine learning.

Capabilities live in submodules that are imported on first use, so that
``import certkit`` stays light:

| submodule | what it holds |
|---|---|
| ``certkit.stats`` | binomial, smoothing and conformal bounds |
| ``certkit.parallel`` | executors (serial, local pool, Dask) |
| ``certkit.datasets`` | embedded data sets |
| ``certkit.mibp`` | MIBP certified training |
| ``certkit.conformal`` | RCP1 robust conformal prediction |
| ``certkit.circuits`` | certified circuits |
| ``certkit.performative`` | performative generalization bounds |
| ``certkit.ope`` | off-policy evaluation under strategic behaviour |
| ``certkit.causal`` | causal mixture discovery |
| ``certkit.plot`` | plot helpers (matplotlib) |

The entry points ``certkit.certified_training``, ``certkit.RCP1Classifier``,
``certkit.certify_circuit``, ``certkit.strategic_dr`` and ``certkit.CausalMixtureModel`` are re-exported here.
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

_SUBMODULES = (
    "stats", "parallel", "datasets", "mibp", "conformal", "circuits", "performative", "ope", "causal", "plot",
)

# The entry point of each capability, re-exported at the top level (imported on first use).
_ENTRY_POINTS = {
    "certified_training": "mibp",
    "RCP1Classifier": "conformal",
    "certify_circuit": "circuits",
    "strategic_dr": "ope",
    "CausalMixtureModel": "causal",
}

__all__ = ["__version__", *_SUBMODULES, *_ENTRY_POINTS]


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"certkit.{name}")
    if name in _ENTRY_POINTS:
        return getattr(importlib.import_module(f"certkit.{_ENTRY_POINTS[name]}"), name)
    raise AttributeError(f"module 'certkit' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
