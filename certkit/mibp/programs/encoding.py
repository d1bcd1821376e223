"""The MIBP encoding of one certified gradient-descent step, written with a `Builder`.

* parameters: a variable per parameter whose box is not a point (a constant otherwise);
* inputs: each perturbed feature is its nominal value plus a bounded offset, or one of finitely many
  options chosen by binaries (with a budget binary per sample when the perturbation has a budget);
* linear layer ``z = W h + b`` and ReLU as in `certkit.mibp.programs.builder`;
* hinge derivative: binary ``a`` with ``a = 1`` iff the hinge term is positive (both values allowed
  exactly at the kink, which contains the nominal choice 0); MSE derivative ``2 (f - y)`` is linear;
* backward pass: products with expressions made of binaries are exact, other products bilinear;
* update ``θ' = θ - (λ/n) Σ_k g_k`` is linear.

`build_joint` writes one program over all samples, `build_decomposed` one per sample, `build_output`
the prediction margin of a test point over the parameter box.
"""

from __future__ import annotations

import numpy as np

from certkit.mibp.enclosures.interval import pad
from certkit.mibp.programs.builder import BoundTightener, Builder
from certkit.mibp.programs.program import Lin, Program, lin_sum

__all__ = ["NetworkBuilder", "build_decomposed", "build_joint", "build_output"]

_U = 2.0**-52


class NetworkBuilder(Builder):
    """A `Builder` that also writes the network: parameters, inputs, forward and backward passes."""

    def parameters(self, lower, upper) -> tuple[list, list]:
        """Parameter expressions ``W[l][o][i]``, ``b[l][o]`` (constants where the box is a point)."""

        def one(lo: float, hi: float) -> Lin:
            return Lin(const=lo) if lo == hi else self.var(*self.widen_box(float(lo), float(hi)))

        W = [
            [[one(wl[o, i], wu[o, i]) for i in range(wl.shape[1])] for o in range(wl.shape[0])]
            for wl, wu in zip(lower.weights, upper.weights)
        ]
        b = [[one(bl[o], bu[o]) for o in range(len(bl))] for bl, bu in zip(lower.biases, upper.biases)]
        return W, b

    def inputs(self, sets, k: int, deviate: Lin | None) -> list[Lin]:
        """Input expressions of point ``k``; ``deviate`` is the budget binary (None: no budget)."""
        xs = []
        nominal = sets.nominal[k]
        for f in range(len(nominal)):
            if not sets.varies[k, f]:
                xs.append(Lin(const=nominal[f]))
                continue
            vals = sets.options[k, f, : sets.n_options[k, f]]
            eL, eU = self.widen_box(float(sets.offset_lo[k, f]), float(sets.offset_hi[k, f]))
            x0 = 0.0 if deviate is None else nominal[f]
            if len(vals) == 1:
                base = Lin(const=vals[0]) if deviate is None else Lin(const=x0) + deviate * (vals[0] - x0)
                base.xerr += 2.0 * _U * (abs(vals[0]) + abs(x0))  # the folded coefficient vals[0] - x0
            else:
                sig = [self.binary() for _ in vals]
                terms = {next(iter(s.terms)): 1.0 for s in sig}
                if deviate is None:
                    self.add_row(terms, 1.0, eq=True)
                else:
                    terms[next(iter(deviate.terms))] = -1.0
                    self.add_row(terms, 0.0, eq=True)
                base = Lin(const=x0) + lin_sum([s * (v - x0) for s, v in zip(sig, vals)])
                base.xerr += 2.0 * _U * (float(np.max(np.abs(vals))) + abs(x0))
            if deviate is None and len(vals) == 1:
                lo, hi = pad(
                    np.float64(vals[0] + eL), np.float64(vals[0] + eU), abs(vals[0]) + abs(eL) + abs(eU), 1
                )
                xs.append(self.var(*self.widen_box(float(lo), float(hi))))
                continue
            if eL == eU == 0.0:
                off = Lin()
            elif deviate is None:
                off = Lin(const=eL) if eL == eU else self.var(eL, eU)
            else:
                off = self.var(min(eL, 0.0), max(eU, 0.0))
                (oi,), (ui,) = off.terms, deviate.terms
                self.add_row({oi: 1.0, ui: -eU}, 0.0)
                self.add_row({oi: -1.0, ui: eL}, 0.0)
            xs.append(self.shared(base + off))
        return xs

    def sample_gradient(
        self, W: list, b: list, x: list[Lin], y, loss: str, flip: Lin | None = None
    ) -> list[Lin]:
        """Gradient of ``ℓ(f_θ(x), y)`` in `MLP.to_vector` order (``flip``: label-flip binary)."""
        n_layers = len(W)
        acts, deltas = [x], []
        h = x
        for layer in range(n_layers):
            z = [
                lin_sum([self.mul(w, hi) for w, hi in zip(W[layer][o], h)]) + b[layer][o]
                for o in range(len(W[layer]))
            ]
            if layer < n_layers - 1:
                pairs = [self.relu(zo, zb) for zo, zb in zip(z, self.tightened_bounds(z))]
                h = [p[0] for p in pairs]
                deltas.append([p[1] for p in pairs])
                acts.append(h)
            else:
                f = z
        gz = [self.shared(g) for g in self.loss_derivative(f, y, loss, flip)]
        grads: list[list[Lin]] = [None] * n_layers  # type: ignore[list-item]
        for layer in range(n_layers - 1, -1, -1):
            hp = acts[layer]
            grads[layer] = [self.mul(gz[o], hp[i]) for o in range(len(gz)) for i in range(len(hp))] + list(gz)
            if layer > 0:
                new = []
                for i, d in enumerate(deltas[layer - 1]):
                    if d.is_const and d.const == 0.0:
                        new.append(Lin())
                        continue
                    gh = lin_sum([self.mul(W[layer][o][i], gz[o]) for o in range(len(gz))])
                    new.append(self.shared(self.mul(d, gh)))
                gz = new
        return [g for part in grads for g in part]

    def loss_derivative(self, f: list[Lin], y, loss: str, flip: Lin | None = None) -> list[Lin]:
        """``dℓ/df`` as expressions; with a label-flip binary ``r`` the label is ``y (1 - 2 r)``."""
        if loss == "mse":
            return [(fo - float(yo)) * 2.0 for fo, yo in zip(f, np.atleast_1d(y))]
        if len(f) == 1:
            yv = float(y)
            v = (f[0] * -yv) + 1.0
            if flip is not None:
                v = v + self.mul(flip, f[0]) * (2.0 * yv)
            a = self.positive(v, self.tightened_bounds([v])[0])
            g = a * -yv
            if flip is not None:
                g = g + self.mul(flip, a) * (2.0 * yv)
            return [g]
        yc = int(y)
        g = [Lin() for _ in f]
        others = [c for c in range(len(f)) if c != yc]
        vs = [f[c] - f[yc] + 1.0 for c in others]
        for c, v, vb in zip(others, vs, self.tightened_bounds(vs)):
            a = self.positive(v, vb)
            g[c] = a
            g[yc] = g[yc] - a
        return g


