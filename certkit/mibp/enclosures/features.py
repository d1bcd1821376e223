"""A frozen feature extractor in front of the trained network: sound bounds on its outputs by interval bound
propagation (``certified_training(..., features=module)``).

The extractor is a ``torch.nn.Sequential`` (nested ones allowed) of ``Conv1d`` / ``Conv2d``, ``Linear``,
``ReLU``, ``MaxPool1d`` / ``MaxPool2d``, ``AvgPool1d`` / ``AvgPool2d``, ``Flatten``, ``BatchNorm1d`` /
``BatchNorm2d`` (eval mode, with running statistics), ``Dropout`` (eval: the identity) and ``Identity``,
without forward hooks; it is used as a float64 copy in eval mode (ReLUs not in place), never trained.
Rows may have any shape the layers accept (``(L,)``, ``(C, L)``, ``(C, H, W)``, ...): ``Linear`` acts on
the last axis of a row and adds its bias there, convolutions and batch norm on the channel axis (the first of
a row), pooling on the trailing axes, as torch applies them.  Every layer maps an input box to an output
box:

* affine layers (convolutions, ``Linear``) by the signs of the weights, ``W⁺ x^L + W⁻ x^U + b`` for the
  lower end (exact for one layer), as two convolutions or matrix products;
* ``ReLU`` and max pooling are monotone (their ends are the images of the ends, exact), average pooling
  has positive weights;
* batch normalisation in eval mode is ``a x + c`` per channel.

Each box is padded outward for the rounding of this computation and of the float64 evaluation of the same
layer by torch at any point of the input box (a fan-in sum of ``K`` products: ``(2K + 8)`` ulps of the
magnitude ``|W| max|x| + |b|``), so the boxes hold the float features that the training run computes from
every allowed input.  Rows whose input is not perturbed keep their float features exactly.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import numpy as np

from certkit._optional import require
from certkit._warnings import warn_user
from certkit.mibp.problem.input_sets import InputSets

__all__ = ["SUPPORTED_LAYERS", "FrozenFeatures"]

_U = 2.0**-52

#: The layers an extractor may hold (class names of ``torch.nn``).
SUPPORTED_LAYERS = (
    "Conv1d",
    "Conv2d",
    "Linear",
    "ReLU",
    "MaxPool1d",
    "MaxPool2d",
    "AvgPool1d",
    "AvgPool2d",
    "Flatten",
    "BatchNorm1d",
    "BatchNorm2d",
    "Dropout",
    "Identity",
)


def _layers(module: Any, nn: Any, path: str) -> list[tuple[str, Any]]:
    """The leaf layers of nested ``Sequential`` containers, in the order their ``forward`` runs them (a layer
    object used twice appears twice), each with its path for messages."""
    if isinstance(module, nn.Sequential):
        if type(module).forward is not nn.Sequential.forward:
            raise TypeError(
                f"features{path} is a {type(module).__name__}, a Sequential with its own forward(), whose "
                "features certkit cannot bound from its layers; use a plain torch.nn.Sequential"
            )
        out = []
        for name, child in module._modules.items():  # what Sequential.forward runs, repeats included
            out += _layers(child, nn, f"{path}[{name}]")
        return out
    kind = type(module).__name__
    if type(module) not in tuple(getattr(nn, name) for name in SUPPORTED_LAYERS):
        raise TypeError(
            f"features{path} is a {kind}, which certkit cannot bound; the frozen extractor must be a "
            f"torch.nn.Sequential of {', '.join(SUPPORTED_LAYERS)} (nested Sequentials allowed)"
        )
    if isinstance(module, (nn.BatchNorm1d, nn.BatchNorm2d)) and (
        module.running_mean is None or module.running_var is None
    ):
        raise TypeError(
            f"features{path} is a {module} without running statistics (track_running_stats=False): it "
            "normalises each row by its batch, so a row's features depend on the other rows; certkit bounds "
            "eval-mode batch norm with running statistics"
        )
    if isinstance(module, (nn.Conv1d, nn.Conv2d)) and module.padding_mode != "zeros":
        raise TypeError(f"features{path}: {module} pads with {module.padding_mode!r}; only zeros are bounded")
    if isinstance(module, (nn.MaxPool1d, nn.MaxPool2d)) and module.return_indices:
        raise TypeError(
            f"features{path} is {module} with return_indices=True: it returns (values, indices), not the "
            "features; build it with return_indices=False"
        )
    return [(path, module)]


#: The rank of one row each layer takes (the batch axis not counted), and which axis holds its channels.
_ROW_RANKS = {
    "Conv1d": ((2,), "(channels, length)"),
    "Conv2d": ((3,), "(channels, height, width)"),
    "BatchNorm1d": ((1, 2), "(features,) or (channels, length)"),
    "BatchNorm2d": ((3,), "(channels, height, width)"),
    "MaxPool1d": ((1, 2), "(length,) or (channels, length)"),
    "AvgPool1d": ((1, 2), "(length,) or (channels, length)"),
    "MaxPool2d": ((2, 3), "(height, width) or (channels, height, width)"),
    "AvgPool2d": ((2, 3), "(height, width) or (channels, height, width)"),
}


def _check_row_shape(path: str, layer: Any, shape: tuple[int, ...], nn: Any) -> None:
    """The rows reaching ``layer`` have the rank and channel (or feature) count it takes; else a
    `ValueError` naming the layer, the shape it expects and the shape it gets."""
    kind = type(layer).__name__
    where = f"features{path} ({layer})"
    if isinstance(layer, nn.Linear):
        if not shape or shape[-1] != layer.in_features:
            raise ValueError(
                f"{where} acts on the last axis of each row, which must have {layer.in_features} entries; "
                f"the rows reaching it have shape {shape}"
            )
        return
    if kind not in _ROW_RANKS:
        return
    ranks, names = _ROW_RANKS[kind]
    if len(shape) not in ranks:
        hint = ""
        if kind.startswith("Conv") and len(shape) == ranks[0] - 1:
            channels = layer.in_channels
            if channels == 1:
                given = f"(n, 1, {', '.join(map(str, shape))})"
            elif kind == "Conv1d" and shape[0] % channels == 0:  # flat rows of channels after channels
                given = f"(n, {channels}, {shape[0] // channels})"
            else:
                given = f"(n, {channels}, ...) with {channels} channels of equal size"
            hint = f"; the rows lack the channel axis: give X the shape {given}"
        raise ValueError(
            f"{where} takes rows of shape {names}; the rows reaching it have shape {shape}{hint}"
        )
    channels = getattr(layer, "in_channels", getattr(layer, "num_features", None))
    if channels is not None and shape[0] != channels:
        raise ValueError(
            f"{where} takes rows with {channels} channels on their first axis; the rows reaching it have "
            f"shape {shape}"
        )


def _check_finite(path: str, layer: Any, torch: Any) -> None:
    """A NaN or infinite weight, bias or running statistic is an error naming the layer."""
    for name, value in [*layer.named_parameters(recurse=False), *layer.named_buffers(recurse=False)]:
        if value is not None and value.is_floating_point() and not bool(torch.all(torch.isfinite(value))):
            raise ValueError(f"features{path} ({layer}) has a non-finite {name} (NaN or inf)")
    if isinstance(layer, (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d)):
        var = layer.running_var + layer.eps
        if not bool(torch.all(var > 0)):
            raise ValueError(
                f"features{path} ({layer}) has running_var + eps <= 0 (smallest {float(var.min()):g}): its "
                "normalisation divides by the square root of a non-positive number"
            )


def _check_hooks(module: Any, torch: Any) -> None:
    """Refuse forward hooks: the features would run them, the bounds (layer formulas) would not."""
    hooked = [
        f"features[{name}]" if name else "the extractor"
        for name, m in module.named_modules()
        if m._forward_hooks or m._forward_pre_hooks
    ]
    modules = torch.nn.modules.module
    if hooked or modules._global_forward_hooks or modules._global_forward_pre_hooks:
        where = ", ".join(hooked) if hooked else "torch's global hooks"
        raise TypeError(
            f"features has forward hooks ({where}); a hook changes the features but not the layer formulas "
            "certkit bounds: remove the hooks (or fold what they do into a layer)"
        )


def _warn_copy(module: Any, torch: Any) -> None:
    """One `UserWarning` when the extractor is not a float64 module in eval mode: what is certified is its
    float64 eval-mode copy."""
    what = []
    dtypes = {p.dtype for p in module.parameters()} | {
        b.dtype for b in module.buffers() if b.is_floating_point()
    }
    if dtypes - {torch.float64}:
        what.append(f"holds {', '.join(sorted(str(d).replace('torch.', '') for d in dtypes))} weights")
    nn = torch.nn
    modal = (nn.Dropout, nn.BatchNorm1d, nn.BatchNorm2d)  # the layers whose output depends on the mode
    if any(m.training for m in module.modules() if isinstance(m, modal)):
        what.append("has dropout or batch norm in train mode")
    if what:
        warn_user(
            f"features {' and '.join(what)}: certkit certifies a float64 copy in eval mode (dropout off, "
            "batch norm with its running statistics); the certificate covers the features that copy "
            "computes, not those of the module as given (call module.double().eval() to train and predict "
            "with exactly what is certified)"
        )


class FrozenFeatures:
    """A frozen torch extractor and sound interval bounds on its outputs (see the module docstring).

    Parameters
    ----------
    module : torch.nn.Sequential
        The extractor; a float64 copy in eval mode is used (the original is not changed).
    input_shape : tuple of int
        The shape of one input (e.g. ``(1, 8, 8)``); the perturbation models see the inputs flattened.
    """

    def __init__(self, module: Any, input_shape: tuple[int, ...]) -> None:
        torch = require("torch", extra="torch", purpose="a frozen feature extractor (features=)")
        nn = torch.nn
        if not isinstance(module, nn.Sequential):
            raise TypeError(
                f"features must be a torch.nn.Sequential of {', '.join(SUPPORTED_LAYERS)}, got "
                f"{type(module).__name__}"
            )
        _check_hooks(module, torch)
        _layers(module, nn, "")  # refuse what cannot be bounded before copying
        _warn_copy(module, torch)
        self.module = copy.deepcopy(module).double().eval()
        for p in self.module.parameters():
            p.requires_grad_(False)
        self.layers = _layers(self.module, nn, "")
        for path, layer in self.layers:  # never write into the caller's inputs (or the attack's tensors)
            _check_finite(path, layer, torch)
            if isinstance(layer, nn.ReLU):
                layer.inplace = False
        self.input_shape = tuple(int(s) for s in input_shape)
        if not self.input_shape or min(self.input_shape) < 1:
            raise ValueError(
                f"input_shape must be the shape of one row, one or more axes of positive length, got "
                f"{self.input_shape}"
            )
        self._torch = torch
        shape = self.input_shape
        with torch.no_grad():
            for path, layer in self.layers:  # a batch of two rows, so that torch never reads one as unbatched
                _check_row_shape(path, layer, shape, nn)
                try:
                    out = layer(torch.zeros((2, *shape), dtype=torch.float64))
                except RuntimeError as exc:
                    raise ValueError(
                        f"features{path} ({layer}) cannot take rows of shape {shape} (one row of X has shape "
                        f"{self.input_shape}): {exc}"
                    ) from exc
                if out.dim() == 0 or out.shape[0] != 2:
                    raise ValueError(
                        f"features{path} ({layer}) mixes the rows of a batch (2 rows in, output of shape "
                        f"{tuple(out.shape)}): every layer must keep one output per row"
                    )
                shape = tuple(int(s) for s in out.shape[1:])
        if len(shape) != 1:
            raise ValueError(
                f"features must output one vector per row (end with Flatten or Linear), got outputs of shape "
                f"{shape} per row"
            )
        self.n_features = shape[0]
        self._check_rows_independent()

    def _check_rows_independent(self) -> None:
        """Each row's features depend on that row alone: reversing a batch of three distinct rows reverses
        its features (a layer that mixes the rows of a batch is refused)."""
        torch = self._torch
        rows = torch.linspace(-1.0, 1.0, 3 * int(np.prod(self.input_shape)), dtype=torch.float64)
        rows = rows.reshape(3, *self.input_shape)
        with torch.no_grad():
            out, flipped = self.module(rows), self.module(rows.flip(0))
        if not bool(torch.allclose(out.flip(0), flipped, rtol=1e-9, atol=1e-12)):
            raise ValueError(
                "features mixes the rows of a batch (the features of a row change with the other rows): "
                "every layer must act on each row alone"
            )

    def __repr__(self) -> str:
        return f"FrozenFeatures({self.input_shape} -> {self.n_features}, {len(self.layers)} layers)"

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state.pop("_torch")
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._torch = require("torch", extra="torch", purpose="a frozen feature extractor (features=)")

    def _tensor(self, X: np.ndarray) -> Any:
        """A float64 tensor of the rows of ``X`` in the input shape (a copy: nothing writes into ``X``)."""
        return self._torch.tensor(np.asarray(X, dtype=np.float64).reshape(len(X), *self.input_shape))

    def torch_forward(self, X: Any) -> Any:
        """The features of the rows of a float64 torch tensor ``(n, d)`` or ``(n, *input_shape)``
        (differentiable: for the soundness attack)."""
        return self.module(X.reshape(len(X), *self.input_shape))

    def features(self, X: np.ndarray, *, rows_per_call: int = 4096) -> np.ndarray:
        """The float64 features ``(n, n_features)`` of the rows of ``X`` (``(n, d)`` flattened inputs)."""
        out = np.empty((len(X), self.n_features))
        with self._torch.no_grad():
            for start in range(0, len(X), rows_per_call):
                rows = slice(start, start + rows_per_call)
                out[rows] = self.module(self._tensor(X[rows])).numpy()
        return out

    def bounds(self, XL: np.ndarray, XU: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Sound bounds ``(n, n_features)`` on the float features of every input in ``[XL, XU]`` (rows)."""
        torch = self._torch
        with torch.no_grad():
            lo, hi = self._tensor(XL), self._tensor(XU)
            for _, layer in self.layers:
                lo, hi = _layer_bounds(layer, lo, hi, torch)
            return lo.numpy().copy(), hi.numpy().copy()

    def feature_sets(self, sets: InputSets) -> InputSets:
        """The input sets of the features: each perturbed row's features within `bounds` of its input
        hull, the others exact at their features; budgets, label flips and the rest carried over.  Under
        `Neighbours` each row's features are computed alone (a row's float features then do not depend on
        the rows beside it in a call), and the added rows' domain becomes the bounds of its features."""
        nb = sets.neighbours
        nominal = self.features(sets.nominal, rows_per_call=1 if nb is not None else 4096)
        if nb is not None and nb.lower is not None:
            lower, upper = self.bounds(nb.lower[None], nb.upper[None])
            nb = replace(nb, lower=lower[0], upper=upper[0])
        moved = np.flatnonzero(np.any(sets.varies, axis=1))
        off_lo, off_hi = np.zeros_like(nominal), np.zeros_like(nominal)
        step = 1024
        for start in range(0, len(moved), step):
            rows = moved[start : start + step]
            lo, hi = self.bounds(sets.lower[rows], sets.upper[rows])
            lo, hi = np.minimum(lo, nominal[rows]), np.maximum(hi, nominal[rows])
            # nominal + offset must stay outside [lo, hi] after the rounding of both operations
            d_lo, d_hi = lo - nominal[rows], hi - nominal[rows]
            slack_lo = 2 * _U * (np.abs(d_lo) + np.abs(lo)) + 1e-300
            slack_hi = 2 * _U * (np.abs(d_hi) + np.abs(hi)) + 1e-300
            off_lo[rows], off_hi[rows] = d_lo - slack_lo, d_hi + slack_hi
        return InputSets(
            nominal,
            nominal[:, :, None].copy(),
            np.ones(nominal.shape, dtype=np.int64),
            off_lo,
            off_hi,
            budget=sets.budget,
            label_flips=sets.label_flips,
            flip_labels=sets.flip_labels,
            flip_target=sets.flip_target,
            target_radius=sets.target_radius,
            removals=sets.removals,
            scope=sets.scope,
            neighbours=nb,
        )


