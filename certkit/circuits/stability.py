r"""Stability of circuit discovery across concept sets: do disjoint samples of one concept give one circuit?

Circuit discovery is run on a *concept dataset*, a handful of examples of the concept being explained.
`circuit_stability` measures how much the answer depends on which examples were picked: it draws
``n_pairs`` pairs of **disjoint** concept sets of ``set_size`` examples from a pool of examples of the
same concept, discovers a circuit on each set, and reports the Jaccard overlap
$J(A, B) = |A \cap B| / |A \cup B|$ of the two circuits of every pair.  It does so for

* ``"plain"``: the discovery algorithm run once on each set;
* ``"smoothed"``: the majority vote over random subsamples of each set (no certificate);
* ``"certified r=..."``: the components certified as *included* at edit distance ``r`` of each set
  by `certkit.circuits.certify_circuit` (abstained components are left out of the circuit),

with the mean overlap of each method, its confidence interval, and paired differences between methods.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from certkit._results import ConfidenceInterval, ResultMixin, format_table
from certkit._typing import ExecutorArg, Progress, RNGLike
from certkit._validation import (
    as_numpy,
    check_allocation,
    check_array,
    check_in_options,
    check_integer,
    check_level,
    check_progress,
    check_rng,
    seed_from_rng,
)
from certkit.circuits.votes import take_rows

__all__ = ["CircuitStability", "circuit_stability", "jaccard"]

_INTERVALS = ("t", "hoeffding", "bernstein")
# Options of certify_circuit that circuit_stability sets itself.
_RESERVED = ("radius", "rng", "progress", "executor")


def jaccard(mask_a: Any, mask_b: Any) -> np.ndarray | float:
    r"""Jaccard overlap $|A \cap B| / |A \cup B|$ of boolean masks (last axis = components).

    Two empty circuits are identical, so their overlap is 1.

    Parameters
    ----------
    mask_a, mask_b : array-like of bool, shape (..., N)
        Inclusion masks; leading axes broadcast against each other.

    Returns
    -------
    float or numpy.ndarray of float64
        The overlap of every pair of masks (a float for 1-D inputs).

    Examples
    --------
    >>> jaccard([True, True, False, True], [True, False, True, True])
    0.5
    """
    a = check_array(mask_a, "mask_a", dtype=bool)
    b = check_array(mask_b, "mask_b", dtype=bool)
    if a.ndim == 0 or b.ndim == 0 or a.shape[-1] != b.shape[-1]:
        raise ValueError(
            f"mask_a and mask_b must have the components on their last axis and the same number of them, "
            f"got shapes {a.shape} and {b.shape}"
        )
    inter = np.sum(a & b, axis=-1)
    union = np.sum(a | b, axis=-1)
    out = np.where(union == 0, 1.0, inter / np.maximum(union, 1))
    return float(out) if out.ndim == 0 else out


def _mean_interval(values: np.ndarray, level: float, method: str, value_range: tuple[float, float]) -> Any:
    """Two-sided interval for the mean of i.i.d. ``values`` in ``value_range``."""
    from certkit.stats import empirical_bernstein_bound, hoeffding_bound

    n = values.size
    mean = float(np.clip(values.mean(), *value_range))
    if method == "hoeffding":
        low, high = hoeffding_bound(mean, n, confidence_level=level, value_range=value_range)
    elif method == "bernstein":
        var = float(values.var(ddof=1))
        low, high = empirical_bernstein_bound(mean, var, n, confidence_level=level, value_range=value_range)
    else:
        from scipy import stats

        half = stats.t.ppf(0.5 + level / 2.0, n - 1) * values.std(ddof=1) / math.sqrt(n)
        low, high = max(value_range[0], mean - half), min(value_range[1], mean + half)
    return ConfidenceInterval(float(low), float(high))


@dataclasses.dataclass(frozen=True)
class CircuitStability(ResultMixin):
    """Jaccard overlap of circuits discovered on disjoint concept sets (from `circuit_stability`).

    Attributes
    ----------
    methods : tuple of str
        ``"plain"``, then (when certification ran) ``"smoothed"`` and ``"certified r=<r>"`` per radius.
    jaccard : numpy.ndarray of float64, shape (n_methods, n_pairs)
        Overlap of the two circuits of every pair (1 when both are empty).
    sizes : numpy.ndarray of int64, shape (n_methods, n_pairs, 2)
        Circuit sizes on the two sets of every pair.
    mean : numpy.ndarray of float64, shape (n_methods,)
        Mean overlap of each method (its stability).
    intervals : tuple of ConfidenceInterval
        Confidence interval of each mean, at ``confidence_level``.
    radii : tuple of int
        Radii of the certified methods.
    set_size : int
        Examples per concept set.
    n_pool : int
        Size of the pool the sets were drawn from.
    confidence_level : float
    interval : str
        ``"t"`` (Student t, asymptotic), ``"hoeffding"`` or ``"bernstein"`` (distribution-free).
    """

    methods: tuple[str, ...]
    jaccard: np.ndarray
    sizes: np.ndarray
    mean: np.ndarray
    intervals: tuple[ConfidenceInterval, ...]
    radii: tuple[int, ...]
    set_size: int
    n_pool: int
    confidence_level: float
    interval: str

    @property
    def n_pairs(self) -> int:
        """Number of pairs of concept sets."""
        return int(self.jaccard.shape[1])

    def _row(self, method: str) -> int:
        check_in_options(method, "method", self.methods)
        return self.methods.index(method)

    def confidence_interval(self, method: str = "plain") -> ConfidenceInterval:
        """Confidence interval of the mean overlap of ``method``."""
        return self.intervals[self._row(method)]

    def difference(self, method: str, baseline: str = "plain") -> tuple[float, ConfidenceInterval]:
        """Mean paired difference of overlaps ``method - baseline`` and its confidence interval.

        Both methods see the same pairs of sets, so the difference is estimated pair by pair (the
        interval is much narrower than the two separate intervals suggest).
        """
        diff = self.jaccard[self._row(method)] - self.jaccard[self._row(baseline)]
        return float(diff.mean()), _mean_interval(diff, self.confidence_level, self.interval, (-1.0, 1.0))

    def summary(self) -> str:
        """Mean overlap, interval and mean circuit size of every method."""
        pct = f"{100 * self.confidence_level:g}%"
        rows = []
        for i, name in enumerate(self.methods):
            both_empty = int(np.sum(self.sizes[i].sum(axis=1) == 0))
            rows.append(
                [
                    name,
                    float(self.mean[i]),
                    f"[{self.intervals[i].low:.3f}, {self.intervals[i].high:.3f}]",
                    float(self.sizes[i].mean()),
                    both_empty,
                ]
            )
        title = (
            f"Circuit stability: Jaccard overlap over {self.n_pairs} pairs of disjoint concept sets of "
            f"{self.set_size} (pool of {self.n_pool}; {self.interval} intervals)"
        )
        return format_table(
            ["method", "mean Jaccard", f"{pct} interval", "mean size", "pairs both empty"], rows, title=title
        )


def _mask(raw: Any) -> np.ndarray:
    mask = as_numpy(raw, "mask")
    if mask.dtype != np.bool_ or mask.ndim != 1:
        raise TypeError(
            f"discover must return a 1-D boolean mask (True = component included), got dtype {mask.dtype} "
            f"and shape {mask.shape}"
        )
    return mask


def _one_set(
    rows: np.ndarray, seed: int, *, discover: Any, X_pool: Any, radii: tuple[int, ...], options: dict
) -> list[np.ndarray]:
    """Plain, smoothed and certified masks of one concept set (the rows ``rows`` of the pool)."""
    from certkit.circuits import ScoreRule, certify_circuit

    if isinstance(discover, ScoreRule):
        rule = ScoreRule(discover.scores[rows], top_k=discover.top_k, threshold=discover.threshold)
        masks = [rule.discover()]
        target, data = rule, None
    else:
        data = take_rows(X_pool, rows)
        masks = [_mask(discover(data))]
        target = discover
    if not radii:
        return masks
    res = certify_circuit(target, data, radius=0, rng=seed, progress=False, executor=None, **options)
    masks.append(np.asarray(res.smoothed, dtype=bool))
    masks.extend(np.asarray(res.at_radius(r).included, dtype=bool) for r in radii)
    return masks


def _one_pair(
    item: tuple[np.ndarray, np.ndarray, int, int], **kwargs: Any
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    rows_a, rows_b, seed_a, seed_b = item
    return _one_set(rows_a, seed_a, **kwargs), _one_set(rows_b, seed_b, **kwargs)


def circuit_stability(
    discover: Callable[[Any], Any] | Any,
    X_pool: Any = None,
    *,
    set_size: int,
    n_pairs: int,
    radii: Sequence[int] = (1,),
    certify_options: Mapping[str, Any] | None = None,
    confidence_level: float = 0.95,
    interval: str = "t",
    rng: RNGLike = None,
    executor: ExecutorArg = None,
    progress: Progress = False,
) -> CircuitStability:
    r"""Jaccard overlap of the circuits discovered on disjoint concept sets of the same concept.

    For each of ``n_pairs`` pairs, ``2 * set_size`` examples are drawn without replacement from the
    pool and split into two disjoint concept sets $A$ and $B$; the circuit is discovered
    on each, and the pair scores $J = |C_A \cap C_B| / |C_A \cup C_B|$ (1 if both circuits are
    empty).  With ``radii`` non-empty, each set is also certified by
    `certkit.circuits.certify_circuit` (options from ``certify_options``), giving the smoothed
    (majority-vote) circuit and, per radius $r$, the certified circuit: the components
    certified as included at edit distance $r$; abstained components are not in it.

    The pairs are independent draws from the pool, so the overlaps of one method are i.i.d. and
    their mean estimates the expected overlap of two circuits found on random disjoint concept sets
    of this size from this pool.

    Parameters
    ----------
    discover : callable or ScoreRule
        ``discover(X_set) -> bool array (N,)``, deterministic (the same examples give the same mask), as
        for `certkit.circuits.certify_circuit`; or a `certkit.circuits.ScoreRule` whose
        score rows are the pool's examples (each set then uses its rows, and certification runs in the
        compiled kernel).
    X_pool : array-like, torch.Tensor or sequence, optional
        The pool of examples of the concept (first axis); not needed for a ScoreRule.
    set_size : int
        Examples per concept set; ``2 * set_size`` must not exceed the pool.
    n_pairs : int
        Number of pairs of sets (``>= 2``).
    radii : sequence of int, default (1,)
        Radii of the certified circuits (``>= 0``).  Empty: plain discovery only (no certification,
        no smoothed circuit).
    certify_options : mapping, optional
        Keyword arguments of `certkit.circuits.certify_circuit` (``subsample_size``,
        ``deletion_prob``, ``n_subsamples``, ``confidence_level``, ``threat``, ...), except ``radius``,
        ``rng``, ``progress`` and ``executor``, which this function sets.
    confidence_level : float, default 0.95
        Level of the intervals on the mean overlaps (not of the certificates).
    interval : {"t", "hoeffding", "bernstein"}, default "t"
        ``"t"``: Student t interval (asymptotic; the usual choice for a benchmark table).
        ``"hoeffding"`` / ``"bernstein"``: distribution-free intervals for variables in [0, 1]
        (`certkit.stats.hoeffding_bound`, `certkit.stats.empirical_bernstein_bound`),
        valid for any number of pairs but wider.
    rng : None, int or numpy.random.Generator
        Draws the sets and the certification seeds.
    executor : None, int, Executor or dask.distributed.Client
        Runs the pairs in parallel (see `certkit.parallel`); results do not depend on it.
    progress : bool or str, default False
        Progress bar over the pairs.

    Returns
    -------
    CircuitStability

    Raises
    ------
    ValueError
        ``2 * set_size`` larger than the pool, ``n_pairs < 2``, negative radii, reserved or
        unknown options, masks of different lengths.
    TypeError
        A ``discover`` that is not callable or returns non-boolean masks.

    Examples
    --------
    >>> import numpy as np
    >>> from certkit.circuits import ScoreRule, circuit_stability
    >>> scores = np.random.default_rng(0).normal(size=(64, 20)) + np.linspace(0, 2, 20)
    >>> res = circuit_stability(ScoreRule(scores, top_k=5), set_size=16, n_pairs=10,
    ...                         certify_options={"subsample_size": 8, "n_subsamples": 200}, rng=0)
    >>> res.methods
    ('plain', 'smoothed', 'certified r=1')
    """
    from certkit.circuits import ScoreRule

    is_rule = isinstance(discover, ScoreRule)
    if is_rule:
        n_pool = discover.scores.shape[0]
        if X_pool is not None and len(X_pool) != n_pool:
            raise ValueError(
                f"X_pool has {len(X_pool)} examples but the ScoreRule has scores for {n_pool}; "
                "row i of the scores must belong to example i of the pool"
            )
    else:
        if not callable(discover):
            raise TypeError(
                f"discover must be a callable (X_set -> bool mask of shape (N,)) or a ScoreRule, got "
                f"{type(discover).__name__}"
            )
        if X_pool is None:
            raise ValueError("X_pool is required when discover is a callable")
        try:
            n_pool = len(X_pool)
        except TypeError:
            raise TypeError(
                f"X_pool must be a sized collection of examples, got {type(X_pool).__name__}"
            ) from None
    set_size = check_integer(set_size, "set_size", minimum=1)
    n_pairs = check_integer(n_pairs, "n_pairs", minimum=2)
    if 2 * set_size > n_pool:
        raise ValueError(
            f"two disjoint concept sets of set_size={set_size} need {2 * set_size} examples but the pool has "
            f"{n_pool}; lower set_size or give a larger pool"
        )
    # the pairs' row indices and seeds, drawn up front (before any discovery runs)
    check_allocation(
        n_pairs * (16.0 * set_size + 256.0), "n_pairs", n_pairs, what=f"{n_pairs} pairs of concept sets"
    )
    if isinstance(radii, (str, bytes)) or not isinstance(radii, Iterable):
        raise TypeError(f"radii must be a sequence of int radii (e.g. (1, 2)), got {type(radii).__name__}")
    radii_t = tuple(check_integer(r, "radii", minimum=0) for r in radii)
    if len(set(radii_t)) != len(radii_t):
        raise ValueError(f"radii must not repeat a radius, got {radii_t}")
    options = dict(certify_options or {})
    reserved = sorted(set(options) & set(_RESERVED))
    if reserved:
        raise ValueError(f"certify_options must not set {reserved}: circuit_stability sets them itself")
    level = check_level(confidence_level)
    check_in_options(interval, "interval", _INTERVALS)
    progress = check_progress(progress)
    gen = check_rng(rng)

    items = []
    for _ in range(n_pairs):
        rows = gen.permutation(n_pool)[: 2 * set_size]
        items.append(
            (np.sort(rows[:set_size]), np.sort(rows[set_size:]), seed_from_rng(gen), seed_from_rng(gen))
        )
    from certkit.parallel import parallel_map

    task = functools.partial(_one_pair, discover=discover, X_pool=X_pool, radii=radii_t, options=options)
    label = progress if isinstance(progress, str) else "circuit_stability"
    results = parallel_map(task, items, executor=executor, progress=progress and label)

    certified = tuple(f"certified r={r}" for r in radii_t)
    methods = ("plain", "smoothed", *certified) if radii_t else ("plain",)
    lengths = {m.size for a, b in results for m in (*a, *b)}
    if len(lengths) > 1:
        raise ValueError(
            f"discover returned masks of different lengths ({sorted(lengths)}); "
            "every mask must have one entry per component"
        )
    masks_a = np.array([a for a, _ in results]).transpose(1, 0, 2)  # (n_methods, n_pairs, N)
    masks_b = np.array([b for _, b in results]).transpose(1, 0, 2)
    overlap = np.asarray(jaccard(masks_a, masks_b), dtype=np.float64)
    sizes = np.stack([masks_a.sum(axis=2), masks_b.sum(axis=2)], axis=2).astype(np.int64)
    return CircuitStability(
        methods=methods,
        jaccard=overlap,
        sizes=sizes,
        mean=overlap.mean(axis=1),
        intervals=tuple(_mean_interval(row, level, interval, (0.0, 1.0)) for row in overlap),
        radii=radii_t,
        set_size=set_size,
        n_pool=n_pool,
        confidence_level=level,
        interval=interval,
    )
