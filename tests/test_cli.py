"""The certkit command line: --version, demo, python -m certkit, errors."""

import argparse
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import certkit
from certkit import _demo_foundation, cli


def _script() -> str:
    """The installed ``certkit`` console script (next to the interpreter in a venv)."""
    candidate = Path(sys.executable).with_name("certkit")
    found = str(candidate) if candidate.exists() else shutil.which("certkit")
    if found is None:
        pytest.fail("the certkit console script is not installed (pip install -e .)")
    return found


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, check=False, timeout=600)


def _without_timings(text: str) -> str:
    return re.sub(r"\(\d+\.\d s\)", "(t)", text)


def test_version_from_console_script_and_module():
    for cmd in ([_script(), "--version"], [sys.executable, "-m", "certkit", "--version"]):
        proc = _run(*cmd)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip() == f"certkit {certkit.__version__}"


def test_no_command_prints_help():
    proc = _run(sys.executable, "-m", "certkit")
    assert proc.returncode == 0
    assert "usage: certkit" in proc.stdout
    assert "demo" in proc.stdout


@pytest.mark.slow
def test_full_demo_tour_runs():
    proc = _run(_script(), "demo")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"certkit {certkit.__version__} - demo tour (seed 0)")
    for mod in cli._load_commands():
        assert f"== {mod.NAME}: {mod.HELP}" in proc.stdout
    # issue 43 item 5: stderr is not a terminal here, so progress is a plain line per stage (the bars wrote
    # 186-264 updates, 20-29 KB, around 1.2 KB of tables in the MIBP section)
    assert "\r" not in proc.stderr and len(proc.stderr) < 1500, proc.stderr
    assert all(re.fullmatch(r"mibp: .*: \d+/\d+ (in \d+\.\d|after \d+) s", line)
               for line in proc.stderr.splitlines()), proc.stderr


def test_progress_into_a_log_is_a_few_plain_lines(tmp_path):
    """Issue 43 item 5: the MIBP demo section and an interval `certkit mibp` run with stderr in a file."""
    code = ("from certkit import cli; from certkit.mibp import _demo; _demo._exact_backend = lambda: None; "
            "raise SystemExit(cli.main(['demo', '--only', 'mibp']))")
    log = tmp_path / "log"
    with open(log, "w") as handle:
        proc = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=handle, text=True,
                              check=False, timeout=600)
    assert proc.returncode == 0 and "== mibp" in proc.stdout
    lines = log.read_text().splitlines(keepends=True)
    assert [re.sub(r"\d+\.\d", "T", line) for line in lines] == [
        "mibp: interval arithmetic: 3/3 in T s\n",
        "mibp: a recipe (interval steps): 4/4 in T s\n",
    ]
    # an interval run of certkit mibp is silent, as certified_training's default (docs/cli.md, docs/mibp.md)
    with open(log, "w") as handle:
        proc = subprocess.run([_script(), "mibp", "--epochs", "2"], stdout=subprocess.PIPE, stderr=handle,
                              text=True, check=False, timeout=600)
    assert proc.returncode == 0 and "certified accuracy" in proc.stdout
    assert log.read_text() == ""


def test_demo_section_via_python_m_is_deterministic():
    first = _run(sys.executable, "-m", "certkit", "demo", "--only", "foundation", "--seed", "3")
    second = _run(sys.executable, "-m", "certkit", "demo", "--only", "foundation", "--seed", "3")
    assert first.returncode == 0, first.stderr
    assert _without_timings(first.stdout) == _without_timings(second.stdout)
    assert "== foundation: compiled kernels and shared statistics" in first.stdout
    other = _run(sys.executable, "-m", "certkit", "demo", "--only", "foundation", "--seed", "4")
    assert _without_timings(other.stdout) != _without_timings(first.stdout)


def test_unknown_demo_section_is_an_error():
    proc = _run(_script(), "demo", "--only", "nonexistent")
    assert proc.returncode == 2
    assert "certkit demo: error: argument --only: invalid choice: 'nonexistent'" in proc.stderr
    assert "foundation" in proc.stderr  # lists the valid sections
    assert proc.stdout == ""


