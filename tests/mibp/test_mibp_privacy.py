"""Private prediction: the stability profile against the exact smooth sensitivity on tiny data (every
neighbouring dataset retrained), the level's smoothness between neighbours, the mechanisms' empirical privacy
loss on neighbouring datasets (Monte Carlo with Clopper-Pearson bounds), the tables' exact check, refusals
and determinism."""

import functools
import itertools
import math

import numpy as np
import pytest

from certkit.mibp import (
    MLP,
    Neighbours,
    PrivatePredictor,
    Removals,
    StabilityProfile,
    private_predict,
    release_probabilities,
    stability_profile,
)
from certkit.mibp.privacy.mechanisms import _check_table, level_table
from certkit.stats import clopper_pearson

GEN = np.random.default_rng(11)
X8 = GEN.normal(size=(8, 2))
Y8 = (X8[:, 0] + 0.5 * X8[:, 1] > 0).astype(int)
POOL = np.array([[2.5, 2.5], [-2.5, -2.5], [2.5, -2.5], [0.3, -0.2]])
RECIPE = dict(loss="cross_entropy", clip_value=0.3, learning_rate=1.0, epochs=2)
QUERIES = np.stack(np.meshgrid(np.linspace(-1.5, 1.5, 7), np.linspace(-1.5, 1.5, 7)), -1).reshape(-1, 2)


def _prediction(model, X, y, queries):
    """The mechanism's nominal prediction for a dataset (full batch, rows in the given order)."""
    return model.train(X, y, **RECIPE)[-1].predict(queries)


def _datasets_within(t_max):
    """Every dataset within ``t_max`` rows removed from X8 or added from POOL (either label), with its
    distance: (distance, X, y)."""
    added = [(p, c) for p in range(len(POOL)) for c in (0, 1)]
    for r in range(t_max + 1):
        for gone in itertools.combinations(range(8), r):
            keep = np.delete(np.arange(8), gone)
            for a in range(t_max - r + 1):
                for new in itertools.combinations(range(len(added)), a):
                    X = np.vstack([X8[keep]] + [POOL[[added[i][0]]] for i in new])
                    y = np.concatenate([Y8[keep], [added[i][1] for i in new]]).astype(int)
                    yield r + a, X, y


def test_exact_smooth_sensitivity_is_never_above_the_bound():
    """On tiny data the smooth sensitivity of every query's prediction is computed exactly over every dataset
    within 3 changes (rows of X8 removed, pool rows added with either label, every one retrained):
    ``S*_β = max_t exp(-β t) max_{d(D', D) <= t} LS(D')`` with LS 1 where a neighbour of ``D'`` predicts
    otherwise.  It is never above the bound ``exp(-β level)`` the profile gives, for every β."""
    model = MLP.random([2, 2], rng=0)
    profile = stability_profile(model, X8, Y8, QUERIES, ks=range(4), **RECIPE)
    assert profile.levels.max() >= 2 and profile.levels.min() == 0  # both kinds of queries are present
    by_distance = {t: [] for t in range(4)}
    for t, X, y in _datasets_within(3):
        by_distance[t].append(_prediction(model, X, y, QUERIES))
    nominal = by_distance[0][0]
    assert np.array_equal(np.searchsorted(profile.classes, profile.predictions), nominal)
    # A^(t) = 1 where some dataset within t + 1 changes predicts otherwise (it and its neighbour differ)
    changed = [np.any([p != nominal for s in range(t + 1) for p in by_distance[s]], axis=0) for t in range(4)]
    for beta in (0.01, 0.5, 3.0):
        exact = np.zeros(len(QUERIES))
        for t in range(3):  # A^(t) needs datasets within t + 1 <= 3
            exact = np.maximum(exact, np.exp(-beta * t) * changed[t + 1])
        bound = np.exp(-beta * profile.levels)
        assert np.all(exact <= bound)
    # and the bound is attained where the level is 0 and a neighbour predicts otherwise
    assert np.any(changed[1] & (profile.levels == 0))


