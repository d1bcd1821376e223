"""The ``certkit mibp`` subcommand, its demo section, the data helper and the plot helper."""

import argparse
import itertools

import numpy as np
import pytest

from certkit.mibp import _cli, _demo
from certkit.plot import plot_certified_accuracy


@pytest.mark.parametrize("carry", ["box", "affine", "shared"])
def test_run_prints_summary(capsys, carry):
    parser = argparse.ArgumentParser()
    _cli.add_arguments(parser)
    args = parser.parse_args(
        ["--dataset", "iris2", "--epochs", "2", "--epsilon", "0.001", "--hidden", "4", "--carry", carry]
    )
    assert _cli.run(args) == 0
    out = capsys.readouterr().out
    assert "certified accuracy" in out and "max width" in out
    assert f"carry={carry}" in out and f"carry {carry}" in out
    acc = float(out.split("certified accuracy")[1].split()[0])
    assert 0.0 <= acc <= 1.0


def test_run_licence_limit_is_a_clear_message(capsys, monkeypatch):
    from certkit.mibp import GurobiLicenseError

    def too_big(*args, **kwargs):
        raise GurobiLicenseError("the Gurobi licence is size-limited", fits={"hidden": 3, "backend": "scip"})

    monkeypatch.setattr("certkit.mibp.certified_training", too_big)
    parser = argparse.ArgumentParser()
    _cli.add_arguments(parser)
    args = parser.parse_args(["--dataset", "iris2", "--backend", "gurobi", "--formulation", "hybrid"])
    assert _cli.run(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("certkit mibp: error: ") and "size-limited" in err
    assert "--hidden 3" in err and "--backend scip" in err and 'backend="scip"' not in err


def test_run_licence_limit_names_cli_flags_that_fit(capsys):
    from certkit.mibp.programs.solvers import gurobi_size_limited

    pytest.importorskip("gurobipy")
    if not gurobi_size_limited():
        pytest.skip("the installed Gurobi licence is not size-limited")
    parser = argparse.ArgumentParser()
    _cli.add_arguments(parser)
    argv = [
        "--dataset",
        "iris2",
        "--backend",
        "gurobi",
        "--formulation",
        "joint",
        "--hidden",
        "1",
        "--epochs",
        "2",
    ]
    assert _cli.run(parser.parse_args(argv)) == 2
    err = capsys.readouterr().err
    assert "--formulation decomposed" in err and "--backend scip" in err
    assert "--hidden" not in err and 'formulation="' not in err  # no hidden count fits a joint program


def _certified(text, label):
    row = next(line for line in text.splitlines() if line.strip().startswith(label))
    return float(row[len(row) - len(row.lstrip()) + len(label) :].split()[-3])


def test_demo_section_shows_the_exact_certificate_beating_the_interval_one():
    backend = _demo._exact_backend()
    if backend is None:
        pytest.skip("needs gurobipy or pyscipopt")
    text = _cli.demo(np.random.default_rng(0))
    assert _cli.NAME == "mibp" and _cli.HELP
    exact, interval = _certified(text, "exact per-sample"), _certified(text, "interval arithmetic")
    assert exact >= interval + 0.05  # visibly better: at least two more of the 36 test points
    assert "What to see" in text and "nan" not in text


def test_demo_section_without_an_exact_solver_says_what_an_extra_adds(monkeypatch):
    monkeypatch.setattr(_demo, "_exact_backend", lambda: None)
    text = _cli.demo(np.random.default_rng(0))
    assert 0 <= _certified(text, "interval arithmetic") <= 1
    assert "exact per-sample" not in text
    assert any(
        line.startswith('pip install "certkit[gurobi]" or "certkit[scip]" adds') for line in text.splitlines()
    )


@pytest.mark.parametrize("name", _cli.DATASETS)
def test_load_data(name):
    data = _cli.load_data(name, rng=0)
    assert data.X.shape[0] == len(data.y) and data.X_test.shape[1] == data.X.shape[1]
    if data.n_outputs == 1:
        assert set(np.unique(data.y)) <= {-1, 1}
    else:
        assert set(np.unique(data.y)) == {0, 1, 2}
    if name != "two_moons":
        np.testing.assert_allclose(data.X.mean(axis=0), 0.0, atol=1e-12)
        np.testing.assert_allclose(data.X.std(axis=0), 1.0, rtol=1e-12)
    with pytest.raises(ValueError, match="unknown dataset"):
        _cli.load_data("mnist")


def test_plot_certified_accuracy():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    ax = plot_certified_accuracy([1e-3, 1e-2], {"interval": [0.8, 0.5], "gurobi": [0.85, 0.6]}, title="t")
    assert len(ax.lines) == 2 and ax.get_xscale() == "log" and ax.get_title() == "t"
    ax = plot_certified_accuracy([1e-3, 1e-2], {"interval": [0.8, 0.5]}, nominal=0.9)
    reference = [line for line in ax.lines if line.get_linestyle() == "--"]
    assert len(reference) == 1 and list(reference[0].get_ydata()) == [0.9, 0.9]
    assert "nominal accuracy 0.900" in [t.get_text() for t in ax.get_legend().get_texts()]
    with pytest.raises(ValueError, match="nominal"):
        plot_certified_accuracy([1e-3], {"a": [0.5]}, nominal=1.5)
    with pytest.raises(ValueError, match="shape"):
        plot_certified_accuracy([1e-3, 1e-2], {"a": [0.5]})
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        plot_certified_accuracy([1e-3], {"a": [1.5]})
    with pytest.raises(ValueError, match="at least one"):
        plot_certified_accuracy([1e-3], {})
    with pytest.raises(ValueError, match=">= 0"):
        plot_certified_accuracy([-1.0], {"a": [0.5]})


def test_run_gives_every_solve_a_default_time_limit(monkeypatch, capsys):
    import certkit.mibp as mibp

    seen = {}
    real_train, real_certify = mibp.certified_training, mibp.certify_predictions

    def train(*args, **kwargs):
        seen["train"] = kwargs["time_limit"]
        return real_train(*args, **kwargs)

    def certify(*args, **kwargs):
        seen["certify"] = kwargs["time_limit"]
        return real_certify(*args, **kwargs)

    monkeypatch.setattr("certkit.mibp.certified_training", train)
    monkeypatch.setattr("certkit.mibp.certify_predictions", certify)
    parser = argparse.ArgumentParser()
    _cli.add_arguments(parser)
    args = parser.parse_args(["--dataset", "iris2", "--epochs", "1", "--hidden", "2"])
    assert _cli.run(args) == 0
    assert seen == {"train": _cli.DEFAULT_TIME_LIMIT, "certify": _cli.DEFAULT_TIME_LIMIT}
    assert _cli.DEFAULT_TIME_LIMIT > 0
    help_text = parser.format_help()
    assert f"default {_cli.DEFAULT_TIME_LIMIT:g}" in help_text


# ------------------------------------------------------------------------------------------------
# issue 30: defaults that train, a remark at chance, users' files, the training recipes, the demo's progress


def _main(capsys, *argv):
    from certkit import cli

    code = cli.main(["mibp", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def _value(out, label):
    return float(out.split(label)[1].split()[0])


@pytest.mark.parametrize("name", _cli.DATASETS)
def test_default_run_trains_clearly_above_chance(capsys, name):
    code, out, _ = _main(capsys, "--dataset", name)
    assert code == 0
    nominal, certified = _value(out, "nominal test accuracy"), _value(out, "certified accuracy")
    chance = _value(out, "chance (majority class)")
    assert nominal >= chance + 0.15 and certified > chance  # He init, 1-3 epochs at 0.1 gave 0.255-0.29
    assert "remark" not in out and float(out.split("total time")[1].split()[0]) < 10


def test_below_chance_gets_a_one_line_remark(capsys):
    # the former defaults' initialisation and rate for one epoch: nominal accuracy at or below chance
    code, out, _ = _main(capsys, "--init", "he", "--learning-rate", "0.1", "--epochs", "1")
    assert code == 0
    assert _value(out, "nominal test accuracy") <= _value(out, "chance (majority class)") == 0.5
    remarks = [line for line in out.splitlines() if line.strip().startswith("remark:")]
    assert len(remarks) == 1 and "nominal accuracy is not above chance (0.500" in remarks[0]
    # trained, but certified at chance: the remark names the bounds
    code, out, _ = _main(capsys, "--epochs", "12", "--learning-rate", "0.5")
    assert _value(out, "nominal test accuracy") > 0.7 and _value(out, "certified accuracy") <= 0.5
    remarks = [line for line in out.splitlines() if line.strip().startswith("remark:")]
    assert len(remarks) == 1 and "certified accuracy is not above chance" in remarks[0]


def _blobs(n=120, rng=0):
    gen = np.random.default_rng(rng)
    y = np.arange(n) % 3
    X = gen.normal(size=(n, 2)) * 0.3 + np.array([[0, 0], [3, 0], [0, 3]])[y]
    return 100.0 * X + 7.0, y  # raw scale far from standardised


def test_data_csv_with_a_label_column(tmp_path, capsys):
    X, y = _blobs()
    path = tmp_path / "blobs.csv"
    rows = [f"{a},{c + 1},{b}" for (a, b), c in zip(X, y)]  # label in the middle, coded 1..3
    path.write_text("a,cls,b\n" + "\n".join(rows) + "\n")
    code, out, err = _main(
        capsys, "--data", str(path), "--label", "cls", "--test-size", "0.25", "--seed", "1"
    )
    assert code == 0, err
    assert (
        "blobs.csv (label column 'cls')" in out and "90 training / 30 test rows, 2 features, 3 classes" in out
    )
    assert _value(out, "nominal test accuracy") > 0.9
    data = _cli.load_file(str(path), label="cls", test_size=0.25, rng=1)
    np.testing.assert_allclose(data.X.mean(axis=0), 0.0, atol=1e-12)  # the training rows' statistics
    np.testing.assert_allclose(data.X.std(axis=0), 1.0, rtol=1e-12)
    assert set(data.y) == {0, 1, 2} and np.bincount(data.y_test).tolist() == [10, 10, 10]
    assert abs(data.X_test.mean()) < 0.5  # the test rows are scaled with the training statistics too
    # the default label column is the last one
    path.write_text("a,b,cls\n" + "\n".join(f"{a},{b},{c}" for (a, b), c in zip(X, y)) + "\n")
    assert _main(capsys, "--data", str(path))[0] == 0


def test_data_npz_binary_and_each_loss_gets_its_labels(tmp_path, capsys, monkeypatch):
    import certkit.mibp as mibp

    X, y = _blobs()
    keep = y < 2
    path = tmp_path / "two.npz"
    np.savez(path, X=X[keep], y=np.where(y[keep] == 1, 5, -3))  # any two codes
    seen = {}
    real = mibp.certified_training

    def train(model, X, y, **kwargs):
        seen.update(y=np.unique(y, axis=0), outputs=model.sizes[-1], **kwargs)
        return real(model, X, y, **kwargs)

    monkeypatch.setattr("certkit.mibp.certified_training", train)
    expected = {
        "hinge": ([-1.0, 1.0], 1),
        "binary_cross_entropy": ([0.0, 1.0], 1),
        "cross_entropy": ([0, 1], 2),
        "mse": ([-1.0, 1.0], 1),
    }
    for loss, (labels, outputs) in expected.items():
        code, out, err = _main(capsys, "--data", str(path), "--loss", loss)
        assert code == 0, err
        assert seen["y"].tolist() == labels and seen["outputs"] == outputs and seen["loss"] == loss
        assert _value(out, "nominal test accuracy") >= 0.85  # chance 0.5
    # three classes: cross-entropy and the hinge get 0..2 with three outputs, MSE one-hot targets
    path3 = tmp_path / "three.npz"
    np.savez(path3, X=X, y=y)
    assert _main(capsys, "--data", str(path3), "--loss", "mse")[0] == 0
    assert seen["outputs"] == 3 and seen["y"].tolist() == np.eye(3)[::-1].tolist()  # one-hot rows, sorted
    code, _, err = _main(capsys, "--data", str(path3), "--loss", "binary_cross_entropy")
    assert code == 2 and err == (
        "certkit mibp: error: --loss binary_cross_entropy needs two classes, the data have 3: use --loss "
        "cross_entropy\n"
    )


def test_bad_files_and_columns_end_in_one_line_and_status_2(tmp_path, capsys):
    good = tmp_path / "good.csv"
    good.write_text("a,b,y\n1,2,0\n2,1,1\n3,3,0\n4,1,1\n")
    np.save(tmp_path / "a.npy", np.zeros(3))
    np.savez(tmp_path / "noy.npz", X=np.zeros((4, 2)))
    np.savez(tmp_path / "ragged.npz", X=np.zeros((4, 2)), y=np.zeros(3))
    (tmp_path / "float.csv").write_text("a,y\n1,0.5\n2,1\n3,0\n4,1\n")
    (tmp_path / "one.csv").write_text("a,y\n1,1\n2,1\n3,1\n4,1\n")
    (tmp_path / "text.csv").write_text("a,y\n1,0\nx,1\n")
    (tmp_path / "wide.csv").write_text("a,y\n" + "\n".join(f"{i},{i}" for i in range(80)) + "\n")
    cases = [
        (["--data", str(tmp_path / "missing.csv")], "No such file or directory"),
        (["--data", str(good), "--label", "nope"], "--label 'nope' is not a column of"),
        (["--data", str(tmp_path / "a.npy")], "(a NumPy .npy file); --data reads a CSV file"),
        (["--data", str(tmp_path / "noy.npz")], "lacks the arrays ['y']"),
        (["--data", str(tmp_path / "noy.npz"), "--label", "y"], "--label names a CSV column"),
        (["--data", str(tmp_path / "ragged.npz")], "4 rows of features but 3 labels"),
        (["--data", str(tmp_path / "float.csv")], "must be class codes (whole numbers), got [0.5]"),
        (["--data", str(tmp_path / "one.csv")], "one class only"),
        (["--data", str(tmp_path / "text.csv")], "line 3, column 'a': 'x' is not a number"),
        (["--data", str(tmp_path / "wide.csv")], "80 distinct values"),
        (["--data", str(good), "--test-size", "0.01"], "leaves an empty training or test part"),
        (["--dataset", "iris2", "--label", "y"], "--label names a column of a --data CSV file"),
    ]
    for argv, fragment in cases:
        code, _, err = _main(capsys, *argv)
        assert code == 2, argv
        assert err.startswith("certkit mibp: error: ") and fragment in err, (argv, err)
        assert len(err.splitlines()) == 1 and "Traceback" not in err


def test_recipe_options_reach_certified_training(capsys, monkeypatch):
    import certkit.mibp as mibp
    from certkit.mibp import Budget, InverseDecay, LabelFlips

    seen = {}
    real = mibp.certified_training

    def train(*args, **kwargs):
        seen.update(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr("certkit.mibp.certified_training", train)
    argv = [
        "--dataset",
        "iris3",
        "--loss",
        "cross_entropy",
        "--lr-decay",
        "0.5",
        "--lr-min",
        "0.01",
        "--batch-size",
        "38",
        "--shuffle",
        "--momentum",
        "0.5",
        "--weight-decay",
        "1e-4",
        "--seed",
        "2",
    ]
    code, out, err = _main(capsys, *argv, "--paired", "2", "--epsilon", "0.001")
    assert code == 0, err
    rate = seen["learning_rate"]
    assert isinstance(rate, InverseDecay) and (rate.learning_rate, rate.decay, rate.minimum) == (
        0.3,
        0.5,
        0.01,
    )
    assert (seen["batch_size"], seen["shuffle"], seen["momentum"], seen["weight_decay"], seen["rng"]) == (
        38,
        True,
        0.5,
        1e-4,
        2,
    )
    assert isinstance(seen["perturbation"], Budget) and seen["perturbation"].k == 2
    assert "at most 2 rows in every batch moved by ±0.001 and relabelled" in out
    assert "batches of 38 (shuffled)" in out
    assert _main(capsys, "--label-flips", "3")[0] == 0
    assert isinstance(seen["perturbation"], LabelFlips) and seen["perturbation"].k == 3
    code, out, _ = _main(capsys, "--budget", "4", "--epsilon", "0.05")
    assert code == 0 and isinstance(seen["perturbation"], Budget) and seen["perturbation"].k == 4
    assert "features ±0.05 on at most 4 rows" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--backend", "milp", "--loss", "cross_entropy"],
            "--backend milp does not support --loss cross_entropy; use --backend interval",
        ),
        (
            ["--backend", "milp", "--batch-size", "10"],
            "--backend milp does not support a learning-rate schedule",
        ),
        (["--loss", "mse", "--label-flips", "1"], "LabelFlips needs a classification loss"),
        (["--momentum", "1.5"], "--momentum must be in [0, 1), got 1.5"),
        (["--lr-min", "0.1"], "--lr-min is the floor of a decaying rate: give --lr-decay too"),
        (["--lr-decay", "-1"], "--lr-decay must be >= 0"),
        (["--batch-size", "1000"], "--batch-size must be at most the number of training rows (100)"),
        (["--budget", "-1"], "--budget must be >= 0"),
    ],
)
def test_refused_combinations_are_one_line_in_flag_words(capsys, argv, message):
    code, _, err = _main(capsys, *argv)
    assert code == 2 and err.startswith("certkit mibp: error: ") and message in err
    assert len(err.splitlines()) == 1


def test_demo_section_shows_progress_and_a_recipe(monkeypatch):
    import certkit.mibp as mibp

    monkeypatch.setattr(_demo, "_exact_backend", lambda: None)
    progress = []
    real_train, real_certify = mibp.certified_training, mibp.certify_predictions

    def train(*args, **kwargs):
        progress.append(("train", kwargs.get("progress")))
        return real_train(*args, **kwargs)

    def certify(*args, **kwargs):
        progress.append(("certify", kwargs.get("progress")))
        return real_certify(*args, **kwargs)

    monkeypatch.setattr("certkit.mibp.certified_training", train)
    monkeypatch.setattr("certkit.mibp.certify_predictions", certify)
    text = _cli.demo(np.random.default_rng(0))
    assert ("train", "mibp: interval arithmetic") in progress
    assert ("certify", "mibp: interval arithmetic, certifying") in progress
    assert all(
        isinstance(label, str) and label.startswith("mibp:") for kind, label in progress if kind == "train"
    )
    line = next(line for line in text.splitlines() if "certified accuracy" in line and "nominal" in line)
    certified, nominal = _value(line, "certified accuracy"), float(line.split("(nominal")[1].split(")")[0])
    assert 0.8 <= certified <= nominal  # measured 0.856 of 0.884
    assert "InverseDecay(2.0, 0.6, minimum=0.001)" in text and "momentum 0.5" in text


def test_library_messages_name_flags(capsys):
    """First-use review: the library's argument names become the command line's flags."""
    from certkit.cli import main

    assert main(["mibp", "--shuffle"]) == 2
    assert (
        capsys.readouterr()
        .err.strip()
        .endswith("error: --shuffle needs a --batch-size (the full batch has one order)")
    )
    assert main(["mibp", "--batch-size", "100000"]) == 2
    assert "--batch-size must be at most the number of training rows" in capsys.readouterr().err


def test_a_diverged_training_is_called_so(capsys):
    """First-use review: a learning rate of 1e12 was told to train longer or faster."""
    from certkit.cli import main

    assert main(["mibp", "--learning-rate", "1e12"]) == 0
    out = capsys.readouterr().out
    assert "training diverged; use a smaller --learning-rate" in out and "train longer" not in out


# ------------------------------------------------------------------------------------------------
# issue 36: class names in a CSV, values beyond what float64 standardises


def test_data_csv_with_class_names(tmp_path, capsys, monkeypatch):
    import certkit.mibp as mibp

    X, y = _blobs()
    names = np.array(["setosa", "versicolor", "virginica"])[y]
    path = tmp_path / "named.csv"
    path.write_text("a,b,species\n" + "\n".join(f"{a},{b}, {c} " for (a, b), c in zip(X, names)) + "\n")
    seen = {}
    real = mibp.certified_training

    def train(model, X, y, **kwargs):
        seen.update(y=y, outputs=model.sizes[-1])
        return real(model, X, y, **kwargs)

    monkeypatch.setattr("certkit.mibp.certified_training", train)
    code, out, err = _main(capsys, "--data", str(path), "--loss", "cross_entropy")
    assert code == 0, err
    assert "3 classes" in out and _value(out, "nominal test accuracy") > 0.9
    data = _cli.load_file(str(path))
    codes = {"setosa": 0, "versicolor": 1, "virginica": 2}  # the sorted names, surrounding spaces dropped
    assert set(seen["y"].tolist()) == {0, 1, 2} and seen["outputs"] == 3
    # every row keeps its class: the split's codes are the names' codes
    full = np.concatenate([data.y, data.y_test])
    assert np.bincount(full).tolist() == [np.sum(names == n) for n in codes]
    # an .npz of strings and a CSV of the same names give the same split
    np.savez(tmp_path / "named.npz", X=X, y=names)
    npz = _cli.load_file(str(tmp_path / "named.npz"))
    np.testing.assert_array_equal(npz.y, data.y)
    np.testing.assert_array_equal(npz.X, data.X)
    (tmp_path / "gap.csv").write_text("a,y\n1,yes\n2,\n3,no\n")
    code, _, err = _main(capsys, "--data", str(tmp_path / "gap.csv"))
    assert code == 2 and "line 3: the label column 'y' is empty" in err and len(err.splitlines()) == 1


@pytest.mark.parametrize("scale", [1e307, 1e200])
def test_data_too_large_to_standardise_is_a_one_line_error(tmp_path, capsys, scale):
    # fuzz round 4: values near 1e307 gave NaN features (the column sum overflowed); above ~1e154 the
    # standard deviation overflowed and the column was silently zeroed
    gen = np.random.default_rng(0)
    rows = [f"{scale * (1 + gen.random())},{gen.normal()},{i % 2}" for i in range(40)]
    path = tmp_path / "big.csv"
    path.write_text("huge,small,y\n" + "\n".join(rows) + "\n")
    code, out, err = _main(capsys, "--data", str(path))
    assert code == 2 and out == "" and len(err.splitlines()) == 1
    assert err.startswith("certkit mibp: error: --data: column 'huge' cannot be standardised in float64")
    assert "rescale the column" in err and "nan" not in err.lower()
    np.savez(
        tmp_path / "big.npz",
        X=np.array([[scale * (1 + gen.random()), 0.0] for _ in range(40)]),
        y=np.arange(40) % 2,
    )
    code, _, err = _main(capsys, "--data", str(tmp_path / "big.npz"))
    assert code == 2 and "feature column 0 cannot be standardised" in err


# ------------------------------------------------------------------------------------------------
# issue 36: results to a file, the user's own weights, remarks that name the options in use


def test_output_writes_the_boxes_and_the_certificate_as_json(tmp_path, capsys):
    import json

    path = tmp_path / "results.json"
    code, out, err = _main(capsys, "--dataset", "iris3", "--loss", "cross_entropy", "--output", str(path))
    assert code == 0, err
    assert f"results written to      {path}" in out
    res = json.loads(path.read_text())
    assert res["format"] == "certkit mibp results 1" and res["backend"] == "interval"
    assert res["data"]["classes"] == ["setosa", "versicolor", "virginica"] and res["data"]["standardised"]
    cert, epochs = res["certificate"], res["epochs"]
    assert f"{cert['certified_accuracy']:.3f}" == f"{_value(out, 'certified accuracy'):.3f}"
    assert f"{cert['nominal_test_accuracy']:.3f}" == f"{_value(out, 'nominal test accuracy'):.3f}"
    m = res["data"]["test_rows"]
    assert len(cert["prediction"]) == len(cert["certified"]) == len(cert["margin_lower"]) == m
    assert set(cert["prediction"]) <= set(res["data"]["classes"])
    assert cert["certified_points"] == sum(cert["certified"])
    assert cert["certified"] == [margin > 0 for margin in cert["margin_lower"]]
    assert [e["epoch"] for e in epochs] == [0, 1, 2, 3] and epochs[0]["max_width"] == 0.0
    # the interval backend certified the test split: the last epoch's series value is the certificate's
    assert epochs[-1]["certified_test_accuracy_interval"] == cert["certified_accuracy"]
    boxes = res["boxes"]
    n_params = 4 * 16 + 16 + 16 * 3 + 3
    for lower, upper, nominal in zip(boxes["lower"], boxes["upper"], boxes["nominal"]):
        assert len(lower) == len(upper) == len(nominal) == n_params
        assert all(lo <= v <= hi for lo, v, hi in zip(lower, nominal, upper))
    assert res["layer_sizes"] == [4, 16, 3] and res["initial_weights"] == "torch, seed 0"
    # a file that cannot be written is refused before training, in one line
    for bad, fragment in (
        (tmp_path / "missing" / "r.json", "the directory"),
        (tmp_path, "is a directory; name a file"),
    ):
        code, out, err = _main(capsys, "--output", str(bad))
        assert code == 2 and out == "" and len(err.splitlines()) == 1
        assert err.startswith("certkit mibp: error: --output ") and fragment in err


def _torch_net(sizes):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    layers = []
    for fan_in, fan_out in itertools.pairwise(sizes):
        layers += [torch.nn.Linear(fan_in, fan_out), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers[:-1]).double()


def _weights_files(tmp_path, sizes):
    net = _torch_net(sizes)
    pt, npz = tmp_path / "net.pt", tmp_path / "net.npz"
    import torch

    torch.save(net.state_dict(), pt)
    linears = [layer for layer in net if isinstance(layer, torch.nn.Linear)]
    np.savez(
        npz,
        **{f"W{i}": lin.weight.detach().numpy() for i, lin in enumerate(linears)},
        **{f"b{i}": lin.bias.detach().numpy() for i, lin in enumerate(linears)},
    )
    return net, pt, npz


def test_weights_start_from_the_users_network(tmp_path, capsys):
    import json

    from certkit.mibp import MLP

    net, pt, npz = _weights_files(tmp_path, [4, 5, 6, 3])  # two hidden layers: any Linear/ReLU stack
    runs = {}
    for path in (pt, npz):
        out_file = tmp_path / f"{path.suffix[1:]}.json"
        argv = [
            "--dataset",
            "iris3",
            "--loss",
            "cross_entropy",
            "--weights",
            str(path),
            "--output",
            str(out_file),
        ]
        code, _, err = _main(capsys, *argv)
        assert code == 0, err
        runs[path.suffix] = json.loads(out_file.read_text())
    start = MLP.from_torch(net).to_vector()
    for res in runs.values():
        assert res["layer_sizes"] == [4, 5, 6, 3]
        np.testing.assert_array_equal(res["boxes"]["lower"][0], start)  # epoch 0: exactly the given weights
    assert runs[".pt"]["boxes"] == runs[".npz"]["boxes"]  # both formats: the same network, the same run


def test_bad_weights_are_one_line_errors(tmp_path, capsys):
    torch = pytest.importorskip("torch")
    _, pt, npz = _weights_files(tmp_path, [4, 5, 3])
    (tmp_path / "in").mkdir()
    _, wrong_in, _ = _weights_files(tmp_path / "in", [3, 5, 3])
    np.savez(tmp_path / "gap.npz", W0=np.zeros((5, 4)), b0=np.zeros(5), W1=np.zeros((3, 6)), b1=np.zeros(3))
    np.savez(tmp_path / "names.npz", weight=np.zeros((3, 4)), bias=np.zeros(3))
    bn = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    torch.save(bn.state_dict(), tmp_path / "bn.pt")
    torch.save(torch.nn.Sequential(torch.nn.Linear(4, 3)), tmp_path / "module.pt")
    (tmp_path / "text.pt").write_text("not a network")
    iris3 = ["--dataset", "iris3", "--loss", "cross_entropy"]
    cases = [
        (
            ["--dataset", "iris2", "--weights", str(npz)],
            "its last layer has 3 outputs but --loss hinge on 2 "
            "classes (one output; --loss cross_entropy takes two) needs 1",
        ),
        ([*iris3, "--weights", str(wrong_in)], "its first layer takes 3 inputs but the data have 4 feature"),
        (
            [*iris3, "--weights", str(tmp_path / "gap.npz")],
            "weights[1] has 6 inputs but layer 0 has 5 outputs",
        ),
        ([*iris3, "--weights", str(tmp_path / "names.npz")], "holds the arrays ['bias', 'weight']; expected"),
        (
            [*iris3, "--weights", str(tmp_path / "bn.pt")],
            "holds '1.weight' (shape (3,)), which is not a Linear",
        ),
        ([*iris3, "--weights", str(tmp_path / "module.pt")], "a whole pickled module is not read"),
        ([*iris3, "--weights", str(tmp_path / "text.pt")], "could not be read as a state dict"),
        ([*iris3, "--weights", str(tmp_path / "none.pt")], "No such file or directory"),
        ([*iris3, "--weights", str(pt), "--hidden", "4"], "--hidden sets up a random initial network"),
        ([*iris3, "--weights", str(pt), "--init", "he"], "--init sets up a random initial network"),
    ]
    for argv, fragment in cases:
        code, out, err = _main(capsys, *argv)
        assert code == 2 and out == "", argv
        assert err.startswith("certkit mibp: error: ") and fragment in err, (argv, err)
        assert len(err.splitlines()) == 1


def test_no_standardise_keeps_the_features_as_they_are(tmp_path):
    X, y = _blobs()
    path = tmp_path / "raw.csv"
    path.write_text("a,b,y\n" + "\n".join(f"{a},{b},{c}" for (a, b), c in zip(X, y)) + "\n")
    raw = _cli.load_file(str(path), standardise=False)
    scaled = _cli.load_file(str(path))
    assert np.isin(raw.X, X).all() and not np.isin(scaled.X, X).any()  # the very rows of the file
    np.testing.assert_array_equal(raw.y, scaled.y)
    mean, std = raw.X.mean(axis=0), raw.X.std(axis=0)
    np.testing.assert_allclose(scaled.X, (raw.X - mean) / std, rtol=1e-12)  # scaling is the only difference


@pytest.mark.parametrize(
    ("argv", "named", "not_named"),
    [
        (
            ["--label-flips", "20"],
            ["a smaller --label-flips", "fewer --epochs"],
            ["--epsilon", "budget", "--paired"],
        ),
        (
            ["--epochs", "12", "--learning-rate", "0.5"],
            ["a smaller --epsilon", "fewer --epochs"],
            ["budget", "--label-flips", "--batch-size", "--momentum"],
        ),
        (
            ["--paired", "10", "--epochs", "6", "--batch-size", "20", "--momentum", "0.5"],
            ["--epsilon", "a smaller --paired", "a larger --batch-size", "a smaller --momentum"],
            ["--budget", "--label-flips"],
        ),
    ],
)
def test_the_below_chance_remark_names_only_options_that_act_on_the_run(capsys, argv, named, not_named):
    code, out, _ = _main(capsys, *argv)
    assert code == 0 and _value(out, "certified accuracy") <= _value(out, "chance (majority class)")
    remark = next(line for line in out.splitlines() if line.strip().startswith("remark:"))
    assert "certified accuracy is not above chance" in remark
    assert all(option in remark for option in named), remark
    assert not any(option in remark for option in not_named), remark


def test_the_scope_and_a_linear_model_choose_the_influence_enclosure(capsys):
    """--hidden 0 trains a linear model, which --carry auto (the default) certifies with the influence
    enclosure under --label-flips; --scope run counts the flips in the whole training set."""
    code, out, err = _main(
        capsys,
        "--dataset",
        "iris3",
        "--loss",
        "cross_entropy",
        "--hidden",
        "0",
        "--label-flips",
        "2",
        "--scope",
        "run",
        "--epochs",
        "2",
        "--batch-size",
        "38",
    )
    assert code == 0, err
    assert "at most 2 label flips in the training set" in out
    assert "carry influence (chosen by --carry auto)" in out and "model [4, 3]" in out
    code, out, err = _main(capsys, "--dataset", "iris3", "--loss", "cross_entropy", "--label-flips", "1")
    assert code == 0 and "carry box (chosen by --carry auto)" in out and "in every batch" in out
    with pytest.raises(SystemExit) as exited:
        _main(capsys, "--scope", "epoch")
    assert exited.value.code == 2 and "--scope: invalid choice: 'epoch'" in capsys.readouterr().err


def test_attack_prints_an_upper_bound_on_the_certificate(tmp_path, capsys):
    """--attack: the share of test rows correct and unchanged by the label-flip attack, between the certified
    and the nominal accuracy; in the JSON results too; without label changes it is refused in one line."""
    pytest.importorskip("torch")
    import json

    path = tmp_path / "results.json"
    argv = ["--dataset", "iris3", "--loss", "cross_entropy", "--hidden", "0", "--label-flips", "2"]
    code, out, err = _main(capsys, *argv, "--scope", "run", "--attack", "--output", str(path))
    assert code == 0, err
    bound = _value(out, "attack bound")
    assert _value(out, "certified accuracy") <= bound <= _value(out, "nominal test accuracy")
    assert f"{json.loads(path.read_text())['certificate']['attack_bound']:.3f}" == f"{bound:.3f}"
    code, out, err = _main(capsys, "--dataset", "iris3", "--paired", "1", "--epsilon", "0.1", "--attack")
    assert code == 0 and _value(out, "certified accuracy") <= _value(out, "attack bound"), err
    code, _, err = _main(capsys, "--budget", "2", "--attack")
    assert code == 2 and err == (
        "certkit mibp: error: --attack changes training labels: give --label-flips or --paired\n"
    )
