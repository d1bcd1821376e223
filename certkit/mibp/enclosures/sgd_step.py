"""One certified SGD step by interval arithmetic: the budgeted batch sum of per-row gradient bounds and
the update of `certkit.mibp.problem.recipe.Recipe` (momentum, weight decay) on parameter and velocity
boxes."""

from __future__ import annotations

import numpy as np

from certkit.mibp.enclosures.clipping import clip_bounds
from certkit.mibp.enclosures.interval import interval_gradients, magnitude, pad
from certkit.parallel import rows_per_chunk

__all__ = [
    "BoundsOverflowError",
    "BudgetSum",
    "RemovalMean",
    "batch_gradient_sum",
    "batch_mean_after_removals",
    "interval_step",
    "interval_update",
    "sum_with_budget",
]


class BudgetSum:
    """Bounds on ``Σ_k t_k`` over a batch of ``n`` rows, fed in row chunks, when ``t_k ∈ [PL_k, PU_k]`` for
    deviating rows and ``[NL_k, NU_k]`` otherwise.

    With ``budget=None`` every row deviates (takes a value in its perturbation set).  Otherwise at most
    ``budget`` rows deviate and the others keep their nominal value: the bound is the all-nominal sum plus
    the ``budget`` largest (smallest) gains ``max(PU - NU, 0)`` (``min(PL - NL, 0)``) of each entry (with
    ``budget >= n`` every gain).  Only running sums and each entry's ``budget`` extreme gains are kept
    between chunks, so the memory is ``O((chunk + budget) m)`` whatever ``n``.  The chunks may come in any
    sizes: the sums are the same ``n`` terms in another order and the kept gains the same values, so the
    bounds differ only by rounding, which the padding of `bounds` covers for any order (a sum of ``n`` terms;
    every entry counted once more for its own rounding, the unpadded products of `interval_gradients`).

    Parameters
    ----------
    m : int
        Entries of each ``t_k`` (columns of the chunks).
    n : int
        Rows of the whole batch.
    budget : int or None
        How many rows may deviate.
    """

    def __init__(self, m: int, n: int, budget: int | None) -> None:
        self.n = n
        self.budget = None if budget is None else min(budget, n)
        self.lo, self.hi, self.mag = np.zeros(m), np.zeros(m), np.zeros(m)
        self.rows = 0
        # the kept gains: the `budget` smallest min(PL - NL, 0) and largest max(PU - NU, 0) of each entry
        self.low, self.high = np.zeros((0, m)), np.zeros((0, m))

    def add(self, PL, PU, NL=None, NU=None) -> None:
        """Add a chunk of rows: ``(c, m)`` bounds on the deviating values ``[PL, PU]`` and (with a budget) the
        nominal ones ``[NL, NU]``."""
        self.rows += len(PL)
        if self.rows > self.n:
            raise RuntimeError("internal error: more rows added to a BudgetSum than its batch has")
        self.mag += magnitude(PL, PU).sum(axis=0)
        if self.budget is None:
            self.lo += PL.sum(axis=0)
            self.hi += PU.sum(axis=0)
            return
        self.mag += magnitude(NL, NU).sum(axis=0)
        self.lo += NL.sum(axis=0)
        self.hi += NU.sum(axis=0)
        if self.budget == 0:
            return
        dlo, dhi = np.minimum(PL - NL, 0.0), np.maximum(PU - NU, 0.0)
        if self.budget == self.n:
            self.lo += dlo.sum(axis=0)
            self.hi += dhi.sum(axis=0)
            return
        self.low = _merge_smallest(self.low, dlo, self.budget)
        self.high = -_merge_smallest(-self.high, -dhi, self.budget)

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Padded ``(lo, hi)`` bounds on the sum over the whole batch (every row added)."""
        if self.rows != self.n:
            raise RuntimeError("internal error: a BudgetSum bounded before all its rows were added")
        lo, hi = self.lo + self.low.sum(axis=0), self.hi + self.high.sum(axis=0)
        terms = self.n + 2 if self.budget is None else 3 * self.n + 4
        return pad(lo, hi, self.mag, terms)


def _merge_smallest(kept: np.ndarray, values: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` smallest of each column of ``kept`` (the ``k`` smallest so far, or all if fewer) and
    ``values``.  Once ``k`` are kept, only the values below a column's ``k``-th smallest can enter: those few
    are gathered (per column, the rest filled with ``inf``) before the partition."""
    if len(kept) == k:
        enter = values < kept.max(axis=0)
        counts = enter.sum(axis=0)
        width = int(counts.max())
        if width == 0:
            return kept
        if width < len(values):
            cols, rows = np.nonzero(enter.T)  # by column
            slot = np.arange(len(cols)) - np.repeat(np.cumsum(counts) - counts, counts)
            gathered = np.full((width, values.shape[1]), np.inf)
            gathered[slot, cols] = values[rows, cols]
            values = gathered
    merged = np.concatenate([kept, values])
    if len(merged) <= k:
        return merged
    return np.partition(merged, k - 1, axis=0)[:k]


