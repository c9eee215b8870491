"""What ``codedcomputing.codes`` and the modules of the codes in this folder export (their
``__all__``): the codes and the names a user passes to them; helpers the codes share (argument
checks, re-exported spline functions) are not exported."""

from __future__ import annotations

import importlib

import pytest

EXPORTS = {
    "codedcomputing.codes": {
        "BACC", "CODES", "GCC", "LCC", "ApproxIFER", "Code", "Decoded", "ManifoldGCC", "Replication",
        "RobustGCC", "Uncoded",
    },
    "codedcomputing.codes.approxifer": {"ApproxIFER"},
    "codedcomputing.codes.bacc": {"BACC"},
    "codedcomputing.codes.base": {"PARITIES", "Code", "Decoded", "systematic_points"},
    "codedcomputing.codes.baselines": {"Replication", "Uncoded"},
    "codedcomputing.codes.gcc": {"DECODINGS", "GCC"},
    "codedcomputing.codes.input_space": {"AMPLITUDE", "LENGTH", "RIDGE", "kernel_estimates", "kernel_map"},
    "codedcomputing.codes.lcc": {"LCC", "lagrange_matrix"},
}  # fmt: skip


@pytest.mark.parametrize("module", sorted(EXPORTS))
def test_each_codes_module_exports_what_users_call(module):
    loaded = importlib.import_module(module)
    assert set(loaded.__all__) == EXPORTS[module]
    assert all(hasattr(loaded, name) for name in loaded.__all__)
