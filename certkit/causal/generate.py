"""Synthetic causal mixture models: a random linear-Gaussian DAG whose mechanisms switch with groups."""

from __future__ import annotations

import numpy as np

from certkit._typing import RNGLike
from certkit._validation import (
    check_allocation,
    check_integer,
    check_positive,
    check_probability,
    check_rng,
)

__all__ = ["MAX_GROUPS", "make_mixture_sem"]

_WEIGHT_LOW, _WEIGHT_HIGH = 0.25, 0.75
_SEPARATION = 0.25
_SHIFT_LOW, _SHIFT_HIGH = 2.0, 5.0

#: Most groups whose edge weights can all be ``_SEPARATION`` apart: signs alternate between groups, and
#: ``[0.25, 0.75]`` holds two weights of one sign 0.25 apart (three only at exactly 0.25, 0.5, 0.75).
MAX_GROUPS = 4

#: Largest generation accepted, in multiply-adds (``n_samples * n_nodes**2``; about a minute).
_MAX_WORK = 1e11


def _signed_uniform(rng: np.random.Generator, size: int | tuple[int, ...]) -> np.ndarray:
    return rng.choice([-1.0, 1.0], size=size) * rng.uniform(_WEIGHT_LOW, _WEIGHT_HIGH, size=size)


def _group_weights(rng: np.random.Generator, previous: list[np.ndarray]) -> np.ndarray:
    """New edge weights: the sign of the last group's flipped, at least 0.25 away from every earlier group.

    Only the edges (non-zero entries of ``previous[0]``) get weights. A weight too close to an earlier
    group's is redrawn up to 100 times, then drawn uniformly from the weights far enough from all of them.
    """
    last = previous[-1]
    sign = -np.sign(last)
    new = sign * rng.uniform(_WEIGHT_LOW, _WEIGHT_HIGH, size=last.shape)
    edges = np.flatnonzero(previous[0])
    close = np.zeros(edges.size, dtype=bool)
    for w in previous:
        close |= np.abs(new.flat[edges] - w.flat[edges]) < _SEPARATION
    for idx in edges[close]:  # in index order, as one redraw after another
        earlier = [w.flat[idx] for w in previous]
        for _ in range(100):
            new.flat[idx] = sign.flat[idx] * rng.uniform(_WEIGHT_LOW, _WEIGHT_HIGH)
            if all(abs(new.flat[idx] - w) >= _SEPARATION for w in earlier):
                break
        else:
            new.flat[idx] = _far_weight(rng, float(sign.flat[idx]), earlier)
    return new


def _far_weight(rng: np.random.Generator, sign: float, earlier: list[float]) -> float:
    """A uniform draw of ``sign * u``, ``u`` in [0.25, 0.75], at least 0.25 away from every ``earlier``."""
    # the allowed magnitudes: [low, high] minus the open interval (|w| - 0.25, |w| + 0.25) of each earlier
    # weight of this sign (one of the other sign is at least 0.5 away)
    pieces = [(_WEIGHT_LOW, _WEIGHT_HIGH)]
    for w in earlier:
        centre = sign * w
        lo, hi = centre - _SEPARATION, centre + _SEPARATION
        pieces = [p for a, b in pieces for p in ((a, min(b, lo)), (max(a, hi), b)) if p[0] <= p[1]]
    if not pieces:  # pragma: no cover - cannot happen with at most MAX_GROUPS groups
        raise RuntimeError("no edge weight is far enough from the earlier groups'")
    lengths = np.array([b - a for a, b in pieces])
    if lengths.sum() > 0:
        a, b = pieces[int(rng.choice(len(pieces), p=lengths / lengths.sum()))]
        u = a + (b - a) * rng.uniform()
    else:  # only isolated points are left
        u = pieces[int(rng.integers(len(pieces)))][0]
    value = sign * min(max(u, _WEIGHT_LOW), _WEIGHT_HIGH)
    # rounding in "centre + 0.25" can leave a value a hair short of the separation: step to the far side
    for w in earlier:
        while abs(value - w) < _SEPARATION:
            value = float(np.nextafter(value, value + (value - w)))
    return value


