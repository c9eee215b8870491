"""The docstrings' examples run, and the verbs every code shares are documented where
``help()`` looks."""

from __future__ import annotations

import doctest
import importlib

import pytest

import codedcomputing as cc

DOCUMENTED = [
    "codedcomputing.codes.base",
    "codedcomputing.codes.gcc",
    "codedcomputing.codes.bacc",
    "codedcomputing.codes.lcc",
    "codedcomputing.codes.baselines",
    "codedcomputing.codes.robust",
    "codedcomputing.codes.approxifer",
    "codedcomputing.codes.manifold",
    "codedcomputing.gradient_coding.codes",
]


@pytest.mark.parametrize("module", DOCUMENTED)
def test_docstring_examples_run(module):
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
    assert result.attempted > 0, f"{module} has no example"


@pytest.mark.parametrize("cls", list(cc.CODES.values()), ids=list(cc.CODES))
def test_every_code_documents_its_verbs_parameters_references_and_an_example(cls):
    for verb in ("encode", "decode", "decode_details"):
        doc = getattr(cls, verb).__doc__ or ""
        assert "Returns" in doc or "returning" in doc, f"{cls.__name__}.{verb} has no numpydoc"
    assert "Parameters" in cls.__doc__ and "Examples" in cls.__doc__
    if cls.name in ("gcc", "bacc", "lcc", "robust-gcc", "approxifer"):
        assert "References" in cls.__doc__