def test_levels_move_by_at_most_one_between_neighbours():
    """The smoothness the mechanisms rely on: for every dataset one row away (each row removed, each pool row
    added with each label), every query's level differs by at most one, and where the level is at least one
    the neighbour predicts the same."""
    model = MLP.random([2, 2], rng=0)
    ks = range(6)
    base = stability_profile(model, X8, Y8, QUERIES, ks=ks, **RECIPE)
    count = 0
    for t, X, y in _datasets_within(1):
        if t != 1:
            continue
        other = stability_profile(model, X, y, QUERIES, ks=ks, **RECIPE)
        assert np.all(np.abs(other.levels - base.levels) <= 1)
        held = base.levels >= 1
        assert np.array_equal(other.predictions[held], base.predictions[held])
        count += 1
    assert count == 8 + 8


def _draws(profile, mechanism, epsilon, delta, seed):
    return private_predict(
        profile, epsilon=epsilon, delta=delta, mechanism=mechanism, rng=np.random.default_rng(seed)
    )


def _empirical_loss(a, b, classes, epsilon, confidence_level=0.999):
    """The largest lower confidence bound, over output sets, of ``P_a(S) - e^ε P_b(S)`` (Clopper-Pearson,
    Bonferroni over the sets and both directions); every set of labels is an output set."""
    worst = -np.inf
    sets = [s for r in range(1, len(classes)) for s in itertools.combinations(classes, r)]
    n_tests = 2 * len(sets)
    for first, second in ((a, b), (b, a)):
        for s in sets:
            ka, kb = int(np.isin(first, s).sum()), int(np.isin(second, s).sum())
            low = clopper_pearson(
                ka, len(first), confidence_level=confidence_level, alternative="greater", n_tests=n_tests
            ).low
            high = clopper_pearson(
                kb, len(second), confidence_level=confidence_level, alternative="less", n_tests=n_tests
            ).high
            worst = max(worst, low - math.exp(epsilon) * high)
    return worst


@functools.cache
def _neighbouring_profiles(n_classes):
    """Profiles of one query repeated, on a training set and on it with one row added, where the query's
    level differs by one between them or (level 0) its prediction differs: the tight cases."""
    gen = np.random.default_rng(n_classes)
    X = gen.normal(size=(30, 2))
    W = np.array([[1.0, -1.0, 0.3], [0.4, 0.8, -1.0]])[:, :n_classes]
    y = np.argmax(X @ W, axis=1) if n_classes > 2 else (X @ W[:, 0] > 0).astype(int)
    model = MLP.random([2, n_classes], rng=1)
    recipe = dict(loss="cross_entropy", clip_value=0.2, learning_rate=1.0, epochs=2)
    grid = np.stack(np.meshgrid(np.linspace(-2, 2, 25), np.linspace(-2, 2, 25)), -1).reshape(-1, 2)
    ks = range(8)
    p = stability_profile(model, X, y, grid, ks=ks, **recipe)
    pairs = {}
    for z, label in itertools.product(([0.0, 0.0], [1.0, -1.0], [-1.0, 1.0]), range(n_classes)):
        Xz, yz = np.vstack([X, [z]]), np.append(y, label)
        q = stability_profile(model, Xz, yz, grid, ks=ks, **recipe)
        for i in np.flatnonzero(p.levels != q.levels):
            pairs.setdefault("level", (Xz, yz, grid[i]))
        for i in np.flatnonzero(p.predictions != q.predictions):
            pairs.setdefault("label", (Xz, yz, grid[i]))
    assert set(pairs) == {"level", "label"}
    out = []
    for Xz, yz, query in pairs.values():
        repeat = np.repeat(query[None], 4000, axis=0)
        out.append(
            (
                stability_profile(model, X, y, repeat, ks=ks, **recipe),
                stability_profile(model, Xz, yz, repeat, ks=ks, **recipe),
            )
        )
    return out


@pytest.mark.slow
@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize(
    ("mechanism", "epsilon", "delta"),
    [
        ("cauchy", 1.0, 0.0),
        ("cauchy", 0.2, 0.0),
        ("laplace", 1.0, 1e-3),
        ("ptr", 2.0, 1e-3),
        ("global", 1.0, 0.0),
    ],
)
def test_empirical_privacy_loss_never_exceeds_epsilon(n_classes, mechanism, epsilon, delta):
    """Monte Carlo on a pair of neighbouring datasets (one row added) at a query whose level differs by one,
    and at one whose prediction differs: 4 x 4,000 releases; the Clopper-Pearson lower bound (99.9 %,
    Bonferroni) of ``P_D(S) - e^ε P_D'(S)`` is at most δ for every output set and both directions."""
    for p, q in _neighbouring_profiles(n_classes):
        a = np.concatenate([_draws(p, mechanism, epsilon, delta, seed) for seed in (0, 1)])
        b = np.concatenate([_draws(q, mechanism, epsilon, delta, seed) for seed in (2, 3)])
        assert _empirical_loss(a, b, p.classes, epsilon) <= delta


