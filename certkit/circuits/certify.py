"""Certified circuits: run a discovery algorithm on random subsamples and certify every component.

:func:`certify_circuit` wraps any black-box discovery routine ``discover(X_subset) -> bool mask (N,)``
(or a :class:`ScoreRule`, evaluated for all subsamples at once by the compiled kernel), estimates
each component's vote probability with family-wise Clopper–Pearson bounds and turns them into
per-component certified radii with :func:`certkit.circuits.certified_radius`.
:func:`certify_circuit_partition` is the deterministic partition (DPA) variant.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from certkit._results import ResultMixin, format_table
from certkit._validation import (
    as_numpy,
    check_array,
    check_in_options,
    check_integer,
    check_level,
    check_probability,
    check_rng,
    seed_from_rng,
)
from certkit.circuits.certificate import THREATS, certified_radius, partition_radius

__all__ = [
    "CircuitCertificate",
    "ScoreRule",
    "certify_circuit",
    "certify_circuit_partition",
    "example_parts",
]

_SCHEMES = ("subsample", "poisson")
# Default number of selection runs of the Poisson-deletion procedure (the spec's n0).
_DEFAULT_SELECTION = 100


@dataclasses.dataclass(frozen=True)
class ScoreRule:
    """A score-decomposable discovery rule over a per-example score matrix.

    On a subsample :math:`T` the score of component :math:`j` is the mean of ``scores[i, j]`` over
    the rows :math:`i \\in T`; the rule includes the ``top_k`` highest (ties to the lower index) or
    every component whose mean is ``>= threshold``.  An empty subsample includes nothing.
    Given to :func:`certify_circuit`, all subsamples are evaluated by the compiled kernel
    ``certkit._core.subsample_votes`` (no Python per subsample).

    Parameters
    ----------
    scores : array-like of shape (n, N)
        Per-example component scores (finite), row ``i`` belonging to example ``i`` of the
        concept dataset, e.g. from :func:`certkit.circuits.neuron_scores`.
    top_k : int, optional
        Include the ``top_k`` components with the largest mean score (``1 <= top_k <= N``).
    threshold : float, optional
        Include the components with mean score ``>= threshold``.  Give exactly one of the two.
    """

    scores: np.ndarray
    top_k: int | None = None
    threshold: float | None = None

    def __post_init__(self) -> None:
        scores = check_array(self.scores, "scores", ndim=2)
        scores = np.ascontiguousarray(scores, dtype=np.float64)
        if (self.top_k is None) == (self.threshold is None):
            raise ValueError("ScoreRule needs exactly one of top_k and threshold")
        if self.top_k is not None:
            check_integer(self.top_k, "top_k", minimum=1, maximum=scores.shape[1])
            object.__setattr__(self, "top_k", int(self.top_k))
        else:
            thr = check_array(self.threshold, "threshold", ndim=0)
            object.__setattr__(self, "threshold", float(thr))
        object.__setattr__(self, "scores", scores)

    @property
    def n_components(self) -> int:
        """Number of components ``N``."""
        return int(self.scores.shape[1])

    def select(self, mean_scores: Any) -> np.ndarray:
        """The rule applied to a vector of mean scores: a boolean mask of shape (N,)."""
        mean = check_array(mean_scores, "mean_scores", shape=(self.n_components,))
        if self.top_k is not None:
            order = np.lexsort((np.arange(mean.size), -mean))
            mask = np.zeros(mean.size, dtype=bool)
            mask[order[: self.top_k]] = True
            return mask
        return mean >= self.threshold

    def discover(self, rows: Any = None) -> np.ndarray:
        """The rule on the examples ``rows`` (all by default): the unsmoothed, uncertified circuit."""
        if rows is None:
            return self.select(self.scores.mean(axis=0))
        idx = check_array(rows, "rows", ndim=1, dtype=int, allow_empty=True)
        if idx.size == 0:
            return np.zeros(self.n_components, dtype=bool)
        return self.select(self.scores[idx].mean(axis=0))

    def _kernel_rule(self) -> dict[str, Any]:
        if self.top_k is not None:
            return {"top_k": self.top_k}
        return {"threshold": self.threshold}


@dataclasses.dataclass(frozen=True)
class CircuitCertificate(ResultMixin):
    """Per-component certified inclusion decisions (from :func:`certify_circuit`).

    Attributes
    ----------
    included, excluded, abstained : numpy.ndarray of bool, shape (N,)
        Decisions at the requested ``radius``: certified in the circuit, certified out of it, or
        not certified either way.  The certified circuit is ``included``.
    certified_radius : numpy.ndarray of int64, shape (N,)
        Largest radius (in the ``threat`` model) at which each decision is certified;
        ``-1``: abstain even on the concept dataset itself.
    smoothed : numpy.ndarray of bool, shape (N,)
        The smoothed (majority-vote) circuit, without certificate.
    vote_fraction : numpy.ndarray of float64, shape (N,)
        Fraction of the estimation runs that included each component.
    p_lower, p_upper : numpy.ndarray of float64, shape (N,)
        Confidence bounds on each inclusion probability, jointly valid for all components with
        probability ``confidence_level`` (for the partition variant: the exact vote fraction).
    counts : numpy.ndarray of int64, shape (N,)
        Number of estimation runs that included each component.
    n_runs : int
        Number of estimation runs (subsamples or partitions).
    radius : int
        The requested radius.
    threat : str
        ``"edit"``, ``"substitution"``, ``"insertion"`` or ``"deletion"``.
    confidence_level : float
        Family-wise confidence of the bounds (1.0 for the deterministic partition variant).
    scheme : str
        ``"without_replacement"``, ``"with_replacement"``, ``"poisson"`` or ``"partition"``.
    n_examples : int
        Size of the concept dataset.
    subsample_size : int or None
        ``m`` for uniform subsampling.
    deletion_prob : float or None
        Deletion probability for Poisson deletion.
    n_selection : int
        Selection runs used to guess each decision (0: two-sided bounds on all runs).
    """

    included: np.ndarray
    excluded: np.ndarray
    abstained: np.ndarray
    certified_radius: np.ndarray
    smoothed: np.ndarray
    vote_fraction: np.ndarray
    p_lower: np.ndarray
    p_upper: np.ndarray
    counts: np.ndarray
    n_runs: int
    radius: int
    threat: str
    confidence_level: float
    scheme: str
    n_examples: int
    subsample_size: int | None
    deletion_prob: float | None
    n_selection: int

    @property
    def circuit(self) -> np.ndarray:
        """Indices of the certified-included components."""
        return np.flatnonzero(self.included)

    def at_radius(self, radius: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(included, excluded, abstained)`` at another radius (no new runs needed)."""
        r = check_integer(radius, "radius", minimum=0)
        decided = self.certified_radius >= r
        included = decided & (self.p_lower > 0.5)
        excluded = decided & ~included
        return included, excluded, ~decided

    def summary(self) -> str:
        """A table of the decisions and of the certified radii."""
        n_comp = self.included.size
        rows: list[Sequence[Any]] = [
            ("components N", n_comp),
            ("concept examples n", self.n_examples),
            ("scheme", self.scheme),
            ("subsample size m", "-" if self.subsample_size is None else self.subsample_size),
            ("deletion prob", "-" if self.deletion_prob is None else self.deletion_prob),
            ("runs (estimation)", self.n_runs),
            ("selection runs", self.n_selection),
            ("confidence level", self.confidence_level),
            ("threat / radius", f"{self.threat} / {self.radius}"),
            ("smoothed circuit size", int(self.smoothed.sum())),
            ("certified included", int(self.included.sum())),
            ("certified excluded", int(self.excluded.sum())),
            ("abstained", int(self.abstained.sum())),
        ]
        decided = self.certified_radius[self.certified_radius >= 0]
        if decided.size:
            rows.append(("median radius (decided)", float(np.median(decided))))
            rows.append(("max radius", int(decided.max())))
        return format_table(("quantity", "value"), rows, title="Certified circuit")


