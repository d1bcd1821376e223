"""Issue 36: fuzz round 4 outside certkit.mibp / certkit.causal, and a further pass over certkit.conformal,
certkit.ope, certkit.performative, certkit.circuits and certkit.stats with every bad value of
`tests/test_fuzz.py` (NaN/inf, empty, wrong shapes, lists, strings, huge sizes, ...) on each argument.

Round 4 found `FeatureBox(1e308)` and the `NotFittedError` messages clear: they stay so. The pass found
silent coercions, errors that named no argument or were not ValueError/TypeError, and sizes that ran for
hours; each is pinned here (the large-order W_p risks are in
tests/performative/test_performative_large_order.py).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

from certkit import circuits, conformal, ope, performative
from certkit.mibp import MLP, FeatureBox, certified_training


# ----------------------------------------------------------------------------------- kept from round 4
def test_feature_box_near_the_float_range_gives_a_clear_error():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(20, 2)), np.where(rng.normal(size=20) > 0, 1.0, -1.0)
    box = FeatureBox(1e308)  # finite, so accepted: what it does to the bounds is what training reports
    assert box.epsilon == 1e308
    with pytest.raises(
        FloatingPointError,
        match=r"^the parameter bounds overflowed \(left the float64 range\) at step 1 of epoch 1 of 1; "
        r"the 0 finite epoch\(s\) are in this exception's \.result\. What drives the growth in this run: "
        r".*inputs moving by up to inf.*Certify fewer epochs, a smaller learning_rate or a smaller epsilon",
    ) as caught:
        certified_training(
            MLP.random([2, 4, 1], rng=0),
            X,
            y,
            perturbation=box,
            loss="hinge",
            epochs=1,
            learning_rate=0.1,
            backend="interval",
        )
    assert caught.value.epoch == 1 and caught.value.result.epochs == 0
    for bad, kind in ((math.inf, ValueError), (-1.0, ValueError), (math.nan, ValueError), ("0.1", TypeError)):
        with pytest.raises(kind, match=r"^epsilon must"):
            FeatureBox(bad)


def _linear(X):
    p = 1.0 / (1.0 + np.exp(-np.asarray(X)[:, 0]))
    return np.column_stack([1.0 - p, p])


UNFITTED = [
    (
        conformal.RCP1Classifier(_linear, sigma=0.1, radius=0.1),
        ("predict_set", "predict", "conformity_scores"),
    ),
    (conformal.SplitConformalClassifier(_linear), ("predict_set", "predict", "conformity_scores")),
    (conformal.BinCPClassifier(_linear, sigma=0.1, radius=0.1), ("predict_set", "predict")),
    (conformal.RSCPPlusClassifier(_linear, sigma=0.1, radius=0.1), ("predict_set", "predict")),
    (conformal.RCP1Regressor(lambda X: X[:, 0], sigma=0.1, radius=0.1), ("predict_interval",)),
    (conformal.SplitConformalRegressor(lambda X: X[:, 0]), ("predict_interval",)),
    (
        conformal.RCP1RiskControl(
            lambda X: X[:, 0],
            loss=lambda p, t, lam: (p > lam) * 1.0,
            lambdas=np.linspace(0, 1, 3),
            sigma=0.1,
            radius=0.1,
        ),
        ("predict",),
    ),
]


@pytest.mark.parametrize(("estimator", "methods"), UNFITTED, ids=lambda v: type(v).__name__)
def test_not_fitted_errors_name_the_estimator_and_the_call_to_make(estimator, methods):
    X = np.zeros((3, 2))
    for method in methods:
        with pytest.raises(
            NotFittedError,
            match=rf"^This {type(estimator).__name__} instance is not fitted "
            r"yet; call calibrate\(\.\.\.\) first\.$",
        ):
            getattr(estimator, method)(X)


@pytest.mark.parametrize(
    "response", [ope.LogNormalCostResponse(), ope.ObservedCostResponse()], ids=lambda r: type(r).__name__
)
def test_not_fitted_errors_of_the_response_models(response):
    policy = ope.LinearThresholdPolicy([1.0, 1.0], 1.0)
    message = rf"^This {type(response).__name__} instance is not fitted yet; call fit\(\.\.\.\) first\.$"
    for call in (
        lambda: response.move_probability(policy, np.zeros((3, 2))),
        response.summary,
        lambda: response.log_cdf(np.zeros(3), np.zeros((3, 2))),
    ):
        with pytest.raises(NotFittedError, match=message):
            call()


# ------------------------------------------------------------------------------------ the further pass
def test_max_affected_share_refuses_a_target_that_is_not_a_real_number():
    """target was passed through float(): "80" was taken silently, a list or None failed in float()."""
    paper = {
        "n": 445,
        "diameter": 5.29,
        "loss_lipschitz": math.sqrt(28),
        "entropy_integral": 7.3855,
        "loss_range": 1.0,
        "model_lipschitz": 0.25,
    }
    assert performative.max_affected_share(80, kind="thm3.13", **paper) == pytest.approx(0.5528, abs=1e-4)
    for bad in ("80", [80.0], None, True, 80 + 0j):
        with pytest.raises(TypeError, match=r"^target must be a real number"):
            performative.max_affected_share(bad, kind="thm3.13", **paper)
    with pytest.raises(ValueError, match=r"^target must be finite"):
        performative.max_affected_share(math.nan, kind="thm3.13", **paper)


def test_retraining_bound_refuses_an_empirical_risk_that_is_not_a_real_number():
    """A string or None failed in numpy's isfinite, a list with 'truth value of an array is ambiguous'."""
    kw = {
        "n": 100,
        "share": 0.1,
        "diameter": 1.0,
        "loss_lipschitz": 1.0,
        "contraction": 1.5,
        "n_rounds": 3,
        "map_lipschitz": 1.0,
        "dimension": 2.0,
    }
    base = performative.retraining_bound(**kw)
    assert performative.retraining_bound(empirical_risk=0.25, **kw).total == pytest.approx(base.total + 0.25)
    for bad in ("0.5", [0.1, 0.1], np.array([0.1, 0.1]), None, 0.1 + 0j):
        with pytest.raises(TypeError, match=r"^empirical_risk must be a real number"):
            performative.retraining_bound(empirical_risk=bad, **kw)


