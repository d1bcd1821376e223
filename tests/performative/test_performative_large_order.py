"""Issue 36 (own fuzz pass): the risks over W_p balls of large order p.

The hinge best case computed the budget n C^p, which underflows float64 for C < 1 and large p (0.1^300): every
term stayed unlowered and the best case came out above the true one; the hinge worst case overflowed in
(p - 1)^(p - 1) from p of about 150; the conic program and the LP wrote the budget as radius^p, below the
solvers' tolerances (the logistic best case fell with p, the LP worst case exceeded the supremum), and cvxpy
failed with ZeroDivisionError from p = 2048. The W_p balls shrink as p grows, so the best case rises and the
worst case falls with p, towards their W_inf limits (every atom moved by the budget C = radius ||theta||_*).
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest

from certkit.performative import wasserstein_risk
from certkit.performative.lp import _conic_exponent

ORDERS = (1.0, 1.5, 2.0, 3.0, 10.0, 30.0, 100.0, 300.0, 1000.0, 1e6, 1e12)
PAD = 1e-12  # the closed forms' outward padding, relative (1 + |v|)


def _problem(seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(20, 2))
    y = np.where(X[:, 0] + 0.3 * rng.normal(size=20) > 0, 1.0, -1.0)
    return rng.normal(size=2), X, y, 0.5


def _hinge_inf_oracle(h, C, p, digits=60):
    """The hinge best case in 60-digit arithmetic: the largest terms lowered by a common c with
    sum_i min(h_i, c)^p = n C^p (bisection on c), then mean((h - c)_+)."""
    with mpmath.workdps(digits):
        h = [mpmath.mpf(float(v)) for v in h]
        budget = len(h) * mpmath.mpf(C) ** p
        if sum(v**p for v in h) <= budget:
            return 0.0
        lo, hi = mpmath.mpf(0), max(h)
        for _ in range(300):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if sum(min(v, mid) ** p for v in h) <= budget else (lo, mid)
        return float(sum(max(v - lo, 0) for v in h) / len(h))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_hinge_closed_forms_are_monotone_in_p_and_bracketed_by_the_w_inf_limits(seed):
    theta, X, y, b = _problem(seed)
    u = y * (X @ theta + b)
    C = 0.1 * np.linalg.norm(theta)
    inf_limit = np.maximum(0.0, 1.0 - u - C).mean()  # W_inf: every atom's margin raised by C
    sup_limit = np.maximum(0.0, 1.0 - u + C).mean()
    kw = {"loss": "hinge", "radius": 0.1, "intercept": b}
    inf = [wasserstein_risk(theta, X, y, p=p, direction="inf", **kw) for p in ORDERS]
    sup = [wasserstein_risk(theta, X, y, p=p, direction="sup", **kw) for p in ORDERS]
    assert np.all(np.diff(inf) >= -2 * PAD) and inf[-1] <= inf_limit
    assert np.all(np.diff(sup) <= 2 * PAD) and sup[-1] >= sup_limit
    assert inf[-1] == pytest.approx(inf_limit, abs=1e-9) and sup[-1] == pytest.approx(sup_limit, abs=1e-9)
    h = np.maximum(0.0, 1.0 - u)
    for p, value in zip(ORDERS, inf):
        if p > 1.0:  # exact oracle of the water-filling
            assert value == pytest.approx(_hinge_inf_oracle(h, C, p), abs=1e-11), p


@pytest.mark.parametrize("seed", [0, 1])
def test_conic_best_case_rises_with_p_below_its_limit_and_beyond_cvxpys_exponents(seed):
    pytest.importorskip("cvxpy")
    theta, X, y, b = _problem(seed)
    u = y * (X @ theta + b)
    limit = np.logaddexp(0.0, -(u + 0.1 * np.linalg.norm(theta))).mean()
    kw = {"loss": "logistic", "radius": 0.1, "intercept": b, "direction": "inf"}
    values = [wasserstein_risk(theta, X, y, p=p, **kw) for p in (3.0, 10.0, 30.0, 100.0, 1000.0, 5000.0)]
    # the solver's pad (1e-6 relative) and tolerance: rises by ~1e-4 from p = 30 on
    assert np.all(np.diff(values) >= -1e-5) and max(values) <= limit
    assert (
        values[-1] >= values[-2] - 1e-5
    )  # p = 5000 > 2048: the W_1024 ball's best case, no ZeroDivisionError


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_lp_worst_case_matches_the_closed_form_at_large_p(seed):
    pytest.importorskip("cvxpy")
    theta, X, y, b = _problem(seed)
    kw = {"loss": "hinge", "radius": 0.1, "intercept": b, "direction": "sup"}
    for p in (10.0, 100.0, 1000.0, 1e12):
        exact = wasserstein_risk(theta, X, y, p=p, **kw)
        lp = wasserstein_risk(theta, X, y, p=p, method="lp", **kw)
        assert exact - 1e-5 <= lp <= exact + 1e-9, p  # a finite support: a lower bound, tight here


def test_conic_exponent_never_rounds_p_up():
    assert [_conic_exponent(p) for p in (1.5, 1.7, 3.0, 1000.5, 1500.0, 2048.0, 1e12)] == [
        1.5,
        1.7,
        3.0,
        1000.0,
        1024.0,
        1024.0,
        1024.0,
    ]
    for p in np.random.default_rng(0).uniform(1.0, 3000.0, size=200):
        q = _conic_exponent(float(p))
        assert q <= p * (1 + 1e-12)  # the W_q ball holds the W_p ball: a lower bound of the best case
        inverse = Fraction(1.0 / Fraction(q)).limit_denominator(1024)  # what cvxpy writes for q
        assert math.isclose(1.0 / float(inverse), q, rel_tol=1e-12)


def test_a_bound_that_overflows_names_the_arguments_that_made_it_overflow():
    """The overflow named diameter and loss_lipschitz whatever made it large (p, model_lipschitz,
    entropy_integral, ...)."""
    from certkit.performative import generalization_bound

    paper = {
        "n": 445,
        "diameter": 5.29,
        "loss_lipschitz": math.sqrt(28),
        "entropy_integral": 7.3855,
        "loss_range": 1.0,
    }
    assert math.isfinite(
        generalization_bound(kind="thm3.13", share=0.1, model_lipschitz=0.25, p=100, **paper).total
    )
    with pytest.raises(
        ValueError,
        match=r"^diameter=5.29, p=1000(\.0)?: a term of the bound overflows float64",
    ):
        generalization_bound(kind="thm3.13", share=0.1, model_lipschitz=0.25, p=1000, **paper)
    for name in ("model_lipschitz", "entropy_integral", "loss_lipschitz"):
        kw = {**paper, "model_lipschitz": 0.25, name: 1e308}
        with pytest.raises(ValueError, match=rf"^{name}=1e\+308: the bound overflows float64"):
            generalization_bound(kind="thm3.13", share=0.1, **kw)
