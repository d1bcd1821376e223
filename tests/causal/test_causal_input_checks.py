"""Bad input to the causal functions (issue 23): clear errors naming the argument, size caps before work."""

from __future__ import annotations

import numpy as np
import pytest

from certkit.causal import (
    LatentBIC,
    ScoreSettings,
    edge_stability,
    fit_mixture_regression,
    make_mixture_sem,
    topic_search,
)
from certkit.causal.generate import _group_weights
from certkit.causal.score import fit_node
from certkit.cli import main


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


# --- make_mixture_sem ---


def test_group_weights_keep_the_separation_when_retries_run_out():
    # group 0 near 0.5 leaves group 2 (same sign) only a sliver of [0.25, 0.75] at least 0.25 away: the
    # 100 redraws used to run out and keep a weight closer than 0.25 to group 0's
    gen = np.random.default_rng(0)
    base = 0.5 + np.linspace(-1e-3, 1e-3, 201)
    base[100] = 0.5  # only the end points 0.25 and 0.75 are far enough
    first = _group_weights(gen, [base])
    second = _group_weights(gen, [base, first])
    assert np.all(np.sign(second) == np.sign(base)) and np.all(np.abs(second) >= 0.25)
    assert np.all(np.abs(second) <= 0.75)
    assert np.all(np.abs(second - base) >= 0.25) and np.all(np.abs(second - first) >= 0.25)
    assert np.abs(second[100] - 0.5) == 0.25


def test_group_weights_sample_the_whole_far_set():
    # the fallback draws from all of the far set, not one end: group 0 at 0.499 leaves [0.749, 0.75] and 0.25
    gen = np.random.default_rng(1)
    base = np.full(400, 0.499)
    second = _group_weights(gen, [base, -base])
    assert np.all(np.abs(second - base) >= 0.25)
    assert np.all((second >= 0.749) & (second <= 0.75)) and np.unique(second).size > 300


@pytest.mark.parametrize("n_groups", [5, 8, 10**6])
def test_more_groups_than_the_separation_allows_are_refused(n_groups):
    # five groups cannot all be 0.25 apart in +-[0.25, 0.75] with alternating signs; 10**6 groups was
    # quadratic
    with pytest.raises(ValueError, match="n_groups must be <= 4"):
        make_mixture_sem(6, 100, 0.4, n_groups)


def test_four_groups_keep_their_documented_mechanisms():
    X, _, Z = make_mixture_sem(6, 400, 0.6, 4, mixing_size=3, rng=0)
    assert set(np.unique(Z)) == {0, 1, 2, 3} and np.all(np.isfinite(X))


@pytest.mark.parametrize(
    ("args", "name"),
    [((10**5, 10), "n_nodes"), ((5, 10**10), "n_samples"), ((10**4, 2000), "n_nodes")],
)
def test_make_mixture_sem_caps_memory_and_work(args, name):
    with pytest.raises(ValueError, match=rf"^{name}=\d+ is too large"):
        make_mixture_sem(*args)


@pytest.mark.parametrize(
    ("n_groups", "x0"),
    [
        (2, [-0.1821048556268739, 1.707410347028474, 0.9691663188046058, 1.4437090934622294,
             0.9338670530786015]),
        (3, [-1.623038217030316, -0.8339979525520621, -1.3746767523430867, -1.0789298822926594,
             -1.055888838753823]),
    ],
)
def test_make_mixture_sem_draws_are_unchanged(n_groups, x0):
    # the vectorised edge draws and separation checks keep the random stream: values from before the change
    X, A, _ = make_mixture_sem(5, 6, 0.5, n_groups, rng=3)
    assert A.tolist() == [[0, 0, 0, 0, 0], [1, 0, 0, 1, 0], [0, 1, 0, 1, 0], [0, 0, 0, 0, 0], [1, 0, 0, 1, 0]]
    np.testing.assert_allclose(X[0], x0, rtol=1e-12)


# --- edge_stability ---


def test_edge_stability_caps_n_bootstrap_before_fitting(data):
    with pytest.raises(ValueError, match="n_bootstrap must be <= 10000"):
        edge_stability(data, n_bootstrap=10**9)


# --- certkit causal ---


def _csv(tmp_path):
    X, _, _ = make_mixture_sem(3, 60, rng=0)
    path = tmp_path / "data.csv"
    path.write_text("a,b,c\n" + "\n".join(",".join(f"{v:.8g}" for v in row) for row in X) + "\n")
    return path


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--jobs", "0", "--jobs must be >= 1, got 0"),
        ("--jobs", "-1", "--jobs must be >= 1, got -1"),
        ("--stability", "-2", "--stability must be >= 0, got -2"),
        ("--stability", str(10**9), "--stability must be <= 10000, got 1000000000"),
        # the estimator's errors name the command's options, not the Python arguments
        ("--search-samples", "5", "--search-samples must be >= 24, got 5"),
        ("--max-components", "0", "--max-components must be >= 1, got 0"),
    ],
)
def test_cli_rejects_bad_counts(tmp_path, capsys, option, value, message):
    # --jobs 0 / -1 ran serially without complaint
    assert main(["causal", str(_csv(tmp_path)), option, value]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0] == f"certkit causal: error: {message}"


def test_cli_names_a_bad_n_knots_in_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["causal", str(_csv(tmp_path)), "--n-knots", "abc"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "argument --n-knots: expected 'bic' or an integer, got 'abc'" in err and "_n_knots" not in err


@pytest.mark.parametrize("suffix", [".npy", ".npz"])
def test_cli_says_which_format_it_reads(tmp_path, capsys, suffix):
    # a .npy file printed "'utf-8' codec can't decode byte 0x93 in position 0"
    path = tmp_path / f"data{suffix}"
    X = np.random.default_rng(0).normal(size=(20, 3))
    np.save(path, X) if suffix == ".npy" else np.savez(path, X=X)
    assert main(["causal", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith(f"certkit causal: error: {path} is not a UTF-8 text CSV file (a")
    assert "header row of variable names" in err[0] and "numpy.savetxt" in err[0] and "codec" not in err[0]
