"""Interval bounds on how much one sample's gradient can change when the sample deviates.

Under ``Budget`` and ``LabelFlips`` the shared carry (`certkit.mibp.enclosures.shared`) writes the batch sum
as the
sum of every row's gradient at its observed input and label, ``N_k(θ)``, plus, for the deviating rows, the
change ``Δ_k(θ) = P_k(θ) - N_k(θ)`` to the gradient ``P_k`` at an allowed input ``x'`` and label ``y'`` — the
same ``θ`` in both.  Bounding ``P_k`` and ``N_k`` separately over the parameter box gives
``[P_lo - N_hi, P_hi - N_lo]``, which grows with the box.  Here the change itself is propagated through
the network: ``Δx = x' - x``, ``Δz = W Δh`` (the weight interval
times the change), ``Δh ∈ [min(Δz, 0), max(Δz, 0)]`` through a ReLU (``Δz`` where both pre-activations are
positive, 0 where neither is), the softmax change by the mean-value theorem
``Δs_i = Σ_{j≠i} J_ij(ξ) (Δz_j - Δz_i)`` with ``J_ij = -s_i s_j`` bounded over the hull of both logit
boxes, the sigmoid's by ``σ'(ξ) Δz``, and backwards ``Δ(g hᵀ) = Δg h'ᵀ + g Δhᵀ``, ``Δ(Wᵀ g) = Wᵀ Δg``.
Every change before the weight gradients is intersected with ``[P_lo - N_hi, P_hi - N_lo]`` (the
difference of the two boxes); where the derivative of a ReLU may differ between the two inputs that is the
bound used.
"""

from __future__ import annotations

import numpy as np

from certkit.mibp.enclosures.interval import (
    _affine,
    _hidden_derivative_ce,
    _imul,
    _logit_differences,
    _outer,
    _targets,
    allowed_labels,
    interval_backward,
    interval_forward,
    magnitude,
    output_derivative,
    pad,
    softmax_bounds,
)
from certkit.mibp.problem.losses import sigmoid

__all__ = ["gradient_changes"]

_U = 2.0**-52


def _intersect(aL, aU, bL, bU):
    return np.maximum(aL, bL), np.minimum(aU, bU)


def _diff(P, N):
    """Padded bounds on ``p - n`` for ``p ∈ P``, ``n ∈ N``."""
    (pL, pU), (nL, nU) = P, N
    return pad(pL - nU, pU - nL, magnitude(pL, pU) + magnitude(nL, nU), 2)


