"""Smoothing certificates c[p, r]: closed forms, exact oracles on computable events, inverses, bad input."""

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy import stats

from certkit.stats import (
    robust_level,
    smoothing_inverse_lower,
    smoothing_inverse_upper,
    smoothing_lower_bound,
    smoothing_upper_bound,
)

NOISES = ("gaussian", "uniform")
FUNCTIONS = (smoothing_lower_bound, smoothing_upper_bound, smoothing_inverse_lower, smoothing_inverse_upper)
probabilities = st.floats(0.0, 1.0, allow_nan=False)
radii = st.floats(0.0, 5.0, allow_nan=False)
sigmas = st.floats(0.01, 5.0, allow_nan=False)

# Computed bounds are padded outward by 1e-13 relative plus 8 machine epsilons (certkit.stats docs); these
# check the direction of the padding and that it stays within twice that margin of the closed form.
PAD = 2e-13


def assert_below(actual, exact, scale=1.0):
    actual, exact = np.asarray(actual), np.asarray(exact)
    assert np.all(actual <= exact)
    assert np.all(actual >= exact - PAD * np.abs(exact) - 1e-14 * scale)


def assert_above(actual, exact, scale=1.0):
    actual, exact = np.asarray(actual), np.asarray(exact)
    assert np.all(actual >= exact)
    assert np.all(actual <= exact + PAD * np.abs(exact) + 1e-14 * scale)


# ---------------------------------------------------------------- closed forms
def test_gaussian_matches_normal_cdf_and_ppf():
    p = np.linspace(0.001, 0.999, 101)
    for r, s in [(0.25, 0.5), (0.12, 0.25), (1.0, 0.1)]:
        assert_below(smoothing_lower_bound(p, radius=r, sigma=s), stats.norm.cdf(stats.norm.ppf(p) - r / s))
        assert_above(smoothing_upper_bound(p, radius=r, sigma=s), stats.norm.cdf(stats.norm.ppf(p) + r / s))


def test_values_by_hand():
    # Phi(Phi^-1(0.9) + 0.12 / 0.25) = Phi(1.2815516 + 0.48) = Phi(1.7615516) = 0.960927 (conformal spec).
    assert round(float(smoothing_inverse_lower(0.9, radius=0.12, sigma=0.25)), 6) == 0.960927
    assert round(robust_level(0.9, radius=0.12, sigma=0.25), 6) == 0.960927
    # p = 0.5 sits at z = 0: lower bound Phi(-r / sigma) = Phi(-1) = 0.158655.
    assert_below(smoothing_lower_bound(0.5, radius=0.5, sigma=0.5), 0.15865525393145707)
    # uniform, sigma = 1/sqrt(3) -> lambda = 1: p - r / 2.
    lam_sigma = 1 / np.sqrt(3)
    assert smoothing_lower_bound(0.9, radius=0.5, sigma=lam_sigma, noise="uniform") == pytest.approx(0.65)
    assert smoothing_upper_bound(0.9, radius=0.5, sigma=lam_sigma, noise="uniform") == 1.0
    assert smoothing_upper_bound(0.3, radius=0.5, sigma=lam_sigma, noise="uniform") == pytest.approx(0.55)
    assert smoothing_lower_bound(0.1, radius=0.5, sigma=lam_sigma, noise="uniform") == 0.0
    assert smoothing_inverse_lower(0.65, radius=0.5, sigma=lam_sigma, noise="uniform") == pytest.approx(0.9)
    assert smoothing_inverse_upper(0.55, radius=0.5, sigma=lam_sigma, noise="uniform") == pytest.approx(0.3)


@pytest.mark.parametrize("noise", NOISES)
def test_edges_exact(noise):
    p = np.array([0.0, 0.3, 1.0])
    assert np.array_equal(smoothing_lower_bound(p, radius=0.0, sigma=0.7, noise=noise), p)
    assert np.array_equal(smoothing_upper_bound(p, radius=0.0, sigma=0.7, noise=noise), p)
    assert np.array_equal(smoothing_inverse_lower(p, radius=0.0, sigma=0.7, noise=noise), p)
    assert np.array_equal(smoothing_inverse_upper(p, radius=0.0, sigma=0.7, noise=noise), p)
    assert smoothing_lower_bound(0.0, radius=0.4, sigma=0.7, noise=noise) == 0.0
    assert smoothing_upper_bound(1.0, radius=0.4, sigma=0.7, noise=noise) == 1.0
    assert smoothing_inverse_lower(0.0, radius=0.4, sigma=0.7, noise=noise) == 0.0
    assert smoothing_inverse_upper(1.0, radius=0.4, sigma=0.7, noise=noise) == 1.0
    assert robust_level(0.9, radius=0.0, sigma=0.7, noise=noise) == 0.9


