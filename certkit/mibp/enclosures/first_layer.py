"""The first hidden layer of the shared carry without its per-sample coefficient arrays.

The first layer's pre-activations ``a = Ŵ x̃`` (``Ŵ = [W | b]``, ``x̃ = [x, 1]``; the inputs carry no
symbols) have coefficients ``G_a[k, o, :] = Σ_j x̃_kj Ĝ[o, j, :]``, and after the ReLU relaxation
``G_h[k, o, :] = λ_ko G_a[k, o, :]``: an array of samples × hidden units × symbols, the largest of the step.
It is never formed.  Every quantity that needs it is a contraction over samples and units computed as a
matrix product with ``Ĝ`` (hidden units × (inputs + 1) × symbols):

- the next layer's coefficients ``Σ_o W'_co λ_ko x̃_kj Ĝ[o, j, :]``: ``(k·c) × (o·j)`` times ``(o·j) × q``;
- the sum over samples of ``g_kc G_h[k, o, :]`` (the next layer's weight gradient):
  ``Σ_j (Σ_k g_kc λ_ko x̃_kj) Ĝ[o, j, :]``;
- the first layer's gradient sum ``Σ_k x̃_kj m_ko G_gh[k, o, :]`` with
  ``G_gh[k, o, :] = Σ_c g_kc G'[c, o, :] + Σ_c W'_co G_g[k, c, :]``: one product with ``G'`` and one
  ``(o·j) × (k·c)`` times ``(k·c) × q``.

Where a bound needs ``Σ_q |G[k, o, q]|`` of one of these rows, the triangle inequality is used
(``Σ_j |x̃_kj| ρ_Ŵ[o, j]``; exact when every parameter has its own symbols, as after a step whose generators
were all boxed).
"""

from __future__ import annotations

import numpy as np

from certkit.mibp.enclosures.forms import Forms, Params, err_bound, relu_coefficients, up

__all__ = ["FirstLayer"]

_U = 2.0**-52


