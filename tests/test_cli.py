"""The certkit command line: --version, demo, python -m certkit, errors."""

import re
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
    assert "certkit demo: unknown section 'nonexistent'" in proc.stderr
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
    assert re.search(r"two-sided\s+0\.95\s+0\.9817\s+0\.9952", text)
    # c[0.9, 0.25] with sigma = 0.25: Phi(Phi^-1(0.9) - 1) = 0.6109
    assert re.search(r"gaussian\s+0\.9\s+0\.811\s+0\.6109\s+0\.2362", text)
    # uniform: 0.9 - r / (2 sqrt(3) 0.25)
    assert re.search(r"uniform\s+0\.9\s+0\.7845\s+0\.6113\s+0\.3226", text)
    assert "0.960927" in text  # RCP1 level Phi(Phi^-1(0.9) + 0.12 / 0.25)
    assert re.search(r"\n\s+8\s+9\s+inf\s+9", text)  # n = 8: rank 9 > 8 -> inf
    assert _demo_foundation.demo(np.random.default_rng(0)) == text