def test_unknown_command_is_an_error(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["frobnicate"])
    assert exc.value.code == 2
    assert "invalid choice: 'frobnicate'" in capsys.readouterr().err


def test_bad_seed_is_an_error(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["demo", "--seed", "abc"])
    assert exc.value.code == 2
    assert "invalid int value" in capsys.readouterr().err


def test_main_in_process(capsys):
    assert cli.main(["demo", "--only", "foundation"]) == 0
    out = capsys.readouterr().out
    assert "Clopper-Pearson for 990/1000" in out


def test_every_registered_module_has_the_command_shape():
    parser = cli.build_parser()
    assert parser.prog == "certkit"
    for mod in cli._load_commands():
        assert isinstance(mod.NAME, str) and isinstance(mod.HELP, str)
        assert callable(mod.demo)
        if hasattr(mod, "run"):
            assert callable(mod.add_arguments)


def test_foundation_demo_numbers():
    text = _demo_foundation.demo(np.random.default_rng(0))
    # Clopper-Pearson 990/1000 at 95%: [0.9817, 0.9952]; one-sided 99.9% lower bound 0.976
    assert re.search(r"two-sided\s+0\.950\s+0\.9817\s+0\.9952", text)
    # c[0.9, 0.25] with sigma = 0.25: Phi(Phi^-1(0.9) - 1) = 0.6109
    assert re.search(r"gaussian\s+0\.9\s+0\.8110\s+0\.6109\s+0\.2362", text)
    # uniform: 0.9 - r / (2 sqrt(3) 0.25)
    assert re.search(r"uniform\s+0\.9\s+0\.7845\s+0\.6113\s+0\.3226", text)
    assert "0.960927" in text  # RCP1 level Phi(Phi^-1(0.9) + 0.12 / 0.25)
    assert re.search(r"\n\s+8\s+9\s+inf\s+9", text)  # n = 8: rank 9 > 8 -> inf
    assert _demo_foundation.demo(np.random.default_rng(0)) == text


