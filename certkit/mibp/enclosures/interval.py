"""Sound interval arithmetic through the forward pass, the loss derivative and the backward pass (the
budgeted batch sum and the update are in `certkit.mibp.enclosures.sgd_step`).

Every result is padded outward for floating-point rounding (`pad`): a sum of ``m`` products is widened by
``(m + 4) * 2**-52`` times the sum of the magnitudes of its terms plus ``2**-52`` times the end's own
magnitude (at least one ulp).  This bounds the rounding error of the float computation of each end point
and of the nominal run's value (Higham's ``γ_m`` for both).  The per-sample weight gradients are single
products left unpadded; `certkit.mibp.enclosures.sgd_step.sum_with_budget` pads their sums for them.
"""

from __future__ import annotations

import numpy as np

from certkit.mibp.problem.losses import label_classes, sigmoid

__all__ = [
    "interval_forward",
    "interval_gradients",
    "interval_loss_derivative",
    "interval_margin",
    "magnitude",
    "ordered_sum",
    "output_derivative",
    "pad",
    "softmax_bounds",
]

_U = 2.0**-52


def pad(
    lo: np.ndarray, hi: np.ndarray, magnitude: np.ndarray | float, terms: int
) -> tuple[np.ndarray, np.ndarray]:
    """Widen ``[lo, hi]`` by the rounding error of a ``terms``-term sum of total magnitude ``magnitude``.

    Each end moves out by ``(terms + 4) u magnitude + u |end|`` (``u = 2**-52``, plus 1e-300): the two extra
    ``u magnitude`` cover the rounding of this padding itself, ``u |end|`` is at least one ulp of the end.
    """
    err = (terms + 4) * _U * np.asarray(magnitude) + 1e-300
    return lo - (err + _U * np.abs(lo)), hi + (err + _U * np.abs(hi))


def magnitude(lo, hi):
    """``max(|lo|, |hi|)``: bounds both ends and grows with the interval (keeps the padding monotone)."""
    return np.maximum(np.abs(lo), np.abs(hi))


def ordered_sum(A: np.ndarray) -> np.ndarray:
    """``A`` summed over its last axis left to right (``np.add.accumulate``): the same additions in the same
    order for every row, however many rows there are, so the sum is a monotone function of each entry and a
    row's sum does not depend on the rows beside it (``np.sum`` promises neither)."""
    return np.add.accumulate(A, axis=-1)[..., -1]


def _imul(aL, aU, bL, bU):
    """Elementwise interval product (unpadded) and the magnitude of its ends (``max|a| max|b|``)."""
    if np.all(bL >= 0):  # b >= 0 (ReLU activations): the ends are aL or aU times bL or bU, by sign
        lo = np.where(aL >= 0, aL * bL, aL * bU)
        hi = np.where(aU >= 0, aU * bU, aU * bL)
    else:
        p, q, r, s = aL * bL, aL * bU, aU * bL, aU * bU
        lo = np.minimum(np.minimum(p, q), np.minimum(r, s))
        hi = np.maximum(np.maximum(p, q), np.maximum(r, s))
    return lo, hi, magnitude(aL, aU) * magnitude(bL, bU)


