"""Package-level behaviour: version, lazy submodules, the missing-extension message, typing marker."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

import certkit

ROOT = Path(__file__).resolve().parents[1]


def test_version_matches_pyproject():
    match = re.search(r'^version = "([^"]+)"$', (ROOT / "pyproject.toml").read_text(), re.MULTILINE)
    assert match is not None
    assert certkit.__version__ == match.group(1)


def test_py_typed_marker_and_core_stub_ship_with_the_package():
    pkg = Path(certkit.__file__).parent
    assert (pkg / "py.typed").is_file()
    for stub in ("__init__", "rng", "subsample", "votes"):
        assert (pkg / "_core" / f"{stub}.pyi").is_file()


def test_submodules_are_lazy_attributes():
    assert certkit.stats.__name__ == "certkit.stats"
    assert "stats" in dir(certkit)
    with pytest.raises(AttributeError, match="no attribute 'nonexistent'"):
        certkit.nonexistent  # noqa: B018


def test_entry_points_are_reexported():
    from certkit.circuits import certify_circuit
    from certkit.conformal import RCP1Classifier
    from certkit.mibp import certified_training

    assert certkit.certified_training is certified_training
    assert certkit.RCP1Classifier is RCP1Classifier
    assert certkit.certify_circuit is certify_circuit
    assert {"certified_training", "RCP1Classifier", "certify_circuit"} <= set(dir(certkit))


def test_import_without_compiled_core_says_how_to_build():
    code = (
        "import sys\n"
        "sys.modules['certkit._core'] = None\n"  # makes `from certkit import _core` fail
        "import certkit\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode != 0
    assert "certkit._core could not be imported" in proc.stderr
    assert "pip install -e ." in proc.stderr
