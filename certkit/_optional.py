"""Lazy imports of optional dependencies, with an error that names the extra to install."""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["require"]


def require(module: str, *, extra: str, purpose: str) -> ModuleType:
    """Import ``module`` or raise an ImportError naming the certkit extra that provides it.

    Parameters
    ----------
    module : str
        The module to import, e.g. ``"pyscipopt"``.
    extra : str
        The certkit extra that installs it, e.g. ``"scip"``.
    purpose : str
        What needs it, as the error message's subject, e.g. ``'backend="scip"'``.

    Returns
    -------
    module
        The imported module.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(f'{purpose} needs {module}: pip install "certkit[{extra}]"') from exc