def test_randomized_response_at_level_zero_is_tight():
    """At level 0 with different predictions the cauchy mechanism is randomized response at ε: the release
    ratio sits at e^ε (the Monte Carlo test above has power), exactly as the table says."""
    p, q = _neighbouring_profiles(2)[1]
    assert p.levels[0] == q.levels[0] == 0 and p.predictions[0] != q.predictions[0]
    stay = release_probabilities(p, epsilon=1.0)[0]
    assert stay / (1.0 - stay) == pytest.approx(math.e, rel=1e-5)
    a = _draws(p, "cauchy", 1.0, 0.0, 5)
    share = np.mean(a == p.predictions[0])
    assert abs(math.log(share / (1.0 - share)) - 1.0) < 0.15


@pytest.mark.parametrize("n_classes", [2, 3, 5])
@pytest.mark.parametrize(
    ("mechanism", "delta"), [("cauchy", 0.0), ("laplace", 1e-5), ("ptr", 1e-5), ("global", 0.0)]
)
def test_tables_pass_their_exact_check_and_fail_a_larger_loss(n_classes, mechanism, delta):
    """Every table passes the exact hockey-stick check at its (ε, δ); the smooth-sensitivity tables are tight
    enough that a tenth of ε fails (they spend their budget), and releases grow more likely with the level."""
    for epsilon in (0.05, 1.0, 4.0):
        table = level_table(mechanism, epsilon, delta, n_classes, 60)
        assert _check_table(table.w, epsilon, delta, n_classes)
        assert not _check_table(table.w, epsilon / 10, delta / 10, n_classes)
        assert np.all(np.diff(table.w) <= 0)
    if mechanism == "cauchy" and n_classes == 2:
        assert table.beta == pytest.approx(4.0, rel=1e-5)  # β = ε for two classes


def test_binary_cauchy_constants_and_the_levels_it_needs():
    """Two classes: β = ε and α = 2 tan(π tanh(ε/2) / 2) (slightly less, for rounding room); the release of
    the nominal label at level c is 1/2 + arctan(α e^{βc} / 2) / π."""
    table = level_table("cauchy", 0.5, 0.0, 2, 10)
    alpha = 2 * math.tan(math.pi * math.tanh(0.25) / 2)
    assert table.alpha == pytest.approx(alpha, rel=1e-5) and table.beta == pytest.approx(0.5, rel=1e-5)
    levels = np.arange(11)
    expected = 0.5 - np.arctan(table.alpha * np.exp(table.beta * levels) / 2) / math.pi
    assert np.allclose(table.w, expected, rtol=1e-12, atol=0)


def test_profile_fields_gaps_and_determinism():
    """k_max is the largest rung certified at every rung below it, levels count the rungs >= 1 up to it
    (fewer than k_max for a ladder with gaps), the profile does not depend on the executor, and the releases
    are a function of rng."""
    gen = np.random.default_rng(4)
    X = gen.normal(size=(60, 2))
    y = (X[:, 0] > 0).astype(int)
    Xq = gen.normal(size=(40, 2))
    kw = dict(
        loss="binary_cross_entropy",
        clip_value=0.1,
        learning_rate=1.0,
        epochs=2,
    )
    full = stability_profile(MLP.random([2, 1], rng=0), X, y, Xq, ks=range(12), **kw)
    gaps = stability_profile(MLP.random([2, 1], rng=0), X, y, Xq, ks=[0, 3, 6, 9], **kw)
    parallel = stability_profile(MLP.random([2, 1], rng=0), X, y, Xq, ks=range(12), executor=2, **kw)
    assert np.array_equal(parallel.certified, full.certified) and np.array_equal(parallel.levels, full.levels)
    assert set(np.unique(full.predictions)) <= {0, 1}
    assert np.array_equal(full.k_max, full.certified.sum(axis=1) - 1)
    assert np.array_equal(full.levels, np.maximum(full.k_max, 0))
    # the same boxes at the same k: the ladder with gaps stops at its largest rung below full's k_max
    rungs = np.array([0, 3, 6, 9])
    expected = np.array([rungs[rungs <= k].max() if k >= 0 else -1 for k in full.k_max])
    assert np.array_equal(gaps.k_max, expected)
    assert np.array_equal(gaps.levels, np.searchsorted([3, 6, 9], np.maximum(gaps.k_max, 0), side="right"))
    assert 0 < full.runs <= 12
    a = private_predict(full, epsilon=0.5, rng=np.random.default_rng(7))
    assert np.array_equal(a, private_predict(full, epsilon=0.5, rng=np.random.default_rng(7)))
    assert not np.array_equal(a, private_predict(full, epsilon=0.5, rng=np.random.default_rng(8)))
    assert "Stability profile" in full.summary()