# --------------------------------------------------------------------------------------------------
# black-box runs


def _take(X: Any, idx: np.ndarray) -> Any:
    """Rows ``idx`` of a NumPy array, a torch tensor or a Python sequence."""
    if isinstance(X, np.ndarray):
        return X[idx]
    if type(X).__module__.startswith("torch"):
        import torch

        return X[torch.from_numpy(idx)]
    if isinstance(X, (list, tuple)):
        return [X[int(i)] for i in idx]
    return X[idx]


def _as_mask(raw: Any, run: int) -> np.ndarray:
    """Validate one mask returned by ``discover``."""
    try:
        mask = as_numpy(raw, "mask")
    except TypeError:
        raise TypeError(
            f"discover returned {type(raw).__name__} for subsample {run}; it must return a boolean array of "
            "shape (N,) (True = component included)"
        ) from None
    if mask.dtype != np.bool_:
        raise TypeError(
            f"discover returned a mask of dtype {mask.dtype} for subsample {run}; it must return a boolean "
            "array of shape (N,) (convert with `mask.astype(bool)` if 0/1 is intended)"
        )
    if mask.ndim != 1 or mask.size == 0:
        raise ValueError(
            f"discover returned a mask of shape {mask.shape} for subsample {run}; "
            "it must be 1-D of length N >= 1"
        )
    return mask


