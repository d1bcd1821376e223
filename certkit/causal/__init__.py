"""Causal mixture discovery: causal graphs, hidden groups and changing mechanisms from pooled data.

Implements causal mixture models (Mameche, Kalofolias and Vreeken, NeurIPS 2025): every node is a
mixture of Gaussian regressions on its parents, linear or additive in cubic splines of them
(``mechanism="spline"``; by default, ``"auto"``, whichever the BIC prefers), whose components are switched
by latent mixing variables.
``CausalMixtureModel`` learns the graph with a latent-aware BIC, the number of mechanisms per node,
the mixing variables and per-sample group labels; ``edge_stability`` bootstraps all of these findings.
"""

from certkit.causal.equivalence import cpdag, identified_orientations
from certkit.causal.estimator import CausalMixtureModel
from certkit.causal.generate import make_mixture_sem
from certkit.causal.joint import JointMixtureResult, fit_joint_mixture
from certkit.causal.metrics import ami, ari, edge_f1, edge_precision, edge_recall, shd
from certkit.causal.mixing import find_mixing_sets
from certkit.causal.mixture_regression import MixtureRegressionResult, fit_mixture_regression
from certkit.causal.orient import score_orientations
from certkit.causal.score import LatentBIC, ScoreSettings
from certkit.causal.search import SearchResult, topic_search
from certkit.causal.spline import spline_basis
from certkit.causal.stability import StabilityResult, edge_stability

__all__ = [
    "CausalMixtureModel",
    "JointMixtureResult",
    "LatentBIC",
    "MixtureRegressionResult",
    "ScoreSettings",
    "SearchResult",
    "StabilityResult",
    "ami",
    "ari",
    "cpdag",
    "edge_f1",
    "edge_precision",
    "edge_recall",
    "edge_stability",
    "find_mixing_sets",
    "fit_joint_mixture",
    "fit_mixture_regression",
    "identified_orientations",
    "make_mixture_sem",
    "score_orientations",
    "shd",
    "spline_basis",
    "topic_search",
]
