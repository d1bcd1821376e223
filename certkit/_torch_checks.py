"""Checks of the inputs a torch model receives, shared by `certkit.circuits` and `certkit.conformal`.

torch is imported only when a check runs, by which time the caller already holds a torch module.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

__all__ = ["first_layer_checked"]


@contextlib.contextmanager
def first_layer_checked(model: Any, name: str, shape: tuple[int, ...]) -> Iterator[None]:
    """While active, the first `Linear` / `ConvNd` layer of ``model`` to run must get the features it expects.

    A wrong feature count then raises ``ValueError`` naming the argument ``name`` (of shape ``shape``)
    before the layer's own matmul or convolution error.  Later calls of the layers are not checked.
    """
    import torch

    linear = torch.nn.Linear
    conv = (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d)
    seen: list[bool] = []

    def pre_hook(module: Any, args: tuple[Any, ...]) -> None:
        if seen or not args or not isinstance(args[0], torch.Tensor):
            return
        seen.append(True)
        got = tuple(args[0].shape)
        if isinstance(module, linear) and (not got or got[-1] != module.in_features):
            raise ValueError(
                f"{name} of shape {shape} does not fit model: its first layer ({module}) expects "
                f"{module.in_features} input features on the last axis, got shape {got}"
            )
        if isinstance(module, conv) and (len(got) < 2 or got[1] != module.in_channels):
            raise ValueError(
                f"{name} of shape {shape} does not fit model: its first layer ({module}) expects inputs "
                f"(batch, {module.in_channels} channels, ...), got shape {got}"
            )

    modules = model.modules() if isinstance(model, torch.nn.Module) else ()
    handles = [m.register_forward_pre_hook(pre_hook) for m in modules if isinstance(m, (linear, *conv))]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()