def _run_chunk(
    discover: Callable[[Any], Any], X: Any, first: int, subsets: list[np.ndarray]
) -> tuple[np.ndarray, int]:
    """Run ``discover`` on the subsets; returns (inclusion counts, N).  Empty subsets include nothing."""
    counts: np.ndarray | None = None
    for offset, idx in enumerate(subsets):
        if idx.size == 0:
            continue
        mask = _as_mask(discover(_take(X, idx)), first + offset)
        if counts is None:
            counts = np.zeros(mask.size, dtype=np.int64)
        elif mask.size != counts.size:
            raise ValueError(
                f"discover returned masks of changing length ({counts.size} before, {mask.size} "
                f"for subsample "
                f"{first + offset}); every mask must have one entry per component"
            )
        counts += mask
    return (np.zeros(0, dtype=np.int64) if counts is None else counts), (
        -1 if counts is None else counts.size
    )


def _chunk_task(
    args: tuple[int, list[np.ndarray]], *, discover: Callable[[Any], Any], X: Any
) -> tuple[np.ndarray, int]:
    return _run_chunk(discover, X, args[0], args[1])


def _black_box_counts(
    discover: Callable[[Any], Any], X: Any, subsets: list[np.ndarray], executor: Any, progress: bool | str
) -> np.ndarray:
    from certkit.parallel import parallel_map

    size = max(1, math.ceil(len(subsets) / 100))
    chunks = [(start, subsets[start : start + size]) for start in range(0, len(subsets), size)]
    task = functools.partial(_chunk_task, discover=discover, X=X)
    results = parallel_map(task, chunks, executor=executor, progress=progress)
    sizes = {n_comp for _, n_comp in results if n_comp >= 0}
    if not sizes:
        raise ValueError(
            "every subsample was empty, so discover never ran; lower deletion_prob or use more data"
        )
    if len(sizes) > 1:
        raise ValueError(
            f"discover returned masks of changing length ({sorted(sizes)}); "
            "every mask must have one entry per "
            "component"
        )
    n_comp = sizes.pop()
    total = np.zeros(n_comp, dtype=np.int64)
    for counts, size_ in results:
        if size_ >= 0:
            total += counts
    return total


def _subsets(scheme: str, n: int, m: int, keep: float, n_runs: int, seed: int) -> list[np.ndarray]:
    from certkit import _core

    if scheme == "poisson":
        masks = _core.deletion_masks(n, keep, n_runs, seed)
        return [np.flatnonzero(row) for row in masks]
    rows = _core.subsample_indices(n, m, n_runs, scheme == "with_replacement", seed)
    return list(rows)


def _vote_counts(
    discover: Any,
    X: Any,
    scheme: str,
    n: int,
    m: int,
    keep: float,
    n_runs: int,
    seed: int,
    executor: Any,
    progress: bool | str,
    n_threads: int,
) -> np.ndarray:
    if isinstance(discover, ScoreRule):
        from certkit import _core

        return np.asarray(
            _core.subsample_votes(
                discover.scores,
                scheme=scheme,
                m=m,
                keep_prob=keep if scheme == "poisson" else math.nan,
                n_subsamples=n_runs,
                seed=seed,
                n_threads=n_threads,
                **discover._kernel_rule(),
            ),
            dtype=np.int64,
        )
    return _black_box_counts(discover, X, _subsets(scheme, n, m, keep, n_runs, seed), executor, progress)


