"""wasserstein_risk: hand-solved oracles, closed forms vs the cvxpy programs and the 1-D duals, attacks,
errors."""

from __future__ import annotations

import itertools
import math
import sys

import numpy as np
import pytest

from certkit.performative import wasserstein_risk
from certkit.performative._inputs import ascent_direction, dual_norm
from certkit.performative.closed_form import closed_form_risk, loss_values
from certkit.performative.dual import dual_risk
from certkit.performative.lp import lp_risk

NORMS = (2.0, 1.0, np.inf)
LP_TOL = 1e-6  # HiGHS / Clarabel tolerance at these scales


def _problem(seed: int, n: int = 12, d: int = 3, *, squared: bool = False):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    theta = rng.normal(size=d)
    y = rng.normal(size=n) if squared else np.where(rng.random(n) < 0.5, -1.0, 1.0)
    return theta, X, y


def _reduced(theta, X, y, loss):
    return (X @ theta - y) if loss == "squared" else y * (X @ theta)


# --- hand-solved oracles -----------------------------------------------------------------------------------


@pytest.mark.parametrize("p", [1, 2, 3.5])
@pytest.mark.parametrize(("norm", "dual"), [(2, 5.0), (1, 4.0), (np.inf, 7.0)])
def test_linear_loss_is_mean_plus_minus_radius_times_dual_norm(p, norm, dual):
    theta = np.array([3.0, -4.0])  # ||.||_2 = 5, ||.||_inf = 4, ||.||_1 = 7
    X = np.array([[1.0, 1.0], [0.0, 2.0], [-1.0, 0.5]])
    y = np.array([1.0, -1.0, 1.0])
    mean = (-(3 - 4) + (0 - 8) - (-3 - 2)) / 3  # -y theta^T x averaged = (1 - 8 + 5) / 3
    for direction, sign in (("sup", 1), ("inf", -1)):
        got = wasserstein_risk(theta, X, y, loss="linear", radius=0.1, p=p, norm=norm, direction=direction)
        assert got == pytest.approx(mean + sign * 0.1 * dual, abs=1e-10)


def test_hinge_by_hand():
    # margins 1 and 2 (hinge 0, 0), ||theta||_2 = sqrt 2, C = 0.1 sqrt 2
    theta, X, y = np.array([1.0, -1.0]), np.array([[1.0, 0.0], [0.0, 2.0]]), np.array([1.0, -1.0])
    assert wasserstein_risk(theta, X, y, loss="hinge", radius=0.1) == pytest.approx(
        0.1 * math.sqrt(2), abs=1e-10
    )
    # W2: only the atom on the kink moves: margin shift s with (1/2)(s / sqrt 2)^2 = 0.01 -> s = 0.2, mean 0.1
    assert wasserstein_risk(theta, X, y, loss="hinge", radius=0.1, p=2) == pytest.approx(0.1, abs=1e-10)
    assert wasserstein_risk(theta, X, y, loss="hinge", radius=0.1, direction="inf") == 0.0
    # 1-D: margins 0 and 0.5, hinge terms 1 and 0.5 (mean 0.75), ||theta|| = 1
    theta, X, y = np.array([1.0]), np.array([[0.0], [0.5]]), np.array([1.0, 1.0])
    w1 = wasserstein_risk(theta, X, y, loss="hinge", radius=0.6, direction="inf")
    assert w1 == pytest.approx(0.15, abs=1e-10)
    # W2: budget 2 * 0.36 = 0.72 removes the 0.5 term (0.25) and lowers the other by sqrt(0.47)
    w2 = wasserstein_risk(theta, X, y, loss="hinge", radius=0.6, p=2, direction="inf")
    assert w2 == pytest.approx((1.0 - math.sqrt(0.47)) / 2.0, abs=1e-10)
    assert wasserstein_risk(theta, X, y, loss="hinge", radius=2.0, p=2, direction="inf") == 0.0


