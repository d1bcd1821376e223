"""Vanilla split conformal prediction, on clean inputs or on inputs with (uncorrected) smoothing noise."""

from __future__ import annotations

from typing import Any

from certkit._typing import RNGLike
from certkit.conformal._base import _SingleSampleClassifier, _SingleSampleRegressor
from certkit.conformal._checks import renamed_score

__all__ = ["SplitConformalClassifier", "SplitConformalRegressor"]


class SplitConformalClassifier(_SingleSampleClassifier):
    r"""Split conformal classifier $C(x) = \{y : s(x, y) \ge q\}$.

    $q$ is the $\lfloor \alpha (n+1) \rfloor$-th smallest calibration conformity score
    (``-inf``, i.e. every label, when that rank is below 1).  Guarantee for exchangeable data and no
    attack: $P[y \in C(x)] \ge 1 - \alpha$.  With ``noise`` set, one noise draw is added to every
    calibration and test input and nothing is corrected: the *noisy CP* baseline, which keeps its
    coverage on clean data but loses it under perturbations (use `RCP1Classifier` for that).

    Parameters
    ----------
    model : callable or torch.nn.Module
        Maps inputs ``(n, ...)`` to class probabilities ``(n, K)`` (logits with ``output="logits"``).
    conformity_score : str, ConformityScore or callable, default "thr"
        Conformity score, higher = more conforming (see `certkit.conformal.scores`).
    **deprecated
        ``score=``: the deprecated name of `conformity_score` (it shadowed scikit-learn's `score` method
        name); it warns (`FutureWarning`), sets `conformity_score` and will be removed in certkit 0.3.
    confidence_level : float, default 0.9
        Target coverage $1 - \alpha$, in (0, 1).
    noise : {None, "gaussian", "uniform"}, default None
        ``None`` for clean inputs; otherwise the noise family added (uncorrected) to every input.
    sigma : float, optional
        Noise standard deviation per coordinate, ``> 0``; required when ``noise`` is set.
    output : {"probabilities", "logits"}, default "probabilities"
        What the model returns.
    batch_size : int, default 1024
        Inputs per model call.
    device : str or torch.device, default "cpu"
        Device of a torch model.
    rng : None, int or numpy.random.Generator
        Source of the noise and of the APS randomisation; fresh draws at every call, never reused
        between calibration and test.

    Attributes
    ----------
    threshold_ : float
        The calibrated threshold $q$ (``-inf``: the trivial set of all labels).
    adjusted_level_ : float
        The calibration level $1 - \alpha$ (here ``confidence_level``).
    n_calibration_ : int
        Number of calibration points.
    input_shape_ : tuple of int
        Shape of one calibration input; later inputs must have it (else ``ValueError``).
    n_features_in_ : int
        Number of values per input (``prod(input_shape_)``).
    n_classes_ : int
        Number of classes ``K``.
    classes_ : numpy.ndarray
        The class of every column of the sets (and of the model's output): the model's ``classes_`` when
        it has one, else the sorted labels, or ``0 .. K - 1`` for integer labels.
    calibration_scores_ : numpy.ndarray
        Conformity scores of the true labels (at the noisy inputs when ``noise`` is set).
    required_calibration_size_ : int
        Smallest calibration size giving a non-trivial set.

    Examples
    --------
    >>> import numpy as np
    >>> from certkit.conformal import SplitConformalClassifier
    >>> model = lambda X: np.column_stack([1 / (1 + np.exp(-X[:, 0])), 1 / (1 + np.exp(X[:, 0]))])
    >>> X = np.random.default_rng(0).normal(size=(200, 2)); y = (X[:, 0] < 0).astype(int)
    >>> cp = SplitConformalClassifier(model, confidence_level=0.9, rng=0).calibrate(X, y)
    >>> cp.predict_set(X[:3]).shape
    (3, 2)
    """

    _uses_radius = False
    _requires_noise = False

    def __init__(
        self,
        model: Any,
        *,
        conformity_score: Any = "thr",
        confidence_level: float = 0.9,
        noise: str | None = None,
        sigma: float | None = None,
        output: str = "probabilities",
        batch_size: int = 1024,
        device: Any = "cpu",
        rng: RNGLike = None,
        **deprecated: Any,
    ) -> None:
        self.model = model
        self.conformity_score = renamed_score(type(self).__name__, conformity_score, deprecated)
        self.confidence_level = confidence_level
        self.noise = noise
        self.sigma = sigma
        self.output = output
        self.batch_size = batch_size
        self.device = device
        self.rng = rng


class SplitConformalRegressor(_SingleSampleRegressor):
    r"""Split conformal regression with the absolute residual: $[f(x) - q, f(x) + q]$.

    $q$ is the $\lceil (1-\alpha)(n+1) \rceil$-th smallest calibration residual
    $|f(x_i) - y_i|$ (``inf`` when that rank exceeds ``n``).  With ``noise`` set, one noise draw is
    added to every input without correction (the noisy baseline).

    Parameters
    ----------
    model : callable or torch.nn.Module
        Maps inputs ``(n, ...)`` to predictions ``(n,)`` or ``(n, 1)``.
    confidence_level : float, default 0.9
        Target coverage $1 - \alpha$, in (0, 1).
    noise : {None, "gaussian", "uniform"}, default None
        ``None`` for clean inputs; otherwise the noise family added (uncorrected) to every input.
    sigma : float, optional
        Noise standard deviation per coordinate, ``> 0``; required when ``noise`` is set.
    batch_size : int, default 1024
        Inputs per model call.
    device : str or torch.device, default "cpu"
        Device of a torch model.
    rng : None, int or numpy.random.Generator
        Source of the noise; fresh draws at every call.

    Attributes
    ----------
    threshold_ : float
        The residual quantile $q$ (``inf``: the whole real line).
    adjusted_level_ : float
        The calibration level.
    n_calibration_ : int
        Number of calibration points.
    input_shape_ : tuple of int
        Shape of one calibration input; later inputs must have it (else ``ValueError``).
    n_features_in_ : int
        Number of values per input (``prod(input_shape_)``).
    calibration_scores_ : numpy.ndarray
        Calibration residuals.
    required_calibration_size_ : int
        Smallest calibration size giving finite intervals.
    """

    _uses_radius = False
    _requires_noise = False

    def __init__(
        self,
        model: Any,
        *,
        confidence_level: float = 0.9,
        noise: str | None = None,
        sigma: float | None = None,
        batch_size: int = 1024,
        device: Any = "cpu",
        rng: RNGLike = None,
    ) -> None:
        self.model = model
        self.confidence_level = confidence_level
        self.noise = noise
        self.sigma = sigma
        self.batch_size = batch_size
        self.device = device
        self.rng = rng