def test_gaussian_keeps_certainty():
    # A.s. events stay a.s. under any shift of a Gaussian (equivalent measures).
    assert smoothing_lower_bound(1.0, radius=3.0, sigma=0.1) == 1.0
    assert smoothing_upper_bound(0.0, radius=3.0, sigma=0.1) == 0.0
    assert smoothing_inverse_lower(1.0, radius=3.0, sigma=0.1) == 1.0
    assert smoothing_inverse_upper(0.0, radius=3.0, sigma=0.1) == 0.0


def test_unattainable_targets_are_clipped():
    # uniform: lambda = 1, shift 0.5 -> no clean p certifies 0.8 at r = 1 (c[1, 1] = 0.5).
    s = 1 / np.sqrt(3)
    assert smoothing_inverse_lower(0.8, radius=1.0, sigma=s, noise="uniform") == 1.0
    assert smoothing_lower_bound(1.0, radius=1.0, sigma=s, noise="uniform") < 0.8
    assert smoothing_inverse_upper(0.2, radius=1.0, sigma=s, noise="uniform") == 0.0
    assert robust_level(0.8, radius=1.0, sigma=s, noise="uniform") == 1.0


def test_broadcasting_and_scalar_types():
    out = smoothing_lower_bound([0.2, 0.5, 0.9], radius=[[0.0], [0.5]], sigma=0.5)
    assert out.shape == (2, 3) and out.dtype == np.float64
    assert np.array_equal(out[0], [0.2, 0.5, 0.9])
    scalar = smoothing_lower_bound(0.9, radius=0.1, sigma=0.5)
    assert isinstance(scalar, float) and np.ndim(scalar) == 0
    assert isinstance(robust_level(0.9, radius=0.1, sigma=0.5), float)


def test_accepts_torch_tensors():
    torch = pytest.importorskip("torch")
    out = smoothing_lower_bound(torch.tensor([0.5, 0.9]), radius=0.25, sigma=0.5)
    np.testing.assert_allclose(out, smoothing_lower_bound(np.array([0.5, 0.9]), radius=0.25, sigma=0.5))


# ---------------------------------------------------------------- exact oracles (soundness and tightness)
def _gaussian_box_union_probability(x, cells, sigma):
    """P[x + eps in union of disjoint boxes], eps ~ N(0, sigma^2 I), exactly (product of 1-D masses)."""
    lo, hi = cells[:, 0, :], cells[:, 1, :]
    mass = stats.norm.cdf((hi - x) / sigma) - stats.norm.cdf((lo - x) / sigma)
    return float(np.prod(mass, axis=1).sum())


def _uniform_box_union_probability(x, cells, lam):
    """P[x + eps in union of disjoint boxes], eps ~ U[-lam, lam]^d, exactly (overlap volumes)."""
    lo = np.maximum(cells[:, 0, :], x - lam)
    hi = np.minimum(cells[:, 1, :], x + lam)
    overlap = np.clip(hi - lo, 0.0, None) / (2 * lam)
    return float(np.prod(overlap, axis=1).sum())


def _random_event(rng, dim=2, grid=6):
    """A random union of disjoint grid cells of [-1.5, 1.5]^dim (an arbitrary, non-convex event)."""
    edges = np.linspace(-1.5, 1.5, grid + 1)
    idx = np.stack(np.meshgrid(*[np.arange(grid)] * dim, indexing="ij"), -1).reshape(-1, dim)
    chosen = idx[rng.random(len(idx)) < 0.4]
    return np.stack([edges[chosen], edges[chosen + 1]], axis=1)  # (cells, 2, dim)


