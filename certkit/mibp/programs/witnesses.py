"""Known feasible points of the step programs: trajectories of the observed data and of a few perturbed
datasets, for the runtime guard of `certkit.mibp.programs.solvers.solve_program`."""

from __future__ import annotations

import dataclasses

import numpy as np

from certkit.mibp.problem.mlp import MLP
from certkit.mibp.problem.perturbation import InputSets
from certkit.mibp.programs.solvers import UnsoundBoundError

__all__ = ["Witnesses"]

#: Perturbed datasets whose trajectories serve as known feasible points (besides the nominal one).
_N_ATTACKS = 4


class Witnesses:
    """Trajectories that every certified box must contain: the nominal data (when the perturbation allows
    them) and a few perturbed datasets (vertex and uniform draws, labels flipped within the budget).

    They give, for every step program, its objectives' values at known feasible points (the runtime guard
    of `solve_program`), and the step's box is checked against them.
    """

    def __init__(self, model: MLP, X, y, y_fit, sets: InputSets, loss: str, lr: float, epochs: int) -> None:
        gen = np.random.default_rng(0)
        self.loss, self.lr, self.y = loss, lr, y
        self.fit_labels = y_fit
        # the observed data are allowed unless an entry lies outside its set (a missing value's placeholder)
        data = [(X, y_fit)] if sets.budget is not None or _in_sets(X, sets) else []
        for i in range(_N_ATTACKS):
            Xp = sets.sample(gen, vertex=i % 2 == 0)
            yp = sets.sample_labels(y_fit, gen) if sets.label_flips else y_fit
            data.append((Xp, yp))
        self.paths = [model.train(Xp, yp, loss=loss, epochs=epochs, learning_rate=lr) for Xp, yp in data]
        # per-point inputs from the point's own set (no budget: a point's program allows any of them)
        free = dataclasses.replace(sets, budget=None)
        self.nominal = sets.nominal
        self.points = [free.sample(gen, vertex=i % 2 == 0) for i in range(_N_ATTACKS)]
        if _in_sets(sets.nominal, sets):
            self.points.append(sets.nominal)

    def joint(self, t: int) -> np.ndarray:
        """Values of the joint step objectives (the new parameters) at the attack points, ``(k, m)``."""
        return np.array([path[t + 1].to_vector() for path in self.paths])

    def decomposed(
        self,
        t: int,
        k: int,
        *,
        flip: bool = False,
        exact: bool = False,
        multipliers: np.ndarray | None = None,
    ) -> np.ndarray:
        """Values of sample ``k``'s objectives ``θ - λ g_k(θ, x)`` (plus ``multipliers[p] · θ`` for objective
        ``p`` when given) at known feasible (θ, x)."""
        label = self.fit_labels[k : k + 1]
        label = -label if flip else label
        xs = [self.nominal[k : k + 1]] if exact else [P[k : k + 1] for P in self.points]
        out = []
        for path in self.paths:
            theta = path[t]
            for x in xs:
                g = theta.gradients(x, label, loss=self.loss)
                v = theta.to_vector()
                out.append(v - self.lr * g.to_vector() + (0.0 if multipliers is None else multipliers @ v))
        return np.array(out)

    def check_step(self, t: int, lower: np.ndarray, upper: np.ndarray, backend: str) -> None:
        """The box after step ``t`` must contain every witness trajectory."""
        for path in self.paths:
            v = path[t + 1].to_vector()
            for p in np.flatnonzero(v < lower):
                raise UnsoundBoundError(None, int(p), 1, float(lower[p]), float(v[p]), backend)
            for p in np.flatnonzero(v > upper):
                raise UnsoundBoundError(None, int(p), -1, float(upper[p]), float(v[p]), backend)


def _in_sets(P: np.ndarray, sets: InputSets) -> bool:
    """Whether every entry of ``P`` lies in its set (the nominal may not: a missing value's placeholder)."""
    lo = sets.options + sets.offset_lo[:, :, None]
    hi = sets.options + sets.offset_hi[:, :, None]
    return bool(np.all(np.any((lo <= P[:, :, None]) & (P[:, :, None] <= hi), axis=2)))
