"""Wasserstein radii of performative effects: flipped or moved units, and exact empirical $W_p$ (POT)."""

from __future__ import annotations

from typing import Any

import numpy as np

from certkit._optional import require
from certkit._validation import (
    check_array,
    check_integer,
    check_nonnegative,
    check_probability,
    check_same_length,
)
from certkit.performative._inputs import check_norm, check_order

__all__ = ["empirical_wasserstein", "flip_radius", "flip_top_positives"]


def flip_radius(n: int, m: int, diameter: float, *, p: float = 1) -> float:
    r"""Radius $(m/n)^{1/p} D_Z$ of a $W_p$ ball that holds every sample with $m$ of $n$ units changed.

    Moving (or relabelling) $m$ of the $n$ atoms, each by at most the diameter $D_Z$ of the data space, is a
    transport plan of cost $\frac mn D_Z^p$, so $W_p \le (m/n)^{1/p} D_Z$; equality holds when every moved
    atom travels exactly $D_Z$ and no cheaper matching exists (checked with `empirical_wasserstein` in the
    tests).

    Parameters
    ----------
    n : int
        Sample size, $n \ge 1$.
    m : int
        Number of affected units, $0 \le m \le n$.
    diameter : float
        $D_Z \ge 0$, the largest distance a unit can move (in the transport metric of the risk functional).
    p : float, default 1
        Wasserstein order $p \ge 1$.

    Returns
    -------
    float
    """
    n = check_integer(n, "n", minimum=1)
    m = check_integer(m, "m", minimum=0, maximum=n)
    diameter = check_nonnegative(diameter, "diameter")
    p = check_order(p)
    return float((m / n) ** (1.0 / p) * diameter)


def flip_top_positives(pred: Any, y: Any, share: float) -> np.ndarray:
    r"""Flip the share of positive outcomes with the highest predictions to negative (a self-negating effect).

    Models, e.g., job seekers predicted most likely to find work who are then given no support: among the
    positives, the $\lceil \text{share}\cdot\#\text{positives}\rceil$ with the highest predicted score become
    negative. Ties are broken by position (earlier units first), so the result is deterministic.

    Parameters
    ----------
    pred : array-like, shape (n,)
        Predicted scores or probabilities (finite).
    y : array-like, shape (n,)
        Binary outcomes, either in $\{0, 1\}$ or in $\{-1, +1\}$; the negative label keeps its coding.
    share : float
        Share of the positives to flip, in $[0, 1]$.

    Returns
    -------
    numpy.ndarray
        A copy of ``y`` (float64) with the flips applied.
    """
    pred = check_array(pred, "pred", ndim=1)
    y = check_array(y, "y", ndim=1)
    check_same_length(("pred", pred), ("y", y))
    share = check_probability(share, "share")
    labels = set(np.unique(y).tolist())
    if labels <= {0.0, 1.0}:
        negative = 0.0
    elif labels <= {-1.0, 1.0}:
        negative = -1.0
    else:
        raise ValueError(f"y must be binary with labels {{0, 1}} or {{-1, +1}}, found {sorted(labels)[:5]}")
    out = y.copy()
    positives = np.flatnonzero(y == 1.0)
    n_flip = int(np.ceil(share * positives.size - 1e-12))  # share * count exact at integers despite rounding
    if n_flip == 0:
        return out
    order = np.argsort(-pred[positives], kind="stable")  # highest first, ties by position
    out[positives[order[:n_flip]]] = negative
    return out


def empirical_wasserstein(
    a: Any, b: Any, *, p: float = 1, norm: float = 2, weights_a: Any = None, weights_b: Any = None
) -> float:
    r"""Exact $W_p$ between two empirical distributions via POT's network simplex (``ot.emd2``).

    Parameters
    ----------
    a, b : array-like, shape (n_a, d) and (n_b, d)
        Support points (e.g. $z = (x, y)$ stacked as columns).
    p : float, default 1
        Order $p \ge 1$; the ground cost is $\|z - z'\|^p$.
    norm : {2, 1, np.inf}, default 2
        Ground norm.
    weights_a, weights_b : array-like, optional
        Nonnegative weights summing to 1 (uniform by default).

    Returns
    -------
    float
        $W_p(\mu_a, \mu_b)$. Needs the optional extra ``pot`` (``pip install "certkit[pot]"``).
    """
    a = check_array(a, "a", ndim=2)
    b = check_array(b, "b", ndim=2)
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"a and b must have the same number of columns, got {a.shape[1]} and {b.shape[1]}")
    p = check_order(p)
    norm = check_norm(norm)
    wa = _weights(weights_a, a.shape[0], "weights_a")
    wb = _weights(weights_b, b.shape[0], "weights_b")
    ot = require("ot", extra="pot", purpose="empirical_wasserstein")
    cost = np.linalg.norm(a[:, None, :] - b[None, :, :], ord=norm, axis=2) ** p
    value = float(ot.emd2(wa, wb, cost, numItermax=max(100_000, 50 * a.shape[0] * b.shape[0])))
    return max(value, 0.0) ** (1.0 / p)


def _weights(w: Any, n: int, name: str) -> np.ndarray:
    if w is None:
        return np.full(n, 1.0 / n)
    w = check_array(w, name, ndim=1, shape=(n,))
    if np.any(w < 0) or not np.isclose(w.sum(), 1.0, rtol=0, atol=1e-9):
        raise ValueError(f"{name} must be nonnegative and sum to 1")
    return w