# ------------------------------------------------------------------------------------------------
# a newcomer's first hour: mistakes end in one line, defaults fit the data, help is complete


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["circuits", "--scores", "missing.npy"],
         "certkit circuits: error: --data missing.npy: No such file or directory"),
        (["mibp", "--epsilon", "-1"], "certkit mibp: error: --epsilon must be >= 0"),
        (["mibp", "--hidden", "-1"], "certkit mibp: error: --hidden must be >= 0, got -1"),
        (["conformal", "--confidence-level", "1.5"],
         "certkit conformal: error: --confidence-level must lie strictly between 0 and 1, got 1.5"),
        (["circuits", "--radius", "-1"], "certkit circuits: error: --radius must be >= 0, got -1"),
    ],
)
def test_input_mistakes_end_in_one_line_and_status_2(tmp_path, args, message):
    proc = subprocess.run([_script(), *args], capture_output=True, text=True, check=False, timeout=600,
                          cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip() == message


def test_scores_file_that_is_not_an_array_is_one_line(tmp_path):
    (tmp_path / "s.txt").write_text("hello")
    proc = _run(_script(), "circuits", "--scores", str(tmp_path / "s.txt"))
    assert proc.returncode == 2
    expected = f"certkit circuits: error: --data {tmp_path / 's.txt'} is not an array saved with numpy.save"
    assert proc.stderr.strip() == expected
    np.save(tmp_path / "v.npy", np.zeros(5))
    proc = _run(_script(), "circuits", "--scores", str(tmp_path / "v.npy"))
    assert proc.returncode == 2 and "2-D (examples, neurons)" in proc.stderr
    assert len(proc.stderr.splitlines()) == 1
    np.savez(tmp_path / "two.npz", a=np.zeros((3, 2)), b=np.ones(2))  # it said "has shape None"
    proc = _run(_script(), "circuits", "--data", str(tmp_path / "two.npz"))
    assert proc.returncode == 2 and proc.stderr == (
        f"certkit circuits: error: --data {tmp_path / 'two.npz'} is an .npz archive; expected one (examples, "
        "neurons) matrix saved with numpy.save\n"
    )


def test_default_top_k_fits_a_narrow_score_matrix(tmp_path):
    path = tmp_path / "s.npy"
    np.save(path, np.random.default_rng(0).normal(size=(50, 20)))
    proc = _run(_script(), "circuits", "--scores", str(path), "--n-subsamples", "200")
    assert proc.returncode == 0, proc.stderr
    assert "200 subsamples x 20 components" in proc.stdout


def test_only_takes_several_sections_after_one_flag_or_repeated(capsys):
    for args in (["--only", "foundation", "circuits"], ["--only", "foundation", "--only", "circuits"]):
        assert cli.main(["demo", *args]) == 0
        out = capsys.readouterr().out
        assert "== foundation" in out and "== circuits" in out
        assert "== mibp" not in out and "== conformal" not in out


def test_every_option_has_help_and_shows_its_default():
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, subparser in sub.choices.items():
        assert subparser.description, f"certkit {name} has no description"
        for action in subparser._actions:
            if not action.option_strings or action.dest == "help":
                continue
            flag = action.option_strings[-1]
            assert action.help, f"certkit {name} {flag} has no help"
            if action.default not in (None, False):
                assert "default" in action.help, f"certkit {name} {flag} does not show its default"


def test_demo_into_a_closed_pipe_has_no_traceback():
    proc = subprocess.run(f"{shlex.quote(_script())} demo --only foundation | head -3", shell=True,
                          capture_output=True, text=True, check=False, timeout=600)
    assert len(proc.stdout.splitlines()) == 3
    assert "Traceback" not in proc.stderr and "BrokenPipeError" not in proc.stderr


def test_version_imports_no_capability():
    code = ("import sys; from certkit import cli; assert cli.main(['--version']) == 0; "
            "print(sorted(m for m in ('scipy', 'sklearn', 'certkit.mibp', 'certkit.conformal') "
            "if m in sys.modules))")
    proc = _run(sys.executable, "-c", code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [f"certkit {certkit.__version__}", "[]"]


def test_demo_tables_share_one_number_format_and_indentation(capsys):
    assert cli.main(["demo", "--only", "foundation", "circuits"]) == 0
    text = capsys.readouterr().out
    body = [line for line in text.splitlines()[1:] if line and not line.startswith("==")]
    assert all(line.startswith("   ") for line in body)
    assert not re.search(r"\de[-+]\d\d", text)  # no scientific notation beside fixed point
    assert "0.0007  0.0099" in text  # family-wise bounds of the rarest component, same format as the rest


def test_demo_sections_of_new_modules_indented_like_the_rest(capsys):
    # a section that indents its own lines is not indented twice
    assert cli.main(["demo", "--only", "performative", "causal"]) == 0
    body = [line for line in capsys.readouterr().out.splitlines()[1:] if line and not line.startswith("==")]
    assert body
    assert all(line.startswith("   ") and not line.startswith("    ") for line in body)


def test_demo_runs_every_section_without_any_extra():
    """As after a plain ``pip install -e .``: no torch, solvers, cvxpy, matplotlib or dask."""
    blocked = ["torch", "gurobipy", "pyscipopt", "cvxpy", "highspy", "matplotlib", "dask", "distributed"]
    code = f"""
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, Block())
from certkit import cli
sys.exit(cli.main(["demo"]))
"""
    proc = _run(sys.executable, "-c", code)
    assert proc.returncode == 0, proc.stderr
    for mod in cli._load_commands():
        assert f"== {mod.NAME}: {mod.HELP}" in proc.stdout
    assert "nan" not in proc.stdout and "skipped" not in proc.stdout
    assert 'pip install "certkit[gurobi]" or "certkit[scip]" adds the exact certificate' in proc.stdout
    assert 'pip install "certkit[torch]" adds the attacked columns' in proc.stdout


@pytest.mark.parametrize(
    ("argv", "command", "message"),
    [
        (["frobnicate"], "certkit", "argument COMMAND: invalid choice: 'frobnicate'"),
        (["--bogus"], "certkit", "unrecognized arguments: --bogus"),
        (["--bogus", "demo"], "certkit", "unrecognized arguments: --bogus"),  # before the command: its own
        (["demo", "--seed", "abc"], "certkit demo", "argument --seed: invalid int value: 'abc'"),
        (
            ["causal", "x.csv", "--n-knots", "foo"],
            "certkit causal",
            "argument --n-knots: expected 'bic' or an integer, got 'foo'",
        ),
        (
            ["causal", "x.csv", "--dataset", "sachs"],
            "certkit causal",
            "argument --dataset: not allowed with argument FILE",
        ),
        (["causal"], "certkit causal", "one of the arguments FILE --data --dataset is required"),
        (["causal", "--data", "x.csv", "--dataset", "sachs"], "certkit causal",
         "argument --dataset: not allowed with argument --data"),
        (["causal", "x.csv", "--bogus", "3"], "certkit causal", "unrecognized arguments: --bogus 3"),
        (["mibp", "--epochs", "x"], "certkit mibp", "argument --epochs: invalid int value: 'x'"),
        (["conformal", "--sigma", "x"], "certkit conformal", "argument --sigma: invalid float value: 'x'"),
        (["circuits", "--radius", "x"], "certkit circuits", "argument --radius: invalid int value: 'x'"),
        (["performative", "--p", "x"], "certkit performative", "argument --p: invalid float value: 'x'"),
        (["ope", "--n", "x"], "certkit ope", "argument --n: invalid int value: 'x'"),
    ],
)
def test_parser_errors_are_one_line_with_status_2(capsys, argv, command, message):
    # the usage block came before the error line
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    assert exc.value.code == 2
    captured = capsys.readouterr()
    assert captured.err.startswith(f"{command}: error: {message}") and captured.err.count("\n") == 1
    assert captured.out == ""


def test_help_still_shows_the_usage(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["causal", "--help"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.startswith("usage: certkit causal [-h]")


def test_cli_words_rewrites_option_names_but_not_user_data():
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend")
    parser.add_argument("--batch-size")
    parser.add_argument("--max-components")
    parser.add_argument("--log", action="store_true")
    for message, expected in [
        # the options' names, as before
        ("backend='milp' needs batch_size", "--backend milp needs --batch-size"),
        ('use backend="scip" or batch_size=3', "use --backend scip or --batch-size 3"),
        ("log=True needs values > 0", "--log needs values > 0"),
        (
            "the estimator's mixture; use a smaller max_components.",
            "the estimator's mixture; use a smaller --max-components.",
        ),
        # user data, left as they are: quoted text and paths (a column or file named like an option)
        ("X has constant column(s) 'batch_size', \"max_components\"; drop them", None),
        ("./max_components.csv line 2, column 'b': 'x' is not a number", None),
        ("max_components.csv line 2", None),
        ("data/max_components/x.csv and C:\\max_components\\y.csv", None),
        ("batch_size(x) is a call", None),
    ]:
        assert cli.cli_words(ValueError(message), parser) == (expected or message)


# ------------------------------------------------------------------------------------------------
# issue 43 item 4: --data everywhere, no abbreviations, files named with their option


def _csv(path, n=60, seed=0):
    """Three columns a, b, c of linear-Gaussian data (for certkit causal)."""
    gen = np.random.default_rng(seed)
    a = gen.normal(size=n)
    b = a + 0.5 * gen.normal(size=n)
    c = b - a + 0.5 * gen.normal(size=n)
    np.savetxt(path, np.column_stack([a, b, c]), delimiter=",", header="a,b,c", comments="")
    return str(path)


def test_causal_takes_data_and_no_option_is_abbreviated(tmp_path, capsys):
    """`certkit causal --data FILE` was taken for --dataset ("invalid choice ... 'sachs'")."""
    path = _csv(tmp_path / "abc.csv")
    assert cli.main(["causal", "--data", path, "--max-components", "1", "--mechanism", "linear"]) == 0
    by_option = capsys.readouterr().out
    assert cli.main(["causal", path, "--max-components", "1", "--mechanism", "linear"]) == 0
    timings = re.compile(r"\d+\.\d s")
    assert timings.sub("", capsys.readouterr().out) == timings.sub("", by_option)  # the positional FILE too
    assert "60 samples x 3 variables" in by_option
    for argv, command, unknown in [
        (["causal", "--data", path, "--lo"], "causal", "--lo"),  # --log's prefix
        (["mibp", "--epoch", "1"], "mibp", "--epoch 1"),
        (["demo", "--se", "3"], "demo", "--se 3"),
        (["conformal", "--conf", "0.8"], "conformal", "--conf 0.8"),
    ]:
        with pytest.raises(SystemExit) as exc:
            cli.main(argv)
        assert exc.value.code == 2
        assert capsys.readouterr().err == f"certkit {command}: error: unrecognized arguments: {unknown}\n"


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["mibp", "--weights", ""], "--weights"),
        (["mibp", "--output", ""], "--output"),
        (["mibp", "--data", ""], "--data"),
        (["performative", "--data", ""], "--data"),
        (["ope", "--data", ""], "--data"),  # was: the simulated data, silently
        (["circuits", "--data", ""], "--data/--scores"),  # was: the synthetic scores, silently
        (["circuits", "--scores", ""], "--data/--scores"),
        (["conformal", "--data", ""], "--data"),
        (["causal", "--data", ""], "--data"),
        (["causal", ""], "FILE"),
    ],
)
def test_an_empty_file_name_is_refused_naming_its_option(capsys, argv, option):
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    assert exc.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        f"certkit {argv[0]}: error: argument {option}: expected a file name, got an empty string\n"
    )


