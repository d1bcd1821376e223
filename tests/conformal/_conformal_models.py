"""Models with a known worst-case perturbation, shared by the conformal tests."""

from __future__ import annotations

import numpy as np


def sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-z))


class BinaryLinear:
    """p_1(x) = sigmoid(scale * w.x), p_0 = 1 - p_1.

    For the THR score the event {p_y(x + eps) >= q} is a half-space {(2y - 1) w.(x + eps) >= t}, so the
    smoothing bound is attained exactly by delta = -r (2y - 1) w / ||w||_2 (Gaussian noise, l2 threat)
    and, when w is a coordinate axis, by delta = -r (2y - 1) e_1 (uniform noise, l1 threat).
    """

    def __init__(self, w: np.ndarray, scale: float = 1.0) -> None:
        self.w = np.asarray(w, dtype=np.float64)
        self.scale = scale

    def __call__(self, X: np.ndarray) -> np.ndarray:
        p1 = sigmoid(self.scale * (X @ self.w))
        return np.column_stack([1.0 - p1, p1])

    def sample(self, n: int, rng: np.random.Generator, label_scale: float = 1.5) -> tuple:
        X = rng.normal(size=(n, self.w.shape[0]))
        y = (rng.uniform(size=n) < sigmoid(label_scale * (X @ self.w))).astype(np.int64)
        return X, y

    def worst_case(self, X: np.ndarray, y: np.ndarray, radius: float) -> np.ndarray:
        direction = self.w / np.linalg.norm(self.w)
        return X - radius * (2 * y - 1)[:, None] * direction[None, :]


#: The two-feature logistic model of the input-validation and model/metric tests.
LINEAR_MODEL = BinaryLinear(np.array([1.0, -0.5]), scale=2.0)


def linear_data(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` labelled inputs of `LINEAR_MODEL`."""
    return LINEAR_MODEL.sample(n, np.random.default_rng(seed))
