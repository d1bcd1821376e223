"""The logged data of a strategic off-policy evaluation problem and its validation."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from certkit._validation import check_array, check_same_length

__all__ = ["StrategicData", "as_strategic_data"]

_FIELDS = ("x_pre", "x_post", "moved", "action", "reward", "pscore")


@dataclasses.dataclass(frozen=True, eq=False)
class StrategicData:
    """One logged data set: agents, their responses to the logging policy, decisions and rewards.

    Attributes
    ----------
    x_pre : ndarray, shape (n, d)
        Pre-strategic covariates x₀ (revealed by the explanation request).
    x_post : ndarray, shape (n, d)
        Post-strategic covariates x' that the logging policy acted on.
    moved : ndarray of bool, shape (n,)
        Move indicator m₀ = 1[x' ≠ x₀].
    action : ndarray of int, shape (n,)
        Logged decisions a ∈ {0, 1} (1 = favourable).
    reward : ndarray, shape (n,)
        Observed rewards.
    pscore : ndarray, shape (n,)
        Logging propensities π₀(aᵢ | x'ᵢ) ∈ (0, 1].
    """

    x_pre: np.ndarray
    x_post: np.ndarray
    moved: np.ndarray
    action: np.ndarray
    reward: np.ndarray
    pscore: np.ndarray

    def __post_init__(self) -> None:
        validated = _validate({f.name: getattr(self, f.name) for f in dataclasses.fields(self)}, "data")
        for name, value in validated.items():
            value.setflags(write=False)
            object.__setattr__(self, name, value)

    @property
    def n(self) -> int:
        """Number of logged rows."""
        return int(self.x_pre.shape[0])

    def subset(self, index: Any) -> StrategicData:
        """The rows `index` (an integer or boolean index array), as a new `StrategicData`."""
        return StrategicData(**{name: getattr(self, name)[index] for name in _FIELDS})

    def __len__(self) -> int:
        return self.n


def _validate(fields: Mapping[str, Any], name: str) -> dict[str, np.ndarray]:
    x_pre = check_array(fields["x_pre"], f"{name}.x_pre", ndim=2)
    x_post = check_array(fields["x_post"], f"{name}.x_post", ndim=2, shape=(None, x_pre.shape[1]))
    moved = check_array(fields["moved"], f"{name}.moved", ndim=1, dtype=None)
    if moved.dtype != np.bool_:
        moved = check_array(moved, f"{name}.moved", ndim=1, dtype=int)
        if np.any((moved != 0) & (moved != 1)):
            raise ValueError(f"{name}.moved must be boolean or 0/1")
        moved = moved.astype(bool)
    action = check_array(fields["action"], f"{name}.action", ndim=1, dtype=int)
    reward = check_array(fields["reward"], f"{name}.reward", ndim=1)
    pscore = check_array(fields["pscore"], f"{name}.pscore", ndim=1)
    check_same_length(
        (f"{name}.x_pre", x_pre),
        (f"{name}.x_post", x_post),
        (f"{name}.moved", moved),
        (f"{name}.action", action),
        (f"{name}.reward", reward),
        (f"{name}.pscore", pscore),
    )
    if np.any((action != 0) & (action != 1)):
        raise ValueError(f"{name}.action must contain only 0 and 1, got values {np.unique(action)[:5]}")
    if np.any((pscore <= 0.0) | (pscore > 1.0)):
        why = (
            "a logged action with propensity 0 cannot be reweighted"
            if pscore.min() <= 0.0
            else "propensities are probabilities of the logged action"
        )
        raise ValueError(
            f"{name}.pscore must lie in (0, 1]: {why} (min {pscore.min():.3g}, max {pscore.max():.3g})"
        )
    changed = np.any(x_post != x_pre, axis=1)
    if np.any(changed != moved):
        raise ValueError(
            f"{name}.moved must equal 1[x_post != x_pre] row by row; "
            f"{int(np.sum(changed != moved))} rows disagree"
        )
    return {
        "x_pre": x_pre,
        "x_post": x_post,
        "moved": moved,
        "action": action,
        "reward": reward,
        "pscore": pscore,
    }


def as_strategic_data(data: Any, name: str = "data") -> StrategicData:
    """Accept a `StrategicData` or a mapping with the keys x_pre, x_post, moved, action, reward, pscore."""
    if isinstance(data, StrategicData):
        return data
    if isinstance(data, Mapping):
        missing = [k for k in _FIELDS if k not in data]
        if missing:
            raise ValueError(f"{name} is missing the keys {missing}; expected {list(_FIELDS)}")
        unknown = [k for k in data if k not in _FIELDS]
        if unknown:
            raise ValueError(f"{name} has unknown keys {unknown}; expected {list(_FIELDS)}")
        return StrategicData(**{k: data[k] for k in _FIELDS})
    raise TypeError(
        f"{name} must be a StrategicData or a mapping with keys {list(_FIELDS)}, got {type(data).__name__}"
    )