def test_logistic_and_squared_by_hand():
    theta, X, y = np.array([1.0]), np.array([[0.0], [0.5]]), np.array([1.0, 1.0])
    # logistic W1 inf: budget 2 * 0.2 raises margin 0 to 0.4 (not yet 0.5)
    want = (math.log1p(math.exp(-0.4)) + math.log1p(math.exp(-0.5))) / 2
    assert wasserstein_risk(theta, X, y, loss="logistic", radius=0.2, direction="inf") == pytest.approx(
        want, abs=1e-10
    )
    mean = (math.log(2) + math.log1p(math.exp(-0.5))) / 2
    assert wasserstein_risk(theta, X, y, loss="logistic", radius=0.2) == pytest.approx(mean + 0.2, abs=1e-10)
    # squared: residuals -1 and -0.5 (mean 0.625)
    sq = wasserstein_risk(theta, X, y, loss="squared", radius=0.3, p=2)
    assert sq == pytest.approx((math.sqrt(0.625) + 0.3) ** 2, abs=1e-10)
    sq_inf = wasserstein_risk(theta, X, y, loss="squared", radius=0.3, p=2, direction="inf")
    assert sq_inf == pytest.approx((math.sqrt(0.625) - 0.3) ** 2, abs=1e-10)
    # squared W1 inf: budget 0.6 lowers |r| = 1 to 0.5 (cost 0.5), then both to 0.45
    w1 = wasserstein_risk(theta, X, y, loss="squared", radius=0.3, p=1, direction="inf")
    assert w1 == pytest.approx(0.45**2, abs=1e-10)
    assert wasserstein_risk(theta, X, y, loss="squared", radius=0.3, p=1) == np.inf
    assert wasserstein_risk(theta, X, y, loss="squared", radius=0.3, p=1.5) == np.inf


def test_zero_radius_and_zero_theta_give_the_empirical_risk():
    theta, X, y = _problem(0)
    for loss, p, direction in itertools.product(
        ("linear", "hinge", "logistic", "squared"), (1, 2), ("sup", "inf")
    ):
        u = _reduced(theta, X, y, loss)
        mean = loss_values(loss, u).mean()
        got = wasserstein_risk(theta, X, y, loss=loss, radius=0.0, p=p, direction=direction)
        assert got == pytest.approx(mean, rel=1e-11, abs=1e-11)
        zero = wasserstein_risk(np.zeros(3), X, y, loss=loss, radius=1.0, p=p, direction=direction)
        assert zero == pytest.approx(
            loss_values(loss, np.zeros(12) - (y if loss == "squared" else 0)).mean(), abs=1e-11
        )


# --- closed forms vs the cvxpy programs (feature space, actual norms) --------------------------------------


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("loss", ["linear", "hinge"])
@pytest.mark.parametrize("p", [1, 2, 3])
@pytest.mark.parametrize("direction", ["sup", "inf"])
def test_piecewise_linear_closed_forms_equal_the_lp(norm, loss, p, direction):
    for seed in range(3):
        theta, X, y = _problem(100 * p + seed)
        for radius in (0.05, 0.4, 3.0):
            cf = wasserstein_risk(
                theta,
                X,
                y,
                loss=loss,
                radius=radius,
                p=p,
                norm=norm,
                direction=direction,
                method="closed_form",
            )
            lp = lp_risk(theta, X, y, loss, radius, float(p), norm, direction, pad=False)
            assert cf == pytest.approx(lp, abs=LP_TOL * (1 + abs(cf)))


@pytest.mark.parametrize("loss", ["logistic", "squared"])
@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("p", [1, 2])
def test_curved_losses_inf_equals_the_conic_program(loss, norm, p):
    for seed in range(2):
        theta, X, y = _problem(7 + seed, squared=loss == "squared")
        for radius in (0.1, 0.7):
            got = wasserstein_risk(theta, X, y, loss=loss, radius=radius, p=p, norm=norm, direction="inf")
            conic = lp_risk(theta, X, y, loss, radius, float(p), norm, "inf", pad=False)
            assert got == pytest.approx(conic, abs=LP_TOL * (1 + abs(got)))


