"""Bounds: Thm 3.13/3.15 evaluated by hand, Rademacher and retraining terms, simulated soundness, inverse."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from certkit.performative import (
    BoundResult,
    generalization_bound,
    max_affected_share,
    retraining_bound,
    wasserstein_risk,
)

# The reference constants of the paper's job-seeker study (spec / notebook).
NOTEBOOK = {
    "diameter": 5.29,
    "loss_lipschitz": math.sqrt(28),
    "entropy_integral": 7.3855,
    "loss_range": 1.0,
    "p": 2,
    "confidence_level": 0.95,
}

# (r, n) -> (R, complexity 3.13, complexity 3.15, sampling, performative), evaluated by hand from the formulas
# with q = 1.959963984540054, delta = 0.05, L_f = 0.25, B = 0.001.
HAND = {
    (0.01, 1000): (0.529, 117.43275776516955, 11.577730969408472, 0.08589388166934751, 5.598409774212675),
    (0.01, 100000): (0.529, 11.743275776516954, 1.157773096940847, 0.00858938816693475, 5.598409774212675),
    (0.1, 1000): (
        1.6728448822290727,
        44.800859441679364,
        11.262994448494691,
        0.08589388166934751,
        17.703726161461038,
    ),
    (0.1, 100000): (
        1.6728448822290727,
        4.480085944167936,
        1.126299444849469,
        0.00858938816693475,
        17.703726161461038,
    ),
    # the binomial-spread radius dominates here
    (0.0001, 1000): (
        0.13169487052092924,
        437.8908524662901,
        16.35561734743998,
        0.08589388166934751,
        1.39372750536492,
    ),
}


@pytest.mark.parametrize(("r", "n"), sorted(HAND))
def test_thm_3_13_and_3_15_match_the_hand_evaluation(r, n):
    R, c13, c15, sampling, perf = HAND[(r, n)]
    b13 = generalization_bound(kind="thm3.13", share=r, n=n, model_lipschitz=0.25, **NOTEBOOK)
    b15 = generalization_bound(kind="thm3.15", share=r, n=n, wasserstein_constant=0.001, **NOTEBOOK)
    for b, c in ((b13, c13), (b15, c15)):
        assert b.assumptions["radius R"] == pytest.approx(R, rel=1e-12)
        assert b.terms["complexity"] == pytest.approx(c, rel=1e-12)
        assert b.terms["sampling"] == pytest.approx(sampling, rel=1e-12)
        assert b.terms["performative"] == pytest.approx(perf, rel=1e-12)
        assert b.total == pytest.approx(c + sampling + perf, rel=1e-12)
    assert b13.total == pytest.approx(
        {(0.01, 1000): 123.11706142105157, (0.1, 100000): 22.19240149379591}.get((r, n), b13.total), rel=1e-12
    )


def test_bound_result_is_frozen_and_summarises_every_term():
    b = generalization_bound(kind="thm3.13", share=0.1, n=1000, model_lipschitz=0.25, **NOTEBOOK)
    assert isinstance(b, BoundResult)
    with pytest.raises(dataclasses.FrozenInstanceError):
        b.total = 0.0  # type: ignore[misc]
    text = b.summary()
    for name in ("complexity", "sampling", "performative", "total", "radius R"):
        assert name in text
    assert str(b) == text
    assert set(b.to_dict()) == {"total", "terms", "assumptions"}


def test_zero_share_with_p_above_one_is_an_error_not_an_infinite_bound():
    # issue 23: the complexity term is infinite at R = 0; say so instead of returning inf
    with pytest.raises(ValueError, match=r"share=0 gives the radius R = 0.*vacuous"):
        generalization_bound(kind="thm3.13", share=0.0, n=1000, model_lipschitz=0.25, **NOTEBOOK)


CLASS = {"kind": "rademacher", "weight_norm": 1.0, "feature_norm": 3.0}  # ||theta|| <= 1, ||x|| <= 3


def _sample(rng, n, *, bound=3.0):
    """Two Gaussian classes in 2-D, rows rescaled into the ball ||x||_2 <= bound."""
    y = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    X = rng.normal(size=(n, 2)) + 0.8 * y[:, None]
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    return X * np.minimum(1.0, bound / norms), y


def test_rademacher_terms():
    rng = np.random.default_rng(0)
    X, y = _sample(rng, 200)
    theta = np.array([0.6, 0.3])
    b = generalization_bound(
        kind="rademacher",
        theta=theta,
        X=X,
        y=y,
        loss="hinge",
        weight_norm=1.0,
        feature_norm=3.0,
        share=0.05,
        diameter=2.0,
        p=2,
        confidence_level=0.9,
    )
    rho = 0.05**0.5 * 2.0
    emp = wasserstein_risk(theta, X, y, loss="hinge", radius=0.0)
    assert b.terms["complexity"] == pytest.approx(2 * 1.0 * 3.0 / math.sqrt(200), rel=1e-12)
    assert b.terms["sampling"] == pytest.approx(4.0 * math.sqrt(math.log(10) / 400), rel=1e-12)  # M = 1 + 3
    # population term: W_1 <= W_p, and for W_1 the excess is rho ||theta|| on every distribution
    assert b.terms["population_performative"] == pytest.approx(rho * np.linalg.norm(theta), rel=1e-9)
    inf2 = wasserstein_risk(theta, X, y, loss="hinge", radius=rho, p=2, direction="inf")
    assert b.terms["sample_performative"] == pytest.approx(emp - inf2, rel=1e-9)
    assert b.total == pytest.approx(sum(b.terms.values()), rel=1e-12)
    zero = generalization_bound(
        **CLASS,
        theta=theta,
        X=X,
        y=y,
        radius_population=0.0,
        radius_sample=0.0,
    )
    assert zero.terms["population_performative"] == 0.0
    assert zero.terms["sample_performative"] == pytest.approx(0.0, abs=1e-10)


def test_hoeffding_term_violation_rate_is_at_most_delta():
    """Losses in [0, M] (Bernoulli(1/2) * M, near-worst for Hoeffding): P(mean gap > term) <= delta."""
    rng = np.random.default_rng(1)
    n, M, reps = 60, 2.0, 20_000
    for level in (0.8, 0.9, 0.95):
        delta = 1 - level
        term = M * math.sqrt(math.log(1 / delta) / (2 * n))
        means = M * rng.binomial(n, 0.5, size=reps) / n
        rate = np.mean(M * 0.5 - means > term)
        assert rate <= delta + 3 * math.sqrt(delta * (1 - delta) / reps)


def test_rademacher_bound_holds_under_simulated_performative_shifts():
    """Self-fulfilling sample, self-negating population (a share r of units moved by D): the bound holds."""
    rng = np.random.default_rng(2)
    theta = np.array([0.6, 0.3])
    u = theta / np.linalg.norm(theta)
    n, r, D, level = 150, 0.1, 1.5, 0.9
    Xpop, ypop = _sample(rng, 100_000)
    moved = rng.random(len(ypop)) < r  # the population self-negates: margins pushed down by D
    Xpop_perf = Xpop - (moved * ypop)[:, None] * D * u
    risk_pop = np.maximum(0, 1 - ypop * (Xpop_perf @ theta)).mean()
    violations = 0
    reps = 200
    for _ in range(reps):
        X, y = _sample(rng, n)
        m = int(r * n)
        idx = rng.choice(n, m, replace=False)  # the sample self-fulfils: margins pushed up by D
        X_perf = X.copy()
        X_perf[idx] += (y[idx, None] * D) * u
        emp_perf = np.maximum(0, 1 - y * (X_perf @ theta)).mean()
        b = generalization_bound(
            **CLASS,
            theta=theta,
            X=X,
            y=y,
            radius_population=(r * 1.2) ** 0.5 * D,
            radius_sample=(m / n) ** 0.5 * D,
            p=2,
            confidence_level=level,
        )
        violations += risk_pop - emp_perf > b.total
    assert violations / reps <= 1 - level


def test_retraining_bound_terms_and_kappa_one_limit():
    common = {
        "n": 5000,
        "share": 0.03,
        "diameter": 1.0,
        "loss_lipschitz": 2.0,
        "map_lipschitz": 1 / 3,
        "dimension": 4,
        "concentration": (1.0, 1.0),
        "p": 2,
        "confidence_level": 0.9,
    }
    b = retraining_bound(contraction=3.0, n_rounds=3, empirical_risk=0.4, **common)
    # (kappa^{T-1} - 1) / (L^{-1} (kappa - 1)) (m/n)^{1/p} D L_a = (9 - 1) / (0.5 * 2) * sqrt(0.03) / 3
    assert b.terms["performative"] == pytest.approx(8.0 * math.sqrt(0.03) / 3.0, rel=1e-12)
    assert b.terms["sampling"] == pytest.approx(2.0 * (math.log(10) / 5000) ** 0.5, rel=1e-12)
    assert b.total == pytest.approx(0.4 + b.terms["sampling"] + b.terms["performative"], rel=1e-12)
    one = retraining_bound(contraction=1.0, n_rounds=4, **common)
    assert one.terms["performative"] == pytest.approx(3 * 2.0 * math.sqrt(0.03) * 1.0 / 3, rel=1e-12)
    near = retraining_bound(contraction=1.0 + 1e-9, n_rounds=4, **common)
    assert near.terms["performative"] == pytest.approx(one.terms["performative"], rel=1e-7)
    assert retraining_bound(contraction=5.0, n_rounds=1, **common).terms["performative"] == 0.0


# --- the inverse: max_affected_share -----------------------------------------------------------------------


def _largest_feasible(totals, target):
    feasible = [m for m, t in enumerate(totals) if t <= target]
    return max(feasible)


@pytest.mark.parametrize("kind", ["thm3.13", "thm3.15"])
def test_max_affected_share_matches_brute_force_for_the_theorem_bounds(kind):
    n = 2000
    extra = {"model_lipschitz": 0.25} if kind == "thm3.13" else {"wasserstein_constant": 0.001}
    totals = [math.inf] + [  # share 0 (R = 0) is an error: an infinite bound
        generalization_bound(kind=kind, share=m / n, n=n, **extra, **NOTEBOOK).total for m in range(1, n + 1)
    ]
    lowest = float(np.min(totals))
    for target in (lowest * 1.01, lowest * 1.3, lowest * 3.0):
        got = max_affected_share(target, kind=kind, n=n, **extra, **NOTEBOOK)
        assert got == _largest_feasible(totals, target) / n
    with pytest.raises(ValueError, match=r"no share of affected units keeps the .* bound below target="):
        max_affected_share(lowest * 0.99, kind=kind, n=n, **extra, **NOTEBOOK)


def test_max_affected_share_small_n_where_the_radius_is_not_monotone():
    # n = 10 < q^2 at confidence 0.9999 (q = 3.89): R(r) falls for some r > 1/2, so the bound is not unimodal
    kw = {**NOTEBOOK, "confidence_level": 0.9999, "model_lipschitz": 0.25, "n": 10}
    totals = [math.inf]  # share 0: R = 0, an error (an infinite bound)
    totals += [generalization_bound(kind="thm3.13", share=m / 10, **kw).total for m in range(1, 11)]
    for target in sorted(totals)[:-1]:
        assert max_affected_share(target, kind="thm3.13", **kw) == _largest_feasible(totals, target) / 10


def test_max_affected_share_retraining_and_rademacher():
    common = {
        "n": 500,
        "diameter": 1.0,
        "loss_lipschitz": 2.0,
        "map_lipschitz": 0.5,
        "dimension": 4,
        "contraction": 1.5,
        "n_rounds": 3,
    }
    totals = [retraining_bound(share=m / 500, **common).total for m in range(501)]
    assert max_affected_share(1.0, kind="retraining", **common) == _largest_feasible(totals, 1.0) / 500
    assert max_affected_share(100.0, kind="retraining", **common) == 1.0
    rng = np.random.default_rng(3)
    X, y = _sample(rng, 40)
    kw = {
        "theta": np.array([0.6, 0.3]),
        "X": X,
        "y": y,
        "weight_norm": 1.0,
        "feature_norm": 3.0,
        "diameter": 2.0,
        "p": 2,
    }
    totals = [generalization_bound(kind="rademacher", share=m / 40, **kw).total for m in range(41)]
    target = float(np.median(totals))
    assert max_affected_share(target, kind="rademacher", **kw) == _largest_feasible(totals, target) / 40


# --- errors ------------------------------------------------------------------------------------------------


def test_bound_errors_name_the_argument():
    with pytest.raises(ValueError, match="unknown kind 'thm9'"):
        generalization_bound(kind="thm9")
    with pytest.raises(TypeError, match="needs model_lipschitz"):
        generalization_bound(kind="thm3.13", share=0.1, n=100, **NOTEBOOK)
    with pytest.raises(TypeError, match="does not use wasserstein_constant"):
        generalization_bound(
            kind="thm3.13", share=0.1, n=100, model_lipschitz=0.2, wasserstein_constant=1.0, **NOTEBOOK
        )
    with pytest.raises(ValueError, match="share must lie in"):
        generalization_bound(kind="thm3.13", share=1.5, n=100, model_lipschitz=0.2, **NOTEBOOK)
    with pytest.raises(ValueError, match="confidence_level must lie strictly between 0 and 1"):
        generalization_bound(
            kind="thm3.15",
            share=0.1,
            n=100,
            wasserstein_constant=0.1,
            **{**NOTEBOOK, "confidence_level": 1.0},
        )
    rng = np.random.default_rng(0)
    X, y = _sample(rng, 20)
    rademacher = {"kind": "rademacher", "X": X, "y": y, "weight_norm": 1.0, "share": 0.1, "diameter": 1.0}
    with pytest.raises(ValueError, match="exceeds weight_norm"):
        generalization_bound(theta=np.array([3.0, 0.0]), feature_norm=3.0, **rademacher)
    with pytest.raises(ValueError, match="feature_norm must bound every feature vector"):
        generalization_bound(theta=np.array([0.3, 0.0]), feature_norm=0.1, **rademacher)
    with pytest.raises(ValueError, match="n_rounds must be >= 1"):
        retraining_bound(
            n=10,
            share=0.1,
            diameter=1.0,
            loss_lipschitz=1.0,
            contraction=1.0,
            n_rounds=0,
            map_lipschitz=1.0,
            dimension=2,
        )
    with pytest.raises(TypeError, match="do not pass it"):
        max_affected_share(1.0, kind="retraining", share=0.1, n=10)


def test_rademacher_rejects_share_with_both_radii():
    # with both radii given, share and diameter used to be ignored silently (review finding)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 3))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y = rng.choice([-1.0, 1.0], 50)
    theta = np.array([0.5, 0.2, -0.1])
    kwargs = {"theta": theta, "X": X, "y": y, "weight_norm": 1, "feature_norm": 1}
    with pytest.raises(TypeError, match="not both"):
        generalization_bound(kind="rademacher", share=0.9, diameter=2, radius_population=0.01,
                             radius_sample=0.01, **kwargs)
    with pytest.raises(TypeError, match="radius_population, radius_sample"):
        max_affected_share(3.0, kind="rademacher", radius_population=0.5, radius_sample=0.5, diameter=2,
                           **kwargs)