class RemovalMean:
    """Bounds on the mean gradient of a batch of ``n`` rows, fed in row chunks, when up to ``k`` of its rows
    may be removed (unlearning: the mean over the ``n - r`` rows kept, ``r <= k``).

    Each entry's mean over the kept rows is largest when the rows removed are those with the ``k``
    smallest values and exactly ``k`` are removed (the mean of the ``m`` largest values of a list does not
    grow with ``m``), so the upper end is ``(Σ gU - (the k smallest gU)) / (n - k)`` and the lower end
    ``(Σ gL - (the k largest gL)) / (n - k)``; the batch's full mean (``r = 0``) lies between them.  Between
    chunks only the sums and each entry's ``k`` extreme values are kept.  Padded for the sums (any order),
    the one rounding of every entry (`interval_gradients`) and the division.
    """

    def __init__(self, m: int, n: int, k: int) -> None:
        if k >= n:
            raise ValueError(
                f"Removals({k}) may remove every row of a batch of {n} rows; certify fewer removals than the "
                "smallest batch has rows (or use larger batches)"
            )
        self.n, self.k = n, k
        self.lo, self.hi, self.mag = np.zeros(m), np.zeros(m), np.zeros(m)
        self.rows = 0
        self.low_top, self.high_bottom = np.zeros((0, m)), np.zeros((0, m))  # k largest gL, k smallest gU

    def add(self, GL, GU) -> None:
        """Add a chunk of rows' gradient bounds ``(c, m)``."""
        self.rows += len(GL)
        if self.rows > self.n:
            raise RuntimeError("internal error: more rows added to a RemovalMean than its batch has")
        self.mag += magnitude(GL, GU).sum(axis=0)
        self.lo += GL.sum(axis=0)
        self.hi += GU.sum(axis=0)
        if self.k:
            self.low_top = -_merge_smallest(-self.low_top, -GL, self.k)
            self.high_bottom = _merge_smallest(self.high_bottom, GU, self.k)

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Padded ``(lo, hi)`` bounds on the batch's mean gradient after any ``r <= k`` removals."""
        if self.rows != self.n:
            raise RuntimeError("internal error: a RemovalMean bounded before all its rows were added")
        # n + k terms of total magnitude at most 2 mag, and one rounding of every entry: 4n + 4 terms of mag
        lo, hi = pad(
            self.lo - self.low_top.sum(axis=0),
            self.hi - self.high_bottom.sum(axis=0),
            self.mag,
            4 * self.n + 4,
        )
        kept = self.n - self.k
        return pad(lo / kept, hi / kept, magnitude(lo, hi) / kept, 1)


def sum_with_budget(PL, PU, NL, NU, budget):
    """`BudgetSum` of one chunk holding the whole batch: bounds (m,) on ``Σ_k t_k`` from (n, m) arrays."""
    acc = BudgetSum(PL.shape[1], len(PL), budget)
    acc.add(PL, PU, NL, NU)
    return acc.bounds()


#: Bytes per row and parameter that the per-row gradient bounds of one chunk need at their peak (the
#: interval products, their concatenation, the deviating and nominal bounds and the gains), measured.
BYTES_PER_ROW_PARAMETER = 160


