"""Subsample and aggregate (`ensemble_profile`): the ensemble's certified level against a brute-force minimum
over every set of members and votes, its smoothness, retrained neighbours of a small ensemble; the query
budget of `PrivatePredictor` composed by dp-accounting."""

import itertools
import math
import re

import numpy as np
import pytest

from certkit.mibp import (
    MLP,
    BudgetExhaustedError,
    PrivatePredictor,
    ensemble_profile,
    private_predict,
    release_probabilities,
    row_parts,
    stability_profile,
)
from certkit.mibp.privacy.budget import composed_epsilon
from certkit.mibp.privacy.ensembles import ensemble_level


def _brute_level(votes_of_members, levels, C):
    """The fewest changes that can change the winner of the vote (every set of members, every new vote),
    minus one."""
    T = len(votes_of_members)

    def winner(v):
        return int(np.argmax(np.bincount(v, minlength=C)))

    start = winner(votes_of_members)
    best = math.inf
    for size in range(1, T + 1):
        for members in itertools.combinations(range(T), size):
            cost = sum(levels[i] + 1 for i in members)
            if cost >= best:
                continue
            for new in itertools.product(range(C), repeat=size):
                v = votes_of_members.copy()
                v[list(members)] = new
                if winner(v) != start:
                    best = cost
                    break
    return best - 1


@pytest.mark.parametrize("C", [2, 3])
def test_ensemble_level_is_the_exact_minimum(C):
    gen = np.random.default_rng(C)
    for _ in range(60):
        T = int(gen.integers(1, 7))
        member_votes = gen.integers(0, C, size=T)
        member_levels = gen.integers(0, 4, size=T)
        votes = np.bincount(member_votes, minlength=C)[None]
        nominal = np.argmax(votes, axis=1)
        got = ensemble_level(votes, nominal, member_levels[None], member_votes[None])[0]
        assert got == _brute_level(member_votes, member_levels, C)


def test_ensemble_level_moves_by_at_most_one_between_neighbours():
    """One member's level moves by one (same vote), or a member at level 0 changes its vote: the ensemble's
    level moves by at most one, and its winner stays where the level is at least one."""
    gen = np.random.default_rng(0)
    C = 3
    for _ in range(300):
        T = int(gen.integers(1, 8))
        mv, ml = gen.integers(0, C, size=T), gen.integers(0, 3, size=T)
        j = int(gen.integers(T))
        mv2, ml2 = mv.copy(), ml.copy()
        if ml[j] == 0 and gen.random() < 0.5:
            mv2[j] = (mv[j] + 1 + int(gen.integers(C - 1))) % C
        else:
            ml2[j] = max(0, ml[j] + int(gen.choice([-1, 1])))
        levels, winners = [], []
        for v, lv in ((mv, ml), (mv2, ml2)):
            votes = np.bincount(v, minlength=C)[None]
            nominal = np.argmax(votes, axis=1)
            levels.append(ensemble_level(votes, nominal, lv[None], v[None])[0])
            winners.append(nominal[0])
        assert abs(levels[0] - levels[1]) <= 1
        if levels[0] >= 1:
            assert winners[0] == winners[1]


def test_row_parts_depend_on_the_row_alone():
    gen = np.random.default_rng(2)
    X, y = gen.normal(size=(50, 3)), gen.integers(0, 2, size=50)
    parts = row_parts(X, y, 5)
    assert parts.min() >= 0 and parts.max() < 5 and len(np.unique(parts)) == 5
    more = row_parts(np.vstack([X, gen.normal(size=(1, 3))]), np.append(y, 1), 5)
    assert np.array_equal(more[:50], parts)
    assert np.array_equal(row_parts(X[::-1], y[::-1], 5), parts[::-1])


