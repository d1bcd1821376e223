"""Circuit evaluation: accuracy of the model when every neuron outside the circuit is ablated."""

from __future__ import annotations

from typing import Any

import numpy as np

from certkit._validation import check_array, check_in_options, check_integer
from certkit.circuits.discovery import (
    _ABLATIONS,
    _as_input,
    _check_logits,
    _check_model,
    _check_output,
    _hooked,
    _layer_name,
    _mean_activation,
    _neuron_axis,
    _neuron_mask_shape,
    _torch,
)

__all__ = ["circuit_accuracy", "layer_mean"]


def layer_mean(model: Any, layer: Any, X: Any, *, batch_size: int = 512) -> np.ndarray:
    """Per-element mean of the output of ``layer`` over the examples ``X`` (for mean ablation).

    Parameters
    ----------
    model : torch.nn.Module
        A classifier returning (batch, classes) logits (``X`` is checked against it as in
        `neuron_scores`).
    layer : str or torch.nn.Module
    X : array-like or torch.Tensor
        Reference inputs.
    batch_size : int, default 512

    Returns
    -------
    numpy.ndarray of float64
        Shape of one example's layer output, e.g. (C, H, W) for a convolution.
    """
    model = _check_model(model)
    name = _layer_name(model, layer)
    batch_size = check_integer(batch_size, "batch_size", minimum=1)
    return _mean_activation(model, name, _as_input(model, X), batch_size).cpu().numpy()


def circuit_accuracy(
    model: Any,
    layer: Any,
    keep_mask: Any,
    X: Any,
    y: Any,
    *,
    ablation: str = "mean",
    reference: Any = None,
    reference_mean: Any = None,
    neuron_dim: int = 1,
    batch_size: int = 512,
) -> float:
    """Accuracy of ``model`` on ``(X, y)`` keeping only the circuit neurons of ``layer``.

    Every neuron of ``layer`` with ``keep_mask[j] = False`` is ablated: replaced by its mean
    activation over ``reference`` (``ablation="mean"``; the per-element mean over examples, so a
    convolution channel keeps its mean spatial map) or by zero (``"zero"``).  The kept neurons pass
    through unchanged.

    Parameters
    ----------
    model : torch.nn.Module
        A classifier returning (batch, classes) logits; evaluated in eval mode.
    layer : str or torch.nn.Module
        The layer holding the neurons.
    keep_mask : array-like of bool, shape (N,)
        The circuit (e.g. ``CircuitCertificate.included``).
    X : array-like or torch.Tensor
        Inputs.
    y : array-like of int, shape (n,)
        Labels.
    ablation : {"mean", "zero"}, default "mean"
    reference : array-like or torch.Tensor, optional
        Data for the mean activations (default: ``X``).
    reference_mean : array-like, optional
        The mean activations themselves, from `layer_mean` (saves recomputing them when
        many circuits are evaluated); overrides ``reference``.
    neuron_dim : int, default 1
        Axis of the layer output indexing the neurons.
    batch_size : int, default 512

    Returns
    -------
    float
        Fraction of examples whose arg-max prediction equals ``y``.
    """
    torch = _torch()
    model = _check_model(model)
    name = _layer_name(model, layer)
    keep = check_array(keep_mask, "keep_mask", ndim=1, dtype=bool)
    check_in_options(ablation, "ablation", _ABLATIONS)
    neuron_dim = check_integer(neuron_dim, "neuron_dim")
    batch_size = check_integer(batch_size, "batch_size", minimum=1)
    inputs = _as_input(model, X)
    labels = check_array(y, "y", dtype=int, ndim=1)
    if labels.shape[0] != inputs.shape[0]:
        raise ValueError(f"X has {inputs.shape[0]} examples but y has {labels.shape[0]}")
    if np.any(labels < 0):
        raise ValueError(f"y must hold class labels >= 0, got {labels.min()}")
    fill = None
    if ablation == "mean" and reference_mean is not None:
        fill = torch.from_numpy(check_array(reference_mean, "reference_mean"))
    elif ablation == "mean":
        ref = inputs if reference is None else _as_input(model, reference, "reference")
        fill = _mean_activation(model, name, ref, batch_size)
    keep_t = torch.from_numpy(keep)

    def hook(_module: Any, _inp: Any, output: Any) -> Any:
        _check_output(output)
        axis = _neuron_axis(output, neuron_dim)
        if output.shape[axis] != keep.size:
            raise ValueError(
                f"keep_mask has {keep.size} entries but layer {name!r} has {output.shape[axis]} neurons"
            )
        mask = keep_t.to(output.device).reshape(_neuron_mask_shape(tuple(output.shape), axis))
        if fill is not None and tuple(fill.shape) != tuple(output.shape[1:]):
            raise ValueError(
                f"reference_mean has shape {tuple(fill.shape)} but one example's output of layer {name!r} "
                f"has shape {tuple(output.shape[1:])}"
            )
        value = torch.zeros((), dtype=output.dtype, device=output.device) if fill is None else fill.to(output)
        return torch.where(mask, output, value)

    correct = 0
    with _hooked(model, name, hook), torch.no_grad():
        for start in range(0, inputs.shape[0], batch_size):
            logits = model(inputs[start : start + batch_size])
            _check_logits(logits, None)
            if start == 0 and labels.max() >= logits.shape[1]:
                raise ValueError(f"y must hold class labels in [0, {logits.shape[1] - 1}] (the model has "
                                 f"{logits.shape[1]} outputs), got {labels.max()}")
            pred = logits.argmax(dim=1).cpu().numpy()
            correct += int(np.sum(pred == labels[start : start + batch_size]))
    return correct / inputs.shape[0]
