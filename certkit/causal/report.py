"""``CausalMixtureModel.summary()``: the fitted model as plain text."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from certkit._results import format_table
from certkit.causal.auto import AUTO_MARGIN

if TYPE_CHECKING:
    from certkit.causal.estimator import CausalMixtureModel

__all__ = ["FEW_SAMPLES", "caveats", "summary"]

#: Below this many samples the documented false-mixing rate is high (docs/causal.md, Caveats: 8 of 10 runs
#: at n = 60 without any latent reported K > 1, none at n = 100).
FEW_SAMPLES = 100


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
    return "\n".join([*lines, *(f"caveat: {text}" for text in caveats(model))])


def caveats(model: CausalMixtureModel) -> list[str]:
    """The caveats of docs/causal.md whose condition the fitted ``model`` meets, one sentence each.

    * A node without parents switched by a mixing variable of its own: a root's mixture describes only
      the shape of its marginal distribution, which non-Gaussian noise (uniform, skewed, heavy-tailed)
      gives as well, and the orientations Meek's rules derive from that latent inherit the doubt.
    * A mixing variable with as many groups as ``max_groups`` allows (``max_components`` by default): the
      BIC may prefer more, and a K at the cap also comes from non-Gaussian noise or discretised or
      duplicated values.
    * Mixing variables fitted on fewer than `FEW_SAMPLES` rows, where spurious mixtures are frequent.
    """
    names = model.feature_names_in_
    params = vars(model).get("_fit_params") or model.get_params(deep=False)
    cap = params["max_components"] if params["max_groups"] is None else params["max_groups"]
    out = []
    for m, nodes in enumerate(model.mixing_sets_):
        K = model.mixing_variables_[m].n_components
        root = next(iter(nodes)) if len(nodes) == 1 else None
        if root is not None and not model.adjacency_[:, root].any():
            out.append(
                f"{names[root]} has no parents and Z{m} switches it alone (K = {K}): a root's mixture only "
                "describes the shape of its distribution, which non-Gaussian noise (uniform, skewed, "
                f"heavy-tailed) fits as a mixture too, and the orientations derived from Z{m} inherit this; "
                "check its histogram and edge_stability before reading it as a changing mechanism"
            )
        if K == cap:
            out.append(
                f"Z{m} has K = {K} groups, the most max_groups allows: the BIC may prefer more (raise "
                "max_groups), and a K at the cap also comes from non-Gaussian noise or discretised or "
                "duplicated values"
            )
    n = model.labels_.shape[0]
    if model.mixing_sets_ and n < FEW_SAMPLES:
        out.append(
            f"{n} samples: below about {FEW_SAMPLES} spurious mixing variables are frequent (8 of 10 fits of "
            "60 samples without any latent reported one); check edge_stability"
        )
    return out
