"""One certified SGD step under `certkit.mibp.Neighbours` (up to ``k`` rows added to or removed from every
batch): per-row gradient bounds in an interval arithmetic that is isotone in floating point, and the bound on
the batch mean over every allowed change (`NeighbourMean`).

Why isotone.  The private mechanisms (`certkit.mibp.privacy`) release predictions with noise that depends on
how many changes each one is certified for, and their proofs need that number to move by at most one
between neighbouring datasets: the box of a dataset with one row more or less, at budget ``k - 1``, must lie
inside the box of the training set at budget ``k`` — not only in exact arithmetic (where `NeighbourMean`
says why it holds) but for the floating-point numbers computed.  Every bound here is therefore a composition
of operations each monotone in its arguments (IEEE addition, subtraction, multiplication, division and square
root are: their rounding is monotone), evaluated in an order fixed by the shape of one row's arrays: never by
the number of rows, the chunking, or BLAS's blocking (no matrix products: sums over a layer's inputs run left
to right, `certkit.mibp.enclosures.interval.ordered_sum`).  The sums over a batch's rows are exact: each
row's bound is rounded outward to a grid (a power of two fixed by the clipping bound, or by the batch's
largest bound without clipping, and by `MAX_BATCH_ROWS`) coarse enough that the sums of any batch are
integers below ``2**53``.  ``exp``
enters only at the points of a grid whose spacing (``2**-30`` relative) is far wider than its rounding, so
that its values at distinct points are ordered (`_exp_bounds`).  Shrinking a parameter box therefore never
widens any computed bound, and a row's bound is the same number whatever batch or chunk it is computed in.

Soundness.  Every bound is padded outward (`_pad`) for the rounding of its own computation and of the
nominal run's float computation of the same value at any point of the boxes (a sum of ``m`` products in any
order: ``(m + 6) u`` times the sum of the magnitudes of its terms, which also bounds the end itself), as in
`certkit.mibp.enclosures.interval`; the per-row weight gradients are single products, padded for their one
rounding by the batch sum.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from certkit.mibp.enclosures.clipping import clip_bounds
from certkit.mibp.enclosures.interval import magnitude, ordered_sum
from certkit.mibp.enclosures.sgd_step import BoundsOverflowError, _merge_smallest
from certkit.mibp.problem.input_sets import InputSets, NeighbourSets
from certkit.mibp.problem.losses import check_labels, label_classes
from certkit.mibp.problem.mlp import MLP
from certkit.mibp.problem.recipe import Recipe
from certkit.parallel import rows_per_chunk

__all__ = [
    "ADDED_LABELS",
    "MAX_BATCH_ROWS",
    "NeighbourMean",
    "added_row_bounds",
    "check_neighbour_batches",
    "forward",
    "neighbour_batches_problem",
    "neighbour_margins",
    "neighbour_mean",
    "neighbour_step",
    "neighbour_update",
    "row_gradients",
]

_U = 2.0**-52
#: Spacing of the points where ``exp`` is evaluated (its rounding is about ``2**-52`` relative).
_EXP_GRID = 2.0**-30
#: ``exp`` is evaluated in ``[-_EXP_LOW, _EXP_HIGH]`` only (normal results there, rounding below one ulp).
_EXP_LOW, _EXP_HIGH = 700.0, 709.0
#: How the errors of `certkit.mibp.problem.losses.check_labels` name `Neighbours`' ``labels``.
ADDED_LABELS = "of an added row (Neighbours(labels=...))"
#: Most rows a neighbouring dataset's batch may hold (its rows plus ``k``): the batch sums are exact below it.
MAX_BATCH_ROWS = 2**24


def _pad(lo: np.ndarray, hi: np.ndarray, mag: Any, terms: int) -> tuple[np.ndarray, np.ndarray]:
    """Widen ``[lo, hi]`` by ``(terms + 6) u mag``: the rounding of a ``terms``-term sum of total magnitude
    ``mag`` (which also bounds ``|lo|`` and ``|hi|``), computed and in the nominal run.  The width depends on
    ``mag`` alone, so the padded ends are monotone in the unpadded ones."""
    err = (terms + 6) * _U * np.asarray(mag) + 1e-300
    return lo - err, hi + err


def _products(aL, aU, bL, bU, kind: str):
    """Elementwise bounds on ``a b``: the smallest and largest of the four corner products (each one rounding
    from its exact value).  ``kind`` says what is known of ``b`` — ``"exact"`` (``bL`` is ``bU``),
    ``"nonneg"`` (``bL >= 0``, activations after a ReLU) or ``"any"`` — and picks the corners that can be
    extreme without computing the others; the values are those of the four-corner minimum and maximum (the
    rounding is monotone), so they are monotone in the four ends whatever the kind."""
    if kind == "exact":
        p, q = aL * bL, aU * bL
        return np.minimum(p, q), np.maximum(p, q)
    if kind == "nonneg":
        return aL * np.where(aL >= 0, bL, bU), aU * np.where(aU >= 0, bU, bL)
    p, q, r, t = aL * bL, aL * bU, aU * bL, aU * bU
    return np.minimum(np.minimum(p, q), np.minimum(r, t)), np.maximum(np.maximum(p, q), np.maximum(r, t))


def _contract(aL, aU, bL, bU, kind: str):
    """Bounds on ``Σ_j a[..., j] b[..., j]`` over the last axis (broadcast), unpadded, and the sum of the
    terms' magnitudes ``max|a| max|b|``; every sum runs left to right (`ordered_sum`)."""
    lo, hi = _products(aL, aU, bL, bU, kind)
    mb = np.abs(bL) if kind == "exact" else bU if kind == "nonneg" else magnitude(bL, bU)
    return ordered_sum(lo), ordered_sum(hi), ordered_sum(magnitude(aL, aU) * mb)


