"""Issue 30: performative bounds and the command line, round 4 of first use and fuzzing."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from certkit.performative import _cli, generalization_bound


def _rademacher_kw():
    X, y, theta, b = _cli.lalonde_model()
    return {"kind": "rademacher", "theta": theta, "X": X, "y": y, "loss": "logistic", "share": 0.1,
            "diameter": 2.0, "weight_norm": 5.0, "feature_norm": math.sqrt(X.shape[1]), "intercept": b}


def test_rademacher_refuses_a_loss_bound_below_the_observed_losses():
    kw = _rademacher_kw()
    with pytest.raises(ValueError, match=r"^loss_bound = 0 is below the largest logistic loss on the sample "
                                         r"\(.*\); loss_bound must bound the loss over the whole class"):
        generalization_bound(loss_bound=0.0, **kw)
    largest = float(np.logaddexp(0.0, -kw["y"] * (kw["X"] @ kw["theta"] + kw["intercept"])).max())
    res = generalization_bound(loss_bound=largest, **kw)  # the largest observed loss is accepted
    assert res.terms["sampling"] > 0


def test_overflowing_norms_are_named_on_the_command_line(capsys):
    from certkit.cli import main

    assert main(["performative", "--kind", "rademacher", "--weight-norm", "1e308"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        "certkit performative: error: --weight-norm = 1e+308 times feature_norm = ")
    assert "overflows float64" in err[0]


def test_zero_radius_is_a_plain_value_error():
    kw = {"n": 1000, "diameter": 5.29, "loss_lipschitz": 28**0.5, "model_lipschitz": 0.25,
          "entropy_integral": 7.3855, "loss_range": 1.0}
    with pytest.raises(ValueError, match=r"share=0 gives the radius R = 0") as info:
        generalization_bound(kind="thm3.13", share=0.0, **kw)
    assert type(info.value) is ValueError


# --- items 13-15: the command line ---


def _main(capsys, *argv):
    from certkit.cli import main

    status = main(["performative", *argv])
    out, err = capsys.readouterr()
    return status, out, err


def test_too_many_shares_are_refused_before_any_work(capsys):
    shares = ",".join(f"{i / 5000:.4f}" for i in range(1, 5001))  # ran 6 minutes
    status, out, err = _main(capsys, "--shares", shares)
    assert status == 2 and out == ""
    assert err.strip() == ("certkit performative: error: --shares lists 5000 values; at most 200 (each "
                           "costs a bound and two Wasserstein risks): use a coarser grid, or --target for "
                           "the largest share under a bound")


def test_an_unreachable_target_keeps_the_tables(capsys):
    status, out, err = _main(capsys, "--shares", "0.1,0.5", "--target", "1")
    assert status == 0 and err == ""
    assert "thm3.13 bound, p = 2, confidence 0.95, n = 445" in out and "W_p sup (self-negating)" in out
    assert re.search(r"--target 1 is unreachable: no share of affected units keeps the thm3.13 bound below "
                     r"target=1; the smallest bound is [\d.]+ at share", out)


def test_n_sets_the_thm_bounds_and_the_risk_table_says_its_rows(capsys):
    status, out, _ = _main(capsys, "--shares", "0.1", "--n", "10000")
    assert status == 0
    assert "n = 10000" in out and "over the flip ball on its 445 rows" in out


def _labelled(n=300, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3)) * [1.0, 10.0, 100.0]
    y = (X[:, 0] + X[:, 1] / 10 + rng.normal(size=n) > 0).astype(int)
    return X, y


def test_user_csv_data(tmp_path, capsys):
    X, y = _labelled()
    path = tmp_path / "jobs.csv"
    table = np.column_stack([y, X])
    np.savetxt(path, table, delimiter=",", header="employed,a,b,c", comments="", fmt="%.10g")
    status, out, err = _main(capsys, "--data", str(path), "--label", "employed", "--kind", "rademacher",
                             "--weight-norm", "20", "--shares", "0.1")
    assert status == 0, err
    assert f"logistic risk of the logistic model of {path}" in out and "on its 300 rows" in out
    # the same data as an .npz archive give the same tables
    npz = tmp_path / "jobs.npz"
    np.savez(npz, X=X, y=2 * y - 1)
    status, out_npz, err = _main(capsys, "--data", str(npz), "--kind", "rademacher", "--weight-norm", "20",
                                 "--shares", "0.1")
    assert status == 0, err
    strip = re.compile(r"of the logistic model of \S+|\(\d+\.\d+ s\)")
    assert strip.sub("", out_npz) == strip.sub("", out)


@pytest.mark.parametrize(("content", "message"), [
    ("a,b\n1,2\n3,4\n", r"--data labels must be two classes coded 0/1 or -1/\+1, got values \[2\.0, 4\.0\]"),
    ("a,b\n1,0\n1,1\n", r"--data has constant feature column\(s\) \[0\]; drop them"),
])
def test_user_data_errors_are_one_line(tmp_path, capsys, content, message):
    path = tmp_path / "bad.csv"
    path.write_text(content)
    status, _, err = _main(capsys, "--data", str(path))
    assert status == 2 and err.count("\n") == 1
    assert re.match(rf"certkit performative: error: {message}", err)


def test_user_data_label_must_be_a_column(tmp_path, capsys):
    X, y = _labelled(20)
    path = tmp_path / "d.csv"
    np.savetxt(path, np.column_stack([X, y]), delimiter=",", header="a,b,c,y", comments="")
    status, _, err = _main(capsys, "--data", str(path), "--label", "employed")
    assert status == 2
    assert err.strip() == ("certkit performative: error: --label 'employed' is not a column of the CSV file; "
                           "its columns are ['a', 'b', 'c', 'y']")
