"""Affine (zonotope) carry-over of the parameter set between gradient-descent steps.

The box-per-step method forgets, after every step, how the parameters depend on each
other and on the perturbed inputs.  Here the parameters after ``t`` steps are kept as a
zonotope

$$\\theta_t \\in \\{c_t + G_t e : e \\in [-1, 1]^q\\},$$

whose symbols ``e`` are of two kinds: one per perturbed input entry ``x'_{k,f} = m_{k,f} + ρ_{k,f} e``
(the same perturbed dataset is used in every epoch, so these symbols are shared by all steps),
and fresh symbols that absorb the nonlinear remainders of earlier steps.

One step evaluates the per-sample gradients in affine arithmetic: every intermediate
value ``v`` is a form ``c + G e ± r`` that contains ``v`` for every admissible symbol value
(the same ``e`` in every form, so correlations are kept).  Sums are exact; a product of two forms
keeps the linear part and bounds the quadratic part by the product of the radii; a ReLU whose
sign is decided is exact, an undecided one uses the parallelogram relaxation
``relu(z) ∈ λ z + [0, μ]`` (``λ = u / (u - l)``); the derivative indicators of undecided ReLUs and
hinge terms, and the whole loss derivative of the cross-entropies, become intervals.  The step of
the recipe (`certkit.mibp.problem.recipe`) over the batch ``B``, ``d = (1/|B|) Σ_{k∈B} g_k + ω θ``,
``v' = μ v + d``, ``θ' = θ - λ_s v'``, is then a form (with momentum the zonotope holds ``θ`` and ``v``
over the same symbols) whose interval remainder ``r`` becomes fresh symbols, and generators are
reduced (Girard: the columns with the smallest ``‖g‖₁ - ‖g‖∞`` are boxed) to at most
``max_generators``.

Floating point: every operation adds to ``r`` a bound on the rounding error of computing the
form and of the float evaluation of the operation by `MLP.train` (in any summation order, as in
`certkit.mibp.enclosures.interval`), so the zonotope contains the float trajectory.  Decisions (ReLU and
hinge sides) use the form's range intersected with the interval bounds over the current box.
"""

from __future__ import annotations

import numpy as np

from certkit.mibp.enclosures.forms import girard, initial_state
from certkit.mibp.enclosures.interval import interval_forward, output_derivative
from certkit.mibp.problem.perturbation import InputSets
from certkit.mibp.problem.recipe import Recipe

__all__ = ["AffineCarry", "Zonotope"]

_U = 2.0**-52
_TINY = 1e-300


def _up(x: np.ndarray) -> np.ndarray:
    """A float >= the exact value of a nonnegative quantity computed with a few roundings."""
    return np.nextafter(x * (1.0 + 8.0 * _U) + _TINY, np.inf)


