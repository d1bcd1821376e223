"""Differentially private prediction from certified parameter bounds (Wicker, Sosnin et al., ICML 2025):
train once, certify for every query how many training rows may be added or removed before its prediction can
change, and release it with noise calibrated to that (see ``docs/mibp.md``, "Private prediction")."""

from certkit.mibp.privacy.budget import BudgetExhaustedError, PrivatePredictor
from certkit.mibp.privacy.ensembles import EnsembleProfile, ensemble_profile, row_parts
from certkit.mibp.privacy.mechanisms import MECHANISMS, private_predict, release_probabilities
from certkit.mibp.privacy.profile import StabilityProfile, stability_profile

__all__ = [
    "MECHANISMS",
    "BudgetExhaustedError",
    "EnsembleProfile",
    "PrivatePredictor",
    "StabilityProfile",
    "ensemble_profile",
    "private_predict",
    "release_probabilities",
    "row_parts",
    "stability_profile",
]
