"""`CertifiedTrainingResult`: the per-epoch parameter boxes of `certified_training` and their checks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from certkit._results import ResultMixin, format_table
from certkit._typing import ExecutorArg, Progress
from certkit._validation import check_array, check_integer
from certkit.mibp.certification.margins import check_margin_options, margin_lower_bounds
from certkit.mibp.problem.losses import check_labels
from certkit.mibp.problem.mlp import MLP
from certkit.mibp.problem.recipe import Recipe
from certkit.mibp.programs.solvers import SolveStats
from certkit.parallel import resolve_executor

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
        How the parameter set is carried between steps (``"box"``, ``"affine"``, ``"shared"`` or
        ``"influence"``).
    recipe : Recipe or None
        The training recipe (`certkit.mibp.problem.recipe.Recipe`): every step's rate and batch (the batch
        order drawn once; the boxes hold for that order), momentum and weight decay.
    features : FrozenFeatures or None
        The frozen feature extractor in front of the network (``features=`` of `certified_training`):
        `certify_predictions` passes test inputs through it.
    influence : InfluenceEnclosure or None
        The influence enclosure of the run (``carry="influence"``, or ``"auto"`` where it bounds the run):
        `certify_predictions` bounds every query's margin by it (the worst changed rows for that query, to
        first order exactly) as well as by the box.
    auto_carry : bool
        ``carry`` was chosen by ``carry="auto"``.
    certification_lost : int or None
        The first epoch from which the boxes say nothing on the training rows (certify no row's
        prediction; for ``loss="mse"``, bound the outputs far wider than the targets' range), or None when
        the last epoch's box still does (`certified_training` then warned, naming what drives the growth).
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
    certification_lost: int | None = None
    influence: Any = None
    auto_carry: bool = False

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
        """Whether ``model``'s parameters lie in the box of ``epoch``.

        What it does not prove: the boxes bound *this* run only: the recipe in ``recipe`` (loss, rates,
        momentum, weight decay and this batch order, drawn here or given with ``batches=``) from the
        initial model ``lower[0]``, on every dataset the perturbation allows.  ``True`` says that every
        parameter is within the bounds, not that ``model`` came from such a run (other runs can land in
        the box).  ``False`` is evidence against ``model`` only if it was trained by exactly this recipe
        and batch order from the same initial model: a model trained with another order or recipe (another
        shuffle, batch size, loss, number of epochs, float32, ...) may lie outside the box on clean data.
        """
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
            f"{recipe}, carry={self.carry}{' (chosen by carry=auto)' if self.auto_carry else ''}, {head}"
        )
        table = format_table(
            ["epoch", "max width", "mean width", "seconds", "solves", "not optimal", "max vars"],
            rows,
            title=title,
        )
        lost = ""
        if self.certification_lost is not None:
            lost = (
                f"\nCertification lost at epoch {self.certification_lost}: from there on the boxes say "
                "nothing on the training rows (see the warning of certified_training)."
            )
        return (
            f"{table}{lost}\nThe boxes hold for this recipe and batch order from this initial model: "
            "contains(model) does not prove that a model\ncame from this run, and says nothing about one "
            "trained with another batch order or recipe."
        )

    def certified_accuracy(
        self,
        X: Any,
        y: Any,
        *,
        backend: str = "interval",
        time_limit: float | None = None,
        solver: str | None = None,
        executor: ExecutorArg = None,
        progress: Progress = False,
        verbose: bool = False,
    ) -> np.ndarray:
        """Certified accuracy on ``(X, y)`` after every epoch, without a loop.

        ``out[t]`` is ``certify_predictions(self, X, epoch=t, ...).certified_accuracy(y)``: the share of
        points whose prediction is correct and the same for every parameter vector in the box of epoch
        ``t`` (``t = 0`` is the initial model), as a staged score of scikit-learn's boosting models or
        AGT's per-epoch evaluation gives it.  Use a validation split to choose an epoch (`select_epoch`),
        the test split to report one.

        Parameters
        ----------
        X : array (m, d)
            Inputs (unperturbed; raw inputs of the extractor when the run had ``features=``).
        y : array (m,)
            The classes `MLP.predict` returns: -1 / +1 for one output (also 0 / 1 after binary
            cross-entropy), ``0..C-1`` otherwise.
        backend, time_limit, solver, executor, progress, verbose
            As in `certify_predictions` (one worker pool for every epoch).

        Returns
        -------
        ndarray (epochs + 1,)
        """
        inputs, y = self._scored(X, y)
        backend, time_limit, progress = check_margin_options(
            backend, time_limit, solver, executor, progress, verbose
        )
        out = np.empty(self.epochs + 1)
        # one pool for every epoch (an int executor), none for interval arithmetic
        with resolve_executor(executor if backend != "interval" else None, n_items=len(inputs)) as pool:
            for t in range(self.epochs + 1):
                pred = self.nominal_path[t].predict(inputs)
                margin = margin_lower_bounds(
                    self.lower[t],
                    self.upper[t],
                    inputs,
                    pred,
                    influence=None if t == 0 else self.influence,
                    epoch=t,
                    backend=backend,
                    time_limit=time_limit,
                    solver=solver,
                    executor=pool,
                    progress=progress,
                    verbose=verbose,
                )
                out[t] = float(np.mean((margin > 0) & (pred == y)))
        return out

    def nominal_accuracy(self, X: Any, y: Any) -> np.ndarray:
        """Accuracy of the nominal model on ``(X, y)`` after every epoch (``out[t]`` for
        ``nominal_path[t]``; labels as in `certified_accuracy`)."""
        X, y = self._scored(X, y)
        return np.array([float(np.mean(model.predict(X) == y)) for model in self.nominal_path])

    def inputs(self, X: Any, name: str = "X") -> np.ndarray:
        """``X`` as the network's inputs ``(n, d)``: passed through the frozen extractor where the run had
        one (``X`` then holds raw inputs of its input shape), else checked as it is."""
        if self.features is None:
            return check_array(X, name, ndim=2, shape=(None, self.nominal.sizes[0]))
        raw = check_array(X, name, shape=(None, *self.features.input_shape))
        return self.features.features(raw.reshape(len(raw), -1))

    def _scored(self, X: Any, y: Any) -> tuple[np.ndarray, np.ndarray]:
        """Inputs and labels to score, checked; labels as `MLP.predict` returns them."""
        X = self.inputs(X)
        y = check_labels(
            y, "classes", self.nominal.sizes[-1], len(X), zero_one=self.loss == "binary_cross_entropy"
        )
        return X, y


def check_epoch(epoch: Any, epochs: int) -> int:
    """An epoch index of a result with ``epochs`` certified epochs: ``0..epochs`` or negative from the end."""
    epoch = check_integer(epoch, "epoch")
    if not -(epochs + 1) <= epoch <= epochs:
        raise ValueError(
            f"epoch must be in 0..{epochs} (or -{epochs + 1}..-1 from the end) for a result of {epochs} "
            f"certified epochs, got {epoch}"
        )
    return epoch