@pytest.mark.parametrize("loss", ["linear", "hinge", "logistic", "squared"])
def test_intercept_does_not_move(loss):
    theta, X, y = _problem(21, squared=loss == "squared")
    b = 0.7
    for p, direction in (("1", "inf"), ("2", "inf"), ("1", "sup"), ("2", "sup")):
        if loss in ("logistic", "squared") and direction == "sup":
            continue
        got = wasserstein_risk(
            theta, X, y, loss=loss, radius=0.3, p=float(p), direction=direction, intercept=b
        )
        ref = lp_risk(theta, X, y, loss, 0.3, float(p), 2.0, direction, intercept=b, pad=False)
        assert got == pytest.approx(ref, abs=LP_TOL * (1 + abs(got)))
    batch = wasserstein_risk(np.stack([theta, theta]), X, y, loss=loss, radius=0.3, p=2, intercept=[0.0, b])
    assert batch[1] == wasserstein_risk(theta, X, y, loss=loss, radius=0.3, p=2, intercept=b)
    assert batch[0] == wasserstein_risk(theta, X, y, loss=loss, radius=0.3, p=2)
    with pytest.raises(ValueError, match=r"intercept must be a scalar or have shape \(2,\)"):
        wasserstein_risk(np.stack([theta, theta]), X, y, loss=loss, radius=0.3, intercept=[1.0, 2.0, 3.0])


def test_auto_uses_the_conic_program_when_nothing_else_is_exact():
    theta, X, y = _problem(3)
    got = wasserstein_risk(theta, X, y, loss="logistic", radius=0.3, p=3, direction="inf")
    conic = lp_risk(theta, X, y, "logistic", 0.3, 3.0, 2.0, "inf", pad=False)
    assert got <= conic and got == pytest.approx(conic, abs=3e-6)
    # and it lies between the W1 and W2 values' ordering in p: W_3 ball is inside the W_2 ball
    w2 = wasserstein_risk(theta, X, y, loss="logistic", radius=0.3, p=2, direction="inf")
    assert got >= w2 - 1e-9


def test_hinge_w1_sup_limit_when_every_margin_exceeds_one():
    theta = np.array([1.0, 0.5])
    X = np.array([[2.0, 1.0], [3.0, 0.0], [1.5, 2.0]])
    y = np.ones(3)  # margins 2.5, 3, 2.5 > 1: the sup is approached by moving a vanishing mass far away
    cf = wasserstein_risk(theta, X, y, loss="hinge", radius=0.2, method="closed_form")
    assert cf == pytest.approx(0.2 * math.hypot(1.0, 0.5), abs=1e-10)
    lp = lp_risk(theta, X, y, "hinge", 0.2, 1.0, 2.0, "sup", pad=False)
    assert lp <= cf + LP_TOL
    assert cf - lp <= 1e-5  # the far support point gets within eps * (m - 1) / distance


# --- closed forms vs the 1-D duals -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("loss", "p", "direction"),
    [
        ("hinge", 2, "sup"),
        ("hinge", 2, "inf"),
        ("hinge", 1, "inf"),
        ("squared", 2, "sup"),
        ("squared", 2, "inf"),
        ("squared", 1, "inf"),
        ("logistic", 1, "inf"),
        ("linear", 2, "sup"),
        ("linear", 2, "inf"),
    ],
)
def test_closed_forms_equal_their_1d_duals(loss, p, direction):
    for seed in range(6):
        theta, X, y = _problem(seed, n=40, squared=loss == "squared")
        u = _reduced(theta, X, y, loss)
        k = float(dual_norm(theta, 2.0))
        for radius in (0.01, 0.2, 1.0, 5.0):
            cf = closed_form_risk(loss, u, k * radius, float(p), direction)
            dual = dual_risk(loss, u, k * radius, float(p), direction)
            assert dual == pytest.approx(cf, rel=1e-8, abs=1e-9)


def _grid_lp_sup_lower_bound(loss, u, C, p, grid):
    """Worst case over margins shifted to a fixed grid (a lower bound on the sup), solved by cvxpy."""
    import cvxpy as cp

    n = u.size
    shifts = np.asarray(grid)[None, :] * np.ones((n, 1))
    values = (
        loss_values(loss, u[:, None] - shifts) if loss != "squared" else (np.abs(u)[:, None] + shifts) ** 2
    )
    w = cp.Variable(shifts.shape, nonneg=True)
    prob = cp.Problem(
        cp.Maximize(cp.sum(cp.multiply(values, w)) / n),
        [cp.sum(w, axis=1) == 1, cp.sum(cp.multiply(shifts**p, w)) / n <= C**p],
    )
    prob.solve(solver="CLARABEL")
    return prob.value


