"""Shared-generator affine carry (``carry="shared"``): the parameters as a zonotope whose symbols are shared
by every sample, for runs of AGT's scale (thousands of rows, 128 hidden units).

The parameters (and the velocity, with momentum) before step ``t`` are kept as a zonotope
``θ ∈ {c + G e : e ∈ [-1, 1]^q}``.  One step evaluates every sample's gradient as an affine form in the
same symbols ``e`` (`certkit.mibp.enclosures.forms`): the inputs are intervals without symbols, products
keep their
linear part and bound the rest, undecided ReLUs use the parallelogram relaxation, and the softmax and
sigmoid of the cross-entropies are linearised at the centre with a mean-value remainder over the box of
the logits (so the loss derivative keeps its dependence on the parameters; the hinge derivative is an
interval).  The forms are summed over the batch as they are formed — the per-sample forms are never stored
— so the cost of a step is about ``n · (units) · q`` multiply-adds in matrix products.  Summing forms over
shared symbols lets the gradients of different samples cancel, and the update
``θ' = (1 - λω) θ - λ (Σ g / |B| + μ v)`` keeps the contraction of gradient descent, which interval
arithmetic (one box per step) cannot express.

Perturbations: the rows that keep their observed input and label are the forms above.  With ``Budget``
(at most ``k`` rows deviate in their input, and with paired poisoning their label) and with
``LabelFlips(k)`` (at most ``k`` labels change), the change of a deviating row's gradient,
``g_k(θ; x', y') - g_k(θ; x, y)``, is bounded per entry by interval arithmetic over the current box
(``[P_lo - N_hi, P_hi - N_lo]``) and the ``k`` largest changes of every entry are added (as in
`certkit.mibp.enclosures.sgd_step.sum_with_budget`).  Without a budget every row's input is its interval.

The remainder ``r`` of the new state becomes fresh symbols; generators are reduced (Girard: the columns
with the smallest ``‖g‖₁ - ‖g‖∞`` are boxed into the remainder) to ``max_generators``.  Decisions (ReLU
sides) use the forms' ranges intersected with interval bounds over the current box, and each step's box
is intersected with the interval step's box by `certified_training`, so it is never wider than
``carry="box"``.
"""

from __future__ import annotations

import numpy as np

from certkit.mibp.enclosures.changes import gradient_changes
from certkit.mibp.enclosures.first_layer import FirstLayer
from certkit.mibp.enclosures.forms import (
    Forms,
    Params,
    backward,
    girard,
    initial_state,
    linear,
    mask,
    relu,
    sigmoid_forms,
    softmax_forms,
    sum_outer,
    sum_rows,
    up,
)
from certkit.mibp.enclosures.interval import interval_forward, interval_loss_derivative
from certkit.mibp.enclosures.sgd_step import BYTES_PER_ROW_PARAMETER, BudgetSum
from certkit.mibp.problem.perturbation import InputSets
from certkit.mibp.problem.recipe import Recipe
from certkit.parallel import rows_per_chunk

__all__ = ["SharedCarry"]

_U = 2.0**-52


