"""``select_epoch``: the epoch whose certified model does best on a validation split (early stopping)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from certkit._results import ResultMixin, format_table
from certkit._typing import ExecutorArg, Progress
from certkit._validation import check_array, check_progress
from certkit.mibp.certification.result import CertifiedTrainingResult
from certkit.mibp.problem.losses import check_labels

__all__ = ["EpochSelection", "select_epoch"]


@dataclass(frozen=True)
class EpochSelection(ResultMixin):
    """Validation scores of every certified epoch and the epoch they select.

    Attributes
    ----------
    epoch : int
        The selected epoch: the first of ``1 .. epochs`` with the highest validation certified accuracy.
        Pass it on as ``certify_predictions(result, X_test, epoch=selection.epoch)``.
    certified_accuracy : ndarray (epochs + 1,)
        Validation certified accuracy after each epoch (index 0: the initial model, not a candidate).
    nominal_accuracy : ndarray (epochs + 1,)
        Validation accuracy of the nominal model after each epoch.
    backend : str
        The backend that certified the validation predictions.
    n_validation : int
        Number of validation points.
    """

    epoch: int
    certified_accuracy: np.ndarray
    nominal_accuracy: np.ndarray
    backend: str
    n_validation: int

    def summary(self) -> str:
        rows = [
            [t, float(self.nominal_accuracy[t]), float(self.certified_accuracy[t]), "*" * (t == self.epoch)]
            for t in range(1, len(self.certified_accuracy))
        ]
        title = (
            f"MIBP epoch selection on {self.n_validation} validation points ({self.backend} certificates): "
            f"epoch {self.epoch}"
        )
        return format_table(
            ["epoch", "val. nominal acc", "val. certified acc", "selected"], rows, title=title
        )


def select_epoch(
    result: CertifiedTrainingResult,
    X_val: Any,
    y_val: Any,
    *,
    backend: str = "interval",
    time_limit: float | None = None,
    solver: str | None = None,
    executor: ExecutorArg = None,
    progress: Progress = False,
    verbose: bool = False,
) -> EpochSelection:
    """Certify the validation split after every epoch and select the epoch with the best certified accuracy.

    Early stopping as in the MIBP-Cert and FullCert protocols: every epoch's parameter box is a
    certified model, so choosing among them on data that neither training nor testing uses keeps the
    test estimate honest.  Only ``X_val`` / ``y_val`` are read; certify the test split afterwards with
    ``certify_predictions(result, X_test, epoch=selection.epoch)``.

    Parameters
    ----------
    result : CertifiedTrainingResult
        Output of `certified_training`.
    X_val : array (m, d)
        Validation inputs (never the test split).
    y_val : array (m,)
        Validation labels: -1 / +1 for one output, class indices ``0..C-1`` otherwise.
    backend : {"interval", "gurobi", "scip", "milp", "lp"}
        Backend of the validation certificates (as in `certify_predictions`).
    time_limit, solver, executor, progress, verbose
        As in `certify_predictions`.

    Returns
    -------
    EpochSelection
        The selected epoch (ties go to the earliest epoch, whose box is the smallest) and the validation
        scores of every epoch.

    Notes
    -----
    The candidates are epochs ``1 .. result.epochs``; epoch 0, the untrained initial model, is reported
    but never selected.
    """
    if not isinstance(result, CertifiedTrainingResult):
        raise TypeError(f"result must be a CertifiedTrainingResult, got {type(result).__name__}")
    n_outputs = result.nominal.sizes[-1]
    X_val = check_array(X_val, "X_val", ndim=2, shape=(None, result.nominal.sizes[0]))
    y_val = check_labels(
        y_val,
        "classes",
        n_outputs,
        len(X_val),
        name="y_val",
        x_name="X_val",
        zero_one=result.loss == "binary_cross_entropy",
    )
    progress = check_progress(progress)
    certified = result.certified_accuracy(
        X_val,
        y_val,
        backend=backend,
        time_limit=time_limit,
        solver=solver,
        executor=executor,
        progress=progress,
        verbose=verbose,
    )
    nominal = result.nominal_accuracy(X_val, y_val)
    epoch = 1 + int(np.argmax(certified[1:]))
    return EpochSelection(
        epoch=epoch,
        certified_accuracy=certified,
        nominal_accuracy=nominal,
        backend=backend,
        n_validation=len(y_val),
    )
