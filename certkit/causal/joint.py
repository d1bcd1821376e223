"""One latent per mixing variable: a joint EM over every node the latent switches.

A mixing variable $Z$ with $K$ values switches the mechanisms of the nodes in its set $S$. Given $Z = k$
the nodes of $S$ are independent given their parents, so the joint likelihood of a sample is

$$p(x_S \\mid x_{pa}) = \\sum_k \\pi_k \\prod_{j \\in S}
  \\mathcal{N}(x_j;\\ \\beta_{jk}^\\top [1, x_{pa(j)}],\\ \\sigma_{jk}^2),$$

and one EM fits every node's per-group coefficients, intercepts and variances with shared
responsibilities. Its labels therefore pool the evidence of every node in the set, instead of taking
the labels of one node.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import logsumexp

from certkit._results import ResultMixin, format_table
from certkit._typing import RNGLike
from certkit._validation import (
    check_array,
    check_in_options,
    check_integer,
    check_positive,
    check_rng,
    check_squares_fit,
)
from certkit.causal.mixture_regression import (
    BURN_IN,
    MAX_STARTS,
    RIDGE,
    MixtureRegressionResult,
    hard_responsibilities,
    n_mixture_parameters,
)
from certkit.causal.spline import MECHANISMS, NodeDesigns, check_n_knots
from certkit.causal.starts import default_starts

__all__ = ["JointMixtureResult", "fit_joint_mixture", "joint_parameters", "node_mechanism"]

_LOG_2PI = float(np.log(2.0 * np.pi))


@dataclass(frozen=True)
class JointMixtureResult(ResultMixin):
    """One mixing variable fitted jointly over the nodes it switches.

    Attributes
    ----------
    nodes : tuple of int
        The nodes of the set, in the order given (``CausalMixtureModel`` sorts them).
    parents : tuple of tuple of int
        The parents of each node (the regressors of its mechanism).
    coef : tuple of ndarray
        Per node, the (K, p) coefficients of each group; column 0 is the intercept, then one per parent
        (linear mechanisms) or each parent's spline basis coefficients in turn (``mechanism="spline"``).
    scale : ndarray (len(nodes), K)
        Noise standard deviation of each node in each group.
    weights : ndarray (K,)
        Group proportions, largest first (group 0 is the largest).
    responsibilities : ndarray (n, K)
        Posterior probability of each group for each sample.
    labels : ndarray (n,)
        ``argmax`` of the responsibilities.
    loglik : float
        Joint log-likelihood of the nodes of the set given their parents.
    bic : float
        $-2\\ell + (\\sum_{j \\in S} K (p_j + 1) + K - 1) \\log n$, $p_j$ = 1 + number of parents.
    n_iter : int
        EM iterations of the best start.
    converged : bool
        Whether the best start met the tolerance before ``max_iter``.
    loglik_trace : ndarray
        Log-likelihood after every EM iteration of the best start: never decreasing up to rounding,
        except at an iteration that retires a group (its share of the likelihood is lost).
    """

    nodes: tuple[int, ...]
    parents: tuple[tuple[int, ...], ...]
    coef: tuple[np.ndarray, ...]
    scale: np.ndarray
    weights: np.ndarray
    responsibilities: np.ndarray
    labels: np.ndarray
    loglik: float
    bic: float
    n_iter: int
    converged: bool
    loglik_trace: np.ndarray

    @property
    def n_components(self) -> int:
        """Number of groups ``K``."""
        return int(self.weights.size)

    def summary(self) -> str:
        """Group weights, then each node's per-group intercept, scale and slopes."""
        rows = []
        for a, node in enumerate(self.nodes):
            for k in range(self.n_components):
                slopes = ", ".join(
                    f"x{p}: {c:.3f}" for p, c in zip(self.parents[a], self.coef[a][k, 1:])
                ) or "-"
                if self.coef[a].shape[1] != len(self.parents[a]) + 1:  # spline bases
                    slopes = f"{self.coef[a].shape[1] - 1} spline coefficients"
                rows.append([f"x{node}", k, self.weights[k], self.coef[a][k, 0], self.scale[a, k], slopes])
        status = "converged" if self.converged else "stopped at max_iter"
        return (
            format_table(
                ["node", "group", "weight", "intercept", "scale", "slopes"],
                rows,
                title=f"Mixing variable over {len(self.nodes)} node(s), {self.n_components} group(s)",
            )
            + f"\nlog-likelihood {self.loglik:.3f}, BIC {self.bic:.3f}, "
            f"{self.n_iter} EM iterations ({status})"
        )


