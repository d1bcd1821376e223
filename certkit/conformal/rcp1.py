r"""RCP1: robust conformal prediction with a single noisy forward pass per input.

Zargarbashi, Akhondzadeh & Bojchevski, "One Sample is Enough to Make Conformal Prediction Robust"
(NeurIPS 2025).  Calibrate vanilla conformal prediction on inputs with one draw of smoothing noise, at
the level $1 - \alpha'$ whose smoothing lower bound is the target:
$c[1 - \alpha', r] = 1 - \alpha$, i.e. (Gaussian noise, ℓ2 threat)
$1 - \alpha' = \Phi(\Phi^{-1}(1 - \alpha) + r/\sigma)$.

Why it holds: for a fixed threshold $q$, $h(x) = P_\varepsilon[s(x + \varepsilon, y) \ge q]$
is a smoothed binary function, so $h(x + \delta) \ge c[h(x), r]$ for every admissible
$\delta$.  Split CP on noisy inputs gives $E[h(x)] \ge 1 - \alpha'$; $c[\cdot, r]$ is
convex and increasing, so by Jensen $E[h(x + \delta)] \ge c[E h(x), r] \ge c[1 - \alpha', r] =
1 - \alpha$.  The perturbation may depend on the clean input and the calibration data, not on the
test noise (drawn fresh at every call).
"""

from __future__ import annotations

from typing import Any

from certkit._typing import RNGLike
from certkit.conformal._base import _SingleSampleClassifier, _SingleSampleRegressor
from certkit.conformal._checks import adjusted_alpha, renamed_score

__all__ = ["RCP1Classifier", "RCP1Regressor"]


class _RCP1Mixin:
    def _calibration_alpha(self, params: dict[str, Any]) -> float:
        return adjusted_alpha(self.confidence_level, params["radius"], params["sigma"], params["noise"])

    def _detail(self, params: dict[str, Any]) -> str:
        return (
            f"confidence_level={self.confidence_level}, radius={self.radius}, sigma={self.sigma}, "
            f"noise={self.noise!r}"
        )


class RCP1Classifier(_RCP1Mixin, _SingleSampleClassifier):
    r"""Robust conformal classifier with one noisy sample per input (RCP1).

    Calibration draws one $\varepsilon_i$ per point, scores $S_i = s(x_i + \varepsilon_i, y_i)$
    and sets $q$ to the $\lfloor \alpha'(n+1) \rfloor$-th smallest $S_i$ with
    $1 - \alpha' = c^{-1}[1 - \alpha, r]$; Gaussian: $\Phi(\Phi^{-1}(1 - \alpha) + r/\sigma)$.
    Test: fresh $\varepsilon$, $C(\tilde x) = \{y : s(\tilde x + \varepsilon, y) \ge q\}$.

    Guarantee: $P[y \in C(x + \delta)] \ge 1 - \alpha$ for every $\|\delta\|_2 \le r$
    (``noise="gaussian"``) or $\|\delta\|_1 \le r$ (``noise="uniform"``) chosen without seeing
    the test noise.  When $\lfloor \alpha'(n+1) \rfloor < 1$ the set is trivial (all labels) and a
    ``UserWarning`` says how many calibration points are needed ($n \ge \lceil 1/\alpha' \rceil - 1$).

    Parameters
    ----------
    model : callable or torch.nn.Module
        Maps inputs ``(n, ...)`` to class probabilities ``(n, K)`` (logits with ``output="logits"``);
        ideally trained with noise of the same ``sigma``.
    conformity_score : str, ConformityScore or callable, default "thr"
        Conformity score, higher = more conforming (see `certkit.conformal.scores`).
    **deprecated
        ``score=``: the deprecated name of `conformity_score` (it shadowed scikit-learn's `score` method
        name); it warns (`FutureWarning`), sets `conformity_score` and will be removed in certkit 0.3.
    sigma : float
        Smoothing noise standard deviation per coordinate, ``> 0``.
    radius : float
        Perturbation radius $r \ge 0$ (ℓ2 for Gaussian noise, ℓ1 for uniform noise).
    confidence_level : float, default 0.9
        Target coverage under attack $1 - \alpha$, in (0, 1).
    noise : {"gaussian", "uniform"}, default "gaussian"
        Smoothing noise (uniform has half-width $\sigma\sqrt 3$).
    output : {"probabilities", "logits"}, default "probabilities"
        What the model returns.
    batch_size : int, default 1024
        Inputs per model call.
    device : str or torch.device, default "cpu"
        Device of a torch model.
    rng : None, int or numpy.random.Generator
        Source of the noise (and APS randomisation); fresh draws at every call.

    Attributes
    ----------
    threshold_ : float
        The threshold $q$ (``-inf``: trivial set).
    adjusted_level_ : float
        $1 - \alpha'$.
    n_calibration_ : int
        Number of calibration points.
    input_shape_ : tuple of int
        Shape of one calibration input; later inputs must have it (else ``ValueError``).
    n_features_in_ : int
        Number of values per input (``prod(input_shape_)``).
    n_classes_ : int
        Number of classes.
    classes_ : numpy.ndarray
        The class of every column of the sets (and of the model's output): the model's ``classes_`` when
        it has one, else the sorted labels, or ``0 .. K - 1`` for integer labels.
    calibration_scores_ : numpy.ndarray
        The noisy conformity scores $S_i$.
    required_calibration_size_ : int or None
        Smallest ``n`` with a non-trivial set (``None``: no ``n`` suffices).

    Examples
    --------
    >>> import numpy as np
    >>> from certkit.conformal import RCP1Classifier
    >>> model = lambda X: np.column_stack([1 / (1 + np.exp(-X[:, 0])), 1 / (1 + np.exp(X[:, 0]))])
    >>> X = np.random.default_rng(0).normal(size=(500, 2)); y = (X[:, 0] < 0).astype(int)
    >>> clf = RCP1Classifier(model, sigma=0.25, radius=0.12, confidence_level=0.9, rng=0).calibrate(X, y)
    >>> round(clf.adjusted_level_, 6)
    0.960927
    """

    def __init__(
        self,
        model: Any,
        *,
        conformity_score: Any = "thr",
        sigma: float,
        radius: float,
        confidence_level: float = 0.9,
        noise: str = "gaussian",
        output: str = "probabilities",
        batch_size: int = 1024,
        device: Any = "cpu",
        rng: RNGLike = None,
        **deprecated: Any,
    ) -> None:
        self.model = model
        self.conformity_score = renamed_score(type(self).__name__, conformity_score, deprecated)
        self.sigma = sigma
        self.radius = radius
        self.confidence_level = confidence_level
        self.noise = noise
        self.output = output
        self.batch_size = batch_size
        self.device = device
        self.rng = rng


