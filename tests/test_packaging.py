"""The package as installed: license metadata the declared build backend writes, the license
file, and the typing marker."""

from __future__ import annotations

import importlib.metadata
import importlib.resources
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]


def test_the_installed_metadata_carries_the_license():
    metadata = importlib.metadata.metadata("codedcomputing")
    assert metadata["License-Expression"] == "MIT"
    assert "LICENSE" in (metadata.get_all("License-File") or [])
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")


def test_the_build_backend_is_new_enough_for_that_metadata():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    requires = project["build-system"]["requires"]
    assert any(r.replace(" ", "").startswith("setuptools>=") for r in requires)
    minimum = next(r for r in requires if r.startswith("setuptools")).split(">=")[1]
    assert int(minimum.split(".")[0]) >= 77  # PEP 639 (license expressions) arrived in 77


def test_the_package_is_marked_typed():
    assert importlib.resources.files("codedcomputing").joinpath("py.typed").is_file()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "py.typed" in project["tool"]["setuptools"]["package-data"]["codedcomputing"]


def test_the_citation_file_names_the_version_and_every_paper_the_readme_cites():
    import yaml  # installed with the ray extra, which the README's install includes

    from codedcomputing import __version__

    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert citation["cff-version"] == "1.2.0" and citation["version"] == __version__
    assert citation["license"] == "MIT" and citation["authors"]
    readme = (ROOT / "README.md").read_text()
    citing = readme[readme.index("## Citing") :]
    for reference in citation["references"]:
        assert reference["title"] and reference["authors"] and reference["type"]
        assert reference["title"].lower()[:40] in citing.lower(), reference["title"]
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert f"## [{__version__}]" in changelog
