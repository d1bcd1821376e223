"""The deterministic partition (DPA) certificate of a circuit: `certify_circuit_partition`."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import numpy as np

from certkit._typing import ExecutorArg, Progress
from certkit._validation import as_numpy, check_array, check_in_options, check_integer, check_progress
from certkit.circuits.dpa import partition_radius
from certkit.circuits.radius import THREATS
from certkit.circuits.result import CircuitCertificate
from certkit.circuits.score_rule import ScoreRule
from certkit.circuits.votes import check_concept_set, concept_size, partition_votes

__all__ = ["certify_circuit_partition", "example_parts"]


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
        Number of parts (at most 2**63 - 1: part labels are int64).

    Returns
    -------
    numpy.ndarray of int64, shape (n,)

    Raises
    ------
    TypeError, ValueError
        A dict, an empty collection, or numeric examples with NaN/inf.
    """
    n_parts = check_integer(n_parts, "n_parts", minimum=1, maximum=2**63 - 1)  # part labels are int64
    n = check_concept_set(X_concept)
    parts = np.empty(n, dtype=np.int64)
    for i in range(n):
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
    executor: ExecutorArg = None,
    progress: Progress = False,
) -> CircuitCertificate:
    r"""Deterministic certified circuit by partition aggregation (DPA, Levine & Feizi, ICLR 2021).

    Every example is hashed (by its content, `example_parts`) to one of ``n_parts`` parts;
    ``discover`` runs once on each part, and component $j$ is included iff more parts include
    it than exclude it (a tie excludes it).  With $n_A$ votes for the decision and $n_B$
    against, the decision survives changes to
    $k^* = \lfloor (n_A - n_B - 1[\text{idx}_B < \text{idx}_A]) / 2 \rfloor$ parts
    (`certkit.circuits.partition_radius`, class indices: excluded 0, included 1).  An insertion
    or deletion changes one part, a substitution at most two, so the radius is $k^*$ for
    ``threat="insertion"`` / ``"deletion"`` and $\lfloor k^*/2 \rfloor$ for ``"edit"`` /
    ``"substitution"``.  No randomness and no confidence level: the certificate holds surely.

    Parameters
    ----------
    discover : callable or ScoreRule
        As in `certify_circuit` (an empty part includes nothing).
    X_concept : array-like, torch.Tensor or sequence, optional
        The concept dataset (optional for a ScoreRule when ``part_of`` is given; if omitted, the
        score rows are hashed).
    n_parts : int
        Number of parts ``B`` (at most 2**63 - 1).
    radius : int, default 1
        Radius at which decisions are reported.
    threat : {"edit", "substitution", "insertion", "deletion"}, default "edit"
    part_of : array-like of int, shape (n,), optional
        Part of every example (overrides the hash; it must depend on each example alone).
    executor, progress
        As in `certify_circuit` (black-box only).

    Returns
    -------
    CircuitCertificate
        ``lower = upper = vote_fraction``, ``scheme="partition"``, ``n_runs = n_parts``.
    """
    n = concept_size(discover, X_concept)
    n_parts = check_integer(n_parts, "n_parts", minimum=1, maximum=2**63 - 1)  # part labels are int64
    radius = check_integer(radius, "radius", minimum=0)
    check_in_options(threat, "threat", THREATS)
    progress = check_progress(progress)
    if part_of is None:
        parts = example_parts(X_concept if X_concept is not None else discover.scores, n_parts)  # type: ignore[union-attr]
    else:
        parts = check_array(part_of, "part_of", ndim=1, dtype=int, shape=(n,))
        if np.any((parts < 0) | (parts >= n_parts)):
            raise ValueError(f"part_of must lie in [0, n_parts) = [0, {n_parts})")
    label = progress if isinstance(progress, str) else "certify_circuit_partition"
    counts = partition_votes(
        discover, X_concept, parts, n_parts, executor=executor, progress=progress and label
    )
    against = n_parts - counts
    included_vote = counts > against
    k_star = np.where(
        included_vote, partition_radius(counts, against, 1, 0), partition_radius(against, counts, 0, 1)
    )
    radii = k_star if threat in ("insertion", "deletion") else np.floor_divide(k_star, 2)
    radii = radii.astype(np.int64)
    fraction = counts / n_parts
    return CircuitCertificate.from_radii(
        certified_radius=radii,
        lower=fraction,
        radius=radius,
        smoothed=included_vote,
        vote_fraction=fraction,
        upper=fraction,
        counts=counts,
        n_runs=n_parts,
        threat=threat,
        confidence_level=1.0,
        scheme="partition",
        n_examples=n,
        subsample_size=None,
        deletion_prob=None,
        n_selection=0,
    )