def test_a_file_that_cannot_be_opened_is_named_with_its_option(tmp_path, capsys):
    missing = str(tmp_path / "missing")
    for argv, option in [
        (["mibp", "--weights", missing], "--weights "),
        (["mibp", "--data", missing], "--data "),
        (["performative", "--data", missing], "--data "),
        (["ope", "--data", missing], "--data "),
        (["circuits", "--scores", missing], "--data "),
        (["conformal", "--data", missing], "--data "),
        (["causal", "--data", missing], "--data "),
        (["causal", missing], ""),  # the positional FILE: its path alone
    ]:
        assert cli.main(argv) == 2, argv
        captured = capsys.readouterr()
        expected = f"certkit {argv[0]}: error: {option}{missing}: No such file or directory\n"
        assert captured.err == expected, argv


def test_an_output_that_cannot_be_written_is_refused_before_training(tmp_path, capsys, monkeypatch):
    """`--output` to a path that could not be written trained first, then failed naming neither."""
    import certkit.mibp as mibp

    def no_training(*args, **kwargs):
        raise AssertionError("trained before checking --output")

    monkeypatch.setattr(mibp, "certified_training", no_training)
    unwritable = "/proc/certkit-results.json"  # no file can be made there, even by root
    if not Path("/proc/self").is_dir():
        pytest.skip("needs Linux's /proc")
    assert cli.main(["mibp", "--output", unwritable]) == 2
    assert capsys.readouterr().err == (
        f"certkit mibp: error: --output '{unwritable}' cannot be written: No such file or directory\n"
    )
    for path, reason in [
        (tmp_path, "is a directory; name a file, e.g. results.json"),
        (tmp_path / "none" / "r.json", f": the directory {tmp_path / 'none'} does not exist"),
    ]:
        assert cli.main(["mibp", "--output", str(path)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"certkit mibp: error: --output '{path}'") and reason in err
    # the check leaves a file it made no trace, and an existing file as it was
    new, old = tmp_path / "new.json", tmp_path / "old.json"
    old.write_text("kept")
    for path in (new, old):
        with pytest.raises(AssertionError, match="trained before"):
            cli.main(["mibp", "--output", str(path)])
    assert not new.exists() and old.read_text() == "kept"