def test_move_threshold_checks_its_own_arguments():
    """x_pre as a list failed with AttributeError ('list' has no attribute 'shape'), a bad benefit in
    numpy."""
    policy = ope.LinearThresholdPolicy([1.0, 1.0], 1.0)
    x = np.random.default_rng(0).normal(size=(5, 2))
    c = ope.move_threshold(policy, x.tolist(), 1.0)[1]  # a list is array-like
    np.testing.assert_array_equal(c, ope.move_threshold(policy, x, 1.0)[1])
    for bad, kind, match in (
        (None, TypeError, "x_pre must be array-like"),
        (x[0], ValueError, "x_pre must be 2-D"),
        (np.where(x > 1, np.nan, x), ValueError, "x_pre must be finite"),
    ):
        with pytest.raises(kind, match=rf"^{match}"):
            ope.move_threshold(policy, bad, 1.0)
    for bad, kind in (
        ("0.5", TypeError),
        ([1.0, 1.0], TypeError),
        (None, TypeError),
        (0.0, ValueError),
        (math.inf, ValueError),
    ):
        with pytest.raises(kind, match=r"^benefit must"):
            ope.move_threshold(policy, x, bad)


def test_raps_accepts_any_k_reg_beyond_the_number_of_classes():
    """k_reg = 2**63 overflowed numpy's int64 ('Python int too large to convert to C long')."""
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(60, 2)), rng.integers(0, 2, size=60)

    def sets(k_reg):
        score = conformal.RAPSScore(penalty=0.5, k_reg=k_reg, randomized=False)
        return conformal.SplitConformalClassifier(_linear, conformity_score=score).fit(X, y).predict_set(X)

    np.testing.assert_array_equal(sets(2**63), sets(2))  # ranks are at most K = 2: no penalty either way
    np.testing.assert_array_equal(sets(10**30), sets(2))


def test_evaluate_sets_names_y_and_x_attacked():
    """An empty y divided by zero, a 0-d y raised IndexError, and X_attacked's errors named X."""
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(40, 2)), rng.integers(0, 2, size=40)
    est = conformal.SplitConformalClassifier(_linear).fit(X, y)
    res = conformal.evaluate_sets(est, X, y, X_attacked=X + 0.1, method="cp")
    assert 0 <= res.coverage <= 1 and 0 <= res.attacked_coverage <= 1 and res.method == "cp"
    for bad in (y[:0], np.asarray(1), y[:, None]):
        with pytest.raises(ValueError, match=r"^y must"):
            conformal.evaluate_sets(est, X, bad)
    with pytest.raises(ValueError, match=r"^inconsistent numbers of samples: X has 39, y has 40$"):
        conformal.evaluate_sets(est, X[:-1], y)
    for bad, kind in (
        (X[:-1] + 0.1, ValueError),
        (X[:, :1], ValueError),
        (np.where(X > 1, np.inf, X), ValueError),
        ("abc", TypeError),
        (X.astype(complex), TypeError),
    ):
        with pytest.raises(kind, match=r"^X_attacked"):
            conformal.evaluate_sets(est, X, y, X_attacked=bad)
    with pytest.raises(TypeError, match=r"^method must be a str"):
        conformal.evaluate_sets(est, X, y, method=5)