def joint_parameters(n_components: int, n_regressors: Sequence[int]) -> int:
    """Free parameters of a joint mixture: ``K (p_j + 1)`` per node plus ``K - 1`` proportions."""
    return sum(n_components * (p + 1) for p in n_regressors) + n_components - 1


def _em(
    Y: np.ndarray,
    designs: Sequence[np.ndarray],
    resp: np.ndarray,
    floors: np.ndarray,
    *,
    max_iter: int,
    tol: float,
    tiled: bool = False,
) -> dict[str, Any]:
    """EM from the responsibilities ``resp`` in C++ (``certkit._core.mixreg.joint_em``).

    Each iteration retires groups with fewer effective samples than the largest regression has
    parameters plus one, runs the M-step (weighted least squares per node and group) and the E-step,
    and stops when ``|ΔL| <= tol * n``; retired groups are dropped from the result. ``tiled`` runs the
    kernel's register-tiled Gram accumulation (wide spline designs; equal up to rounding).
    """
    from certkit._core import mixreg

    out = mixreg.joint_em(
        Y, list(designs), resp, max_iter=max_iter, tol=tol, ridge=RIDGE, min_variance=floors, tiled=tiled
    )
    live = out["weights"] > 0.0
    return {
        "coef": [c[live] for c in out["coef"]],
        "variance": out["variance"][:, live],
        "weights": out["weights"][live],
        "responsibilities": np.ascontiguousarray(out["responsibilities"][:, live]),
        "trace": out["loglik_trace"],
        "converged": out["converged"],
    }


def joint_em(
    X: np.ndarray,
    nodes: Sequence[int],
    parents: Sequence[Sequence[int]],
    n_components: int,
    starts: Sequence[np.ndarray],
    *,
    max_iter: int = 100,
    tol: float = 1e-5,
    min_variance: float = 1e-3,
    designs: NodeDesigns | None = None,
) -> JointMixtureResult:
    """The joint mixture from the best of ``starts`` (unchecked inputs: callers validate ``X`` once).

    Every start runs ``BURN_IN`` iterations; the one with the highest log-likelihood runs to
    convergence. A start whose groups all retire is skipped. ``designs`` builds each node's design
    (linear on ``X`` by default).
    """
    n = X.shape[0]
    nodes = tuple(int(v) for v in nodes)
    parents = tuple(tuple(int(p) for p in pa) for pa in parents)
    Y = X[:, list(nodes)]
    if designs is None:
        designs = NodeDesigns(X)
    tiled = designs.mechanism == "spline"
    designs = [designs.design(v, pa, order="F") for v, pa in zip(nodes, parents)]
    floors = min_variance * Y.var(axis=0)
    burn_in = min(BURN_IN, max_iter) if len(starts) > 1 else max_iter
    best = None
    for resp0 in starts:
        try:
            out = _em(Y, designs, resp0, floors, max_iter=burn_in, tol=tol, tiled=tiled)
        except ValueError:
            continue
        if best is None or out["trace"][-1] > best["trace"][-1]:
            best = out
    if best is None:
        raise ValueError(
            f"no start kept a group with enough samples for {n_components} groups; use fewer groups"
        )
    n_iter = best["trace"].size - 1
    if not best["converged"] and n_iter < max_iter:
        more = max_iter - n_iter - 1
        rest = _em(Y, designs, best["responsibilities"], floors, max_iter=more, tol=tol, tiled=tiled)
        rest["trace"] = np.concatenate([best["trace"], rest["trace"]])
        best = rest
    return _result(best, nodes, parents, designs, n)


def _result(fit: dict[str, Any], nodes, parents, designs, n: int) -> JointMixtureResult:
    order = np.argsort(-fit["weights"], kind="stable")  # group 0 = the largest
    resp = np.ascontiguousarray(fit["responsibilities"][:, order])
    loglik = float(fit["trace"][-1])
    K = order.size
    return JointMixtureResult(
        nodes=nodes,
        parents=parents,
        coef=tuple(c[order] for c in fit["coef"]),
        scale=np.sqrt(fit["variance"][:, order]),
        weights=fit["weights"][order],
        responsibilities=resp,
        labels=np.argmax(resp, axis=1).astype(np.int64),
        loglik=loglik,
        bic=-2.0 * loglik + joint_parameters(K, [d.shape[1] for d in designs]) * np.log(n),
        n_iter=fit["trace"].size - 1,
        converged=bool(fit["converged"]),
        loglik_trace=fit["trace"],
    )