def test_logistic_w2_sup_dual_is_tight_against_a_fine_grid_lp():
    theta, X, y = _problem(5, n=15)
    u = _reduced(theta, X, y, "logistic")
    k = float(dual_norm(theta, 2.0))
    for radius in (0.05, 0.5, 2.0):
        C = k * radius
        dual = dual_risk("logistic", u, C, 2.0, "sup")
        grid = np.linspace(0.0, 4.0 * C * math.sqrt(u.size) + 2.0, 600)
        lower = _grid_lp_sup_lower_bound("logistic", u, C, 2, grid)
        assert lower <= dual + 1e-7
        assert dual - lower <= 2e-3 * (1 + dual)


def test_logistic_w2_inner_problem_with_two_local_maxima():
    # small multiplier, margin far from 0: the inner objective has two local maxima; compare with brute force
    from certkit.performative.dual import _logistic_sup_inner

    m = np.array([-3.0, 0.0, 4.0, 8.0])
    for a in (0.01, 0.05, 0.2):
        s = np.linspace(0, 1 / (2 * a), 200_001)
        brute = (np.logaddexp(0, s[None, :] - m[:, None]) - a * s[None, :] ** 2).max(axis=1)
        got = _logistic_sup_inner(m, a)
        assert np.all(got >= brute - 1e-12)
        assert np.allclose(got, brute, atol=1e-6)


# --- order, batches, attacks -------------------------------------------------------------------------------


def test_inf_le_mean_le_sup_everywhere():
    for seed, loss, p, norm in itertools.product(
        range(2), ("linear", "hinge", "logistic", "squared"), (1, 2), NORMS
    ):
        theta, X, y = _problem(seed, squared=loss == "squared")
        mean = loss_values(loss, _reduced(theta, X, y, loss)).mean()
        hi = wasserstein_risk(theta, X, y, loss=loss, radius=0.3, p=p, norm=norm, direction="sup")
        lo = wasserstein_risk(theta, X, y, loss=loss, radius=0.3, p=p, norm=norm, direction="inf")
        assert lo <= mean <= hi


def test_batch_of_thetas_returns_one_risk_per_row():
    theta, X, y = _problem(1)
    thetas = np.stack([theta, 2 * theta, -theta])
    for loss in ("hinge", "logistic"):
        got = wasserstein_risk(thetas, X, y, loss=loss, radius=0.2, p=2)
        assert isinstance(got, np.ndarray) and got.shape == (3,)
        for j in range(3):
            assert got[j] == wasserstein_risk(thetas[j], X, y, loss=loss, radius=0.2, p=2)
    single = wasserstein_risk(theta, X, y, loss="hinge", radius=0.2)
    assert isinstance(single, float)


@pytest.mark.parametrize("loss", ["linear", "hinge", "logistic", "squared"])
@pytest.mark.parametrize("norm", NORMS)
def test_random_distributions_in_the_ball_never_escape_the_bounds(loss, norm):
    """Attack: random transport plans (each atom split over 3 destinations) scaled onto the ball's
    boundary."""
    rng = np.random.default_rng(11)
    theta, X, y = _problem(4, squared=loss == "squared")
    n, d = X.shape
    for p in (1, 2):
        radius = 0.4
        hi = wasserstein_risk(theta, X, y, loss=loss, radius=radius, p=p, norm=norm, direction="sup")
        lo = wasserstein_risk(theta, X, y, loss=loss, radius=radius, p=p, norm=norm, direction="inf")
        u = ascent_direction(theta, norm)
        for _ in range(300):
            weights = rng.dirichlet(np.ones(3), size=n)  # (n, 3)
            moves = rng.normal(size=(n, 3, d))
            if rng.random() < 0.5:  # mostly along the ascent direction (the dangerous one)
                moves = rng.normal(size=(n, 3, 1)) * u + 0.1 * moves
            cost = (weights * np.linalg.norm(moves, ord=norm, axis=2) ** p).sum() / n
            moves *= (radius**p / cost) ** (1 / p) * rng.uniform(0.2, 1.0)
            points = X[:, None, :] + moves
            scores = points @ theta
            u_pts = (scores - y[:, None]) if loss == "squared" else y[:, None] * scores
            risk = (weights * loss_values(loss, u_pts)).sum() / n
            assert lo - 1e-12 <= risk <= hi + 1e-12