def batch_gradient_sum(lower, upper, sets, y, recipe, rows=None, chunk_size=None):
    """Bounds (vectors) on ``Σ_{k ∈ rows} g_k`` over the parameter box and every allowed dataset.

    Points that deviate (all of them without a budget) take inputs in their sets, any allowed label when
    labels may change, and targets within ``target_radius`` under `TargetBox`; with ``Budget`` at most
    ``budget`` points of the batch deviate and the others are exact; with ``LabelFlips(k)`` (no budget)
    every input is perturbed and at most ``k`` labels change.  Each row's gradient is clipped as ``recipe``
    says (`certkit.mibp.enclosures.clipping`).  The rows are bounded in chunks of ``chunk_size`` rows
    (`certkit.parallel.rows_per_chunk`; `BudgetSum` keeps what the bound needs between chunks).
    """
    loss = recipe.loss
    rows = np.arange(len(y)) if rows is None else rows
    lo_all, hi_all = sets.lower, sets.upper
    # with LabelFlips a deviating row is one whose label changed (inputs are perturbed either way)
    count = sets.label_flips if sets.label_flips is not None else sets.budget
    acc = BudgetSum(lower.n_params, len(rows), count)
    step = rows_per_chunk(BYTES_PER_ROW_PARAMETER * lower.n_params, chunk_size)
    for start in range(0, len(rows), step):
        at = rows[start : start + step]
        yb, lo, hi = y[at], lo_all[at], hi_all[at]
        if sets.label_flips is not None:
            NL, NU = interval_gradients(lower, upper, lo, hi, yb, loss)
            PL, PU = interval_gradients(lower, upper, lo, hi, yb, loss, "other", target=sets.flip_target)
        else:
            radius = None if sets.target_radius is None else sets.target_radius[at]
            labels = "any" if sets.flip_labels or radius is not None else "own"
            PL, PU = interval_gradients(
                lower, upper, lo, hi, yb, loss, labels, target=sets.flip_target, radius=radius
            )
            NL, NU = PL, PU
            if count is not None:
                exact = sets.nominal[at]
                NL, NU = interval_gradients(lower, upper, exact, exact, yb, loss)
        if recipe.clips:
            PL, PU = clip_bounds(PL, PU, recipe)
            NL, NU = (PL, PU) if count is None else clip_bounds(NL, NU, recipe)
        acc.add(PL, PU, NL, NU)
    return acc.bounds()


def interval_update(theta, velocity, grad, recipe, step):
    """Bounds on one SGD update of `certkit.mibp.problem.recipe.Recipe` from boxes: ``theta = (lo, hi)``,
    ``velocity`` (None before the first step or without momentum) and the mean gradient ``grad``; returns
    padded ``(theta, velocity)`` boxes.  The new parameters are ``(1 - λω) θ - λλ₁ sign(θ) - λ (μ v + g)``,
    the part in ``θ`` bounded jointly (`_decay_range`), each other variable once."""
    (tL, tU), (gL, gU) = theta, grad
    lr, wd, mu, l1 = float(recipe.rates[step]), recipe.weight_decay, recipe.momentum, recipe.l1_penalty
    mag_t = magnitude(tL, tU)
    sign_lo = np.where(tL > 0, 1.0, np.where(tL == 0, 0.0, -1.0))  # sign over [tL, tU]
    sign_hi = np.where(tU < 0, -1.0, np.where(tU == 0, 0.0, 1.0))
    vL, vU = gL + wd * tL + l1 * sign_lo, gU + wd * tU + l1 * sign_hi  # d = g + ω θ + λ₁ sign(θ)
    mag_v = magnitude(gL, gU) + wd * mag_t + l1
    sL, sU = gL, gU  # what is subtracted besides the decay and the penalty: μ v + g
    if velocity is not None and mu:
        pL, pU = velocity
        vL, vU = mu * pL + vL, mu * pU + vU
        mag_v = mag_v + mu * magnitude(pL, pU)
        sL, sU = mu * pL + gL, mu * pU + gU
    hL, hU = _decay_range(tL, tU, 1.0 - lr * wd, lr * l1)
    new_theta = pad(hL - lr * sU, hU - lr * sL, mag_t * (1.0 + lr * wd) + lr * mag_v, 10)
    new_velocity = pad(vL, vU, mag_v, 6) if mu else None
    return new_theta, new_velocity