def _check_acyclic(nodes: Sequence[int], parents: Sequence[Sequence[int]]) -> None:
    """The parent relation among ``nodes`` must be acyclic: otherwise the product is no density."""
    remaining = {v: {p for p in pa if p in nodes} for v, pa in zip(nodes, parents)}
    while remaining:
        free = [v for v, pa in remaining.items() if not pa & remaining.keys()]
        if not free:
            raise ValueError(
                f"parents make a directed cycle among nodes {sorted(remaining)}; the parents must come "
                "from a DAG"
            )
        for v in free:
            del remaining[v]


def fit_joint_mixture(
    X: Any,
    nodes: Sequence[int],
    parents: Sequence[Sequence[int]],
    n_components: int,
    *,
    starts: Sequence[Any] = (),
    rng: RNGLike = 0,
    n_init: int = 3,
    max_iter: int = 100,
    tol: float = 1e-5,
    min_variance: float = 1e-3,
    mechanism: str = "linear",
    n_knots: int | str = "bic",
) -> JointMixtureResult:
    """Fit one latent with ``n_components`` groups jointly over ``nodes`` given their ``parents``, by EM.

    $p(x_S \\mid x_{pa}) = \\sum_k \\pi_k \\prod_{j \\in S} \\mathcal{N}(x_j;\\ \\beta_{jk}^\\top
    [1, x_{pa(j)}],\\ \\sigma_{jk}^2)$: every node of the set gets per-group coefficients, intercept and
    variance, and all share the responsibilities. The M-step is a weighted least-squares fit per node
    and group (tiny ridge, variance floor); the E-step sums the nodes' log-densities in log space.

    Parameters
    ----------
    X : array-like (n, d)
        The data (every column the nodes and parents refer to).
    nodes : sequence of int
        Columns switched by the latent (distinct).
    parents : sequence of sequence of int
        The parents of each node (may be empty); a node may not be its own parent.
    n_components : int
        Number of groups ``K >= 1``. A group left with fewer effective samples than the largest
        regression has parameters plus one is retired, so the result can have fewer groups.
    starts : sequence of array-like
        Extra starting points: hard labels (n,) with values in ``0..K-1`` or responsibilities (n, K).
        Always tried too: a diagonal Gaussian mixture on the set's standardised least-squares
        residuals, a full-covariance Gaussian mixture on the standardised columns of the set and its
        parents (both fitted on at most 2000 random rows, then evaluated on every row), and
        ``n_init - 1`` random partitions of the residuals; every start runs 10 EM iterations and the
        best then runs to convergence.
    rng : None, int or numpy.random.Generator
        Seeds the Gaussian-mixture and random starts.
    n_init : int
        ``n_init - 1`` random starts are added (>= 1).
    max_iter, tol, min_variance
        As in ``fit_mixture_regression`` (the variance floor is per node).
    mechanism : {"linear", "spline"}
        ``"spline"``: each node additive in cubic B-spline bases of its parents (per-group basis
        coefficients), see ``fit_mixture_regression``.
    n_knots : int or "bic"
        Interior knots of each parent's basis, or ``"bic"``: chosen per (node, parent) as in
        ``fit_mixture_regression``.

    Returns
    -------
    JointMixtureResult
    """
    X = check_array(X, "X", ndim=2)
    n, d = X.shape
    if isinstance(nodes, (str, bytes)) or not isinstance(nodes, Sequence):
        raise TypeError(f"nodes must be a sequence of column indices, got {type(nodes).__name__}")
    nodes = [check_integer(v, "nodes", minimum=0, maximum=d - 1) for v in nodes]
    if not nodes or len(set(nodes)) != len(nodes):
        raise ValueError(f"nodes must be a non-empty list of distinct columns, got {nodes}")
    if isinstance(parents, (str, bytes)) or not isinstance(parents, Sequence):
        raise TypeError(f"parents must be a sequence of parent lists, got {type(parents).__name__}")
    if len(parents) != len(nodes):
        raise ValueError(f"parents must hold one parent list per node ({len(nodes)}), got {len(parents)}")
    for v, pa in zip(nodes, parents):
        if isinstance(pa, (str, bytes)) or not isinstance(pa, Iterable):
            raise TypeError(
                "parents must be a list of parent lists, one per node (e.g. [[0, 2], []]: the first node has "
                f"parents 0 and 2, the second none), got {pa!r} for node {v}"
            )
    parents = [[check_integer(p, "parents", minimum=0, maximum=d - 1) for p in pa] for pa in parents]
    for v, pa in zip(nodes, parents):
        if v in pa:
            raise ValueError(f"node {v} is listed among its own parents")
        if len(set(pa)) != len(pa):
            raise ValueError(f"parents of node {v} must be distinct, got {pa}")
    _check_acyclic(nodes, parents)
    check_squares_fit(X, "X", sorted(set(nodes).union(*parents)))
    K = check_integer(n_components, "n_components", minimum=1)
    n_init = check_integer(n_init, "n_init", minimum=1, maximum=MAX_STARTS)
    max_iter = check_integer(max_iter, "max_iter", minimum=1)
    tol = check_positive(tol, "tol")
    min_variance = check_positive(min_variance, "min_variance")
    mechanism = check_in_options(mechanism, "mechanism", MECHANISMS)
    builder = NodeDesigns(X, mechanism, check_n_knots(n_knots))
    designs = [builder.design(v, pa, order="F") for v, pa in zip(nodes, parents)]
    widths = [d.shape[1] for d in designs]
    if n < joint_parameters(K, widths) or n < K * (max(widths) + 1):
        raise ValueError(
            f"X has {n} rows, too few for {K} groups over {len(nodes)} node(s); use fewer groups"
        )
    if np.any(np.ptp(X[:, nodes], axis=0) == 0.0):
        raise ValueError("a node in nodes is constant; a mechanism needs a response that varies")
    if isinstance(starts, (str, bytes)) or not isinstance(starts, Iterable):
        raise TypeError(
            f"starts must be a sequence of starting points (default (): none), got {type(starts).__name__}"
        )
    extra = []
    for s in starts:
        s = np.asarray(s)
        labels = s.shape == (n,) and np.issubdtype(s.dtype, np.integer)
        if labels and s.min() >= 0 and s.max() < K:
            extra.append(hard_responsibilities(s, K))
        elif s.shape == (n, K) and np.all(np.isfinite(s)) and np.all(s >= 0) and np.allclose(s.sum(1), 1):
            extra.append(s.astype(np.float64))
        else:
            raise ValueError(
                f"starts must hold integer labels (n,) in 0..{K - 1} or responsibilities (n, {K}) "
                "with rows summing to 1"
            )
    gen = check_rng(rng)
    Y = X[:, nodes]
    raw = [X[:, pa] for pa in parents] if mechanism == "spline" else None
    all_starts = (
        default_starts(Y, designs, K, n_init, gen, extra, regressors=raw) if K > 1 else [np.ones((n, 1))]
    )
    return joint_em(
        X, nodes, parents, K, all_starts, max_iter=max_iter, tol=tol, min_variance=min_variance,
        designs=builder,
    )


