"""Randomized-smoothing certificates c[p, r] and their inverses.

If h(x) = P_ε[event at x + ε] for smoothing noise ε, then every perturbation δ within the threat model of
radius r satisfies

    c_low[h(x), r]  ≤  h(x + δ)  ≤  c_up[h(x), r].

* ``noise="gaussian"``: ε ~ N(0, σ² I), threat ‖δ‖₂ ≤ r;
  c_low[p, r] = Φ(Φ⁻¹(p) − r/σ) and c_up[p, r] = Φ(Φ⁻¹(p) + r/σ) (Neyman–Pearson; Cohen et al. 2019).
* ``noise="uniform"``: ε ~ U[−λ, λ]^d with standard deviation σ (λ = σ√3), threat ‖δ‖₁ ≤ r;
  c_low[p, r] = max(0, p − r/(2λ)) and c_up[p, r] = min(1, p + r/(2λ)) (total-variation distance between
  shifted boxes).

The inverses answer "how large must the clean probability be" (or "how small") for a target to be
certified.  Every computed value is padded outward (lower bounds and ``smoothing_inverse_upper`` down,
upper bounds and ``smoothing_inverse_lower`` up) by 1e-13 relative plus 8 machine epsilons, which covers
the rounding of ``ndtr``/``ndtri``; values that are exact by definition are returned exactly
(``radius=0`` gives ``p`` back, and the edges 0 and 1 stay put where the map fixes them).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import special

from certkit._validation import check_in_options, check_level, check_nonnegative, check_positive
from certkit.stats._common import NOISES, bounded_array, broadcast, pad_down, pad_up, unwrap

__all__ = [
    "robust_level",
    "smoothing_inverse_lower",
    "smoothing_inverse_upper",
    "smoothing_lower_bound",
    "smoothing_upper_bound",
]


def _prepare(x: Any, name: str, radius: Any, sigma: Any, noise: Any) -> tuple[np.ndarray, np.ndarray, float]:
    """Validate the common arguments; return broadcast ``x``, ``radius`` and the scaled shift."""
    arr = bounded_array(x, name, low=0.0, high=1.0)
    rad = bounded_array(radius, "radius", low=0.0)
    sigma = check_positive(sigma, "sigma")
    check_in_options(noise, "noise", NOISES)
    arr, rad = broadcast((name, arr), ("radius", rad))
    # Gaussian: shift in z-space r / sigma; uniform: shift in probability r / (2 lambda).
    scale = sigma if noise == "gaussian" else 2.0 * sigma * np.sqrt(3.0)
    return arr, rad, scale


def _gaussian_shift(p: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """Phi(Phi^-1(p) + shift), exact at p in {0, 1} and at shift = 0."""
    out = special.ndtr(special.ndtri(p) + shift)
    # The exact map is >= p for shift > 0 and <= p for shift < 0: clamp (rounding in ndtr(ndtri(p)) can
    # land an ulp on the wrong side of p for tiny shifts) and pad outward in the direction of the shift.
    out = np.where(shift > 0, pad_up(np.maximum(out, p)), pad_down(np.minimum(out, p)))
    # ndtri(0) = -inf and ndtri(1) = +inf propagate to 0 and 1; keep p itself where nothing moves.
    return np.where((shift == 0) | (p == 0) | (p == 1), p, out)


def smoothing_lower_bound(
    p: Any, *, radius: Any, sigma: float, noise: str = "gaussian"
) -> np.ndarray | np.float64:
    """Certified lower bound c_low[p, r] on a smoothed probability after a perturbation.

    Parameters
    ----------
    p : float or array-like
        Clean smoothed probability h(x) in [0, 1] (or a lower confidence bound on it; the bound is
        increasing in ``p``).
    radius : float or array-like
        Perturbation radius r ≥ 0 (ℓ2 for Gaussian noise, ℓ1 for uniform noise); broadcast against ``p``.
    sigma : float
        Standard deviation σ > 0 of the smoothing noise per coordinate.
    noise : {"gaussian", "uniform"}, default "gaussian"
        The smoothing distribution (see ``certkit.stats.smoothing``).

    Returns
    -------
    numpy.ndarray or numpy.float64
        c_low[p, r] with the broadcast shape of ``p`` and ``radius`` (a scalar for scalar inputs):
        Gaussian Φ(Φ⁻¹(p) − r/σ), uniform max(0, p − r/(2σ√3)).  Equals ``p`` at ``radius=0`` and 0 at
        ``p=0``; for Gaussian noise it is 1 at ``p=1``.

    Raises
    ------
    TypeError, ValueError
        NaN/inf or ``p`` outside [0, 1], ``radius < 0``, ``sigma <= 0``, unknown ``noise``, or shapes
        that do not broadcast.

    Examples
    --------
    >>> round(float(smoothing_lower_bound(0.9, radius=0.25, sigma=0.5)), 6)
    0.782761
    >>> round(float(smoothing_lower_bound(0.9, radius=0.5, sigma=1 / 3**0.5, noise="uniform")), 6)
    0.65
    """
    arr, rad, scale = _prepare(p, "p", radius, sigma, noise)
    if noise == "gaussian":
        return unwrap(_gaussian_shift(arr, -rad / scale))
    return unwrap(np.where(rad == 0, arr, pad_down(arr - rad / scale)))


def smoothing_upper_bound(
    p: Any, *, radius: Any, sigma: float, noise: str = "gaussian"
) -> np.ndarray | np.float64:
    """Certified upper bound c_up[p, r] on a smoothed probability after a perturbation.

    Parameters
    ----------
    p : float or array-like
        Clean smoothed probability h(x) in [0, 1] (or an upper confidence bound on it).
    radius : float or array-like
        Perturbation radius r ≥ 0 (ℓ2 for Gaussian noise, ℓ1 for uniform noise); broadcast against ``p``.
    sigma : float
        Standard deviation σ > 0 of the smoothing noise per coordinate.
    noise : {"gaussian", "uniform"}, default "gaussian"
        The smoothing distribution.

    Returns
    -------
    numpy.ndarray or numpy.float64
        Gaussian Φ(Φ⁻¹(p) + r/σ), uniform min(1, p + r/(2σ√3)); equals
        ``1 - smoothing_lower_bound(1 - p, ...)`` (up to the outward padding).

    Raises
    ------
    TypeError, ValueError
        As ``smoothing_lower_bound``.

    Examples
    --------
    >>> round(float(smoothing_upper_bound(0.1, radius=0.25, sigma=0.5)), 6)
    0.217239
    """
    arr, rad, scale = _prepare(p, "p", radius, sigma, noise)
    if noise == "gaussian":
        return unwrap(_gaussian_shift(arr, rad / scale))
    return unwrap(np.where(rad == 0, arr, pad_up(arr + rad / scale)))


def smoothing_inverse_lower(
    target: Any, *, radius: Any, sigma: float, noise: str = "gaussian"
) -> np.ndarray | np.float64:
    """Smallest clean probability whose certified lower bound reaches ``target``.

    Returns p* = min{p : c_low[p, r] ≥ t}: Gaussian Φ(Φ⁻¹(t) + r/σ); uniform t + r/(2σ√3) (and 0 at t = 0).

    Parameters
    ----------
    target : float or array-like
        Required probability t in [0, 1] under perturbation.
    radius : float or array-like
        Perturbation radius r ≥ 0; broadcast against ``target``.
    sigma : float
        Standard deviation σ > 0 of the smoothing noise per coordinate.
    noise : {"gaussian", "uniform"}, default "gaussian"
        The smoothing distribution.

    Returns
    -------
    numpy.ndarray or numpy.float64
        p*, with the broadcast shape of ``target`` and ``radius``.  For uniform noise t + r/(2λ) can
        exceed 1, meaning no clean probability suffices (not even p = 1); the result is then clipped to 1,
        so *a returned 1 with* ``target < 1`` *means "unattainable"* (as a conformal level it yields the
        trivial, always-covering set).  For Gaussian noise the same happens when Φ rounds to 1 in float64.

    Raises
    ------
    TypeError, ValueError
        As ``smoothing_lower_bound`` (with ``target`` in place of ``p``).

    Examples
    --------
    >>> round(float(smoothing_inverse_lower(0.9, radius=0.12, sigma=0.25)), 6)
    0.960927
    """
    arr, rad, scale = _prepare(target, "target", radius, sigma, noise)
    if noise == "gaussian":
        return unwrap(_gaussian_shift(arr, rad / scale))
    return unwrap(np.where((rad == 0) | (arr == 0), arr, pad_up(arr + rad / scale)))


def smoothing_inverse_upper(
    target: Any, *, radius: Any, sigma: float, noise: str = "gaussian"
) -> np.ndarray | np.float64:
    """Largest clean probability whose certified upper bound stays at or below ``target``.

    Returns p* = max{p : c_up[p, r] ≤ t}: Gaussian Φ(Φ⁻¹(t) − r/σ); uniform t − r/(2σ√3) (and 1 at t = 1).
    Used e.g. by conformal risk control, which calibrates the clean risk at B·p*(α/B).

    Parameters
    ----------
    target : float or array-like
        Allowed probability t in [0, 1] under perturbation.
    radius : float or array-like
        Perturbation radius r ≥ 0; broadcast against ``target``.
    sigma : float
        Standard deviation σ > 0 of the smoothing noise per coordinate.
    noise : {"gaussian", "uniform"}, default "gaussian"
        The smoothing distribution.

    Returns
    -------
    numpy.ndarray or numpy.float64
        p*.  For uniform noise a negative t − r/(2λ) (no clean probability works, not even 0) is clipped
        to 0: *a returned 0 with* ``target > 0`` *means "unattainable"*.

    Raises
    ------
    TypeError, ValueError
        As ``smoothing_lower_bound`` (with ``target`` in place of ``p``).

    Examples
    --------
    >>> round(float(smoothing_inverse_upper(0.1, radius=0.12, sigma=0.25)), 6)
    0.039073
    """
    arr, rad, scale = _prepare(target, "target", radius, sigma, noise)
    if noise == "gaussian":
        return unwrap(_gaussian_shift(arr, -rad / scale))
    return unwrap(np.where((rad == 0) | (arr == 1), arr, pad_down(arr - rad / scale)))


def robust_level(confidence_level: float, *, radius: float, sigma: float, noise: str = "gaussian") -> float:
    """Clean calibration level that keeps ``confidence_level`` under attack (RCP1's adjusted level).

    Robust conformal prediction with smoothing calibrates at 1 − α' = p* where c_low[p*, r] = 1 − α, i.e.
    ``smoothing_inverse_lower(confidence_level, radius=radius, sigma=sigma, noise=noise)``; for Gaussian
    noise 1 − α' = Φ(Φ⁻¹(1 − α) + r/σ).

    Parameters
    ----------
    confidence_level : float
        Target coverage 1 − α under perturbation, in (0, 1).
    radius : float
        Perturbation radius, ``>= 0`` (a scalar; use `smoothing_inverse_lower` for arrays).
    sigma : float
        Smoothing noise standard deviation, ``> 0``.
    noise : {"gaussian", "uniform"}, default "gaussian"
        The smoothing distribution.

    Returns
    -------
    float
        The adjusted level in ``[confidence_level, 1]`` (exactly ``confidence_level`` at ``radius=0``);
        1.0 means no finite calibration set gives a non-trivial prediction set (the conformal rank
        exceeds ``n`` for every ``n``).

    Raises
    ------
    TypeError, ValueError
        ``confidence_level`` outside (0, 1), ``radius`` not a real number or ``< 0``, ``sigma <= 0`` or
        unknown ``noise``.

    Examples
    --------
    >>> round(robust_level(0.9, radius=0.12, sigma=0.25), 6)
    0.960927
    """
    level = check_level(confidence_level)
    radius = check_nonnegative(radius, "radius")
    return float(smoothing_inverse_lower(level, radius=radius, sigma=sigma, noise=noise))
