"""Every Python block of README.md and docs/*.md runs as written, as a script (``python block.py``).

The blocks are read from the pages when the tests are collected, so a new or changed block is tested
without touching this file. Each runs in a fresh interpreter from an empty directory (so process pools,
which re-import the main script, behave as they do for a user). A block that takes minutes is marked
slow by the line ``<!-- docs-test: slow -->`` (invisible in the rendered page) just above its fence.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SLOW_MARK = "<!-- docs-test: slow -->"
#: Fences opening a Python block (```python, ```py, ```python3, with or without options after them).
_FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?:python3?|py)\b[^\n]*\n(?P<code>.*?)^(?P=indent)```[ \t]*$",
                    re.MULTILINE | re.DOTALL)
#: Per-block limit: a hung block fails instead of stalling CI.
TIMEOUT = 900


def python_blocks(text: str) -> list[tuple[int, str, bool]]:
    """``(line of the opening fence, code, marked slow)`` of every Python block of a Markdown page."""
    blocks = []
    for match in _FENCE.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        before = text[: match.start()].rstrip().splitlines()
        slow = bool(before) and before[-1].strip() == SLOW_MARK
        blocks.append((line, textwrap.dedent(match.group("code")), slow))
    return blocks


def _params() -> list:
    params = []
    for page in PAGES:
        for line, code, slow in python_blocks(page.read_text(encoding="utf-8")):
            name = f"{page.relative_to(ROOT).as_posix()}:{line}"
            params.append(pytest.param(name, code, id=name, marks=[pytest.mark.slow] if slow else []))
    return params


BLOCKS = _params()


def test_the_blocks_are_found():
    names = [p.values[0] for p in BLOCKS]
    assert any(n.startswith("README.md:") for n in names)
    assert len({n.split(":")[0] for n in names}) >= 10  # README and most pages have examples
    sample = "Text\n\n<!-- docs-test: slow -->\n```python\nx = 1\n```\n\n  ```py\n  y = 2\n  ```\n"
    sample += "```bash\nls\n```\n"
    assert python_blocks(sample) == [(4, "x = 1\n", True), (8, "y = 2\n", False)]


@pytest.mark.parametrize(("name", "code"), BLOCKS)
def test_block_runs_as_a_script(name, code, tmp_path):
    script = tmp_path / "block.py"
    script.write_text(code, encoding="utf-8")
    env = {**os.environ, "MPLBACKEND": "Agg"}  # a block that plots saves or shows without a display
    try:
        done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the block at {name} ran for more than {TIMEOUT} s")
    assert done.returncode == 0, (
        f"the block at {name} failed as a script (exit status {done.returncode}):\n{done.stderr[-3000:]}"
    )


def test_cli_page_lists_every_demo_section():
    from certkit.cli import _load_commands

    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    sentence = re.search(r"`--only` takes[^.]*\.", text, re.DOTALL)
    assert sentence is not None, "docs/cli.md no longer says what --only takes"
    listed = set(re.findall(r"`(\w+)`", sentence.group(0)))
    assert listed == {mod.NAME for mod in _load_commands()}


def test_index_links_every_capability_page():
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    block = re.search(r"^( *)- Capabilities:\n((?:\1 +.*\n)+)", nav, re.MULTILINE)
    assert block is not None, "mkdocs.yml has no Capabilities section"
    pages = re.findall(r":\s*(\S+\.md)\s*$", block.group(2), re.MULTILINE)
    assert len(pages) >= 6
    index = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    assert [p for p in pages if f"]({p})" not in index] == []