def interval_matmul(WL, WU, hL, hU):
    """Bounds on ``h Wᵀ`` (n, o) for interval matrices ``W`` (o, i) and ``h`` (n, i), padded for their own
    rounding.

    Each term ``w h`` is bounded exactly by the signs of its ends and the terms are summed by matrix
    products (BLAS): by the class of ``h`` (``hL >= 0``, ``hU <= 0``, or straddling 0) the lower end of
    ``w h`` is ``WL⁺ hL + WL⁻ hU``, ``WU⁺ hL + WU⁻ hU`` or ``WU⁺ hL + WL⁻ hU`` (``a⁺ = max(a, 0)``,
    ``a⁻ = min(a, 0)``) and the upper end ``WU⁺ hU + WU⁻ hL``, ``WL⁺ hU + WL⁻ hL`` or ``WU⁺ hU + WL⁻ hL``;
    where ``w`` straddles 0 as well the exact ends ``min(WL hU, WU hL)`` and ``max(WL hL, WU hU)`` are
    restored by a correction over those terms only.  Returns ``(lo, hi, mag)`` with
    ``mag = max|h| max|W|`` summed over ``i`` (the magnitude of the exact sum, for the callers' padding).
    """
    WLt, WUt = WL.T, WU.T
    mag = magnitude(hL, hU) @ magnitude(WLt, WUt)
    n_in = WL.shape[1]
    if hL is hU or np.array_equal(hL, hU):  # exact h: the ends are W_lo h⁺ + W_hi h⁻ and W_hi h⁺ + W_lo h⁻
        hp, hn = np.maximum(hL, 0.0), np.minimum(hL, 0.0)
        lo, hi = hp @ WLt + hn @ WUt, hp @ WUt + hn @ WLt
        return (*pad(lo, hi, mag, n_in + 2), mag)
    WLp, WLn = np.maximum(WLt, 0.0), np.minimum(WLt, 0.0)
    WUp, WUn = np.maximum(WUt, 0.0), np.minimum(WUt, 0.0)
    pos = hL >= 0.0
    if np.all(pos):
        lo = hL @ WLp + hU @ WLn
        hi = hU @ WUp + hL @ WUn
        return (*pad(lo, hi, mag, n_in + 4), mag)
    neg = (hU <= 0.0) & ~pos
    cross = ~(pos | neg)
    hL_p, hU_n = np.where(pos, hL, 0.0), np.where(neg, hU, 0.0)
    hU_ps, hL_ns = np.where(neg, 0.0, hU), np.where(pos, 0.0, hL)  # (pos or straddling), (neg or straddling)
    lo = hL_p @ WLp + hU_ps @ WLn + hL_ns @ WUp + hU_n @ WUn
    hi = hU_ps @ WUp + hL_p @ WUn + hU_n @ WLp + hL_ns @ WLn
    w_cross = (WL < 0.0) & (WU > 0.0)
    both = np.flatnonzero(w_cross.any(axis=0) & cross.any(axis=0))
    if both.size == 0:  # every term entered at most twice: 2 mag, a dot product of length i and 3 additions
        return (*pad(lo, hi, 2.0 * mag, n_in + 4), mag)
    for t in both:
        rows, outs = np.flatnonzero(cross[:, t]), np.flatnonzero(w_cross[:, t])
        a, b = hL[rows, t][:, None], hU[rows, t][:, None]
        wl, wu = WL[outs, t][None], WU[outs, t][None]
        # the matrix products used WU hL + WL hU (both < 0) for the lower end: the exact end is the smaller
        # term, so the larger one is taken off again; likewise for the upper end
        at = np.ix_(rows, outs)
        lo[at] -= np.maximum(wu * a, wl * b)
        hi[at] -= np.minimum(wl * a, wu * b)
    # every term enters at most twice (straddling h) and once more in a correction (3 mag), through a dot
    # product of length i, 3 additions and up to i corrections
    return (*pad(lo, hi, 3.0 * mag, 2 * n_in + 8), mag)