@pytest.mark.parametrize("noise", NOISES)
def test_certificate_holds_for_exactly_computed_events(noise):
    """Random non-convex events, exact smoothed probabilities, random shifts in the threat ball."""
    rng = np.random.default_rng(0)
    sigma, radius = 0.4, 0.3
    lam = sigma * np.sqrt(3)
    prob = _gaussian_box_union_probability if noise == "gaussian" else _uniform_box_union_probability
    scale = sigma if noise == "gaussian" else lam
    violations = 0
    for _ in range(60):
        cells = _random_event(rng)
        x = rng.uniform(-1.5, 1.5, size=2)
        p = prob(x, cells, scale)
        low = smoothing_lower_bound(p, radius=radius, sigma=sigma, noise=noise)
        high = smoothing_upper_bound(p, radius=radius, sigma=sigma, noise=noise)
        for _ in range(40):
            direction = rng.normal(size=2)
            norm = np.linalg.norm(direction, ord=2 if noise == "gaussian" else 1)
            delta = direction / norm * radius * rng.uniform() ** 0.5
            q = prob(x + delta, cells, scale)
            violations += int(q < low - 1e-12 or q > high + 1e-12)
    assert violations == 0


def test_gaussian_certificate_is_tight_on_half_spaces():
    # h(x) = P[w.(x + eps) <= b] = Phi((b - w.x) / sigma); moving by r along w attains c[p, r] exactly.
    sigma, r = 0.5, 0.3
    w = np.array([0.6, 0.8])
    for b in [-1.0, 0.0, 0.4, 2.0]:
        x = np.array([0.1, -0.2])
        p = stats.norm.cdf((b - w @ x) / sigma)
        worst = stats.norm.cdf((b - w @ (x + r * w)) / sigma)
        best = stats.norm.cdf((b - w @ (x - r * w)) / sigma)
        assert_below(smoothing_lower_bound(p, radius=r, sigma=sigma), worst)
        assert_above(smoothing_upper_bound(p, radius=r, sigma=sigma), best)


def test_uniform_certificate_is_tight_on_half_spaces():
    # 1-D event {x <= b}, eps ~ U[-lam, lam]: h(x) = clip((b - x + lam) / (2 lam));
    # shifting x right by r loses exactly r / (2 lam).
    sigma = 0.3
    lam = sigma * np.sqrt(3)
    x, b, r = 0.0, 0.1, 0.2
    p = np.clip((b - x + lam) / (2 * lam), 0, 1)
    worst = np.clip((b - (x + r) + lam) / (2 * lam), 0, 1)
    assert_below(smoothing_lower_bound(p, radius=r, sigma=sigma, noise="uniform"), worst)


@pytest.mark.slow
def test_certificate_holds_under_monte_carlo_noise():
    """Sampled noise, random event: perturbed frequencies never fall below the bound beyond MC error."""
    rng = np.random.default_rng(5)
    sigma, radius, draws = 0.5, 0.25, 200_000
    cells = _random_event(rng, grid=5)
    eps = rng.normal(scale=sigma, size=(draws, 2))

    def freq(point):
        inside = (point + eps)[:, None, :]
        return np.mean(np.any(np.all((inside >= cells[:, 0]) & (inside < cells[:, 1]), axis=2), axis=1))

    x = np.array([0.2, -0.1])
    p_exact = _gaussian_box_union_probability(x, cells, sigma)
    low = smoothing_lower_bound(p_exact, radius=radius, sigma=sigma)
    for angle in np.linspace(0, 2 * np.pi, 12, endpoint=False):
        q = freq(x + radius * np.array([np.cos(angle), np.sin(angle)]))
        assert q >= low - 4 * np.sqrt(0.25 / draws)


# ---------------------------------------------------------------- inverses and monotonicity
def _slope(p, shift):
    """d/dp Phi(Phi^-1(p) + shift) = exp(-z shift - shift^2 / 2) at z = Phi^-1(p)."""
    z = stats.norm.ppf(p)
    return np.exp(-z * shift - shift**2 / 2)


@settings(max_examples=300, deadline=None)
@given(t=st.floats(1e-6, 1 - 1e-6), r=radii, s=sigmas)
def test_gaussian_inverse_round_trips(t, r, s):
    # The padding (and rounding) of p* moves c[p*, r] by at most slope * 1e-12: the tolerance is exact up
    # to that conditioning; only where p* is not rounded to the edge ([1e-6, 1 - 1e-6]).
    p = smoothing_inverse_lower(t, radius=r, sigma=s)
    if 1e-6 <= p <= 1 - 1e-6:
        back = smoothing_lower_bound(p, radius=r, sigma=s)
        assert back >= t - 1e-12  # p* is sufficient
        assert back == pytest.approx(t, rel=0, abs=1e-12 * (1 + _slope(p, -r / s)))
    q = smoothing_inverse_upper(t, radius=r, sigma=s)
    if 1e-6 <= q <= 1 - 1e-6:
        back = smoothing_upper_bound(q, radius=r, sigma=s)
        assert back <= t + 1e-12
        assert back == pytest.approx(t, rel=0, abs=1e-12 * (1 + _slope(q, r / s)))
    # and the other way round, from a clean probability
    low = smoothing_lower_bound(t, radius=r, sigma=s)
    if 1e-6 <= low:
        again = smoothing_inverse_lower(low, radius=r, sigma=s)
        assert again == pytest.approx(t, rel=0, abs=1e-12 * (1 + _slope(low, r / s)))