def test_inputs_accept_lists_and_torch():
    torch = pytest.importorskip("torch")
    theta, X, y = _problem(2)
    ref = wasserstein_risk(theta, X, y, loss="hinge", radius=0.1)
    assert wasserstein_risk(theta.tolist(), X.tolist(), y.tolist(), loss="hinge", radius=0.1) == ref
    assert (
        wasserstein_risk(torch.tensor(theta), torch.tensor(X), torch.tensor(y), loss="hinge", radius=0.1)
        == ref
    )


# --- errors ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"radius": -0.1}, "radius must be >= 0"),
        ({"p": 0.5}, "p must be a finite number >= 1"),
        ({"loss": "exp"}, "unknown loss 'exp'"),
        ({"method": "simplex"}, "unknown method 'simplex'"),
        ({"direction": "max"}, "unknown direction 'max'"),
        ({"norm": 3}, "norm must be 1, 2 or np.inf"),
        ({"loss": "logistic", "p": 3}, "no exact method for loss='logistic', direction='sup', p=3"),
        ({"loss": "logistic", "p": 2, "method": "closed_form"}, "no closed form .* use method='dual'"),
        ({"loss": "hinge", "p": 3, "method": "dual"}, "1-D dual is implemented for p = 1 and p = 2"),
        ({"loss": "logistic", "method": "lp"}, "method='lp' is a finite-support LP"),
    ],
)
def test_bad_options_raise_clear_errors(kwargs, match):
    theta, X, y = _problem(0)
    args = {"loss": "hinge", "radius": 0.1, **kwargs}
    with pytest.raises(ValueError, match=match):
        wasserstein_risk(theta, X, y, **args)


def test_bad_data_raise_clear_errors():
    theta, X, y = _problem(0)
    with pytest.raises(ValueError, match=r"labels in \{-1, \+1\} for loss='hinge'.*2 \* y - 1"):
        wasserstein_risk(theta, X, (y + 1) / 2, loss="hinge", radius=0.1)
    with pytest.raises(ValueError, match="X must not be empty"):
        wasserstein_risk(theta, np.empty((0, 3)), np.empty(0), loss="hinge", radius=0.1)
    bad = X.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="X must be finite"):
        wasserstein_risk(theta, bad, y, loss="hinge", radius=0.1)
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        wasserstein_risk(theta, X, y[:-1], loss="hinge", radius=0.1)
    with pytest.raises(ValueError, match="theta has 2 coefficients but X has 3 features"):
        wasserstein_risk(theta[:2], X, y, loss="hinge", radius=0.1)
    with pytest.raises(TypeError, match="radius must be a real number"):
        wasserstein_risk(theta, X, y, loss="hinge", radius="0.1")
    # real-valued targets are fine for the squared loss
    assert np.isfinite(wasserstein_risk(theta, X, y * 0.3, loss="squared", radius=0.1, p=2))


def test_missing_cvxpy_names_the_extra(monkeypatch):
    theta, X, y = _problem(0)
    monkeypatch.setitem(sys.modules, "cvxpy", None)
    with pytest.raises(ImportError, match=r"needs cvxpy: pip install \"certkit\[cvxpy\]\""):
        wasserstein_risk(theta, X, y, loss="hinge", radius=0.1, method="lp")
    with pytest.raises(ImportError, match=r"loss='squared', direction='inf', p=3 .*certkit\[cvxpy\]"):
        wasserstein_risk(theta, X, y, loss="squared", radius=0.1, p=3, direction="inf")