class _Form:
    """Elementwise affine forms ``c + G e ± r`` (``G`` has the symbols on its last axis)."""

    __slots__ = ("G", "c", "r")

    def __init__(self, c: np.ndarray, G: np.ndarray, r: np.ndarray) -> None:
        self.c, self.G, self.r = c, G, r

    @classmethod
    def interval(cls, lo: np.ndarray, hi: np.ndarray, q: int) -> _Form:
        """A form without symbols that contains ``[lo, hi]``."""
        c = 0.5 * lo + 0.5 * hi
        r = _up(np.maximum(hi - c, c - lo))
        return cls(c, np.zeros((*np.shape(c), q)), r)

    def spread(self) -> np.ndarray:
        """Upper bound on ``Σ|G|``."""
        q = self.G.shape[-1]
        return _up(np.abs(self.G).sum(axis=-1) * (1.0 + (q + 2) * _U))

    def radius(self) -> np.ndarray:
        """Upper bound on ``Σ|G| + r``."""
        return _up(self.spread() + self.r)

    def maxabs(self) -> np.ndarray:
        return _up(np.abs(self.c) + self.radius())

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Sound range of the form."""
        R = self.radius()
        slack = 2.0 * _U * (np.abs(self.c) + R) + _TINY
        return np.nextafter(self.c - R - slack, -np.inf), np.nextafter(self.c + R + slack, np.inf)

    def __getitem__(self, index) -> _Form:
        return _Form(self.c[index], self.G[index], self.r[index])

    def __add__(self, other: _Form) -> _Form:
        err = 3.0 * _U * (self.maxabs() + other.maxabs())
        return _Form(self.c + other.c, self.G + other.G, _up(self.r + other.r + err))

    def __neg__(self) -> _Form:
        return _Form(-self.c, -self.G, self.r)

    def __sub__(self, other: _Form) -> _Form:
        return self + (-other)

    def scale(self, a: np.ndarray | float) -> _Form:
        """``a * form`` for a float constant ``a`` (also covers a rounded ``a``: relative error ``u``)."""
        a = np.asarray(a, dtype=np.float64)
        err = 4.0 * _U * np.abs(a) * self.maxabs()
        return _Form(a * self.c, a[..., None] * self.G, _up(np.abs(a) * self.r + err))

    def shift(self, a: np.ndarray) -> _Form:
        """``form + a`` for a float constant ``a``."""
        err = 3.0 * _U * (self.maxabs() + np.abs(a))
        return _Form(self.c + a, self.G, _up(self.r + err))

    def __mul__(self, other: _Form) -> _Form:
        """Elementwise product: the linear part is kept; with ``s_i = G_a,i G_b,i`` the quadratic part
        ``(G_a e)(G_b e)`` lies in ``Σ s_i / 2 ± (ρ_a ρ_b - Σ|s_i| / 2)`` (``e_i² ∈ [0, 1]``, ``ρ = Σ|G|``),
        the interval parts add ``ρ_a r_b + r_a ρ_b + r_a r_b + |c_a| r_b + |c_b| r_a``."""
        ca, cb = self.c, other.c
        pa, pb = self.spread(), other.spread()
        ra, rb = self.r, other.r
        s = self.G * other.G
        q = s.shape[-1]
        S, S_abs = s.sum(axis=-1), np.abs(s).sum(axis=-1)
        c = ca * cb + 0.5 * S
        quad = pa * pb - 0.5 * S_abs + pa * rb + ra * pb + ra * rb + np.abs(ca) * rb + np.abs(cb) * ra
        ma, mb = np.abs(ca) + pa + ra, np.abs(cb) + pb + rb
        err = (
            4.0 * _U * (ma * mb + np.abs(ca) * pb + np.abs(cb) * pa + np.abs(c)) + 2.0 * (q + 2) * _U * S_abs
        )
        G = ca[..., None] * other.G + cb[..., None] * self.G
        return _Form(c, G, _up(quad + err))

    def sum(self, axis: int) -> _Form:
        """Sum over ``axis`` (not the symbol axis); rounding of any summation order covered."""
        axis = axis % self.c.ndim
        terms = self.c.shape[axis]
        err = 2.0 * (terms + 2) * _U * self.maxabs().sum(axis=axis)
        r = self.r.sum(axis=axis) * (1.0 + (terms + 2) * _U)
        return _Form(self.c.sum(axis=axis), self.G.sum(axis=axis), _up(r + err))


def _where(mask: np.ndarray, a: _Form, b: _Form) -> _Form:
    return _Form(np.where(mask, a.c, b.c), np.where(mask[..., None], a.G, b.G), np.where(mask, a.r, b.r))


def _relu(z: _Form, lo: np.ndarray, hi: np.ndarray) -> _Form:
    """``max(z, 0)`` given sound bounds ``lo <= z <= hi``."""
    on, off = lo > 0, hi <= 0
    unsure = ~(on | off)
    span = np.where(unsure, hi - lo, 1.0)
    lam = np.clip(np.where(unsure, hi / span, 0.0), 0.0, 1.0)
    # relu(z) - lam z over [lo, hi] lies in [0, max(-lam lo, hi - lam hi)] (endpoints of a concave-free
    # piecewise-linear function whose value at 0 is 0)
    top = np.where(unsure, np.maximum(-lam * lo, hi - lam * hi), 0.0)
    top = _up(top + 2.0 * _U * (np.abs(lam * lo) + np.abs(hi)))
    relaxed = z.scale(lam).shift(0.5 * top)
    relaxed.r = _up(relaxed.r + 0.5 * top)
    zero = _Form(np.zeros_like(z.c), np.zeros_like(z.G), np.zeros_like(z.r))
    return _where(on, z, _where(off, zero, relaxed))


class Zonotope:
    """``{c + G e : e ∈ [-1, 1]^q}``; column ``j`` of ``G`` belongs to symbol ``ids[j]``.

    Symbols ``0 .. n_inputs - 1`` are the perturbed input entries (``k * d + f``); larger ids are
    fresh symbols of earlier remainders.
    """

    def __init__(self, c: np.ndarray, G: np.ndarray, ids: np.ndarray) -> None:
        self.c, self.G, self.ids = c, G, ids

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Sound interval hull."""
        return _Form(self.c, self.G, np.zeros_like(self.c)).bounds()