def _layer_bounds(layer: Any, lo: Any, hi: Any, torch: Any) -> tuple[Any, Any]:
    """One layer's output box from its input box (padded as the module docstring says)."""
    nn, F = torch.nn, torch.nn.functional
    if isinstance(layer, (nn.ReLU, nn.MaxPool1d, nn.MaxPool2d, nn.Flatten)):
        return layer(lo), layer(hi)  # monotone, exact in float
    if isinstance(layer, (nn.Dropout, nn.Identity)):
        return lo, hi
    if isinstance(layer, (nn.AvgPool1d, nn.AvgPool2d)):
        size = layer.kernel_size
        terms = int(np.prod(size if isinstance(size, tuple) else (size,) * (lo.dim() - 2)))
        return _pad(layer(lo), layer(hi), layer(torch.maximum(lo.abs(), hi.abs())), 2 * terms + 8)
    if isinstance(layer, (nn.BatchNorm1d, nn.BatchNorm2d)):
        return _batch_norm(lo, hi, layer, torch)
    if isinstance(layer, nn.Linear):

        def apply(x, w):
            return F.linear(x, w)

    else:  # Conv1d, Conv2d (zero padding, checked by `_layers`)
        conv = F.conv1d if isinstance(layer, nn.Conv1d) else F.conv2d

        def apply(x, w):
            return conv(x, w, None, layer.stride, layer.padding, layer.dilation, layer.groups)

    W, b = layer.weight, layer.bias
    Wp, Wn = W.clamp(min=0.0), W.clamp(max=0.0)
    new_lo, new_hi = apply(lo, Wp) + apply(hi, Wn), apply(hi, Wp) + apply(lo, Wn)
    mag = apply(torch.maximum(lo.abs(), hi.abs()), W.abs())
    if b is not None:
        # Linear adds its bias along the last axis of a row, a convolution along the channel axis
        if not isinstance(layer, nn.Linear):
            b = b.reshape((1, -1) + (1,) * (new_lo.dim() - 2))
        new_lo, new_hi, mag = new_lo + b, new_hi + b, mag + b.abs()
    # a fan-in sum of K products for ours and for torch's float evaluation at any point of the box
    return _pad(new_lo, new_hi, mag, 2 * int(np.prod(W.shape[1:])) + 8)


