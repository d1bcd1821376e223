"""Outcome models used by the certkit.ope tests."""

import numpy as np


class ConstantOutcome:
    """A deliberately wrong outcome model: predicts a constant."""

    def __init__(self, value: float = 0.5) -> None:
        self.value = value

    def fit(self, X, y):
        return self

    def predict(self, X):
        return np.full(X.shape[0], self.value)


class KnownOutcome:
    """An outcome 'model' that predicts a fixed function of x (no fitting), for exact oracles."""

    def __init__(self, action_coef: float = 0.0) -> None:
        self.action_coef = action_coef

    def fit(self, X, y):
        self.shift_ = float(np.mean(y) > 0.5)
        return self

    def predict(self, X):
        return 0.2 + 0.1 * np.tanh(X[:, 0]) + 0.05 * X[:, 1] ** 2 / (1 + X[:, 1] ** 2) + 0.1 * self.shift_