@settings(max_examples=300, deadline=None)
@given(t=probabilities, r=radii, s=sigmas)
def test_uniform_inverse_round_trips(t, r, s):
    shift = r / (2 * s * np.sqrt(3))
    p = smoothing_inverse_lower(t, radius=r, sigma=s, noise="uniform")
    if t + shift <= 1:  # attainable: the bound at p* is t again
        assert smoothing_lower_bound(p, radius=r, sigma=s, noise="uniform") == pytest.approx(t, abs=1e-12)
    q = smoothing_inverse_upper(t, radius=r, sigma=s, noise="uniform")
    if t - shift >= 0:
        assert smoothing_upper_bound(q, radius=r, sigma=s, noise="uniform") == pytest.approx(t, abs=1e-12)


@pytest.mark.parametrize("noise", NOISES)
def test_inverse_is_the_smallest_sufficient_probability(noise):
    t = np.linspace(0.05, 0.6, 12)
    p_star = smoothing_inverse_lower(t, radius=0.2, sigma=0.5, noise=noise)
    # just below p*, the certified bound falls short of the target
    assert np.all(smoothing_lower_bound(p_star - 1e-6, radius=0.2, sigma=0.5, noise=noise) < t)
    q_star = smoothing_inverse_upper(t, radius=0.2, sigma=0.5, noise=noise)
    assert np.all(smoothing_upper_bound(q_star + 1e-6, radius=0.2, sigma=0.5, noise=noise) > t)


@settings(max_examples=200, deadline=None)
@given(p1=probabilities, p2=probabilities, r=radii, s=sigmas, noise=st.sampled_from(NOISES))
def test_monotone_in_p(p1, p2, r, s, noise):
    p1, p2 = min(p1, p2), max(p1, p2)
    for fn in FUNCTIONS:
        assert fn(p1, radius=r, sigma=s, noise=noise) <= fn(p2, radius=r, sigma=s, noise=noise)


@settings(max_examples=200, deadline=None)
@given(p=probabilities, r1=radii, r2=radii, s=sigmas, noise=st.sampled_from(NOISES))
def test_monotone_in_radius_and_sigma(p, r1, r2, s, noise):
    r1, r2 = min(r1, r2), max(r1, r2)
    low1 = smoothing_lower_bound(p, radius=r1, sigma=s, noise=noise)
    low2 = smoothing_lower_bound(p, radius=r2, sigma=s, noise=noise)
    assert low2 <= low1 <= p
    assert (
        smoothing_upper_bound(p, radius=r2, sigma=s, noise=noise)
        >= smoothing_upper_bound(p, radius=r1, sigma=s, noise=noise)
        >= p
    )
    # more noise -> weaker effect of the same radius
    assert smoothing_lower_bound(p, radius=r2, sigma=2 * s, noise=noise) >= low2


@settings(max_examples=200, deadline=None)
@given(p=probabilities, r=radii, s=sigmas, noise=st.sampled_from(NOISES))
def test_upper_mirrors_lower(p, r, s, noise):
    assume(1 - (1 - p) == p)  # 1 - p must be exact in float64 for the identity to be testable
    upper = smoothing_upper_bound(p, radius=r, sigma=s, noise=noise)
    mirrored = 1 - smoothing_lower_bound(1 - p, radius=r, sigma=s, noise=noise)
    assert upper == pytest.approx(mirrored, abs=1e-12)


def test_lower_bound_is_convex_in_p():
    p = np.linspace(0.0, 1.0, 401)
    low = smoothing_lower_bound(p, radius=0.3, sigma=0.5)
    assert np.all(np.diff(low, 2) >= -1e-12)


