"""Uniform access to a user model: NumPy callables and torch modules, batched, NumPy float64 out."""

from __future__ import annotations

from typing import Any

import numpy as np

from certkit._optional import require
from certkit._torch_checks import first_layer_checked
from certkit._validation import as_numpy, check_array, check_in_options, check_integer

__all__ = [
    "ModelWrapper",
    "as_probabilities",
    "as_regression",
    "check_model_output",
    "is_torch_module",
    "softmax",
]

OUTPUTS = ("probabilities", "logits")


def is_torch_module(model: Any) -> bool:
    """True for a ``torch.nn.Module`` (checked without importing torch)."""
    return any(cls.__module__.startswith("torch.nn") and cls.__name__ == "Module"
               for cls in type(model).__mro__)


def softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise softmax in float64."""
    z = logits - logits.max(axis=1, keepdims=True)
    np.exp(z, out=z)
    z /= z.sum(axis=1, keepdims=True)
    return z


def import_torch() -> Any:
    """PyTorch, or an ImportError naming the `torch` extra."""
    return require("torch", extra="torch", purpose="a torch model")


def callable_hint(model: Any) -> str:
    """For an uncallable ``model`` with a prediction method (a scikit-learn estimator), the fix to suggest:
    ``model.predict_proba`` for a classifier (class probabilities), ``model.predict`` for a regressor."""
    for method in ("predict_proba", "predict"):
        if callable(getattr(model, method, None)):
            return f"; pass its method instead: model.{method}"
    return ""


class ModelWrapper:
    """Evaluate ``model`` on float64 NumPy inputs in batches and return float64 NumPy outputs.

    Parameters
    ----------
    model : callable or torch.nn.Module
        A NumPy callable ``(n, ...) -> (n, ...)`` or a torch module; torch modules run under
        ``torch.no_grad()`` in eval mode (their training flag is restored afterwards) on ``device``,
        with inputs cast to the dtype of their parameters (float32 if they have none).
    batch_size : int
        Largest number of inputs per call.
    device : str or torch.device
        Where a torch module runs (default ``"cpu"``).
    """

    def __init__(self, model: Any, *, batch_size: int = 1024, device: Any = "cpu") -> None:
        if not callable(model):
            raise TypeError("model must be callable (a function or a torch.nn.Module), "
                            f"got {type(model).__name__}{callable_hint(model)}")
        self.model = model
        self.batch_size = check_integer(batch_size, "batch_size", minimum=1)
        self.device = device
        self.torch = is_torch_module(model)
        #: Number of inputs evaluated so far (forward passes), for cost accounting.
        self.n_forward = 0

    def __call__(self, X: np.ndarray) -> np.ndarray:
        """Model outputs at ``X``: finite float64, one row per input (checked batch by batch)."""
        n = X.shape[0]
        self.n_forward += n
        if self.torch:
            return self._torch_call(X)
        outs = []
        for i in range(0, n, self.batch_size):
            xb = X[i:i + self.batch_size]
            outs.append(check_model_output(as_numpy(self.model(xb), "model output"), xb.shape[0]))
        return np.concatenate(outs, axis=0)

    def _torch_call(self, X: np.ndarray) -> np.ndarray:
        torch = import_torch()
        param = next(iter(self.model.parameters()), None)
        dtype = param.dtype if param is not None else torch.float32
        was_training = self.model.training
        self.model.eval()
        outs = []
        try:
            with torch.no_grad(), first_layer_checked(self.model, "X", tuple(X.shape)):
                for i in range(0, X.shape[0], self.batch_size):
                    xb = torch.as_tensor(X[i:i + self.batch_size], dtype=dtype, device=self.device)
                    raw = self.model(xb)
                    if not isinstance(raw, torch.Tensor) or raw.is_complex():
                        raise TypeError("model output must be a real tensor, got "
                                        f"{getattr(raw, 'dtype', type(raw).__name__)}")
                    outs.append(check_model_output(raw.detach().to("cpu", torch.float64).numpy(),
                                                   xb.shape[0]))
        finally:
            self.model.train(was_training)
        return np.concatenate(outs, axis=0)


def check_model_output(raw: Any, n: int) -> np.ndarray:
    """Model output for ``n`` inputs: a finite real array with ``n`` rows, as float64.

    Outputs are validated like inputs: NaN/inf, complex, boolean, string or object outputs and a
    wrong number of rows are errors naming the model output, never coerced.
    """
    arr = check_array(raw, "model output", allow_empty=True)
    if arr.ndim == 0 or arr.shape[0] != n:
        raise ValueError(f"model output must have one row per input ({n}), got shape {arr.shape}")
    return arr


def as_probabilities(raw: np.ndarray, n: int, output: str) -> np.ndarray:
    """Validate model output as class probabilities ``(n, K)``; apply softmax to logits."""
    check_in_options(output, "output", OUTPUTS)
    arr = check_array(raw, "model output", ndim=2)
    if arr.shape[0] != n:
        raise ValueError(f"model output has {arr.shape[0]} rows for {n} inputs")
    if arr.shape[1] < 2:
        raise ValueError(f"model output must have one column per class (K >= 2), got shape {arr.shape}")
    if output == "logits":
        return softmax(arr.copy())
    sums = arr.sum(axis=1)
    if np.any(arr < -1e-6) or np.any(arr > 1 + 1e-6) or np.any(np.abs(sums - 1.0) > 1e-4):
        raise ValueError(
            "model output must be class probabilities (entries in [0, 1], rows summing to 1); "
            f"got row sums in [{sums.min():.4g}, {sums.max():.4g}] and entries in "
            f"[{arr.min():.4g}, {arr.max():.4g}]. "
            "Pass output='logits' if the model returns logits."
        )
    return np.clip(arr, 0.0, 1.0)


def as_regression(raw: np.ndarray, n: int) -> np.ndarray:
    """Validate regression model output: ``(n,)`` or ``(n, 1)`` -> ``(n,)``."""
    arr = check_array(raw, "model output", ndim=(1, 2))
    if arr.ndim == 2:
        if arr.shape[1] != 1:
            raise ValueError(f"a regression model must return shape (n,) or (n, 1), got {arr.shape}")
        arr = arr[:, 0]
    if arr.shape[0] != n:
        raise ValueError(f"model output has {arr.shape[0]} rows for {n} inputs")
    return arr