def _flat(W: list, b: list) -> list[Lin]:
    theta: list[Lin] = []
    for layer_w, layer_b in zip(W, b):
        theta.extend(w for row in layer_w for w in row)
        theta.extend(layer_b)
    return theta


def build_joint(
    lower,
    upper,
    sets,
    y,
    loss: str,
    learning_rate: float,
    *,
    tighten: BoundTightener | None = None,
    cuts=None,
) -> Program:
    """One program over all samples with shared θ; objective ``p`` is ``θ'_p``.

    ``cuts = (L, U)``, arrays ``(n, m)``: sound bounds on each sample's ``θ_p - λ g_{k,p}`` (the
    decomposed objectives), added as linear constraints; no budget or label flips.
    """
    bld = NetworkBuilder(tighten=tighten)
    W, b = bld.parameters(lower, upper)
    theta = _flat(W, b)
    n = len(y)
    budget = sets.budget
    us, flips = [], []
    total = [Lin() for _ in theta]
    for k in range(n):
        dev = flip = None
        if budget is not None and sets.varies[k].any():
            dev = bld.binary()
            us.append(next(iter(dev.terms)))
        if sets.label_flips:
            flip = bld.binary()
            flips.append(next(iter(flip.terms)))
        x = bld.inputs(sets, k, dev)
        g = bld.sample_gradient(W, b, x, y[k], loss, flip)
        total = [t + gk for t, gk in zip(total, g)]
        if cuts is not None:
            for p, (t, gk) in enumerate(zip(theta, g)):
                e = t - gk * learning_rate
                if not e.is_const:
                    r = bld.error(e)  # the cuts bound float values; the represented e may differ by r
                    bld.add_row(dict(e.terms), float(cuts[1][k, p]) - e.const + r)
                    bld.add_row({i: -c for i, c in e.terms.items()}, e.const - float(cuts[0][k, p]) + r)
    if us and budget < len(us):
        bld.add_row(dict.fromkeys(us, 1.0), float(budget))
    if flips and sets.label_flips < len(flips):
        bld.add_row(dict.fromkeys(flips, 1.0), float(sets.label_flips))
    c = learning_rate / n
    return bld.finish([t - s * c for t, s in zip(theta, total)])


def build_decomposed(
    lower,
    upper,
    sets,
    k: int,
    y_k,
    loss: str,
    learning_rate: float,
    *,
    tighten: BoundTightener | None = None,
    multipliers: np.ndarray | None = None,
) -> Program:
    """Program for sample ``k`` alone (own copy of θ); objective ``p`` is ``θ_p - λ g_{k,p}``.

    ``multipliers`` (array ``(m, m)``, Lagrangian decomposition): objective ``p`` gets the linear term
    ``multipliers[p] · θ`` (zero on the parameters whose box is a point).
    """
    bld = NetworkBuilder(tighten=tighten)
    W, b = bld.parameters(lower, upper)
    theta = _flat(W, b)
    x = bld.inputs(sets, k, None)
    g = bld.sample_gradient(W, b, x, y_k, loss)
    objectives = [t - gk * learning_rate for t, gk in zip(theta, g)]
    if multipliers is not None:
        objectives = [bld.with_linear_term(e, theta, mu) for e, mu in zip(objectives, multipliers)]
    return bld.finish(objectives)


def build_output(lower, upper, x: np.ndarray, pred: int, n_out: int) -> Program:
    """Program of the prediction margin at test point ``x`` over the parameter box: objective ``pred * f``
    (one output) or ``f_pred - f_c`` for each ``c != pred``."""
    bld = NetworkBuilder()
    W, b = bld.parameters(lower, upper)
    h = [Lin(const=v) for v in x]
    for layer in range(len(W)):
        z = [
            lin_sum([bld.mul(w, hi) for w, hi in zip(W[layer][o], h)]) + b[layer][o]
            for o in range(len(W[layer]))
        ]
        h = [bld.relu(zo)[0] for zo in z] if layer < len(W) - 1 else z
    if n_out == 1:
        objectives = [h[0] * float(pred)]
    else:
        objectives = [h[pred] - h[c] for c in range(n_out) if c != pred]
    return bld.finish(objectives)