def test_small_ensemble_against_its_retrained_neighbours():
    """Four members on 80 rows: for every neighbour one row away (each row removed; rows added), the member
    of that row's part is retrained with its profile: the ensemble's prediction does not change where its
    level is at least one, and every query's level moves by at most one."""
    gen = np.random.default_rng(6)
    X = gen.normal(size=(80, 2))
    y = (X[:, 0] - 0.5 * X[:, 1] > 0).astype(int)
    Xq = gen.normal(size=(25, 2))
    model = MLP.random([2, 2], rng=0)
    kw = dict(ks=range(5), loss="cross_entropy", clip_value=0.2, learning_rate=1.0, epochs=2)
    base = ensemble_profile(model, X, y, Xq, n_members=4, **kw)
    assert base.levels.max() >= 1 and base.votes.sum(axis=1).tolist() == [4] * 25
    additions = [(np.array([1.5, -1.5]), 0), (np.array([-0.2, 0.1]), 1)]
    neighbours = [(np.delete(X, i, axis=0), np.delete(y, i)) for i in range(0, 80, 8)]
    neighbours += [(np.vstack([X, [x]]), np.append(y, c)) for x, c in additions]
    for X2, y2 in neighbours:
        other = ensemble_profile(model, X2, y2, Xq, n_members=4, **kw)
        assert np.all(np.abs(other.levels - base.levels) <= 1)
        held = base.levels >= 1
        assert np.array_equal(other.predictions[held], base.predictions[held])
    for mechanism, delta in (("cauchy", 0.0), ("ptr", 1e-4), ("global", 0.0)):
        stay = release_probabilities(base, epsilon=1.0, delta=delta, mechanism=mechanism)
        assert np.all((stay > 0) & (stay <= 1))
        assert private_predict(
            base, epsilon=1.0, delta=delta, mechanism=mechanism, rng=np.random.default_rng(0)
        ).shape == (25,)
    with pytest.raises(ValueError, match="parts must hold one part"):
        ensemble_profile(model, X, y, Xq, n_members=4, parts=np.zeros(3, dtype=int), **kw)
    assert "Ensemble stability profile" in base.summary()


def test_composition_is_dp_accountings_and_beats_the_sum():
    """Pure queries compose below their sum at a positive total δ, and below advanced composition; with a
    total δ of 0 only the sum applies; more queries never cost less."""
    eps = 0.1
    costs = [composed_epsilon(eps, 0.0, k, 1e-6) for k in (1, 10, 100, 1000)]
    assert costs == sorted(costs)
    for k, cost in zip((10, 100, 1000), costs[1:]):
        advanced = math.sqrt(2 * k * math.log(1e6)) * eps + k * eps * math.expm1(eps)
        assert cost <= min(k * eps, advanced) + 1e-9
    assert composed_epsilon(eps, 0.0, 1000, 1e-6) < 1000 * eps / 2
    assert composed_epsilon(eps, 0.0, 30, 0.0) == pytest.approx(3.0)
    assert composed_epsilon(eps, 1e-4, 30, 1e-3) == math.inf  # the δs alone exceed the total


def test_private_predictor_refuses_past_its_budget():
    gen = np.random.default_rng(3)
    X = gen.normal(size=(60, 2))
    y = (X[:, 0] > 0).astype(int)
    fit = dict(ks=range(6), loss="cross_entropy", clip_value=0.2, learning_rate=1.0)
    predictor = PrivatePredictor(0.5, total_epsilon=3.0, rng=np.random.default_rng(4)).fit(
        MLP.random([2, 2], rng=0), X, y, **fit
    )
    assert predictor.queries_left() == 6
    first = predictor.predict(X[:4])
    profile = stability_profile(MLP.random([2, 2], rng=0), X, y, X[:4], **fit)
    assert np.array_equal(first, private_predict(profile, epsilon=0.5, rng=np.random.default_rng(4)))
    with pytest.raises(
        BudgetExhaustedError, match=r"answering 3 more queries would spend ε = 3\.5 > total_epsilon"
    ):
        predictor.predict(X[:3])
    assert predictor.queries_answered == 4 and predictor.queries_left() == 2
    predictor.predict(X[:2])
    assert predictor.spent == (pytest.approx(3.0), 0.0)
    with pytest.raises(BudgetExhaustedError, match="0 queries remain"):
        predictor.predict(X[:1])
    pooled = PrivatePredictor(0.05, total_epsilon=1.0, total_delta=1e-3)
    assert pooled.fit(MLP.random([2, 2], rng=0), X, y, **fit).queries_left() > 20  # their sum allows 20
    assert "queries answered" in predictor.summary()
    with pytest.raises(RuntimeError, match="not fitted"):
        PrivatePredictor(0.5, total_epsilon=1.0).predict(X)
    with pytest.raises(ValueError, match=r"epsilon \(2\.0\) must be at most total_epsilon"):
        PrivatePredictor(2.0, total_epsilon=1.0)
    with pytest.raises(ValueError, match="total_delta must be in \\[0, 1\\)"):
        PrivatePredictor(0.5, total_epsilon=1.0, total_delta=1.0)