class SharedCarry:
    """Runs the shared-generator carry alongside `certified_training` (see the module docstring).

    Parameters
    ----------
    model : MLP
        θ_0 (a point: no generators).
    sets : InputSets
        The perturbation's input sets.
    y : array
        The labels, validated by `check_labels`.
    recipe : Recipe
        The training recipe; with momentum the zonotope holds the parameters and the velocity over the
        same symbols.
    max_generators : int, optional
        Generators kept after each step (default: 1.5 times the number of state entries, parameters plus
        velocity: the fresh symbols of the step's remainder and half as many earlier ones).
    chunk_size : int, optional
        Rows evaluated together (`certkit.parallel.rows_per_chunk`: None sizes the chunks from
        the available memory, by the largest form array per row, samples × widest layer × symbols, and by
        the per-row change bounds of the deviating rows).
    """

    def __init__(
        self,
        model,
        sets: InputSets,
        y,
        recipe: Recipe,
        *,
        max_generators: int | None = None,
        chunk_size: int | None = None,
    ) -> None:
        self.sizes = model.sizes
        self.m = model.n_params
        self.recipe = recipe
        self.loss = recipe.loss
        self.sets = sets
        self.y = y
        self.y_out = np.reshape(y, (len(y), -1)) if self.loss == "mse" else y
        self.c = initial_state(model, recipe)
        self.G = np.zeros((len(self.c), 0))
        self.max_generators = 3 * len(self.c) // 2 if max_generators is None else int(max_generators)
        self.chunk_size = chunk_size
        self.SL, self.SU = sets.lower, sets.upper  # the hulls of the allowed inputs
        self.radius = sets.target_radius
        if sets.budget is not None:  # the rows that keep their observed input
            self.XL = self.XU = sets.nominal
        else:
            self.XL, self.XU = self.SL, self.SU

    def step(self, lower, upper, step: int) -> tuple[np.ndarray, np.ndarray]:
        """Advance the zonotope by gradient step ``step``; ``[lower, upper]`` (MLPs) is a box known to
        contain θ before the step.  Returns the interval hull (vectors) of the new parameters."""
        with np.errstate(over="ignore", invalid="ignore"):
            return self._step(lower, upper, step)

    def _params(self) -> list[Params]:
        q = self.G.shape[1]
        out, pos = [], 0
        for fan_in, fan_out in zip(self.sizes[:-1], self.sizes[1:]):
            w = slice(pos, pos + fan_in * fan_out)
            b = slice(w.stop, w.stop + fan_out)
            out.append(
                Params(
                    self.c[w].reshape(fan_out, fan_in),
                    self.G[w].reshape(fan_out, fan_in, q),
                    self.c[b],
                    self.G[b],
                )
            )
            pos = b.stop
        return out

    def _step(self, lower, upper, step: int) -> tuple[np.ndarray, np.ndarray]:
        m, q = self.m, self.G.shape[1]
        batch = self.recipe.batches[step]
        params = self._params()
        total_c, total_G, total_r = np.zeros(m), np.zeros((m, q)), np.zeros(m)
        # the largest arrays per sample: the coefficients of a layer's units (past the first hidden layer,
        # whose coefficients stay implicit) and the first layer's contractions (units × (inputs + 1) × next)
        sizes = self.sizes
        if len(sizes) < 3:
            per_sample = sizes[1] * max(q, 1)
        else:
            per_sample = max(max(sizes[2:]) * max(q, 1), sizes[1] * (sizes[0] + 1) * sizes[2])
        chunk = rows_per_chunk(64.0 * per_sample, self.chunk_size)
        for start in range(0, len(batch), chunk):
            rows = batch[start : start + chunk]
            _, box = interval_forward(lower, upper, self.XL[rows], self.XU[rows])
            c, G, r = self._gradient_sum(params, rows, box, q, len(batch))
            total_c += c
            total_G += G
            total_r += r
        nb = len(batch)
        # the chunks' remainders added in floating point (their c and G carry the batch's allowance)
        total_r = up(total_r * (1.0 + (len(range(0, nb, chunk)) + 2) * _U))
        dlo, dhi = self._deviation(lower, upper, batch)
        mid = 0.5 * dlo + 0.5 * dhi
        total_r = up(total_r + np.maximum(dhi - mid, mid - dlo) + 4.0 * _U * (np.abs(total_c) + np.abs(mid)))
        grad = Forms(total_c + mid, total_G, total_r)
        self._update(grad, nb, step, _sign_form(lower.to_vector(), upper.to_vector()))
        rho = up(np.abs(self.G).sum(axis=1) * (1.0 + (self.G.shape[1] + 2) * _U))
        R = up(rho + 2.0 * _U * np.abs(self.c))
        return self.c[:m] - R[:m], self.c[:m] + R[:m]

    def _gradient_sum(self, params, rows, pre_box, q, terms) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``Σ_{k ∈ rows} g_k`` of the rows at their observed inputs (or their input intervals without a
        budget) and labels, as ``(c, G, r)`` in `MLP.to_vector` order; rounding padded for a sum of
        ``terms`` rows (the batch, of which ``rows`` is a chunk)."""
        x = Forms.interval(self.XL[rows], self.XU[rows])
        n_layers = len(params)
        if n_layers == 1:
            z = linear(x, params[0])
            lo, hi = z.bounds()
            g = self._output_derivative(z, (np.fmax(lo, pre_box[0][0]), np.fmin(hi, pre_box[0][1])), rows)
            parts = [sum_outer(g, x, q, terms), sum_rows(g, q, terms)]
            return tuple(np.concatenate([p[i] for p in parts]) for i in range(3))  # type: ignore[return-value]
        # the first hidden layer keeps its coefficients implicit (`certkit.mibp.enclosures.first_layer`)
        first = FirstLayer(x, params[0], pre_box[0])
        acts: list = [x, first]
        for layer in range(1, n_layers):
            z = first.linear(params[1]) if layer == 1 else linear(acts[-1], params[layer])
            lo, hi = z.bounds()
            lo, hi = np.fmax(lo, pre_box[layer][0]), np.fmin(hi, pre_box[layer][1])
            pre_box[layer] = (lo, hi)
            acts.append(relu(z, lo, hi) if layer < n_layers - 1 else z)
        g = self._output_derivative(acts[-1], pre_box[-1], rows)
        parts = []
        for layer in range(n_layers - 1, 0, -1):
            outer = first.sum_outer(g, terms) if layer == 1 else sum_outer(g, acts[layer], q, terms)
            parts[:0] = [outer, sum_rows(g, q, terms)]
            if layer > 1:
                g = mask(backward(g, params[layer]), *pre_box[layer - 1])
        parts[:0] = first.backward_sums(g, params[1], terms)
        return tuple(np.concatenate([p[i] for p in parts]) for i in range(3))  # type: ignore[return-value]

    def _output_derivative(self, z: Forms, box, rows) -> Forms:
        zL, zU = box
        y = self.y_out[rows]
        if self.loss == "cross_entropy":
            s = softmax_forms(z, zL, zU)
            s.c = s.c.copy()
            s.c[np.arange(len(rows)), y] -= 1.0
            s.r = up(s.r + _U)
            return s
        if self.loss == "binary_cross_entropy":
            s = sigmoid_forms(z, zL, zU)
            return Forms(s.c - y[:, None], s.G, up(s.r + _U))
        if self.loss == "mse":
            # without a budget every row's targets may move within the TargetBox radius
            r = 0.0 if self.sets.budget is not None or self.radius is None else self.radius[rows][:, None]
            mag = z.maxabs() + np.abs(y) + r
            G = None if z.G is None else 2.0 * z.G
            return Forms(2.0 * (z.c - y), G, up(2.0 * (z.r + r) + 8.0 * _U * mag))
        return Forms.interval(*interval_loss_derivative(zL, zU, y, self.loss))

    def _deviation(self, lower, upper, batch) -> tuple[np.ndarray, np.ndarray]:
        """Bounds on the sum of the changes ``g(θ; x', y') - g(θ; x, y)`` of the rows that may deviate."""
        sets = self.sets
        if sets.budget is not None:
            moves = sets.flip_labels or sets.target_radius is not None
            count, labels = sets.budget, "any" if moves else "own"
        elif sets.label_flips is not None:
            count, labels = sets.label_flips, "other"
        else:
            return np.zeros(self.m), np.zeros(self.m)
        if count == 0:
            return np.zeros(self.m), np.zeros(self.m)
        sums = BudgetSum(self.m, len(batch), count)
        step = rows_per_chunk(BYTES_PER_ROW_PARAMETER * self.m, self.chunk_size)
        for start in range(0, len(batch), step):
            rows = batch[start : start + step]
            DL, DU = gradient_changes(
                lower,
                upper,
                self.XL[rows],
                self.SL[rows],
                self.SU[rows],
                self.y[rows],
                self.loss,
                labels,
                same_input=sets.budget is None,
                target=sets.flip_target,
                radius=None if sets.target_radius is None else sets.target_radius[rows],
            )
            zeros = np.zeros_like(DL)
            sums.add(DL, DU, zeros, zeros)
        return sums.bounds()

    def _update(self, grad: Forms, nb: int, step: int, sign: Forms) -> None:
        """The recipe's update on the state forms (``sign``: sign(θ) over the step's box, for the L1
        penalty); the remainder becomes fresh symbols (Girard reduction)."""
        m, recipe = self.m, self.recipe
        lr, wd, mu, l1 = float(recipe.rates[step]), recipe.weight_decay, recipe.momentum, recipe.l1_penalty
        q, G = self.G.shape[1], self.G
        theta = Forms(self.c[:m], G[:m], np.zeros(m))
        # PyTorch's SGD: d = g + ω θ + λ₁ sign(θ); v = μ v + d (v = d at the first step); θ' = θ - λ v
        terms = [(1.0 / nb, grad)] + ([(wd, theta)] if wd else []) + ([(l1, sign)] if l1 else [])
        d = _combine(terms, q)
        if mu and step > 0:
            d = _combine([(mu, Forms(self.c[m:], G[m:], np.zeros(m))), (1.0, d)], q)
        new = _combine([(1.0, theta), (-lr, d)], q)
        if mu:
            new = Forms(
                np.concatenate([new.c, d.c]),
                np.concatenate([new.coefficients(q), d.coefficients(q)]),
                np.concatenate([new.r, d.r]),
            )
        self._reduce(new)

    def _reduce(self, new: Forms) -> None:
        c, G, r = new.c, new.coefficients(self.G.shape[1]), new.r
        if not (np.all(np.isfinite(c)) and np.all(np.isfinite(G)) and np.all(np.isfinite(r))):
            self.c, self.G = np.full(len(c), np.nan), np.zeros((len(c), 0))
            return
        G = G[:, np.any(G != 0.0, axis=0)]
        kept, boxed = girard(G, max(0, self.max_generators - int(np.count_nonzero(r > 0))))
        G, r = G[:, kept], up(r + boxed)
        fresh = np.nonzero(r > 0)[0]
        D = np.zeros((len(c), len(fresh)))
        D[fresh, np.arange(len(fresh))] = r[fresh]
        self.c, self.G = c, np.concatenate([G, D], axis=1)


def _sign_form(lo: np.ndarray, hi: np.ndarray) -> Forms:
    """``sign(θ)`` (``sign(0) = 0``) over the box ``[lo, hi]`` as forms without symbols: exact where the box
    keeps one sign, ``[-1, 1]`` (or ``[-1, 0]``, ``[0, 1]``) where it meets 0."""
    s_lo = np.where(lo > 0, 1.0, np.where(lo == 0, 0.0, -1.0))
    s_hi = np.where(hi < 0, -1.0, np.where(hi == 0, 0.0, 1.0))
    return Forms(0.5 * (s_lo + s_hi), None, 0.5 * (s_hi - s_lo))


def _combine(terms: list[tuple[float, Forms]], q: int) -> Forms:
    """``Σ a_i F_i`` for float constants ``a_i`` and forms over the same ``q`` symbols (rounding included)."""
    c = sum(a * f.c for a, f in terms)
    G = sum(a * f.coefficients(q) for a, f in terms)
    r = sum(abs(a) * f.r for a, f in terms)
    mag = sum(abs(a) * f.maxabs() for a, f in terms)
    return Forms(c, G, up(r + 6.0 * (len(terms) + 4) * _U * mag))