def test_circuit_stability_refuses_huge_n_pairs_up_front_and_names_radii():
    """n_pairs = 10**12 drew the pairs one by one for hours; radii=None failed with 'NoneType' object is not
    iterable."""
    rule = circuits.ScoreRule(np.random.default_rng(0).normal(size=(12, 5)), top_k=2)
    kw = {"set_size": 6, "certify_options": {"subsample_size": 3, "n_subsamples": 30}, "rng": 0}
    assert circuits.circuit_stability(rule, n_pairs=3, **kw).jaccard.shape == (3, 3)
    for huge in (10**12, 2**63, 10**30):
        with pytest.raises(ValueError, match=rf"^n_pairs={huge} is too large: {huge} pairs of concept sets"):
            circuits.circuit_stability(rule, n_pairs=huge, **kw)
    for bad in (None, "ab", 5):
        with pytest.raises(TypeError, match=r"^radii must be a sequence of int radii"):
            circuits.circuit_stability(rule, n_pairs=3, radii=bad, **kw)


def test_true_value_refuses_hours_of_monte_carlo_up_front():
    sim, policy = ope.StrategicSimulator(), ope.LinearThresholdPolicy([1.0, 1.0], 1.0)
    assert 0.0 <= sim.true_value(policy, n_mc=1000) <= 1.0
    for huge in (10**12, 2**63, 10**30):
        with pytest.raises(
            ValueError, match=rf"^n_mc={huge} is too large: more than 1e\+10 Monte Carlo agents"
        ):
            sim.true_value(policy, n_mc=huge)


def test_required_calibration_size_at_a_tiny_miscoverage_is_found_at_once():
    """RCP1 at radius / sigma = 6 adjusts the miscoverage to 6e-14: the smallest calibration size was walked
    to one size at a time, 1e11 steps from the guess (certkit conformal --radius 1.5 ran for hours)."""
    from certkit.conformal._checks import adjusted_alpha, required_calibration_size
    from certkit.stats import conformal_rank

    for alpha in (0.1, 0.05, 1e-3, adjusted_alpha(0.9, 1.5, 0.25, "gaussian"), 1e-15):
        n = required_calibration_size(alpha)
        assert conformal_rank(n, 1.0 - alpha) <= n  # a non-trivial set from n points on ...
        assert n == 1 or conformal_rank(n - 1, 1.0 - alpha) > n - 1  # ... and not from one fewer
    assert required_calibration_size(0.1) == 9 and required_calibration_size(0.05) == 19
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(50, 2)), rng.integers(0, 2, size=50)
    need = required_calibration_size(adjusted_alpha(0.9, 1.5, 0.25, "gaussian"))
    with pytest.warns(UserWarning, match=rf"need n >= {need} calibration points"):
        conformal.RCP1Classifier(_linear, sigma=0.25, radius=1.5, rng=0).fit(X, y)


def _cli_error(capsys, *argv):
    from certkit import cli

    assert cli.main(list(argv)) == 2
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1, captured.err
    return captured.err.strip()


def test_conformal_cli_bad_values_are_one_line_errors(capsys):
    """--sigma 1e308 crashed with an OverflowError traceback, --seed -1 named no option."""
    err = _cli_error(capsys, "conformal", "--sigma", "1e308", "--attack-steps", "0")
    assert err == (
        "certkit conformal: error: --sigma=1e+308 is too large: its square overflows float64; use a "
        "sigma on the scale of the pixels (in [0, 1])"
    )
    assert (
        _cli_error(capsys, "conformal", "--seed", "-1")
        == "certkit conformal: error: --seed must be >= 0, got -1"
    )


