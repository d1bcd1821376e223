"""The ``certkit causal`` subcommand and its demo section."""

from __future__ import annotations

import re

import numpy as np
import pytest

from certkit.causal import _cli, make_mixture_sem
from certkit.cli import main


def _write_csv(path, X, names):
    rows = "\n".join(",".join(f"{v:.10g}" for v in row) for row in X)
    path.write_text(",".join(names) + "\n" + rows + "\n")


def test_csv_run_prints_the_summary(tmp_path, capsys):
    X, _, _ = make_mixture_sem(4, 200, rng=0)
    path = tmp_path / "data.csv"
    _write_csv(path, X, ["a", "b", "c", "d"])
    assert main(["causal", str(path), "--max-components", "2", "--stability", "2"]) == 0
    out = capsys.readouterr().out
    assert "Causal mixture model" in out and "200 samples x 4 variables" in out
    assert "Edge stability over 2 bootstrap fits" in out
    assert re.search(r"^\s*a\s", out, re.MULTILINE)


def test_mechanism_spline_orients_an_additive_noise_pair(tmp_path, capsys):
    gen = np.random.default_rng(0)
    x = gen.standard_normal(600)
    y = np.tanh(2 * x) + x**2 + 0.3 * gen.standard_normal(600)
    path = tmp_path / "pair.csv"
    _write_csv(path, np.column_stack([y, x]), ["y", "x"])
    assert main(["causal", str(path), "--max-components", "1", "--mechanism", "spline"]) == 0
    out = capsys.readouterr().out
    assert "identified given the fitted skeleton and mixing sets, each with its source: " \
           "x -> y (spline score)" in out
    assert main(["causal", str(path), "--max-components", "1"]) == 0  # the default, auto: the spline fit
    default = capsys.readouterr().out
    assert "mechanisms: spline (total BIC linear" in default and "x -> y (spline score)" in default


def test_n_knots_is_an_option_as_the_too_few_rows_error_says(tmp_path, capsys):
    path = tmp_path / "small.csv"
    _write_csv(path, np.random.default_rng(0).standard_normal((40, 4)), ["a", "b", "c", "d"])
    args = ["causal", str(path), "--max-components", "2", "--mechanism", "spline"]
    assert main(args) == 2  # 2 * (1 + 3 * 6) + 3 = 41 parameters for 40 rows
    err = capsys.readouterr().err
    assert "--n-knots or --mechanism linear" in err  # the command's options, not the Python arguments
    assert main([*args, "--n-knots", "0"]) == 0  # 2 * (1 + 3 * 3) + 3 = 23
    assert main([*args, "--n-knots", "51"]) == 2
    assert "--n-knots" in capsys.readouterr().err.splitlines()[-1]
    with pytest.raises(SystemExit):
        main([*args, "--n-knots", "many"])
    assert "--n-knots" in capsys.readouterr().err


