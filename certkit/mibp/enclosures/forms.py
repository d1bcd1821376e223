"""Affine forms over symbols shared by every sample, for `certkit.mibp.enclosures.shared`.

A batch of forms ``c + G e ± r`` holds, for each sample and unit, a centre ``c``, coefficients ``G`` on
the shared symbols ``e ∈ [-1, 1]^q`` (last axis; None: no symbols) and an independent radius ``r``: the
value lies in ``c + G e + [-r, r]`` for every admissible ``e``.  The parameters of one step are such forms
without ``r`` (a zonotope); the inputs are forms without symbols.

Every operation adds to ``r`` a bound on the rounding error of computing the new ``c`` and ``G`` and of
the float evaluation of the same operation by `MLP.train` (in any summation order): ``6 (T + 4) u M``
for a ``T``-term sum of products whose magnitudes add up to at most ``M`` (``u = 2**-52``), so a form
contains the float values of the nominal computation for every parameter vector it holds.
"""

from __future__ import annotations

import numpy as np

from certkit.mibp.enclosures.interval import softmax_bounds
from certkit.mibp.problem.losses import sigmoid, softmax

__all__ = [
    "Forms",
    "Params",
    "backward",
    "err_bound",
    "girard",
    "initial_state",
    "linear",
    "mask",
    "relu",
    "relu_coefficients",
    "sigmoid_forms",
    "softmax_forms",
    "sum_outer",
    "sum_rows",
    "up",
]

_U = 2.0**-52
_TINY = 1e-300


def up(x: np.ndarray) -> np.ndarray:
    """A float >= the exact value of a nonnegative quantity computed with a few roundings."""
    return x * (1.0 + 8.0 * _U) + _TINY


def err_bound(terms: int, magnitude: np.ndarray) -> np.ndarray:
    """The rounding allowance of a ``terms``-term sum of products of total magnitude ``magnitude`` (see the
    module docstring)."""
    return up(6.0 * (terms + 4) * _U * magnitude)


class Forms:
    """Elementwise forms ``c + G e ± r`` (``G``: symbols on the last axis, or None without symbols)."""

    __slots__ = ("G", "c", "r", "rho")

    def __init__(self, c: np.ndarray, G: np.ndarray | None, r: np.ndarray) -> None:
        self.c, self.G, self.r = c, G, r
        if G is None or G.shape[-1] == 0:
            self.G, self.rho = None, np.zeros_like(c)
        else:
            self.rho = up(np.abs(G).sum(axis=-1) * (1.0 + (G.shape[-1] + 2) * _U))

    @classmethod
    def interval(cls, lo: np.ndarray, hi: np.ndarray) -> Forms:
        """Forms without symbols that contain ``[lo, hi]``."""
        c = 0.5 * lo + 0.5 * hi
        return cls(c, None, up(np.maximum(hi - c, c - lo)))

    def radius(self) -> np.ndarray:
        """Upper bound on ``Σ|G| + r``."""
        return up(self.rho + self.r)

    def maxabs(self) -> np.ndarray:
        return up(np.abs(self.c) + self.rho + self.r)

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Sound range of every form."""
        R = up(self.radius() + 2.0 * _U * np.abs(self.c))
        return self.c - R, self.c + R

    def coefficients(self, q: int) -> np.ndarray:
        """``G``, with zeros when there are no symbols."""
        return np.zeros((*self.c.shape, q)) if self.G is None else self.G


class Params:
    """One layer's parameters as forms without remainder: ``W = Wc + GW e`` (o, i), ``b = bc + Gb e``."""

    __slots__ = ("GW", "Gb", "Wc", "bc", "rho_W", "rho_b")

    def __init__(self, Wc, GW, bc, Gb) -> None:
        self.Wc, self.GW, self.bc, self.Gb = Wc, GW, bc, Gb
        q = GW.shape[-1]
        self.rho_W = up(np.abs(GW).sum(axis=-1) * (1.0 + (q + 2) * _U))
        self.rho_b = up(np.abs(Gb).sum(axis=-1) * (1.0 + (q + 2) * _U))