def gradient_changes(lower, upper, X, XL, XU, y, loss, labels, *, same_input=False, target=None, radius=None):
    """Per-sample bounds ``(DL, DU)`` (n, n_params, padded) on the change ``Δ = P - N`` at a common θ in
    ``[lower, upper]`` of the gradient from the observed row (input ``X``, label ``y``) to the deviating row
    (input in ``[XL, XU]``, label ``labels``); see the module docstring.

    ``same_input``: the deviating row keeps the input of the observed one (``X`` is then the input box
    ``[XL, XU]`` itself and only the label changes).  ``target``: a changed label can only become this one;
    ``radius`` (n,): under MSE the deviating row's targets move within it.
    """
    XnL, XnU = (XL, XU) if same_input else (X, X)
    actsN, preN = interval_forward(lower, upper, XnL, XnU)
    actsP, preP = (actsN, preN) if same_input else interval_forward(lower, upper, XL, XU)
    outN = output_derivative(lower, upper, actsN, preN, y, loss)
    outP = output_derivative(lower, upper, actsP, preP, y, loss, labels, target=target, radius=radius)
    _, _, derivN = interval_backward(lower, upper, actsN, preN, outN, y, loss, gradients=False)
    _, _, derivP = interval_backward(lower, upper, actsP, preP, outP, y, loss, gradients=False)
    n_layers = len(lower.weights)
    # forward: the change of every activation (inputs first)
    if same_input:
        dh = (np.zeros_like(XL), np.zeros_like(XL))
    else:
        dh = pad(XL - X, XU - X, magnitude(XL, XU) + np.abs(X), 1)
    dacts = [dh]
    for layer in range(n_layers):
        WL, WU = lower.weights[layer], upper.weights[layer]
        zero = np.zeros(WL.shape[0])
        dz = _affine(WL, WU, zero, zero, *dh)
        # the float pre-activations of both rows each carry the rounding of a fan-in sum
        mW, mb = magnitude(WL, WU), magnitude(lower.biases[layer], upper.biases[layer])
        mag = (magnitude(*actsN[layer]) + magnitude(*actsP[layer])) @ mW.T + 2.0 * mb
        dz = pad(*dz, mag, WL.shape[1] + 2)
        dz = _intersect(*dz, *_diff(preP[layer], preN[layer]))
        if layer < n_layers - 1:
            on = (preN[layer][0] > 0) & (preP[layer][0] > 0)
            off = (preN[layer][1] <= 0) & (preP[layer][1] <= 0)
            dL = np.where(on, dz[0], np.where(off, 0.0, np.minimum(dz[0], 0.0)))
            dU = np.where(on, dz[1], np.where(off, 0.0, np.maximum(dz[1], 0.0)))
            dh = _intersect(dL, dU, *_diff(actsP[layer + 1], actsN[layer + 1]))
        else:
            dh = dz
        dacts.append(dh)
    gz = _intersect(
        *_output_change(lower, upper, actsN, actsP, preN, preP, dacts, y, loss, labels, target, radius),
        *_diff(outP, outN),
    )
    n = len(X)
    lows: list[np.ndarray] = []
    highs: list[np.ndarray] = []
    for layer in range(n_layers - 1, -1, -1):
        a = _outer(*gz, *actsP[layer])
        b = _outer(*derivN[layer], *dacts[layer])
        # and the rounding of the float products g' h' and g h of both rows
        float_mag = _outer_mag(derivP[layer], actsP[layer]) + _outer_mag(derivN[layer], actsN[layer])
        wL, wU = pad(a[0] + b[0], a[1] + b[1], magnitude(*a) + magnitude(*b) + float_mag, 2)
        lows[:0] = [wL, gz[0]]
        highs[:0] = [wU, gz[1]]
        if layer > 0:
            WL, WU = lower.weights[layer], upper.weights[layer]
            mW = magnitude(WL, WU)
            mag = (magnitude(*derivN[layer]) + magnitude(*derivP[layer])) @ mW
            if loss == "cross_entropy" and layer == n_layers - 1:  # the change also sums to 0
                gh = _hidden_derivative_ce(WL, WU, *gz, y)
                mag = mag + 16.0 * (WL.shape[0] + 4) * mW[y]  # both sums of g only nearly 0
                if same_input and labels != "own":  # the same softmax: the change is e_y - e_a, one label a
                    gh = _intersect(*gh, *_label_change(WL, WU, y, labels, target))
            else:
                lo, hi, m_ = _imul(WL[None], WU[None], gz[0][:, :, None], gz[1][:, :, None])
                gh = pad(lo.sum(axis=1), hi.sum(axis=1), m_.sum(axis=1), WL.shape[0])
            gh = pad(*gh, mag, WL.shape[0] + 2)
            zN, zP = preN[layer - 1], preP[layer - 1]
            on, off = (zN[0] > 0) & (zP[0] > 0), (zN[1] <= 0) & (zP[1] <= 0)
            fallback = _diff(derivP[layer - 1], derivN[layer - 1])
            if same_input:  # one mask m ∈ {0, 1} for both: m Δgh
                fallback = _intersect(np.minimum(gh[0], 0.0), np.maximum(gh[1], 0.0), *fallback)
            gL = np.where(on, gh[0], np.where(off, 0.0, fallback[0]))
            gU = np.where(on, gh[1], np.where(off, 0.0, fallback[1]))
            gz = _intersect(gL, gU, *fallback)
    DL = np.concatenate([v.reshape(n, -1) for v in lows], axis=1)
    DU = np.concatenate([v.reshape(n, -1) for v in highs], axis=1)
    return DL, DU


def _label_change(WL, WU, y, labels, target):
    """Bounds (n, H) on ``Wᵀ (e_y - e_a) = W_y - W_a`` over the labels ``a`` each row may take (the change
    of the last hidden derivative when only the label changes, at a common θ): the hull over ``a``."""
    use = allowed_labels(y, np.arange(WL.shape[0]), labels, target)[:, :, None]
    # float subtraction is monotone: W_y - (the largest W_a) is the smallest of the differences
    return WL[y] - np.where(use, WU[None], -np.inf).max(axis=1), WU[y] - np.where(use, WL[None], np.inf).min(
        axis=1
    )


