"""The Rademacher performative generalization bound of linear models
(`generalization_bound(kind="rademacher")`)."""

from __future__ import annotations

import math

import numpy as np

from certkit._validation import (
    check_in_options,
    check_nonnegative,
    check_probability,
)
from certkit.performative._inputs import check_problem
from certkit.performative.bound_result import BoundResult, _result
from certkit.performative.closed_form import loss_values
from certkit.performative.risk import wasserstein_risk


def _class_max(loss: str, margin: float) -> float:
    """The largest loss of the class: at the margin -Lambda X."""
    return 1.0 + margin if loss == "hinge" else float(np.logaddexp(0.0, margin))


def _rademacher(
    *,
    theta,
    X,
    y,
    loss,
    weight_norm,
    feature_norm,
    loss_bound,
    radius_population,
    radius_sample,
    share,
    diameter,
    p,
    confidence_level,
    intercept,
) -> BoundResult:
    loss = check_in_options(loss, "loss", ("hinge", "logistic"))
    for name, value in (
        ("theta", theta),
        ("X", X),
        ("y", y),
        ("weight_norm", weight_norm),
        ("feature_norm", feature_norm),
    ):
        if value is None:
            raise TypeError(f"generalization_bound(kind='rademacher') needs {name}")
    Lam = check_nonnegative(weight_norm, "weight_norm")
    Xb = check_nonnegative(feature_norm, "feature_norm")
    if intercept is not None and np.ndim(intercept) != 0:
        raise ValueError(f"intercept must be a scalar for kind='rademacher', got shape {np.shape(intercept)}")
    b_in = 0.0 if intercept is None else intercept
    thetas, X_arr, y_arr, bs, batch = check_problem(theta, X, y, loss, b_in)
    if batch:
        raise ValueError(f"theta must be 1-D for kind='rademacher', got shape {thetas.shape}")
    theta_arr, b = thetas[0], float(bs[0])
    affine = intercept is not None
    weight = float(np.hypot(np.linalg.norm(theta_arr), b))  # ||(theta, b)||_2 (= ||theta||_2 without b)
    if weight > Lam * (1 + 1e-12):
        what = "||(theta, intercept)||_2" if affine else "||theta||_2"
        raise ValueError(
            f"{what} = {weight:.6g} exceeds weight_norm = {Lam:g}; the class bound covers only "
            f"{what} <= weight_norm"
        )
    if np.linalg.norm(X_arr, axis=1).max() > Xb * (1 + 1e-12):
        raise ValueError(
            "some rows of X have ||x||_2 > feature_norm; feature_norm must bound every feature vector"
        )
    Xc = math.hypot(Xb, 1.0) if affine else Xb  # bound on ||(x, 1)||_2 for the affine class
    if not math.isfinite(Lam * Xc):
        raise ValueError(
            f"weight_norm = {Lam:g} times feature_norm = {Xb:g} overflows float64: the class's largest "
            "margin, its complexity term and the default loss_bound are infinite; use norms that bound the "
            "model and the data tightly"
        )
    both_radii = radius_population is not None and radius_sample is not None
    if both_radii and (share is not None or diameter is not None):
        raise TypeError(
            "give the radii (radius_population, radius_sample) or share and diameter, not both: "
            "with both radii given, share and diameter would be ignored"
        )
    if radius_population is None or radius_sample is None:
        if radius_population is not None or radius_sample is not None:
            raise TypeError("give both radius_population and radius_sample, or share and diameter")
        if share is None or diameter is None:
            raise TypeError("generalization_bound(kind='rademacher') needs the radii or share and diameter")
        rho = check_probability(share, "share") ** (1.0 / p) * check_nonnegative(diameter, "diameter")
        radius_population = radius_sample = rho
    rho_d = check_nonnegative(radius_population, "radius_population")
    rho_s = check_nonnegative(radius_sample, "radius_sample")
    if loss_bound is None:
        loss_bound = _class_max(loss, Lam * Xc)
    M = check_nonnegative(loss_bound, "loss_bound")
    n = X_arr.shape[0]
    losses = loss_values(loss, y_arr * (X_arr @ theta_arr + b))
    if losses.max() > M * (1 + 1e-12):
        raise ValueError(
            f"loss_bound = {M:g} is below the largest {loss} loss on the sample ({losses.max():.6g}, "
            f"{int(np.sum(losses > M * (1 + 1e-12)))} of {n} rows above it); loss_bound must bound the loss "
            f"over the whole class (default: the class maximum, here {_class_max(loss, Lam * Xc):.6g})"
        )
    empirical = float(losses.mean())
    best = wasserstein_risk(
        theta_arr, X_arr, y_arr, loss=loss, radius=rho_s, p=p, norm=2, direction="inf", intercept=b
    )
    # population term: the W_1 excess rho_D ||theta||_2, exact on every distribution, bounds the W_p excess
    population = rho_d * float(np.linalg.norm(theta_arr)) * (1.0 + 1e-12)
    delta = 1.0 - confidence_level
    terms = {
        "complexity": 2.0 * 1.0 * Lam * Xc / math.sqrt(n),
        "sampling": M * math.sqrt(math.log(1.0 / delta) / (2.0 * n)),
        "population_performative": population,
        "sample_performative": empirical - best,
    }
    assumptions = {
        "bound": "Rademacher performative generalization gap",
        "n": n,
        "loss": f"{loss} (1-Lipschitz in the margin)",
        "weight_norm Lambda": Lam,
        "feature_norm X": Xb,
        "intercept b": b if affine else "none (linear class)",
        "loss_bound M": M,
        "p": p,
        "radius_population": rho_d,
        "radius_sample": rho_s,
        "confidence_level": confidence_level,
        "empirical_risk": empirical,
        "conditions": "i.i.d. sample; ||theta||_2 <= Lambda and ||x||_2 <= X fixed before seeing the data; "
        "loss in [0, M]; W_p(D_perf, D) <= radius_population, W_p(S_perf, S) <= radius_sample (l2 "
        "transport, labels fixed); population term = its distribution-free W_1 bound"
        + ("; affine class: ||(theta, b)||_2 <= Lambda, features augmented by 1" if affine else ""),
    }
    return _result(terms, assumptions, culprits="weight_norm, feature_norm, loss_bound or the radii")