class RCP1Regressor(_RCP1Mixin, _SingleSampleRegressor):
    r"""Robust conformal regression with one noisy sample per input (RCP1).

    Residuals $|f(x_i + \varepsilon_i) - y_i|$ with one noise draw each; $q$ is their
    $\lceil (1 - \alpha')(n+1) \rceil$-th smallest (``inf`` when the rank exceeds ``n``); the
    interval is $f(\tilde x + \varepsilon) \pm q$ with fresh noise.  Same guarantee as
    `RCP1Classifier`: coverage $\ge 1 - \alpha$ for every perturbation of norm $\le r$.

    Parameters
    ----------
    model : callable or torch.nn.Module
        Maps inputs ``(n, ...)`` to predictions ``(n,)`` or ``(n, 1)``.
    sigma : float
        Smoothing noise standard deviation per coordinate, ``> 0``.
    radius : float
        Perturbation radius $r \ge 0$.
    confidence_level : float, default 0.9
        Target coverage under attack, in (0, 1).
    noise : {"gaussian", "uniform"}, default "gaussian"
        Smoothing noise.
    batch_size : int, default 1024
        Inputs per model call.
    device : str or torch.device, default "cpu"
        Device of a torch model.
    rng : None, int or numpy.random.Generator
        Source of the noise.

    Attributes
    ----------
    threshold_ : float
        Residual quantile $q$.
    adjusted_level_ : float
        $1 - \alpha'$.
    n_calibration_ : int
        Number of calibration points.
    input_shape_ : tuple of int
        Shape of one calibration input; later inputs must have it (else ``ValueError``).
    n_features_in_ : int
        Number of values per input (``prod(input_shape_)``).
    calibration_scores_ : numpy.ndarray
        Noisy calibration residuals.
    required_calibration_size_ : int or None
        Smallest ``n`` giving finite intervals.
    """

    def __init__(
        self,
        model: Any,
        *,
        sigma: float,
        radius: float,
        confidence_level: float = 0.9,
        noise: str = "gaussian",
        batch_size: int = 1024,
        device: Any = "cpu",
        rng: RNGLike = None,
    ) -> None:
        self.model = model
        self.sigma = sigma
        self.radius = radius
        self.confidence_level = confidence_level
        self.noise = noise
        self.batch_size = batch_size
        self.device = device
        self.rng = rng
