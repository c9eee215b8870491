"""Every python example of the README and of the guide pages runs as written.

Each ```` ```python ```` block of ``README.md`` (and of ``docs/design/*.md``) and each
``.. code-block:: python`` block of ``docs/*.rst`` and ``docs/design/*.rst`` is written to a
file and run by a fresh interpreter in an empty temporary folder, and must exit with status 0
within a bounded time. A block is complete on its own: it imports what it uses and defines its
own ``f``, ``X`` and data. Blocks that start Ray, load or train a model, or run experiments are
in the slow tier (found from their text, or by a ``# doc-example: slow`` comment); the rest are
in the fast one and should run in seconds.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

# Every block runs as a script of its own (imports, models, plots): 11 s together on an idle
# 2-core machine, so the module is in the slow tier.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

FAST_TIMEOUT_S = 180
SLOW_TIMEOUT_S = 1200
# Text that marks a block as slow: Ray, a trained model (trained on first use), the experiments.
SLOW_MARKS = (
    "# doc-example: slow",
    "RayCluster",
    "RayServer",
    "import ray",
    "models.load(",
    "numpy_function(",
    "reproduce(",
    "run_experiment(",
)


def _markdown_blocks(text: str) -> list[tuple[int, str]]:
    """``(line, body)`` of every fenced python block of a markdown text."""
    blocks = []
    for match in re.finditer(r"^```python\n(.*?)^```", text, re.S | re.M):
        blocks.append((text.count("\n", 0, match.start()) + 1, match.group(1)))
    return blocks


def _rst_blocks(text: str) -> list[tuple[int, str]]:
    """``(line, body)`` of every ``.. code-block:: python`` directive of a reST text: its
    indented body, without the directive's options (``:caption:`` and the like)."""
    blocks = []
    pattern = r"^([ \t]*)\.\. code-block:: python[ \t]*\n((?:[ \t]*\n|\1[ \t]+.*\n)+)"
    for match in re.finditer(pattern, text, re.M):
        lines = match.group(2).splitlines()
        while lines and re.match(r"^\s+:[\w-]+:", lines[0]):
            lines.pop(0)
        body = textwrap.dedent("\n".join(lines)).strip("\n")
        if body:
            blocks.append((text.count("\n", 0, match.start()) + 1, body + "\n"))
    return blocks


def _pages() -> list[Path]:
    pages = [ROOT / "README.md", *sorted(DOCS.glob("*.rst"))]
    design = DOCS / "design"
    if design.is_dir():
        pages += sorted(design.glob("*.rst")) + sorted(design.glob("*.md"))
    return pages


def collect() -> list[tuple[str, str]]:
    """``(where, body)`` of every python example: ``where`` is ``path:line``."""
    examples = []
    for page in _pages():
        text = page.read_text(encoding="utf-8")
        blocks = _markdown_blocks(text) if page.suffix == ".md" else _rst_blocks(text)
        examples += [(f"{page.relative_to(ROOT).as_posix()}:{line}", body) for line, body in blocks]
    return examples


def is_slow(body: str) -> bool:
    """Whether the block's code (not its comments, which may mention Ray as an alternative)
    carries a slow mark, or the block has the explicit marker comment."""
    code = "\n".join(line.split("#", 1)[0] for line in body.splitlines())
    return SLOW_MARKS[0] in body or any(mark in code for mark in SLOW_MARKS[1:])


EXAMPLES = collect()


def _params():
    for where, body in EXAMPLES:
        marks = [pytest.mark.slow] if is_slow(body) else []
        yield pytest.param(where, body, id=where, marks=marks)


def test_the_collector_finds_the_readme_and_guide_examples():
    """The README has python examples, and each kind of page is read (a regex that stopped
    matching would otherwise pass the runner below with nothing to run)."""
    where = [w for w, _ in EXAMPLES]
    assert sum(w.startswith("README.md:") for w in where) >= 1
    assert sum(w.startswith("docs/") for w in where) >= 4
    assert any(not is_slow(body) for _, body in EXAMPLES)


def test_only_code_marks_a_block_slow():
    assert not is_slow("import codedcomputing as cc\n# cluster = cc.RayCluster()\n")
    assert is_slow("import codedcomputing as cc\ncluster = cc.RayCluster()\n")
    assert is_slow("# doc-example: slow\nprint(1)\n")


def test_the_rst_collector_takes_the_body_without_options():
    text = ".. code-block:: python\n   :caption: a\n\n   import math\n   print(math.pi)\n\nAfter.\n"
    assert _rst_blocks(text) == [(1, "import math\nprint(math.pi)\n")]
    assert _markdown_blocks("x\n```python\nprint(1)\n```\n") == [(2, "print(1)\n")]


@pytest.mark.parametrize(("where", "body"), list(_params()))
def test_the_example_runs(where, body, tmp_path):
    script = tmp_path / "example.py"
    script.write_text(body, encoding="utf-8")
    env = {**os.environ, "MPLBACKEND": "Agg", "PYTHONDONTWRITEBYTECODE": "1"}
    timeout = SLOW_TIMEOUT_S if is_slow(body) else FAST_TIMEOUT_S
    try:
        done = subprocess.run(
            [sys.executable, str(script)],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{where}: the example ran past {timeout} s")
    assert done.returncode == 0, (
        f"{where}: the example exited with {done.returncode}\n"
        f"--- stdout ---\n{done.stdout[-3000:]}\n--- stderr ---\n{done.stderr[-6000:]}"
    )