def _votes_profile(votes):
    """An ensemble profile of the given vote counts (two classes, no members: the global mechanism reads
    the votes alone)."""
    from certkit.mibp import EnsembleProfile

    votes = np.asarray(votes)
    return EnsembleProfile(
        members=(),
        votes=votes,
        predictions=np.argmax(votes, axis=1),
        classes=np.array([0, 1]),
        levels=np.zeros(len(votes), dtype=np.int64),
        parts=np.zeros(2, dtype=np.int64),
        relation="neighbours",
        seconds=0.0,
        cpu_seconds=0.0,
    )


def test_discrete_laplace_has_its_pmf_and_is_a_function_of_the_generator():
    """The exact sampler of the ensemble's global mechanism: the empirical pmf of 40,000 draws at scale 2
    (ε = 1 on the votes) is within Clopper-Pearson bounds (99.9 %, Bonferroni) of ``(1 - r)/(1 + r) r^|z|``,
    ``r = exp(-1/2)``, so neighbouring counts have the ratio ``e^{1/2}`` the accounting uses; the draws are
    integers, the same for the same generator state and different for another."""
    from fractions import Fraction

    from certkit.mibp.privacy.ensembles import discrete_laplace
    from certkit.stats import clopper_pearson

    draws = discrete_laplace(Fraction(2), 40000, np.random.default_rng(0))
    assert draws.dtype == np.int64
    r = math.exp(-0.5)
    support = range(-5, 6)
    for z in support:
        pmf = (1 - r) / (1 + r) * r ** abs(z)
        bound = clopper_pearson(
            int(np.sum(draws == z)), len(draws), confidence_level=0.999, n_tests=len(support)
        )
        assert bound.low <= pmf <= bound.high
    assert np.abs(draws).max() > 10  # unbounded support: no truncation of the tails
    again = discrete_laplace(Fraction(2), 100, np.random.default_rng(0))
    assert np.array_equal(again, draws[:100])
    assert not np.array_equal(discrete_laplace(Fraction(2), 100, np.random.default_rng(1)), again)
    wide = discrete_laplace(Fraction(2) / Fraction(0.1), 4000, np.random.default_rng(2))  # scale 20
    assert abs(np.mean(np.abs(wide)) - 2 * math.exp(-0.05) / (1 - math.exp(-0.1))) < 1.5


def test_ensemble_global_release_adds_discrete_laplace_to_the_votes():
    """``mechanism="global"`` on an ensemble adds exact discrete Laplace noise of scale ``2/ε`` to the vote
    counts (integers: a float Laplace has probability 0 beyond its bounded range, breaking the ratio) and
    takes the first noisy maximum: with tied votes the nominal (first) class wins with probability
    ``(1 + P(tie)) / 2``, ``P(tie) = (1 - r)(1 + r²)/(1 + r)³``; `release_probabilities` is that exactly and
    the draws agree with it; the draws are a function of the generator."""
    from certkit.stats import clopper_pearson

    r = math.exp(-0.5)
    tie = (1 - r) * (1 + r * r) / (1 + r) ** 3
    profile = _votes_profile([[0, 0]] * 20000)
    stay = release_probabilities(profile, epsilon=1.0, mechanism="global")
    assert stay == pytest.approx(np.full(20000, (1 + tie) / 2), rel=1e-12)
    draws = private_predict(profile, epsilon=1.0, mechanism="global", rng=np.random.default_rng(3))
    bound = clopper_pearson(int(np.sum(draws == 0)), len(draws), confidence_level=0.999)
    assert bound.low <= (1 + tie) / 2 <= bound.high
    again = private_predict(profile, epsilon=1.0, mechanism="global", rng=np.random.default_rng(3))
    assert np.array_equal(draws, again)
    lead = release_probabilities(_votes_profile([[2, 0], [1, 2]]), epsilon=1.0, mechanism="global")
    # P(Z_1 - Z_0 <= 2) and P(Z_0 - Z_1 <= -2) for two independent discrete Laplace draws
    z = np.arange(-200, 201)
    pmf = (1 - r) / (1 + r) * r ** np.abs(z)
    diff = np.convolve(pmf, pmf)  # the pmf of Z_1 - Z_0 on -400..400
    values = np.arange(-400, 401)
    assert lead == pytest.approx([diff[values <= 2].sum(), diff[values <= 0].sum()], rel=1e-12)


