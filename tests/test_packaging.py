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


def test_the_core_requires_numpy_scipy_and_threadpoolctl_and_the_cli_is_an_extra():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = sorted(r.split(">")[0].split("=")[0].split("[")[0] for r in project["dependencies"])
    assert core == ["numpy", "scipy", "threadpoolctl"]
    extras = project["optional-dependencies"]
    assert sorted(r.split(">")[0] for r in extras["cli"]) == ["rich", "typer"]
    # the README's install (.[dev,torch,ray,plot,models]) keeps the command line
    assert "codedcomputing[cli]" in extras["dev"]
    assert "cli" in extras["all"][0].split("[")[1].rstrip("]").split(",")


def test_the_coded_entry_point_is_the_one_that_names_the_missing_extra():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["scripts"]["coded"] == "codedcomputing.__main__:main"
    installed = [e for e in importlib.metadata.entry_points(group="console_scripts") if e.name == "coded"]
    # a stale install (pip install -e . not rerun after pyproject changed) fails here
    assert [e.value for e in installed] == ["codedcomputing.__main__:main"]
