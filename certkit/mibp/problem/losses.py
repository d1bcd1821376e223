"""The training losses: label checks and the derivative ``dℓ/df`` of each loss at the network's outputs."""

from __future__ import annotations

from typing import Any

import numpy as np

from certkit._validation import check_array, check_same_length

__all__ = ["check_labels", "label_classes", "loss_gradient_output", "sigmoid", "softmax"]


def check_labels(
    y: Any, loss: str, n_outputs: int, n: int, *, name: str = "y", x_name: str = "X", zero_one: bool = False
) -> np.ndarray:
    """Validate labels for ``loss`` and an ``n_outputs``-output network.

    Binary hinge (one output): labels in {-1, +1}.  Multi-class hinge and cross-entropy (``C >= 2``
    outputs): integer labels in ``0 .. C-1``.  Binary cross-entropy (one output): labels in {0, 1}.
    MSE: real targets of shape ``(n,)`` (one output) or ``(n, C)``.  ``loss="classes"``: the classes
    `MLP.predict` returns, as for the hinge loss (to score predictions, whatever the training loss); with
    ``zero_one=True`` (a model trained with binary cross-entropy) one output also takes {0, 1} or bool
    labels, read as -1, +1.  Boolean labels count as {0, 1} for binary cross-entropy.
    ``name`` / ``x_name`` name the labels and inputs in errors.
    """
    if loss == "mse":
        y = check_array(y, name, ndim=(1, 2))
        if y.ndim == 1:
            y = y[:, None]
        if y.shape != (n, n_outputs):
            raise ValueError(
                f"{name} must have shape ({n},) or ({n}, {n_outputs}) for the MSE loss, got {y.shape}"
            )
        return y
    if loss == "cross_entropy" and n_outputs < 2:
        raise ValueError(
            "loss='cross_entropy' needs a network with at least 2 outputs (one logit per class); "
            "for one output use loss='binary_cross_entropy' with labels in {0, 1}"
        )
    if loss == "binary_cross_entropy" and n_outputs != 1:
        raise ValueError(
            f"loss='binary_cross_entropy' needs a network with one output, this one has {n_outputs}; "
            "use loss='cross_entropy' with labels 0..C-1"
        )
    y = check_array(y, name, ndim=1, dtype=None)
    check_same_length((x_name, range(n)), (name, y))
    binary01 = loss == "binary_cross_entropy"
    zero_one = zero_one and loss == "classes" and n_outputs == 1
    if y.dtype == np.bool_ and (binary01 or zero_one):
        y = y.astype(np.float64)
    if zero_one and np.issubdtype(y.dtype, np.number) and y.size and np.all(np.isin(y, (0, 1))):
        return 2.0 * y.astype(np.float64) - 1.0  # {0, 1} as predict() returns them: -1, +1
    if y.dtype == np.bool_ or not (np.issubdtype(y.dtype, np.integer) or np.issubdtype(y.dtype, np.floating)):
        want = "0 or 1" if binary01 else "-1 or +1" if n_outputs == 1 else f"integers in 0..{n_outputs - 1}"
        raise TypeError(f"labels {name} must be real numbers ({want}), got dtype {y.dtype}")
    if loss in ("hinge", "cross_entropy"):
        what = f"the {'binary' if n_outputs == 1 else 'multi-class'} {loss.replace('_', '-')} loss"
    elif binary01:
        what = "the binary cross-entropy loss"
    else:
        what = "the classes predict() returns"
    what += " (one output)" if n_outputs == 1 else f" ({n_outputs} outputs)"
    if binary01:
        if not np.all(np.isin(y, (0, 1))):
            raise ValueError(f"labels {name} must be 0 or 1 for {what}")
        return y.astype(np.float64)
    if n_outputs == 1:
        if not np.all(np.isin(y, (-1, 1))):
            values = np.unique(y)
            if values.size > 2:
                raise ValueError(
                    f"labels {name} have {values.size} classes but the network has one output; give it one "
                    f"output per class (e.g. MLP.random([d, h, {values.size}])) with integer labels "
                    "0..C-1 and loss='cross_entropy' or the multi-class hinge"
                )
            hint = ""
            if np.all(np.isin(values, (0, 1))):
                hint = "; map {0, 1} labels with 2*y - 1" + (
                    ", or use loss='binary_cross_entropy'" if loss == "hinge" else ""
                )
            raise ValueError(f"labels {name} must be -1 or +1 for {what}{hint}")
        return y.astype(np.float64)
    if not np.all(y == np.round(y)) or y.min() < 0 or y.max() >= n_outputs:
        raise ValueError(f"labels {name} must be integers in 0..{n_outputs - 1} for {what}")
    return y.astype(np.int64)


def softmax(f: np.ndarray) -> np.ndarray:
    """Row-wise softmax of ``f`` (n, C), computed as ``exp(f - max f) / Σ exp(f - max f)``."""
    e = np.exp(f - f.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def sigmoid(f: np.ndarray) -> np.ndarray:
    """``1 / (1 + exp(-f))`` without overflow."""
    e = np.exp(-np.abs(f))
    return np.where(f >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def loss_gradient_output(f: np.ndarray, y: np.ndarray, loss: str) -> np.ndarray:
    """``dℓ/df`` for outputs ``f`` (n, C).

    Binary hinge ``max(0, 1 - y f)``: ``-y`` where ``1 - y f > 0``, else 0 (so 0 at the kink).
    Multi-class (Weston-Watkins) hinge ``Σ_{c≠y} max(0, 1 + f_c - f_y)``: each strictly
    positive term contributes +1 to ``f_c`` and -1 to ``f_y`` (0 at the kink).  MSE
    ``Σ_c (f_c - y_c)^2``: ``2 (f - y)``.  Cross-entropy ``-log softmax(f)_y``: ``softmax(f) - onehot(y)``.
    Binary cross-entropy with logits ``-y log σ(f) - (1 - y) log(1 - σ(f))``: ``σ(f) - y``.
    """
    if loss == "mse":
        return 2.0 * (f - y)
    if loss == "cross_entropy":
        g = softmax(f)
        g[np.arange(len(f)), y] -= 1.0
        return g
    if loss == "binary_cross_entropy":
        return sigmoid(f) - y[:, None]
    if f.shape[1] == 1:
        active = (1.0 - y * f[:, 0]) > 0
        return (-y * active)[:, None]
    n = len(f)
    fy = f[np.arange(n), y]
    active = (1.0 + f - fy[:, None]) > 0
    active[np.arange(n), y] = False
    g = active.astype(np.float64)
    g[np.arange(n), y] = -active.sum(axis=1)
    return g


def label_classes(loss: str, n_outputs: int) -> np.ndarray:
    """The label values of a classification loss: {-1, +1} (binary hinge), {0, 1} (binary cross-entropy),
    ``0..C-1`` otherwise."""
    if loss == "binary_cross_entropy":
        return np.array([0, 1])
    if n_outputs == 1:
        return np.array([-1.0, 1.0])
    return np.arange(n_outputs)
