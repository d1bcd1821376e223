"""Oracle tests of the subsampling certificate (certkit.circuits.radius).

Brute force: a tiny concept dataset (n <= 8 examples drawn from a small pool of values), a
deterministic discovery D (count thresholds, or an arbitrary lookup table), the exact vote
probabilities by enumerating every subsample (m-subsets, m-sequences with replacement, or Poisson
keep patterns), and every dataset S' within edit distance r (insertions / deletions / substitutions
over the pool).  Every certified decision must hold on every S'.
"""

from __future__ import annotations

import functools
import itertools
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from certkit.circuits import certified_radius, edit_bounds, partition_radius

POOL = (0, 1, 2, 3, 4)
N_COMP = 3
# feature bits of every pool value: component j "sees" value v iff FEATURES[v, j]
FEATURES = np.array([[1, 1, 0], [1, 0, 1], [0, 1, 1], [1, 1, 1], [0, 0, 0]], dtype=bool)


def count_rule(thresholds):
    """D(T)_j = 1[#examples of T with feature j >= t_j] (deterministic, monotone)."""
    thr = np.asarray(thresholds)

    def discover(multiset):
        counts = FEATURES[list(multiset)].sum(axis=0) if multiset else np.zeros(N_COMP, int)
        return counts >= thr

    return discover


def table_rule(seed):
    """An arbitrary deterministic D: a fixed random mask per multiset (sorted tuple)."""
    table: dict[tuple, np.ndarray] = {}

    def discover(multiset):
        key = tuple(sorted(multiset))
        if key not in table:
            rng = np.random.default_rng([seed, len(key), *key])
            table[key] = rng.random(N_COMP) < 0.7
        return table[key]

    return discover


@functools.cache  # S' recur across rules' threats and tests; callers only read the array
def exact_p(S, discover, scheme, m=None, p_del=None):
    """Exact inclusion probabilities (Fractions) by enumerating every subsample of S (a tuple)."""
    n = len(S)
    total = np.array([Fraction(0)] * N_COMP, dtype=object)
    if scheme == "poisson":
        # Every keep pattern of k examples has weight (1 - q)^k q^(n - k): count the hits per k, then weight
        # (the same exact sum as weighting pattern by pattern).
        q = Fraction(p_del)
        hits_by_k = np.zeros((n + 1, N_COMP), dtype=np.int64)
        for keep in itertools.product((0, 1), repeat=n):
            hits_by_k[sum(keep)] += discover([S[i] for i in range(n) if keep[i]])
        for k in range(n + 1):
            total += (1 - q) ** k * q ** (n - k) * hits_by_k[k].astype(object)
        return total
    subsets = (
        itertools.product(range(n), repeat=m) if scheme == "with" else itertools.combinations(range(n), m)
    )
    count = 0
    hits = np.zeros(N_COMP, dtype=np.int64)
    for idx in subsets:
        hits += discover([S[i] for i in idx])
        count += 1
    return np.array([Fraction(int(h), count) for h in hits], dtype=object)


def neighbours(S, r, ops):
    """Every multiset S' (sorted tuple) within r operations of S, with its distance."""
    start = tuple(sorted(S))
    seen = {start: 0}
    frontier = [start]
    for dist in range(1, r + 1):
        nxt = []
        for cur in frontier:
            cand = []
            if "ins" in ops:
                cand += [tuple(sorted((*cur, v))) for v in POOL]
            if "del" in ops:
                cand += [cur[:i] + cur[i + 1 :] for i in range(len(cur))]
            if "sub" in ops:
                cand += [tuple(sorted((*cur[:i], v, *cur[i + 1 :]))) for i in range(len(cur)) for v in POOL]
            for c in cand:
                if c not in seen:
                    seen[c] = dist
                    nxt.append(c)
        frontier = nxt
    return seen


THREAT_OPS = {
    "edit": ("ins", "del", "sub"),
    "insertion": ("ins",),
    "deletion": ("del",),
    "substitution": ("sub",),
}