def test_profile_accepts_pandas_and_torch():
    pd = pytest.importorskip("pandas")
    torch = pytest.importorskip("torch")
    gen = np.random.default_rng(1)
    X = gen.normal(size=(40, 2))
    y = (X[:, 1] > 0).astype(int)
    kw = dict(ks=range(4), loss="cross_entropy", clip_value=0.2, learning_rate=0.5)
    base = stability_profile(MLP.random([2, 2], rng=0), X, y, X[:5], **kw)
    frame = stability_profile(
        MLP.random([2, 2], rng=0), pd.DataFrame(X), pd.Series(y), pd.DataFrame(X[:5]), **kw
    )
    tensor = stability_profile(
        MLP.random([2, 2], rng=0), torch.tensor(X), torch.tensor(y), torch.tensor(X[:5]), **kw
    )
    for other in (frame, tensor):
        assert np.array_equal(other.k_max, base.k_max) and np.array_equal(other.predictions, base.predictions)


def test_refusals_name_the_argument():
    X, y = X8, Y8
    model = MLP.random([2, 2], rng=0)
    kw = dict(loss="cross_entropy", clip_value=0.3)
    with pytest.raises(ValueError, match="ks must be strictly increasing"):
        stability_profile(model, X, y, X, ks=[0, 2, 1], **kw)
    with pytest.raises(ValueError, match="ks\\[i\\] must be >= 0"):
        stability_profile(model, X, y, X, ks=[-1, 2], **kw)
    with pytest.raises(ValueError, match="ks must hold at least one k"):
        stability_profile(model, X, y, X, ks=[], **kw)
    with pytest.raises(TypeError, match="ks must be a sequence"):
        stability_profile(model, X, y, X, ks=3, **kw)
    for nested in ([[0, 1], [2, 3]], np.arange(4).reshape(2, 2), [0, [1, 2]]):
        with pytest.raises(TypeError, match="ks must be a flat sequence"):
            stability_profile(model, X, y, X, ks=nested, **kw)
    with pytest.raises(TypeError, match="ks\\[i\\] must be an integer"):
        stability_profile(model, X, y, X, ks=[0.5], **kw)
    with pytest.raises(ValueError, match="use a classification loss"):
        stability_profile(MLP.random([2, 1], rng=0), X, X[:, 0], X, ks=[0], loss="mse", clip_value=0.3)
    with pytest.raises(TypeError, match=r"unexpected recipe option\(s\) \['backend'\]"):
        stability_profile(model, X, y, X, ks=[0], backend="lp", **kw)
    with pytest.raises(TypeError, match="perturbation must be None"):
        stability_profile(model, X, y, X, ks=[0], perturbation="neighbours", **kw)
    with pytest.raises(ValueError, match="X_query must have shape"):
        stability_profile(model, X, y, X[:, :1], ks=[0], **kw)
    profile = stability_profile(model, X, y, X, ks=range(3), **kw)
    with pytest.raises(ValueError, match="epsilon must be > 0"):
        private_predict(profile, epsilon=0.0)
    with pytest.raises(ValueError, match="unknown mechanism 'gaussian'"):
        private_predict(profile, epsilon=1.0, mechanism="gaussian")
    with pytest.raises(ValueError, match="delta must be in \\[0, 1\\)"):
        private_predict(profile, epsilon=1.0, delta=1.0, mechanism="laplace")
    with pytest.raises(ValueError, match="mechanism='cauchy' is ε-DP"):
        private_predict(profile, epsilon=1.0, delta=1e-5)
    with pytest.raises(ValueError, match="mechanism='laplace' needs delta > 0"):
        private_predict(profile, epsilon=1.0, mechanism="laplace")
    with pytest.raises(TypeError, match="profile must be a StabilityProfile"):
        private_predict(profile.certified, epsilon=1.0)
    unlearning = stability_profile(model, X, y, X, ks=range(3), perturbation=Removals, **kw)
    assert unlearning.relation == "removals"
    with pytest.raises(ValueError, match="need a profile of the Neighbours relation"):
        private_predict(unlearning, epsilon=1.0)
    template = stability_profile(model, X, y, X, ks=range(3), perturbation=Neighbours(0, public=[0]), **kw)
    assert isinstance(template, StabilityProfile) and template.relation == "neighbours"


