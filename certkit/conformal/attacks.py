"""Attacks on smoothed conformal predictors (torch)."""

from __future__ import annotations

from typing import Any

import numpy as np

from certkit._torch_checks import first_layer_checked
from certkit._typing import RNGLike
from certkit._validation import (
    check_in_options,
    check_integer,
    check_nonnegative,
    check_positive,
    seed_from_rng,
)
from certkit.conformal._checks import check_inputs, check_labels
from certkit.conformal._model import OUTPUTS, import_torch, is_torch_module

__all__ = ["smoothed_pgd"]

#: Most noisy forward and backward passes one attack runs (more take hours).
_MAX_PASSES = 1e10


def _is_logits(raw: Any, output: str) -> bool:
    if output != "auto":
        return output == "logits"
    with import_torch().no_grad():
        is_prob = bool((raw >= 0).all() and (raw <= 1).all() and ((raw.sum(dim=1) - 1).abs() < 1e-4).all())
    return not is_prob


def _forward(model: Any, inputs: Any, torch: Any) -> Any:
    """The model's output at ``inputs``: a finite, differentiable ``(n, K)`` tensor, or a clear error."""
    try:
        raw = model(inputs)
    except Exception as exc:
        if is_torch_module(model):
            raise
        raise TypeError(
            f"model must be a torch module or a callable on torch tensors (smoothed_pgd needs "
            f"gradients); calling it on a tensor failed: {exc}"
        ) from exc
    if not isinstance(raw, torch.Tensor):
        raise TypeError(
            "model must return a torch tensor (smoothed_pgd needs gradients), got "
            f"{type(raw).__name__}; wrap a NumPy model in a torch.nn.Module"
        )
    if raw.ndim != 2 or raw.shape[0] != inputs.shape[0] or raw.shape[1] < 2:
        raise ValueError(
            f"model output must have shape (n, K) with K >= 2 for {inputs.shape[0]} inputs, "
            f"got {tuple(raw.shape)}"
        )
    if not bool(torch.isfinite(raw).all()):
        raise ValueError("model output must be finite (no NaN or inf)")
    if not raw.requires_grad:
        raise TypeError(
            "model output does not depend differentiably on its input (requires_grad is "
            "False); smoothed_pgd needs a differentiable torch model"
        )
    return raw