CASES = [
    # (scheme, m, p_del, S)
    ("without", 2, None, (0, 3, 3, 1, 2)),
    ("without", 2, None, (3, 3, 3, 3, 0, 1)),
    ("without", 3, None, (3, 3, 3, 3, 0, 1, 3, 2)),
    ("with", 2, None, (3, 3, 0, 1, 2)),
    ("with", 1, None, (3, 3, 3, 0)),
    ("poisson", None, 0.75, (3, 3, 0, 1)),
    ("poisson", None, 0.875, (3, 3, 3, 0, 2)),
    ("poisson", None, 0.5, (3, 1, 3, 0, 2)),
]
RULES = [count_rule([1, 1, 1]), count_rule([2, 1, 3]), count_rule([1, 2, 2]), table_rule(0), table_rule(1)]


def _scheme_kwargs(scheme, m, p_del):
    if scheme == "poisson":
        return {"deletion_prob": p_del}
    return {"m": m, "replacement": scheme == "with"}


@pytest.mark.parametrize("threat", ["edit", "insertion", "deletion", "substitution"])
@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_brute_force_every_certified_decision_holds(case, threat):
    scheme, m, p_del, S = case
    r_max = 2
    kwargs = _scheme_kwargs(scheme, m, p_del)
    certified_nonzero = 0
    for discover in RULES:
        p = exact_p(S, discover, scheme, m, p_del)
        pf = np.array([float(v) for v in p])
        radius = certified_radius(pf, pf, len(S), threat=threat, **kwargs)
        # r = 0: the certificate with exact probabilities is the majority vote
        assert np.array_equal(radius >= 0, (p > Fraction(1, 2)) | (p < Fraction(1, 2)))
        certified_nonzero += int(np.sum(radius >= 1))
        for S2, dist in neighbours(S, r_max, THREAT_OPS[threat]).items():
            if (scheme == "without" and len(S2) < m) or (len(S2) == 0 and scheme == "with"):
                # the smoothed decision is undefined there; such S' must not be certified
                assert np.all(radius < dist)
                continue
            p2 = exact_p(S2, discover, scheme, m, p_del)
            for j in range(N_COMP):
                if radius[j] >= dist:
                    if p[j] > Fraction(1, 2):
                        assert p2[j] > Fraction(1, 2), (S, S2, j, p[j], p2[j], radius[j])
                    else:
                        assert p2[j] < Fraction(1, 2), (S, S2, j, p[j], p2[j], radius[j])
    if certified_radius(1.0, 1.0, len(S), threat=threat, **kwargs) >= 1:  # radius 1 is attainable here
        assert certified_nonzero > 0, "vacuous case: nothing certified at radius >= 1"


def _explicit_edits(S, n_ins, n_del, n_sub):
    """All datasets obtained from S by exactly this split (choose removed examples, insert pool values)."""
    out = set()
    n = len(S)
    for removed in itertools.combinations(range(n), n_del + n_sub):
        kept = [S[i] for i in range(n) if i not in removed]
        for added in itertools.combinations_with_replacement(POOL, n_ins + n_sub):
            out.add(tuple(sorted(kept + list(added))))
    return out


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_edit_bounds_contain_exact_probability_for_every_split(case):
    scheme, m, p_del, S = case
    kwargs = _scheme_kwargs(scheme, m, p_del)
    for discover in RULES[:3] + RULES[3:4]:
        p = exact_p(S, discover, scheme, m, p_del)
        pf = np.array([float(v) for v in p])
        exact = {}  # S' -> its exact probabilities: many splits reach the same S'
        for n_ins, n_del, n_sub in itertools.product(range(3), repeat=3):
            if n_ins + n_del + n_sub > 3 or n_del + n_sub > len(S):
                continue
            lo, hi = edit_bounds(pf, pf, len(S), n_insert=n_ins, n_delete=n_del, n_substitute=n_sub, **kwargs)
            for S2 in _explicit_edits(S, n_ins, n_del, n_sub):
                if (scheme == "without" and len(S2) < m) or (len(S2) == 0 and scheme == "with"):
                    assert np.all(lo == 0) and np.all(hi == 1)
                    continue
                if S2 not in exact:
                    exact[S2] = np.array([float(v) for v in exact_p(S2, discover, scheme, m, p_del)])
                p2 = exact[S2]
                assert np.all(lo <= p2 + 1e-12) and np.all(p2 <= hi + 1e-12)


