"""Doubly robust off-policy evaluation under strategic behaviour with disclosed explanations.

Agents who gamed a logging policy π₀ (moving to the counterfactual explanation it disclosed) are logged with
their pre- and post-strategic covariates; the estimators give the value of a new policy π accounting for how
the agents would respond to *its* explanation. The model is a reconstruction (checked by simulation) of
Vo, Reddy, Rodemann, Chau & Muandet, "Off-Policy Evaluation with Strategic Agents via Local Disclosure"
(ICML 2026), whose details beyond the abstract are not public.

- Policies: `LinearThresholdPolicy`, protocols `Policy`, `ExplainingPolicy`.
- Response models: `LogNormalCostResponse`, `ObservedCostResponse`, protocol `CostDistribution`.
- Estimators: `strategic_dr`, `strategic_ipw`, `direct_method`, `naive_dr`, `naive_ipw`, `plain_dr` →
  `OPEResult`; `sensitivity` → `SensitivityResult`.
- Outcome models: `GLMOutcome` (default), protocol `OutcomeModel`.
- Data and simulation: `StrategicData`, `StrategicSimulator`.
"""

from certkit.ope._data import StrategicData
from certkit.ope.calibration import CalibrationTable
from certkit.ope.disclosure import move_threshold
from certkit.ope.estimators import (
    direct_method,
    naive_dr,
    naive_ipw,
    plain_dr,
    strategic_dr,
    strategic_ipw,
)
from certkit.ope.observed_cost import ObservedCostResponse
from certkit.ope.outcome import GLMOutcome, OutcomeModel
from certkit.ope.policies import ExplainingPolicy, LinearThresholdPolicy, Policy
from certkit.ope.response import CostDistribution, LogNormalCostResponse
from certkit.ope.result import OPEResult
from certkit.ope.sensitivity import SensitivityResult, sensitivity
from certkit.ope.simulator import StrategicSimulator
from certkit.ope.target import target_action_proba

__all__ = [
    "CalibrationTable",
    "CostDistribution",
    "ExplainingPolicy",
    "GLMOutcome",
    "LinearThresholdPolicy",
    "LogNormalCostResponse",
    "OPEResult",
    "ObservedCostResponse",
    "OutcomeModel",
    "Policy",
    "SensitivityResult",
    "StrategicData",
    "StrategicSimulator",
    "direct_method",
    "move_threshold",
    "naive_dr",
    "naive_ipw",
    "plain_dr",
    "sensitivity",
    "strategic_dr",
    "strategic_ipw",
    "target_action_proba",
]