def test_rungs_share_the_first_step_and_equal_certified_training():
    """Every rung starts from the first step's shared row bounds; its box is `certified_training`'s with
    `Neighbours(k)` exactly, so the profile certifies exactly what those boxes certify."""
    from certkit.mibp import certified_training
    from certkit.mibp.enclosures.neighbours import neighbour_margins

    gen = np.random.default_rng(8)
    X = gen.normal(size=(50, 2))
    y = (X[:, 0] > 0.2).astype(int)
    Xq = gen.normal(size=(30, 2))
    kw = dict(loss="cross_entropy", clip_value=0.1, learning_rate=1.0, epochs=3, momentum=0.3)
    profile = stability_profile(MLP.random([2, 2], rng=0), X, y, Xq, ks=range(6), **kw)
    pred = profile.class_index
    for j, k in enumerate(range(6)):
        res = certified_training(MLP.random([2, 2], rng=0), X, y, perturbation=Neighbours(k), **kw)
        alone = neighbour_margins(res.lower[-1], res.upper[-1], Xq, pred) > 0
        expected = alone & (profile.certified[:, j - 1] if j else True)
        assert np.array_equal(profile.certified[:, j], expected)


def test_private_prediction_refuses_mini_batches():
    """With mini-batches one row added or removed moves every later row to another batch, a run the
    Neighbours bounds do not cover: every path from a training run to privacy refuses ``batch_size`` (even
    one as large as the data, so that the refusal does not depend on it) and a batch order that misses a
    row; full batches given as an order are accepted, and unlearning profiles (Removals) keep mini-batches."""
    from certkit.mibp import ensemble_profile

    model = MLP.random([2, 2], rng=0)
    kw = dict(ks=range(3), loss="cross_entropy", clip_value=0.3)
    for size in (4, len(X8), 100):
        with pytest.raises(ValueError, match=rf"batch_size={size}: private prediction needs full-batch"):
            stability_profile(model, X8, Y8, QUERIES, batch_size=size, **kw)
    with pytest.raises(ValueError, match="batch_size=4: private prediction needs full-batch"):
        stability_profile(model, X8, Y8, QUERIES, batch_size=4, shuffle=True, rng=0, **kw)
    with pytest.raises(ValueError, match="batch_size=4: private prediction needs full-batch"):
        PrivatePredictor(1.0, total_epsilon=2.0).fit(model, X8, Y8, batch_size=4, **kw)
    with pytest.raises(ValueError, match="batch_size=4: private prediction needs full-batch"):
        ensemble_profile(model, X8, Y8, QUERIES, n_members=2, batch_size=4, **kw)
    halves = [[np.arange(4), np.arange(4, 8)]]
    with pytest.raises(ValueError, match="batches: private prediction needs full-batch"):
        stability_profile(model, X8, Y8, QUERIES, batches=halves, **kw)
    full = stability_profile(model, X8, Y8, QUERIES, **kw)
    given = stability_profile(model, X8, Y8, QUERIES, batches=[[np.arange(8)[::-1]]], **kw)
    assert np.array_equal(given.levels, full.levels)
    unlearning = stability_profile(model, X8, Y8, QUERIES, batch_size=4, perturbation=Removals, **kw)
    assert unlearning.relation == "removals"