def _pad(lo: Any, hi: Any, mag: Any, terms: int) -> tuple[Any, Any]:
    """Widen by ``(terms + 4) u mag + u |end|`` (as `certkit.mibp.enclosures.interval.pad`)."""
    err = (terms + 4) * _U * mag + 1e-300
    return lo - (err + _U * lo.abs()), hi + (err + _U * hi.abs())


def _batch_norm(lo: Any, hi: Any, layer: Any, torch: Any) -> tuple[Any, Any]:
    """Eval-mode batch normalisation ``(x - μ) γ / sqrt(σ² + ε) + β`` as ``a x + c`` per channel, padded for
    the rounding of ``a``, ``c`` and of torch's own evaluation."""
    mean, var = layer.running_mean, layer.running_var
    gamma = layer.weight if layer.weight is not None else torch.ones_like(mean)
    beta = layer.bias if layer.bias is not None else torch.zeros_like(mean)
    a = gamma / torch.sqrt(var + layer.eps)
    c = beta - mean * a
    shape = (1, -1) + (1,) * (lo.dim() - 2)
    a, c = a.reshape(shape), c.reshape(shape)
    new_lo = torch.minimum(a * lo, a * hi) + c
    new_hi = torch.maximum(a * lo, a * hi) + c
    mag = a.abs() * lo.abs().maximum(hi.abs()) + (a * mean.reshape(shape)).abs() + beta.abs().reshape(shape)
    return _pad(new_lo, new_hi, mag, 12)