def linear(h: Forms, p: Params) -> Forms:
    """``W h + b`` for every sample: ``(Wc + ΔW)(hc + Δh ± r) + b``; the linear part keeps ``Wc Δh`` and
    ``ΔW hc``, and ``|Wc| r + ρ_W (ρ_h + r)`` bounds the rest."""
    k, i = h.c.shape
    o, q = p.Wc.shape[0], p.GW.shape[-1]
    c = h.c @ p.Wc.T + p.bc
    G = (h.c @ p.GW.transpose(1, 0, 2).reshape(i, o * q)).reshape(k, o, q) + p.Gb
    if h.G is not None:
        G += np.matmul(p.Wc, h.G)
    rad = h.radius()
    absW = np.abs(p.Wc)
    r = h.r @ absW.T + rad @ p.rho_W.T
    mag = (np.abs(h.c) + rad) @ (absW + p.rho_W).T + np.abs(p.bc) + p.rho_b
    return Forms(c, G, up(r + err_bound(i + 1, mag)))


def backward(g: Forms, p: Params) -> Forms:
    """``g W`` for every sample (the derivative with respect to the layer's input)."""
    k, o = g.c.shape
    i, q = p.Wc.shape[1], p.GW.shape[-1]
    c = g.c @ p.Wc
    G = (g.c @ p.GW.reshape(o, i * q)).reshape(k, i, q)
    if g.G is not None:
        G += np.matmul(p.Wc.T, g.G)
    rad = g.radius()
    absW = np.abs(p.Wc)
    r = g.r @ absW + rad @ p.rho_W
    return Forms(c, G, up(r + err_bound(o, g.maxabs() @ (absW + p.rho_W))))


