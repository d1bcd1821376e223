r"""RCP1 for conformal risk control: a monotone loss controlled under adversarial perturbations."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from certkit._typing import RNGLike
from certkit._validation import (
    as_numpy,
    check_array,
    check_positive,
    check_rng,
)
from certkit.conformal._base import _ConformalBase
from certkit.conformal._checks import check_inputs
from certkit.stats import smoothing_inverse_upper

__all__ = ["RCP1RiskControl"]


def _check_targets(Y: Any, n: int) -> np.ndarray:
    """Targets ``Y`` of shape ``(n, ...)``: finite real numbers, dtype kept (integer labels stay integers).

    Booleans, complex numbers, strings and objects are rejected rather than reinterpreted.
    """
    Y = check_array(Y, "Y", dtype=None)
    if Y.dtype == np.bool_ or not np.issubdtype(Y.dtype, np.number) or np.iscomplexobj(Y):
        raise TypeError(f"Y must contain real numbers (integers or floats), got dtype {Y.dtype}; "
                        "pass a boolean mask as integers (Y.astype(int))")
    if Y.ndim == 0 or Y.shape[0] != n:
        raise ValueError(f"inconsistent numbers of samples: X has {n}, Y has shape {Y.shape}")
    return Y


class RCP1RiskControl(_ConformalBase):
    r"""Conformal risk control robust to perturbations, with one noisy sample per point (RCP1).

    For a loss $L(\lambda) \in [0, B]$ non-increasing in $\lambda$ (e.g. the false-negative
    rate of a thresholded mask), calibrate the clean noisy risk at $\alpha'$ with
    $c_{up}[\alpha'/B, r] = \alpha/B$, i.e. (Gaussian)
    $\alpha' = B\,\Phi(\Phi^{-1}(\alpha/B) - r/\sigma)$,
    and pick

    $$
    \hat\lambda = \inf\{\lambda : \tfrac{n}{n+1} \hat R_n(\lambda) + \tfrac{B}{n+1} \le \alpha'\},
    $$

    with $\hat R_n$ the mean loss on inputs carrying one noise draw each.  Guarantee: the expected
    loss at $\hat\lambda$ on a perturbed test input (fresh noise) is at most $\alpha$ for every
    perturbation of norm $\le r$: the smoothed loss $E_\varepsilon[L]/B$ obeys
    $c_{up}$, which is concave, so Jensen carries the clean CRC bound $\alpha'$ to
    $\alpha$.

    Parameters
    ----------
    model : callable or torch.nn.Module
        Maps inputs ``(n, ...)`` to outputs ``(n, ...)`` (e.g. per-pixel probabilities).
    loss : callable
        ``loss(pred, target, lam) -> (n,)`` losses in ``[0, bound]``, non-increasing in ``lam``;
        ``pred`` are model outputs at noisy inputs (float64), ``target`` the ``Y`` rows.
    lambdas : array-like, shape (m,)
        Candidate values of $\lambda$ (sorted internally); the largest should make the loss 0.
    bound : float, default 1.0
        Upper bound $B$ of the loss.
    sigma : float
        Smoothing noise standard deviation per coordinate, ``> 0``.
    radius : float
        Perturbation radius ``>= 0`` (ℓ2 for Gaussian noise, ℓ1 for uniform).
    confidence_level : float, default 0.9
        The target risk is $\alpha = 1 - \text{confidence\_level}$ (in the loss's units; must be
        below ``bound``).
    noise : {"gaussian", "uniform"}, default "gaussian"
        Smoothing noise.
    batch_size : int, default 1024
        Inputs per model call.
    device : str or torch.device, default "cpu"
        Device of a torch model.
    rng : None, int or numpy.random.Generator
        Source of the noise; fresh draws at every call.

    Attributes
    ----------
    lambda_ : float
        $\hat\lambda$ (the largest candidate, with a warning, if none qualifies).
    adjusted_risk_ : float
        $\alpha'$.
    lambdas_ : numpy.ndarray
        The sorted candidates.
    risks_ : numpy.ndarray
        $\hat R_n(\lambda)$ for each candidate.
    n_calibration_ : int
        Number of calibration points.
    input_shape_ : tuple of int
        Shape of one calibration input; later inputs must have it (else ``ValueError``).
    n_features_in_ : int
        Number of values per input (``prod(input_shape_)``).
    """

    _fitted_attr = "lambda_"

    def __init__(
        self,
        model: Any,
        *,
        loss: Callable[..., Any],
        lambdas: Any,
        bound: float = 1.0,
        sigma: float,
        radius: float,
        confidence_level: float = 0.9,
        noise: str = "gaussian",
        batch_size: int = 1024,
        device: Any = "cpu",
        rng: RNGLike = None,
    ) -> None:
        self.model = model
        self.loss = loss
        self.lambdas = lambdas
        self.bound = bound
        self.sigma = sigma
        self.radius = radius
        self.confidence_level = confidence_level
        self.noise = noise
        self.batch_size = batch_size
        self.device = device
        self.rng = rng

    def _params(self) -> dict[str, Any]:
        params = self._check_common()
        params["bound"] = check_positive(self.bound, "bound")
        if params["alpha"] >= params["bound"]:
            raise ValueError(f"the target risk 1 - confidence_level = {params['alpha']:.6g} must be below "
                             f"bound = {params['bound']:.6g}")
        if not callable(self.loss):
            raise TypeError(f"loss must be callable as loss(pred, target, lam), "
                            f"got {type(self.loss).__name__}")
        return params

    def _losses(self, pred: np.ndarray, Y: np.ndarray, lam: float, bound: float) -> np.ndarray:
        out = check_array(as_numpy(self.loss(pred, Y, lam), "loss output"), "loss output", ndim=1)
        if out.shape[0] != pred.shape[0]:
            raise ValueError(f"loss must return one value per input ({pred.shape[0]}), got {out.shape[0]}")
        if np.any(out < 0) or np.any(out > bound * (1 + 1e-12)):
            raise ValueError(f"loss values must lie in [0, bound={bound}], "
                             f"got [{out.min():.6g}, {out.max():.6g}]")
        return out

    def _predict_noisy(self, X: np.ndarray, params: dict[str, Any]) -> np.ndarray:
        chunks = self._raw_outputs(X, 1, params["noise"], params["sigma"])
        return np.concatenate([raw for _, _, raw in chunks])

    def calibrate(self, X: Any, Y: Any) -> RCP1RiskControl:
        """Choose $\\hat\\lambda$ on ``(X, Y)`` with one fresh noise draw per input.

        Parameters
        ----------
        X : array-like or torch.Tensor, shape (n, ...)
            Calibration inputs.
        Y : array-like, shape (n, ...)
            Targets passed to ``loss``: finite real numbers, dtype kept (a boolean mask as integers).

        Returns
        -------
        self
        """
        params = self._params()
        X = check_inputs(X)
        Y = _check_targets(Y, X.shape[0])
        self._remember_inputs(X)
        lambdas = np.sort(check_array(self.lambdas, "lambdas", ndim=1))
        bound = params["bound"]
        alpha = params["alpha"]
        self.rng_ = check_rng(self.rng)
        self.predictor_ = self._wrapper()
        pred = self._predict_noisy(X, params)
        losses = np.stack([self._losses(pred, Y, float(lam), bound) for lam in lambdas])
        if np.any(np.diff(losses, axis=0) > 1e-12 * bound):
            raise ValueError("loss must be non-increasing in lam for every input (conformal risk control "
                             "needs a monotone loss)")
        n = X.shape[0]
        alpha_adj = bound * float(smoothing_inverse_upper(alpha / bound, radius=params["radius"],
                                                          sigma=params["sigma"], noise=params["noise"]))
        self.adjusted_risk_ = alpha_adj
        self.lambdas_ = lambdas
        self.risks_ = losses.mean(axis=1)
        self.n_calibration_ = n
        ok = np.flatnonzero(n / (n + 1) * self.risks_ + bound / (n + 1) <= alpha_adj)
        if ok.size:
            self.lambda_ = float(lambdas[ok[0]])
        else:
            self.lambda_ = float(lambdas[-1])
            need = math.ceil(bound / alpha_adj) - 1 if alpha_adj > 0 else None
            what = (f"need n >= {need} calibration points (B/(n+1) <= alpha' = {alpha_adj:.6g})" if need
                    else "the adjusted risk alpha' is 0: decrease radius or increase sigma")
            warnings.warn(
                f"no candidate lambda satisfies the risk-control condition with {n} calibration points; "
                f"using the largest, {self.lambda_:.6g} (the guarantee then needs its loss to be <= alpha'); "
                + what, UserWarning, stacklevel=2)
        return self

    def predict(self, X: Any) -> np.ndarray:
        """Model outputs at one fresh noisy copy of each input (apply `lambda_` to them)."""
        return self._predict_noisy(self._check_fitted_inputs(X), self._params())

    def risk(self, X: Any, Y: Any) -> float:
        """Empirical loss at `lambda_` on fresh noisy copies of ``X`` (e.g. perturbed test inputs)."""
        X = self._check_fitted_inputs(X)
        params = self._params()
        Y = _check_targets(Y, X.shape[0])
        pred = self._predict_noisy(X, params)
        return float(self._losses(pred, Y, self.lambda_, params["bound"]).mean())
