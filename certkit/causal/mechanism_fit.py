"""The fit of ``CausalMixtureModel`` with one mechanism: graph search, the nodes' own mixtures, the mixing
variables and the identified orientations, on the data's canonical rows."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from certkit._typing import ExecutorLike
from certkit._validation import check_in_options, check_integer, check_nonnegative, check_progress, check_rng
from certkit.causal.data import canonical_data, data_seed, in_row_order
from certkit.causal.equivalence import cpdag, identified_orientations, orientation_sources
from certkit.causal.joint import node_mechanism
from certkit.causal.mixing import _link_sets, form_mixing_variables
from certkit.causal.orient import score_orientations
from certkit.causal.score import LatentBIC, fit_node
from certkit.causal.search import topic_search, topological_order
from certkit.causal.spline import NodeDesigns

if TYPE_CHECKING:
    from certkit.causal.estimator import CausalMixtureModel

__all__ = ["MAX_GROUPS", "fit_mechanism"]

#: Most groups of one mixing variable (each group fits a regression per node of the set).
MAX_GROUPS = 100


def fit_mechanism(
    model: CausalMixtureModel,
    X: np.ndarray,
    names: tuple[str, ...] | None,
    mechanism: str,
    *,
    executor: ExecutorLike | None,
    graph: tuple[np.ndarray, tuple[int, ...]] | None = None,
    shared_scores: dict | None = None,
) -> dict[str, Any]:
    """The fitted attributes (all but ``mechanism_``) of ``model``'s parameters with one ``mechanism`` on
    validated ``X`` (n, d).

    Parameters
    ----------
    model : CausalMixtureModel
        Its parameters (checked here) decide the fit; it is not changed.
    X : ndarray (n, d)
        The data as ``check_data`` returns it; ``names`` its column names (None for an array).
    mechanism : {"linear", "spline"}
        The mechanism of every node.
    executor : executor-like or None
        Computes the batches of local scores and joint fits (an open pool, not an int: the caller opens
        one for all its fits).
    graph : (adjacency, order), optional
        Replaces the search: the mechanisms, mixing variables and orientations are fitted on this DAG.
    shared_scores : dict, optional
        ``LatentBIC``'s ``shared_scores`` (shared by the fits of ``"auto"``).

    Returns
    -------
    dict
        Attribute name (``adjacency_``, ``score_``, ...) to value.
    """
    gen = check_rng(model.rng)
    n, d = X.shape
    # Every fit runs on the rows sorted by value, with EM starts keyed by the sorted data: a
    # permutation of the rows, or another rng, gives the same fit.
    rows, X = canonical_data(X)
    data_key = data_seed(X)
    settings = model._settings(n, d, data_key, mechanism)
    search = check_in_options(model.search, "search", ("topic", "ges"))
    refine = model.refine_threshold
    refine = None if refine is None else check_nonnegative(refine, "refine_threshold")
    max_parents = model.max_parents
    max_parents = None if max_parents is None else check_integer(max_parents, "max_parents", minimum=0)
    mixing_threshold = check_nonnegative(model.mixing_threshold, "mixing_threshold")
    orientation_threshold = check_nonnegative(model.orientation_threshold, "orientation_threshold")
    max_groups = (
        settings.max_components
        if model.max_groups is None
        else check_integer(model.max_groups, "max_groups", minimum=1, maximum=MAX_GROUPS)
    )
    progress = check_progress(model.progress)
    if not isinstance(model.standardize, (bool, np.bool_)):
        raise TypeError(f"standardize must be True or False, got {type(model.standardize).__name__}")
    if model.standardize:
        X = (X - X.mean(axis=0)) / X.std(axis=0)
    X_search = X
    m = model._search_size(settings, d)
    if m is not None and m < n:
        subsample = gen.choice(n, size=m, replace=False)
        X_search = np.ascontiguousarray(X[np.sort(subsample)])

    score = LatentBIC(X_search, settings, executor=executor, shared_scores=shared_scores)
    if graph is not None:
        adjacency, order = graph
    elif search == "topic":
        result = topic_search(score, d, max_parents=max_parents, refine_threshold=refine, progress=progress)
        adjacency, order = result.adjacency, result.order
    else:
        from certkit.causal.ges import ges_search

        adjacency = ges_search(score, X_search, max_parents=max_parents)
        order = topological_order(adjacency)
    designs = NodeDesigns(X, settings.mechanism, settings.n_knots)
    parents = [np.flatnonzero(adjacency[:, j]) for j in range(d)]
    search_fits = [fit_node(X, j, parents[j], settings, designs=designs) for j in range(d)]
    seeds, _, mixing_ami = _link_sets(
        np.column_stack([m.labels for m in search_fits]),
        np.array([m.n_components for m in search_fits]),
        mixing_threshold,
    )
    hints = {j: m.responsibilities for j, m in enumerate(search_fits) if m.n_components > 1}
    # Three starts of the set search, the lowest total BIC wins: the nodes' own linked labels, every
    # node with K > 1 alone (merges build the sets, so two latents linked by chance are not forced into
    # one), and one latent over every node (pruned when only some nodes change).
    singletons = [{j} for j in sorted(hints)]
    variables, invariant, total = form_mixing_variables(
        X, parents, [seeds, singletons, [range(d)]], settings, hints=hints, max_groups=max_groups,
        executor=executor, designs=designs,
    )
    mixing_sets = [frozenset(v.nodes) for v in variables]
    oriented = None
    # only the BIC knot rule gives a linear pair one column both ways (a covered reversal then costs
    # nothing); a fixed basis overfits both directions, and their difference is noise
    if settings.mechanism == "spline" and settings.n_knots == "bic":
        known = cpdag(adjacency, mixing_sets=mixing_sets)
        oriented = score_orientations(score, adjacency, known, orientation_threshold)
    group_labels = np.zeros((n, len(variables)), dtype=np.int64)
    mechanisms = [node_mechanism(invariant[j], 0, X, designs) for j in range(d)]
    for m, variable in enumerate(variables):
        group_labels[:, m] = variable.labels
        for index, j in enumerate(variable.nodes):
            mechanisms[j] = node_mechanism(variable, index, X, designs)
    # per-row outputs back in the caller's row order
    back = np.empty(n, dtype=np.int64)
    back[rows] = np.arange(n)
    mechanisms = [in_row_order(m, back) for m in mechanisms]
    known = cpdag(adjacency, mixing_sets=mixing_sets, oriented=oriented)
    identified = identified_orientations(adjacency, known)
    names = names if names is not None else tuple(f"x{j}" for j in range(d))
    sources = orientation_sources(adjacency, identified, mixing_sets, oriented)
    return {
        "data_key_": data_key,
        "mixing_ami_": mixing_ami,
        "mixing_variables_": [in_row_order(v, back) for v in variables],
        "score_": total,
        "n_scores_": score.n_evaluations,
        "adjacency_": adjacency,
        "order_": tuple(int(v) for v in order),
        "node_scores_": np.array([m.bic for m in search_fits]),
        "mixing_sets_": mixing_sets,
        "group_labels_": group_labels[back],
        "mechanisms_": mechanisms,
        "n_components_": np.array([m.n_components for m in mechanisms], dtype=np.int64),
        "labels_": np.column_stack([m.labels for m in mechanisms]).astype(np.int64),
        "responsibilities_": [m.responsibilities for m in mechanisms],
        "cpdag_": known,
        "identified_": identified,
        "feature_names_in_": names,
        "orientation_sources_": {(names[i], names[j]): source for (i, j), source in sources.items()},
        "mixing_set_names_": [tuple(names[j] for j in sorted(s)) for s in mixing_sets],
        "n_features_in_": d,
    }
