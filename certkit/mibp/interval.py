"""Sound interval arithmetic through forward pass, loss derivative, backward pass and update.

Every result is padded outward for floating-point rounding: a sum of ``m``
products is widened by ``(m + 2) * 2**-52`` times the sum of the magnitudes
of its terms, then by one ulp (``np.nextafter``).  This bounds the rounding
error of the float computation of each end point (Higham's ``γ_m``).
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "interval_forward",
    "interval_gradients",
    "interval_loss_derivative",
    "interval_margin",
    "interval_step",
    "magnitude",
    "pad",
    "sum_with_budget",
]

_U = 2.0**-52


def pad(
    lo: np.ndarray, hi: np.ndarray, magnitude: np.ndarray | float, terms: int
) -> tuple[np.ndarray, np.ndarray]:
    """Widen ``[lo, hi]`` by the rounding error of a ``terms``-term sum of total magnitude ``magnitude``."""
    err = (terms + 2) * _U * np.asarray(magnitude) + 1e-300
    return np.nextafter(lo - err, -np.inf), np.nextafter(hi + err, np.inf)


def magnitude(lo, hi):
    """``max(|lo|, |hi|)``: bounds both ends and grows with the interval (keeps the padding monotone)."""
    return np.maximum(np.abs(lo), np.abs(hi))


def _imul(aL, aU, bL, bU):
    """Elementwise interval product (unpadded) and the magnitude of its ends."""
    p = np.stack(np.broadcast_arrays(aL * bL, aL * bU, aU * bL, aU * bU))
    lo, hi = p.min(axis=0), p.max(axis=0)
    return lo, hi, magnitude(lo, hi)


def _affine(WL, WU, bL, bU, hL, hU):
    """``z = W h + b`` for interval W (o, i), b (o,), h (n, i); returns padded (n, o) bounds."""
    lo, hi, mag = _imul(WL[None], WU[None], hL[:, None, :], hU[:, None, :])
    zL = lo.sum(axis=2) + bL
    zU = hi.sum(axis=2) + bU
    magnitude = mag.sum(axis=2) + np.maximum(np.abs(bL), np.abs(bU))
    return pad(zL, zU, magnitude, WL.shape[1] + 1)


def interval_forward(lower, upper, XL, XU):
    """Interval forward pass.

    Returns the input/activation bounds ``acts`` (list of (lo, hi), input first) and
    the pre-activation bounds ``pre`` (one (lo, hi) per layer; the last is the output).
    """
    acts = [(XL, XU)]
    pre = []
    hL, hU = XL, XU
    n_layers = len(lower.weights)
    for layer in range(n_layers):
        zL, zU = _affine(
            lower.weights[layer], upper.weights[layer], lower.biases[layer], upper.biases[layer], hL, hU
        )
        pre.append((zL, zU))
        if layer < n_layers - 1:
            hL, hU = np.maximum(zL, 0.0), np.maximum(zU, 0.0)
        else:
            hL, hU = zL, zU
        acts.append((hL, hU))
    return acts, pre


def interval_margin(lower, upper, X, pred):
    """A lower bound, over the parameter box, of the margin of the predictions ``pred`` at the rows of ``X``:
    ``pred * f`` for one output, ``min_{c != pred} f_pred - f_c`` otherwise (certified iff > 0)."""
    _, pre = interval_forward(lower, upper, X, X)
    fL, fU = pre[-1]
    if fL.shape[1] == 1:
        return np.where(pred > 0, fL[:, 0], -fU[:, 0])
    rows = np.arange(len(X))
    diff = fL[rows, pred][:, None] - fU
    diff[rows, pred] = np.inf
    margin = diff.min(axis=1)
    margin, _ = pad(margin, margin, np.abs(fL).max(axis=1) + np.abs(fU).max(axis=1), 1)
    return margin


def interval_loss_derivative(fL, fU, y, loss):
    """Bounds on ``dℓ/df`` (n, C) given output bounds (same convention as the nominal training)."""
    if loss == "mse":
        return pad(2.0 * (fL - y), 2.0 * (fU - y), 2.0 * (magnitude(fL, fU) + np.abs(y)), 2)
    if fL.shape[1] == 1:
        # v = 1 - y f; the derivative is -y where v > 0, else 0.
        yv = y[:, None]
        vL = np.where(yv > 0, 1.0 - fU, 1.0 + fL)
        vU = np.where(yv > 0, 1.0 - fL, 1.0 + fU)
        vL, vU = pad(vL, vU, 1.0 + magnitude(fL, fU), 1)
        aL, aU = (vL > 0).astype(np.float64), (vU > 0).astype(np.float64)
        return np.where(yv > 0, -aU, aL), np.where(yv > 0, -aL, aU)
    n, _C = fL.shape
    rows = np.arange(n)
    fyL, fyU = fL[rows, y][:, None], fU[rows, y][:, None]
    vL, vU = pad(1.0 + fL - fyU, 1.0 + fU - fyL, 1.0 + magnitude(fL, fU) + magnitude(fyL, fyU), 2)
    aL, aU = (vL > 0).astype(np.float64), (vU > 0).astype(np.float64)
    aL[rows, y] = 0.0
    aU[rows, y] = 0.0
    gL, gU = aL.copy(), aU.copy()
    gL[rows, y] = -aU.sum(axis=1)
    gU[rows, y] = -aL.sum(axis=1)
    return gL, gU


def interval_gradients(lower, upper, XL, XU, y, loss):
    """Per-sample gradient bounds of ``ℓ(f_θ(x_k), y_k)`` over the parameter box and input boxes.

    Returns ``(gL, gU)`` of shape (n, n_params) in `MLP.to_vector` order.
    """
    acts, pre = interval_forward(lower, upper, XL, XU)
    gzL, gzU = interval_loss_derivative(*pre[-1], y, loss)
    n_layers = len(lower.weights)
    parts: list[tuple[np.ndarray, np.ndarray]] = [None] * n_layers  # type: ignore[list-item]
    for layer in range(n_layers - 1, -1, -1):
        hL, hU = acts[layer]
        wl, wu, mag = _imul(gzL[:, :, None], gzU[:, :, None], hL[:, None, :], hU[:, None, :])
        wl, wu = pad(wl, wu, mag, 0)
        n = len(gzL)
        parts[layer] = (
            np.concatenate([wl.reshape(n, -1), gzL], axis=1),
            np.concatenate([wu.reshape(n, -1), gzU], axis=1),
        )
        if layer > 0:
            WL, WU = lower.weights[layer], upper.weights[layer]
            lo, hi, mag = _imul(WL[None], WU[None], gzL[:, :, None], gzU[:, :, None])
            ghL, ghU = pad(lo.sum(axis=1), hi.sum(axis=1), mag.sum(axis=1), WL.shape[0])
            zL, zU = pre[layer - 1]
            on, maybe = zL > 0, (zU > 0) & ~(zL > 0)
            gzL = np.where(on, ghL, np.where(maybe, np.minimum(ghL, 0.0), 0.0))
            gzU = np.where(on, ghU, np.where(maybe, np.maximum(ghU, 0.0), 0.0))
    return np.concatenate([p[0] for p in parts], axis=1), np.concatenate([p[1] for p in parts], axis=1)


def sum_with_budget(PL, PU, NL, NU, budget):
    """Bounds on ``Σ_k t_k`` when ``t_k ∈ [PL_k, PU_k]`` for deviating points and ``[NL_k, NU_k]`` otherwise.

    With ``budget=None`` every point deviates (takes a value in its perturbation set).
    Otherwise at most ``budget`` points deviate and the others keep their nominal
    value: the bound is the all-nominal sum plus the ``budget`` largest (smallest)
    gains of deviating (with ``budget >= n`` this is the per-point union).  Arrays
    are (n, m); returns padded (m,) bounds.
    """
    n = PL.shape[0]
    mag = magnitude(PL, PU).sum(axis=0)
    if budget is None:
        return pad(PL.sum(axis=0), PU.sum(axis=0), mag, n)
    budget = min(budget, n)
    mag = mag + magnitude(NL, NU).sum(axis=0)
    lo, hi = NL.sum(axis=0), NU.sum(axis=0)
    if budget > 0:
        dlo = np.sort(np.minimum(PL - NL, 0.0), axis=0)[:budget].sum(axis=0)
        dhi = -np.sort(-np.maximum(PU - NU, 0.0), axis=0)[:budget].sum(axis=0)
        lo, hi = lo + dlo, hi + dhi
    return pad(lo, hi, mag, 3 * n)


def interval_step(lower, upper, sets, y, loss, learning_rate):
    """One certified GD step by interval arithmetic: bounds (vectors) on ``θ' = θ - (λ/n) Σ_k g_k``."""
    n = len(y)
    budget = sets.budget
    if sets.label_flips is not None:
        # deviating = label flipped (inputs perturbed either way)
        budget = sets.label_flips
        NL, NU = interval_gradients(lower, upper, sets.lower, sets.upper, y, loss)
        PL, PU = interval_gradients(lower, upper, sets.lower, sets.upper, -y, loss)
    else:
        PL, PU = interval_gradients(lower, upper, sets.lower, sets.upper, y, loss)
        NL, NU = PL, PU
        if budget is not None:
            NL, NU = interval_gradients(lower, upper, sets.nominal, sets.nominal, y, loss)
    GL, GU = sum_with_budget(PL, PU, NL, NU, budget)
    tl, tu = lower.to_vector(), upper.to_vector()
    c = learning_rate / n
    return pad(tl - c * GU, tu - c * GL, magnitude(tl, tu) + c * magnitude(GL, GU), 3)