def _outer_mag(g, h):
    """``max|g| max|h|`` of every outer-product entry (n, o·i)."""
    a, b = magnitude(*g), magnitude(*h)
    return (a[:, :, None] * b[:, None, :]).reshape(len(a), -1)


def _output_change(lower, upper, actsN, actsP, preN, preP, dacts, y, loss, labels, target, radius):
    """Bounds on the change of the loss derivative at the output."""
    dzL, dzU = dacts[-1]
    zL = np.minimum(preN[-1][0], preP[-1][0])
    zU = np.maximum(preN[-1][1], preP[-1][1])
    if loss == "mse":
        # 2 Δz - 2 Δy, and the rounding of both float derivatives 2 (z - y)
        r = 0.0 if radius is None or labels != "any" else 2.0 * radius[:, None]
        mag = magnitude(dzL, dzU) + 2.0 * (magnitude(zL, zU) + np.abs(np.reshape(y, (len(y), -1)))) + r
        return pad(2.0 * dzL - r, 2.0 * dzU + r, 2.0 * mag, 3)
    if loss == "cross_entropy":
        C = zL.shape[1]
        W_lo, W_hi = lower.weights[-1], upper.weights[-1]
        hL = np.minimum(actsN[-2][0], actsP[-2][0])
        hU = np.maximum(actsN[-2][1], actsP[-2][1])
        dL, dU = _logit_differences(W_lo, W_hi, lower.biases[-1], upper.biases[-1], hL, hU)
        dL = np.maximum(dL, zL[:, None, :] - zU[:, :, None])
        dU = np.minimum(dU, zU[:, None, :] - zL[:, :, None])
        sL, sU = softmax_bounds(dL, dU)
        # J_ij = -s_i s_j (j ≠ i) over the hull, times the change of z_j - z_i
        JL = -(sU[:, :, None] * sU[:, None, :])
        JU = -(sL[:, :, None] * sL[:, None, :])
        zero = np.zeros(C)
        eL, eU = _logit_differences(W_lo, W_hi, zero, zero, *dacts[-2])
        eL = np.maximum(eL, dzL[:, None, :] - dzU[:, :, None])
        eU = np.minimum(eU, dzU[:, None, :] - dzL[:, :, None])
        lo, hi, mag = _imul(JL, JU, eL, eU)
        off = ~np.eye(C, dtype=bool)[None]
        sL, sU = pad(
            np.where(off, lo, 0.0).sum(axis=2), np.where(off, hi, 0.0).sum(axis=2), mag.sum(axis=2), C + 2
        )
        # the float softmax of both runs: 8 (C + 4) ulps of 1 each
        sL, sU = sL - 16.0 * (C + 4) * _U, sU + 16.0 * (C + 4) * _U
        tL, tU = _targets(allowed_labels(y, np.arange(C), labels, target))
        own = np.zeros_like(tL)
        own[np.arange(len(y)), y] = 1.0
        return pad(sL - (tU - own), sU - (tL - own), 2.0, 2)
    if loss == "binary_cross_entropy":
        err = 16.0 * _U
        s_lo = np.maximum(sigmoid(zL) - err, 0.0)
        s_hi = np.minimum(sigmoid(zU) + err, 1.0)
        f_lo, f_hi = s_lo - s_lo * s_lo, s_hi - s_hi * s_hi
        mid = np.clip(0.5, s_lo, s_hi)
        dL = np.maximum(np.minimum(f_lo, f_hi) - 4.0 * _U, 0.0)
        dU = mid - mid * mid + 4.0 * _U
        lo, hi, mag = _imul(dL, dU, dzL, dzU)
        lo, hi = lo - 2.0 * err, hi + 2.0 * err
        # the change c - y of the target over the allowed labels c
        allowed = allowed_labels(y, np.array([0, 1]), labels, target)
        change = np.array([0.0, 1.0])[None, :] - np.asarray(y, dtype=np.float64)[:, None]
        tL = np.where(allowed, change, np.inf).min(axis=1, keepdims=True) * np.ones_like(lo)
        tU = np.where(allowed, change, -np.inf).max(axis=1, keepdims=True) * np.ones_like(lo)
        return pad(lo - tU, hi - tL, mag + 1.0, 2)
    # hinge: the difference of the two derivative boxes (`gradient_bounds` intersects with it)
    return np.full(dzL.shape, -np.inf), np.full(dzL.shape, np.inf)
