"""First-order influence enclosure (``carry="influence"``) of a linear model's training run under label flips.

A box carry bounds every step from the previous box and forgets how the parameters move together; for a
softmax regression each step multiplies the box width by the interval norm of the training map, and after a
few steps nothing is certified.  Here the deviation ``δ_t = θ_t(D') - θ̂_t`` of a run on an allowed dataset
``D'`` from the nominal run ``θ̂`` is tracked to first order exactly, and only what is left is bounded.

**The step.**  For the linear model ``z = Θ x̃`` (``x̃ = [x; 1]``, ``Θ = [W b]``) under cross-entropy, a
changed label ``y_j → c`` changes row ``j``'s gradient by the constant ``(e_{y_j} - e_c) x̃_jᵀ``; the clean
gradient at ``θ̂_t + δ`` is exactly ``g(θ̂_t) + H_t δ + (1/|B|) Σ_i q_i x̃_iᵀ``, with ``H_t`` the Hessian at
``θ̂_t`` and ``q_i = ∫₀¹ (1 - τ) ∇²s(ẑ_i + τ Δz_i)[Δz_i, Δz_i] dτ`` the second-order remainder of the softmax
at row ``i`` (``Δz_i = δ x̃_i``).  From ``∇²s_c = s_c ((e_c - s)(e_c - s)ᵀ - diag(s) + s sᵀ)``,
``Σ_c |q_ic| <= max_τ Var_{s(τ)}(Δz_i) <= ‖Δz_i‖²/2`` (``σ'' <= 1/(6√3)`` for one output).  So, with
``A_t`` the linear part (``I - λ_t (H_t + ω I)``, or its momentum form on ``(δ, ν)``),

    δ_{t+1} = A_t δ_t + κ_t ⊗ (inj_t(D') + ρ_t) + r_t,

``inj_t`` the changed labels of the batch, ``κ_t`` how a gradient enters the state (``-λ_t``; ``(-λ_t, 1)``
with momentum), ``ρ_t`` in the ℓ1 ball of mass ``W_t / |B_t|`` over the generators ``e_c ⊗ x̃_i`` of the
batch, ``W_t = ½ sup Σ_i ‖Δz_i‖²`` (a bound over the allowed datasets, the *energy* of the step, not a sum of
per-row worst cases), and ``r_t`` a box: the rounding of both float runs and of the float Hessian.

**Unrolled**, ``δ_t = Σ_{s<t} Φ(t, s+1) (κ_s ⊗ (inj_s + ρ_s) + r_s)`` with ``Φ`` products of the ``A``'s,
computed in floating point (their rounding carried as a bound that grows with ``|A|`` from ``2⁻⁵²``) and
never boxed in between:

* the changed labels' part is the sum over the changed rows of each row's influence (summed over its
  steps): its worst case over the allowed datasets is a top-k over rows (``scope="run"``), or a top-k in
  every batch (``scope="batch"``, per epoch, the smallest over the epochs);
* ``W_t`` comes from the same influences, through the seminorm ``‖δ‖_w = (Σ_{i∈B_t} Σ_c w_ic (δ_c ·
  x̃_i)²)^{1/2}`` (Minkowski over the changed rows, plus the remainders' part: ``λ_max^{1/2}`` times its ℓ2
  norm, or each earlier remainder's generators in the seminorm itself, `_generator_seminorm`);
* the remainders add, at every parameter (or query), their ℓ1 mass times the largest response of a
  generator.  With several classes a row's ``q_i`` sums to 0 over the classes (``Σ_c s_c = 1``), so the
  generators are ``(e_a - e_b) ⊗ x̃_i`` at half the mass, on which a response and its class-centred form
  agree.

**Certificates.**  The result's boxes are ``θ̂_t`` plus the per-parameter bounds.  A query's margin
``m = (e_p - e_c)·Θ x̃`` is linear in ``θ``; for *any* computed adjoint vectors ``ψ_s`` (``ψ_T = ∇m``) the
telescoping identity ``∇m·δ_T = Σ_s [ψ_{s+1}·(κ_s ⊗ (inj_s + ρ_s) + r_s) + ε_s·δ_s]`` with defects
``ε_s = A_sᵀ ψ_{s+1} - ψ_s`` holds, so the adjoints' own rounding only enters through ``ε_s`` against the
stored boxes of ``δ_s``: the worst changed rows for this query are a top-k of the rows' influences on its
margin (exact to first order), with no parameter box in between.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from certkit.mibp.enclosures.interval import allowed_labels
from certkit.mibp.problem.input_sets import InputSets
from certkit.mibp.problem.losses import sigmoid, softmax
from certkit.mibp.problem.mlp import MLP
from certkit.mibp.problem.recipe import Recipe

__all__ = ["INFLUENCE_MAX_BYTES", "InfluenceEnclosure", "influence_bytes", "influence_supports"]

_U = 2.0**-52
_TINY = 1e-300
#: The enclosure stops (says nothing from that step on) once the remainder's part of the deviation's energy
#: is this many times its first-order part: the linearisation no longer describes the run, and the
#: remainder's quadratic feedback only grows from there.
LINEARISATION_LOST = 10.0
#: The steps' Hessians (``m × m``, and ``C × C`` per batch row) are kept between the run and its
#: certificates while all of them take at most this many bytes, and recomputed otherwise.
HESSIAN_KEEP_BYTES = 256 * 2**20
#: The remainder's part of a step's energy is also bounded through every earlier step's generators (in the
#: energy's own seminorm, about C² q³ per earlier step) once its ℓ2 bound exceeds this share of the
#: first-order part; below it the ℓ2 bound moves the energy by at most this share.
REMAINDER_ROUTE = 0.1


def _gamma(terms: int) -> float:
    """A generous relative rounding allowance of a ``terms``-term sum of products (and its evaluation)."""
    return 2.0 * (terms + 8) * _U


#: The most memory the influence enclosure may plan for (bytes): its influences and the temporaries of their
#: step take about ``3 × 8 × rows × classes × parameters`` bytes; a larger run takes the box carry under
#: ``carry="auto"`` (and is refused under ``carry="influence"``).
INFLUENCE_MAX_BYTES = 2 * 2**30


def influence_bytes(model: MLP, recipe: Recipe) -> int:
    """The memory (bytes) the influence enclosure plans for on this run: ``3 × 8 × rows × classes ×
    parameters``."""
    return 24 * recipe.n_rows * model.sizes[-1] * model.n_params


def influence_supports(model: MLP, recipe: Recipe, sets: InputSets) -> str | None:
    """Why the influence enclosure cannot certify this run (None when it can): it bounds linear models (one
    layer) trained with cross-entropy or binary cross-entropy under label flips, with every recipe option but
    the L1 penalty and per-sample clipping, while its influences fit `INFLUENCE_MAX_BYTES`."""
    if model.n_layers != 1:
        return "a model with hidden layers (it bounds linear models, one layer)"
    if recipe.loss not in ("cross_entropy", "binary_cross_entropy"):
        return f"loss={recipe.loss!r} (it bounds cross-entropy and binary cross-entropy)"
    if sets.label_flips is None or sets.budget is not None or sets.removals is not None:
        return "this perturbation (it bounds LabelFlips)"
    if np.any(sets.varies) or sets.target_radius is not None:
        return "moving inputs (it bounds LabelFlips on exact inputs)"
    if recipe.l1_penalty:
        return "l1_penalty (its subgradient jumps at 0)"
    if recipe.clips:
        return "per-sample clipping"
    need = influence_bytes(model, recipe)
    if need > INFLUENCE_MAX_BYTES:
        return (
            f"{recipe.n_rows} rows x {model.sizes[-1]} classes x {model.n_params} parameters (its influences "
            f"would take about {need / 2**30:.1f} GiB, above INFLUENCE_MAX_BYTES = "
            f"{INFLUENCE_MAX_BYTES / 2**30:g} GiB of certkit.mibp.enclosures.influence)"
        )
    return None


def _top_sum(values: np.ndarray, k: int) -> np.ndarray:
    """Sum of the ``k`` largest entries along the last axis (all of them when there are at most ``k``)."""
    if k <= 0:
        return np.zeros(values.shape[:-1])
    if values.shape[-1] <= k:
        return values.sum(axis=-1)
    return np.partition(values, -k, axis=-1)[..., -k:].sum(axis=-1)


def _epoch_totals(contrib: np.ndarray, k: int, scope: str, recipe: Recipe) -> np.ndarray:
    """Upper bounds (``(E, ...)``) of the total of ``contrib`` (``(..., n)``, nonnegative per-row
    contributions) over the allowed sets of changed rows, one per epoch's constraint: the ``k`` largest
    (``scope="run"``, or every batch the whole training set: ``E = 1``); for ``scope="batch"`` (at most
    ``k`` in every batch) epoch ``e``'s relaxation, the ``k`` largest of every batch of the epoch plus every
    row none of them holds.  Each is positively homogeneous and subadditive in ``contrib``."""
    n = contrib.shape[-1]
    if scope == "run" or all(np.unique(rows).size == n for rows in recipe.batches):  # ... or every batch full
        return _top_sum(contrib, k)[None]
    totals = []
    for e in range(recipe.epochs):
        seen = np.zeros(contrib.shape[-1], dtype=bool)
        total = np.zeros(contrib.shape[:-1])
        for rows in recipe.batches[recipe.epoch_end(e) : recipe.epoch_end(e + 1)]:
            total = total + _top_sum(contrib[..., rows], k)
            seen[rows] = True
        totals.append(total + contrib[..., ~seen].sum(axis=-1))
    return np.stack(totals)


def _aggregate(contrib: np.ndarray, k: int, scope: str, recipe: Recipe) -> np.ndarray:
    """The largest total of ``contrib`` (``(..., n)``, nonnegative per-row contributions) over the allowed
    sets of changed rows: the smallest of `_epoch_totals` (each epoch's constraint alone bounds it)."""
    return _epoch_totals(contrib, k, scope, recipe).min(axis=0)


@dataclass(frozen=True)
class _Step:
    """What the certificate keeps of step ``s``: the deviation of the δ part before it lies in the box
    ``[lo, hi]`` (state layout) plus a vector of ℓ2 norm at most ``l2``; the mass ``mass`` of the step's ℓ1
    remainder over the batch's generators and its rounding box ``box``."""

    lo: np.ndarray
    hi: np.ndarray
    l2: float
    mass: float
    box: np.ndarray

    def magnitude(self) -> np.ndarray:
        """A bound on every entry of the deviation (state layout)."""
        return np.maximum(np.abs(self.lo), np.abs(self.hi)) + self.l2


class InfluenceEnclosure:
    """Runs the influence enclosure of a `certified_training` run (see the module docstring).

    Parameters
    ----------
    model : MLP
        θ_0, a linear model (one layer).
    X : ndarray (n, d)
        Training inputs (exact).
    y : ndarray (n,)
        Labels as `check_labels` returns them (classes ``0..C-1``, or 0/1 for binary cross-entropy).
    recipe : Recipe
    sets : InputSets
        ``LabelFlips`` on exact inputs (see `influence_supports`).
    """

    def __init__(self, model: MLP, X: np.ndarray, y: np.ndarray, recipe: Recipe, sets: InputSets) -> None:
        W = model.weights[0]
        self.C, d = W.shape
        self.q = d + 1
        self.m = self.C * self.q
        self.M = 2 * self.m if recipe.momentum else self.m
        self.Xt = np.hstack([X, np.ones((len(X), 1))])
        self.abs_Xt = np.abs(self.Xt)
        self.x_inf = self.abs_Xt.max(axis=1)  # ‖x̃_i‖_∞
        self.x_two = np.sqrt((self.Xt * self.Xt).sum(axis=1)) * (1.0 + _gamma(self.q))  # ‖x̃_i‖_2, upward
        self.loss = recipe.loss
        self.recipe = recipe
        self.model = model
        if self.loss == "cross_entropy":
            self.y = np.asarray(y, dtype=np.int64)
            self.allowed = allowed_labels(self.y, np.arange(self.C), "other", sets.flip_target)
        else:  # binary cross-entropy: the one other label
            self.y = np.asarray(y, dtype=np.float64)
            target = sets.flip_target
            self.allowed = (np.ones(len(y), dtype=bool) if target is None else (self.y != target))[:, None]
        self.k = int(sets.label_flips)
        self._own = self.y.astype(np.int64) * len(y) + np.arange(len(y))  # flat index of (y_j, j)
        # every row may take every label but its own (a targeted row already at the target may take none)
        others = np.arange(self.C)[None, :] != self.y[:, None] if self.C > 1 else np.ones((len(y), 1), bool)
        self._all_other = bool(np.array_equal(self.allowed, others))
        self.XtT = np.ascontiguousarray(self.Xt.T)
        self.scope = sets.scope
        c, f = np.divmod(np.arange(self.m), self.q)  # Θ order (c, f) -> MLP.to_vector order
        self.to_vec = np.where(f < d, c * d + f, self.C * d + c)
        # steps whose batches hold the same rows share their first-order contraction (the full batch: one)
        keys: dict[bytes, int] = {}
        self.group = [keys.setdefault(np.sort(rows).tobytes(), len(keys)) for rows in recipe.batches]
        self.thetas: list[np.ndarray] = []  # Θ̂_s (C × q), s = 0..T
        self.velocities: list[np.ndarray] = []  # v̂ after step s (Θ order, flat), with momentum
        self.hessians: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # (H̃_s, per-row ∂r/∂z) by step
        self.steps: list[_Step] = []
        self.step_boxes: list[tuple[np.ndarray, np.ndarray]] = []  # per step t >= 1 (index t - 1)
        self.valid_steps = 0  # the steps whose deviation is bounded (all, unless the enclosure gave up)

    # ------------------------------------------------------------------ the linear model
    def _theta(self, vector: np.ndarray) -> np.ndarray:
        return vector[self.to_vec].reshape(self.C, self.q)

    def _vector(self, Theta: np.ndarray) -> np.ndarray:
        out = np.empty(self.m)
        out[self.to_vec] = Theta.ravel()
        return out

    def _probs(self, Theta: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        z = self.Xt[rows] @ Theta.T
        return z, (softmax(z) if self.C > 1 else sigmoid(z))

    def _hessian(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        """``(H̃_t, M_i)``: the float Hessian (m × m, Θ order) of the batch mean loss at Θ̂_t and each batch
        row's ``∂r/∂z`` (``diag(s) - s sᵀ``, or ``s (1 - s)``); computed once per step."""
        if t in self.hessians:
            return self.hessians[t]
        rows = self.recipe.batches[t]
        _, s = self._probs(self.thetas[t], rows)
        if self.C == 1:
            Mi = (s * (1.0 - s))[:, :, None]
        else:
            Mi = s[:, :, None] * np.eye(self.C)[None] - s[:, :, None] * s[:, None, :]
        Xb = self.Xt[rows]
        XbT = np.ascontiguousarray(Xb.T)
        # H[(a, f), (c, g)] = (1/B) Σ_i M_i[a, c] x_if x_ig: one (q × B)(B × q) product per class pair
        H = np.empty((self.C, self.q, self.C, self.q))
        for a in range(self.C):
            for c in range(a, self.C):
                block = XbT @ (Xb * Mi[:, a, c, None])
                H[a, :, c, :] = block
                if c != a:
                    H[c, :, a, :] = block.T
        self.hessians[t] = (H.reshape(self.m, self.m) / len(rows), Mi)
        return self.hessians[t]

    def _kappa(self, t: int) -> np.ndarray:
        """How a gradient-space vector enters the state at step ``t``: ``(-λ)`` or ``(-λ, 1)``."""
        lr = float(self.recipe.rates[t])
        return np.array([-lr, 1.0]) if self.recipe.momentum else np.array([-lr])

    def _apply(self, t: int, H: np.ndarray, S: np.ndarray) -> np.ndarray:
        """``A_t S`` for state matrices ``S`` (M × cols)."""
        lr, wd, mu = float(self.recipe.rates[t]), self.recipe.weight_decay, self.recipe.momentum
        top = S[: self.m]
        G = H @ top
        if wd:
            G = G + wd * top
        if not mu:
            return top - lr * G
        nu = mu * S[self.m :] + G
        return np.concatenate([top - lr * nu, nu])

    def _apply_transpose(self, t: int, H: np.ndarray, W: np.ndarray) -> np.ndarray:
        """``A_tᵀ W`` for adjoint matrices ``W`` (M × cols)."""
        lr, wd, mu = float(self.recipe.rates[t]), self.recipe.weight_decay, self.recipe.momentum
        a = W[: self.m]
        Hw_a = H @ a + (wd * a if wd else 0.0)
        if not mu:
            return a - lr * Hw_a
        b = W[self.m :]
        # A = [[I - λ Hw, -λ μ I], [Hw, μ I]]:  Aᵀ [a; b] = [a - λ Hw a + Hw b; μ (b - λ a)]
        Hw_b = H @ b + (wd * b if wd else 0.0)
        return np.concatenate([a - lr * Hw_a + Hw_b, mu * (b - lr * a)])

    def _abs_A(self, t: int, H: np.ndarray, *, terms: bool = False) -> np.ndarray:
        """``|A_t|`` (M × M); with ``terms=True`` the magnitudes of the terms its float product adds
        (``|I| + λ |H̃ + ω I|``, ...), which bound that product's rounding."""
        lr, wd, mu = float(self.recipe.rates[t]), self.recipe.weight_decay, self.recipe.momentum
        eye = np.eye(self.m)
        Hw = H + wd * eye
        diag = eye + lr * np.abs(Hw) if terms else np.abs(eye - lr * Hw)
        if not mu:
            return diag
        top = np.concatenate([diag + (lr * np.abs(Hw) if terms else 0.0), lr * mu * eye], axis=1)
        return np.concatenate([top, np.concatenate([np.abs(Hw), mu * eye], axis=1)])

    def _flip_extremes(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The largest increase and decrease (``(..., n)``, nonnegative) of a functional when row ``j`` takes
        an allowed other label, from its responses ``values[..., a, j]`` to row ``j``'s logit-space ``e_a``
        (``(..., C, n)``): the change is ``values[y_j] - values[a]`` (for one output ``(2 y_j - 1)
        values``), and ``a = y_j`` changes nothing, so the extremes are those of the allowed labels."""
        if self.C == 1:
            change = values[..., 0, :] * (self.allowed[:, 0] * (2.0 * self.y - 1.0))
            return np.maximum(change, 0.0), np.maximum(-change, 0.0)
        own = values.reshape(*values.shape[:-2], -1)[..., self._own]  # values[..., y_j, j]
        if self._all_other:  # every other label allowed: the own label's change (0) joins the extremes
            low, high = values.min(axis=-2), values.max(axis=-2)
        else:
            low = np.where(self.allowed.T, values, np.inf).min(axis=-2)
            high = np.where(self.allowed.T, values, -np.inf).max(axis=-2)
        return np.maximum(own - low, 0.0), np.maximum(high - own, 0.0)

    # ------------------------------------------------------------------ the run
    def run(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """Bound every step's deviation; returns, for epochs ``1..T``, the padded box ``(lower, upper)`` of
        the parameters (`MLP.to_vector` order)."""
        recipe = self.recipe
        self.thetas = [self._theta(self.model.to_vector())]
        velocity = None
        sources: list[tuple[int, np.ndarray]] = []  # (s, Φ̃(t, s+1)) for the steps so far
        y_err = np.zeros(self.M)  # bound on Σ_s |Φ - Φ̃|(t, s+1) c_s: the products' rounding
        lo = hi = np.zeros(self.M)
        l2 = 0.0
        energy_e = (0.0, 0.0)  # ‖remainder part of δ_t‖₂ (its boxes, its ℓ1 remainders), for the next step
        infl = np.zeros((self.m, self.C, len(self.Xt)))  # the rows' first-order influences on δ_t
        boxes = []
        for t in range(recipe.n_steps):
            H, Mi = self._hessian(t)
            with np.errstate(over="ignore", invalid="ignore"):
                mass, box, linear, rest = self._remainder(
                    t, lo, hi, l2, Mi, infl, energy_e, velocity, sources
                )
            if not (np.isfinite(mass) and rest <= LINEARISATION_LOST * max(linear, _TINY)):
                # the remainder outgrew the first-order part: the box before step t stands, nothing after it
                self.steps.append(_Step(lo, hi, l2, 0.0, np.zeros(self.M)))
                self._give_up(t, boxes)
                break
            self.steps.append(_Step(lo, hi, l2, mass, box))
            theta, velocity = self._nominal_step(t, velocity)
            self.thetas.append(self._theta(theta))
            if recipe.momentum:
                self.velocities.append(velocity[self.to_vec])
            spread = np.zeros(self.M)  # Σ_s |Φ̃(t, s+1)| c_s, the magnitudes the product A_t Φ̃ carries
            moved = []
            for s, P in sources:
                spread += np.abs(P) @ self._magnitude(s)
                moved.append((s, self._apply(t, H, P)))
            y_err = self._abs_A(t, H) @ y_err + _gamma(self.M) * (self._abs_A(t, H, terms=True) @ spread)
            sources = [*moved, (t, np.eye(self.M))]
            lo, hi, l2, infl, energy_e = self._box(t + 1, sources, y_err)
            self.step_boxes.append(self._parameter_box(t + 1, lo - l2, hi + l2))
            if (t + 1) % recipe.steps_per_epoch == 0:
                boxes.append(self.step_boxes[-1])
        else:
            self.steps.append(_Step(lo, hi, l2, 0.0, np.zeros(self.M)))
            self.valid_steps = recipe.n_steps
        self._release_hessians()
        return boxes

    def _release_hessians(self) -> None:
        """Forget the steps' Hessians (recomputed when a certificate needs them) unless all of them fit
        `HESSIAN_KEEP_BYTES`."""
        steps = self.recipe.n_steps
        rows = max(len(b) for b in self.recipe.batches)
        if steps * (self.m * self.m + rows * self.C * self.C) * 8 > HESSIAN_KEEP_BYTES:
            self.hessians = {}

    def _give_up(self, t: int, boxes: list) -> None:
        """The enclosure says nothing from step ``t`` on (boxes of every later step and epoch are unbounded);
        the boxes of steps ``<= t`` stand."""
        self.valid_steps = t
        unbounded = (np.full(self.m, -np.inf), np.full(self.m, np.inf))
        while len(self.step_boxes) < self.recipe.n_steps:
            self.step_boxes.append(unbounded)
        while len(boxes) < self.recipe.epochs:
            boxes.append(unbounded)

    def _nominal_step(self, t: int, velocity):
        """One nominal step exactly as `MLP.steps` computes it (``MLP.to_vector`` order)."""
        model = MLP.from_vector(self._vector(self.thetas[t]), self.model.sizes)
        rows = self.recipe.batches[t]
        grad = model._gradient_vector(self.Xt[rows, :-1], self.y[rows], self.loss)
        return self.recipe.update(model.to_vector(), velocity, grad, t)

    def _injection_magnitude(self, s: int) -> np.ndarray:
        """A bound (Θ order, flat) on the changed labels' gradient change at step ``s``: a changed row moves
        parameter ``(a, f)`` by at most ``|x̃_jf| / |B|`` and at most ``k`` rows of the batch change."""
        rows = self.recipe.batches[s]
        per_f = _top_sum(self.abs_Xt[rows].T, self.k) / len(rows)
        return np.tile(per_f, self.C)

    def _state(self, s: int, g: np.ndarray) -> np.ndarray:
        """A gradient-space vector entered into the state at step ``s`` (magnitudes)."""
        return np.concatenate([abs(k) * g for k in self._kappa(s)])

    def _magnitude(self, s: int) -> np.ndarray:
        """``c_s``: a bound on the state vector entering at step ``s`` (the changed labels, the ℓ1 remainder's
        hull, the rounding box)."""
        rows = self.recipe.batches[s]
        step = self.steps[s]
        l1_hull = step.mass / len(rows) * np.tile(self.abs_Xt[rows].max(axis=0), self.C)
        return self._state(s, self._injection_magnitude(s) + l1_hull) + step.box

    def _response_matrix(self, s: int, P: np.ndarray) -> np.ndarray:
        """``K`` (m × m): the response of the δ part to a gradient-space vector entering at step ``s``,
        through ``Φ̃ = P`` (``P κ_s``)."""
        kappa = self._kappa(s)
        K = P[: self.m, : self.m] * kappa[0]
        if self.recipe.momentum:
            K = K + P[: self.m, self.m :] * kappa[1]
        return K

    def _contract(self, infl: np.ndarray | None, K: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """``infl[p, a, j] += K[p, (a, ·)] · x̃_j`` for the rows ``j`` of a batch (one product
        (p C × q)(q × B)); returns ``infl`` (a new array when it is None)."""
        n = len(self.Xt)
        whole = len(rows) == n and np.array_equal(rows, np.arange(n))
        XT = self.XtT if whole else np.ascontiguousarray(self.XtT[:, rows])
        vals = (K.reshape(-1, self.q) @ XT).reshape(K.shape[0], self.C, len(rows))
        if infl is None:  # the first batch: the influences so far are its own
            if whole:
                return vals
            infl = np.zeros((K.shape[0], self.C, n))
        if whole:
            infl += vals
        else:
            infl[:, :, rows] += vals
        return infl

    def _box(self, t: int, sources, y_err: np.ndarray):
        """The deviation box of the state at step ``t`` (state layout), the rows' first-order influences on
        the δ part and an ℓ2 bound on its remainder part, for step ``t``'s remainder."""
        m, C, q = self.m, self.C, self.q
        l1_two = 0.0  # a bound on the ℓ2 norm of the ℓ1 remainders' part (δ part)
        l1_nu = np.zeros(self.M - m)  # ... and their ν part, through |Φ̃| of the generators' hull
        scale = np.zeros(m)  # the influences' rounding: Σ_s max_a Σ_f |K| max_i ‖x̃_i‖_∞ / |B|
        boxes = np.zeros(self.M)  # Σ_s |Φ̃| r_s
        grouped: dict[int, np.ndarray] = {}  # Σ K / |B| of the steps whose batches hold the same rows
        for s, P in sources:
            rows = self.recipe.batches[s]
            B = len(rows)
            K = self._response_matrix(s, P)
            g = self.group[s]
            grouped[g] = K / B if g not in grouped else grouped[g] + K / B
            step = self.steps[s]
            blocks = K.reshape(m, C, q)
            if step.mass:  # the ℓ1 remainder through its generators, in ℓ2
                l1_two += step.mass / B * self._generator_seminorm(K, rows)
                if self.recipe.momentum:
                    hull = step.mass / B * np.tile(self.abs_Xt[rows].max(axis=0), C)
                    l1_nu += np.abs(P[m:]) @ self._state(s, hull)
            scale += np.abs(blocks).sum(axis=2).max(axis=1) * self.x_inf[rows].max() / B
            boxes += np.abs(P) @ step.box
        infl = None  # the response to row j's e_a, summed over its steps so far (m, C, n)
        for g, K in grouped.items():
            infl = self._contract(infl, K, self.recipe.batches[self.group.index(g)])
        up, down = self._flip_extremes(infl)  # (m, n): parameter p's extremes when row j flips
        rounding = 2.0 * _gamma(q + len(sources)) * scale[:, None] * (self.x_inf / self.x_inf.max())[None, :]
        hi = np.zeros(self.M)
        lo = np.zeros(self.M)
        hi[:m] = _aggregate(up + rounding, self.k, self.scope, self.recipe)
        lo[:m] = -_aggregate(down + rounding, self.k, self.scope, self.recipe)
        rest = (y_err + boxes) * (1.0 + _gamma(len(sources) + self.M))
        rest[m:] += l1_nu * (1.0 + _gamma(self.M))
        lo, hi = lo - rest, hi + rest
        # the remainder part of δ (its ℓ2 norm): the boxes, the products' rounding, the influences' rounding
        both = np.maximum(_aggregate(rounding, self.k, self.scope, self.recipe), 0.0)
        l1_two *= 1.0 + _gamma(len(sources) + 4)  # the float sum of its terms over the steps
        energy_e = (np.sqrt(((rest[:m] + both) ** 2).sum()) * (1.0 + _gamma(m)), l1_two)
        l2 = l1_two * (1.0 + _gamma(4))
        if self.recipe.momentum:
            # ν_t = (δ_{t-1} - δ_t + r) / λ_{t-1}, r the rounding of δ's float update (in the previous box):
            # a bound from the two δ boxes (the ν part of the boxes above holds no first-order part)
            prev = self.steps[t - 1]
            lr = float(self.recipe.rates[t - 1])
            slack = prev.box[:m] + prev.l2 + l2
            nu_lo = (prev.lo[:m] - hi[:m] - slack) / lr
            nu_hi = (prev.hi[:m] - lo[:m] + slack) / lr
            pad = _gamma(4) * (np.abs(nu_lo) + np.abs(nu_hi))
            lo[m:], hi[m:] = nu_lo - pad, nu_hi + pad
        return lo, hi, l2, infl, energy_e

    def _curvature_weights(self, t: int, reach: np.ndarray) -> np.ndarray:
        """``w_ia`` (B, C) with ``Σ_c |q_ic| <= Σ_a w_ia Δz_ia²`` for the batch rows of step ``t`` and any
        ``|Δz_i| <= reach_i``: ``Σ_c |q_c| <= max_τ Var_{s(τ)}(Δ) <= Σ_a s_a(τ) Δ_a²``, so ``w`` is the upper
        end of each softmax entry over the box of the logits; for one output ``max |σ''| / 2`` over it."""
        rows = self.recipe.batches[t]
        z, _ = self._probs(self.thetas[t], rows)
        zL, zU = z - reach, z + reach
        if self.C == 1:
            sL = np.maximum(sigmoid(zL) - 16.0 * _U, 0.0)
            sU = np.minimum(sigmoid(zU) + 16.0 * _U, 1.0)
            return 0.5 * _sigmoid_second_peak(sL, sU)
        with np.errstate(over="ignore"):  # s_c <= 1 / (1 + Σ_{j≠c} e^{zL_j - zU_c})
            off = ~np.eye(self.C, dtype=bool)[None]
            sU = 1.0 / (1.0 + np.where(off, np.exp(zL[:, None, :] - zU[:, :, None]), 0.0).sum(axis=2))
        return np.minimum(sU + 8.0 * (self.C + 4) * _U, 1.0)

    def _grams(self, weights: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, float]:
        """The class-weighted Grams ``G_c = Σ_i w_ic x̃_i x̃_iᵀ`` of the batch (``(C, q, q)``, float) and the
        largest entry of ``Σ_i w_ic |x̃_i| |x̃_i|ᵀ`` (which bounds ``|G|``, ``|G̃|`` and their difference
        divided by its rounding allowance)."""
        Xb = self.Xt[rows]
        G = np.matmul(Xb.T[None] * weights.T[:, None, :], Xb[None])
        absG = float(np.matmul(np.abs(Xb).T[None] * weights.T[:, None, :], np.abs(Xb)[None]).max())
        return G, absG * (1.0 + _gamma(len(rows)))

    def _energy(self, infl: np.ndarray, G: np.ndarray, absG: float, rows: np.ndarray) -> np.ndarray:
        """``(Σ_{i∈rows} Σ_c w_ic (v_c · x̃_i)²)^{1/2}`` of the first-order change ``v`` of every row ``j``'s
        allowed flip (``v = infl[:, y_j, j] - infl[:, a, j]``; for one output ``(2 y_j - 1) infl[:, 0, j]``),
        the largest over its labels: per row ``j`` (n,), upward.  Expanded as ``oᵀGo - 2 oᵀG I_a + I_aᵀG I_a``
        with ``G`` the class-weighted Grams ``Σ_i w_ic x̃_i x̃_iᵀ``, padded for the expansion's rounding."""
        C, q, n = self.C, self.q, infl.shape[-1]
        flat = infl.reshape(C, q, C * n)  # [c, f, (a, j)]
        GI = np.matmul(G, flat).reshape(C, q, C, n)
        I = flat.reshape(C, q, C, n)  # noqa: E741 (the influences, as in the docstring)
        # (a, n): a bound on ‖I_a‖₁ of every row, √m ‖I_a‖₂ (for the rounding allowance alone)
        norm1 = np.sqrt(np.einsum("cfaj,cfaj->aj", I, I) * (self.m * (1.0 + _gamma(self.m))))
        if C == 1:
            quad = np.where(self.allowed.T, np.einsum("cfaj,cfaj->aj", I, GI), 0.0)  # (1, n)
            bound = norm1**2
        else:
            idx = np.arange(n)
            own_I = I[:, :, self.y, idx]  # (C, q, n)
            own_GI = GI[:, :, self.y, idx]
            oGo = np.einsum("cfj,cfj->j", own_I, own_GI)
            oGI = np.einsum("cfj,cfaj->aj", own_I, GI)
            IGI = np.einsum("cfaj,cfaj->aj", I, GI)
            quad = np.where(self.allowed.T, oGo[None] - 2.0 * oGI + IGI, 0.0)
            bound = np.where(self.allowed.T, (norm1[self.y, idx][None] + norm1) ** 2, 0.0)
        out = np.maximum(quad, 0.0) + _gamma(len(rows) + 4 * q) * absG * bound
        return np.sqrt(out.max(axis=0)) * (1.0 + _gamma(2))

    def _generator_seminorm(
        self,
        K: np.ndarray,
        rows: np.ndarray,
        G: np.ndarray | None = None,
        absG: float = 1.0,
        root: float = 1.0,
        g_rows: int = 0,
    ) -> float:
        """An upper bound of ``‖K ρ‖_G / mass`` over a step's ℓ1 remainders ``ρ`` (mass ``mass``, over the
        generators of its batch ``rows``), ``K`` the δ part's response to them (`_response_matrix`) and
        ``‖v‖_G² = Σ_c v_cᵀ G_c v_c`` the energy's seminorm of the current step (``root >= λ_max(G)^{1/2}``,
        ``g_rows`` the rows its float Grams sum; ``G=None``: the identity, ``‖·‖_G = ‖·‖₂``).

        With one output, ``ρ`` lies in ``mass`` times the hull of ``±e_0 ⊗ x̃_j`` (``j`` in the batch):
        the largest ``‖K_0 x̃_j‖_G``.  With several classes a row's softmax remainder sums to 0
        (``Σ_c s_c = 1``), so ``ρ`` lies in ``mass / 2`` times the hull of ``±(e_a - e_b) ⊗ x̃_j``, on which
        ``K`` and ``K̄ = K - μ 1ᵀ`` agree for any ``μ``: with ``μ`` the classes' mean (``K̄`` its float, within
        ``u |K̄|`` of such a matrix), ``‖K̄ (e_a - e_b) x̃_j‖_G <= ‖K̄_a x̃_j‖_G + ‖K̄_b x̃_j‖_G``, the sum of
        a row's two largest.  ``‖K̄_a x̃_j‖_G² = x̃_jᵀ N_a x̃_j`` with ``N_a = Σ_c K̄_caᵀ G_c K̄_ca``, padded
        for the rounding of the Grams and of these products."""
        C, q = self.C, self.q
        K4 = K.reshape(C, q, C, q)  # [c, f, a, g]
        if C > 1:
            K4 = K4 - K4.mean(axis=2, keepdims=True)
        GK = K4 if G is None else np.matmul(G, K4.reshape(C, q, C * q)).reshape(C, q, C, q)
        left = K4.transpose(2, 3, 0, 1).reshape(C, q, C * q)  # [a, g, (c, f)]
        N = np.matmul(left, GK.transpose(2, 0, 1, 3).reshape(C, C * q, q))  # (C, q, q)
        Xs = self.Xt[rows]
        XN = (Xs @ N.transpose(1, 0, 2).reshape(q, C * q)).reshape(len(Xs), C, q)  # one product
        quad = np.einsum("jag,jg->aj", XN, Xs)  # (C, B): ‖K̄_a x̃_j‖_G²
        # |exact - float| <= γ Σ_c |v_c|ᵀ |G_c| |v_c| <= γ absG Σ_c ‖v_c‖₁²,
        # ‖v_c‖₁ <= (max col sum |K̄_ca|) ‖x̃_j‖₁
        cols = np.abs(K4).sum(axis=1).max(axis=2)  # (C, C): [c, a]
        x1 = self.abs_Xt[rows].sum(axis=1)
        gam = _gamma(len(rows) + g_rows + 4 * C * q)
        allow = gam * absG * (cols * cols).sum(axis=0)[:, None] * (x1 * x1)[None]
        # the centring's rounding E (|E| <= u |K̄|): ‖E e_a x̃_j‖_G <= root ‖E e_a x̃_j‖₁
        centring = root * _U * cols.sum(axis=0)[:, None] * x1[None] if C > 1 else 0.0
        single = (np.sqrt(np.maximum(quad, 0.0) + allow) + centring) * (1.0 + _gamma(4))
        if C == 1:
            return float(single.max())
        return float((np.sort(single, axis=0)[-2:].sum(axis=0) / 2.0).max() * (1.0 + _gamma(2)))

    def _parameter_box(self, t: int, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``θ̂_t`` plus the δ part of the box, padded, in `MLP.to_vector` order."""
        theta = self.thetas[t].ravel()
        low, high = theta + lo[: self.m], theta + hi[: self.m]
        low = low - _gamma(2) * np.abs(low)
        high = high + _gamma(2) * np.abs(high)
        out_lo, out_hi = np.empty(self.m), np.empty(self.m)
        out_lo[self.to_vec], out_hi[self.to_vec] = low, high
        return out_lo, out_hi

    # ------------------------------------------------------------------ the remainder of a step
    def _remainder(self, t, lo, hi, l2, Mi, infl, energy_e, velocity, sources) -> tuple:
        """Step ``t``'s remainder: ``W_t`` (the ℓ1 part's mass times ``|B_t|``), the rounding box (state
        layout: both float runs' gradients and updates, and the float Hessian ``H̃_t`` against the exact
        one), and the two parts of the energy's bound (first-order, remainder)."""
        recipe = self.recipe
        rows = recipe.batches[t]
        B = len(rows)
        aXb = self.abs_Xt[rows]
        m, q, C = self.m, self.q, self.C
        box_part = np.maximum(np.abs(lo[:m]), np.abs(hi[:m])).reshape(C, q)
        dmax = box_part + l2
        Theta = self.thetas[t]
        # W_t >= Σ_i Σ_c |q_ic| <= Σ_i Σ_a w_ia Δz_ia² = ‖δ‖_w² over the allowed datasets, with ‖δ‖_w <= (the
        # first-order part, Minkowski over the changed rows) + λ_max^{1/2} ‖remainder part‖₂
        reach = (aXb @ box_part.T + l2 * self.x_two[rows][:, None]) * (1.0 + _gamma(q))  # |Δz_i| (B, C)
        weights = self._curvature_weights(t, reach + _gamma(q) * (aXb @ np.abs(Theta).T))
        G, absG = self._grams(weights, rows)
        lin_energy = float(_aggregate(self._energy(infl, G, absG, rows), self.k, self.scope, recipe))
        # λ_max of every weighted Gram (Gershgorin on Σ_i w_ic |x̃_i| |x̃_i|ᵀ)
        root = np.sqrt(float((weights.T @ (aXb * aXb.sum(axis=1)[:, None])).max()) * (1.0 + _gamma(B + q)))
        box_two, l1_two = energy_e
        rest_energy = root * (box_two + l1_two) * (1.0 + _gamma(2))
        if rest_energy > REMAINDER_ROUTE * lin_energy:
            # each earlier step's ℓ1 remainder through its generators' responses, in the seminorm itself
            through = sum(
                self.steps[s].mass
                / len(recipe.batches[s])
                * self._generator_seminorm(self._response_matrix(s, P), recipe.batches[s], G, absG, root, B)
                for s, P in sources
                if self.steps[s].mass
            )
            rest_energy = min(rest_energy, (root * box_two + through) * (1.0 + _gamma(len(sources) + 2)))
        norm = lin_energy + rest_energy
        mass = norm * norm * (1.0 + _gamma(8))
        z_err = _gamma(q) * (aXb @ (np.abs(Theta) + dmax).T)  # the float logits of either run
        mag_x = aXb.sum(axis=0) / B
        # the float gradients of both runs: (B + 4)-term sums of |r| |x| <= |x|, the float softmax
        # 8 (C + 4) u,
        # and the float logits' rounding through ∂s/∂z (|Σ_a ∂s_c/∂z_a err_a| <= 2 max_a err_a)
        g = 2.0 * (_gamma(B + 4) + 8.0 * (C + 4) * _U) * np.tile(mag_x, C)
        g = g + 2.0 * 2.0 * np.tile((z_err.max(axis=1) @ aXb) / B, C)
        # |H - H̃| |δ|: the float Hessian's B-term sums and its float softmax
        proj = aXb @ dmax.T  # (B, C): |x̃_i| · |δ_c|
        Mabs = np.abs(Mi) + 3.0 * 8.0 * (C + 4) * _U
        hv = np.einsum("iac,ic,if->af", Mabs, proj, aXb, optimize=True).ravel()
        g = g + _gamma(B + q + 4) * hv / B
        box = self._state(t, g)
        # the float update of both runs: θ' = θ - λ v, v = μ v + (g + ω θ), a few roundings each
        lr, wd, mu = float(recipe.rates[t]), recipe.weight_decay, recipe.momentum
        theta_mag = np.abs(Theta).ravel() + dmax.ravel()
        v_mag = 2.0 * np.tile(mag_x, C) + wd * theta_mag
        if mu and velocity is not None:
            v_mag = v_mag + mu * (
                np.abs(self.velocities[t - 1]) + np.maximum(np.abs(lo[m:]), np.abs(hi[m:])) + l2
            )
        box[:m] += 2.0 * 8.0 * _U * (theta_mag + lr * v_mag) * (1.0 + wd)
        if mu:
            box[m:] += 2.0 * 8.0 * _U * v_mag
        return mass, box * (1.0 + _gamma(8)), lin_energy, rest_energy

    # ------------------------------------------------------------------ per-query certificates
    def margin_lower_bounds(
        self, epoch: int, X: np.ndarray, pred: np.ndarray, chunk: int = 128
    ) -> np.ndarray:
        """A lower bound (m,), over every allowed dataset, of the margin ``min_{c ≠ pred} z_pred - z_c``
        (``pred * z`` for one output) of the float model trained on it, at the rows of ``X`` after
        ``epoch`` epochs (see the module docstring)."""
        out = np.empty(len(X))
        for start in range(0, len(X), chunk):
            sl = slice(start, start + chunk)
            out[sl] = self._margins(epoch, X[sl], pred[sl])
        self._release_hessians()
        return out

    def _margins(self, epoch: int, X: np.ndarray, pred: np.ndarray) -> np.ndarray:
        recipe = self.recipe
        T = recipe.epoch_end(epoch)
        if T > self.valid_steps:  # the enclosure gave up before this epoch
            return np.full(len(X), -np.inf)
        n_q, C, q, m = len(X), self.C, self.q, self.m
        Xq = np.hstack([X, np.ones((n_q, 1))])
        # logit functionals ψ^{(i, c)} = e_c ⊗ x̃_i on the δ part: column i C + c
        psi = np.zeros((self.M, n_q * C))
        view = psi[:m].reshape(C, q, n_q, C)
        for c in range(C):
            view[c, :, :, c] = Xq.T
        grouped: dict[int, np.ndarray] = {}  # Σ_s combo_s / |B_s| of the steps of each group
        spread = np.zeros(n_q * C)  # Σ_s max_a Σ_f |combo| / |B|: each influence value's term sum
        extra = np.zeros(n_q * C)  # remainders and defects
        for s in range(T - 1, -1, -1):
            rows = recipe.batches[s]
            B = len(rows)
            kappa = self._kappa(s)
            combo = kappa[0] * psi[:m] + (kappa[1] * psi[m:] if recipe.momentum else 0.0)  # (m, Q)
            g = self.group[s]
            grouped[g] = combo / B if g not in grouped else grouped[g] + combo / B
            blocks = combo.reshape(C, q, -1)
            spread += np.abs(blocks).sum(axis=1).max(axis=0) / B
            step = self.steps[s]
            abs_psi = np.abs(psi)
            # the ℓ1 remainder: a generator e_a ⊗ x̃_i responds by |combo_a · x̃_i| <= ‖combo_a‖₂ ‖x̃_i‖₂
            top = np.sqrt((blocks * blocks).sum(axis=1)).max(axis=0) * (1.0 + _gamma(q + 4))
            if C > 1:  # the remainder's rows sum to 0 over the classes (see `_generator_seminorm`)
                centred = blocks - blocks.mean(axis=0, keepdims=True)
                two = np.sort(np.sqrt((centred * centred).sum(axis=1)), axis=0)[-2:].sum(axis=0) / 2.0
                top = np.minimum(top, two * (1.0 + _gamma(q + 4)))
            top = top * self.x_two[rows].max()
            extra += step.mass / B * top + abs_psi.T @ step.box
            H, Mi = self._hessian(s)
            # ε_s = A_sᵀ ψ_{s+1} - ψ_s: ‖ε_s‖_∞ <= the float product's rounding + λ ‖H - H̃‖ ‖ψ‖_∞
            lr = float(recipe.rates[s])
            h_norm = float(np.abs(H).sum(axis=1).max()) + recipe.weight_decay
            growth = 1.0 + lr * h_norm + (2.0 * h_norm + recipe.momentum if recipe.momentum else 0.0)
            eps = (_gamma(self.M) * growth + lr * self._hessian_error(s, Mi)) * abs_psi.max(axis=0)
            extra += eps * step.magnitude().sum()
            psi = self._apply_transpose(s, H, psi)
        Theta = self.thetas[T]
        box_T = self.steps[T].magnitude()[:m].reshape(C, q)
        z = Xq @ Theta.T
        zerr = 2.0 * _gamma(q) * (np.abs(Xq) @ (np.abs(Theta) + box_T).T)  # both logits' float rounding
        groups = [(recipe.batches[self.group.index(g)], combo) for g, combo in grouped.items()]
        rounding = 2.0 * _gamma(q + 2 * recipe.epochs)  # × spread × ‖x̃_j‖_∞: an influence value's rounding
        extra = extra.reshape(n_q, C)
        if C == 1:
            infl = None  # the response of logit functional i to row j's e_0 (n_q, 1, n)
            for rows, combo in groups:
                infl = self._contract(infl, combo.T.reshape(-1, C, q), rows)
            sign = np.where(np.asarray(pred) > 0, 1.0, -1.0)
            _, down = self._flip_extremes(sign[:, None, None] * infl)  # (n_q, n)
            worst = _aggregate(
                down + rounding * spread[:, None] * self.x_inf[None, :], self.k, self.scope, recipe
            )
            return sign * z[:, 0] - worst - extra[:, 0] - zerr[:, 0]
        return self._competitor_bounds(groups, z, extra + zerr, spread.reshape(n_q, C), rounding, pred)

    def _competitor_bounds(
        self,
        groups: list,
        z: np.ndarray,
        slack: np.ndarray,
        spread: np.ndarray,
        rounding: float,
        pred: np.ndarray,
    ) -> np.ndarray:
        """``min_{c ≠ p}`` of the margin bound ``(z_p - slack_p) - (z_c + slack_c) - worst(p, c)`` (``slack``:
        the remainders, defects and the logits' rounding), with ``worst`` the largest
        decrease of ``z_p - z_c`` over the allowed changed labels (a top-k over the rows).  The exact worst
        costs a contraction per competitor; a bound through norms, ``|D_a · x̃_j| <= ‖D_a‖₂ ‖x̃_j‖₂``, gives
        every competitor a lower bound of its margin bound first, and the exact worst is computed only for
        the competitors whose lower bound is below the smallest exact bound found: the result is the
        minimum over all competitors of their exact bounds wherever it is positive (the prediction is
        certified); a query whose closest competitor's exact bound is already at most 0 takes the other
        competitors' lower bounds instead (a smaller bound, as uncertified)."""
        n_q, C = z.shape
        index = np.arange(n_q)
        p = np.asarray(pred).astype(np.int64)
        # cheap: 2 max_a ‖(ψ_p - ψ_c)_a‖₂ ‖x̃_j‖₂ (group g's rows) + the rounding allowance bound every change
        # of label of row j; the totals are homogeneous and subadditive, so each epoch's total of their sum is
        # at most the combination of the groups' ‖x̃‖₂ totals and the ‖x̃‖_∞ total
        coef = np.empty((len(groups) + 1, n_q, C))
        vectors = np.zeros((len(groups) + 1, len(self.Xt)))
        pairs = self._pair_differences(groups, p)
        for g, (rows, diff) in enumerate(pairs):
            coef[g] = 2.0 * np.sqrt((diff * diff).sum(axis=1)).max(axis=0) * (1.0 + _gamma(2 * self.q))
            vectors[g, rows] = self.x_two[rows]
        per_row = rounding * (spread[index, p][:, None] + spread)  # × ‖x̃_j‖_∞: both values' rounding
        coef[-1] = per_row
        vectors[-1] = self.x_inf
        totals = _epoch_totals(vectors, self.k, self.scope, self.recipe)  # (E, groups + 1)
        worst = np.einsum("gic,eg->eic", coef, totals).min(axis=0) * (1.0 + _gamma(len(groups) + 1))
        margin = (z[index, p] - slack[index, p])[:, None] - (z + slack)
        lower = margin - worst * (1.0 + _gamma(2 * self.k + 8))
        lower[index, p] = np.inf
        first = lower.argmin(axis=1)  # the competitor most likely to be the closest
        bound = margin[index, first] - self._pair_worst(pairs, index, first, per_row)
        rest = lower < bound[:, None]
        rest[index, first] = False
        # a query whose closest competitor already leaves it uncertified takes the others' norm bounds
        lost = bound <= 0.0
        bound[lost] = np.minimum(bound[lost], np.where(rest[lost], lower[lost], np.inf).min(axis=1))
        rest[lost] = False
        qi, qc = np.nonzero(rest)
        if len(qi):
            np.minimum.at(bound, qi, margin[qi, qc] - self._pair_worst(pairs, qi, qc, per_row))
        return bound

    def _pair_differences(self, groups: list, p: np.ndarray) -> list:
        """Per group ``(rows, ψ_p - ψ_c)``: the adjoint sums of every query's margin functional ``z_p - z_c``
        against each competitor ``c`` (``(C, q, n_q, C)``; zero at ``c = p``)."""
        index = np.arange(len(p))
        out = []
        for rows, combo in groups:
            view = combo.reshape(self.C, self.q, len(p), self.C)
            out.append((rows, view[:, :, index, p][..., None] - view))
        return out

    def _pair_worst(self, pairs: list, qi: np.ndarray, qc: np.ndarray, per_row: np.ndarray) -> np.ndarray:
        """The largest decrease of ``z_p - z_c`` of query ``qi`` against competitor ``qc`` (pairs of
        indices) over the allowed changed labels: the pair's responses (`_pair_differences`) to every row's
        ``e_a``, exactly."""
        C, q, n = self.C, self.q, len(self.Xt)
        values = np.zeros((len(qi), C, n))
        for rows, diff in pairs:
            XT = np.ascontiguousarray(self.XtT[:, rows])
            pair = diff[:, :, qi, qc]  # (C, q, pairs)
            values[:, :, rows] += (pair.transpose(2, 0, 1).reshape(-1, q) @ XT).reshape(len(qi), C, len(rows))
        _, down = self._flip_extremes(values)
        return _aggregate(down + per_row[qi, qc][:, None] * self.x_inf, self.k, self.scope, self.recipe)

    def _hessian_error(self, s: int, Mi: np.ndarray) -> float:
        """``‖E_H‖_∞`` with ``|H_s - H̃_s| <= E_H``: the float Hessian's B-term sums and float softmax."""
        rows = self.recipe.batches[s]
        aXb = self.abs_Xt[rows]
        Mabs = np.abs(Mi) + 3.0 * 8.0 * (self.C + 4) * _U
        # row (a, f) of E_H sums to γ (1/B) Σ_i Σ_c (|M_i| + ε)[a, c] |x_if| ‖x̃_i‖_1
        rowsum = np.einsum("iac,if,i->af", Mabs, aXb, aXb.sum(axis=1), optimize=True)
        scale = 2.0 if self.recipe.momentum else 1.0
        return float(rowsum.max()) * _gamma(len(rows) + self.q + 4) / len(rows) * scale


def _sigmoid_second_peak(sL: np.ndarray, sU: np.ndarray) -> np.ndarray:
    """``max |σ''| = max |s (1 - s)(1 - 2 s)|`` over ``s ∈ [sL, sU]`` (its ends and critical points)."""

    def f(s):
        return np.abs(s * (1.0 - s) * (1.0 - 2.0 * s))

    best = np.maximum(f(sL), f(sU))
    for crit in ((3.0 - np.sqrt(3.0)) / 6.0, (3.0 + np.sqrt(3.0)) / 6.0):
        inside = (sL <= crit) & (crit <= sU)
        best = np.where(inside, np.maximum(best, f(crit)), best)
    return best * (1.0 + 8.0 * _U) + 8.0 * _U
