"""The README's code is true: its Python block runs, and its two set-up commands are the ones CI uses."""

import re
from pathlib import Path

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


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