@settings(max_examples=100, deadline=None)
@given(level=st.floats(0.01, 0.99), r=radii, s=sigmas, noise=st.sampled_from(NOISES))
def test_robust_level_certifies_the_target(level, r, s, noise):
    adjusted = robust_level(level, radius=r, sigma=s, noise=noise)
    assert level <= adjusted <= 1.0
    if adjusted <= 1 - 1e-6:  # well-conditioned region (see test_gaussian_inverse_round_trips)
        certified = smoothing_lower_bound(adjusted, radius=r, sigma=s, noise=noise)
        slope = _slope(adjusted, -r / s) if noise == "gaussian" else 1.0
        assert certified >= level - 1e-12
        assert certified == pytest.approx(level, rel=0, abs=1e-12 * (1 + slope))


def test_robust_level_increases_with_radius():
    levels = [robust_level(0.9, radius=r, sigma=0.25) for r in (0.0, 0.06, 0.12, 0.25, 0.5)]
    assert np.all(np.diff(levels) > 0)


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize("fn", FUNCTIONS)
@pytest.mark.parametrize(
    ("first", "kwargs", "error", "match"),
    [
        (np.nan, {}, ValueError, "must be finite"),
        ([0.5, np.inf], {}, ValueError, "must be finite"),
        (1.5, {}, ValueError, "<= 1.0"),
        (-0.1, {}, ValueError, ">= 0.0"),
        ([], {}, ValueError, "must not be empty"),
        ("0.5", {}, TypeError, "array-like"),
        (True, {}, TypeError, "real numeric"),
        (0.5, {"radius": -0.1}, ValueError, "radius must be >= 0"),
        (0.5, {"radius": np.nan}, ValueError, "radius must be finite"),
        ([0.1, 0.2, 0.3], {"radius": [0.1, 0.2]}, ValueError, "broadcast"),
        (0.5, {"sigma": 0.0}, ValueError, "sigma must be > 0"),
        (0.5, {"sigma": -1.0}, ValueError, "sigma must be > 0"),
        (0.5, {"sigma": np.nan}, ValueError, "sigma must be finite"),
        (0.5, {"sigma": [0.5]}, TypeError, "sigma must be a real number"),
        (0.5, {"noise": "laplace"}, ValueError, "unknown noise"),
        (0.5, {"noise": 1}, TypeError, "noise"),
    ],
)
def test_bad_input(fn, first, kwargs, error, match):
    full = {"radius": 0.1, "sigma": 0.5, "noise": "gaussian", **kwargs}
    with pytest.raises(error, match=match):
        fn(first, **full)


def test_bad_input_names_the_argument():
    with pytest.raises(ValueError, match=r"^p must"):
        smoothing_lower_bound(2.0, radius=0.1, sigma=0.5)
    with pytest.raises(ValueError, match=r"^target must"):
        smoothing_inverse_lower(2.0, radius=0.1, sigma=0.5)


@pytest.mark.parametrize(
    ("level", "kwargs", "error", "match"),
    [
        (1.0, {}, ValueError, "confidence_level"),
        (0.0, {}, ValueError, "confidence_level"),
        (np.nan, {}, ValueError, "confidence_level"),
        ([0.9], {}, TypeError, "confidence_level"),
        (0.9, {"radius": -1.0}, ValueError, "radius"),
        (0.9, {"sigma": 0.0}, ValueError, "sigma"),
        (0.9, {"noise": "cauchy"}, ValueError, "noise"),
    ],
)
def test_robust_level_bad_input(level, kwargs, error, match):
    full = {"radius": 0.1, "sigma": 0.5, **kwargs}
    with pytest.raises(error, match=match):
        robust_level(level, **full)


def test_options_are_keyword_only():
    with pytest.raises(TypeError):
        smoothing_lower_bound(0.5, 0.1, 0.5)


@pytest.mark.parametrize(
    ("radius", "error", "match"),
    [
        ([0.1, 0.2], TypeError, "radius must be a real number, got list"),
        (np.array([0.1, 0.2]), TypeError, "radius must be a real number, got ndarray"),
        (-0.1, ValueError, "radius must be >= 0"),
        (np.nan, ValueError, "radius must be finite"),
        (True, TypeError, "radius must be a real number, got bool"),
    ],
)
def test_robust_level_needs_a_scalar_radius(radius, error, match):
    """Issue 14 item 10: radius=[.1, .2] gave numpy's "only 0-dimensional arrays can be converted"."""
    with pytest.raises(error, match=match):
        robust_level(0.9, radius=radius, sigma=0.25)
