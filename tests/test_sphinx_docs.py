"""The documentation (docs/, Sphinx + autodoc + numpydoc) builds offline with warnings as
errors, and every guide page, design note, results page and public module is in it. (Its code
examples run in tests/test_doc_examples.py.)"""

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
    "parity",
    "frontier",
    "degraded",
    "serving",
    "master-cost",
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
    "layout": ["codedcomputing.codes.layout"],
    "errors": ["codedcomputing.errors"],
    "experiments": ["codedcomputing.experiments"],
    "reproduce": ["codedcomputing.reproduce", "codedcomputing.reproduce.claims"],
}


def _design_in_site() -> bool:
    """Whether docs/conf.py builds docs/design/ (its ``exclude_patterns`` do not name it)."""
    conf = (DOCS / "conf.py").read_text(encoding="utf-8")
    patterns = re.search(r"exclude_patterns\s*=\s*\[(.*?)\]", conf, re.S)
    return not (patterns and re.search(r"[\"']design[\"']", patterns.group(1)))


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
    # the design notes, when the configuration builds them, and the generated results pages
    if _design_in_site():
        for page in sorted((DOCS / "design").glob("*.rst")):
            assert (built / "design" / f"{page.stem}.html").is_file(), f"design/{page.name} was not built"
    if (DOCS / "results" / "index.rst").is_file():
        for page in sorted((DOCS / "results").glob("*.rst")):
            assert (built / "results" / f"{page.stem}.html").is_file(), f"results/{page.name} was not built"
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
