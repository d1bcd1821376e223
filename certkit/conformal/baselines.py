r"""Multi-sample robust conformal baselines: BinCP and RSCP+.

Both spend many noisy forward passes per input (``n_samples``) where RCP1 spends one; they are here for
comparison (see ``benchmarks/conformal.py``) and for users who want their particular trade-offs.
The formulations below are certkit's own derivations of the published methods, with the guarantee
stated exactly as implemented.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from certkit._typing import RNGLike
from certkit._validation import check_in_options, check_integer, check_probability
from certkit.conformal._base import _ClassifierBase
from certkit.conformal._checks import (
    check_class_labels,
    lower_conformal_threshold,
    renamed_score,
    required_calibration_size,
    warn_small_calibration,
)
from certkit.stats import clopper_pearson, empirical_bernstein_bound, hoeffding_bound, smoothing_lower_bound

__all__ = ["BinCPClassifier", "RSCPPlusClassifier"]


class _MultiSampleClassifier(_ClassifierBase):
    _n_bounds = 2  # failure events paid for out of the miscoverage budget

    def _params(self) -> dict[str, Any]:
        params = self._check_common()
        params["n_samples"] = check_integer(self.n_samples, "n_samples", minimum=2)
        eta = check_probability(self.error_rate, "error_rate", closed=False)
        if self._n_bounds * eta >= params["alpha"]:
            raise ValueError(
                f"{self._n_bounds} * error_rate must be below 1 - confidence_level = "
                f"{params['alpha']:.6g}, got error_rate = {eta}"
            )
        params["eta"] = eta
        return params

    def _calibrate_common(self, X: Any, y: Any) -> tuple[np.ndarray, dict[str, Any]]:
        """Noisy scores of the true labels, shape (n, n_samples)."""
        X, params = self._setup(X)
        params.update(self._params())
        y = check_class_labels(y, X)
        for attr in ("classes_", "n_classes_"):  # a refit takes the model's classes anew
            self.__dict__.pop(attr, None)
        scores = self._noisy_scores(X, params["n_samples"], params["noise"], params["sigma"])
        y = self._encode(y, scores.shape[2])
        self.n_calibration_ = X.shape[0]
        return scores[np.arange(X.shape[0]), :, y], params

    def _finish(self, alpha_cal: float, params: dict[str, Any]) -> None:
        self.adjusted_level_ = 1.0 - alpha_cal
        self.required_calibration_size_ = required_calibration_size(alpha_cal)
        self.threshold_ = lower_conformal_threshold(self.calibration_scores_, alpha_cal)
        if self.threshold_ == -math.inf:
            warn_small_calibration(
                self.n_calibration_,
                alpha_cal,
                "prediction set",
                f"confidence_level={self.confidence_level}, error_rate={self.error_rate}",
            )

    def _test_scores(self, X: Any) -> tuple[np.ndarray, dict[str, Any]]:
        X = self._check_predict(X)
        params = self._params()
        return self._noisy_scores(X, params["n_samples"], params["noise"], params["sigma"]), params


class BinCPClassifier(_MultiSampleClassifier):
    r"""BinCP (Zargarbashi & Bojchevski 2025): robust CP on binarised smoothed scores.

    With $m$ = ``n_samples`` noisy scores per input, $p$ = ``base_probability`` and
    $\eta$ = ``error_rate``:

    1. Calibration: for each point, $\hat\lambda_i$ = the $k$-th largest of its $m$
       true-label scores, $k = \lceil p m \rceil$; the threshold $\tau$ is the
       $\lfloor (\alpha - \eta)(n+1) \rfloor$-th smallest $\hat\lambda_i$.
    2. $\underline p$ = Clopper–Pearson lower bound for $k$ successes in $m$ trials at
       level $1 - \eta/2$, and $\rho = c[\underline p, r]$ (smoothing lower bound).
    3. Test: fresh $m$ noisy scores; $b_y = \#\{j : s(\tilde x + \varepsilon_j, y) \ge \tau\}$;
       keep $y$ if the Clopper–Pearson upper bound of $b_y / m$ at level $1 - \eta/2$
       is $\ge \rho$.

    Guarantee: $P[y \in C(x + \delta)] \ge 1 - \alpha$ for every admissible $\delta$.  Proof
    sketch: the virtual $\hat\lambda_{n+1}$ of the clean test point is exchangeable with the
    calibration ones, so $\hat\lambda_{n+1} \ge \tau$ with probability $\ge 1 - (\alpha - \eta)$;
    the $k$-th largest of $m$ draws has $P_\varepsilon[s \ge \hat\lambda] \ge \underline p$
    except with probability $\eta/2$ (order statistics / Clopper–Pearson duality, valid with
    ties); then $P_\varepsilon[s(x + \varepsilon, y) \ge \tau] \ge \underline p$, the smoothing bound
    gives $\ge \rho$ at $x + \delta$, and the test upper bound misses it with probability
    $\le \eta/2$.  Only the test point's own events are paid for (no union bound over calibration
    points or classes, unlike the reference implementation's $\eta/(n + K)$).

    Parameters
    ----------
    model : callable or torch.nn.Module
        Maps inputs to class probabilities ``(n, K)`` (logits with ``output="logits"``).
    conformity_score : str, ConformityScore or callable, default "thr"
        Conformity score, higher = more conforming.
    **deprecated
        ``score=``: the deprecated name of `conformity_score` (it shadowed scikit-learn's `score` method
        name); it warns (`FutureWarning`), sets `conformity_score` and will be removed in certkit 0.3.
    sigma : float
        Smoothing noise standard deviation, ``> 0``.
    radius : float
        Perturbation radius ``>= 0``.
    confidence_level : float, default 0.9
        Target coverage under attack $1 - \alpha$.
    n_samples : int, default 64
        Noisy forward passes per input, $m \ge 2$.
    base_probability : float, default 0.8
        $p \in (0, 1)$, the smoothed-probability level of the per-point quantile.
    error_rate : float, default 0.001
        $\eta$, spent on the two Monte-Carlo bounds; ``2 * error_rate`` must be below
        $\alpha$.
    noise : {"gaussian", "uniform"}, default "gaussian"
        Smoothing noise.
    output : {"probabilities", "logits"}, default "probabilities"
        What the model returns.
    batch_size : int, default 1024
        Inputs per model call (each input uses ``n_samples`` of them).
    device : str or torch.device, default "cpu"
        Device of a torch model.
    rng : None, int or numpy.random.Generator
        Source of the noise.

    Attributes
    ----------
    threshold_ : float
        $\tau$ (``-inf``: trivial set).
    adjusted_level_ : float
        Calibration level $1 - \alpha + \eta$.
    base_probability_lower_ : float
        $\underline p$, the Clopper–Pearson lower bound behind ``base_probability``.
    test_level_ : float
        $\rho = c[\underline p, r]$.
    calibration_scores_ : numpy.ndarray
        The per-point quantiles $\hat\lambda_i$.
    n_calibration_, n_classes_ : int
        Calibration size and number of classes.
    classes_ : numpy.ndarray
        The class of every column of the sets (the model's ``classes_`` when it has one, as in
        `RCP1Classifier`).
    input_shape_ : tuple of int
        Shape of one calibration input; later inputs must have it (else ``ValueError``).
    n_features_in_ : int
        Number of values per input (``prod(input_shape_)``).
    required_calibration_size_ : int
        Smallest calibration size with a non-trivial set.
    """

    def __init__(
        self,
        model: Any,
        *,
        conformity_score: Any = "thr",
        sigma: float,
        radius: float,
        confidence_level: float = 0.9,
        n_samples: int = 64,
        base_probability: float = 0.8,
        error_rate: float = 0.001,
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
        self.n_samples = n_samples
        self.base_probability = base_probability
        self.error_rate = error_rate
        self.noise = noise
        self.output = output
        self.batch_size = batch_size
        self.device = device
        self.rng = rng

    _n_bounds = 1

    def calibrate(self, X: Any, y: Any) -> BinCPClassifier:
        """Calibrate $\\tau$ with ``n_samples`` noisy copies of every calibration input.

        Parameters
        ----------
        X : array-like or torch.Tensor, shape (n, ...)
            Calibration inputs.
        y : array-like, shape (n,)
            Class labels, as in `RCP1Classifier.calibrate` (the model's ``classes_`` where it has one).

        Returns
        -------
        self
        """
        p = check_probability(self.base_probability, "base_probability", closed=False)
        true_scores, params = self._calibrate_common(X, y)
        m = params["n_samples"]
        k = max(1, math.ceil(p * m - 1e-9))
        self.calibration_scores_ = np.sort(true_scores, axis=1)[:, m - k]
        low, _ = clopper_pearson(k, m, confidence_level=1.0 - params["eta"] / 2, alternative="greater")
        self.base_probability_lower_ = float(low)
        self.test_level_ = float(
            smoothing_lower_bound(
                self.base_probability_lower_,
                radius=params["radius"],
                sigma=params["sigma"],
                noise=params["noise"],
            )
        )
        self._finish(params["alpha"] - params["eta"], params)
        return self

    def predict_set(self, X: Any) -> np.ndarray:
        """Prediction sets from ``n_samples`` fresh noisy copies of every input, bool ``(n, K)``."""
        scores, params = self._test_scores(X)
        counts = (scores >= self.threshold_).sum(axis=1)
        _, high = clopper_pearson(
            counts, params["n_samples"], confidence_level=1.0 - params["eta"] / 2, alternative="less"
        )
        return np.asarray(high) >= self.test_level_


class RSCPPlusClassifier(_MultiSampleClassifier):
    r"""RSCP+ (Yan et al. 2024): conformal prediction on Monte-Carlo smoothed scores with MC error bounds.

    For a conformity score in [0, 1], $\tilde s(x, y) = E_\varepsilon[s(x + \varepsilon, y)]$ is
    estimated by the mean $\hat s$ of $n_s$ = ``n_samples`` noisy scores.  With
    $\beta$ = ``error_rate``:

    1. Calibration: $\hat q$ = the $\lfloor (\alpha - 2\beta)(n+1) \rfloor$-th smallest
       $\hat s(x_i, y_i)$; $q_- = \hat q - \sqrt{\ln(1/\beta)/(2 n_s)}$ (Hoeffding) and
       $\rho = c[q_-, r]$.
    2. Test: keep $y$ if an upper confidence bound of $\tilde s(\tilde x, y)$ at level
       $1 - \beta$ (Hoeffding, or Maurer–Pontil empirical Bernstein with ``mc_bound="bernstein"``)
       computed from fresh samples is $\ge \rho$.

    Guarantee: $P[y \in C(x + \delta)] \ge 1 - \alpha$ for every admissible $\delta$: the
    clean test point's $\hat s_{n+1} \ge \hat q$ w.p. $\ge 1 - \alpha + 2\beta$,
    $\tilde s_{n+1} \ge \hat s_{n+1} - b_H$ w.p. $\ge 1 - \beta$, the smoothing bound for
    [0, 1]-valued functions (Gaussian: $\Phi^{-1}(\tilde s)$ is $1/\sigma$-Lipschitz) gives
    $\tilde s(x + \delta, y) \ge \rho$, and the test bound fails w.p. $\le \beta$.  This is the
    original RSCP+ rule written in conformity form (Gendler et al.'s $\Phi^{-1}$ shift by
    $r/\sigma$ is $c[\cdot, r]$), extended to uniform noise through
    `certkit.stats.smoothing_lower_bound`.

    Parameters
    ----------
    model : callable or torch.nn.Module
        Maps inputs to class probabilities ``(n, K)`` (logits with ``output="logits"``).
    conformity_score : str, ConformityScore or callable, default "thr"
        A conformity score with values in [0, 1] (``"thr"``, ``"aps"`` or a bounded callable; not RAPS).
    **deprecated
        ``score=``: the deprecated name of `conformity_score` (it shadowed scikit-learn's `score` method
        name); it warns (`FutureWarning`), sets `conformity_score` and will be removed in certkit 0.3.
    sigma : float
        Smoothing noise standard deviation, ``> 0``.
    radius : float
        Perturbation radius ``>= 0``.
    confidence_level : float, default 0.9
        Target coverage under attack $1 - \alpha$.
    n_samples : int, default 256
        Noisy forward passes per input, $n_s \ge 2$.
    error_rate : float, default 0.001
        $\beta$ per Monte-Carlo bound; ``2 * error_rate`` must be below $\alpha$.
    mc_bound : {"hoeffding", "bernstein"}, default "hoeffding"
        Upper confidence bound used at test time.
    noise : {"gaussian", "uniform"}, default "gaussian"
        Smoothing noise.
    output : {"probabilities", "logits"}, default "probabilities"
        What the model returns.
    batch_size : int, default 1024
        Inputs per model call.
    device : str or torch.device, default "cpu"
        Device of a torch model.
    rng : None, int or numpy.random.Generator
        Source of the noise.

    Attributes
    ----------
    threshold_ : float
        $\hat q$ (``-inf``: trivial set).
    adjusted_level_ : float
        Calibration level $1 - \alpha + 2\beta$.
    test_level_ : float
        $\rho$.
    calibration_scores_ : numpy.ndarray
        Smoothed calibration scores $\hat s(x_i, y_i)$.
    n_calibration_, n_classes_ : int
        Calibration size and number of classes.
    classes_ : numpy.ndarray
        The class of every column of the sets (the model's ``classes_`` when it has one, as in
        `RCP1Classifier`).
    input_shape_ : tuple of int
        Shape of one calibration input; later inputs must have it (else ``ValueError``).
    n_features_in_ : int
        Number of values per input (``prod(input_shape_)``).
    required_calibration_size_ : int
        Smallest calibration size with a non-trivial set.
    """

    _n_bounds = 2

    def __init__(
        self,
        model: Any,
        *,
        conformity_score: Any = "thr",
        sigma: float,
        radius: float,
        confidence_level: float = 0.9,
        n_samples: int = 256,
        error_rate: float = 0.001,
        mc_bound: str = "hoeffding",
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
        self.n_samples = n_samples
        self.error_rate = error_rate
        self.mc_bound = mc_bound
        self.noise = noise
        self.output = output
        self.batch_size = batch_size
        self.device = device
        self.rng = rng

    def _check_bounded(self) -> None:
        check_in_options(self.mc_bound, "mc_bound", ("hoeffding", "bernstein"))
        score = self._conformity_score()
        if not score.bounded:
            raise ValueError(
                f"RSCP+ needs a conformity score with values in [0, 1] ('thr' or 'aps'), got "
                f"{score!r}; for a callable use CallableScore(fn, bounded=True)"
            )

    def calibrate(self, X: Any, y: Any) -> RSCPPlusClassifier:
        """Calibrate $\\hat q$ on Monte-Carlo smoothed scores of ``(X, y)``.

        Parameters
        ----------
        X : array-like or torch.Tensor, shape (n, ...)
            Calibration inputs.
        y : array-like, shape (n,)
            Class labels, as in `RCP1Classifier.calibrate` (the model's ``classes_`` where it has one).

        Returns
        -------
        self
        """
        self._check_bounded()
        true_scores, params = self._calibrate_common(X, y)
        self.calibration_scores_ = true_scores.mean(axis=1)
        beta = params["eta"]
        self._finish(params["alpha"] - 2 * beta, params)
        if self.threshold_ == -math.inf:
            self.test_level_ = 0.0
        else:
            q_low, _ = hoeffding_bound(
                float(np.clip(self.threshold_, 0.0, 1.0)),
                params["n_samples"],
                confidence_level=1.0 - beta,
                alternative="greater",
            )
            self.test_level_ = float(
                smoothing_lower_bound(
                    float(q_low), radius=params["radius"], sigma=params["sigma"], noise=params["noise"]
                )
            )
        return self

    def predict_set(self, X: Any) -> np.ndarray:
        """Prediction sets from ``n_samples`` fresh noisy copies of every input, bool ``(n, K)``."""
        self._check_bounded()
        scores, params = self._test_scores(X)
        m = params["n_samples"]
        mean = np.clip(scores.mean(axis=1), 0.0, 1.0)
        level = 1.0 - params["eta"]
        if self.mc_bound == "hoeffding":
            _, high = hoeffding_bound(mean, m, confidence_level=level, alternative="less")
        else:
            var = np.maximum(scores.var(axis=1, ddof=1), 0.0)
            _, high = empirical_bernstein_bound(mean, var, m, confidence_level=level, alternative="less")
        return np.asarray(high) >= self.test_level_