def _kind(layer: int, exact: bool) -> str:
    """What is known of the input of ``layer``: the rows (exact, or boxes of any sign) or ReLU activations."""
    return ("exact" if exact else "any") if layer == 0 else "nonneg"


def _affine(WL, WU, bL, bU, hL, hU, kind: str):
    """Padded bounds (n, o) on ``h Wᵀ + b`` for interval ``W`` (o, i), ``b`` (o,) and rows ``h`` (n, i)."""
    lo, hi, mag = _contract(WL[None], WU[None], hL[:, None, :], hU[:, None, :], kind)
    mag = mag + magnitude(bL, bU)
    return _pad(lo + bL, hi + bU, mag, WL.shape[1] + 2)


def forward(lower: MLP, upper: MLP, XL: np.ndarray, XU: np.ndarray):
    """Interval forward pass over the parameter box: input/activation bounds ``acts`` (input first) and
    pre-activation bounds ``pre`` (the output last), as
    `certkit.mibp.enclosures.interval.interval_forward`."""
    acts, pre = [(XL, XU)], []
    hL, hU = XL, XU
    last, exact = len(lower.weights) - 1, XL is XU
    for layer, (WL, WU, bL, bU) in enumerate(zip(lower.weights, upper.weights, lower.biases, upper.biases)):
        zL, zU = _affine(WL, WU, bL, bU, hL, hU, _kind(layer, exact))
        pre.append((zL, zU))
        hL, hU = (zL, zU) if layer == last else (np.maximum(zL, 0.0), np.maximum(zU, 0.0))
        acts.append((hL, hU))
    return acts, pre