class AffineCarry:
    """Runs the affine carry-over alongside `certified_training` (see the module docstring).

    Parameters
    ----------
    model : MLP
        θ_0 (a point: no generators).
    sets : InputSets
        The perturbation's input sets; each entry is replaced by its interval hull (with ``Budget``
        the hull also contains the observed value), which is a sound superset.
    y : array
        The labels, validated by `check_labels`.
    recipe : Recipe
        The training recipe (loss, per-step rates and batches, momentum, weight decay); with momentum the
        zonotope holds the parameters and the velocity over the same symbols.
    max_generators : int, optional
        Upper bound on the number of generators kept after each step (default ``4 * n_params``).
    max_entries : int
        Samples are evaluated in chunks whose largest array (samples × widest layer product ×
        symbols) has at most this many entries (at least one sample per chunk).
    """

    def __init__(
        self,
        model,
        sets: InputSets,
        y,
        recipe: Recipe,
        *,
        max_generators: int | None = None,
        max_entries: int = 2_000_000,
    ) -> None:
        self.sizes = model.sizes
        self.m = model.n_params
        self.recipe = recipe
        self.loss = recipe.loss
        self.y = np.reshape(y, (len(y), -1)) if self.loss == "mse" else y
        self.labels = "any" if sets.labels_vary else "own"
        lo, hi = sets.lower, sets.upper
        if sets.budget is not None:
            lo, hi = np.minimum(lo, sets.nominal), np.maximum(hi, sets.nominal)
        self.XL, self.XU = lo, hi
        self.n, self.d = lo.shape
        self.mid = 0.5 * lo + 0.5 * hi
        # an entry that is not perturbed gets no symbol (radius 0, not the tiny padding of `_up`)
        exact = (lo == hi) & (self.mid == lo)
        self.rad = np.where(exact, 0.0, _up(np.maximum(hi - self.mid, self.mid - lo)))
        start = initial_state(model, recipe)
        self.max_generators = 4 * len(start) if max_generators is None else int(max_generators)
        self.max_entries = max_entries
        self.zonotope = Zonotope(start, np.zeros((len(start), 0)), np.zeros(0, dtype=np.int64))
        self._next_id = self.n * self.d

    # ------------------------------------------------------------------ one step
    def step(self, lower, upper, step: int) -> tuple[np.ndarray, np.ndarray]:
        """Advance the zonotope by gradient step ``step`` of the recipe; ``[lower, upper]`` (MLPs) is a box
        known to contain θ before the step.

        Returns the interval hull (vectors) of the new parameters.
        """
        with np.errstate(over="ignore", invalid="ignore"):
            return self._step(lower, upper, step)

    def _step(self, lower, upper, step: int) -> tuple[np.ndarray, np.ndarray]:
        Z = self.zonotope
        q, d, n, m = Z.G.shape[1], self.d, self.n, self.m
        batch = self.recipe.batches[step]
        # the column of each input symbol: its column in G if θ already depends on it, else a local one
        col = np.full(n * d, -1, dtype=np.int64)
        is_input = Z.ids < n * d
        col[Z.ids[is_input]] = np.nonzero(is_input)[0]
        col = col.reshape(n, d)
        local = col < 0
        col = np.where(local, q + np.arange(d)[None, :], col)
        theta = _Form(Z.c[:m], np.concatenate([Z.G[:m], np.zeros((m, d))], axis=1), np.zeros(m))
        W, b = self._split(theta)
        _, pre_box = interval_forward(lower, upper, self.XL[batch], self.XU[batch])
        sum_c, sum_G, sum_r, sum_mag = np.zeros(m), np.zeros((m, q)), np.zeros(m), np.zeros(m)
        sum_local = np.zeros((m, n * d))
        widest = max(a * b for a, b in zip(self.sizes[:-1], self.sizes[1:]))
        chunk = max(1, self.max_entries // (widest * (q + d)))
        for start in range(0, len(batch), chunk):
            at = np.arange(start, min(len(batch), start + chunk))
            rows = batch[at]
            box = [(lo[at], hi[at]) for lo, hi in pre_box]
            g = self._gradients(W, b, lower, upper, rows, col[rows], box, q + d)
            sum_c += g.c.sum(axis=0)
            sum_G += g.G[:, :, :q].sum(axis=0)
            sum_r += g.r.sum(axis=0)
            sum_mag += g.maxabs().sum(axis=0)
            loc = g.G[:, :, q:] * local[rows][:, None, :]  # (k, m, d)
            for f in range(d):
                sum_local[:, rows * d + f] = loc[:, :, f].T
        nb = len(batch)
        err = 2.0 * (nb + 2) * _U * sum_mag
        total = _Form(
            sum_c, np.concatenate([sum_G, sum_local], axis=1), _up(sum_r * (1.0 + (nb + 2) * _U) + err)
        )
        state = _Form(Z.c, np.concatenate([Z.G, np.zeros((len(Z.c), n * d))], axis=1), np.zeros(len(Z.c)))
        prev = state[:m]
        # PyTorch's SGD: d = g + ω θ; v = μ v + d (v = d at the first step); θ' = θ - λ v
        recipe = self.recipe
        direction = total.scale(1.0 / nb)
        if recipe.weight_decay:
            direction = direction + prev.scale(recipe.weight_decay)
        if recipe.momentum and step > 0:
            direction = state[m:].scale(recipe.momentum) + direction
        new = prev - direction.scale(float(recipe.rates[step]))
        if recipe.momentum:
            new = _Form(
                np.concatenate([new.c, direction.c]),
                np.concatenate([new.G, direction.G]),
                np.concatenate([new.r, direction.r]),
            )
        ids = np.concatenate([Z.ids, np.arange(n * d)])
        used = np.any(new.G != 0.0, axis=0)
        self.zonotope = self._reduce(new.c, new.G[:, used], ids[used], new.r)
        lo, hi = self.zonotope.bounds()
        return lo[:m], hi[:m]

    def _split(self, theta: _Form) -> tuple[list[_Form], list[_Form]]:
        """Per-layer weight (o, i) and bias (o,) forms in `MLP.to_vector` order."""
        W, b, pos = [], [], 0
        for fan_in, fan_out in zip(self.sizes[:-1], self.sizes[1:]):
            w = theta[pos : pos + fan_in * fan_out]
            W.append(
                _Form(
                    w.c.reshape(fan_out, fan_in),
                    w.G.reshape(fan_out, fan_in, -1),
                    w.r.reshape(fan_out, fan_in),
                )
            )
            pos += fan_in * fan_out
            b.append(theta[pos : pos + fan_out])
            pos += fan_out
        return W, b

    def _gradients(self, W, b, lower, upper, rows, col, pre_box, Q) -> _Form:
        """Per-sample gradient forms (k, m) of the samples ``rows``."""
        k = len(rows)
        G = np.zeros((k, self.d, Q))
        G[np.arange(k)[:, None], np.arange(self.d)[None, :], col] = self.rad[rows]
        h = _Form(self.mid[rows], G, np.zeros((k, self.d)))
        acts, pre = [h], []
        n_layers = len(W)
        for layer in range(n_layers):
            z = (W[layer][None] * h[:, None, :]).sum(axis=2) + b[layer][None]
            lo, hi = z.bounds()
            lo, hi = np.fmax(lo, pre_box[layer][0]), np.fmin(hi, pre_box[layer][1])
            pre.append((lo, hi))
            h = _relu(z, lo, hi) if layer < n_layers - 1 else z
            acts.append(h)
        out = acts[-1]
        if self.loss == "mse":
            gz = (out.shift(-self.y[rows])).scale(2.0)
        else:
            # the loss derivative as an interval (hull over the allowed labels)
            bounds = [h.bounds() for h in acts[:-1]] + [pre[-1]]
            gL, gU = output_derivative(lower, upper, bounds, pre, self.y[rows], self.loss, self.labels)
            gz = _Form.interval(gL, gU, Q)
        parts: list[_Form] = [None] * n_layers  # type: ignore[list-item]
        for layer in range(n_layers - 1, -1, -1):
            gW = gz[:, :, None] * acts[layer][:, None, :]
            o, i = gW.c.shape[1:]
            parts[layer] = _Form(
                np.concatenate([gW.c.reshape(k, o * i), gz.c], axis=1),
                np.concatenate([gW.G.reshape(k, o * i, Q), gz.G], axis=1),
                np.concatenate([gW.r.reshape(k, o * i), gz.r], axis=1),
            )
            if layer > 0:
                gh = (W[layer][None] * gz[:, :, None]).sum(axis=1)
                zL, zU = pre[layer - 1]
                ghL, ghU = gh.bounds()
                unsure = _Form.interval(np.minimum(ghL, 0.0), np.maximum(ghU, 0.0), Q)
                zero = _Form(np.zeros_like(gh.c), np.zeros_like(gh.G), np.zeros_like(gh.r))
                gz = _where(zL > 0, gh, _where(zU <= 0, zero, unsure))
        return _Form(
            np.concatenate([p.c for p in parts], axis=1),
            np.concatenate([p.G for p in parts], axis=1),
            np.concatenate([p.r for p in parts], axis=1),
        )

    def _reduce(self, c: np.ndarray, G: np.ndarray, ids: np.ndarray, r: np.ndarray) -> Zonotope:
        """Remainder ``r`` into fresh symbols; Girard reduction to ``max_generators`` columns.

        A non-finite form (overflow) gives a zonotope whose bounds are NaN, which the caller ignores.
        """
        m = len(c)
        if not (np.all(np.isfinite(c)) and np.all(np.isfinite(G)) and np.all(np.isfinite(r))):
            return Zonotope(np.full(m, np.nan), np.zeros((m, 0)), np.zeros(0, dtype=np.int64))
        keep = max(0, self.max_generators - m)
        if G.shape[1] > keep:
            kept, boxed = girard(G, keep)
            r = _up(r + boxed)
            G, ids = G[:, kept], ids[kept]
        fresh = np.nonzero(r > 0)[0]
        D = np.zeros((m, len(fresh)))
        D[fresh, np.arange(len(fresh))] = r[fresh]
        new_ids = np.arange(self._next_id, self._next_id + len(fresh))
        self._next_id += len(fresh)
        return Zonotope(c, np.concatenate([G, D], axis=1), np.concatenate([ids, new_ids]))
