"""Certified circuits: stability guarantees for mechanistic circuits under edits of the concept dataset.

Wrap any circuit-discovery routine (a black-box callable, or a score-decomposable :class:`ScoreRule`
evaluated by the compiled kernel) with randomized subsampling of the concept dataset; every
component (neuron, channel, edge) is certified *included*, certified *excluded*, or abstained from,
with the largest edit distance of the concept dataset under which its decision provably stays.

==========================================  ==============================================================
:func:`certify_circuit`                     subsampling / Poisson-deletion certificate of every component
:func:`certify_circuit_partition`           deterministic partition-aggregation (DPA) variant
:class:`ScoreRule`                          top-k / threshold rule over a per-example score matrix
:func:`certified_radius`                    the coupling bound alone (radius from probability bounds)
:func:`edit_bounds`                         bounds on the vote probability after a given edit
:func:`partition_radius`                    the DPA radius
:func:`neuron_scores`                       per-example activation / attribution-patching scores (torch)
:class:`AblationDiscovery`                  ablation-based black-box discovery (torch)
:func:`circuit_accuracy`                    accuracy with every non-circuit neuron mean- or zero-ablated
:func:`layer_mean`                          mean activations of a layer (for repeated mean ablation)
:func:`circuit_stability`                   Jaccard overlap of circuits found on disjoint concept sets
:func:`jaccard`                             Jaccard overlap of inclusion masks
:func:`edge_scores`                         per-example edge attribution patching scores of a transformer
:func:`edge_faithfulness`                   share of the metric an edge circuit recovers (edge patching)
:func:`edge_accuracy`                       next-token accuracy of an edge circuit
:class:`AttentionOnlyTransformer`           small transformer with an explicit edge graph (torch)
==========================================  ==============================================================
"""

from certkit.circuits.certificate import certified_radius, edit_bounds, partition_radius
from certkit.circuits.certify import (
    CircuitCertificate,
    ScoreRule,
    certify_circuit,
    certify_circuit_partition,
    example_parts,
)
from certkit.circuits.discovery import AblationDiscovery, neuron_scores
from certkit.circuits.edges import edge_accuracy, edge_faithfulness, edge_scores
from certkit.circuits.evaluation import circuit_accuracy, layer_mean
from certkit.circuits.stability import CircuitStability, circuit_stability, jaccard

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