def _affine(WL, WU, bL, bU, hL, hU):
    """``z = W h + b`` for interval W (o, i), b (o,), h (n, i); returns padded (n, o) bounds that also hold
    the float ``h @ W.T + b`` of `MLP.train` at any point of the boxes (`interval_matmul` plus the rounding
    of that float sum)."""
    lo, hi, mag = interval_matmul(WL, WU, hL, hU)
    mag = mag + magnitude(bL, bU)
    return pad(lo + bL, hi + bU, mag, WL.shape[1] + 4)


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
    ``pred * f`` for one output, ``min_{c != pred} f_pred - f_c`` otherwise (certified iff > 0).  Each logit
    difference is bounded through the output layer's weight differences (`_logit_differences`), which is
    tighter than ``fL_pred - fU_c``."""
    acts, pre = interval_forward(lower, upper, X, X)
    fL, fU = pre[-1]
    if fL.shape[1] == 1:
        return np.where(pred > 0, fL[:, 0], -fU[:, 0])
    rows = np.arange(len(X))
    dL, _ = _logit_differences(
        lower.weights[-1], upper.weights[-1], lower.biases[-1], upper.biases[-1], *acts[-2]
    )
    diff, _ = pad(fL[rows, pred][:, None] - fU, fU, np.abs(fL).max(axis=1, keepdims=True) + np.abs(fU), 1)
    # dL[k, c, pred] bounds f_pred - f_c
    diff = np.maximum(diff, dL[rows, :, pred])
    diff[rows, pred] = np.inf
    return diff.min(axis=1)


def interval_loss_derivative(fL, fU, y, loss, radius=None):
    """Bounds on ``dℓ/df`` (n, C) given output bounds, for the hinge, MSE and binary cross-entropy losses
    (same convention as the nominal training; cross-entropy is bounded by `output_derivative`).  For MSE,
    ``radius`` (n,) lets each row's targets be anywhere within it of ``y``."""
    if loss == "cross_entropy":
        raise ValueError("the cross-entropy derivative needs the output layer: use output_derivative")
    if loss == "mse":
        if radius is None:
            return pad(2.0 * (fL - y), 2.0 * (fU - y), 2.0 * (magnitude(fL, fU) + np.abs(y)), 2)
        r = radius[:, None]
        mag = 2.0 * (magnitude(fL, fU) + np.abs(y) + r)
        return pad(2.0 * (fL - (y + r)), 2.0 * (fU - (y - r)), mag, 3)
    if loss == "binary_cross_entropy":
        # σ is increasing; the float σ and this bound each carry a few ulps of rounding (values <= 1)
        err = 16.0 * _U
        sL = np.maximum(sigmoid(fL) - err, 0.0)
        sU = np.minimum(sigmoid(fU) + err, 1.0)
        yv = y[:, None]
        return pad(sL - yv, sU - yv, 1.0, 1)
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


def _logit_differences(W_lo, W_hi, b_lo, b_hi, hL, hU):
    """Bounds on ``z_j - z_i = (W_j - W_i) · h + (b_j - b_i)`` (n, C, C), indexed ``[k, i, j]``, for the
    output layer ``z = W h + b``, with each weight difference bounded as one interval (tighter than
    ``[zL_j - zU_i, zU_j - zL_i]``: ``h`` enters once); one `interval_matmul` of the ``C²`` differences.
    Padded for the rounding of the float logits ``z_j`` and ``z_i`` of `MLP.train`."""
    C, H = W_lo.shape
    dWL = W_lo[None, :, :] - W_hi[:, None, :]  # [i, j, :] bounds W_j - W_i
    dWU = W_hi[None, :, :] - W_lo[:, None, :]
    diag = np.arange(C)
    dWL[diag, diag], dWU[diag, diag] = 0.0, 0.0  # z_i - z_i = 0
    lo, hi, _ = interval_matmul(dWL.reshape(C * C, H), dWU.reshape(C * C, H), hL, hU)
    dbL = b_lo[None, :] - b_hi[:, None]
    dbU = b_hi[None, :] - b_lo[:, None]
    # magnitude of each logit's float sum: Σ |W_c| |h| + |b_c|; it bounds the differences' terms too
    mag = magnitude(hL, hU) @ magnitude(W_lo, W_hi).T + magnitude(b_lo, b_hi)  # (n, C)
    n = len(hL)
    return pad(
        lo.reshape(n, C, C) + dbL, hi.reshape(n, C, C) + dbU, mag[:, :, None] + mag[:, None, :], 2 * H + 8
    )


