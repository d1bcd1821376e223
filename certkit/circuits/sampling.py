"""How the subsamples of the concept dataset are drawn: one small frozen description.

`Sampling` names the scheme (`"without_replacement"`, `"with_replacement"` or `"poisson"`), the dataset
size `n`, the subsample size `m` (uniform schemes) and the deletion probability (Poisson deletion).  The
radius formulas (`certkit.circuits.radius`) and the vote runners (`certkit.circuits.votes`) both take it,
so a scheme is validated once and described the same way everywhere.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from certkit._validation import check_bool, check_integer, check_probability

__all__ = ["SCHEMES", "Sampling"]

#: Names of the sampling schemes (also the `scheme` field of a `CircuitCertificate`).
SCHEMES = ("without_replacement", "with_replacement", "poisson")


@dataclasses.dataclass(frozen=True)
class Sampling:
    """A validated sampling scheme over a concept dataset of `n` examples.

    Attributes
    ----------
    scheme : str
        `"without_replacement"`: a uniform `m`-subset; `"with_replacement"`: `m` independent uniform
        draws; `"poisson"`: every example kept independently with probability `1 - deletion_prob`.
    n : int
        Size of the concept dataset.
    m : int or None
        Subsample size of the two uniform schemes (None for Poisson deletion).
    deletion_prob : float or None
        Deletion probability of Poisson deletion (None for the uniform schemes).
    """

    scheme: str
    n: int
    m: int | None = None
    deletion_prob: float | None = None

    @classmethod
    def uniform(cls, n: int, m: int, *, replacement: bool, name: str = "m") -> Sampling:
        """Uniform subsamples of size `m` (the argument called `name` in error messages)."""
        n = check_integer(n, "n", minimum=1)
        replacement = check_bool(replacement, "replacement")
        m = check_integer(m, name, minimum=1)
        if not replacement and m > n:
            raise ValueError(
                f"{name} must be <= n = {n} (the concept dataset size) when sampling without replacement, "
                f"got {m}; use replacement=True or a smaller {name}"
            )
        return cls("with_replacement" if replacement else "without_replacement", n, m, None)

    @classmethod
    def poisson(cls, n: int, deletion_prob: float) -> Sampling:
        """Poisson deletion: every example deleted independently with probability `deletion_prob`."""
        n = check_integer(n, "n", minimum=1)
        return cls("poisson", n, None, check_probability(deletion_prob, "deletion_prob", closed=False))

    @property
    def replacement(self) -> bool:
        """Whether the uniform draws are with replacement."""
        return self.scheme == "with_replacement"

    def subsets(self, n_runs: int, seed: int) -> list[np.ndarray]:
        """Row indices of the `n_runs` subsamples drawn by the compiled kernel for `seed`."""
        from certkit import _core

        if self.scheme == "poisson":
            deletion = self.deletion_prob
            masks = _core.subsample.deletion_masks(self.n, n_runs, deletion_prob=deletion, seed=seed)
            return [np.flatnonzero(row) for row in masks]
        return list(_core.subsample.indices(self.n, self.m, n_runs, replacement=self.replacement, seed=seed))
