"""Statistical validity over simulated replications: unbiasedness, CI coverage, biases of the naive
estimators and of a wrong response model (the spec's oracles)."""

import numpy as np
import pytest
from _ope_models import ConstantOutcome
from scipy.stats import binom

from certkit.ope import LogNormalCostResponse, naive_dr, strategic_dr

N = 4000


@pytest.fixture(scope="module")
def replications(sim, pi0, pi):
    """1,000 independent logged data sets at n = 4,000: strategic DR (fitted response, default q̂), naive DR,
    and strategic DR with a wrong response model."""
    wrong = LogNormalCostResponse.from_params([sim.coef[0] + 1.0, *sim.coef[1:]], sim.scale)
    out = {"dr": [], "se": [], "naive": [], "wrong": []}
    for r in range(1000):
        data = sim.sample(pi0, N, rng=10_000 + r)
        resp = LogNormalCostResponse().fit(data, policy=pi0)
        res = strategic_dr(data, target_policy=pi, logging_policy=pi0, response=resp)
        out["dr"].append(res.value)
        out["se"].append(res.std_error)
        if r < 300:
            out["naive"].append(naive_dr(data, target_policy=pi, logging_policy=pi0).value)
            out["wrong"].append(
                strategic_dr(data, target_policy=pi, logging_policy=pi0, response=wrong).value
            )
    return {k: np.asarray(v) for k, v in out.items()}, sim.true_value(pi)


def _z(values, truth):
    return (np.mean(values) - truth) / (np.std(values, ddof=1) / np.sqrt(values.size))


@pytest.mark.slow
def test_strategic_dr_unbiased_with_correct_outcome_model(replications):
    reps, truth = replications
    assert abs(_z(reps["dr"], truth)) < 3


@pytest.mark.slow
def test_influence_function_ci_coverage_within_binomial_error(replications):
    reps, truth = replications
    half = 1.959963984540054 * reps["se"]
    covered = int(np.sum(np.abs(reps["dr"] - truth) <= half))
    r = reps["dr"].size
    # Two-sided binomial acceptance region of Binomial(r, 0.95) at level 0.001.
    lo, hi = binom.ppf(0.0005, r, 0.95), binom.ppf(0.9995, r, 0.95)
    assert lo <= covered <= hi, (covered, lo, hi)
    # The standard error matches the spread of the estimates.
    assert 0.85 < np.mean(reps["se"]) / np.std(reps["dr"], ddof=1) < 1.15


@pytest.mark.slow
def test_naive_dr_and_wrong_response_are_biased(replications):
    reps, truth = replications
    naive_bias = np.mean(reps["naive"]) - truth
    wrong_bias = np.mean(reps["wrong"]) - truth
    assert abs(naive_bias) >= 0.01 and abs(_z(reps["naive"], truth)) > 5
    assert abs(wrong_bias) >= 0.005 and abs(_z(reps["wrong"], truth)) > 5


@pytest.mark.slow
def test_strategic_dr_unbiased_with_a_wrong_constant_outcome_model(sim, pi0, pi):
    values = []
    for r in range(300):
        data = sim.sample(pi0, N, rng=50_000 + r)
        resp = LogNormalCostResponse().fit(data, policy=pi0)
        values.append(
            strategic_dr(
                data, target_policy=pi, logging_policy=pi0, response=resp, outcome_model=ConstantOutcome(0.5)
            ).value
        )
    assert abs(_z(np.asarray(values), sim.true_value(pi))) < 3