def relu_coefficients(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(λ, s, t)`` with ``max(z, 0) ∈ λ z + s ± t`` for every ``z ∈ [lo, hi]``: ``λ = 1, s = t = 0`` where
    ``lo > 0``, ``λ = s = t = 0`` where ``hi <= 0``, else the parallelogram ``λ = hi / (hi - lo)`` with
    ``max(z, 0) - λ z ∈ [0, top]``, ``s = t = top / 2`` (rounding included in ``t``)."""
    on, off = lo > 0, hi <= 0
    unsure = ~(on | off)
    span = np.where(unsure, hi - lo, 1.0)
    lam = np.where(on, 1.0, np.clip(np.where(unsure, hi / span, 0.0), 0.0, 1.0))
    top = np.where(unsure, np.maximum(-lam * lo, hi - lam * hi), 0.0)
    top = np.where(unsure, up(top + 2.0 * _U * (np.abs(lam * lo) + np.abs(hi))), 0.0)
    half = 0.5 * top
    return lam, half, np.where(unsure, up(half + _U * top), 0.0)


def relu(z: Forms, lo: np.ndarray, hi: np.ndarray) -> Forms:
    """``max(z, 0)`` given sound bounds ``lo <= z <= hi`` (`relu_coefficients`)."""
    lam, shift, rad = relu_coefficients(lo, hi)
    G = None if z.G is None else lam[..., None] * z.G
    err = np.where(rad > 0, up(4.0 * _U * lam * z.maxabs()), 0.0)
    return Forms(lam * z.c + shift, G, up(lam * z.r + rad + err))


def mask(g: Forms, lo: np.ndarray, hi: np.ndarray) -> Forms:
    """``g · 1[z > 0]`` given bounds ``lo <= z <= hi``: ``g`` where ``z > 0``, 0 where ``z <= 0``, the hull
    of both elsewhere (as an interval)."""
    on, off = lo > 0, hi <= 0
    gL, gU = g.bounds()
    unsure = Forms.interval(np.minimum(gL, 0.0), np.maximum(gU, 0.0))
    c = np.where(on, g.c, np.where(off, 0.0, unsure.c))
    r = np.where(on, g.r, np.where(off, 0.0, unsure.r))
    G = None if g.G is None else np.where(on[..., None], g.G, 0.0)
    return Forms(c, G, r)


def sum_rows(g: Forms, q: int, terms: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``Σ_k g_k`` over the first axis: ``(c, G, r)``; the rounding is that of a ``terms``-term sum (the
    caller may add the sums of several chunks of one ``terms``-row sum)."""
    G = np.zeros((*g.c.shape[1:], q)) if g.G is None else g.G.sum(axis=0)
    r = up(g.r.sum(axis=0) * (1.0 + (terms + 2) * _U) + err_bound(terms, g.maxabs().sum(axis=0)))
    return g.c.sum(axis=0), G, r


def sum_outer(g: Forms, h: Forms, q: int, terms: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``Σ_k g_k h_kᵀ`` (o, i) over the samples, flattened to ``o·i``: ``(c, G, r)``; the linear part keeps
    ``gc Δh + hc Δg``, and ``|gc| r_h + r_g |hc| + (ρ_g + r_g)(ρ_h + r_h)`` bounds the rest (rounding as
    in `sum_rows`)."""
    k, o = g.c.shape
    i = h.c.shape[1]
    c = g.c.T @ h.c
    G = np.zeros((o, i, q))
    if h.G is not None:
        G += (g.c.T @ h.G.reshape(k, i * q)).reshape(o, i, q)
    if g.G is not None:
        G += (h.c.T @ g.G.reshape(k, o * q)).reshape(i, o, q).transpose(1, 0, 2)
    r = np.abs(g.c).T @ h.r + g.r.T @ np.abs(h.c) + g.radius().T @ h.radius()
    r = up(r * (1.0 + (terms + 2) * _U) + err_bound(terms + 2, g.maxabs().T @ h.maxabs()))
    return c.ravel(), G.reshape(o * i, q), r.ravel()


def _concave_range(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Range of ``s (1 - s)`` for ``s ∈ [lo, hi] ⊂ [0, 1]``."""
    f_lo, f_hi = lo - lo * lo, hi - hi * hi
    mid = np.clip(0.5, lo, hi)
    return np.maximum(np.minimum(f_lo, f_hi) - 4.0 * _U, 0.0), mid - mid * mid + 4.0 * _U


def softmax_forms(z: Forms, zL: np.ndarray, zU: np.ndarray) -> Forms:
    """``softmax(z)`` (k, C) by the mean-value form in the logit differences ``d_j = z_j - z_0``:
    ``s(d) = s(dc) + J(dc)(d - dc) + (J(ξ) - J(dc))(d - dc)``, with ``J(ξ)`` bounded over the box of the
    differences (the forms' ranges intersected with ``zL <= z <= zU``, and the centre added).  The
    centre carries ``8 (C + 4) u`` for the float softmax of `MLP.train`."""
    k, C = z.c.shape
    # every pairwise difference z_j - z_i: its centre and a sound range
    dc = z.c[:, None, :] - z.c[:, :, None]  # [k, i, j]: z_j - z_i
    spread = np.zeros((k, C, C))  # Σ_q |G_j - G_i|, symmetric: one class against the later ones at a time
    if z.G is not None:
        for i in range(C - 1):
            d = np.abs(z.G[:, i + 1 :, :] - z.G[:, i : i + 1, :]).sum(axis=2)
            spread[:, i, i + 1 :] = d
            spread[:, i + 1 :, i] = d
    rad = up(spread * (1.0 + (z.G.shape[-1] + 2 if z.G is not None else 2) * _U) + z.r[:, None, :])
    rad = up(rad + z.r[:, :, None] + 3.0 * _U * (np.abs(z.c[:, None, :]) + np.abs(z.c[:, :, None])))
    lo = np.maximum(dc - rad, zL[:, None, :] - zU[:, :, None])
    hi = np.minimum(dc + rad, zU[:, None, :] - zL[:, :, None])
    # the segment from the (exact) centre stays inside
    lo = np.minimum(lo, dc - 2.0 * _U * np.abs(dc))
    hi = np.maximum(hi, dc + 2.0 * _U * np.abs(dc))
    sL, sU = softmax_bounds(lo, hi)
    s0 = softmax(z.c)
    # J = diag(s) - s sᵀ at the centre and its range over the box
    J0 = -s0[:, :, None] * s0[:, None, :]
    JL = -(sU[:, :, None] * sU[:, None, :]) - 4.0 * _U
    JU = -(sL[:, :, None] * sL[:, None, :]) + 4.0 * _U
    eye = np.eye(C, dtype=bool)[None]
    dL, dU = _concave_range(sL, sU)
    J0 = np.where(eye, (s0 - s0 * s0)[:, :, None], J0)
    JL = np.where(eye, dL[:, :, None], JL)
    JU = np.where(eye, dU[:, :, None], JU)
    dev = up(np.maximum(JU - J0, J0 - JL) + 2.0 * _U * np.abs(J0))[:, :, 1:]
    J = J0[:, :, 1:]
    # the differences to class 0 as forms
    if z.G is None:
        G = None
        rho_d = np.zeros((k, C - 1))
    else:
        Gd = z.G[:, 1:, :] - z.G[:, :1, :]
        G = np.matmul(J, Gd)
        rho_d = up(spread[:, 0, 1:] * (1.0 + (Gd.shape[-1] + 2) * _U))  # Σ|Gd|
    r_d = up(z.r[:, 1:] + z.r[:, :1] + 2.0 * _U * rho_d)  # the rounding of Gd
    absJ = np.abs(J)
    # |d - dc| over the box, dc the exact difference of the centres
    reach = up(np.maximum(hi - dc, dc - lo) + 2.0 * _U * np.abs(dc))[:, 0, 1:]
    r = np.einsum("kij,kj->ki", dev, reach) + np.einsum("kij,kj->ki", absJ, r_d)
    err = err_bound(C, np.einsum("kij,kj->ki", absJ, rho_d)) + 8.0 * (C + 4) * _U
    return Forms(s0, G, up(r + err))


def sigmoid_forms(z: Forms, zL: np.ndarray, zU: np.ndarray) -> Forms:
    """``σ(z)`` (k, 1) by the mean-value form (as `softmax_forms`), ``16 u`` for the float sigmoid."""
    lo, hi = z.bounds()
    lo = np.minimum(np.maximum(lo, zL), z.c - 2.0 * _U * np.abs(z.c))
    hi = np.maximum(np.minimum(hi, zU), z.c + 2.0 * _U * np.abs(z.c))
    sL = np.maximum(sigmoid(lo) - 16.0 * _U, 0.0)
    sU = np.minimum(sigmoid(hi) + 16.0 * _U, 1.0)
    s0 = sigmoid(z.c)
    d0 = s0 - s0 * s0
    dL, dU = _concave_range(sL, sU)
    dev = up(np.maximum(dU - d0, d0 - dL) + 2.0 * _U * d0)
    G = None if z.G is None else d0[..., None] * z.G
    r = dev * up(np.maximum(hi - z.c, z.c - lo)) + d0 * z.r + err_bound(1, d0 * z.rho) + 16.0 * _U
    return Forms(s0, G, up(r))


def initial_state(model, recipe) -> np.ndarray:
    """The state a zonotope carry starts from: θ_0, followed with momentum by the velocity 0 (the state is
    then ``(θ, v)``, 2 m entries over the same symbols)."""
    theta = model.to_vector()
    return np.concatenate([theta, np.zeros_like(theta)]) if recipe.momentum else theta


def girard(G: np.ndarray, keep: int) -> tuple[np.ndarray, np.ndarray]:
    """Girard's order reduction of the generator matrix ``G`` (rows × columns) to ``keep`` columns: the
    indices of the columns kept (those with the largest ``‖g‖₁ - ‖g‖∞``, in their order) and, per row, an
    upper bound on ``Σ|g|`` over the others, which the caller boxes (adds to the row's radius)."""
    if G.shape[1] <= keep:
        return np.arange(G.shape[1]), np.zeros(G.shape[0])
    A = np.abs(G)
    order = np.argsort(-(A.sum(axis=0) - A.max(axis=0)), kind="stable")
    dropped = order[keep:]
    return np.sort(order[:keep]), A[:, dropped].sum(axis=1) * (1.0 + (len(dropped) + 2) * _U)