class FirstLayer:
    """The first layer of a network with a hidden layer, for the samples of one chunk.

    Parameters
    ----------
    x : Forms
        The inputs (k, d), without symbols.
    p : Params
        The first layer's parameters.
    box : (lo, hi)
        Sound bounds on the pre-activations (k, o) from interval arithmetic over the current box.
    """

    def __init__(self, x: Forms, p: Params, box) -> None:
        k, d = x.c.shape
        self.x = x
        self.xt = np.concatenate([x.c, np.ones((k, 1))], axis=1)  # x̃ (k, d + 1)
        o, q = p.Wc.shape[0], p.GW.shape[-1]
        self.q = q
        self.G = np.concatenate([p.GW, p.Gb[:, None, :]], axis=1)  # Ĝ (o, d + 1, q)
        # symbols with one coefficient in Ĝ (a parameter's fresh symbol) are scaled columns, not products
        flat = self.G.reshape(o * (d + 1), q)
        count = np.count_nonzero(flat, axis=0)
        self.dense = np.nonzero(count > 1)[0]
        self.single = np.nonzero(count == 1)[0]
        self.single_rows = np.argmax(flat[:, self.single] != 0.0, axis=0)
        self.single_values = flat[self.single_rows, self.single]
        rho_hat = np.concatenate([p.rho_W, p.rho_b[:, None]], axis=1)  # (o, d + 1)
        absW = np.abs(p.Wc)
        c = x.c @ p.Wc.T + p.bc
        rho = up(np.abs(self.xt) @ rho_hat.T * (1.0 + (d + 3) * _U))  # Σ_q |G_a| (triangle inequality)
        r = x.r @ absW.T + x.r @ p.rho_W.T  # the inputs have no symbols: rad_x = r_x
        mag = (np.abs(x.c) + x.r) @ (absW + p.rho_W).T + np.abs(p.bc) + p.rho_b
        r = up(r + err_bound(d + 1, mag))
        R = up(rho + r + 2.0 * _U * np.abs(c))
        lo, hi = np.fmax(c - R, box[0]), np.fmin(c + R, box[1])
        self.pre = (lo, hi)
        self.lam, shift, spread = relu_coefficients(lo, hi)
        # h = λ a + s ± (λ r + t + rounding)
        self.c = self.lam * c + shift
        self.rho = up(self.lam * rho)
        err = np.where(spread > 0, up(4.0 * _U * self.lam * (np.abs(c) + rho + r)), 0.0)
        self.r = up(self.lam * r + spread + err)
        self.shape = (k, o)

    def radius(self) -> np.ndarray:
        return up(self.rho + self.r)

    def maxabs(self) -> np.ndarray:
        return up(np.abs(self.c) + self.rho + self.r)

    def linear(self, p: Params) -> Forms:
        """The next layer's pre-activations ``W' h + b'`` (k, c) as forms (as
        `certkit.mibp.enclosures.forms.linear`)."""
        k, o = self.shape
        oc, q = p.Wc.shape[0], self.q
        c = self.c @ p.Wc.T + p.bc
        G = (self.c @ p.GW.transpose(1, 0, 2).reshape(o, oc * q)).reshape(k, oc, q) + p.Gb
        # Σ_o W'_co λ_ko x̃_kj Ĝ[o, j, :]
        A = (p.Wc[None, :, :, None] * (self.lam[:, None, :, None] * self.xt[:, None, None, :])).reshape(
            k * oc, -1
        )
        G = G.reshape(k * oc, q)
        G[:, self.dense] += A @ self.G.reshape(A.shape[1], q)[:, self.dense]
        G[:, self.single] += A[:, self.single_rows] * self.single_values
        G = G.reshape(k, oc, q)
        rad = self.radius()
        absW = np.abs(p.Wc)
        r = self.r @ absW.T + rad @ p.rho_W.T
        mag = (np.abs(self.c) + rad) @ (absW + p.rho_W).T + np.abs(p.bc) + p.rho_b
        # the product with Ĝ sums over the units and inputs: o (d + 1) terms
        return Forms(c, G, up(r + err_bound(o * self.xt.shape[1] + 2, mag)))

    def sum_outer(self, g: Forms, terms: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``Σ_k g_k h_kᵀ`` (as `certkit.mibp.enclosures.forms.sum_outer`, ``h`` this layer's activations)."""
        k, o = self.shape
        oc, q = g.c.shape[1], self.q
        c = g.c.T @ self.c
        T = np.einsum("kc,ko,kj->ocj", g.c, self.lam, self.xt)  # Σ_k g_kc λ_ko x̃_kj
        G = np.matmul(T, self.G).transpose(1, 0, 2)  # (o, c, j) @ (o, j, q) -> (c, o, q)
        if g.G is not None:
            G = G + (self.c.T @ g.G.reshape(k, oc * q)).reshape(o, oc, q).transpose(1, 0, 2)
        r = np.abs(g.c).T @ self.r + g.r.T @ np.abs(self.c) + g.radius().T @ self.radius()
        # over the samples, then over the inputs for the product with Ĝ
        terms = terms + self.xt.shape[1] + 3
        r = up(r * (1.0 + terms * _U) + err_bound(terms, g.maxabs().T @ self.maxabs()))
        return c.ravel(), G.reshape(oc * o, q), r.ravel()

    def backward_sums(
        self, g: Forms, p: Params, terms: int
    ) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """The first layer's weight and bias gradient sums from the derivative ``g`` (k, c) at the next
        layer's pre-activations and that layer's parameters ``p``: ``[(c, G, r) of W, (c, G, r) of b]``."""
        k, oc = g.c.shape
        o, q = self.shape[1], self.q
        d1 = self.xt.shape[1]
        # gh = g W' (k, o): centre, radius (triangle inequality for Σ|G|) and remainder
        absW = np.abs(p.Wc)
        c_gh = g.c @ p.Wc
        rho_gh = up((np.abs(g.c) @ p.rho_W + g.rho @ absW) * (1.0 + (oc + 3) * _U))
        r_gh = g.r @ absW + g.radius() @ p.rho_W
        r_gh = up(r_gh + err_bound(oc, g.maxabs() @ (absW + p.rho_W)))
        # the ReLU's derivative: gh where a > 0, 0 where a <= 0, the hull of both elsewhere
        lo, hi = self.pre
        on, off = lo > 0, hi <= 0
        R = up(rho_gh + r_gh + 2.0 * _U * np.abs(c_gh))
        uL, uU = np.minimum(c_gh - R, 0.0), np.maximum(c_gh + R, 0.0)
        uc = 0.5 * uL + 0.5 * uU
        c = np.where(on, c_gh, np.where(off, 0.0, uc))
        r = np.where(on, r_gh, np.where(off, 0.0, up(np.maximum(uU - uc, uc - uL))))
        rho = np.where(on, rho_gh, 0.0)
        onf = on.astype(np.float64)
        # Σ_k x̃_kj m_ko (Σ_c g_kc G'[c, o, :] + Σ_c W'_co G_g[k, c, :])
        U = np.einsum("kj,ko,kc->ojc", self.xt, onf, g.c)
        G = np.matmul(U, p.GW.transpose(1, 0, 2))  # (o, j, c) @ (o, c, q) -> (o, j, q)
        if g.G is not None:
            B = np.einsum("kj,ko,co->ojkc", self.xt, onf, p.Wc)
            G = G + (B.reshape(o * d1, k * oc) @ g.G.reshape(k * oc, q)).reshape(o, d1, q)
        xr = np.concatenate([self.x.r, np.zeros((k, 1))], axis=1)
        cs = c.T @ self.xt
        rad = up(rho + r)
        rs = np.abs(c).T @ xr + r.T @ np.abs(self.xt) + rad.T @ xr
        mag = (np.abs(c) + rad).T @ (np.abs(self.xt) + xr)
        # the product with the derivative's coefficients sums over samples and outputs
        terms = terms * oc + oc + 2
        rs = up(rs * (1.0 + terms * _U) + err_bound(terms, mag))
        d = d1 - 1
        weights = (cs[:, :d].ravel(), G[:, :d].reshape(o * d, q), rs[:, :d].ravel())
        biases = (cs[:, d], G[:, d], rs[:, d])
        return [weights, biases]
