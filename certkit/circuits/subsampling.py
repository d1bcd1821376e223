r"""The subsampling certificate of a circuit: `certify_circuit`.

The discovery routine runs on random subsamples of the concept dataset (`certkit.circuits.votes`);
family-wise Clopper–Pearson bounds on every component's vote probability become certified radii
(`certkit.circuits.radius`).  The deterministic partition variant is in `certkit.circuits.partition`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from certkit._typing import ExecutorArg, Progress, RNGLike
from certkit._validation import (
    check_bool,
    check_in_options,
    check_integer,
    check_level,
    check_progress,
    check_rng,
    seed_from_rng,
)
from certkit.circuits.radius import THREATS, radius_from_bounds
from certkit.circuits.result import CircuitCertificate
from certkit.circuits.sampling import Sampling
from certkit.circuits.score_rule import ScoreRule
from certkit.circuits.votes import concept_size, count_votes
from certkit.stats import clopper_pearson

__all__ = ["certify_circuit"]

# The `scheme` argument of certify_circuit.
_SCHEMES = ("subsample", "poisson")
# Default number of selection runs of the Poisson-deletion procedure (the spec's n0).
_DEFAULT_SELECTION = 100


def certify_circuit(
    discover: Callable[[Any], Any] | ScoreRule,
    X_concept: Any = None,
    *,
    subsample_size: int | None = None,
    n_subsamples: int = 1000,
    radius: int = 1,
    confidence_level: float = 0.999,
    replacement: bool = False,
    scheme: str | None = None,
    deletion_prob: float | None = None,
    n_selection: int | None = None,
    threat: str = "edit",
    rng: RNGLike = None,
    executor: ExecutorArg = None,
    progress: Progress = False,
    n_threads: int = 1,
) -> CircuitCertificate:
    r"""Certify every component's inclusion in a circuit against edits of the concept dataset.

    The discovery algorithm is run on ``n_subsamples`` random subsamples of ``X_concept``; each
    component's vote fraction gives Clopper–Pearson bounds on its inclusion probability
    $p_j$, jointly valid for all $N$ components with probability ``confidence_level``
    (Bonferroni); `certkit.circuits.certified_radius` turns them into the largest edit
    distance of the concept dataset under which the smoothed decision (include iff
    $p_j > 1/2$) provably stays.  Components whose decision is not certified at ``radius``
    are abstained from.

    Parameters
    ----------
    discover : callable or ScoreRule
        ``discover(X_subset) -> bool array (N,)``: any deterministic circuit-discovery routine
        (it must be picklable to run through a process pool or Dask).  ``X_subset`` is a subset of
        the rows of ``X_concept`` (same type: NumPy array, torch tensor or list); an empty
        subsample is never passed (it includes nothing).  Or a `ScoreRule`, evaluated on
        all subsamples by the compiled kernel.
    X_concept : array-like, torch.Tensor or sequence, optional
        The concept dataset (``n`` examples along the first axis).  Optional for a ScoreRule (its
        score rows are the examples).
    subsample_size : int, optional
        ``m``, the subsample size for ``scheme="subsample"`` (``m <= n`` without replacement).
    n_subsamples : int, default 1000
        Number of estimation runs.
    radius : int, default 1
        Edit distance at which ``included`` / ``excluded`` / ``abstained`` are reported.
    confidence_level : float, default 0.999
        Family-wise confidence of the certificate over all components.
    replacement : bool, default False
        Draw the ``m`` examples with replacement (bagging).
    scheme : {"subsample", "poisson"}, optional
        ``"subsample"``: uniform subsamples of size ``subsample_size``; ``"poisson"``: randomized
        deletion, every example kept independently with probability ``1 - deletion_prob`` (the
        mechanism of the certified-circuits paper).  Default: ``"poisson"`` if ``deletion_prob`` is
        given, else ``"subsample"``.
    deletion_prob : float in (0, 1), optional
        Deletion probability of the Poisson scheme (required for it).
    n_selection : int, optional
        Selection runs.  ``0``: the decision of each component is the majority of the estimation
        runs and both Clopper–Pearson sides are used (level split over $2N$ tails).
        ``> 0``: the paper's procedure, the decision $\hat y_j$ is guessed by majority from
        ``n_selection`` separate runs, and only a one-sided lower bound on the agreement
        probability with $\hat y_j$ is needed (level split over $N$).  Default: 100 for
        ``"poisson"`` (the paper's default procedure), 0 for ``"subsample"``.
    threat : {"edit", "substitution", "insertion", "deletion"}, default "edit"
        The perturbation model of the radius (see `certified_radius`).
    rng : None, int or numpy.random.Generator, default None
        Seeds the subsamples (the same seed gives the same subsamples for a ScoreRule and for a
        callable, so both paths give identical counts for the same rule).
    executor : None, int, Executor or dask.distributed.Client
        Where black-box runs execute (see `certkit.parallel`); ignored for a ScoreRule.
    progress : bool or str, default False
        Progress bar for black-box runs (a str is its label).
    n_threads : int, default 1
        Threads of the kernel for a ScoreRule (results do not depend on it).

    Returns
    -------
    CircuitCertificate

    Raises
    ------
    ValueError
        Empty concept set, ``subsample_size > n`` without replacement, bad options, masks of
        changing length.
    TypeError
        Non-boolean masks from ``discover``, wrongly typed options.

    Notes
    -----
    The certificate assumes ``discover`` is deterministic (fix its seeds inside) and a function
    of the *multiset* of examples it receives: their order (draw order for uniform subsamples,
    dataset order for Poisson deletion) must not matter beyond floating-point rounding.  The guarantee
    is on the *smoothed* circuit: with probability ``confidence_level`` over the subsamples, for
    every component with ``certified_radius >= r`` and every concept dataset $S'$ within
    edit distance $r$, the smoothed decision on $S'$ equals the reported one.
    """
    n = concept_size(discover, X_concept)
    n_runs = check_integer(n_subsamples, "n_subsamples", minimum=1)
    radius = check_integer(radius, "radius", minimum=0)
    level = check_level(confidence_level)
    check_in_options(threat, "threat", THREATS)
    sampling = _choose_sampling(n, scheme, subsample_size, replacement, deletion_prob)
    progress = check_progress(progress)
    n_threads = check_integer(n_threads, "n_threads", minimum=1)
    if n_selection is None:
        n_selection = _DEFAULT_SELECTION if sampling.scheme == "poisson" else 0
    n_selection = check_integer(n_selection, "n_selection", minimum=0)

    gen = check_rng(rng)
    seed_selection, seed_estimation = seed_from_rng(gen), seed_from_rng(gen)
    label = progress if isinstance(progress, str) else "certify_circuit"
    votes = functools.partial(
        count_votes, discover, X_concept, sampling, executor=executor, n_threads=n_threads
    )
    counts = votes(n_runs=n_runs, seed=seed_estimation, progress=progress and label)
    if n_selection == 0:
        smoothed = 2 * counts > n_runs
        lower, upper = clopper_pearson(counts, n_runs, confidence_level=level, n_tests=counts.size)
    else:
        selection_label = progress and f"{label} (selection)"
        try:
            selection = votes(n_runs=n_selection, seed=seed_selection, progress=selection_label)
        except ValueError as exc:  # the runs are called n_subsamples in the kernels' size checks
            raise ValueError(f"n_selection={n_selection} selection runs: {exc}") from exc
        if selection.size != counts.size:
            raise ValueError(
                f"discover returned masks of changing length ({selection.size} in selection runs, "
                f"{counts.size} in estimation runs)"
            )
        smoothed = 2 * selection > n_selection
        lower, upper = _agreement_bounds(counts, n_runs, smoothed, level)
    return CircuitCertificate.from_radii(
        certified_radius=radius_from_bounds(lower, upper, sampling, threat),
        lower=lower,
        radius=radius,
        smoothed=smoothed,
        vote_fraction=counts / n_runs,
        upper=upper,
        counts=counts,
        n_runs=n_runs,
        threat=threat,
        confidence_level=level,
        scheme=sampling.scheme,
        n_examples=n,
        subsample_size=sampling.m,
        deletion_prob=sampling.deletion_prob,
        n_selection=n_selection,
    )


def _choose_sampling(
    n: int, scheme: str | None, subsample_size: Any, replacement: Any, deletion_prob: Any
) -> Sampling:
    """The `Sampling` of `certify_circuit`'s arguments (`scheme` defaults from `deletion_prob`)."""
    replacement = check_bool(replacement, "replacement")
    if scheme is None:
        scheme = "poisson" if deletion_prob is not None else "subsample"
    check_in_options(scheme, "scheme", _SCHEMES)
    if scheme == "poisson":
        if deletion_prob is None:
            raise ValueError('scheme="poisson" needs deletion_prob (e.g. 0.9: each example deleted w.p. 0.9)')
        if subsample_size is not None or replacement:
            raise ValueError('scheme="poisson" takes deletion_prob only (no subsample_size / replacement)')
        return Sampling.poisson(n, deletion_prob)
    if deletion_prob is not None:
        raise ValueError('deletion_prob is only used with scheme="poisson"')
    if subsample_size is None:
        raise ValueError("subsample_size (m) is required for scheme='subsample' (or give deletion_prob for "
                         "scheme='poisson')")
    return Sampling.uniform(n, subsample_size, replacement=replacement, name="subsample_size")


def _agreement_bounds(
    counts: np.ndarray, n_runs: int, smoothed: np.ndarray, level: float
) -> tuple[np.ndarray, np.ndarray]:
    """Bounds on the vote probabilities from one-sided bounds on the agreement with `smoothed`."""
    agree = np.where(smoothed, counts, n_runs - counts)
    low_agree, _ = clopper_pearson(
        agree, n_runs, confidence_level=level, alternative="greater", n_tests=counts.size
    )
    return np.where(smoothed, low_agree, 0.0), np.where(smoothed, 1.0, 1.0 - low_agree)