def smoothed_pgd(
    model: Any,
    X: Any,
    y: Any,
    radius: float,
    sigma: float,
    *,
    steps: int = 20,
    n_noise: int = 16,
    step_size: float | None = None,
    output: str = "auto",
    clip: tuple[float, float] | None = None,
    batch_size: int = 256,
    device: Any = "cpu",
    rng: RNGLike = None,
) -> np.ndarray:
    r"""Expectation-over-noise PGD in the ℓ2 ball against the smoothed true-label probability.

    Maximises $-\log \frac{1}{N}\sum_{j=1}^{N} \pi_y(x + \delta + \varepsilon_j)$ over
    $\|\delta\|_2 \le r$ with $N$ = ``n_noise`` fresh Gaussian draws
    $\varepsilon_j \sim N(0, \sigma^2 I)$ at every step (SmoothAdv-style EOT), i.e. it lowers
    the smoothed THR conformity score of the true label, the event every smoothing-based conformal
    method thresholds.  Normalised-gradient steps, then projection onto the ball (and onto ``clip``).
    The returned points are evaluated by the conformal predictors with their own fresh noise, which the
    attack never sees.

    Parameters
    ----------
    model : torch.nn.Module or callable
        Differentiable torch model mapping a float tensor ``(n, ...)`` to probabilities (or logits
        with ``output="logits"``), shape ``(n, K)``.
    X : array-like or torch.Tensor, shape (n, ...)
        Clean inputs.
    y : array-like of int, shape (n,)
        True labels in ``[0, K)`` (checked against the model's first output).
    radius : float
        ℓ2 radius $r \ge 0$ (``0`` returns ``X`` unchanged).
    sigma : float
        Standard deviation of the smoothing noise, ``> 0``.
    steps : int, default 20
        PGD iterations.
    n_noise : int, default 16
        Noise draws per step (expectation over transformation).
    step_size : float, optional
        ℓ2 length of each step; default ``2.5 * radius / steps``.
    output : {"auto", "probabilities", "logits"}, default "auto"
        What the model returns; ``"auto"`` treats outputs with entries in [0, 1] and rows summing to 1
        as probabilities and anything else as logits.
    clip : (float, float), optional
        Box the perturbed inputs must stay in (e.g. ``(0, 1)`` for images).
    batch_size : int, default 256
        Inputs per attack batch (each uses ``n_noise`` forward passes per step).
    device : str or torch.device, default "cpu"
        Where the model runs.
    rng : None, int or numpy.random.Generator
        Seeds the attack's noise.

    Returns
    -------
    numpy.ndarray
        Perturbed inputs, float64, same shape as ``X``, each within ℓ2 distance ``radius`` of its
        clean input.
    """
    torch = import_torch()
    X = check_inputs(X)
    y = check_labels(y, X)
    radius = check_nonnegative(radius, "radius")
    sigma = check_positive(sigma, "sigma")
    steps = check_integer(steps, "steps", minimum=1)
    n_noise = check_integer(n_noise, "n_noise", minimum=1)
    batch_size = check_integer(batch_size, "batch_size", minimum=1)
    check_in_options(output, "output", ("auto", *OUTPUTS))
    passes = float(X.shape[0]) * steps * n_noise
    if passes > _MAX_PASSES:
        raise ValueError(
            f"steps={steps} with n_noise={n_noise} is too large: {X.shape[0]} inputs x steps x n_noise = "
            f"{passes:.2g} noisy forward and backward passes (more than {_MAX_PASSES:.0e}, hours of "
            "computing); reduce steps or n_noise"
        )
    step = 2.5 * radius / steps if step_size is None else check_positive(step_size, "step_size")
    if clip is not None:
        lo, hi = (float(c) for c in clip)
        if not lo < hi:
            raise ValueError(f"clip must be (low, high) with low < high, got {clip}")
    if not callable(model):
        raise TypeError(f"model must be a torch module or a callable on tensors, got {type(model).__name__}")
    if radius == 0:
        return X.copy()
    gen = torch.Generator().manual_seed(seed_from_rng(rng))
    params = getattr(model, "parameters", None)
    first = next(iter(params()), None) if callable(params) else None
    dtype = first.dtype if first is not None else torch.float32
    was_training = getattr(model, "training", None)
    if was_training is not None:
        model.eval()
    out = np.empty_like(X)
    feat = X.shape[1:]
    try:
        with first_layer_checked(model, "X", tuple(X.shape)):
            for start in range(0, X.shape[0], batch_size):
                x0 = torch.as_tensor(X[start : start + batch_size], dtype=dtype, device=device)
                yb = torch.as_tensor(y[start : start + batch_size], device=device)
                b = x0.shape[0]
                delta = torch.zeros_like(x0, requires_grad=True)
                for it in range(steps):
                    eps = (torch.randn((n_noise, *x0.shape), generator=gen, dtype=dtype) * sigma).to(device)
                    inputs = ((x0 + delta).unsqueeze(0) + eps).reshape(n_noise * b, *feat)
                    raw = _forward(model, inputs, torch)
                    if start == 0 and it == 0:
                        check_labels(y, X, raw.shape[1])
                    probs = torch.softmax(raw, dim=1) if _is_logits(raw, output) else raw
                    p_true = probs.reshape(n_noise, b, -1).gather(2, yb.view(1, b, 1).expand(n_noise, b, 1))
                    loss = -torch.log(p_true.mean(dim=0).clamp_min(1e-12)).sum()
                    (grad,) = torch.autograd.grad(loss, delta)
                    with torch.no_grad():
                        g_norm = grad.reshape(b, -1).norm(dim=1).clamp_min(1e-12).view(b, *[1] * len(feat))
                        delta += step * grad / g_norm
                        d_norm = delta.reshape(b, -1).norm(dim=1).clamp_min(1e-12).view(b, *[1] * len(feat))
                        delta *= torch.clamp(radius / d_norm, max=1.0)
                        if clip is not None:
                            delta.copy_(torch.clamp(x0 + delta, lo, hi) - x0)
                out[start : start + b] = (x0 + delta).detach().to("cpu", torch.float64).numpy()
    finally:
        if was_training is not None:
            model.train(was_training)
    # float32 arithmetic can overshoot the ball by rounding: project again in float64.
    diff = out - X
    norms = np.sqrt((diff.reshape(diff.shape[0], -1) ** 2).sum(axis=1))
    scale = np.minimum(1.0, radius / np.maximum(norms, 1e-300)).reshape(-1, *[1] * len(feat))
    return X + diff * scale
