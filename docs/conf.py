"""Sphinx configuration: the user guide (reStructuredText) and an API reference built by
autodoc from the docstrings, parsed by numpydoc. Builds offline (no intersphinx) and is
meant to be built with warnings as errors: ``python -m sphinx -W --keep-going -b html docs OUT``
(``tests/test_sphinx_docs.py`` does so)."""

from __future__ import annotations

import sys
from pathlib import Path

# Document the checkout's source even where the package is not installed from it.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import codedcomputing

project = "codedcomputing"
author = "The codedcomputing developers"
copyright = "2026, The codedcomputing developers"
release = codedcomputing.__version__
version = ".".join(release.split(".")[:2])

extensions = ["sphinx.ext.autodoc", "numpydoc"]

# docs/design/ holds the design notes (reST pages of this site, reached from ``design/index``);
# its markdown files are read on their own (Sphinx reads only .rst here).
# docs/results/ is part of it: pages and figures written by ``coded reproduce --docs docs/results``
# (reached from the root toctree's ``results/index``), not edited by hand.
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]
root_doc = "index"

html_theme = "alabaster"
html_theme_options = {"description": "Approximate coded computing for arbitrary functions"}
html_title = f"codedcomputing {release}"

autodoc_member_order = "bysource"
autodoc_typehints = "none"  # numpydoc's Parameters sections carry the types; signatures stay short
autodoc_class_signature = "mixed"

# The docstrings are mostly prose with numpy sections (Parameters, References, Examples) where a
# class has many options; numpydoc renders those. Members are documented by autodoc, not by
# numpydoc's member tables (which need autosummary stubs); no numpydoc_validation_checks: the
# house style does not give every function every section.
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_attributes_as_param_list = True
numpydoc_xref_param_type = False