def _exp_bounds(t: np.ndarray, *, upper: bool) -> np.ndarray:
    """A bound on ``exp(t)`` (above with ``upper``, else below) that is monotone in ``t``: ``exp`` at ``t``
    rounded outward to the grid `_EXP_GRID` (distinct grid points are ``2**-30`` apart in relative value,
    far more than ``exp``'s rounding, so their computed values are ordered), widened by 4 ulps; below
    ``-_EXP_LOW`` the bound is the one at ``-_EXP_LOW`` (above) or 0 (below), beyond ``_EXP_HIGH`` infinity
    (above) or the one at ``_EXP_HIGH`` (below)."""
    with np.errstate(over="ignore", invalid="ignore"):
        grid = (np.ceil(t / _EXP_GRID) if upper else np.floor(t / _EXP_GRID)) * _EXP_GRID
        grid = np.clip(grid, -_EXP_LOW, _EXP_HIGH)
        value = np.exp(grid)
    if upper:
        return np.where(t > _EXP_HIGH, np.inf, value * (1.0 + 4.0 * _U))
    return np.where(t < -_EXP_LOW, 0.0, value * (1.0 - 4.0 * _U))


def _sigmoid_bounds(fL: np.ndarray, fU: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bounds on ``σ(f) = 1 / (1 + exp(-f))`` over ``[fL, fU]``, monotone in the ends and padded by 16 ulps of
    1 for their rounding and the nominal run's float ``σ``."""
    lo = 1.0 / (1.0 + _exp_bounds(-fL, upper=True))
    hi = 1.0 / (1.0 + _exp_bounds(-fU, upper=False))
    err = 16.0 * _U
    return np.maximum(lo - err, 0.0), np.minimum(hi + err, 1.0)


def _logit_differences(lower: MLP, upper: MLP, acts, pre) -> tuple[np.ndarray, np.ndarray]:
    """Bounds (n, C, C) on ``z_j - z_i`` at ``[k, i, j]``: the output layer's weight differences applied to
    its input once, intersected with the differences of the logit bounds; padded for the float logits."""
    WL, WU, bL, bU = lower.weights[-1], upper.weights[-1], lower.biases[-1], upper.biases[-1]
    hL, hU = acts[-2]
    kind = _kind(len(lower.weights) - 1, acts[0][0] is acts[0][1])
    dWL, dWU = WL[None, :, :] - WU[:, None, :], WU[None, :, :] - WL[:, None, :]  # [i, j] bounds W_j - W_i
    lo, hi, _ = _contract(dWL[None], dWU[None], hL[:, None, None, :], hU[:, None, None, :], kind)
    # each logit's float sum has magnitude Σ |W_c| |h| + |b_c|, which bounds the differences' terms too
    mag = _contract(WL[None], WU[None], hL[:, None, :], hU[:, None, :], kind)[2] + magnitude(bL, bU)
    dL, dU = _pad(
        lo + (bL[None, :] - bU[:, None]),
        hi + (bU[None, :] - bL[:, None]),
        mag[:, :, None] + mag[:, None, :],
        2 * WL.shape[1] + 8,
    )
    fL, fU = pre[-1]
    dL = np.maximum(dL, fL[:, None, :] - fU[:, :, None])
    dU = np.minimum(dU, fU[:, None, :] - fL[:, :, None])
    diag = np.arange(WL.shape[0])
    dL[:, diag, diag], dU[:, diag, diag] = 0.0, 0.0
    return dL, dU


def _output_derivative(lower: MLP, upper: MLP, acts, pre, y: np.ndarray, loss: str):
    """Bounds (n, C) on ``dℓ/dz`` at the output for the rows' own labels ``y``."""
    fL, fU = pre[-1]
    if loss == "mse":
        y2 = y.reshape(len(y), -1)
        return _pad(2.0 * (fL - y2), 2.0 * (fU - y2), 2.0 * (magnitude(fL, fU) + np.abs(y2)), 2)
    if loss == "binary_cross_entropy":
        sL, sU = _sigmoid_bounds(fL, fU)
        return _pad(sL - y[:, None], sU - y[:, None], 1.0, 0)
    if loss == "cross_entropy":
        dL, dU = _logit_differences(lower, upper, acts, pre)
        C = fL.shape[1]
        sL = 1.0 / ordered_sum(_exp_bounds(dU, upper=True))  # softmax_i = 1 / Σ_j exp(z_j - z_i)
        sU = 1.0 / ordered_sum(_exp_bounds(dL, upper=False))
        err = 8.0 * (C + 4) * _U
        sL, sU = np.maximum(sL - err, 0.0), np.minimum(sU + err, 1.0)
        onehot = (np.arange(C)[None, :] == y[:, None]).astype(np.float64)
        return _pad(sL - onehot, sU - onehot, 1.0, 0)
    if fL.shape[1] == 1:  # binary hinge: -y where 1 - y f > 0, else 0
        yv = y[:, None]
        vL, vU = _pad(
            np.where(yv > 0, 1.0 - fU, 1.0 + fL),
            np.where(yv > 0, 1.0 - fL, 1.0 + fU),
            1.0 + magnitude(fL, fU),
            1,
        )
        aL, aU = (vL > 0).astype(np.float64), (vU > 0).astype(np.float64)
        return np.where(yv > 0, -aU, aL), np.where(yv > 0, -aL, aU)
    n = len(y)
    rows = np.arange(n)
    fyL, fyU = fL[rows, y][:, None], fU[rows, y][:, None]
    vL, vU = _pad(1.0 + fL - fyU, 1.0 + fU - fyL, 1.0 + magnitude(fL, fU) + magnitude(fyL, fyU), 2)
    aL, aU = (vL > 0).astype(np.float64), (vU > 0).astype(np.float64)
    aL[rows, y], aU[rows, y] = 0.0, 0.0
    gL, gU = aL.copy(), aU.copy()
    gL[rows, y], gU[rows, y] = -ordered_sum(aU), -ordered_sum(aL)
    return gL, gU


def _hidden_derivative(lower: MLP, upper: MLP, layer: int, gzL, gzU, y, loss: str):
    """Bounds (n, H) on ``Wᵀ g`` for the derivative ``g`` at layer ``layer``'s output, padded; for
    cross-entropy at the output layer ``Σ_{c≠y} (W_c - W_y) g_c`` (its entries sum to 0)."""
    WL, WU = lower.weights[layer], upper.weights[layer]
    if loss == "cross_entropy" and layer == len(lower.weights) - 1:
        keep = np.arange(WL.shape[0])[None, :, None] != y[:, None, None]  # (n, C, 1)
        dWL = np.where(keep, WL[None] - WU[y][:, None, :], 0.0)  # (n, C, H)
        dWU = np.where(keep, WU[None] - WL[y][:, None, :], 0.0)
        lo, hi, _ = _contract(
            np.swapaxes(dWL, 1, 2), np.swapaxes(dWU, 1, 2), gzL[:, None, :], gzU[:, None, :], "any"
        )
        mW = magnitude(WL, WU)
        C = WL.shape[0]
        mag = _contract(WL.T[None], WU.T[None], gzL[:, None, :], gzU[:, None, :], "any")[2]
        return _pad(lo, hi, mag + 8.0 * (C + 4) * mW[y], C + 2)
    lo, hi, mag = _contract(WL.T[None], WU.T[None], gzL[:, None, :], gzU[:, None, :], "any")
    return _pad(lo, hi, mag, WL.shape[0])


def _gradients(lower: MLP, upper: MLP, XL, XU, y, loss: str) -> tuple[np.ndarray, np.ndarray]:
    """Per-row gradient bounds (n, n_params) in `MLP.to_vector` order; the weight entries are single products
    (one rounding each, padded by the batch sum)."""
    acts, pre = forward(lower, upper, XL, XU)
    gzL, gzU = _output_derivative(lower, upper, acts, pre, y, loss)
    n, parts, exact = len(XL), [], XL is XU
    for layer in range(len(lower.weights) - 1, -1, -1):
        hL, hU = acts[layer]
        kind = _kind(layer, exact)
        wl, wu = _products(gzL[:, :, None], gzU[:, :, None], hL[:, None, :], hU[:, None, :], kind)
        parts[:0] = [(wl.reshape(n, -1), wu.reshape(n, -1)), (gzL, gzU)]
        if layer > 0:
            ghL, ghU = _hidden_derivative(lower, upper, layer, gzL, gzU, y, loss)
            zL, zU = pre[layer - 1]
            on, maybe = zL > 0, (zU > 0) & ~(zL > 0)
            gzL = np.where(on, ghL, np.where(maybe, np.minimum(ghL, 0.0), 0.0))
            gzU = np.where(on, ghU, np.where(maybe, np.maximum(ghU, 0.0), 0.0))
    return np.concatenate([p[0] for p in parts], axis=1), np.concatenate([p[1] for p in parts], axis=1)


def row_gradients(lower: MLP, upper: MLP, X: np.ndarray, y: np.ndarray, recipe: Recipe):
    """Bounds (n, n_params) on the clipped per-row gradients of the rows ``X`` with their labels ``y`` at
    every parameter vector of the box (each row's bound depends on that row alone)."""
    GL, GU = _gradients(lower, upper, X, X, y, recipe.loss)
    return clip_bounds(GL, GU, recipe) if recipe.clips else (GL, GU)


def added_row_bounds(
    lower: MLP, upper: MLP, nb: NeighbourSets, recipe: Recipe
) -> tuple[np.ndarray, np.ndarray]:
    """Bounds (n_params,) on the clipped gradient of any row `Neighbours` may add: with inputs in the
    declared domain and any allowed label (the hull over the labels), clipped as the recipe says; with
    clipping and no domain, every entry lies in ``[-c, c]`` (padded as `clip_bounds` pads)."""
    m = lower.n_params
    if nb.lower is None:
        edge = (recipe.clip_value if recipe.clip_value is not None else recipe.clip_norm) * (1.0 + 8.0 * _U)
        return np.full(m, -edge), np.full(m, edge)
    n_out = lower.sizes[-1]
    labels = label_classes(recipe.loss, n_out) if nb.labels is None else nb.labels
    y = check_labels(labels, recipe.loss, n_out, len(labels), name=ADDED_LABELS)
    XL, XU = np.repeat(nb.lower[None], len(y), axis=0), np.repeat(nb.upper[None], len(y), axis=0)
    GL, GU = _gradients(lower, upper, XL, XU, y, recipe.loss)
    if recipe.clips:
        GL, GU = clip_bounds(GL, GU, recipe)
    return GL.min(axis=0), GU.max(axis=0)


def neighbour_batches_problem(recipe: Recipe, nb: NeighbourSets, k: int | None = None) -> str | None:
    """Why the batches of ``recipe`` cannot be bounded under ``k`` changes (default ``nb.k``): a batch ``k``
    removals could empty, or one whose rows plus ``k`` overflow the exact batch sums; None where they can."""
    k = nb.k if k is None else k
    for step, rows in enumerate(recipe.batches):
        private = int(np.count_nonzero(~nb.public[rows]))
        if len(rows) - min(k, private) < 1:
            return (
                f"Neighbours({k}) may remove every row of batch {step} ({len(rows)} rows, none public); "
                "certify fewer changes than the smallest batch has rows (or use larger batches)"
            )
        if len(rows) + k >= MAX_BATCH_ROWS:
            return (
                f"Neighbours({k}) on batches of {len(rows)} rows: at most {MAX_BATCH_ROWS - 1} rows per "
                "batch plus k are bounded (use smaller batches)"
            )
    return None


def check_neighbour_batches(recipe: Recipe, nb: NeighbourSets) -> None:
    """Refuse a budget that could empty a batch (every row removed) or overflow the exact batch sums
    (`neighbour_batches_problem`)."""
    problem = neighbour_batches_problem(recipe, nb)
    if problem is not None:
        raise ValueError(problem)


class NeighbourMean:
    """Bounds on the mean gradient of a batch of ``n`` rows, fed in row chunks, when up to ``k`` of its rows
    change: ``r`` private rows removed and ``a`` rows added, ``r + a <= k``, each added row's gradient in
    ``[HL, HU]``.

    The upper end.  For given ``r`` and ``a`` an entry's mean is largest with the ``r`` smallest upper bounds
    ``gU`` of the private rows removed and ``a`` rows at ``HU`` added: ``(S - B_r + a HU) / (n - r + a)``,
    ``S`` the sum of every row's ``gU``, ``B_r`` the sum of the ``r`` smallest private ones.  For fixed ``r``
    that is monotone in ``a`` (a ratio of two affine functions of ``a``), so its largest value over
    ``a <= k - r`` is at ``a = 0`` or ``a = k - r``: ``2 (k + 1)`` candidates, the lower end likewise with the
    largest ``gL`` removed and ``HL`` added.

    Why the bound of a neighbouring dataset at ``k - 1`` lies inside the bound at ``k`` (exactly).  With one
    row ``z`` more (its bound within ``[HL, HU]``), any choice of ``r`` removals and ``a`` additions keeps
    either ``z`` (then it is the choice ``(r, a + 1)`` of this batch with ``z``'s value raised to ``HU``) or
    not (``(r - 1, a)``, ``z`` among the removed); with one row less it is ``(r + 1, a)``; every candidate
    mean is monotone in the rows' values, and the rows' bounds themselves only shrink with the parameter
    box.  Here the rows' bounds are rounded outward to multiples of ``grid`` (a power of two, the same or
    coarser for the larger box: coarser rounding outward only widens), so every sum is an exact integer
    multiple of it (below ``2**53`` by the choice of ``grid``), each candidate's quotient
    is rounded once, and the largest rounded quotient is the rounding of the largest exact one: the
    computed bound is a monotone function of the exact one.  Then it is padded for the nominal run's float
    mean (``n + k + 4`` terms of the magnitudes, a quotient) and the rows' own rounding (one ulp each).
    Between chunks only the sums and each entry's ``k`` extreme private values are kept (so one
    accumulation serves every smaller ``k``: `bounds`).

    Parameters
    ----------
    m : int
        Entries of each gradient.
    n : int
        Rows of the batch.
    k : int
        Changes allowed (rows removed plus rows added).
    added : tuple (HL, HU) of ndarray (m,)
        Bounds on an added row's gradient.
    grid : float
        A power of two; every row's bound is rounded outward to a multiple of it.
    """

    def __init__(self, m: int, n: int, k: int, added: tuple[np.ndarray, np.ndarray], grid: float) -> None:
        self.n, self.k, self.grid = n, k, grid
        self.HL, self.HU = np.floor(added[0] / grid), np.ceil(added[1] / grid)
        self.lo, self.hi, self.mag = np.zeros(m), np.zeros(m), np.zeros(m)
        self.rows = self.private = 0
        self.low_top, self.high_bottom = np.zeros((0, m)), np.zeros((0, m))  # k largest qL, k smallest qU

    def add(self, GL: np.ndarray, GU: np.ndarray, public: np.ndarray) -> None:
        """Add a chunk of rows' gradient bounds ``(c, m)``; ``public`` (c,) marks rows never removed."""
        self.rows += len(GL)
        if self.rows > self.n:
            raise RuntimeError("internal error: more rows added to a NeighbourMean than its batch has")
        qL, qU = np.floor(GL / self.grid), np.ceil(GU / self.grid)
        self.lo += qL.sum(axis=0)  # integers below 2**53: exact in any order
        self.hi += qU.sum(axis=0)
        self.mag += np.maximum(-qL, qU).sum(axis=0)
        private = ~public
        self.private += int(np.count_nonzero(private))
        if self.k and np.any(private):
            self.low_top = -_merge_smallest(-self.low_top, -qL[private], self.k)
            self.high_bottom = _merge_smallest(self.high_bottom, qU[private], self.k)

    def bounds(self, k: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Padded ``(lo, hi)`` bounds on the batch's mean gradient over every change of at most ``k`` rows
        (default: the ``k`` it was made for; a smaller one uses the first of the kept extremes, the same
        numbers a `NeighbourMean` made for it would have)."""
        if self.rows != self.n:
            raise RuntimeError("internal error: a NeighbourMean bounded before all its rows were added")
        k = self.k if k is None else k
        if k > self.k:
            raise RuntimeError("internal error: a NeighbourMean bounded for more changes than it kept")
        n, r_max = self.n, min(k, self.private)
        # the r extreme private values in order: B_r = their first r summed (exact integers)
        low = np.cumsum(-np.sort(-self.low_top, axis=0)[:r_max], axis=0)
        high = np.cumsum(np.sort(self.high_bottom, axis=0)[:r_max], axis=0)
        low = np.vstack([np.zeros((1, len(self.lo))), low])
        high = np.vstack([np.zeros((1, len(self.hi))), high])
        lo, hi = np.full(len(self.lo), np.inf), np.full(len(self.hi), -np.inf)
        for r in range(r_max + 1):
            for a in (0, k - r):
                count = float(n - r + a)
                lo = np.minimum(lo, (self.lo - low[r] + a * self.HL) / count)
                hi = np.maximum(hi, (self.hi - high[r] + a * self.HU) / count)
        # magnitude of the mean's terms (every row and k added rows), over the fewest rows it can hold
        mag = (self.mag + k * np.maximum(-self.HL, self.HU)) * self.grid / float(n - r_max)
        return _pad(lo * self.grid, hi * self.grid, mag, 2 * (n + k) + 6)


def _update(theta, velocity, grad, recipe: Recipe, step: int):
    """`certkit.mibp.enclosures.sgd_step.interval_update` without the L1 penalty, monotone in every box:
    ``θ' = (1 - λω) θ - λ (μ v + g)``, ``v' = μ v + g + ω θ``."""
    (tL, tU), (gL, gU) = theta, grad
    lr, wd, mu = float(recipe.rates[step]), recipe.weight_decay, recipe.momentum
    mag_t = magnitude(tL, tU)
    dL, dU, mag_v = gL + wd * tL, gU + wd * tU, magnitude(gL, gU) + wd * mag_t
    sL, sU, mag_s = gL, gU, magnitude(gL, gU)
    if velocity is not None and mu:
        pL, pU = velocity
        mag_p = mu * magnitude(pL, pU)
        dL, dU, mag_v = mu * pL + dL, mu * pU + dU, mag_v + mag_p
        sL, sU, mag_s = mu * pL + gL, mu * pU + gU, mag_s + mag_p
    a = 1.0 - lr * wd
    hL, hU = (a * tL, a * tU) if a >= 0 else (a * tU, a * tL)
    new_theta = _pad(hL - lr * sU, hU - lr * sL, abs(a) * mag_t + lr * mag_s + lr * wd * mag_t, 10)
    return new_theta, (_pad(dL, dU, mag_v, 6) if mu else None)


def _grid(bound: float) -> float:
    """The power of two in whose units up to `MAX_BATCH_ROWS` values of magnitude at most ``bound``, each
    rounded outward to an integer, sum to integers below ``2**53`` (monotone in ``bound``; the same for every
    batch and every k)."""
    exponent = int(np.ceil(np.log2(max(bound, 2.0**-900))))
    return float(2.0 ** (exponent + int(np.log2(MAX_BATCH_ROWS)) - 52))


def _bytes_per_row(model: MLP) -> float:
    """Peak bytes per row of `row_gradients` (the per-row gradients, their products and clipping, a layer's
    products, the output's logit differences), about."""
    sizes = model.sizes
    return 8.0 * (8 * model.n_params + 6 * sizes[-1] ** 2 * max(sizes))


def neighbour_mean(
    lower: MLP, upper: MLP, sets: InputSets, y, recipe: Recipe, step: int, chunk_size=None, *, k=None
) -> NeighbourMean:
    """The `NeighbourMean` of the batch of ``step`` over the box ``[lower, upper]``, every row added, for up
    to ``k`` changes (default ``sets.neighbours.k``).  Without clipping the grid of the exact sums needs the
    batch's largest bound first: the rows are bounded twice (once when the batch fits one chunk)."""
    nb = sets.neighbours
    rows = recipe.batches[step]
    size = rows_per_chunk(_bytes_per_row(lower), chunk_size)
    chunks = [rows[start : start + size] for start in range(0, len(rows), size)]

    def bounds(at):
        return row_gradients(lower, upper, sets.nominal[at], y[at], recipe)

    with np.errstate(over="ignore", invalid="ignore"):
        added = added_row_bounds(lower, upper, nb, recipe)
        largest = float(np.max(np.abs(added)))
        kept = None
        if not recipe.clips:  # clipped rows are within the clipping bound, the others are looked at
            for at in chunks:
                kept = bounds(at)
                largest = max(largest, float(np.max(np.abs(kept[0]))), float(np.max(np.abs(kept[1]))))
        if not np.isfinite(largest):
            raise BoundsOverflowError(
                "the gradient bounds overflowed (no longer finite); certify fewer epochs, a smaller k or "
                "learning_rate, or clip the per-sample gradients"
            )
        acc = NeighbourMean(lower.n_params, len(rows), nb.k if k is None else k, added, _grid(largest))
        for at in chunks:
            GL, GU = kept if kept is not None and len(chunks) == 1 else bounds(at)
            acc.add(GL, GU, nb.public[at])
    return acc


def neighbour_update(lower: MLP, upper: MLP, grad, recipe: Recipe, step: int, velocity=None):
    """The update of ``step`` from the box ``[lower, upper]`` with the mean-gradient bounds ``grad``;
    ``((lo, hi), velocity)``, raising `BoundsOverflowError` when they leave the float64 range."""
    with np.errstate(over="ignore", invalid="ignore"):
        (tL, tU), velocity = _update((lower.to_vector(), upper.to_vector()), velocity, grad, recipe, step)
    if not (np.all(np.isfinite(tL)) and np.all(np.isfinite(tU))):
        raise BoundsOverflowError(
            "the parameter bounds overflowed (interval bounds are no longer finite); certify fewer epochs, "
            "a smaller k or learning_rate, or clip the per-sample gradients"
        )
    return (tL, tU), velocity


def neighbour_step(
    lower: MLP, upper: MLP, sets: InputSets, y, recipe: Recipe, step: int, velocity=None, chunk_size=None
):
    """One certified step of ``recipe`` under ``sets.neighbours`` from the box ``[lower, upper]``; returns
    ``((lo, hi), velocity)`` (see `NeighbourMean`, `certkit.mibp.enclosures.sgd_step.interval_step`)."""
    grad = neighbour_mean(lower, upper, sets, y, recipe, step, chunk_size).bounds()
    return neighbour_update(lower, upper, grad, recipe, step, velocity)


def neighbour_margins(lower: MLP, upper: MLP, X: np.ndarray, pred: np.ndarray) -> np.ndarray:
    """A lower bound, over the box, of the margin of the predictions ``pred`` at the rows of ``X`` (``pred f``
    for one output, ``min_{c != pred} f_pred - f_c`` otherwise; certified iff > 0), monotone in the box:
    `certkit.mibp.enclosures.interval.interval_margin` in this module's arithmetic."""
    acts, pre = forward(lower, upper, X, X)
    fL, fU = pre[-1]
    if fL.shape[1] == 1:
        return np.where(pred > 0, fL[:, 0], -fU[:, 0])
    dL, _ = _logit_differences(lower, upper, acts, pre)  # dL[k, c, pred] bounds f_pred - f_c
    rows = np.arange(len(X))
    diff = dL[rows, :, pred]
    diff[rows, pred] = np.inf
    return diff.min(axis=1)