def _concept_size(discover: Any, X_concept: Any) -> int:
    if isinstance(discover, ScoreRule):
        n_rows = discover.scores.shape[0]
        if X_concept is not None and len(X_concept) != n_rows:
            raise ValueError(
                f"X_concept has {len(X_concept)} examples but the ScoreRule has scores for {n_rows}; "
                "row i of the scores must belong to example i"
            )
        return n_rows
    if not callable(discover):
        raise TypeError(
            f"discover must be a callable (X_subset -> bool mask of shape (N,)) or a ScoreRule, got "
            f"{type(discover).__name__}"
        )
    if X_concept is None:
        raise ValueError("X_concept is required when discover is a callable")
    try:
        n = len(X_concept)
    except TypeError:
        raise TypeError(
            f"X_concept must be a sized collection of examples, got {type(X_concept).__name__}"
        ) from None
    if n == 0:
        raise ValueError("X_concept must not be empty (the concept dataset has no examples)")
    return n


def _check_progress(progress: Any) -> bool | str:
    if not isinstance(progress, (bool, np.bool_, str)):
        raise TypeError(f"progress must be a bool or a str, got {type(progress).__name__}")
    return progress if isinstance(progress, str) else bool(progress)


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
    rng: int | np.random.Generator | None = 0,
    executor: Any = None,
    progress: bool | str = True,
    n_threads: int = 1,
) -> CircuitCertificate:
    r"""Certify every component's inclusion in a circuit against edits of the concept dataset.

    The discovery algorithm is run on ``n_subsamples`` random subsamples of ``X_concept``; each
    component's vote fraction gives Clopper–Pearson bounds on its inclusion probability
    :math:`p_j`, jointly valid for all :math:`N` components with probability ``confidence_level``
    (Bonferroni); :func:`certkit.circuits.certified_radius` turns them into the largest edit
    distance of the concept dataset under which the smoothed decision (include iff
    :math:`p_j > 1/2`) provably stays.  Components whose decision is not certified at ``radius``
    are abstained from.

    Parameters
    ----------
    discover : callable or ScoreRule
        ``discover(X_subset) -> bool array (N,)``: any deterministic circuit-discovery routine
        (it must be picklable to run through a process pool or Dask).  ``X_subset`` is a subset of
        the rows of ``X_concept`` (same type: NumPy array, torch tensor or list); an empty
        subsample is never passed (it includes nothing).  Or a :class:`ScoreRule`, evaluated on
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
        runs and both Clopper–Pearson sides are used (level split over :math:`2N` tails).
        ``> 0``: the paper's procedure, the decision :math:`\hat y_j` is guessed by majority from
        ``n_selection`` separate runs, and only a one-sided lower bound on the agreement
        probability with :math:`\hat y_j` is needed (level split over :math:`N`).  Default: 100 for
        ``"poisson"`` (the paper's default procedure), 0 for ``"subsample"``.
    threat : {"edit", "substitution", "insertion", "deletion"}, default "edit"
        The perturbation model of the radius (see :func:`certified_radius`).
    rng : None, int or numpy.random.Generator, default 0
        Seeds the subsamples (the same seed gives the same subsamples for a ScoreRule and for a
        callable, so both paths give identical counts for the same rule).
    executor : None, int, Executor or dask.distributed.Client
        Where black-box runs execute (see :mod:`certkit.parallel`); ignored for a ScoreRule.
    progress : bool or str, default True
        Progress bar for black-box runs.
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
    every component with ``certified_radius >= r`` and every concept dataset :math:`S'` within
    edit distance :math:`r`, the smoothed decision on :math:`S'` equals the reported one.
    """
    n = _concept_size(discover, X_concept)
    n_runs = check_integer(n_subsamples, "n_subsamples", minimum=1)
    radius = check_integer(radius, "radius", minimum=0)
    level = check_level(confidence_level)
    check_in_options(threat, "threat", THREATS)
    if not isinstance(replacement, (bool, np.bool_)):
        raise TypeError(f"replacement must be a bool, got {type(replacement).__name__}")
    if scheme is None:
        scheme = "poisson" if deletion_prob is not None else "subsample"
    check_in_options(scheme, "scheme", _SCHEMES)
    progress = _check_progress(progress)
    n_threads = check_integer(n_threads, "n_threads", minimum=1)
    if scheme == "poisson":
        if deletion_prob is None:
            raise ValueError('scheme="poisson" needs deletion_prob (e.g. 0.9: each example deleted w.p. 0.9)')
        if subsample_size is not None or replacement:
            raise ValueError('scheme="poisson" takes deletion_prob only (no subsample_size / replacement)')
        p_del = check_probability(deletion_prob, "deletion_prob", closed=False)
        m, keep, kernel_scheme = 0, 1.0 - p_del, "poisson"
    else:
        if deletion_prob is not None:
            raise ValueError('deletion_prob is only used with scheme="poisson"')
        if subsample_size is None:
            raise ValueError("subsample_size (m) is required for scheme='subsample'")
        m = check_integer(subsample_size, "subsample_size", minimum=1)
        if not replacement and m > n:
            raise ValueError(
                f"subsample_size must be <= n = {n} (the concept dataset size) without replacement, got {m}; "
                "use a smaller subsample_size or replacement=True"
            )
        p_del, keep = None, math.nan
        kernel_scheme = "with_replacement" if replacement else "without_replacement"
    if n_selection is None:
        n_selection = _DEFAULT_SELECTION if scheme == "poisson" else 0
    n_selection = check_integer(n_selection, "n_selection", minimum=0)

    gen = check_rng(rng)
    seed_selection, seed_estimation = seed_from_rng(gen), seed_from_rng(gen)
    label = progress if isinstance(progress, str) else "certify_circuit"
    counts = _vote_counts(
        discover,
        X_concept,
        kernel_scheme,
        n,
        m,
        keep,
        n_runs,
        seed_estimation,
        executor,
        progress and label,
        n_threads,
    )
    n_comp = counts.size

    from certkit.stats import clopper_pearson

    if n_selection == 0:
        low, high = clopper_pearson(counts, n_runs, confidence_level=level, n_tests=n_comp)
        smoothed = 2 * counts > n_runs
    else:
        sel = _vote_counts(
            discover,
            X_concept,
            kernel_scheme,
            n,
            m,
            keep,
            n_selection,
            seed_selection,
            executor,
            progress and f"{label} (selection)",
            n_threads,
        )
        if sel.size != n_comp:
            raise ValueError(
                f"discover returned masks of changing length ({sel.size} in selection runs, {n_comp} in "
                "estimation runs)"
            )
        smoothed = 2 * sel > n_selection
        agree = np.where(smoothed, counts, n_runs - counts)
        low_agree, _ = clopper_pearson(
            agree, n_runs, confidence_level=level, alternative="greater", n_tests=n_comp
        )
        low = np.where(smoothed, low_agree, 0.0)
        high = np.where(smoothed, 1.0, 1.0 - low_agree)
    low = np.atleast_1d(np.asarray(low, dtype=np.float64))
    high = np.atleast_1d(np.asarray(high, dtype=np.float64))
    radii = certified_radius(
        low,
        high,
        n,
        None if scheme == "poisson" else m,
        bool(replacement) and scheme == "subsample",
        deletion_prob=p_del,
        threat=threat,
    )
    decided = radii >= radius
    included = decided & (low > 0.5)
    return CircuitCertificate(
        included=included,
        excluded=decided & ~included,
        abstained=~decided,
        certified_radius=radii,
        smoothed=np.asarray(smoothed, dtype=bool),
        vote_fraction=counts / n_runs,
        p_lower=low,
        p_upper=high,
        counts=counts,
        n_runs=n_runs,
        radius=radius,
        threat=threat,
        confidence_level=level,
        scheme=kernel_scheme,
        n_examples=n,
        subsample_size=None if scheme == "poisson" else m,
        deletion_prob=p_del,
        n_selection=n_selection,
    )