def node_mechanism(
    fit: JointMixtureResult, index: int, X: np.ndarray, designs: NodeDesigns | None = None
) -> MixtureRegressionResult:
    """Node ``fit.nodes[index]``'s per-group mechanism as a ``MixtureRegressionResult``.

    Coefficients, scales, weights, responsibilities and labels are those of the joint fit (shared by
    the set); ``loglik`` and ``bic`` are the node's own mixture likelihood under those parameters
    ($\\sum_i \\log \\sum_k \\pi_k \\mathcal{N}(x_{ij}; \\cdot)$) and ``loglik_trace`` holds only it.
    ``designs`` rebuilds the design the fit used (linear on ``X`` by default).
    """
    n = X.shape[0]
    design = (designs or NodeDesigns(X)).design(fit.nodes[index], fit.parents[index], order="F")
    coef, scale = fit.coef[index], fit.scale[index]
    resid = X[:, [fit.nodes[index]]] - design @ coef.T
    logp = np.log(fit.weights) - np.log(scale) - 0.5 * (_LOG_2PI + (resid / scale) ** 2)
    loglik = float(logsumexp(logp, axis=1).sum())
    return MixtureRegressionResult(
        coef=coef,
        scale=scale,
        weights=fit.weights,
        responsibilities=fit.responsibilities,
        labels=fit.labels,
        loglik=loglik,
        bic=-2.0 * loglik + n_mixture_parameters(fit.n_components, design.shape[1]) * np.log(n),
        n_iter=fit.n_iter,
        converged=fit.converged,
        loglik_trace=np.array([loglik]),
    )
