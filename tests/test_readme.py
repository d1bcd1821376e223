"""The README's code is true: its Python block runs, and its two set-up commands are the ones CI uses."""

import re
from pathlib import Path

import pytest

README_PATH = Path(__file__).resolve().parents[1] / "README.md"
README = README_PATH.read_text()


def test_readme_python_block_runs(capsys):
    blocks = re.findall(r"```python\n(.*?)```", README, flags=re.DOTALL)
    assert len(blocks) == 1
    exec(compile(blocks[0], "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert "certified included" in out


def test_readme_has_exactly_two_setup_commands():
    commands = re.findall(r"^python3 -m venv .*$", README, flags=re.MULTILINE)
    assert len(commands) == 2
    assert commands[0].endswith("certkit demo")
    assert commands[1].endswith("python -m pytest -n 2")
    assert all("torch==2.13.0" in c for c in commands)


def test_readme_says_which_extras_need_torch_and_how_to_get_the_cpu_build():
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    pyproject = tomllib.loads((README_PATH.parent / "pyproject.toml").read_text())
    extras = pyproject["project"]["optional-dependencies"]

    def needs_torch(name, seen=()):
        deps = extras[name]
        nested = [n for dep in deps if dep.startswith("certkit[") for n in dep[8:-1].split(",")]
        return any(dep.startswith("torch") for dep in deps) or any(
            needs_torch(n, (*seen, name)) for n in nested if n not in seen
        )

    torch_extras = {name for name in extras if needs_torch(name)}
    assert torch_extras == {"torch", "all", "test"}
    paragraph = README[README.index("**torch is optional.**"):]
    paragraph = paragraph[:paragraph.index("## ")]
    for name in torch_extras:
        assert f"`{name}`" in paragraph
    assert "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu" in paragraph


def test_readme_and_datasets_docs_agree_on_where_the_data_comes_from():
    datasets_doc = (README_PATH.parent / "docs" / "datasets.md").read_text()
    assert "Read from the files bundled with scikit-learn" in datasets_doc
    assert "all embedded" not in README
    assert "read from scikit-learn's bundled copies" in README


def test_user_docs_describe_the_product_not_its_history():
    docs = README_PATH.parent / "docs"
    for page in ("kernels.md", "mibp.md"):
        text = (docs / page).read_text()
        for phrase in ("used to", "(before)", "(after)", "aimed for", "in the issue", "previous kernel"):
            assert phrase not in text, f"docs/{page} says {phrase!r}"


def test_readme_says_how_long_the_tests_take_and_how_to_run_a_fast_subset():
    """Issue 43 item 9: the test command said neither how long it runs nor how to run a part of it first."""
    setup = README[README.index("## Set up"):README.index("## Capabilities")]
    assert re.search(r"The whole suite takes about \d+ minutes on two free cores", setup)
    subsets = re.findall(r"`python -m pytest -n 2 ([^`]+)`", setup)
    assert subsets and all(part.startswith(("tests/", "-m")) for part in subsets)
    for path in (p for subset in subsets for p in subset.split() if p.startswith("tests/")):
        assert (README_PATH.parent / path).exists(), path
    assert '-m "not slow"' in subsets
    pyproject = (README_PATH.parent / "pyproject.toml").read_text()
    assert '"slow: ' in pyproject  # the marker the subset leaves out is registered