# --------------------------------------------------------------------------------------------------
# deterministic partition aggregation (DPA)


def _example_bytes(example: Any) -> bytes:
    if isinstance(example, str):
        return b"s" + example.encode("utf-8")
    if isinstance(example, bytes):
        return b"b" + example
    arr = np.ascontiguousarray(as_numpy(example, "example"))
    return str(arr.dtype).encode() + str(arr.shape).encode() + arr.tobytes()


def example_parts(X_concept: Any, n_parts: int) -> np.ndarray:
    """Deterministic part of each example: BLAKE2b hash of its bytes (dtype, shape, values) mod ``n_parts``.

    The part of an example depends on its content only, so editing the dataset never moves the
    other examples between parts (the premise of the partition certificate).

    Parameters
    ----------
    X_concept : array-like, torch.Tensor or sequence
        The examples (first axis).  Strings and bytes are hashed as such.
    n_parts : int
        Number of parts.

    Returns
    -------
    numpy.ndarray of int64, shape (n,)
    """
    n_parts = check_integer(n_parts, "n_parts", minimum=1)
    parts = np.empty(len(X_concept), dtype=np.int64)
    for i in range(len(X_concept)):
        digest = hashlib.blake2b(_example_bytes(X_concept[i]), digest_size=8).digest()
        parts[i] = int.from_bytes(digest, "little") % n_parts
    return parts


