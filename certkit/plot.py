"""Every capability's plot helpers in one namespace (matplotlib, imported lazily).

Each capability owns its plots; this module re-exports them:

- `plot_certified_accuracy` (`certkit.mibp.plot`): certified accuracy against ε;
- `plot_bound_terms` (`certkit.performative.plot`): a bound and each term against the share of
  affected units (performative trade-off);
- `plot_move_calibration`, `plot_sensitivity` (`certkit.ope.plot`): strategic OPE response diagnostics;
- `plot_causal_graph` (`certkit.causal.plot`): a causal graph with edges coloured by a value
  (stability) and unidentified orientations drawn without arrowheads.
"""

from certkit.causal.plot import plot_causal_graph
from certkit.mibp.plot import plot_certified_accuracy
from certkit.ope.plot import plot_move_calibration, plot_sensitivity
from certkit.performative.plot import plot_bound_terms

__all__ = [
    "plot_bound_terms",
    "plot_causal_graph",
    "plot_certified_accuracy",
    "plot_move_calibration",
    "plot_sensitivity",
]