SCHEMES = [
    {"m": 5, "replacement": False},
    {"m": 40, "replacement": False},
    {"m": 7, "replacement": True},
    {"deletion_prob": 0.9},
    {"deletion_prob": 0.6},
]


@pytest.mark.parametrize("kwargs", SCHEMES)
def test_radius_is_exact_worst_case_over_every_split(kwargs):
    """The radius is the largest r such that *every* (ins, del, sub) split with total <= r certifies."""
    n = 120
    rng = np.random.default_rng(3)
    p = np.concatenate([rng.uniform(0.5, 1.0, 20), rng.uniform(0.0, 0.5, 10), [1.0, 0.0, 0.999, 0.52]])
    for threat, ops in THREAT_OPS.items():
        radius = certified_radius(p, p, n, threat=threat, **kwargs)
        for j in range(p.size):
            r_j = int(radius[j])
            top = min(r_j + 1, 12)
            for total in range(0, top + 1):
                worst = np.inf
                for split in itertools.product(range(total + 1), repeat=3):
                    ins, dele, sub = split
                    if (
                        ins + dele + sub != total
                        or (ins and "ins" not in ops)
                        or (dele and "del" not in ops)
                        or (sub and "sub" not in ops)
                    ):
                        continue
                    lo, hi = edit_bounds(
                        p[j], p[j], n, n_insert=ins, n_delete=dele, n_substitute=sub, **kwargs
                    )
                    worst = min(worst, lo if p[j] > 0.5 else 1 - hi)
                if total <= r_j:
                    assert worst > 0.5, (threat, j, p[j], total, r_j, worst)
                elif total == r_j + 1 and (threat == "insertion" or r_j + 1 <= n):
                    assert worst <= 0.5 + 1e-9, (threat, j, p[j], total, r_j, worst)


def test_reference_values_poisson():
    # (p_del, mu) -> edit / insertion / deletion radii (spec)
    expected = {
        (0.9, 0.99): (6, 6, 37),
        (0.9, 0.9): (4, 5, 15),
        (0.5, 0.9): (0, 0, 2),
        (0.99, 0.95): (59, 63, 229),
    }
    for (p_del, mu), radii in expected.items():
        got = tuple(
            int(certified_radius(mu, 1.0, 10_000, deletion_prob=p_del, threat=t))
            for t in ("edit", "insertion", "deletion")
        )
        assert got == radii
        # the closed forms of the spec, strict inequality via ceil(x) - 1
        assert radii[0] == int(np.ceil(np.log(1.5 - mu) / np.log(p_del))) - 1
        assert radii[1] == int(np.ceil(np.log(0.5 / mu) / np.log(p_del))) - 1
        assert radii[2] == int(np.ceil(np.log(2 * (1 - mu)) / np.log(p_del))) - 1
        # the exclusion side mirrors the inclusion side
        assert int(certified_radius(0.0, 1 - mu, 10_000, deletion_prob=p_del)) == radii[0]


def test_reference_values_bagging_jia():
    """Jia et al. (AAAI 2021), sampling with replacement; the two-sided pA/pB form with pB = 1 - pA
    equals the one-sided form for a binary decision."""
    assert int(certified_radius(0.9, 0.9, 60000, 30, replacement=True)) == 1013
    assert int(certified_radius(0.95, 0.95, 1000, 50, replacement=True)) == 11
    assert int(certified_radius(0.9, 0.9, 100, 10, replacement=True)) == 4
    # closed form: (1 - r/n)^k > 1.5 - pA  (Jia: pA - pB - 2 (1 - ((n - r)/n)^k) > 0 with pB = 1 - pA)
    for n, k, pa in ((60000, 30, 0.9), (1000, 50, 0.95), (100, 10, 0.9)):
        r = int(certified_radius(pa, pa, n, k, replacement=True))
        assert pa - (1 - pa) - 2 * (1 - ((n - r) / n) ** k) > 0
        assert pa - (1 - pa) - 2 * (1 - ((n - r - 1) / n) ** k) <= 0