def test_budget_arithmetic_is_exact_where_decimals_meet_floats():
    """``epsilon=0.1, total_epsilon=0.3`` answers three queries (``3 * 0.1`` is above ``0.3`` in floats, by
    one rounding: each query is composed at the ε its table is checked at, ``ε (1 - 2**-30)``), while a real
    excess is still refused; the δs add up exactly; a total δ below one query's δ (laplace with
    ``total_delta=0``, which answered none) is refused naming total_delta."""
    from certkit.mibp.privacy.mechanisms import ACCOUNTING_ROOM, _check_table, level_table

    assert 3 * 0.1 > 0.3
    assert PrivatePredictor(0.1, total_epsilon=0.3).queries_left() == 3
    assert PrivatePredictor(0.1, total_epsilon=0.7).queries_left() == 7
    assert PrivatePredictor(0.1, total_epsilon=0.3 - 1e-9).queries_left() == 2  # a real excess
    assert PrivatePredictor(0.1, total_epsilon=0.3, total_delta=1e-6).queries_left() >= 3
    table = level_table("cauchy", 0.1, 0.0, 2, 10)  # the accounting's ε is the one the table passes
    assert _check_table(table.w, 0.1 * (1 - ACCOUNTING_ROOM), 0.0, 2)
    assert composed_epsilon(0.1, 1e-7, 3, 3e-7) == pytest.approx(0.3)  # 3 δ = total δ, exactly
    assert composed_epsilon(0.1, 1e-7, 4, 3e-7) == math.inf
    for total in (0.0, 1e-8):
        with pytest.raises(ValueError, match=r"total_delta \(.*\) must be at least delta \(1e-07\)"):
            PrivatePredictor(0.1, delta=1e-7, mechanism="laplace", total_epsilon=1.0, total_delta=total)
    ptr = PrivatePredictor(0.1, delta=1e-7, mechanism="ptr", total_epsilon=1.0, total_delta=3e-7)
    assert ptr.queries_left() == 3


def test_an_empty_part_abstains_so_neighbours_are_answered_alike():
    """A part that holds one row in one dataset and none in its neighbour: both are profiled (a refusal would
    tell them apart), the empty member abstains at level 0, and every level moves by at most one."""
    gen = np.random.default_rng(3)
    X = gen.normal(size=(31, 2))
    y = (X[:, 0] > 0).astype(int)
    Xq = gen.normal(size=(15, 2))
    parts = np.r_[0, np.arange(30) % 3 + 1]  # part 0 holds row 0 alone
    kw = dict(n_members=4, ks=range(4), loss="cross_entropy", clip_value=0.2, learning_rate=1.0, epochs=2)
    model = MLP.random([2, 2], rng=0)
    full = ensemble_profile(model, X, y, Xq, parts=parts, **kw)
    empty = ensemble_profile(model, X[1:], y[1:], Xq, parts=parts[1:], **kw)
    assert full.members[0] is not None and empty.members[0] is None
    assert full.votes.sum(axis=1).tolist() == [4] * 15 and empty.votes.sum(axis=1).tolist() == [3] * 15
    assert np.all(np.abs(full.levels - empty.levels) <= 1)
    assert empty.max_level == 1 + sum(m.max_level + 1 for m in empty.members[1:])
    assert re.search(r"rows per member\s+0\.\.10\n", empty.summary())


def test_ensemble_inputs_name_the_argument():
    gen = np.random.default_rng(0)
    X, y = gen.normal(size=(10, 2)), np.arange(10) % 2
    kw = dict(n_members=2, ks=range(2), loss="cross_entropy")
    with pytest.raises(ValueError, match=r"^inconsistent numbers of samples: X has 10, y has 5$"):
        ensemble_profile(MLP.random([2, 2], rng=0), X, y[:5], X[:3], **kw)
    with pytest.raises(ValueError, match=r"^batches: ensemble_profile trains every member on its own part"):
        ensemble_profile(MLP.random([2, 2], rng=0), X, y, X[:3], batches=[[np.arange(10)]], **kw)


def test_composed_epsilon_rounds_upward():
    """``count ε`` in floats can fall below the exact product: the accounting uses the float at or above it
    (every count and ε of a sweep), so a budget never admits an exact excess."""
    from fractions import Fraction

    gen = np.random.default_rng(0)
    low = 0
    for _ in range(2000):
        eps, count = float(gen.uniform(1e-4, 1.0)), int(gen.integers(2, 1000))
        exact = count * Fraction(eps)
        low += Fraction(count * eps) < exact
        assert Fraction(composed_epsilon(eps, 0.0, count, 0.0)) >= exact
    assert low > 100  # the sweep met products that float multiplication rounds down