def test_smoothed_pgd_refuses_hours_of_passes_up_front(capsys):
    """steps = 10**13 (certkit conformal --attack-steps 10000000000000) ran for hours."""
    torch = pytest.importorskip("torch")
    from certkit.conformal.attacks import smoothed_pgd

    net = torch.nn.Linear(2, 2).double()
    X, y = np.zeros((10, 2)), np.zeros(10, dtype=int)
    with pytest.raises(
        ValueError,
        match=r"^steps=1000000000000 with n_noise=16 is too large: 10 inputs x steps x "
        r"n_noise = 1.6e\+14 noisy forward and backward passes",
    ):
        smoothed_pgd(net, X, y, 0.1, 0.2, steps=10**12)
    err = _cli_error(capsys, "conformal", "--attack-steps", "10000000000000", "--method", "rcp1")
    assert err.startswith(
        "certkit conformal: error: --attack-steps=10000000000000 is too large: smoothed PGD"
    )


def test_ope_cli_names_which_policys_option_is_wrong(capsys):
    """--logging-tau nan and --target-tau nan both said 'tau must be finite', --seed -1 named rng."""
    assert _cli_error(capsys, "ope", "--n", "300", "--logging-tau", "nan") == (
        "certkit ope: error: --logging-tau must be finite (no NaN or inf)"
    )
    assert _cli_error(capsys, "ope", "--n", "300", "--target-temperature", "0") == (
        "certkit ope: error: --target-temperature must be > 0, got 0.0"
    )
    assert (
        _cli_error(capsys, "ope", "--n", "300", "--seed", "-1")
        == "certkit ope: error: --seed must be >= 0, got -1"
    )
    # simulated data are not a --data file, whatever the error's wording
    err = _cli_error(capsys, "ope", "--n", "300", "--logging-tau", "-1")
    assert err.startswith("certkit ope: error: simulated data contradict the response model")


def test_explanations_far_beyond_1e154_keep_their_distance():
    """The distance to an explanation 1e308 away was squared (inf, with a RuntimeWarning on the command line:
    certkit ope --logging-tau 1e308 printed two lines); a threshold beyond the float range as well."""
    from certkit import cli

    x = np.array([[0.0, 0.0], [1.0, 1.0], [3.0, 4.0]])
    policy = ope.LinearThresholdPolicy([3.0, 4.0], 5e200)  # explanation at distance 1e200 - (3x + 4y) / 5
    _, c, accepted = ope.move_threshold(policy, x, 2.0)
    dist = 1e200 - np.array([0.0, 7.0 / 5.0, 5.0])
    np.testing.assert_allclose(c, np.log(4.0) - 2.0 * np.log(dist), rtol=1e-14)
    assert not accepted.any()
    far = ope.LinearThresholdPolicy([1.0, 1.0], 1e308, temperature=0.25)  # scores / temperature overflow
    np.testing.assert_array_equal(far.action_proba(x), 0.0)
    assert cli.main(["ope", "--n", "300", "--target-tau", "1e308"]) == 0  # RuntimeWarnings are errors here


def test_performative_cli_takes_columns_spanning_the_float_range(tmp_path, capsys):
    """Values near ±1e308 overflowed the scaling to [0, 1] (NaN), and scikit-learn's five-line error about
    missing values came out."""
    from certkit import cli

    rows = ["1e308,1,1", "-1e308,3,0", "5,5,1", "0,1,0", "2e307,2,1", "-3e307,4,0"]
    path = tmp_path / "wide.csv"
    path.write_text("a,b,y\n" + "\n".join(rows) + "\n")
    assert cli.main(["performative", "--data", str(path), "--shares", "0.1"]) == 0
    out = capsys.readouterr().out
    assert "nan" not in out and "thm3.13 bound" in out


def test_propensities_above_one_are_not_called_zero():
    """pscore > 1 was refused as 'a logged action with propensity 0 cannot be reweighted'."""
    data = ope.StrategicSimulator().sample(ope.LinearThresholdPolicy([1.0, 1.0], 1.0), 50, rng=0)
    fields = {k: getattr(data, k) for k in ("x_pre", "x_post", "moved", "action", "reward")}
    with pytest.raises(
        ValueError,
        match=r"^data.pscore must lie in \(0, 1\]: propensities are probabilities of "
        r"the logged action \(min .*, max 2\.\d+\)$",
    ):
        ope.StrategicData(pscore=data.pscore * 3, **fields)
    with pytest.raises(
        ValueError,
        match=r"^data.pscore must lie in \(0, 1\]: a logged action with propensity 0 "
        r"cannot be reweighted \(min 0, max",
    ):
        ope.StrategicData(pscore=np.where(data.action == 1, 0.0, data.pscore), **fields)
