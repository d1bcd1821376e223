"""``CausalMixtureModel.summary()``: the fitted model as plain text."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from certkit._results import format_table
from certkit.causal.auto import AUTO_MARGIN

if TYPE_CHECKING:
    from certkit.causal.estimator import CausalMixtureModel

__all__ = ["summary"]


def summary(model: CausalMixtureModel) -> str:
    """Edges, mechanisms per node, mixing variables and orientations of a fitted ``model``."""
    names = model.feature_names_in_
    variable = {j: f"Z{m}" for m, nodes in enumerate(model.mixing_sets_) for j in nodes}
    rows = []
    for j in range(model.n_features_in_):
        parents = ", ".join(names[i] for i in np.flatnonzero(model.adjacency_[:, j])) or "-"
        weights = " / ".join(f"{w:.2f}" for w in model.mechanisms_[j].weights)
        rows.append(
            [
                names[j],
                parents,
                int(model.n_components_[j]),
                variable.get(j, "-"),
                weights,
                f"{model.node_scores_[j]:.1f}",
            ]
        )
    scores = ", ".join(f"{m} {s:.1f}" for m, s in model.mechanism_scores_.items())
    lines = [
        format_table(
            ["node", "parents", "K", "latent", "group weights", "search BIC"],
            rows,
            title=f"Causal mixture model: {int(model.adjacency_.sum())} edges, "
            f"{len(model.mixing_sets_)} mixing variable(s), total BIC {model.score_:.1f}, "
            f"{model.n_scores_} local scores",
        ),
        f"mechanisms: {model.mechanism_}"
        + (f" (total BIC {scores}; auto keeps spline when lower by > {AUTO_MARGIN:g})"
           if len(model.mechanism_scores_) > 1
           else " (auto: spline not tried, too few rows or search_samples for its mixtures)"
           if vars(model).get("_fit_params", {}).get("mechanism") == "auto" else ""),
    ]
    for m, nodes in enumerate(model.mixing_sets_):
        sizes = np.bincount(model.group_labels_[:, m])
        lines.append(
            f"mixing variable Z{m}: nodes {{{', '.join(names[v] for v in sorted(nodes))}}}, "
            f"group sizes {', '.join(str(int(s)) for s in sizes if s)}"
        )
    if not model.mixing_sets_:
        lines.append("no mixing variables: every mechanism is invariant")
    arrows = [
        f"{names[i]} -> {names[j]} ({model.orientation_sources_[names[i], names[j]]})"
        for i, j in zip(*np.nonzero(model.identified_))
    ]
    open_edges = [
        f"{names[i]} - {names[j]}"
        for i, j in zip(*np.nonzero(model.adjacency_))
        if not model.identified_[i, j]
    ]
    lines.append(
        "orientations identified given the fitted skeleton and mixing sets, each with its source: "
        + (", ".join(arrows) or "none")
    )
    lines.append(
        "orientations not identified (the reverse fits equally well; shown as found): "
        + (", ".join(open_edges) or "none")
    )
    return "\n".join(lines)
