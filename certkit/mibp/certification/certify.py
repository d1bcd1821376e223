"""``certify_predictions``: predictions that every parameter vector in the final box agrees on."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from certkit._results import ResultMixin, format_table
from certkit._typing import ExecutorArg, Progress
from certkit._validation import check_array
from certkit.mibp.certification.margins import check_margin_options, margin_lower_bounds
from certkit.mibp.certification.result import CertifiedTrainingResult, check_epoch
from certkit.mibp.enclosures.interval import interval_forward
from certkit.mibp.problem.losses import check_labels

__all__ = ["PredictionCertificate", "RegressionCertificate", "certify_predictions", "certify_regression"]


@dataclass(frozen=True)
class PredictionCertificate(ResultMixin):
    """Certified test predictions.

    Attributes
    ----------
    prediction : ndarray (m,)
        The nominal model's prediction ({-1, +1} for one output, else the class index).
    certified : ndarray of bool (m,)
        True where every parameter vector in the final box predicts ``prediction``.
    margin_lower : ndarray (m,)
        A lower bound, over the box, of the prediction margin (``pred * f`` for one output,
        ``min_{c'} f_pred - f_c'`` otherwise); certified iff > 0.
    backend : str
    n_outputs : int
        Outputs of the network: labels are in {-1, +1} for one output, ``0 .. n_outputs - 1`` otherwise.
    zero_one_labels : bool
        One output trained with binary cross-entropy: `certified_accuracy` also takes {0, 1} labels.
    """

    prediction: np.ndarray
    certified: np.ndarray
    margin_lower: np.ndarray
    backend: str
    n_outputs: int
    zero_one_labels: bool = False

    def certified_accuracy(self, y: Any) -> float:
        """Fraction of points that are certified *and* correctly predicted.

        ``y`` holds the classes the model predicts: {-1, +1} for one output (also {0, 1} or bool after
        binary cross-entropy, as it was trained with), integers ``0 .. n_outputs - 1`` otherwise (other
        labels raise, as in `certified_training`).
        """
        y = check_array(y, "y", ndim=1, dtype=None)
        if len(y) != len(self.prediction):
            raise ValueError(f"y has {len(y)} labels but {len(self.prediction)} points were certified")
        y = check_labels(y, "classes", self.n_outputs, len(self.prediction), zero_one=self.zero_one_labels)
        return float(np.mean(self.certified & (self.prediction == y)))

    def summary(self) -> str:
        rows = [
            ["points", len(self.prediction)],
            ["certified", int(self.certified.sum())],
            ["certified fraction", float(np.mean(self.certified))],
        ]
        return format_table(
            ["quantity", "value"], rows, title=f"MIBP prediction certificate ({self.backend})"
        )


def certify_predictions(
    result: CertifiedTrainingResult,
    X_test: Any,
    *,
    backend: str = "interval",
    epoch: int = -1,
    time_limit: float | None = None,
    solver: str | None = None,
    executor: ExecutorArg = None,
    progress: Progress = False,
    verbose: bool = False,
) -> PredictionCertificate:
    """Certify test predictions against every parameter vector in the box of ``epoch``.

    Binary (one output): certified if ``min f_θ(x) > 0`` (prediction +1) or ``max f_θ(x) < 0``
    (prediction -1) over the box.  Multi-class: the nominal class ``c`` is certified if
    ``min_θ f_c - f_c' > 0`` for every ``c' != c``.  Interval bounds are tried first; points they
    leave undecided are solved with ``backend`` (exact for ``gurobi`` / ``scip``).

    Parameters
    ----------
    result : CertifiedTrainingResult
        Output of `certified_training`.
    X_test : array (m, d)
        Test inputs (unperturbed); raw inputs of the extractor's input shape when the run had
        ``features=``.
    backend : {"interval", "gurobi", "scip", "milp", "lp"}
    epoch : int
        Which epoch's box (default: the last).  Every epoch's certified accuracy at once:
        `CertifiedTrainingResult.certified_accuracy`.
    time_limit, solver, executor, progress, verbose
        As in `certified_training` (a solver bound that a parameter vector of the box beats raises
        `UnsoundBoundError`).
    """
    if not isinstance(result, CertifiedTrainingResult):
        raise TypeError(f"result must be a CertifiedTrainingResult, got {type(result).__name__}")
    epoch = check_epoch(epoch, result.epochs)
    lower, upper = result.lower[epoch], result.upper[epoch]
    nominal = result.nominal_path[epoch]
    X_test = result.inputs(X_test, "X_test")
    backend, time_limit, progress = check_margin_options(
        backend, time_limit, solver, executor, progress, verbose
    )
    pred = nominal.predict(X_test)
    margin = margin_lower_bounds(
        lower,
        upper,
        X_test,
        pred,
        influence=None if epoch in (0, -(result.epochs + 1)) else result.influence,
        epoch=epoch % (result.epochs + 1),
        backend=backend,
        time_limit=time_limit,
        solver=solver,
        executor=executor,
        progress=progress,
        verbose=verbose,
    )
    n_out = lower.sizes[-1]
    return PredictionCertificate(
        prediction=pred,
        certified=margin > 0,
        margin_lower=margin,
        backend=backend,
        n_outputs=n_out,
        zero_one_labels=result.loss == "binary_cross_entropy",
    )


@dataclass(frozen=True)
class RegressionCertificate(ResultMixin):
    """Bounds on a regression network's test outputs over every parameter vector in a box.

    Attributes
    ----------
    prediction : ndarray (m, C)
        The nominal model's outputs.
    lower, upper : ndarray (m, C)
        Bounds on the outputs over the box (padded for the rounding of the float forward pass).
    """

    prediction: np.ndarray
    lower: np.ndarray
    upper: np.ndarray

    def squared_error_bound(self, y: Any) -> np.ndarray:
        """An upper bound (m,) on each point's squared error ``Σ_c (f_c(x) - y_c)²`` over the box."""
        y = check_array(y, "y", ndim=(1, 2))
        y = y.reshape(len(y), -1)
        if y.shape != self.prediction.shape:
            raise ValueError(f"y must have shape {self.prediction.shape[:1]} or {self.prediction.shape}")
        worst = np.maximum(np.abs(self.lower - y), np.abs(self.upper - y))
        # the rounding of the differences, squares and sum, upward
        return (worst * worst).sum(axis=1) * (1.0 + (y.shape[1] + 6) * 2.0**-52)

    def mse_bound(self, y: Any) -> float:
        """An upper bound on the test mean squared error ``(1/m) Σ_k Σ_c (f_c(x_k) - y_kc)²`` of every
        parameter vector in the box (AGT's worst-case test MSE)."""
        errors = self.squared_error_bound(y)
        return float(errors.sum() * (1.0 + (len(errors) + 2) * 2.0**-52) / len(errors))

    def summary(self) -> str:
        width = self.upper - self.lower
        rows = [
            ["points", len(self.prediction)],
            ["outputs", self.prediction.shape[1]],
            ["mean output width", float(np.mean(width))],
            ["largest output width", float(np.max(width))],
        ]
        return format_table(["quantity", "value"], rows, title="MIBP regression certificate (interval)")


def certify_regression(
    result: CertifiedTrainingResult, X_test: Any, *, epoch: int = -1
) -> RegressionCertificate:
    """Bound a regression network's outputs at ``X_test`` over every parameter vector in the box of ``epoch``
    (interval bound propagation, padded), for runs trained with ``loss="mse"``; `RegressionCertificate`
    turns them into a certified bound on the test error.

    Parameters
    ----------
    result : CertifiedTrainingResult
        Output of `certified_training`.
    X_test : array (m, d)
        Test inputs (unperturbed).
    epoch : int
        Which epoch's box (default: the last).
    """
    if not isinstance(result, CertifiedTrainingResult):
        raise TypeError(f"result must be a CertifiedTrainingResult, got {type(result).__name__}")
    epoch = check_epoch(epoch, result.epochs)
    lower, upper = result.lower[epoch], result.upper[epoch]
    X_test = result.inputs(X_test, "X_test")
    _, pre = interval_forward(lower, upper, X_test, X_test)
    lo, hi = pre[-1]
    return RegressionCertificate(prediction=result.nominal_path[epoch].forward(X_test), lower=lo, upper=hi)
