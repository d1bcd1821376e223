"""Circuit discovery for torch models: per-example neuron scores and an ablation-based black box.

Components are the neurons of one named layer (any submodule of the model).  The layer output has
the batch on axis 0 and the neurons on ``neuron_dim`` (default 1: the channels of a convolution or
the features of a linear layer; pass ``-1`` for transformer residual streams ``(batch, tokens, d)``);
every other axis (spatial positions, tokens) is reduced per neuron as documented in each function.

torch is an optional dependency, imported inside the functions.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from certkit._optional import require
from certkit._torch_checks import first_layer_checked
from certkit._validation import check_array, check_in_options, check_integer

__all__ = ["AblationDiscovery", "neuron_scores"]

_METHODS = ("activation", "attribution")
_ABLATIONS = ("mean", "zero")


def _torch() -> Any:
    return require("torch", extra="torch", purpose="certkit.circuits torch helpers")


def _check_model(model: Any) -> Any:
    torch = _torch()
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    return model


def _layer_name(model: Any, layer: Any) -> str:
    """The qualified name of ``layer`` (a name or a submodule) inside ``model``."""
    torch = _torch()
    if isinstance(layer, str):
        try:
            model.get_submodule(layer)
        except AttributeError:
            names = [name for name, _ in model.named_modules() if name]
            raise ValueError(f"model has no submodule named {layer!r}; available: {names}") from None
        return layer
    if isinstance(layer, torch.nn.Module):
        for name, module in model.named_modules():
            if module is layer:
                return name
        raise ValueError("layer is a module that is not part of model")
    raise TypeError(f"layer must be a submodule name (str) or a torch.nn.Module, got {type(layer).__name__}")


def _as_input(model: Any, X: Any, name: str = "X") -> Any:
    torch = _torch()
    param = next(model.parameters(), None)
    dtype = param.dtype if param is not None else torch.float32
    device = param.device if param is not None else torch.device("cpu")
    if isinstance(X, torch.Tensor):
        tensor = X.detach()
    else:
        arr = check_array(X, name, dtype=np.float64)
        if arr.ndim < 1:
            raise ValueError(f"{name} must have the examples along axis 0, got a scalar")
        tensor = torch.from_numpy(np.ascontiguousarray(arr))
    if tensor.ndim < 1 or tensor.shape[0] == 0:
        raise ValueError(f"{name} must contain at least one example")
    tensor = tensor.to(device=device, dtype=dtype)
    _check_input_shape(model, tensor, name)
    return tensor


def _check_input_shape(model: Any, inputs: Any, name: str) -> None:
    """Run one example through ``model``: it must fit the first layer and give (1, classes) logits.

    Catches inputs with the wrong feature count (before the model's own matmul error) and inputs with
    an extra leading axis (``X[None]``), which a layer would otherwise read as one example whose rows
    are neurons.
    """
    torch = _torch()
    shape = tuple(inputs.shape)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad(), first_layer_checked(model, name, shape):
            out = model(inputs[:1])
    except RuntimeError as exc:
        raise ValueError(f"{name} of shape {shape} is not a valid input of model: {exc}") from exc
    finally:
        model.train(was_training)
    if not isinstance(out, torch.Tensor) or out.ndim != 2 or out.shape[0] != 1:
        got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise ValueError(
            f"model must map {name} (examples along axis 0) to (batch, classes) logits, but one example of "
            f"{name} (shape {shape}) gave {got}; does {name} have an extra leading axis?"
        )


def _neuron_axis(output: Any, neuron_dim: int) -> int:
    axis = neuron_dim % output.ndim if -output.ndim <= neuron_dim < output.ndim else -1
    if axis <= 0:
        raise ValueError(
            f"neuron_dim={neuron_dim} is not a non-batch axis of the layer output "
            f"of shape {tuple(output.shape)}"
        )
    return axis


def _per_neuron(values: Any, axis: int, reduce: str) -> Any:
    """(batch, ..., N at ``axis``, ...) -> (batch, N) by a mean or a sum over every other axis."""
    moved = values.movedim(axis, 1).reshape(values.shape[0], values.shape[axis], -1)
    return moved.mean(dim=2) if reduce == "mean" else moved.sum(dim=2)


@contextlib.contextmanager
def _hooked(model: Any, layer: str, hook: Any) -> Iterator[None]:
    """Register a forward hook on ``layer`` and put the model in eval mode for the duration."""
    was_training = model.training
    model.eval()
    handle = model.get_submodule(layer).register_forward_hook(hook)
    try:
        yield
    finally:
        handle.remove()
        model.train(was_training)


def _check_output(output: Any) -> None:
    torch = _torch()
    if not isinstance(output, torch.Tensor):
        raise TypeError(
            f"the layer output must be a tensor, got {type(output).__name__}; "
            "hook a submodule that returns one"
        )


def _targets(target: Any, n: int, logits: Any, start: int) -> Any:
    """Target class of each example of the batch starting at ``start`` (predicted class if None)."""
    torch = _torch()
    if target is None:
        return logits.argmax(dim=1)
    return torch.as_tensor(target[start : start + logits.shape[0]], device=logits.device)


def _check_target(target: Any, n: int) -> np.ndarray | None:
    if target is None:
        return None
    arr = check_array(target, "target", dtype=int, ndim=(0, 1))
    if arr.ndim == 0:
        arr = np.full(n, int(arr), dtype=np.int64)
    if arr.shape != (n,):
        raise ValueError(f"target must be an int or have shape ({n},), got shape {arr.shape}")
    if np.any(arr < 0):
        raise ValueError("target classes must be >= 0")
    return arr


def _check_logits(logits: Any, target: np.ndarray | None) -> None:
    if logits.ndim != 2:
        raise ValueError(f"the model output must be (batch, classes) logits, got shape {tuple(logits.shape)}")
    if target is not None and np.any(target >= logits.shape[1]):
        raise ValueError(f"target classes must be < {logits.shape[1]} (the number of model outputs)")


def neuron_scores(
    model: Any,
    layer: Any,
    X: Any,
    method: str = "activation",
    target: Any = None,
    *,
    neuron_dim: int = 1,
    batch_size: int = 256,
) -> np.ndarray:
    r"""Per-example importance score of every neuron of ``layer``: a score matrix for `ScoreRule`.

    Parameters
    ----------
    model : torch.nn.Module
        A classifier returning (batch, classes) logits; evaluated in eval mode (its mode is restored
        afterwards).  One example of ``X`` is run first: an ``X`` that does not fit the model's first
        Linear / Conv layer, or that gives other than (1, classes) logits (e.g. ``X[None]``, an extra
        leading axis), is a ``ValueError`` naming ``X``.
    layer : str or torch.nn.Module
        The submodule whose output holds the neurons (``model.get_submodule(layer)``).
    X : array-like or torch.Tensor
        Inputs, examples along axis 0.
    method : {"activation", "attribution"}, default "activation"
        ``"activation"``: mean absolute activation of each neuron over the other axes (the spatial
        positions of a convolution channel, the tokens of a transformer).  ``"attribution"``:
        attribution patching, $\sum_{\text{positions}} a \cdot \partial z_t / \partial a$, the
        first-order estimate of the drop of the target logit $z_t$ when the neuron is
        zero-ablated (signed: positive supports the target; take ``np.abs`` for magnitudes).
    target : int or array-like of int, optional
        Target class (one for all examples or one per example) for ``"attribution"``; default:
        the predicted class.  Ignored by ``"activation"``.
    neuron_dim : int, default 1
        Axis of the layer output indexing the neurons.
    batch_size : int, default 256
        Examples per forward pass.

    Returns
    -------
    numpy.ndarray of float64, shape (n, N)
        ``N`` = size of the layer output along ``neuron_dim``.
    """
    torch = _torch()
    model = _check_model(model)
    name = _layer_name(model, layer)
    check_in_options(method, "method", _METHODS)
    neuron_dim = check_integer(neuron_dim, "neuron_dim")
    batch_size = check_integer(batch_size, "batch_size", minimum=1)
    inputs = _as_input(model, X)
    n = inputs.shape[0]
    tgt = _check_target(target, n)
    captured: dict[str, Any] = {}

    def hook(_module: Any, _inp: Any, output: Any) -> None:
        _check_output(output)
        if method == "attribution":
            output.retain_grad()
        captured["a"] = output

    out = []
    with _hooked(model, name, hook):
        for start in range(0, n, batch_size):
            batch = inputs[start : start + batch_size]
            if method == "activation":
                with torch.no_grad():
                    model(batch)
                act = captured["a"]
                out.append(_per_neuron(act.abs(), _neuron_axis(act, neuron_dim), "mean"))
                continue
            with torch.enable_grad():
                logits = model(batch)
                _check_logits(logits, tgt)
                act = captured["a"]
                if not act.requires_grad:
                    raise ValueError(
                        f"the output of layer {name!r} does not depend on trainable inputs; "
                        "attribution needs gradients through it"
                    )
                cls = _targets(tgt, n, logits, start)
                logits.gather(1, cls.reshape(-1, 1)).sum().backward()
            grad = act.grad
            out.append(_per_neuron((act * grad).detach(), _neuron_axis(act, neuron_dim), "sum"))
    model.zero_grad(set_to_none=True)
    return torch.cat(out).detach().cpu().double().numpy()


def _neuron_mask_shape(shape: tuple[int, ...], axis: int) -> tuple[int, ...]:
    """Shape that broadcasts a per-neuron vector along ``axis`` of a (batch, ...) tensor."""
    return tuple(size if i == axis else 1 for i, size in enumerate(shape))


def _mean_activation(model: Any, name: str, inputs: Any, batch_size: int) -> Any:
    """Per-element mean of the layer output over ``inputs`` (shape of one example's output)."""
    torch = _torch()
    captured: dict[str, Any] = {}

    def hook(_module: Any, _inp: Any, output: Any) -> None:
        _check_output(output)
        captured["a"] = output

    total = None
    with _hooked(model, name, hook), torch.no_grad():
        for start in range(0, inputs.shape[0], batch_size):
            model(inputs[start : start + batch_size])
            part = captured["a"].double().sum(dim=0)
            total = part if total is None else total + part
    return total / inputs.shape[0]


class AblationDiscovery:
    r"""Ablation-based circuit discovery: an expensive black box for `certify_circuit`.

    On a concept subset $T$, the importance of neuron $j$ is the mean drop of the
    target logit over $T$ when neuron $j$ alone is ablated (replaced by its mean
    activation, or by zero); the circuit is the ``top_k`` most important neurons (ties to the lower
    index) or those with importance ``>= threshold``.  With ``ablation="mean"`` and no
    ``reference``, the mean is taken over $T$ itself, so the rule does not decompose over
    examples: one forward pass of $T$ per neuron and per subsample (run it through
    ``executor=``).  Instances are picklable (model and layer name).

    Parameters
    ----------
    model : torch.nn.Module
        A classifier returning (batch, classes) logits.
    layer : str or torch.nn.Module
    target : int
        The concept class whose logit is explained.
    top_k : int, optional
    threshold : float, optional
        Exactly one of the two.
    ablation : {"mean", "zero"}, default "mean"
    reference : array-like or torch.Tensor, optional
        Data for the mean activation (default: the subset itself).
    neuron_dim : int, default 1
    batch_size : int, default 512
    """

    def __init__(
        self,
        model: Any,
        layer: Any,
        *,
        target: int,
        top_k: int | None = None,
        threshold: float | None = None,
        ablation: str = "mean",
        reference: Any = None,
        neuron_dim: int = 1,
        batch_size: int = 512,
    ) -> None:
        self.model = _check_model(model)
        self.layer = _layer_name(model, layer)
        self.target = check_integer(target, "target", minimum=0)
        if (top_k is None) == (threshold is None):
            raise ValueError("AblationDiscovery needs exactly one of top_k and threshold")
        self.top_k = None if top_k is None else check_integer(top_k, "top_k", minimum=1)
        self.threshold = None if threshold is None else float(check_array(threshold, "threshold", ndim=0))
        self.ablation = check_in_options(ablation, "ablation", _ABLATIONS)
        self.neuron_dim = check_integer(neuron_dim, "neuron_dim")
        self.batch_size = check_integer(batch_size, "batch_size", minimum=1)
        self.reference = None
        if reference is not None:
            ref = _as_input(self.model, reference, "reference")
            self.reference = _mean_activation(self.model, self.layer, ref, self.batch_size)

    def importance(self, X_subset: Any) -> np.ndarray:
        """Mean drop of the target logit over ``X_subset`` when each neuron is ablated: shape (N,)."""
        torch = _torch()
        inputs = _as_input(self.model, X_subset, "X_subset")
        if self.ablation == "zero":
            fill = None
        elif self.reference is not None:
            fill = self.reference
        else:
            fill = _mean_activation(self.model, self.layer, inputs, self.batch_size)
        state: dict[str, Any] = {"j": None}

        def hook(_module: Any, _inp: Any, output: Any) -> Any:
            _check_output(output)
            axis = _neuron_axis(output, self.neuron_dim)
            state["n"] = output.shape[axis]
            if state["j"] is None:
                return None
            keep = torch.ones(output.shape[axis], dtype=torch.bool, device=output.device)
            keep[state["j"]] = False
            keep = keep.reshape(_neuron_mask_shape(tuple(output.shape), axis))
            value = (
                torch.zeros((), dtype=output.dtype, device=output.device) if fill is None else fill.to(output)
            )
            return torch.where(keep, output, value)

        def target_logit() -> Any:
            parts = []
            for start in range(0, inputs.shape[0], self.batch_size):
                logits = self.model(inputs[start : start + self.batch_size])
                _check_logits(logits, np.array([self.target]))
                parts.append(logits[:, self.target].double())
            return torch.cat(parts)

        with _hooked(self.model, self.layer, hook), torch.no_grad():
            base = target_logit()
            drops = []
            for j in range(state["n"]):
                state["j"] = j
                drops.append((base - target_logit()).mean())
        return torch.stack(drops).cpu().numpy()

    def __call__(self, X_subset: Any) -> np.ndarray:
        """The circuit on ``X_subset``: a boolean mask of shape (N,)."""
        imp = self.importance(X_subset)
        if self.top_k is not None:
            if self.top_k > imp.size:
                raise ValueError(f"top_k={self.top_k} exceeds the {imp.size} neurons of layer {self.layer!r}")
            mask = np.zeros(imp.size, dtype=bool)
            mask[np.lexsort((np.arange(imp.size), -imp))[: self.top_k]] = True
            return mask
        return imp >= self.threshold