def test_clopper_pearson_reference_and_cap():
    from certkit.stats import clopper_pearson

    low, _ = clopper_pearson(1000, 1000, confidence_level=0.999, alternative="greater")
    assert float(low) == pytest.approx(0.001 ** (1 / 1000), abs=1e-12)
    assert round(float(low), 6) == 0.993116
    # M = 1e5 components, n = 1000 runs: best lower bound ~0.982, edit radius capped at 6 for p_del = 0.9
    low, _ = clopper_pearson(1000, 1000, confidence_level=0.999, alternative="greater", n_tests=100_000)
    assert float(low) == pytest.approx(0.98175, abs=1e-4)
    assert int(certified_radius(low, 1.0, 10_000, deletion_prob=0.9)) == 6


def test_partition_radius_reference():
    assert int(partition_radius(30, 20, 1, 0)) == 4
    assert int(partition_radius(30, 20, 0, 1)) == 5
    assert np.array_equal(partition_radius([10, 10, 11], [10, 10, 10], [0, 1, 1], [1, 0, 0]), [0, -1, 0])


def test_count_based_exact_oracle_poisson():
    """D(S)_j = 1[#kept examples with feature j >= t]: p_j = P(Bin(c_j, 1 - p_del) >= t) exactly; the worst
    r substitutions remove r feature examples (inclusion) or add r (exclusion)."""
    n = 60
    nonzero = 0
    for p_del in (0.3, 0.5, 0.8, 0.9):
        keep = 1 - p_del
        for t in (1, 2, 4):
            for c in range(0, n + 1, 3):
                p = stats.binom.sf(t - 1, c, keep)
                # valid bounds despite the float rounding of p (1 - p can be far below machine epsilon)
                p_lo, p_hi = max(p - 1e-12, 0.0), min(p + 1e-12, 1.0)
                for threat in ("edit", "deletion", "insertion"):
                    rad = int(certified_radius(p_lo, p_hi, n, deletion_prob=p_del, threat=threat))
                    nonzero += rad > 0
                    for r in range(0, rad + 1):
                        if p > 0.5:
                            # inclusion: insertions never hurt this D; deletions / substitutions cut c
                            worst = p if threat == "insertion" else stats.binom.sf(t - 1, max(c - r, 0), keep)
                            assert worst > 0.5
                        else:
                            # exclusion: insertions / substitutions add feature examples; deletions never hurt
                            worst = p if threat == "deletion" else stats.binom.sf(t - 1, c + r, keep)
                            assert worst < 0.5
                    # the bound itself is below the exact worst case after rad substitutions
                    if threat == "edit" and p > 0.5 and rad >= 0:
                        lo, _ = edit_bounds(p_lo, p_hi, n, deletion_prob=p_del, n_substitute=rad)
                        assert lo <= stats.binom.sf(t - 1, max(c - rad, 0), keep) + 1e-12
    assert nonzero > 20


def test_insertion_bound_is_tight_poisson():
    """For D = 1[T contains no inserted example] the insertion lower bound p_del^r * mu is attained."""
    for p_del in (0.5, 0.9):
        for r in range(0, 6):
            lo, _ = edit_bounds(1.0, 1.0, 10, deletion_prob=p_del, n_insert=r)
            assert lo == pytest.approx(p_del**r, rel=1e-12)