def make_mixture_sem(
    n_nodes: int = 10,
    n_samples: int = 500,
    edge_prob: float = 0.4,
    n_groups: int = 2,
    *,
    n_mixing: int = 1,
    mixing_size: int = 3,
    noise_scale: float = 0.5,
    return_sets: bool = False,
    rng: RNGLike = None,
) -> tuple[np.ndarray, ...]:
    """Sample a linear-Gaussian causal mixture model (the generator of Mameche et al., 2025).

    An Erdős–Rényi DAG over a random order of the nodes (each forward edge with probability
    ``edge_prob``), edge weights $\\pm U[0.25, 0.75]$, noise $N(0, \\text{noise\\_scale}^2)$. Each of
    ``n_mixing`` latent variables $Z_m$ (uniform over ``n_groups`` values) touches ``mixing_size``
    nodes (disjoint sets): in group 0 a touched node follows the base mechanism; in group $g > 0$ its
    incoming weights are redrawn with the sign flipped and at least 0.25 away from every earlier group,
    and its intercept shifts by $\\pm U(2, 5)$ (a touched source only shifts its mean). Nodes are
    generated in topological order and each is standardised (mean 0, variance 1) as soon as it is
    generated.

    Parameters
    ----------
    n_nodes, n_samples : int
        Size of the graph (>= 2) and of the sample (>= 2).
    edge_prob : float
        Probability of each edge of the random DAG, in [0, 1].
    n_groups : int
        Number of values of each latent variable, 2 to `MAX_GROUPS` = 4 (more cannot keep the weights of
        every pair of groups 0.25 apart).
    n_mixing : int
        Number of latent mixing variables (>= 0).
    mixing_size : int
        Number of nodes each mixing variable touches (>= 1); ``n_mixing * mixing_size <= n_nodes``.
    noise_scale : float
        Standard deviation of the noise (> 0).
    return_sets : bool
        Also return the node sets touched by each mixing variable.
    rng : None, int or numpy.random.Generator
        Randomness of graph, weights, groups and noise.

    Returns
    -------
    X : ndarray (n_samples, n_nodes)
        The standardised sample.
    A : ndarray (n_nodes, n_nodes) of int
        The true DAG, ``A[i, j] = 1`` for ``i -> j``.
    Z : ndarray (n_samples, n_mixing) of int
        The latent group of each sample under each mixing variable.
    sets : list of frozenset
        Only with ``return_sets=True``: the nodes touched by each mixing variable.

    Raises
    ------
    ValueError
        If an argument is out of range, or the sample would not fit in memory or take more than about a
        minute to generate.
    """
    d = check_integer(n_nodes, "n_nodes", minimum=2)
    n = check_integer(n_samples, "n_samples", minimum=2)
    edge_prob = check_probability(edge_prob, "edge_prob")
    n_groups = check_integer(n_groups, "n_groups", minimum=2)
    if n_groups > MAX_GROUPS:
        raise ValueError(
            f"n_groups must be <= {MAX_GROUPS}, got {n_groups}: edge weights +-U[0.25, 0.75] whose signs "
            f"alternate between groups can keep every pair of groups at least 0.25 apart for at most "
            f"{MAX_GROUPS} groups"
        )
    n_mixing = check_integer(n_mixing, "n_mixing", minimum=0)
    mixing_size = check_integer(mixing_size, "mixing_size", minimum=1)
    noise_scale = check_positive(noise_scale, "noise_scale")
    if n_mixing * mixing_size > d:
        raise ValueError(
            f"n_mixing * mixing_size must be <= n_nodes (disjoint touched sets): "
            f"{n_mixing} * {mixing_size} > {d}"
        )
    # (d, d) graph, weights and their draws; X, the per-sample weights of a switched node and the noise
    check_allocation(8.0 * 6 * d * d, "n_nodes", d, what=f"a graph of {d} nodes")
    check_allocation(8.0 * (6 * d * d + 3 * n * d), "n_samples", n, what=f"{n} samples of {d} nodes")
    work = float(n) * d * d
    if work > _MAX_WORK:
        raise ValueError(
            f"n_nodes={d} is too large with n_samples={n}: generating would take about {work:.2g} "
            f"multiply-adds (n_samples * n_nodes**2, more than {_MAX_WORK:.0e}); reduce n_nodes or n_samples"
        )
    gen = check_rng(rng)

    order = gen.permutation(d)
    A = np.zeros((d, d), dtype=np.int64)
    a, b = np.triu_indices(d, 1)  # the pairs (a, b), a < b, in the order of one draw after another
    forward = gen.uniform(size=a.size) < edge_prob
    A[order[a[forward]], order[b[forward]]] = 1
    del a, b, forward
    W = A * _signed_uniform(gen, (d, d))

    touched = gen.permutation(d)[: n_mixing * mixing_size].reshape(n_mixing, mixing_size)
    Z = gen.integers(0, n_groups, size=(n, n_mixing))
    which = {int(v): m for m in range(n_mixing) for v in touched[m]}
    group_weights: dict[int, list[np.ndarray]] = {}
    group_shift: dict[int, np.ndarray] = {}
    for v in which:
        weights = [W[:, v]]
        for _ in range(1, n_groups):
            weights.append(_group_weights(gen, weights))
        group_weights[v] = weights
        signs = np.where(np.arange(n_groups) % 2 == 1, 1.0, -1.0)
        group_shift[v] = np.concatenate(
            [[0.0], signs[1:] * gen.uniform(_SHIFT_LOW, _SHIFT_HIGH, n_groups - 1)]
        )

    X = np.zeros((n, d))
    for v in order:
        x = noise_scale * gen.standard_normal(n)
        if v in which:
            g = Z[:, which[v]]
            coef = np.stack(group_weights[v])[g]  # (n, d): the weights of each sample's group
            x += np.einsum("ij,ij->i", X, coef) + group_shift[v][g]
        else:
            x += X @ W[:, v]
        X[:, v] = (x - x.mean()) / x.std()
    if return_sets:
        return X, A, Z, [frozenset(int(v) for v in row) for row in touched]
    return X, A, Z
