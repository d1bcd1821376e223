"""`CircuitCertificate`: the frozen result of both circuit certificates."""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from certkit._results import ResultMixin, format_table
from certkit._validation import check_integer

__all__ = ["CircuitCertificate", "decide"]


def decide(radii: np.ndarray, lower: np.ndarray, radius: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`(included, excluded, abstained)` at `radius`: decided where `radii >= radius`, included where
    moreover the lower bound on the vote probability exceeds 1/2."""
    decided = radii >= radius
    included = decided & (lower > 0.5)
    return included, decided & ~included, ~decided


@dataclasses.dataclass(frozen=True)
class CircuitCertificate(ResultMixin):
    """Per-component certified inclusion decisions (from `certify_circuit`).

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
    lower, upper : numpy.ndarray of float64, shape (N,)
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
    lower: np.ndarray
    upper: np.ndarray
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

    @classmethod
    def from_radii(
        cls, *, certified_radius: np.ndarray, lower: np.ndarray, radius: int, **fields: Any
    ) -> CircuitCertificate:
        """The certificate whose decisions at `radius` follow from the radii and the lower bounds."""
        included, excluded, abstained = decide(certified_radius, lower, radius)
        return cls(
            included=included,
            excluded=excluded,
            abstained=abstained,
            certified_radius=certified_radius,
            lower=lower,
            radius=radius,
            **fields,
        )

    @property
    def circuit(self) -> np.ndarray:
        """Indices of the certified-included components."""
        return np.flatnonzero(self.included)

    def at_radius(self, radius: int) -> CircuitCertificate:
        """The certificate at another radius (no new runs needed): the same runs and bounds, with the
        decisions ``included``, ``excluded``, ``abstained`` and ``radius`` of that radius, and its own
        `summary`.

        Unpacking it as the tuple ``(included, excluded, abstained)`` that earlier versions returned still
        works but is deprecated: use the attributes.
        """
        radius = check_integer(radius, "radius", minimum=0)
        included, excluded, abstained = decide(self.certified_radius, self.lower, radius)
        return dataclasses.replace(
            self, radius=radius, included=included, excluded=excluded, abstained=abstained
        )

    def _as_tuple(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        warnings.warn(
            "at_radius(r) returns a CircuitCertificate: unpacking or indexing it as the tuple (included, "
            "excluded, abstained) is deprecated; use .included, .excluded and .abstained",
            DeprecationWarning,
            stacklevel=3,
        )
        return self.included, self.excluded, self.abstained

    def __iter__(self) -> Iterator[np.ndarray]:
        """Deprecated: the tuple ``(included, excluded, abstained)`` that `at_radius` returned before."""
        return iter(self._as_tuple())

    def __getitem__(self, index: int) -> np.ndarray:
        """Deprecated: ``(included, excluded, abstained)[index]``, as `at_radius` returned before."""
        return self._as_tuple()[index]

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