def _decay_range(tL, tU, a, s):
    """Range of ``a θ - s sign(θ)`` (``sign(0) = 0``) over ``θ ∈ [tL, tU]``: the ends of its pieces on
    ``θ < 0`` (``a θ + s``), ``θ = 0`` (0) and ``θ > 0`` (``a θ - s``), limits at 0 included."""
    if s == 0.0:
        return np.minimum(a * tL, a * tU), np.maximum(a * tL, a * tU)
    neg, pos, zero = tL < 0, tU > 0, (tL <= 0) & (tU >= 0)
    ends = [
        (neg, a * tL + s),
        (neg, a * np.minimum(tU, 0.0) + s),
        (zero, np.zeros_like(tL)),
        (pos, a * np.maximum(tL, 0.0) - s),
        (pos, a * tU - s),
    ]
    lo = np.min([np.where(on, v, np.inf) for on, v in ends], axis=0)
    hi = np.max([np.where(on, v, -np.inf) for on, v in ends], axis=0)
    return lo, hi


def batch_mean_after_removals(lower, upper, sets, y, recipe, rows, chunk_size=None):
    """Bounds on the mean gradient of the batch ``rows`` over the parameter box when up to
    ``sets.removals`` of its rows may be removed (`RemovalMean`; rows clipped as ``recipe`` says)."""
    acc = RemovalMean(lower.n_params, len(rows), sets.removals)
    step = rows_per_chunk(BYTES_PER_ROW_PARAMETER * lower.n_params, chunk_size)
    for start in range(0, len(rows), step):
        at = rows[start : start + step]
        GL, GU = interval_gradients(lower, upper, sets.nominal[at], sets.nominal[at], y[at], recipe.loss)
        if recipe.clips:
            GL, GU = clip_bounds(GL, GU, recipe)
        acc.add(GL, GU)
    return acc.bounds()


def interval_step(lower, upper, sets, y, recipe, step, velocity=None, chunk_size=None):
    """One certified SGD step of ``recipe`` by interval arithmetic from the parameter box ``[lower, upper]``
    (MLPs) and the velocity box ``velocity`` ((lo, hi) vectors or None); returns ``((lo, hi), velocity)``.
    Bounds that leave the float64 range raise `BoundsOverflowError`."""
    if sets.neighbours is not None:  # rows added and removed: an arithmetic of its own (isotone)
        from certkit.mibp.enclosures.neighbours import neighbour_step

        return neighbour_step(lower, upper, sets, y, recipe, step, velocity, chunk_size)
    rows = recipe.batches[step]
    with np.errstate(over="ignore", invalid="ignore"):
        if sets.removals is not None:
            grad = batch_mean_after_removals(lower, upper, sets, y, recipe, rows, chunk_size)
        else:
            GL, GU = batch_gradient_sum(lower, upper, sets, y, recipe, rows, chunk_size)
            b = len(rows)
            grad = pad(GL / b, GU / b, magnitude(GL, GU) / b, 1)
        (tL, tU), velocity = interval_update(
            (lower.to_vector(), upper.to_vector()), velocity, grad, recipe, step
        )
    if not (np.all(np.isfinite(tL)) and np.all(np.isfinite(tU))):
        raise BoundsOverflowError(
            "the parameter bounds overflowed (interval bounds are no longer finite); certify fewer epochs "
            "or use a smaller epsilon or learning_rate"
        )
    return (tL, tU), velocity


class BoundsOverflowError(FloatingPointError, ValueError):
    """The interval parameter bounds left the float64 range (a `FloatingPointError` and, as a consequence of
    the arguments' sizes, a `ValueError`).

    Raised by `certified_training` with the epochs that stayed finite: ``result`` (a
    `CertifiedTrainingResult` of epochs ``0 .. epoch - 1``) and ``epoch``, the epoch that overflowed (None
    where raised by one step alone)."""

    def __init__(self, message: str, *, result=None, epoch: int | None = None) -> None:
        super().__init__(message)
        self.result = result
        self.epoch = epoch
