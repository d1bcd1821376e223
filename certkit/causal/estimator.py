"""``CausalMixtureModel``: causal graph, changing mechanisms and latent groups from pooled data.

The estimator holds the parameters and their checks; the fit with one mechanism is
``certkit.causal.mechanism_fit``, the fits of ``mechanism="auto"`` ``certkit.causal.auto``, and
``summary()`` ``certkit.causal.report``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import BaseEstimator

from certkit._typing import ExecutorArg, ExecutorLike, Progress, RNGLike
from certkit._validation import (
    check_in_options,
    check_integer,
    check_is_fitted,
    check_positive,
    check_rng,
)
from certkit.causal import report
from certkit.causal.auto import AUTO_MARGIN, fit_auto
from certkit.causal.batches import StartingPool
from certkit.causal.data import check_data
from certkit.causal.mechanism_fit import MAX_GROUPS, fit_mechanism
from certkit.causal.mixture_regression import MAX_STARTS, n_mixture_parameters
from certkit.causal.score import ScoreSettings
from certkit.causal.spline import MECHANISMS, check_n_knots, max_width
from certkit.parallel import resolve_executor, single_threaded

__all__ = ["AUTO_MARGIN", "MAX_GROUPS", "CausalMixtureModel"]

#: Parameters that change how a fit runs, not what it finds (not recorded with the fit).
RUN_ONLY_PARAMS = ("executor", "progress")

#: The mechanisms ``CausalMixtureModel`` takes: ``"auto"`` fits both others and keeps one.
ESTIMATOR_MECHANISMS = ("auto", *MECHANISMS)


class CausalMixtureModel(BaseEstimator):
    """Causal mixture model: a DAG whose mechanisms may switch between hidden groups of samples.

    Each node $X_j$ is a mixture of $K_j$ Gaussian regressions on its parents, linear or additive in
    cubic B-splines of them (``mechanism``, by default chosen from the data; $K_j = 1$: an invariant
    mechanism). The local score is the
    BIC of the best mixture over $K = 1, \\dots,$ ``max_components`` (EM in C++), the graph comes from a
    TOPIC-style topological-order search (or GES with the same score). Each mixing variable is one
    latent fitted jointly over the nodes it switches (one EM whose likelihood is the product of their
    per-group regressions), and its set is grown, pruned and merged while the total BIC decreases.

    Directions between $K = 1$ nodes with no v-structure nearby are not identified by the
    linear-Gaussian BIC (score-equivalent graphs): ties are broken by column index, so those
    orientations are arbitrary (``identified_`` says which are not and ``orientation_sources_`` why;
    with spline mechanisms the score itself orients nonlinear edges).
    The fit runs on the rows sorted by value and its EM starts are keyed by the data, so a permutation of
    the rows or another ``rng`` gives the same fit (per-row outputs follow the caller's row order).
    ``max_components=1`` is a greedy search, not a guaranteed BIC optimum. EM local optima, non-Gaussian
    noise (which inflates $K$) and the mixing threshold have measured limits listed in docs/causal.md.

    Parameters
    ----------
    max_components : int
        Largest number of mixture components per node (>= 1; 1 gives the plain linear-Gaussian BIC search).
    search : {"topic", "ges"}
        The structure search; ``"ges"`` runs causal-learn's GES with the latent-aware score
        (needs the ``causal`` extra) and orients its equivalence class into one DAG.
    component_search : {"greedy", "full"}
        ``"greedy"`` fits ``K = 1, 2, ...`` only while the BIC decreases (fast); ``"full"`` fits every
        ``K`` up to ``max_components`` and keeps the lowest BIC.
    refine_threshold : float or None
        After the search, each node keeps the smallest parent subset whose score is at most this much
        (BIC units) above that of its parents (None skips refinement).
    max_parents : int, optional
        Cap on the number of parents per node during the search.
    search_samples : int, optional
        Score the candidates of the search on a random subsample of this many rows (drawn from ``rng``)
        when ``n`` is larger: the search cost is linear in ``n``. The mechanisms, labels and mixing sets
        are always fitted on all rows. None (default) searches on all rows.
    mixing_threshold : float
        Minimum adjusted mutual information of two nodes' labels to link them in the initial mixing
        sets (the set search then grows, prunes and merges the sets by the total BIC).
    max_groups : int, optional
        Largest number of groups of one mixing variable (its joint fit); default ``max_components``.
        A latent shared by many nodes can support more groups than one node's mixture.
    mechanism : {"auto", "linear", "spline"}
        ``"linear"``: every mechanism linear in the parents; ``"spline"``: additive in cubic B-spline
        bases of them (per-group basis coefficients; see docs/causal.md for the model, its
        identifiability and its cost); ``"auto"`` (default): both fits; where their searches found
        different graphs, the linear mechanisms are also fitted on the spline fit's graph and the spline
        ones on the linear fit's graph (unless the spline fit already wins), each mechanism keeping its
        lower total BIC (``score_``). The spline fit is kept when its total BIC is lower by more than
        `AUTO_MARGIN` = 10, else the linear one (also when the rows or ``search_samples`` are too few for
        the spline mixtures); ``mechanism_`` says which. The time is about 2-4 times that of the linear
        fit alone (docs/causal.md).
    n_knots : int or "bic"
        Interior knots of each parent's spline basis (not with ``"linear"``): an int (0 .. 50), or
        ``"bic"`` (default): per (node, parent), the linear term or 0 .. 3 knots, whichever gives the
        lowest BIC of the node's least-squares regression on that parent alone.
    orientation_threshold : float
        With spline mechanisms and ``n_knots="bic"``, an edge the equivalence class leaves undirected is
        identified when reversing it, in the member of the class where it is covered
        (``score_orientations``), raises the search score by more than this (BIC units); Meek's rules then
        propagate.  With an int ``n_knots`` the score orients nothing (a fixed basis overfits both
        directions of a linear pair by a chi-square amount, so their difference is noise: see
        docs/causal.md).
    n_init, max_iter, tol, min_variance
        EM options (see ``fit_mixture_regression``).
    standardize : bool
        Scale every column to mean 0 and variance 1 before fitting (the coefficients are then in
        standard units).
    rng : None, int or numpy.random.Generator
        Seeds the ``search_samples`` subsample, the only random draw of the fit (one subsample, shared by
        every fit of ``"auto"``): the EM starts are keyed by a fingerprint of the sorted data,
        (fingerprint, node, K, parents) per local score, so the same data give the same fit whatever
        ``rng``.
    executor : None, int or executor
        Where candidate scores and candidate joint fits are computed (``certkit.parallel``); same results.
        An int opens one process pool for the whole fit (every fit of ``"auto"``); a batch of fits goes to
        the executor only when its estimated work pays for the hand-off (``certkit.causal.batches``), so a
        small fit runs serially whatever ``executor``.
    progress : bool or str
        Progress bar over the search.

    Attributes
    ----------
    mechanism_ : str
        The mechanism of the fit: ``mechanism``, or for ``"auto"`` the one kept.
    mechanism_scores_ : dict[str, float]
        Total BIC (``score_``) of each mechanism fitted: both for ``"auto"`` (only ``"linear"`` when the
        rows are too few for the spline mixtures).
    adjacency_ : ndarray (d, d) of int
        ``adjacency_[i, j] = 1`` for an edge ``i -> j``.
    order_ : tuple of int
        Topological order found by the search.
    n_components_ : ndarray (d,) of int
        Number of mechanisms per node: the ``K`` of its mixing variable, 1 outside every set.
    labels_ : ndarray (n, d) of int
        Per-node hard labels: those of the node's mixing variable (all 0 for an invariant node).
    responsibilities_ : list of ndarray
        Per node, the soft labels (n, K_j) of its mixing variable.
    mechanisms_ : list of MixtureRegressionResult
        Every node's mechanism given its parents: the per-group coefficients and scales of its mixing
        variable's joint fit (``loglik``/``bic``: the node's own mixture likelihood under them), or
        the least-squares fit of an invariant node.
    mixing_variables_ : list of JointMixtureResult
        One joint fit per mixing variable (nodes, parents, per-group mechanisms, weights,
        responsibilities, labels, joint BIC).
    mixing_sets_ : list of frozenset
        Nodes switched by the same latent variable (``mixing_variables_[m].nodes``), as column indices.
    mixing_set_names_ : list of tuple of str
        The same sets as column names (``feature_names_in_``), each in column order, as ``summary()`` and
        ``edges()`` name them.
    group_labels_ : ndarray (n, len(mixing_sets_)) of int
        Per-sample group of each mixing variable (group 0 the largest).
    mixing_ami_ : ndarray (d, d)
        Adjusted mutual information between the labels of the nodes fitted alone (the seeds of the
        set search).
    cpdag_ : ndarray (d, d) of int
        The orientations the data identify: ``cpdag_[i, j] = 1, cpdag_[j, i] = 0`` for an identified
        ``i -> j``, both 1 for an edge either orientation fits (see ``certkit.causal.cpdag``).
    identified_ : ndarray (d, d) of bool
        True for each edge of ``adjacency_`` whose orientation every DAG in the equivalence class of
        the fitted graph shares (same skeleton, same v-structures with the mixing variables added as
        sources; Meek's rules); with spline mechanisms also the edges whose covered reversal costs more
        than ``orientation_threshold`` and what Meek's rules derive from them. Other orientations are
        arbitrary. A statement about the fitted graph, not a guarantee about the true one (see
        docs/causal.md).
    orientation_sources_ : dict[tuple[str, str], str]
        For each identified orientation (cause, effect) by name, where it comes from: ``"v-structure"``,
        ``"mixing variable"`` (a latent switches the effect but not the cause), ``"spline score"`` (the
        reversal costs more than ``orientation_threshold``) or ``"Meek's rules"`` (derived from the
        others); see ``certkit.causal.equivalence.orientation_sources``.
    node_scores_ : ndarray (d,)
        Local BIC of each node fitted alone given its parents (the search's score).
    score_ : float
        Total BIC of the model: the joint BIC of every mixing variable plus the ``K = 1`` BIC of
        every other node.
    n_scores_ : int
        Number of distinct local scores computed (summed over the fits of ``"auto"``, which share their
        scores: see ``LatentBIC``'s ``shared_scores``).
    feature_names_in_ : tuple of str
        Column names (``x0, x1, ...`` for arrays).
    data_key_ : int
        The fingerprint of the data (its rows sorted by value) that keys the EM starts; the same for
        any row order, and how ``edge_stability`` checks that a fitted estimator was fitted on its ``X``.
    """

    def __init__(
        self,
        max_components: int = 5,
        *,
        search: str = "topic",
        component_search: str = "greedy",
        refine_threshold: float | None = 2.0,
        max_parents: int | None = None,
        search_samples: int | None = None,
        mixing_threshold: float = 0.03,
        max_groups: int | None = None,
        n_init: int = 3,
        max_iter: int = 100,
        tol: float = 1e-5,
        min_variance: float = 1e-3,
        mechanism: str = "auto",
        n_knots: int | str = "bic",
        orientation_threshold: float = 10.0,
        standardize: bool = True,
        rng: RNGLike = None,
        executor: ExecutorArg = None,
        progress: Progress = False,
    ) -> None:
        self.max_components = max_components
        self.search = search
        self.component_search = component_search
        self.refine_threshold = refine_threshold
        self.max_parents = max_parents
        self.search_samples = search_samples
        self.mixing_threshold = mixing_threshold
        self.max_groups = max_groups
        self.n_init = n_init
        self.max_iter = max_iter
        self.tol = tol
        self.min_variance = min_variance
        self.mechanism = mechanism
        self.n_knots = n_knots
        self.orientation_threshold = orientation_threshold
        self.standardize = standardize
        self.rng = rng
        self.executor = executor
        self.progress = progress

    def _settings(self, n: int, d: int, seed: int, mechanism: str) -> ScoreSettings:
        k = check_integer(self.max_components, "max_components", minimum=1)
        n_knots = check_n_knots(self.n_knots)
        need = n_mixture_parameters(k, max_width(d, mechanism, n_knots))
        if n < need:
            per_parent = max_width(2, mechanism, n_knots) - 1
            widest = "" if mechanism == "linear" else f" (spline bases of up to {per_parent} columns each)"
            raise ValueError(
                f"X has {n} samples, fewer than the {need} parameters of a {k}-component mixture of "
                f"regressions on all other {d - 1} variables{widest}; use more samples or a smaller "
                "max_components" + ("" if mechanism == "linear" else ", n_knots or mechanism='linear'")
            )
        return ScoreSettings(
            max_components=k,
            n_init=check_integer(self.n_init, "n_init", minimum=1, maximum=MAX_STARTS),
            max_iter=check_integer(self.max_iter, "max_iter", minimum=1),
            tol=check_positive(self.tol, "tol"),
            min_variance=check_positive(self.min_variance, "min_variance"),
            seed=seed,
            greedy_components=check_in_options(self.component_search, "component_search", ("greedy", "full"))
            == "greedy",
            mechanism=mechanism,
            n_knots=n_knots,
        )

    def fit(self, X: Any, y: Any = None) -> CausalMixtureModel:
        """Learn the graph, the mechanisms and the mixing variables from ``X`` (n, d).

        Parameters
        ----------
        X : array-like or DataFrame (n, d)
            Pooled samples; numeric, finite, no constant column.
        y : ignored
            Present for scikit-learn compatibility.

        Returns
        -------
        self
        """
        X, names = check_data(X)
        mechanism = check_in_options(self.mechanism, "mechanism", ESTIMATOR_MECHANISMS)
        # Each mechanism is fitted into a fresh copy (the executor shared, not copied: a Dask client
        # cannot be deep-copied), so a fit that raises leaves this estimator as it was.
        params = self.get_params(deep=False)
        # what decides the fit (a pool is not kept alive)
        fitted_params = {k: v for k, v in params.items() if k not in RUN_ONLY_PARAMS}
        if self.search_samples is not None and (
            self.rng is None or isinstance(self.rng, np.random.Generator)
        ):
            # one subsample for every fit of "auto" (an int rng gives each fit the same one already)
            params["rng"] = int(check_rng(self.rng).integers(0, 2**63 - 1))
        # the local scores are shared between the fits (the same search rows; a spline score whose
        # parents all enter linearly is the linear score)
        shared_scores: dict = {}

        # One pool for every fit (a pool's workers start once: each imports certkit, 2-4 s), and one
        # native thread here as in the workers: a score never depends on where it was computed.
        with single_threaded(), resolve_executor(self.executor) as opened:
            # a pool opened here starts its workers only for a batch that pays for them
            executor = StartingPool(opened) if opened is not None and opened is not self.executor else opened

            def fit_one(option: str, graph: tuple[np.ndarray, tuple[int, ...]] | None) -> CausalMixtureModel:
                model = type(self)(**{**params, "mechanism": option})
                model._fit(X, names, option, graph=graph, shared_scores=shared_scores, executor=executor)
                return model

            if mechanism == "auto":
                splines = type(self)(**{**params, "mechanism": "spline"})
                chosen, fits, n_scores = fit_auto(fit_one, splines=lambda: splines._enough_rows(*X.shape))
            else:
                chosen = mechanism
                fits = {mechanism: fit_one(mechanism, None)}
                n_scores = fits[mechanism].n_scores_
        self.__dict__.update({k: v for k, v in vars(fits[chosen]).items() if k.endswith("_")})
        self.mechanism_ = chosen
        self.mechanism_scores_ = {option: model.score_ for option, model in fits.items()}
        self.n_scores_ = n_scores
        # the parameters of this fit (edge_stability refits with them; summary() reports the mechanism
        # asked for) and whether X named its columns
        self._fit_params, self._named_columns = fitted_params, names is not None
        return self

    def _enough_rows(self, n: int, d: int) -> bool:
        """Whether ``n`` rows (and ``search_samples`` of them for the search) fit this mechanism's
        mixtures on all other variables."""
        try:
            self._search_size(self._settings(n, d, 0, self.mechanism), d)
        except ValueError:
            return False
        return True

    def _search_size(self, settings: ScoreSettings, d: int) -> int | None:
        """``search_samples``, checked: at least the parameters of the mixtures on all other variables."""
        if self.search_samples is None:
            return None
        width = max_width(d, settings.mechanism, settings.n_knots)
        need = n_mixture_parameters(settings.max_components, width)
        return check_integer(self.search_samples, "search_samples", minimum=need)

    def _fit(
        self,
        X: np.ndarray,
        names: tuple[str, ...] | None,
        mechanism: str,
        graph: tuple[np.ndarray, tuple[int, ...]] | None = None,
        shared_scores: dict | None = None,
        executor: ExecutorLike | None = None,
    ) -> None:
        """``fit`` with one mechanism on validated ``X``: sets every fitted attribute but ``mechanism_``
        (``certkit.causal.mechanism_fit.fit_mechanism``). ``graph`` (adjacency, topological order)
        replaces the search; ``shared_scores`` is ``LatentBIC``'s; ``executor`` an open pool (``fit``
        opens one for all its fits) or None (serial)."""
        with single_threaded():
            fitted = fit_mechanism(
                self, X, names, mechanism, executor=executor, graph=graph, shared_scores=shared_scores
            )
        self.__dict__.update(fitted)

    def __getattr__(self, name: str) -> Any:
        # Only reached when normal lookup fails: a fitted attribute read before fit() gets sklearn's
        # NotFittedError (an AttributeError, so hasattr() stays False) instead of a bare AttributeError.
        if name.endswith("_") and not name.startswith("_"):
            from sklearn.exceptions import NotFittedError

            raise NotFittedError(
                f"This CausalMixtureModel instance is not fitted yet; call fit(X) before reading {name}"
            )
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def edges(self) -> list[tuple[str, str]]:
        """The edges as (cause, effect) name pairs."""
        check_is_fitted(self, "adjacency_", method="fit")
        names = self.feature_names_in_
        return [(names[i], names[j]) for i, j in zip(*np.nonzero(self.adjacency_))]

    def summary(self) -> str:
        """Edges, mechanisms per node, mixing variables and orientations as plain text, then a ``caveat:``
        line for each caveat of docs/causal.md the fit meets (``certkit.causal.report.caveats``)."""
        check_is_fitted(self, "adjacency_", method="fit")
        return report.summary(self)