def test_rungs_that_cannot_be_bounded_are_uncertified_not_refused():
    """A rung the data do not allow (k at least the rows of the full batch) or whose bounds overflow
    certifies nothing instead of raising: a refusal would tell whether the data allow it (with 8 rows and
    rungs up to 11 the training set answered while the dataset without one row raised)."""
    model = MLP.random([2, 2], rng=0)
    kw = dict(loss="cross_entropy", clip_value=0.3, learning_rate=1.0)
    short = stability_profile(model, X8, Y8, QUERIES, ks=range(8), **kw)
    assert short.levels.max() == 7  # some query is certified at every rung the 8 rows allow
    for X, y in ((X8, Y8), (X8[1:], Y8[1:])):
        profile = stability_profile(model, X, y, QUERIES, ks=range(12), **kw)
        assert not profile.certified[:, len(X) :].any() and profile.levels.max() <= len(X) - 1
        if len(X) == 8:
            assert np.array_equal(profile.levels, short.levels)
    # bounds that overflow at k >= 1 (no clipping, a domain, 300 epochs with momentum): certified at k = 0
    gen = np.random.default_rng(0)
    X = gen.normal(size=(8, 2))
    y = (X[:, 0] > 0).astype(int)
    profile = stability_profile(
        MLP.random([2, 3, 2], rng=0),
        X,
        y,
        X,
        ks=range(6),
        loss="cross_entropy",
        perturbation=Neighbours(0, domain=(-3.0, 3.0)),
        learning_rate=5.0,
        epochs=300,
        momentum=0.9,
    )
    assert np.array_equal(profile.k_max, np.zeros(8)) and profile.runs == 2


@pytest.mark.parametrize("n_classes", [2, 3])
def test_every_mechanism_builds_its_table_over_the_whole_epsilon_range(n_classes):
    """The ends of the supported ε range and the values where the α bracket of the Cauchy table used to fail
    (ε >= 29, ε around 1e-9 rounded above uniform): every table builds and passes its exact check; ε outside
    the range is refused naming epsilon and the range."""
    from certkit.mibp.privacy.mechanisms import EPSILON_RANGE

    low, high = EPSILON_RANGE
    settings = [("cauchy", 0.0), ("laplace", 1e-6), ("ptr", 1e-6), ("global", 0.0)]
    for mechanism, delta in settings:
        for epsilon in (low, 1.5e-6, 29.0, 40.0, high):
            if n_classes > 2 and mechanism in ("cauchy", "laplace") and epsilon in (1.5e-6, 40.0):
                continue  # the quadrature tables take a second each: the ends suffice
            table = level_table(mechanism, epsilon, delta, n_classes, 20)
            assert _check_table(table.w, epsilon, delta, n_classes)
    profile = stability_profile(MLP.random([2, 2], rng=0), X8, Y8, X8, ks=range(3), **RECIPE)
    for epsilon in (1e-9, low / 2, high * 1.01, 700.0):
        with pytest.raises(ValueError, match=r"epsilon must be in \[1e-06, 100\].*got"):
            private_predict(profile, epsilon=epsilon)
    with pytest.raises(ValueError, match=r"epsilon must be in \[1e-06, 100\]"):
        PrivatePredictor(1e-9, total_epsilon=1.0)


def test_an_int_seed_for_the_noise_warns_once_naming_rng():
    """Noise drawn from an int seed is reproducible by whoever knows it: `private_predict` and
    `PrivatePredictor` warn once per call (UserWarning naming rng, at the caller's line); None and a
    Generator do not; the seeded release is still the Generator's of that seed."""
    import warnings

    profile = stability_profile(MLP.random([2, 2], rng=0), X8, Y8, QUERIES, ks=range(3), **RECIPE)
    with pytest.warns(UserWarning, match=r"rng=7 seeds the noise of a privacy mechanism.*rng=None") as record:
        seeded = private_predict(profile, epsilon=0.5, rng=7)
    assert len(record) == 1 and record[0].filename == __file__
    assert np.array_equal(seeded, private_predict(profile, epsilon=0.5, rng=np.random.default_rng(7)))
    with pytest.warns(UserWarning, match="rng=3 seeds the noise") as record:
        PrivatePredictor(0.5, total_epsilon=1.0, rng=np.int64(3))
    assert len(record) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        private_predict(profile, epsilon=0.5)
        private_predict(profile, epsilon=0.5, rng=np.random.default_rng(1))
        PrivatePredictor(0.5, total_epsilon=1.0, rng=None)
