"""The conformal estimators' bases (their shared checks are in `certkit.conformal._checks`)."""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator

from certkit._validation import (
    check_allocation,
    check_array,
    check_in_options,
    check_integer,
    check_is_fitted,
    check_level,
    check_nonnegative,
    check_positive,
    check_rng,
    check_same_length,
)
from certkit.conformal._checks import (
    check_class_labels,
    check_inputs,
    encode_labels,
    lower_conformal_threshold,
    model_classes,
    required_calibration_size,
    sample_noise,
    warn_small_calibration,
)
from certkit.conformal._model import OUTPUTS, ModelWrapper, as_probabilities, as_regression
from certkit.conformal.scores import get_score
from certkit.stats import conformal_quantile
from certkit.stats._common import NOISES

__all__: list[str] = []  # private: the estimators' bases


# ---------------------------------------------------------------------------------------------- bases
class _ConformalBase(BaseEstimator):
    """Common parameter handling; subclasses store their parameters in ``__init__`` only."""

    _fitted_attr = "threshold_"
    _uses_radius = True
    _requires_noise = True  # smoothing methods; the split baselines take noise=None

    def _check_common(self) -> dict[str, Any]:
        """Validate the shared parameters; return them in canonical form."""
        if self._requires_noise:
            check_in_options(self.noise, "noise", NOISES)
        params: dict[str, Any] = {"alpha": 1.0 - check_level(self.confidence_level, "confidence_level")}
        noise = getattr(self, "noise", None)
        if noise is not None:
            check_in_options(noise, "noise", NOISES)
            params["sigma"] = check_positive(self.sigma, "sigma")
        elif getattr(self, "sigma", None) is not None:
            raise ValueError(
                f"sigma={self.sigma!r} is only used with smoothing noise, but noise=None; "
                "set noise='gaussian' or 'uniform', or leave sigma=None"
            )
        params["noise"] = noise
        params["radius"] = check_nonnegative(self.radius, "radius") if self._uses_radius else 0.0
        check_integer(self.batch_size, "batch_size", minimum=1)
        return params

    def _detail(self, params: dict[str, Any]) -> str:
        return f"confidence_level={self.confidence_level}"

    def _remember_inputs(self, X: np.ndarray) -> None:
        """Record the shape of one input (``input_shape_``) and ``n_features_in_`` for 2-D inputs."""
        self.input_shape_ = tuple(X.shape[1:])
        self.n_features_in_ = int(np.prod(self.input_shape_))

    def fit(self, X: Any, y: Any) -> Any:
        """Calibrate on ``(X, y)``: the same as `calibrate`, under scikit-learn's name.

        The model is taken as trained (MAPIE's ``prefit=True``): `fit` never trains it, it only calibrates
        the conformal threshold, so that the estimator can end a scikit-learn `Pipeline` (whose earlier
        steps are then fitted on the calibration data) and `sklearn.utils.validation.check_is_fitted`
        applies to it.

        Returns
        -------
        self
        """
        return self.calibrate(X, y)

    def _check_fitted_inputs(self, X: Any) -> np.ndarray:
        """Inputs for a calibrated estimator: fitted, valid, and shaped like the calibration inputs."""
        check_is_fitted(self, self._fitted_attr)
        X = check_inputs(X)
        if tuple(X.shape[1:]) != self.input_shape_:
            if X.ndim == 2 and len(self.input_shape_) == 1:  # scikit-learn's wording for feature vectors
                raise ValueError(
                    f"X has {X.shape[1]} features, but {type(self).__name__} is expecting "
                    f"{self.input_shape_[0]} features as input (the calibration inputs' number)"
                )
            raise ValueError(
                f"X has inputs of shape {tuple(X.shape[1:])}, but the estimator was calibrated "
                f"on inputs of shape {self.input_shape_}"
            )
        return X

    def _wrapper(self) -> ModelWrapper:
        return ModelWrapper(self.model, batch_size=self.batch_size, device=self.device)

    def _raw_outputs(self, X: np.ndarray, n_samples: int, noise: str | None, sigma: float | None) -> Any:
        """Yield ``(start, rows, raw outputs)`` over chunks of inputs (``rows = chunk * n_samples``).

        Every input is repeated ``n_samples`` times (consecutively) with fresh noise from ``rng_``.
        """
        n = X.shape[0]
        chunk = max(1, self.batch_size // n_samples) if n_samples > 1 else n
        for start in range(0, n, chunk):
            xb = X[start : start + chunk]
            if n_samples > 1:
                xb = np.repeat(xb, n_samples, axis=0)
            if noise is not None:
                with np.errstate(over="ignore", invalid="ignore"):  # reported below, naming sigma
                    xb = xb + sample_noise(self.rng_, xb.shape, sigma, noise)
                if not np.all(np.isfinite(xb)):
                    raise ValueError(
                        f"sigma={sigma:g} makes the noisy inputs overflow float64 (|x + noise| > 1.8e308); "
                        "use a sigma on the scale of the features"
                    )
            yield start, xb.shape[0], self.predictor_(xb)


class _ClassifierBase(_ConformalBase):
    """Classifiers: the score, probability checks and repeated noisy scoring."""

    def _conformity_score(self) -> Any:
        """The `ConformityScore` of ``conformity_score``."""
        return get_score(self.conformity_score, name="conformity_score")

    def _setup(self, X: Any) -> tuple[np.ndarray, dict[str, Any]]:
        params = self._check_common()
        check_in_options(self.output, "output", OUTPUTS)
        params["score"] = self._conformity_score()
        X = check_inputs(X)
        self._remember_inputs(X)
        self.rng_ = check_rng(self.rng)
        self.predictor_ = self._wrapper()
        self.score_ = params["score"]
        return X, params

    def _noisy_scores(
        self, X: np.ndarray, n_samples: int, noise: str | None, sigma: float | None
    ) -> np.ndarray:
        """Conformity scores of every label at ``n_samples`` noisy copies: shape ``(n, n_samples, K)``."""
        if n_samples > 1:
            # scores (n, n_samples, K >= 2) plus one chunk of noisy copies, its noise and model output
            chunk = max(1, self.batch_size // n_samples) * float(n_samples)
            need = 8.0 * (2.0 * X.shape[0] * n_samples + chunk * (3.0 * X[0].size + 2.0))
            check_allocation(
                need,
                "n_samples",
                n_samples,
                what=f"scoring {X.shape[0]} inputs with n_samples noisy copies each",
            )
        out = None
        for start, rows, raw in self._raw_outputs(X, n_samples, noise, sigma):
            probs = as_probabilities(raw, rows, self.output)
            if hasattr(self, "n_classes_") and probs.shape[1] != self.n_classes_:
                raise ValueError(
                    f"the model returned {probs.shape[1]} classes, but it was calibrated "
                    f"with {self.n_classes_}"
                )
            scores = np.asarray(self.score_(probs, self.rng_), dtype=np.float64)
            if scores.shape != probs.shape or not np.all(np.isfinite(scores)):
                raise ValueError("the score must return finite values of shape (n, K)")
            scores = scores.reshape(-1, n_samples, probs.shape[1])
            if out is None:
                out = np.empty((X.shape[0], n_samples, probs.shape[1]))
            out[start : start + scores.shape[0]] = scores
        return out

    def _encode(self, y: np.ndarray, n_classes: int) -> np.ndarray:
        """Set ``classes_`` and ``n_classes_`` from the model's output width and class order; return the
        column of every label of ``y``."""
        self.classes_, codes = encode_labels(y, n_classes, model_classes(self.model))
        self.n_classes_ = n_classes
        return codes

    def _check_predict(self, X: Any) -> np.ndarray:
        return self._check_fitted_inputs(X)

    def predict(self, X: Any) -> np.ndarray:
        """Prediction sets as a multilabel indicator matrix: the same as `predict_set`.

        Column ``j`` stands for the class ``classes_[j]``. This is the method a scikit-learn `Pipeline`
        ending with the estimator forwards to (``pipe.predict(X)`` transforms ``X`` with the earlier steps
        and returns the sets); it returns sets, not single labels.

        Returns
        -------
        numpy.ndarray of bool, shape (n, n_classes_)
        """
        return self.predict_set(X)


class _SingleSampleClassifier(_ClassifierBase):
    """Split CP on (optionally noisy) inputs with one sample per point; RCP1 adjusts the level."""

    def _calibration_alpha(self, params: dict[str, Any]) -> float:
        return params["alpha"]

    def calibrate(self, X: Any, y: Any) -> _SingleSampleClassifier:
        """Calibrate the threshold on ``(X, y)`` with one fresh noise draw per point.

        Parameters
        ----------
        X : array-like or torch.Tensor, shape (n, ...)
            Calibration inputs (clean; the noise is added here).
        y : array-like, shape (n,)
            Their class labels: any hashable values (strings, integers, ...), looked up in the model's
            ``classes_`` when it has one (a scikit-learn classifier's ``predict_proba``); otherwise integer
            labels are the columns of the model's output, in ``[0, K)``, and other labels are sorted, as
            scikit-learn orders ``classes_``, and must take all ``K`` values.

        Returns
        -------
        self
        """
        X, params = self._setup(X)
        y = check_class_labels(y, X)
        for attr in ("classes_", "n_classes_"):  # a refit takes the model's classes anew
            self.__dict__.pop(attr, None)
        scores = self._noisy_scores(X, 1, params["noise"], params.get("sigma"))[:, 0, :]
        y = self._encode(y, scores.shape[1])
        alpha_adj = self._calibration_alpha(params)
        self.calibration_scores_ = scores[np.arange(X.shape[0]), y]
        self.n_calibration_ = X.shape[0]
        self.adjusted_level_ = 1.0 - alpha_adj
        self.required_calibration_size_ = required_calibration_size(alpha_adj)
        self.threshold_ = lower_conformal_threshold(self.calibration_scores_, alpha_adj)
        if self.threshold_ == -math.inf:
            warn_small_calibration(self.n_calibration_, alpha_adj, "prediction set", self._detail(params))
        elif params.get("sigma") is not None:
            self._warn_uninformative(X, scores, params["sigma"])
        return self

    def _warn_uninformative(self, X: np.ndarray, scores: np.ndarray, sigma: float) -> None:
        """Warn when the calibrated sets hold (nearly) every label because the noise drowns the input."""
        n_classes = scores.shape[1]
        sizes = (scores >= self.threshold_).sum(axis=1)
        if sizes.mean() < 0.8 * n_classes:
            return
        with np.errstate(over="ignore", invalid="ignore"):  # inputs near 1e308: inf spreads never warn
            scales = np.std(X.reshape(X.shape[0], -1), axis=0)
        drowned = np.flatnonzero(scales < sigma)
        if drowned.size == 0:
            return
        smallest = drowned[np.argsort(scales[drowned], kind="stable")][:3]
        named = ", ".join(f"feature {int(j)}: {scales[j]:.3g}" for j in smallest)
        warnings.warn(
            f"{type(self).__name__}: the calibrated prediction sets hold {sizes.mean():.1f} of {n_classes} "
            f"labels on average ({np.mean(sizes == n_classes):.0%} hold every label; threshold "
            f"{self.threshold_:.3g}): sigma={sigma:g} exceeds the standard deviation of {drowned.size} of "
            f"{scales.size} features (smallest: {named}), so the noise drowns them and the sets carry little "
            "information. Standardize X (and wrap the model to take standardized inputs) or use a sigma "
            "below every feature's scale, with a model trained on inputs with noise of that sigma.",
            UserWarning,
            stacklevel=3,
        )

    def conformity_scores(self, X: Any) -> np.ndarray:
        """Conformity scores of every label at one fresh noisy copy of each input, shape ``(n, K)``."""
        X = self._check_predict(X)
        params = self._check_common()
        return self._noisy_scores(X, 1, params["noise"], params.get("sigma"))[:, 0, :]

    def predict_set(self, X: Any) -> np.ndarray:
        """Prediction sets ``{y : s(x + eps, y) >= threshold_}`` with fresh noise at every call.

        Parameters
        ----------
        X : array-like or torch.Tensor, shape (n, ...)
            Test inputs (possibly perturbed).

        Returns
        -------
        numpy.ndarray of bool, shape (n, K)
        """
        return self.conformity_scores(X) >= self.threshold_


class _SingleSampleRegressor(_ConformalBase):
    """Split CP for regression with the absolute residual, on (optionally noisy) inputs."""

    def _calibration_alpha(self, params: dict[str, Any]) -> float:
        return params["alpha"]

    def _predict_noisy(self, X: np.ndarray, params: dict[str, Any]) -> np.ndarray:
        chunks = self._raw_outputs(X, 1, params["noise"], params.get("sigma"))
        return np.concatenate([as_regression(raw, rows) for _, rows, raw in chunks])

    def calibrate(self, X: Any, y: Any) -> _SingleSampleRegressor:
        """Calibrate the residual quantile on ``(X, y)`` with one fresh noise draw per point.

        Parameters
        ----------
        X : array-like or torch.Tensor, shape (n, ...)
            Calibration inputs.
        y : array-like, shape (n,)
            Real targets.

        Returns
        -------
        self
        """
        params = self._check_common()
        X = check_inputs(X)
        y = check_array(y, "y", ndim=1)
        check_same_length(("X", X), ("y", y))
        self._remember_inputs(X)
        self.rng_ = check_rng(self.rng)
        self.predictor_ = self._wrapper()
        alpha_adj = self._calibration_alpha(params)
        self.calibration_scores_ = np.abs(self._predict_noisy(X, params) - y)
        self.n_calibration_ = X.shape[0]
        self.adjusted_level_ = 1.0 - alpha_adj
        self.required_calibration_size_ = required_calibration_size(alpha_adj)
        if self.adjusted_level_ >= 1.0:
            self.threshold_ = math.inf
        else:
            self.threshold_ = conformal_quantile(
                self.calibration_scores_, confidence_level=self.adjusted_level_
            )
        if self.threshold_ == math.inf:
            warn_small_calibration(
                self.n_calibration_, alpha_adj, "prediction interval", self._detail(params)
            )
        return self

    def predict_interval(self, X: Any) -> tuple[np.ndarray, np.ndarray]:
        """Intervals ``f(x + eps) -+ threshold_`` with fresh noise at every call.

        Returns
        -------
        lower, upper : numpy.ndarray, shape (n,)
            Interval bounds, infinite when the calibration set is too small.
        """
        X = self._check_fitted_inputs(X)
        params = self._check_common()
        pred = self._predict_noisy(X, params)
        return pred - self.threshold_, pred + self.threshold_