def softmax_bounds(dL: np.ndarray, dU: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bounds on ``softmax(z)_i = 1 / Σ_j exp(z_j - z_i)`` given bounds ``dL <= z_j - z_i <= dU`` (n, C, C).

    Each entry is decreasing in every difference, so the ends come from ``dU`` and ``dL``; they are padded
    by ``8 (C + 4)`` ulps of 1 for the rounding of this bound and of the float softmax of `MLP.train`.
    """
    C = dL.shape[1]
    diag = np.eye(C, dtype=bool)[None]
    with np.errstate(over="ignore"):
        lo = 1.0 / np.where(diag, 1.0, np.exp(dU)).sum(axis=2)
        hi = 1.0 / np.where(diag, 1.0, np.exp(dL)).sum(axis=2)
    err = 8.0 * (C + 4) * _U
    return np.maximum(lo - err, 0.0), np.minimum(hi + err, 1.0)


def allowed_labels(y, classes, labels, target=None):
    """Which of ``classes`` each row's label may take (n, L): its own (``"own"``), a changed one
    (``"other"``: any other class, or ``target`` alone, a row already labelled ``target`` keeping its label)
    or either (``"any"``)."""
    y = np.asarray(y)
    own = y[:, None] == classes[None, :]
    if labels == "own":
        return own
    if target is None:
        return ~own if labels == "other" else np.ones_like(own)
    goal = np.broadcast_to(classes[None, :] == target, own.shape)
    if labels == "other":
        return np.where((y != target)[:, None], goal, own)
    return own | goal


def _targets(allowed):
    """Bounds on the one-hot target (n, C) over the allowed labels (`allowed_labels`)."""
    hi = allowed.astype(np.float64)
    lo = np.where(allowed.sum(axis=1, keepdims=True) == 1, hi, 0.0)
    return lo, hi


def output_derivative(lower, upper, acts, pre, y, loss, labels="own", *, target=None, radius=None):
    """Bounds on ``dℓ/dz`` (n, C) at the output, for the labels ``"own"`` (y), ``"other"`` (a changed
    label: any other class, or ``target``) or ``"any"`` (either): the hull over the allowed labels
    (`allowed_labels`).  For MSE, ``"any"`` with ``radius`` (n,) lets the targets move within it."""
    fL, fU = pre[-1]
    if loss == "cross_entropy":
        allowed = allowed_labels(y, np.arange(fL.shape[1]), labels, target)
        return _ce_derivative(*_output_softmax(lower, upper, acts, pre), allowed)
    if loss == "mse":
        return interval_loss_derivative(fL, fU, y, loss, radius if labels == "any" else None)
    if labels == "own":
        return interval_loss_derivative(fL, fU, y, loss)
    # hinge and binary cross-entropy: the hull over the allowed labels
    classes = label_classes(loss, fL.shape[1])
    allowed = allowed_labels(y, classes, labels, target)
    gL, gU = np.full(fL.shape, np.inf), np.full(fL.shape, -np.inf)
    for j, c in enumerate(classes):
        use = allowed[:, j : j + 1]
        if not use.any():
            continue
        aL, aU = interval_loss_derivative(fL, fU, np.full(len(y), c, dtype=np.asarray(y).dtype), loss)
        gL = np.where(use, np.minimum(gL, aL), gL)
        gU = np.where(use, np.maximum(gU, aU), gU)
    return gL, gU


def _ce_derivative(sL, sU, allowed):
    """Bounds on the cross-entropy derivative ``s - e_a`` from the softmax bounds, over the allowed labels."""
    tL, tU = _targets(allowed)
    return pad(sL - tU, sU - tL, 1.0, 1)


def _output_softmax(lower, upper, acts, pre):
    """Bounds on the softmax of the logits (n, C) over the box: from the bounds on the logits' differences."""
    fL, fU = pre[-1]
    hL, hU = acts[-2]
    dL, dU = _logit_differences(
        lower.weights[-1], upper.weights[-1], lower.biases[-1], upper.biases[-1], hL, hU
    )
    # intersect with the differences of the logit bounds (sound either way)
    dL = np.maximum(dL, fL[:, None, :] - fU[:, :, None])
    dU = np.minimum(dU, fU[:, None, :] - fL[:, :, None])
    return softmax_bounds(dL, dU)


def _hidden_derivative_labels(W_lo, W_hi, sL, sU, allowed):
    """Bounds on ``Wᵀ (s - e_a)`` (n, H) over the softmax bounds (``0 <= sL <= sU``) and the labels ``a``
    each row may take (``allowed``, (n, C)): for each ``a``, ``Σ_{c≠a} (W_c - W_a) s_c`` (the output
    derivative ``s - e_a`` sums to 0), one interval per weight difference times a nonnegative interval (two
    matrix products), padded as `_hidden_derivative_ce`; then the hull over the allowed ``a``.  A changed
    label is one class, so the derivative's entries are not each in ``[s - 1, s]`` at once, as their box
    would allow (C - 1 times the change of one label at worst)."""
    C, H = W_lo.shape
    n = len(sL)
    dL = W_lo[None, :, :] - W_hi[:, None, :]  # [a, c, h]: the lower end of W_c - W_a
    dU = W_hi[None, :, :] - W_lo[:, None, :]
    dL[np.arange(C), np.arange(C)] = 0.0
    dU[np.arange(C), np.arange(C)] = 0.0

    def by_class(d):  # [a, c, h] -> (c, a h), for (n, c) @ (c, a h)
        return d.transpose(1, 0, 2).reshape(C, C * H)

    lo = sL @ by_class(np.maximum(dL, 0.0)) + sU @ by_class(np.minimum(dL, 0.0))
    hi = sU @ by_class(np.maximum(dU, 0.0)) + sL @ by_class(np.minimum(dU, 0.0))
    mW = magnitude(W_lo, W_hi)
    mag = (magnitude(sL, sU) @ mW)[:, None, :] + 8.0 * (C + 4) * mW[None]
    lo, hi = pad(lo.reshape(n, C, H), hi.reshape(n, C, H), mag, C + 2)
    use = allowed[:, :, None]
    return np.where(use, lo, np.inf).min(axis=1), np.where(use, hi, -np.inf).max(axis=1)


def _hidden_derivative_ce(W_lo, W_hi, gzL, gzU, y):
    """Bounds on ``W^T g`` (n, H) for the cross-entropy output derivative ``g`` (whose entries sum to 0):
    ``Σ_{c≠y} (W_c - W_y) g_c``, padded for the float ``g @ W`` of `MLP.train` (whose ``Σ g_c`` is only
    nearly 0)."""
    n = len(y)
    C = W_lo.shape[0]
    keep = np.ones((n, C), dtype=bool)
    keep[np.arange(n), y] = False
    dWL = np.where(keep[:, :, None], W_lo[None] - W_hi[y][:, None, :], 0.0)  # (n, C, H)
    dWU = np.where(keep[:, :, None], W_hi[None] - W_lo[y][:, None, :], 0.0)
    lo, hi, _ = _imul(dWL, dWU, gzL[:, :, None], gzU[:, :, None])
    mW = magnitude(W_lo, W_hi)
    mag = magnitude(gzL, gzU) @ mW + 8.0 * (C + 4) * mW[y]
    return pad(lo.sum(axis=1), hi.sum(axis=1), mag, C + 2)


def _outer(aL, aU, bL, bU):
    """Bounds on the outer products ``a_k b_kᵀ`` (n, o·i) of interval vectors a (n, o) and b (n, i)
    (unpadded)."""
    n = len(aL)
    aL, aU = aL[:, :, None], aU[:, :, None]
    if bL is bU or np.array_equal(bL, bU):  # exact b (inputs): the ends are aL b and aU b, by the sign of b
        b = bL[:, None, :]
        lo_a, hi_a = np.where(b >= 0, aL, aU), np.where(b >= 0, aU, aL)
        return (lo_a * b).reshape(n, -1), (hi_a * b).reshape(n, -1)
    lo, hi, _ = _imul(aL, aU, bL[:, None, :], bU[:, None, :])
    return lo.reshape(n, -1), hi.reshape(n, -1)


def interval_gradients(lower, upper, XL, XU, y, loss, labels="own", *, target=None, radius=None):
    """Per-sample gradient bounds of ``ℓ(f_θ(x_k), y_k)`` over the parameter box and input boxes, for the
    labels ``"own"``, ``"other"`` or ``"any"`` (see `output_derivative`).

    Returns ``(gL, gU)`` of shape (n, n_params) in `MLP.to_vector` order.  The weight-gradient entries are
    products left unpadded (each within one rounding, relative ``2**-53``, of its exact value): sum them with
    `sum_with_budget`, which pads for it.
    """
    acts, pre = interval_forward(lower, upper, XL, XU)
    labelled = None
    if loss == "cross_entropy":
        sL, sU = _output_softmax(lower, upper, acts, pre)
        allowed = allowed_labels(y, np.arange(sL.shape[1]), labels, target)
        gzL, gzU = _ce_derivative(sL, sU, allowed)
        if len(lower.weights) > 1 and allowed.sum(axis=1).max() > 1:  # one label a row: its box is exact
            labelled = (sL, sU, allowed)
    else:
        gzL, gzU = output_derivative(lower, upper, acts, pre, y, loss, labels, target=target, radius=radius)
    gL, gU, _ = interval_backward(lower, upper, acts, pre, (gzL, gzU), y, loss, labelled=labelled)
    return gL, gU


def interval_backward(lower, upper, acts, pre, out, y, loss, *, gradients=True, labelled=None):
    """The backward pass of `interval_gradients` from the output derivative bounds ``out``: per-sample
    gradient bounds (unpadded weight entries; None without ``gradients``) and the derivative bounds at each
    layer's pre-activation (``derivs[layer]``, the output layer last).  ``labelled``: ``(sL, sU, allowed)``,
    the softmax bounds and the labels each row may take under cross-entropy, whose last hidden derivative
    is then also bounded label by label (`_hidden_derivative_labels`)."""
    gzL, gzU = out
    n_layers = len(lower.weights)
    derivs: list[tuple[np.ndarray, np.ndarray]] = [None] * n_layers  # type: ignore[list-item]
    parts: list[tuple[np.ndarray, np.ndarray]] = [None] * n_layers  # type: ignore[list-item]
    for layer in range(n_layers - 1, -1, -1):
        derivs[layer] = (gzL, gzU)
        if gradients:
            # per-sample weight gradients, not padded: each end is one float product, within one rounding
            # of its exact value; `sum_with_budget` pads the sums for it
            wl, wu = _outer(gzL, gzU, *acts[layer])
            n = len(gzL)
            parts[layer] = (
                np.concatenate([wl.reshape(n, -1), gzL], axis=1),
                np.concatenate([wu.reshape(n, -1), gzU], axis=1),
            )
        if layer > 0:
            WL, WU = lower.weights[layer], upper.weights[layer]
            if loss == "cross_entropy" and layer == n_layers - 1:
                ghL, ghU = _hidden_derivative_ce(WL, WU, gzL, gzU, y)
                if labelled is not None:  # both hold: their intersection
                    lbL, lbU = _hidden_derivative_labels(WL, WU, *labelled)
                    ghL, ghU = np.maximum(ghL, lbL), np.minimum(ghU, lbU)
            else:
                lo, hi, mag = _imul(WL[None], WU[None], gzL[:, :, None], gzU[:, :, None])
                ghL, ghU = pad(lo.sum(axis=1), hi.sum(axis=1), mag.sum(axis=1), WL.shape[0])
            zL, zU = pre[layer - 1]
            on, maybe = zL > 0, (zU > 0) & ~(zL > 0)
            gzL = np.where(on, ghL, np.where(maybe, np.minimum(ghL, 0.0), 0.0))
            gzU = np.where(on, ghU, np.where(maybe, np.maximum(ghU, 0.0), 0.0))
    if not gradients:
        return None, None, derivs
    gL = np.concatenate([p[0] for p in parts], axis=1)
    return gL, np.concatenate([p[1] for p in parts], axis=1), derivs
