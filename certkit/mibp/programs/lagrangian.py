"""Multipliers of the Lagrangian decomposition of one certified step (``formulation="lagrangian"``).

The decomposed formulation bounds ``θ'_p = (1/n) Σ_k h_{k,p}(θ, x_k)`` with ``h_k = θ - λ g_k`` by giving
each sample its own copy ``θ^(k)`` of θ, which drops the coupling through the shared θ.  For any
multipliers ``μ_k`` (vectors over θ) with ``Σ_k μ_k = 0``,

    max_θ Σ_k h_{k,p}(θ) = max_θ Σ_k [h_{k,p}(θ) + μ_k' θ] <= Σ_k max_{θ^(k)} [h_{k,p}(θ^(k)) + μ_k' θ^(k)],

and likewise for the minimum, so the per-sample programs with the linear objective term ``μ_k' θ^(k)``
give sound bounds for every such μ.  ``μ_k = 0`` is the decomposed formulation.  The multipliers used
here come from the per-sample Jacobians ``J_k = ∂h_k/∂θ`` at the box centre: ``μ_k = mean_k J - J_k``
(row ``p`` for objective ``p``) turns every program's linearised objective into the mean one, so for a
small box the sum of the per-sample maxima is the coupled maximum of the linearisation.

``Σ_k μ_k = 0`` must hold for the numbers the programs use, not only in exact arithmetic: `zero_sum`
rounds the multipliers onto a grid of ``2**-s`` on which every sum over the samples is exact and moves
the (integer) residual onto one sample, so the sum is exactly zero.
"""

from __future__ import annotations

import numpy as np

from certkit.mibp.problem.losses import loss_gradient_output
from certkit.mibp.problem.mlp import MLP

__all__ = ["centre_multipliers", "sample_jacobians", "zero_sum"]

#: Multipliers below this magnitude are dropped (set to 0): their grid would be subnormal.
_TINY = 1e-200


def sample_jacobians(model: MLP, X: np.ndarray, y: np.ndarray, loss: str) -> np.ndarray:
    """Per-sample Jacobians ``J[k, p, j] = ∂g_{k,p} / ∂θ_j`` of the loss gradients at ``model``.

    ``g_k`` is the gradient of ``ℓ(f_θ(x_k), y_k)`` in `MLP.to_vector` order; the ReLU pattern and the
    hinge's active sides are those at ``model`` (the gradient is piecewise smooth in θ; this is its
    derivative on the piece containing ``model``).  Forward-mode differentiation of the backward pass
    along every coordinate direction of θ; ``y`` as returned by `check_labels`.
    """
    n, m = len(X), model.n_params
    W = model.weights
    acts, pre = model._forward(X)
    eye = np.eye(m)
    dW, db, pos = [], [], 0
    for w, b in zip(W, model.biases):
        dW.append(eye[:, pos : pos + w.size].reshape(m, *w.shape))
        pos += w.size
        db.append(eye[:, pos : pos + b.size])
        pos += b.size
    # tangents of the activations along the m directions: (n, m, width)
    dacts = [np.zeros((n, m, X.shape[1]))]
    masks = []
    for layer in range(model.n_layers):
        dz = (
            np.einsum("ni,moi->nmo", acts[layer], dW[layer])
            + np.einsum("nmi,oi->nmo", dacts[layer], W[layer])
            + db[layer][None]
        )
        if layer < model.n_layers - 1:
            mask = (pre[layer] > 0).astype(np.float64)
            masks.append(mask)
            dacts.append(dz * mask[:, None, :])
        else:
            df = dz
    g = loss_gradient_output(acts[-1], y, loss)
    dg = 2.0 * df if loss == "mse" else np.zeros_like(df)  # the hinge derivative is piecewise constant
    parts: list[np.ndarray] = [None] * model.n_layers  # type: ignore[list-item]
    for layer in range(model.n_layers - 1, -1, -1):
        dgw = np.einsum("nmo,ni->nmoi", dg, acts[layer]) + np.einsum("no,nmi->nmoi", g, dacts[layer])
        parts[layer] = np.concatenate([dgw.reshape(n, m, -1), dg], axis=2)
        if layer > 0:
            mask = masks[layer - 1]
            dg = (np.einsum("nmo,oi->nmi", dg, W[layer]) + np.einsum("no,moi->nmi", g, dW[layer])) * mask[
                :, None, :
            ]
            g = (g @ W[layer]) * mask
    return np.concatenate(parts, axis=2).transpose(0, 2, 1)


def zero_sum(mu: np.ndarray) -> np.ndarray:
    """``mu`` (samples first) moved onto a binary grid so that its sum over axis 0 is exactly zero.

    Each entry is rounded to an integer multiple of ``2**-s`` (``s`` from the largest magnitude); the
    integer residual of every sum over the samples is subtracted from the sample with the largest
    entry there.  All values and all partial sums are integers × ``2**-s`` below ``2**53 × 2**-s``,
    so every float summation of the result over the samples, in any order, is exactly 0.
    """
    mu = np.asarray(mu, dtype=np.float64)
    top = float(np.max(np.abs(mu))) if mu.size else 0.0
    if not np.isfinite(top):
        raise FloatingPointError("the Lagrangian multipliers are not finite")
    if top < _TINY:
        return np.zeros_like(mu)
    # |integers| <= 2**bits / 2 and n of them sum below 2**52 (exact); bits >= 20 up to 2**31 samples
    bits = 52 - int(np.ceil(np.log2(mu.shape[0] + 1)))
    s = bits - int(np.ceil(np.log2(top))) - 1
    q = np.rint(np.ldexp(mu, s)).astype(np.int64)
    residual = q.sum(axis=0)
    k = np.argmax(np.abs(q), axis=0)
    np.subtract.at(q, (k, *np.indices(residual.shape)), residual)
    return np.ldexp(q.astype(np.float64), -s)


def centre_multipliers(
    lower: np.ndarray, upper: np.ndarray, sizes, inputs: np.ndarray, y: np.ndarray, loss: str, lr: float
) -> np.ndarray:
    """Multipliers ``μ[k, p, :]`` of sample ``k``'s objective ``p`` from the Jacobians at the box centre.

    ``μ_k = λ (H_k - mean_k H)`` with ``H_k = ∂g_k/∂θ`` at the centre of ``[lower, upper]`` and
    ``inputs`` (the negative deviation of ``J_k = I - λ H_k`` from its mean); zero on the
    parameters whose box is a point (they are constants in the programs) and exactly zero-sum over
    the samples (`zero_sum`).
    """
    centre = MLP.from_vector(0.5 * (lower + upper), sizes)
    H = sample_jacobians(centre, inputs, y, loss)
    mu = lr * (H - H.mean(axis=0))
    mu[:, :, lower == upper] = 0.0
    return zero_sum(mu)
