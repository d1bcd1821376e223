"""MIBP certified training: provable parameter bounds for gradient descent under training-data perturbations.

Following Lorenz, Kwiatkowska & Fritz (NeurIPS 2025, "MIBP-Cert"), every step of
full-batch gradient descent on a ReLU network is written as a mixed-integer
bilinear program over the current parameter box and all allowed perturbed
datasets; minimising and maximising each new parameter gives a box that holds
every reachable trajectory.  Exact backends (Gurobi, SCIP), McCormick
relaxations (MILP / LP through cvxpy) and an interval-arithmetic baseline share
one program representation.

Examples
--------
>>> import numpy as np
>>> from certkit.mibp import MLP, FeatureBox, certified_training, certify_predictions
>>> rng = np.random.default_rng(0)
>>> X = rng.normal(size=(20, 2)); y = np.where(X[:, 0] > 0, 1, -1)
>>> res = certified_training(MLP.random([2, 4, 1], rng=0), X, y, perturbation=FeatureBox(0.01),
...                          loss="hinge", epochs=3)
>>> cert = certify_predictions(res, X)
"""

from certkit.mibp.certification.certify import (
    PredictionCertificate,
    RegressionCertificate,
    certify_predictions,
    certify_regression,
)
from certkit.mibp.certification.selection import EpochSelection, select_epoch
from certkit.mibp.enclosures.sgd_step import BoundsOverflowError
from certkit.mibp.privacy import (
    MECHANISMS,
    BudgetExhaustedError,
    EnsembleProfile,
    PrivatePredictor,
    StabilityProfile,
    ensemble_profile,
    private_predict,
    release_probabilities,
    row_parts,
    stability_profile,
)
from certkit.mibp.problem.mlp import MLP
from certkit.mibp.problem.perturbation import (
    Budget,
    Compose,
    FeatureBox,
    InputSets,
    LabelFlips,
    MissingValues,
    Neighbours,
    OrdinalShift,
    Perturbation,
    Removals,
    TargetBox,
)
from certkit.mibp.problem.recipe import InverseDecay, Recipe
from certkit.mibp.programs.solvers import MAX_SCALE, GurobiLicenseError, SolveStats, UnsoundBoundError
from certkit.mibp.training import (
    BACKENDS,
    CARRIES,
    FORMULATIONS,
    CertifiedTrainingResult,
    certified_training,
)

__all__ = [
    "BACKENDS",
    "CARRIES",
    "FORMULATIONS",
    "MAX_SCALE",
    "MECHANISMS",
    "MLP",
    "BoundsOverflowError",
    "Budget",
    "BudgetExhaustedError",
    "CertifiedTrainingResult",
    "Compose",
    "EnsembleProfile",
    "EpochSelection",
    "FeatureBox",
    "GurobiLicenseError",
    "InputSets",
    "InverseDecay",
    "LabelFlips",
    "MissingValues",
    "Neighbours",
    "OrdinalShift",
    "Perturbation",
    "PredictionCertificate",
    "PrivatePredictor",
    "Recipe",
    "RegressionCertificate",
    "Removals",
    "SolveStats",
    "StabilityProfile",
    "TargetBox",
    "UnsoundBoundError",
    "certified_training",
    "certify_predictions",
    "certify_regression",
    "ensemble_profile",
    "private_predict",
    "release_probabilities",
    "row_parts",
    "select_epoch",
    "stability_profile",
]
