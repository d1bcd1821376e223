"""Outcome models q̂(x, a) ≈ E[r | x, a]: statsmodels GLMs by default, any fit/predict estimator accepted.

The small `OutcomeModel` protocol is scikit-learn's: `fit(X, y)` and `predict(X)`; an estimator with
`predict_proba` (a classifier of 0/1 rewards) is used through P(r = 1 | x). One model is fitted per action on
the rows that took it; with `cross_fit=k` each row is predicted by models fitted on the other k − 1 folds.
"""

from __future__ import annotations

import copy
from typing import Any, Protocol, runtime_checkable

import numpy as np

from certkit._validation import check_array, check_in_options, check_is_fitted

__all__ = ["GLMOutcome", "OutcomeModel", "fit_outcome"]


@runtime_checkable
class OutcomeModel(Protocol):
    """A scikit-learn-style regressor: `fit(X, y)` then `predict(X)`."""

    def fit(self, X: np.ndarray, y: np.ndarray) -> Any: ...

    def predict(self, X: np.ndarray) -> np.ndarray: ...


class GLMOutcome:
    """statsmodels OLS (identity link) or Logit on [1, x] — the default outcome model.

    Parameters
    ----------
    family : {"auto", "ols", "logit"}, default "auto"
        "auto" picks Logit when every reward is 0 or 1 and OLS otherwise.

    Attributes
    ----------
    family_ : str
        The family used.
    params_ : ndarray, shape (d + 1,)
        Intercept and slopes.
    """

    def __init__(self, family: str = "auto") -> None:
        self.family = check_in_options(family, "family", ("auto", "ols", "logit"))

    @staticmethod
    def _design(X: np.ndarray) -> np.ndarray:
        return np.column_stack([np.ones(X.shape[0]), X])

    def fit(self, X: Any, y: Any) -> GLMOutcome:
        """Fit by (quasi-)maximum likelihood."""
        import statsmodels.api as sm

        X = check_array(X, "X", ndim=2)
        y = check_array(y, "y", ndim=1, shape=(X.shape[0],))
        family = self.family
        if family == "auto":
            family = "logit" if np.all((y == 0) | (y == 1)) else "ols"
        if family == "logit" and np.any((y != 0) & (y != 1)):
            raise ValueError("family='logit' needs rewards in {0, 1}")
        design = self._design(X)
        if family == "ols":
            res = sm.OLS(y, design).fit()
        else:
            if np.all(y == y[0]):
                raise ValueError(
                    "outcome_model: every reward of one action is identical, so the Logit outcome model has "
                    "no finite fit; use family='ols' or more data"
                )
            start = None
            if y.size > 50_000:  # warm start from an evenly spaced subsample: same maximum, fewer passes
                sub = np.linspace(0, y.size - 1, 20_000).astype(np.int64)
                if 0 < y[sub].sum() < sub.size:
                    start = sm.Logit(y[sub], design[sub]).fit(disp=0, method="newton", maxiter=100).params
            res = sm.Logit(y, design).fit(disp=0, method="newton", maxiter=100, start_params=start)
        self.family_ = family
        self.params_ = np.asarray(res.params, dtype=np.float64)
        var = self._variance(design)
        self.hessian_inv_ = np.linalg.pinv((design * var[:, None]).T @ design)
        return self

    def _mean(self, design: np.ndarray) -> np.ndarray:
        eta = design @ self.params_
        return eta if self.family_ == "ols" else 1.0 / (1.0 + np.exp(-eta))

    def _variance(self, design: np.ndarray) -> np.ndarray:
        """dμ/dη: 1 for OLS, μ(1 − μ) for Logit."""
        if self.family_ == "ols":
            return np.ones(design.shape[0])
        mu = self._mean(design)
        return mu * (1.0 - mu)

    def predict(self, X: Any) -> np.ndarray:
        """q̂(x) for each row."""
        check_is_fitted(self, "params_", method="fit")
        return self._mean(self._design(check_array(X, "X", ndim=2)))

    def gradient(self, X: Any) -> np.ndarray:
        """∂q̂(x)/∂params for each row, shape (n, d + 1)."""
        design = self._design(check_array(X, "X", ndim=2))
        return design * self._variance(design)[:, None]

    def scores(self, X: Any, y: Any) -> np.ndarray:
        """Per-row estimating-equation terms [1, x]·(y − q̂(x)), shape (n, d + 1)."""
        design = self._design(check_array(X, "X", ndim=2))
        return design * (check_array(y, "y", ndim=1) - self._mean(design))[:, None]


def _resolve(outcome_model: Any) -> Any:
    if outcome_model is None:
        return GLMOutcome()
    if isinstance(outcome_model, type):
        raise TypeError(
            f"outcome_model must be an estimator instance, got the class {outcome_model.__name__}; pass "
            f"{outcome_model.__name__}() (with its parameters)"
        )
    if isinstance(outcome_model, str):
        return GLMOutcome(check_in_options(outcome_model, "outcome_model", ("auto", "ols", "logit")))
    if not (
        callable(getattr(outcome_model, "fit", None)) and callable(getattr(outcome_model, "predict", None))
    ):
        raise TypeError(
            "outcome_model must be None, 'auto', 'ols', 'logit' or an estimator with fit(X, y) and "
            "predict(X), "
            f"got {type(outcome_model).__name__}"
        )
    return outcome_model


def _clone(model: Any) -> Any:
    if hasattr(model, "get_params"):
        from sklearn.base import clone

        return clone(model)
    return copy.deepcopy(model)


def _predict(model: Any, X: np.ndarray) -> np.ndarray:
    if hasattr(model, "predict_proba") and not isinstance(model, GLMOutcome):
        classes = list(getattr(model, "classes_", []))
        if 1 not in classes:
            raise ValueError("outcome_model: a classifier must be fitted on rewards with class 1")
        out = model.predict_proba(X)[:, classes.index(1)]
    else:
        out = model.predict(X)
    return check_array(out, "outcome_model.predict(X)", ndim=1, shape=(X.shape[0],))


def fit_outcome(
    X: np.ndarray,
    action: np.ndarray,
    reward: np.ndarray,
    outcome_model: Any,
    *,
    folds: np.ndarray | None = None,
) -> tuple[np.ndarray, list[Any] | None]:
    """Fit q̂ per action and predict both actions for every row.

    Parameters
    ----------
    X, action, reward
        Features, logged actions in {0, 1}, rewards.
    outcome_model
        None / "auto" / "ols" / "logit" or an estimator (cloned for every fit).
    folds : ndarray of int, optional
        Fold label of each row for cross-fitting (each row predicted by models fitted without its fold).

    Returns
    -------
    q_hat : ndarray, shape (n, 2)
        q̂(xᵢ, 0) and q̂(xᵢ, 1).
    models : list or None
        The two fitted models (action 0, action 1) without cross-fitting, None with it.
    """
    template = _resolve(outcome_model)
    q_hat = np.empty((X.shape[0], 2))
    labels = [None] if folds is None else list(np.unique(folds))
    models: list[Any] = []
    for fold in labels:
        test = np.ones(X.shape[0], bool) if fold is None else folds == fold
        train = test if fold is None else ~test
        for a in (0, 1):
            rows = train & (action == a)
            if not np.any(rows):
                where = "" if fold is None else f" outside fold {fold}"
                raise ValueError(
                    f"outcome_model: no logged row took action {a}{where}; q̂(x, {a}) cannot be fitted"
                )
            model = _clone(template)
            model.fit(X[rows], reward[rows])
            q_hat[test, a] = _predict(model, X[test])
            models.append(model)
    return q_hat, (models if folds is None else None)
