"""`CertifiedTrainingResult`: the per-epoch parameter boxes of `certified_training` and their checks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from certkit._results import ResultMixin, format_table
from certkit._validation import check_integer
from certkit.mibp.problem.mlp import MLP
from certkit.mibp.problem.recipe import Recipe
from certkit.mibp.programs.solvers import SolveStats

__all__ = ["CertifiedTrainingResult", "check_epoch"]


@dataclass(frozen=True)
class CertifiedTrainingResult(ResultMixin):
    """Per-epoch parameter bounds of certified training.

    Attributes
    ----------
    lower, upper : tuple of MLP
        ``lower[t]`` / ``upper[t]`` bound every parameter after ``t`` epochs for every
        dataset allowed by the perturbation model (``t = 0`` is the initial model).
    nominal : MLP
        The model trained on the observed data with the same schedule.
    nominal_path : tuple of MLP
        The nominal model after each epoch (``nominal_path[-1] is nominal``).
    epoch_seconds : ndarray
        Wall time of each certified epoch.
    solver_stats : tuple of SolveStats
        Per epoch (read as attributes or like a dict): ``solves``, ``not_optimal`` (solves that stopped
        early and used the dual bound), ``rejected`` (programs whose coefficients exceed `MAX_SCALE`,
        bounded by interval arithmetic instead), ``max_vars``, ``max_bilinear``, ``programs``.
    backend, formulation, loss : str
    learning_rate : float or tuple of float
        The constant rate, or every step's rate when they vary.
    carry : str
        How the parameter set is carried between steps (``"box"`` or ``"affine"``).
    recipe : Recipe or None
        The training recipe (`certkit.mibp.problem.recipe.Recipe`): every step's rate and batch (the batch
        order drawn once; the boxes hold for that order), momentum and weight decay.
    features : FrozenFeatures or None
        The frozen feature extractor in front of the network (``features=`` of `certified_training`):
        `certify_predictions` passes test inputs through it.
    """

    lower: tuple[MLP, ...]
    upper: tuple[MLP, ...]
    nominal: MLP
    nominal_path: tuple[MLP, ...]
    epoch_seconds: np.ndarray
    solver_stats: tuple[SolveStats, ...]
    backend: str
    formulation: str
    loss: str
    learning_rate: float | tuple[float, ...]
    carry: str = "box"
    recipe: Recipe | None = None
    features: Any = None

    @property
    def bounds(self) -> list[tuple[MLP, MLP]]:
        """``[(lower[t], upper[t]) for t in 0..epochs]``."""
        return list(zip(self.lower, self.upper))

    @property
    def epochs(self) -> int:
        return len(self.lower) - 1

    def widths(self) -> np.ndarray:
        """Largest parameter interval width after each epoch (index 0 = initial, i.e. 0)."""
        return np.array([np.max(u.to_vector() - lo.to_vector()) for lo, u in zip(self.lower, self.upper)])

    def mean_widths(self) -> np.ndarray:
        """Mean parameter interval width after each epoch."""
        return np.array([np.mean(u.to_vector() - lo.to_vector()) for lo, u in zip(self.lower, self.upper)])

    def contains(self, model: MLP, epoch: int = -1) -> bool:
        """Whether ``model``'s parameters lie in the box of ``epoch``."""
        epoch = check_epoch(epoch, self.epochs)
        if not isinstance(model, MLP):
            raise TypeError(f"model must be a certkit.mibp.MLP, got {type(model).__name__}")
        if model.sizes != self.nominal.sizes:
            raise ValueError(
                f"model has layer sizes {list(model.sizes)} but the certified boxes are for "
                f"{list(self.nominal.sizes)}"
            )
        v = model.to_vector()
        return bool(np.all(self.lower[epoch].to_vector() <= v) and np.all(v <= self.upper[epoch].to_vector()))

    def summary(self) -> str:
        rows = []
        maxw, meanw = self.widths(), self.mean_widths()
        for t in range(1, self.epochs + 1):
            st = self.solver_stats[t - 1]
            rows.append(
                [
                    t,
                    float(maxw[t]),
                    float(meanw[t]),
                    float(self.epoch_seconds[t - 1]),
                    st["solves"],
                    st["not_optimal"],
                    st["max_vars"],
                ]
            )
        recipe = self.recipe.describe() if self.recipe is not None else f"loss={self.loss}"
        head = f"model {list(self.nominal.sizes)}"
        if self.features is not None:
            head = f"frozen features {self.features.input_shape} -> head {list(self.nominal.sizes)}"
        title = (
            f"MIBP certified training: backend={self.backend}, formulation={self.formulation}, "
            f"{recipe}, carry={self.carry}, {head}"
        )
        return format_table(
            ["epoch", "max width", "mean width", "seconds", "solves", "not optimal", "max vars"],
            rows,
            title=title,
        )


def check_epoch(epoch: Any, epochs: int) -> int:
    """An epoch index of a result with ``epochs`` certified epochs: ``0..epochs`` or negative from the end."""
    epoch = check_integer(epoch, "epoch")
    if not -(epochs + 1) <= epoch <= epochs:
        raise ValueError(
            f"epoch must be in 0..{epochs} (or -{epochs + 1}..-1 from the end) for a result of {epochs} "
            f"certified epochs, got {epoch}"
        )
    return epoch
