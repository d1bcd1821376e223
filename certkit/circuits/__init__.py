"""Certified circuits: stability guarantees for mechanistic circuits under edits of the concept dataset.

Wrap any circuit-discovery routine (a black-box callable, or a score-decomposable `ScoreRule`
evaluated by the compiled kernel) with randomized subsampling of the concept dataset; every
component (neuron, channel, edge) is certified *included*, certified *excluded*, or abstained from,
with the largest edit distance of the concept dataset under which its decision provably stays.

| name | what it is |
|---|---|
| `certify_circuit` | subsampling / Poisson-deletion certificate of every component |
| `certify_circuit_partition` | deterministic partition-aggregation (DPA) variant |
| `ScoreRule` | top-k / threshold rule over a per-example score matrix |
| `certified_radius` | the coupling bound alone (radius from probability bounds) |
| `edit_bounds` | bounds on the vote probability after a given edit |
| `partition_radius` | the DPA radius |
| `neuron_scores` | per-example activation / attribution-patching scores (torch) |
| `AblationDiscovery` | ablation-based black-box discovery (torch) |
| `circuit_accuracy` | accuracy with every non-circuit neuron mean- or zero-ablated |
| `layer_mean` | mean activations of a layer (for repeated mean ablation) |
| `circuit_stability` | Jaccard overlap of circuits found on disjoint concept sets |
| `jaccard` | Jaccard overlap of inclusion masks |
| `edge_scores` | per-example edge attribution patching scores of a transformer |
| `edge_faithfulness` | share of the metric an edge circuit recovers (edge patching) |
| `edge_accuracy` | next-token accuracy of an edge circuit |
| `AttentionOnlyTransformer` | small transformer with an explicit edge graph (torch) |
"""

from certkit.circuits.discovery import AblationDiscovery, neuron_scores
from certkit.circuits.dpa import partition_radius
from certkit.circuits.edges import edge_accuracy, edge_faithfulness, edge_scores
from certkit.circuits.evaluation import circuit_accuracy, layer_mean
from certkit.circuits.partition import certify_circuit_partition, example_parts
from certkit.circuits.radius import certified_radius, edit_bounds
from certkit.circuits.result import CircuitCertificate
from certkit.circuits.score_rule import ScoreRule
from certkit.circuits.stability import CircuitStability, circuit_stability, jaccard
from certkit.circuits.subsampling import certify_circuit

__all__ = [
    "AblationDiscovery",
    "AttentionOnlyTransformer",
    "CircuitCertificate",
    "CircuitStability",
    "ScoreRule",
    "certified_radius",
    "certify_circuit",
    "certify_circuit_partition",
    "circuit_accuracy",
    "circuit_stability",
    "edge_accuracy",
    "edge_faithfulness",
    "edge_scores",
    "edit_bounds",
    "example_parts",
    "jaccard",
    "layer_mean",
    "neuron_scores",
    "partition_radius",
]


def __getattr__(name: str):  # PEP 562: the torch model is imported on first use
    if name == "AttentionOnlyTransformer":
        from certkit.circuits.edges import _model_class

        return _model_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