def test_unknown_mechanism_is_one_error_line(tmp_path, capsys):
    path = tmp_path / "data.csv"
    _write_csv(path, np.arange(20.0).reshape(10, 2) ** 1.5, ["a", "b"])
    with pytest.raises(SystemExit) as exit_info:
        main(["causal", str(path), "--mechanism", "cubic"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "--mechanism" in err[-1] and "invalid choice: 'cubic'" in err[-1]


@pytest.mark.parametrize(
    ("content", "args", "message"),
    [
        ("a,b\n1,2\n3,x\n", [], "line 3, column 'b': 'x' is not a number"),
        ("a,b\n1,2\n3\n", [], "line 3 has 1 fields"),
        ("a,b\n1,2\n1,3\n1,4\n", ["--max-components", "1"], "X has constant column(s) 'a'; drop them"),
        ("a,b\n1,2\n\n3,5\n", [], "line 3 has 0 fields"),  # a blank line before data is still one
        ("a,b\n1,2\n-1,3\n2,4\n", ["--log"], "--log needs strictly positive values"),
        ("a,b\n1,2\n2,3\n3,5\n", ["--max-components", "0"], "--max-components must be >= 1"),
    ],
)
def test_bad_input_is_one_error_line_with_status_2(tmp_path, capsys, content, args, message):
    path = tmp_path / "bad.csv"
    path.write_text(content)
    assert main(["causal", str(path), *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("certkit causal: error: ") and message in err[0]


def test_user_data_named_like_an_option_are_not_rewritten(tmp_path, capsys):
    # a column named search_samples was reported as "constant column(s) --search-samples", a file
    # ./max_components.csv as "./--max-components.csv"
    path = tmp_path / "max_components.csv"
    path.write_text("search_samples,b\n1,2\n1,3\n1,4\n")
    assert main(["causal", str(path), "--max-components", "1"]) == 2
    assert "X has constant column(s) 'search_samples'; drop them" in capsys.readouterr().err
    path.write_text("a,b\n1,x\n")
    assert main(["causal", str(path)]) == 2
    assert (
        capsys.readouterr().err == f"certkit causal: error: {path} line 2, column 'b': 'x' is not a number\n"
    )


def test_trailing_blank_lines_are_ignored(tmp_path, capsys):
    # "line 62 has 0 fields"
    path = tmp_path / "data.csv"
    _write_csv(path, np.arange(20.0).reshape(10, 2) ** 1.5, ["a", "b"])
    path.write_text(path.read_text() + "\n\n  \n")
    assert main(["causal", str(path), "--max-components", "1", "--mechanism", "linear"]) == 0
    assert "10 samples x 2 variables" in capsys.readouterr().out


def test_sample_fraction_is_checked_before_the_fit_and_passed_on(tmp_path, capsys, monkeypatch):
    from certkit import causal

    path = tmp_path / "small.csv"
    _write_csv(path, np.random.default_rng(0).standard_normal((40, 4)), ["a", "b", "c", "d"])
    args = ["causal", str(path), "--max-components", "2", "--mechanism", "spline", "--n-knots", "0"]
    fit = causal.CausalMixtureModel.fit

    def no_fit(*args, **kwargs):
        raise AssertionError("fitted before --sample-fraction was checked")

    monkeypatch.setattr(causal.CausalMixtureModel, "fit", no_fit)
    # 2 * (1 + 3 * 3) + 3 = 23 parameters: 0.5 * 40 = 20 rows are too few
    assert main([*args, "--stability", "2", "--sample-fraction", "0.5"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(
        "certkit causal: error: --sample-fraction 0.5 draws 20 of the 40"
    )
    assert "use --sample-fraction >= 0.575" in err[0]
    assert main([*args, "--stability", "2", "--sample-fraction", "1.5"]) == 2
    assert "--sample-fraction must be <= 1 without replacement" in capsys.readouterr().err
    assert main([*args, "--sample-fraction", "0.9"]) == 2  # no refits to apply it to
    assert capsys.readouterr().err == (
        "certkit causal: error: --sample-fraction applies to the refits of --stability B; drop it, or add "
        "--stability\n"
    )
    monkeypatch.setattr(causal.CausalMixtureModel, "fit", fit)
    seen = {}
    stability = causal.edge_stability

    def spy(*args, **kwargs):
        seen.update(kwargs)
        return stability(*args, **kwargs)

    monkeypatch.setattr(causal, "edge_stability", spy)
    assert main([*args, "--stability", "2", "--sample-fraction", "0.9"]) == 0
    assert seen["sample_fraction"] == 0.9
    assert "Edge stability over 2 bootstrap fits" in capsys.readouterr().out


def test_n_knots_with_a_linear_mechanism_is_refused(tmp_path, capsys, monkeypatch):
    from certkit import causal

    path = tmp_path / "data.csv"
    _write_csv(path, np.arange(20.0).reshape(10, 2) ** 1.5, ["a", "b"])
    for knots in ("3", "bic"):  # accepted silently though the help says "not with --mechanism linear"
        assert main(["causal", str(path), "--mechanism", "linear", "--n-knots", knots]) == 2
        err = capsys.readouterr().err.splitlines()
        assert len(err) == 1 and err[0].startswith("certkit causal: error: --n-knots does not apply to ")
        assert "--mechanism linear" in err[0]
    seen = []
    fit = causal.CausalMixtureModel.fit

    def spy(self, *args, **kwargs):
        seen.append(self.n_knots)
        return fit(self, *args, **kwargs)

    monkeypatch.setattr(causal.CausalMixtureModel, "fit", spy)
    assert main(["causal", str(path), "--max-components", "1", "--mechanism", "linear"]) == 0
    assert seen == ["bic"]  # not given: the estimator's default


def test_missing_file_is_an_error_line(tmp_path, capsys):
    assert main(["causal", str(tmp_path / "nope.csv")]) == 2
    assert capsys.readouterr().err.startswith("certkit causal: error: ")


def test_demo_is_deterministic():
    def strip(text):
        return re.sub(r"fitted in [0-9.]+ s", "", text)

    a = _cli.demo(np.random.default_rng(0))
    assert strip(a) == strip(_cli.demo(np.random.default_rng(0)))
    assert "mixing set found: {x2, x4, x5} (exactly the true set); its groups match Z with ARI 1.00" in a
    assert "graph: adjacencies F1 0.86, with directions 0.71 (8 edges found, 6 true)" in a
    assert "how to read it: " in a


def test_plot_causal_graph_draws_every_edge():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from certkit.plot import plot_causal_graph

    A = np.array([[0, 1, 0], [0, 0, 1], [0, 0, 0]])
    truth = np.array([[0, 1, 1], [0, 0, 0], [0, 0, 0]])
    fig, ax = plt.subplots()
    plot_causal_graph(A, names=["a", "b", "c"], edge_values=np.full((3, 3), 0.5), true_adjacency=truth, ax=ax)
    arrows = [t for t in ax.texts if t.get_text() == ""]
    assert len(arrows) == 3  # two estimated edges + one missed true edge
    assert sorted(t.get_text() for t in ax.texts if t.get_text()) == ["a", "b", "c"]
    with pytest.raises(ValueError, match="names must have 3 entries"):
        plot_causal_graph(A, names=["a"])
    plt.close(fig)
