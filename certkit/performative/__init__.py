"""Performative generalization bounds (Rodemann, Fischer-Abaigar, Bailie, Muandet, ICML 2026).

Predictions change outcomes: in the worst case the sample self-fulfils (the optimistic, min-min risk over a
Wasserstein ball) while the population self-negates (the pessimistic, min-max risk). This module computes

- `wasserstein_risk`: the ``sup`` / ``inf`` of the risk of linear models over a $W_p$ ball (closed forms, 1-D
  duals, and cvxpy programs as cross-check and fallback);
- radii: `flip_radius`, `flip_top_positives`, `empirical_wasserstein` (POT);
- bounds: `generalization_bound` (``"thm3.13"``, ``"thm3.15"``, ``"rademacher"``), `retraining_bound` (Cor.
  3.8), both returning a `BoundResult` with every term, and `max_affected_share`, the largest share of
  affected units for which a bound stays below a target.
"""

from certkit.performative.affected_share import max_affected_share
from certkit.performative.bound_result import BoundResult
from certkit.performative.bounds import generalization_bound
from certkit.performative.radii import empirical_wasserstein, flip_radius, flip_top_positives
from certkit.performative.retraining import retraining_bound
from certkit.performative.risk import wasserstein_risk

__all__ = [
    "BoundResult",
    "empirical_wasserstein",
    "flip_radius",
    "flip_top_positives",
    "generalization_bound",
    "max_affected_share",
    "retraining_bound",
    "wasserstein_risk",
]