def test_monotone_in_probability_and_nested_radii():
    rng = np.random.default_rng(0)
    p = np.sort(rng.uniform(0, 1, 400))
    for kwargs in SCHEMES:
        for threat in THREAT_OPS:
            radius = certified_radius(p, p, 200, threat=threat, **kwargs)
            above = p > 0.5
            assert np.all(np.diff(radius[above]) >= 0)  # larger p, larger inclusion radius
            assert np.all(np.diff(radius[~above]) <= 0)  # smaller p, larger exclusion radius
            # certified at r implies certified at every smaller r: bounds worsen with each edit
            lows = [edit_bounds(p[above], p[above], 200, n_substitute=r, **kwargs)[0] for r in range(6)]
            assert all(np.all(a >= b - 1e-15) for a, b in itertools.pairwise(lows))
    # wider bounds never certify more
    r_tight = certified_radius(0.95, 0.96, 500, 20)
    r_loose = certified_radius(0.9, 0.96, 500, 20)
    assert r_loose <= r_tight


def test_abstain_at_half_and_strictness():
    assert int(certified_radius(0.5, 0.5, 10, 2)) == -1
    assert int(certified_radius(0.4, 0.6, 10, 2)) == -1
    # exact tie of the Poisson closed form: mu = 1, p_del = 0.5, edit: 0.5^r > 0.5 fails at r = 1
    assert int(certified_radius(1.0, 1.0, 10, deletion_prob=0.5)) == 0
    # deletion radius is capped at n; without replacement it stops once fewer than m examples remain
    assert int(certified_radius(1.0, 1.0, 10, deletion_prob=0.5, threat="deletion")) == 10
    assert int(certified_radius(1.0, 1.0, 10, 3, threat="deletion")) == 7
    assert int(certified_radius(1.0, 1.0, 10, 3, replacement=True, threat="deletion")) == 9


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"lower": 0.9, "upper": 0.8, "n": 10, "m": 2}, ValueError, "lower must be <= upper"),
        ({"lower": 1.2, "upper": 1.3, "n": 10, "m": 2}, ValueError, "lower must lie in"),
        ({"lower": np.nan, "upper": 1.0, "n": 10, "m": 2}, ValueError, "finite"),
        (
            {"lower": 0.9, "upper": 1.0, "n": 10, "m": 11},
            ValueError,
            "m must be <= n",
        ),
        ({"lower": 0.9, "upper": 1.0, "n": 0, "m": 1}, ValueError, "n must be >= 1"),
        ({"lower": 0.9, "upper": 1.0, "n": 10}, ValueError, "m \\(subsample size\\) is required"),
        ({"lower": 0.9, "upper": 1.0, "n": 10, "m": 2, "deletion_prob": 0.5}, ValueError, "not both"),
        ({"lower": 0.9, "upper": 1.0, "n": 10, "deletion_prob": 1.0}, ValueError, "deletion_prob"),
        ({"lower": 0.9, "upper": 1.0, "n": 10, "m": 2, "threat": "swap"}, ValueError, "unknown threat"),
        ({"lower": 0.9, "upper": 1.0, "n": 10, "m": 2.0}, TypeError, "m must be an integer"),
        ({"lower": 0.9, "upper": 1.0, "n": 10, "m": 2, "replacement": "yes"}, TypeError, "replacement"),
        ({"lower": [0.9, 0.8], "upper": [1.0, 1.0, 1.0], "n": 10, "m": 2}, ValueError, "broadcast"),
    ],
)
def test_certified_radius_bad_inputs(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        certified_radius(**kwargs)


def test_edit_bounds_bad_inputs():
    with pytest.raises(ValueError, match="n_delete \\+ n_substitute must be <= n"):
        edit_bounds(0.9, 0.9, 5, 2, n_delete=3, n_substitute=3)
    with pytest.raises(ValueError, match="n_insert must be >= 0"):
        edit_bounds(0.9, 0.9, 5, 2, n_insert=-1)
    with pytest.raises(ValueError, match="votes_a and votes_b must be >= 0"):
        partition_radius(-1, 0, 1, 0)


def _exact_p_common(scheme, size, n_c, m, p_del):
    """P[T subset of C] as an exact Fraction (product formulas, independent of the implementation)."""
    k = size - n_c
    if scheme == "poisson":
        return Fraction(p_del) ** k
    if scheme == "with":
        return Fraction(n_c, size) ** m
    out = Fraction(1)
    for t in range(k):
        out *= Fraction(size - t - m, size - t)
    return out


@pytest.mark.parametrize(
    ("scheme", "n", "m", "p_del", "edit"),
    [
        ("without", 10**7, 1000, None, (0, 1, 0)),
        ("without", 10**7, 1000, None, (0, 0, 3)),
        ("without", 10**7, 10**5, None, (0, 0, 1)),
        ("without", 10**8, 10**4, None, (0, 0, 1)),
        ("without", 10**7, 1000, None, (3, 0, 0)),
        ("without", 10**6, 5000, None, (2, 2, 2)),
        ("with", 10**7, 1000, None, (0, 1, 2)),
        ("with", 10**8, 10**4, None, (3, 0, 1)),
        ("poisson", 10**7, None, 0.999, (1, 2, 3)),
    ],
)
def test_edit_bounds_never_cross_the_exact_bound_at_large_n(scheme, n, m, p_del, edit):
    """At large n, C(n_c, m) / C(n, m) from differences of log-gammas loses ~1e-7: the returned lower
    bound must still be <= the exact coupling bound and the upper bound >= it (float bounds padded
    outward), and within a few ulps-scale margin of it."""
    n_ins, n_del, n_sub = edit
    n_c, n_new = n - n_del - n_sub, n - n_del + n_ins
    ps = _exact_p_common(scheme, n, n_c, m, p_del)
    pt = _exact_p_common(scheme, n_new, n_c, m, p_del)
    kwargs = {"deletion_prob": p_del} if scheme == "poisson" else {"m": m, "replacement": scheme == "with"}
    for p in (0.6, 0.9, 0.99, 0.999999):
        lo, hi = edit_bounds(p, p, n, n_insert=n_ins, n_delete=n_del, n_substitute=n_sub, **kwargs)
        mu = Fraction(p)
        lo_exact = pt * max(Fraction(0), (mu - (1 - ps)) / ps)
        hi_exact = pt * min(Fraction(1), mu / ps) + 1 - pt
        assert Fraction(float(lo)) <= lo_exact, (p, float(lo), float(lo_exact))
        assert Fraction(float(hi)) >= hi_exact, (p, float(hi), float(hi_exact))
        assert float(lo_exact) - float(lo) < 1e-12 and float(hi) - float(hi_exact) < 1e-12


@pytest.mark.parametrize("upper", [1e-20, 1e-17, 1e-8])
def test_deletion_exclusion_radius_with_a_tiny_upper_bound(upper):
    """Review finding: ``1 - (1 - upper)`` rounded to 0, so every r was certified (1000 instead of 65).

    Poisson deletion with probability 1/2: exclusion holds at r while ``0.5**r > 2 upper``.
    """
    exact = max(r for r in range(1001) if Fraction(1, 2**r) > 2 * Fraction(upper))
    assert certified_radius(0.0, upper, 1000, deletion_prob=0.5, threat="deletion") == exact


def test_edit_bounds_are_trivial_not_nan_when_p_s_underflows():
    """Review finding: ``(1 - lower) / P_S`` was 0/0 when P_S underflowed to 0 with a finite log."""
    for bounds in (
        edit_bounds(1.0, 1.0, 1000, deletion_prob=1e-10, n_delete=40),
        edit_bounds(0.0, 0.0, 1000, deletion_prob=1e-10, n_delete=40),
    ):
        assert (float(bounds[0]), float(bounds[1])) == (0.0, 1.0)


@pytest.mark.parametrize(
    "kwargs",
    [{"m": 10}, {"m": 10, "replacement": True}, {"deletion_prob": 0.5}],
    ids=["uniform", "with_replacement", "poisson"],
)
def test_edit_bounds_with_astronomically_many_insertions_are_trivial(kwargs):
    """Review finding: n_insert beyond the float range raised OverflowError / math domain error."""
    lower, upper = edit_bounds(0.9, 0.95, 100, n_insert=10**400, **kwargs)
    assert (float(lower), float(upper)) == (0.0, 1.0)
