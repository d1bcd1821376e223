"""Mixing variables: nodes whose mixture labels share information are switched by the same latent variable."""

from __future__ import annotations

import numpy as np

__all__ = ["find_mixing_sets"]


def find_mixing_sets(
    labels: np.ndarray, n_components: np.ndarray, *, threshold: float = 0.03
) -> tuple[list[frozenset[int]], np.ndarray, np.ndarray]:
    """Group the nodes with ``K > 1`` into mixing sets from the adjusted mutual information of their labels.

    Two nodes are linked when the adjusted mutual information (mutual information minus its expectation
    under independent labelings, normalised) of their labels exceeds ``threshold``; the connected
    components are the mixing sets (a node linked to none is a singleton set).

    Parameters
    ----------
    labels : ndarray (n, d) of int
        Per-node hard labels.
    n_components : ndarray (d,) of int
        ``K`` per node.
    threshold : float
        Minimum adjusted mutual information for a link.

    Returns
    -------
    sets : list of frozenset
        The mixing sets, ordered by their smallest node.
    group_labels : ndarray (n, len(sets)) of int
        Per set, the labels of its most representative node: the fewest components, then the highest
        total AMI to the others.
    ami : ndarray (d, d)
        Pairwise AMI between the labels of nodes with ``K > 1`` (0 elsewhere).
    """
    from scipy.sparse.csgraph import connected_components
    from sklearn.metrics import adjusted_mutual_info_score

    d = labels.shape[1]
    mixed = [j for j in range(d) if n_components[j] > 1]
    ami = np.zeros((d, d))
    for a, i in enumerate(mixed):
        for j in mixed[a + 1 :]:
            ami[i, j] = ami[j, i] = adjusted_mutual_info_score(labels[:, i], labels[:, j])
    if not mixed:
        return [], np.zeros((labels.shape[0], 0), dtype=np.int64), ami
    link = ami[np.ix_(mixed, mixed)] > threshold
    _, comp = connected_components(link, directed=False)
    groups: dict[int, list[int]] = {}
    for node, c in zip(mixed, comp):
        groups.setdefault(int(c), []).append(node)
    sets = sorted((sorted(g) for g in groups.values()), key=lambda g: g[0])
    representative = [min(g, key=lambda v: (n_components[v], -ami[v, g].sum(), v)) for g in sets]
    group_labels = labels[:, representative].astype(np.int64) if sets else np.zeros((labels.shape[0], 0), int)
    return [frozenset(g) for g in sets], group_labels, ami
