"""``warn_user``: a warning attributed to the first caller outside certkit (the line of the user's code that
made the call), however deep inside certkit it is raised."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

__all__ = ["warn_user"]

_PACKAGE = str(Path(__file__).resolve().parent)


def warn_user(message: str, category: type[Warning] = UserWarning) -> None:
    """Issue ``message`` as a ``category`` warning whose location is the innermost frame outside the certkit
    package (so the user sees their own call, and a filter on their module applies)."""
    frame, level = sys._getframe(1), 2
    while frame is not None and str(Path(frame.f_code.co_filename).resolve()).startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)
