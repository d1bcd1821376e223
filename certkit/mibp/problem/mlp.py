"""The ReLU multilayer perceptron whose training MIBP certifies, and its plain gradient descent."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from certkit._typing import RNGLike
from certkit._validation import (
    check_allocation,
    check_array,
    check_in_options,
    check_integer,
    check_positive,
    check_rng,
)
from certkit.mibp.problem.losses import check_labels, loss_gradient_output
from certkit.mibp.problem.recipe import LOSSES, Recipe, make_recipe

__all__ = ["INITS", "LOSSES", "MLP", "check_sizes"]

INITS = ("he", "torch")


class MLP:
    """A fully connected ReLU network ``x -> W_L relu(... relu(W_1 x + b_1) ...) + b_L`` in float64.

    Parameters
    ----------
    weights : sequence of 2-D arrays
        ``weights[l]`` has shape ``(sizes[l + 1], sizes[l])`` (PyTorch's ``nn.Linear`` layout).
    biases : sequence of 1-D arrays
        ``biases[l]`` has shape ``(sizes[l + 1],)``.

    Notes
    -----
    Every hidden layer is followed by a ReLU, the output layer is linear.  The
    ReLU derivative at 0 is taken as 0 (as in PyTorch).  The same class holds
    lower and upper parameter bounds in `CertifiedTrainingResult`.
    """

    def __init__(self, weights: Sequence[Any], biases: Sequence[Any]) -> None:
        for name, value in (("weights", weights), ("biases", biases)):
            if isinstance(value, (np.ndarray, str, bytes)) or not isinstance(value, Sequence):
                raise TypeError(
                    f"{name} must be a sequence (one array per layer), got {type(value).__name__}"
                )
        weights = list(weights)
        biases = list(biases)
        if not weights:
            raise ValueError("weights must contain at least one layer")
        if len(weights) != len(biases):
            raise ValueError(f"weights has {len(weights)} layers but biases has {len(biases)}")
        ws, bs = [], []
        for i, (w, b) in enumerate(zip(weights, biases)):
            w = check_array(w, f"weights[{i}]", ndim=2).copy()
            b = check_array(b, f"biases[{i}]", ndim=1).copy()
            if b.shape != (w.shape[0],):
                raise ValueError(
                    f"biases[{i}] has {b.size} entries but weights[{i}] has {w.shape[0]} rows (outputs); "
                    "weights[l] must have shape (sizes[l + 1], sizes[l]) and biases[l] (sizes[l + 1],)"
                )
            if ws and w.shape[1] != ws[-1].shape[0]:
                raise ValueError(
                    f"weights[{i}] has {w.shape[1]} inputs but layer {i - 1} has {ws[-1].shape[0]} outputs"
                )
            w.setflags(write=False)
            b.setflags(write=False)
            ws.append(w)
            bs.append(b)
        self.weights: tuple[np.ndarray, ...] = tuple(ws)
        self.biases: tuple[np.ndarray, ...] = tuple(bs)

    # ------------------------------------------------------------------ construction
    @classmethod
    def random(cls, sizes: Sequence[int], *, init: str = "he", rng: RNGLike = None) -> MLP:
        """Randomly initialised network with layer widths ``sizes`` (e.g. ``[2, 8, 1]``).

        Parameters
        ----------
        sizes : sequence of int
            Layer widths, input first (at least an input and an output width, each >= 1).
        init : {"he", "torch"}
            ``"he"``: weights uniform in ``±sqrt(6 / fan_in)`` (He-uniform).  ``"torch"``: PyTorch's
            ``nn.Linear`` default (``kaiming_uniform_`` with ``a = sqrt(5)``), weights uniform in
            ``±1 / sqrt(fan_in)``, as in the public FullCert code.  Biases are uniform in
            ``±1 / sqrt(fan_in)`` for both.
        rng : None, int or numpy.random.Generator
            Source of the draws (an int gives the same network on every call).
        """
        init = check_in_options(init, "init", INITS)
        sizes = check_sizes(sizes)
        gen = check_rng(rng)
        ws, bs = [], []
        for fan_in, fan_out in itertools.pairwise(sizes):
            scale = np.sqrt(6.0 / fan_in) if init == "he" else 1.0 / np.sqrt(fan_in)
            ws.append(gen.uniform(-1, 1, (fan_out, fan_in)) * scale)
            bs.append(gen.uniform(-1, 1, fan_out) / np.sqrt(fan_in))
        return cls(ws, bs)

    @classmethod
    def from_torch(cls, module: Any) -> MLP:
        """Read an ``nn.Sequential`` of ``Linear`` layers separated by ``ReLU`` (ending with ``Linear``)."""
        try:
            from torch import nn
        except ImportError as exc:  # pragma: no cover - torch is in the test environment
            raise ImportError('MLP.from_torch needs PyTorch: pip install "certkit[torch]"') from exc
        if not isinstance(module, nn.Sequential):
            raise TypeError(f"module must be a torch.nn.Sequential, got {type(module).__name__}")
        layers = list(module)
        ws, bs = [], []
        for i, layer in enumerate(layers):
            want_linear = i % 2 == 0
            if want_linear and not isinstance(layer, nn.Linear):
                raise ValueError(f"module[{i}] must be nn.Linear (Linear and ReLU alternate), got {layer}")
            if not want_linear and not isinstance(layer, nn.ReLU):
                raise ValueError(f"module[{i}] must be nn.ReLU (Linear and ReLU alternate), got {layer}")
            if want_linear:
                ws.append(layer.weight.detach().cpu().double().numpy())
                bias = layer.bias
                bs.append(
                    np.zeros(layer.out_features) if bias is None else bias.detach().cpu().double().numpy()
                )
        if not layers or not isinstance(layers[-1], nn.Linear):
            raise ValueError("module must end with an nn.Linear layer")
        return cls(ws, bs)

    def to_torch(self) -> Any:
        """An equivalent float64 ``nn.Sequential``."""
        try:
            import torch
            from torch import nn
        except ImportError as exc:  # pragma: no cover
            raise ImportError('MLP.to_torch needs PyTorch: pip install "certkit[torch]"') from exc
        layers: list[Any] = []
        for i, (w, b) in enumerate(zip(self.weights, self.biases)):
            lin = nn.Linear(w.shape[1], w.shape[0]).double()
            with torch.no_grad():
                lin.weight.copy_(torch.from_numpy(np.array(w)))
                lin.bias.copy_(torch.from_numpy(np.array(b)))
            layers.append(lin)
            if i < self.n_layers - 1:
                layers.append(nn.ReLU())
        return nn.Sequential(*layers)

    # ------------------------------------------------------------------ structure
    @property
    def sizes(self) -> tuple[int, ...]:
        """Layer widths, input first."""
        return (self.weights[0].shape[1], *(w.shape[0] for w in self.weights))

    @property
    def n_layers(self) -> int:
        """Number of linear layers."""
        return len(self.weights)

    @property
    def n_params(self) -> int:
        """Number of scalar parameters."""
        return sum(w.size + b.size for w, b in zip(self.weights, self.biases))

    def to_vector(self) -> np.ndarray:
        """All parameters flattened: layer by layer, ``W.ravel()`` then ``b``."""
        return np.concatenate([np.concatenate([w.ravel(), b]) for w, b in zip(self.weights, self.biases)])

    @classmethod
    def from_vector(cls, vector: Any, sizes: Sequence[int]) -> MLP:
        """Inverse of `to_vector` for the layer widths ``sizes``."""
        vector = check_array(vector, "vector", ndim=1)
        sizes = check_sizes(sizes)
        need = sum((fan_in + 1) * fan_out for fan_in, fan_out in itertools.pairwise(sizes))
        if vector.size != need:
            raise ValueError(f"vector has {vector.size} entries but sizes {sizes} need {need}")
        ws, bs, pos = [], [], 0
        for fan_in, fan_out in itertools.pairwise(sizes):
            ws.append(vector[pos : pos + fan_in * fan_out].reshape(fan_out, fan_in))
            pos += fan_in * fan_out
            bs.append(vector[pos : pos + fan_out])
            pos += fan_out
        return cls(ws, bs)

    def __repr__(self) -> str:
        return f"MLP(sizes={list(self.sizes)})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MLP):
            return NotImplemented
        return self.sizes == other.sizes and bool(np.array_equal(self.to_vector(), other.to_vector()))

    __hash__ = None  # type: ignore[assignment]

    # ------------------------------------------------------------------ computation
    def forward(self, X: Any) -> np.ndarray:
        """Network outputs for the rows of ``X``: shape ``(n, sizes[-1])``."""
        X = check_array(X, "X", ndim=2, shape=(None, self.sizes[0]))
        return self._forward(X)[0][-1]

    __call__ = forward

    def predict(self, X: Any) -> np.ndarray:
        """Class predictions: ``sign(f)`` in {-1, +1} for one output (0 counts as +1), else ``argmax``."""
        out = self.forward(X)
        if out.shape[1] == 1:
            return np.where(out[:, 0] >= 0, 1, -1)
        return np.argmax(out, axis=1)

    def _forward(self, X: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray]]:
        acts = [X]
        pre = []
        h = X
        for i, (w, b) in enumerate(zip(self.weights, self.biases)):
            z = h @ w.T + b
            pre.append(z)
            h = np.maximum(z, 0.0) if i < self.n_layers - 1 else z
            acts.append(h)
        return acts, pre

    def _finite_forward(self, X: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """`_forward`, raising `_OutputOverflow` when the outputs are not finite."""
        with np.errstate(over="ignore", invalid="ignore"):
            acts, pre = self._forward(X)
        if not np.all(np.isfinite(acts[-1])):
            raise _OutputOverflow(
                "the network's outputs on X are not finite: its parameters (largest |θ| = "
                f"{np.max(np.abs(self.to_vector())):.3g}) or X overflow the float64 range"
            )
        return acts, pre

    def gradients(self, X: Any, y: Any, *, loss: str = "hinge") -> MLP:
        """Gradient of the mean loss ``J = (1/n) Σ_k ℓ(f(x_k), y_k)``, as an MLP-shaped container."""
        X = check_array(X, "X", ndim=2, shape=(None, self.sizes[0]))
        loss = check_in_options(loss, "loss", LOSSES)
        y = check_labels(y, loss, self.sizes[-1], len(X))
        return MLP.from_vector(self._gradient_vector(X, y, loss), self.sizes)

    def _gradient_vector(self, X: np.ndarray, y: np.ndarray, loss: str) -> np.ndarray:
        """`gradients` as a vector, for validated ``X`` and ``y`` (as `check_labels` returns them)."""
        acts, pre = self._finite_forward(X)
        g = loss_gradient_output(acts[-1], y, loss) / len(X)
        parts: list[np.ndarray] = []
        for layer in range(self.n_layers - 1, -1, -1):
            parts[:0] = [(g.T @ acts[layer]).ravel(), g.sum(axis=0)]
            if layer > 0:
                g = (g @ self.weights[layer]) * (pre[layer - 1] > 0)
        return np.concatenate(parts)

    def _clipped_gradient_vector(self, X: np.ndarray, y: np.ndarray, recipe: Recipe) -> np.ndarray:
        """The mean of the per-sample gradients clipped by ``recipe`` (`Recipe.clip_rows`), as a vector;
        the per-sample gradients are formed in chunks of rows whose size depends on the network alone (the
        sum's order, and so its rounding, is the same on every machine)."""
        acts, pre = self._finite_forward(X)
        g = loss_gradient_output(acts[-1], y, recipe.loss)  # per sample, not divided by n
        deltas: list[np.ndarray] = [g]  # dℓ/dz of every layer, the output's first
        for layer in range(self.n_layers - 1, 0, -1):
            g = (g @ self.weights[layer]) * (pre[layer - 1] > 0)
            deltas.insert(0, g)
        total = np.zeros(self.n_params)
        step = max(1, 2**22 // self.n_params)  # 32 MiB per-sample arrays
        for start in range(0, len(X), step):
            rows = slice(start, start + step)
            parts = []
            for layer, delta in enumerate(deltas):
                d, a = delta[rows], acts[layer][rows]
                parts += [(d[:, :, None] * a[:, None, :]).reshape(len(d), -1), d]
            total += recipe.clip_rows(np.concatenate(parts, axis=1)).sum(axis=0)
        return total / len(X)

    def gd_step(self, X: Any, y: Any, *, loss: str = "hinge", learning_rate: float = 0.1) -> MLP:
        """One full-batch gradient-descent step ``θ - λ ∇J(θ)``; returns a new MLP."""
        lr = check_positive(learning_rate, "learning_rate")
        with np.errstate(over="ignore", invalid="ignore"):
            grad = self.gradients(X, y, loss=loss)
            ws = [w - lr * g for w, g in zip(self.weights, grad.weights)]
            bs = [b - lr * g for b, g in zip(self.biases, grad.biases)]
        if not all(np.all(np.isfinite(a)) for a in (*ws, *bs)):
            raise ValueError(
                f"training overflowed: a gradient-descent step with learning_rate={lr:g} made the parameters "
                "non-finite; use a smaller learning_rate (or fewer epochs, or scaled inputs)"
            )
        return MLP(ws, bs)

    def train(
        self,
        X: Any,
        y: Any,
        *,
        loss: str = "hinge",
        epochs: int = 1,
        learning_rate: float | Sequence[float] | Callable[[int], float] = 0.1,
        batch_size: int | None = None,
        shuffle: bool = False,
        drop_last: bool = False,
        momentum: float = 0.0,
        weight_decay: float = 0.0,
        l1_penalty: float = 0.0,
        clip_value: float | None = None,
        clip_norm: float | None = None,
        rng: RNGLike = None,
    ) -> list[MLP]:
        """Train with stochastic gradient descent; returns the models after epochs ``0, 1, ..., epochs``.

        The options are PyTorch's: ``torch.optim.SGD(lr, momentum=, weight_decay=)`` on the mean loss of each
        batch of a ``DataLoader(batch_size=, shuffle=, drop_last=)`` (see `certkit.mibp.problem.recipe`).

        Parameters
        ----------
        X : array (n, d)
        y : array
            Labels for ``loss`` (see `certified_training`).
        loss : {"hinge", "mse", "cross_entropy", "binary_cross_entropy"}
        epochs : int
        learning_rate : float, sequence or callable
            A constant rate, one rate per gradient step, or ``step -> rate`` (steps counted from 0;
            `InverseDecay` gives ``lr / (1 + decay * step)`` with a floor).
        batch_size : int, optional
            Rows per step (None: full batch).
        shuffle : bool
            A new order of the rows every epoch, drawn from ``rng``.
        drop_last : bool
            Drop each epoch's last incomplete batch.
        momentum : float
            Heavy-ball momentum in ``[0, 1)``.
        weight_decay : float
            L2 coefficient added to the gradient.
        l1_penalty : float
            λ₁ of an L1 penalty: ``λ₁ sign(θ)`` added to the gradient.
        clip_value, clip_norm : float, optional
            Per-sample gradient clipping by value or by ℓ2 norm (at most one; see
            `certkit.mibp.problem.recipe`).
        rng : None, int or numpy.random.Generator
            Source of the shuffled order.
        """
        X = check_array(X, "X", ndim=2, shape=(None, self.sizes[0]))
        loss = check_in_options(loss, "loss", LOSSES)
        y = check_labels(y, loss, self.sizes[-1], len(X))
        recipe = make_recipe(
            len(X),
            loss=loss,
            epochs=epochs,
            learning_rate=learning_rate,
            batch_size=batch_size,
            shuffle=shuffle,
            drop_last=drop_last,
            momentum=momentum,
            weight_decay=weight_decay,
            rng=rng,
            l1_penalty=l1_penalty,
            clip_value=clip_value,
            clip_norm=clip_norm,
        )
        return self.run(X, y, recipe)

    def run(self, X: np.ndarray, y: np.ndarray, recipe: Recipe) -> list[MLP]:
        """Train by ``recipe`` on validated ``X`` and ``y`` (as `check_labels` returns them).

        Returns the models after epochs ``0, 1, ..., recipe.epochs``.
        """
        check_allocation(
            8.0 * self.n_params * (recipe.epochs + 1.0), "epochs", recipe.epochs, what="the trained models"
        )
        path = [self]
        for step, theta in enumerate(self.steps(X, y, recipe)):
            if (step + 1) % recipe.steps_per_epoch == 0:
                path.append(MLP.from_vector(theta, self.sizes))
        return path

    def steps(self, X: np.ndarray, y: np.ndarray, recipe: Recipe) -> Iterator[np.ndarray]:
        """The parameter vector after every gradient step of ``recipe`` (the run of `run`), in order, on
        validated ``X`` and ``y``."""
        if recipe.loss == "mse" and y.ndim == 1:
            y = y[:, None]
        theta, velocity = self.to_vector(), None
        model = self
        for step, rows in enumerate(recipe.batches):
            try:
                if recipe.clips:
                    grad = model._clipped_gradient_vector(X[rows], y[rows], recipe)
                else:
                    grad = model._gradient_vector(X[rows], y[rows], recipe.loss)
            except _OutputOverflow as exc:
                if step == 0:
                    raise
                raise ValueError(
                    f"training overflowed: after {step} gradient step(s) ({recipe.describe()}) {exc}; use a "
                    "smaller learning_rate (or fewer epochs)"
                ) from exc
            with np.errstate(over="ignore", invalid="ignore"):
                theta, velocity = recipe.update(theta, velocity, grad, step)
            if not np.all(np.isfinite(theta)):
                raise ValueError(
                    f"training overflowed: gradient step {step} ({recipe.describe()}) made the parameters "
                    "non-finite; use a smaller learning_rate (or fewer epochs, or scaled inputs)"
                )
            model = MLP.from_vector(theta, self.sizes)
            if step == recipe.n_steps - 1:  # the trained model's outputs must be finite too
                try:
                    model._finite_forward(X)
                except _OutputOverflow as exc:
                    raise ValueError(
                        f"training overflowed: after {recipe.n_steps} gradient step(s) ({recipe.describe()}) "
                        f"{exc}; use a smaller learning_rate (or fewer epochs)"
                    ) from exc
            yield theta


class _OutputOverflow(ValueError):
    """The network's outputs are not finite (raised by `MLP.gradients`)."""


def check_sizes(sizes: Any) -> list[int]:
    """Layer widths: a sequence of at least two positive integers whose parameters fit in memory."""
    if isinstance(sizes, (str, bytes)) or not isinstance(sizes, (Sequence, np.ndarray)):
        raise TypeError(
            f"sizes must be a sequence of layer widths (e.g. [2, 8, 1]), got {type(sizes).__name__}"
        )
    sizes = [check_integer(s, "sizes[i]", minimum=1) for s in sizes]
    if len(sizes) < 2:
        raise ValueError(f"sizes must list at least an input and an output width, got {sizes}")
    n_params = sum((float(a) + 1.0) * float(b) for a, b in itertools.pairwise(sizes))
    check_allocation(8.0 * n_params, "sizes", sizes, what="the network's parameters")
    return sizes
