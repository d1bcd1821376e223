"""Bad input to the causal functions (issue 23): clear errors naming the argument, size caps before work."""

from __future__ import annotations

import numpy as np
import pytest

from certkit.causal import (
    LatentBIC,
    ScoreSettings,
    fit_mixture_regression,
    make_mixture_sem,
    topic_search,
)
from certkit.causal.score import fit_node


@pytest.fixture(scope="module")
def data():
    X, _, _ = make_mixture_sem(4, 200, rng=0)
    return X


# --- fit_mixture_regression ---


def test_zero_em_iterations_are_rejected(data):
    # max_iter=0 returned the starting partition as if it were a fit (converged=False, no warning)
    with pytest.raises(ValueError, match="max_iter must be >= 1, got 0"):
        fit_mixture_regression(data[:, 0], data[:, 1], 2, max_iter=0)
    fit = fit_mixture_regression(data[:, 0], data[:, 1], 2, max_iter=1, n_init=1)
    assert fit.n_iter == 1 and fit.loglik_trace.size == 2


def test_huge_n_init_is_capped_before_any_work(data):
    with pytest.raises(ValueError, match="n_init must be <= 1000"):
        fit_mixture_regression(data[:, 0], data[:, 1], 2, n_init=10**9)


# --- the local score ---


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("max_components", 0, "max_components must be >= 1, got 0"),
        ("n_init", 0, "n_init must be >= 1"),
        ("n_init", 10**9, "n_init must be <= 1000"),
        ("max_iter", 0, "max_iter must be >= 1"),
        ("tol", 0.0, "tol must be > 0"),
        ("min_variance", -1.0, "min_variance must be > 0"),
        ("seed", -1, "seed must be >= 0"),
    ],
)
def test_score_settings_name_the_bad_option(option, value, message):
    # max_components=0 used to end in a bare AssertionError at the first score
    with pytest.raises(ValueError, match=message):
        ScoreSettings(**{option: value})


def test_score_settings_reject_wrong_kinds():
    with pytest.raises(TypeError, match="max_components must be an integer"):
        ScoreSettings(max_components=2.0)
    with pytest.raises(TypeError, match="greedy_components must be a bool"):
        ScoreSettings(greedy_components="yes")


def test_fit_node_with_too_few_samples_names_the_data():
    X = np.random.default_rng(0).normal(size=(3, 5))
    with pytest.raises(ValueError, match="X has 3 samples, fewer than"):
        fit_node(X, 0, [1, 2, 3, 4], ScoreSettings())


# --- topic_search ---


def test_topic_search_rejects_a_negative_max_parents(data):
    # max_parents=-1 returned an empty graph
    with pytest.raises(ValueError, match="max_parents must be >= 0, got -1"):
        topic_search(LatentBIC(data, ScoreSettings(max_components=1)), 4, max_parents=-1)
    with pytest.raises(TypeError, match="max_parents must be an integer"):
        topic_search(LatentBIC(data, ScoreSettings(max_components=1)), 4, max_parents=1.5)


def test_topic_search_with_more_nodes_than_the_score_covers(data):
    # an IndexError from deep inside the score
    with pytest.raises(ValueError, match=r"n_nodes=6 .* the score covers 4 variables"):
        topic_search(LatentBIC(data, ScoreSettings(max_components=1)), 6)


def test_topic_search_with_a_custom_score_out_of_range(data):
    class Score:
        def __call__(self, node, parents):
            return float(np.var(data[:, node])) + len(list(parents))

        def prefetch(self, keys):
            pass

    with pytest.raises(ValueError, match=r"n_nodes=5 .* node 4"):
        topic_search(Score(), 5)
    assert topic_search(Score(), 4).adjacency.shape == (4, 4)


@pytest.mark.parametrize("score", [object(), len, "bic"])
def test_topic_search_rejects_a_score_that_is_not_a_local_score(score):
    with pytest.raises(TypeError, match="score must be a LocalScore"):
        topic_search(score, 4)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"n_nodes": 0}, ValueError, "n_nodes must be >= 1"),
        ({"n_nodes": 2.0}, TypeError, "n_nodes must be an integer"),
        ({"refine_threshold": -1.0}, ValueError, "refine_threshold must be >= 0"),
        ({"refine_threshold": float("nan")}, ValueError, "refine_threshold must be finite"),
        ({"progress": 1}, TypeError, "progress must be a bool or a str"),
    ],
)
def test_topic_search_checks_its_options(data, kwargs, error, message):
    kwargs = {"n_nodes": 4, **kwargs}
    with pytest.raises(error, match=message):
        topic_search(LatentBIC(data, ScoreSettings(max_components=1)), kwargs.pop("n_nodes"), **kwargs)
