r"""Robust conformal prediction with one noisy forward pass per input (RCP1) and its baselines.

Conformity scores follow one convention everywhere: **higher = more conforming**; prediction sets keep
the labels whose score reaches the calibrated threshold.

| name | what it is |
|---|---|
| `RCP1Classifier` | robust sets: one noisy sample, adjusted level (the method) |
| `RCP1Regressor` | robust intervals for regression |
| `RCP1RiskControl` | robust conformal risk control for monotone losses |
| `SplitConformalClassifier` | vanilla split CP (clean, or noisy without correction) |
| `SplitConformalRegressor` | vanilla split CP for regression |
| `BinCPClassifier` | BinCP baseline (many samples, binarised scores) |
| `RSCPPlusClassifier` | RSCP+ baseline (many samples, smoothed scores) |
| `coverage`, `set_size` | metrics for sets; `interval_coverage`, `interval_width` |
| `evaluate_sets` | coverage, size and cost on clean and attacked inputs |
| `certkit.conformal.scores` | THR/LAC, APS, RAPS, user callables |
| `certkit.conformal.attacks` | `certkit.conformal.attacks.smoothed_pgd` (torch) |
"""

from certkit.conformal import attacks, scores
from certkit.conformal.baselines import BinCPClassifier, RSCPPlusClassifier
from certkit.conformal.metrics import (
    SetEvaluation,
    coverage,
    evaluate_sets,
    evaluation_table,
    interval_coverage,
    interval_width,
    set_size,
)
from certkit.conformal.rcp1 import RCP1Classifier, RCP1Regressor
from certkit.conformal.risk import RCP1RiskControl
from certkit.conformal.scores import APSScore, CallableScore, ConformityScore, RAPSScore, THRScore
from certkit.conformal.split import SplitConformalClassifier, SplitConformalRegressor

__all__ = [
    "APSScore",
    "BinCPClassifier",
    "CallableScore",
    "ConformityScore",
    "RAPSScore",
    "RCP1Classifier",
    "RCP1Regressor",
    "RCP1RiskControl",
    "RSCPPlusClassifier",
    "SetEvaluation",
    "SplitConformalClassifier",
    "SplitConformalRegressor",
    "THRScore",
    "attacks",
    "coverage",
    "evaluate_sets",
    "evaluation_table",
    "interval_coverage",
    "interval_width",
    "scores",
    "set_size",
]
