"""The documentation (docs/, Sphinx + autodoc + numpydoc) builds offline with warnings as
errors, every page and every public module is in it, and its code examples are the README's."""

from __future__ import annotations

import importlib.util
import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest

import codedcomputing as cc

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

GUIDE = [
    "index",
    "getting-started",
    "codes",
    "runtime",
    "lambda",
    "own-code",
    "adversaries",
    "gradient-coding",
    "reproducing",
]
# The API pages and the modules each must document (``id="module-..."`` anchors).
API = {
    "codedcomputing": ["codedcomputing"],
    "codes": ["codedcomputing.codes"],
    "spline": ["codedcomputing.spline"],
    "tuning": ["codedcomputing.tuning"],
    "testing": ["codedcomputing.testing"],
    "adversaries": ["codedcomputing.adversaries"],
    "runtime": ["codedcomputing.runtime", "codedcomputing.runtime.delays", "codedcomputing.runtime.faults"],
    "gradient_coding": ["codedcomputing.gradient_coding", "codedcomputing.gradient_coding.training"],
    "datasets": ["codedcomputing.datasets"],
    "models": ["codedcomputing.models"],
    "metrics": ["codedcomputing.metrics"],
    "stragglers": ["codedcomputing.stragglers"],
    "points": ["codedcomputing.points"],
    "layout": ["codedcomputing.layout"],
    "errors": ["codedcomputing.errors"],
    "experiments": ["codedcomputing.experiments"],
    "reproduce": ["codedcomputing.reproduce", "codedcomputing.reproduce.claims"],
}


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    missing = [name for name in ("sphinx", "numpydoc") if importlib.util.find_spec(name) is None]
    assert not missing, f"{missing} not installed: pip install -e '.[dev]'"
    out = tmp_path_factory.mktemp("docs") / "html"
    command = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-b", "html", str(DOCS), str(out)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"sphinx failed ({done.returncode}):\n{done.stderr[-6000:]}"
    return out


def _ids(html: str) -> set[str]:
    return set(re.findall(r'id="([^"]+)"', html))


@pytest.mark.slow
def test_the_docs_build_without_warnings_and_hold_every_page(built):
    for page in GUIDE:
        assert (built / f"{page}.html").is_file(), f"{page}.rst was not built"
    assert not (built / "design").exists(), "docs/design/ (markdown notes) must stay out of the site"
    api_ids = set()
    for page, modules in API.items():
        path = built / "api" / f"{page}.html"
        assert path.is_file(), f"api/{page}.rst was not built"
        ids = _ids(path.read_text(encoding="utf-8"))
        for module in modules:
            assert f"module-{module}" in ids, f"api/{page} does not document the module {module}"
        api_ids |= ids
    assert "codedcomputing.GCC" in _ids((built / "api" / "codedcomputing.html").read_text(encoding="utf-8"))
    gradient_ids = _ids((built / "api" / "gradient_coding.html").read_text(encoding="utf-8"))
    assert "codedcomputing.gradient_coding.CyclicRepetition" in gradient_ids
    assert "codedcomputing.gradient_coding.GradientCode.decoding_weights" in gradient_ids
    # every class and function of the top-level namespace, and every module it re-exports
    for name in cc.__all__:
        value = getattr(cc, name)
        if inspect.ismodule(value):
            assert f"module-{value.__name__}" in api_ids, f"cc.{name} ({value.__name__}) has no API page"
        elif inspect.isclass(value) or inspect.isfunction(value):
            assert f"codedcomputing.{name}" in api_ids, f"cc.{name} is not in the API reference"
    # numpydoc turned GCC's Parameters section into a field list of the parameters
    top = (built / "api" / "codedcomputing.html").read_text(encoding="utf-8")
    gcc = top[top.index('id="codedcomputing.GCC"') : top.index('id="codedcomputing.BACC"')]
    assert '<dt class="field-odd">Parameters' in gcc and "<strong>lambda_enc</strong>" in gcc


def _python_blocks(text: str) -> list[str]:
    """The bodies of the ``.. code-block:: python`` directives of a reST page."""
    blocks = []
    for match in re.finditer(r"^\.\. code-block:: python\n((?:\n|   .*\n|[ \t]*\n)+)", text, re.MULTILINE):
        blocks.append(match.group(1))
    return blocks


def test_the_guide_s_python_examples_are_the_readme_s():
    """The guide's examples are copied from the README, whose examples tests/test_readme.py
    runs: a line that the README no longer has is an example that may no longer be true.
    Import lines the README does not have are run instead."""
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    checked = 0
    for page in GUIDE:
        for block in _python_blocks((DOCS / f"{page}.rst").read_text(encoding="utf-8")):
            for line in block.splitlines():
                line = " ".join(line.split())
                if not line:
                    continue
                if line not in readme and line.startswith(("import ", "from ")):
                    exec(line, {})
                else:
                    assert line in readme, f"docs/{page}.rst: {line!r} is not in the README"
                checked += 1
    assert checked > 40