def certify_circuit_partition(
    discover: Callable[[Any], Any] | ScoreRule,
    X_concept: Any = None,
    *,
    n_parts: int,
    radius: int = 1,
    threat: str = "edit",
    part_of: Any = None,
    executor: Any = None,
    progress: bool | str = True,
) -> CircuitCertificate:
    r"""Deterministic certified circuit by partition aggregation (DPA, Levine & Feizi, ICLR 2021).

    Every example is hashed (by its content, :func:`example_parts`) to one of ``n_parts`` parts;
    ``discover`` runs once on each part, and component :math:`j` is included iff more parts include
    it than exclude it (a tie excludes it).  With :math:`n_A` votes for the decision and :math:`n_B`
    against, the decision survives changes to
    :math:`k^* = \lfloor (n_A - n_B - 1[\text{idx}_B < \text{idx}_A]) / 2 \rfloor` parts
    (:func:`certkit.circuits.partition_radius`, class indices: excluded 0, included 1).  An insertion
    or deletion changes one part, a substitution at most two, so the radius is :math:`k^*` for
    ``threat="insertion"`` / ``"deletion"`` and :math:`\lfloor k^*/2 \rfloor` for ``"edit"`` /
    ``"substitution"``.  No randomness and no confidence level: the certificate holds surely.

    Parameters
    ----------
    discover : callable or ScoreRule
        As in :func:`certify_circuit` (an empty part includes nothing).
    X_concept : array-like, torch.Tensor or sequence, optional
        The concept dataset (optional for a ScoreRule when ``part_of`` is given; if omitted, the
        score rows are hashed).
    n_parts : int
        Number of parts ``B``.
    radius : int, default 1
        Radius at which decisions are reported.
    threat : {"edit", "substitution", "insertion", "deletion"}, default "edit"
    part_of : array-like of int, shape (n,), optional
        Part of every example (overrides the hash; it must depend on each example alone).
    executor, progress
        As in :func:`certify_circuit` (black-box only).

    Returns
    -------
    CircuitCertificate
        ``p_lower = p_upper = vote_fraction``, ``scheme="partition"``, ``n_runs = n_parts``.
    """
    n = _concept_size(discover, X_concept)
    n_parts = check_integer(n_parts, "n_parts", minimum=1)
    radius = check_integer(radius, "radius", minimum=0)
    check_in_options(threat, "threat", THREATS)
    progress = _check_progress(progress)
    if part_of is None:
        source = X_concept if X_concept is not None else discover.scores  # type: ignore[union-attr]
        parts = example_parts(source, n_parts)
    else:
        parts = check_array(part_of, "part_of", ndim=1, dtype=int, shape=(n,))
        if np.any((parts < 0) | (parts >= n_parts)):
            raise ValueError(f"part_of must lie in [0, n_parts) = [0, {n_parts})")
    if isinstance(discover, ScoreRule):
        from certkit import _core

        votes = np.asarray(
            _core.partition_votes(
                discover.scores, n_parts, np.ascontiguousarray(parts), **discover._kernel_rule()
            )
        )
        counts = votes.sum(axis=0).astype(np.int64)
    else:
        subsets = [np.flatnonzero(parts == b) for b in range(n_parts)]
        label = progress if isinstance(progress, str) else "certify_circuit_partition"
        counts = _black_box_counts(discover, X_concept, subsets, executor, progress and label)
    against = n_parts - counts
    included_vote = counts > against
    k_in = partition_radius(counts, against, 1, 0)
    k_out = partition_radius(against, counts, 0, 1)
    k_star = np.where(included_vote, k_in, k_out)
    radii = k_star if threat in ("insertion", "deletion") else np.floor_divide(k_star, 2)
    decided = radii >= radius
    frac = counts / n_parts
    return CircuitCertificate(
        included=decided & included_vote,
        excluded=decided & ~included_vote,
        abstained=~decided,
        certified_radius=radii.astype(np.int64),
        smoothed=included_vote,
        vote_fraction=frac,
        p_lower=frac,
        p_upper=frac,
        counts=counts,
        n_runs=n_parts,
        radius=radius,
        threat=threat,
        confidence_level=1.0,
        scheme="partition",
        n_examples=n,
        subsample_size=None,
        deletion_prob=None,
        n_selection=0,
    )
