"""The public API: what each module exports (its ``__all__``) is a decision, listed here.

A module's ``__all__`` is what ``from module import *`` gives and what its API page documents;
a name left out of it is private to the library (``docs/design/api-names.rst`` says why each
is in or out). ``python tests/test_public_api.py [SRC]`` prints the names of every public
module of any checkout's ``src`` folder (read from the source, nothing imported) and the
totals: the entries of all ``__all__`` lists, and the distinct names among them.
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import sys
from pathlib import Path

import pytest

PACKAGE = "codedcomputing"
SRC = Path(__file__).resolve().parents[1] / "src"

# The modules whose exports are listed here, each with its exports. The spline's, the codes'
# and the layout's exports are listed by their own tests.
EXPORTS = {
    "codedcomputing": {
        "BACC", "CODES", "GCC", "LCC", "ApproxIFER", "Code", "CodedExecutor", "Decoded",
        "InsufficientResultsError", "ManifoldGCC", "MissingResultsError", "NonFiniteResultWarning",
        "RayCluster", "Replication", "RobustGCC", "SimulatedCluster", "ThreadCluster", "Uncoded",
        "__version__", "adversaries", "datasets", "delays", "errors", "faults", "gradient_coding",
        "metrics", "models", "points", "spline", "stragglers", "tuning",
    },
    "codedcomputing.adversaries": {
        "ATTACKS", "Attack", "Concentrated", "Corruption", "Garbage", "Greedy", "Random", "SignFlip",
        "make_attack",
    },
    "codedcomputing.datasets": {"DATASETS", "Dataset", "digits", "load", "mnist"},
    "codedcomputing.errors": {
        "DamagedCacheWarning", "InsufficientResultsError", "MissingResultsError",
        "MoreInputsThanWorkersWarning", "NonFiniteResultWarning",
    },
    "codedcomputing.experiments": {"EXPERIMENTS", "NotAnExperimentCSV", "redraw", "run_experiment"},
    "codedcomputing.gradient_coding": {
        "EXACT_SCHEMES", "FAULT_KINDS", "SCHEMES", "CyclicRepetition", "FractionalRepetition", "GradientCode",
        "Problem", "Step", "TooManyStragglersError", "simulate", "train_on_cluster",
    },
    "codedcomputing.metrics": {"accuracy", "mse", "relative_accuracy"},
    "codedcomputing.models": {
        "MODELS", "TrainingRecipe", "evaluate", "is_cached", "is_shipped", "load", "numpy_function",
        "train",
        "weights_path",
    },
    "codedcomputing.points": {
        "assignment", "chebyshev_first", "chebyshev_second", "equispaced", "golden_stride",
    },
    "codedcomputing.runtime": {
        "Answers", "Call", "Cluster", "CodedExecutor", "Gathered", "RayCluster", "Report", "Result",
        "SimulatedCluster", "ThreadCluster", "WorkerRecord", "delays", "faults",
    },
    "codedcomputing.runtime.clusters": {"Call", "Cluster", "SimulatedCluster", "ThreadCluster", "run_task"},
    "codedcomputing.runtime.collect": {"Collector", "wait_real_time"},
    "codedcomputing.runtime.delays": {
        "AdditiveExponential", "Bimodal", "BurstyMarkov", "DelayModel", "Pareto", "ShiftedExponential",
        "Trace", "expected_order_statistic",
    },
    "codedcomputing.runtime.executor": {"Answers", "CodedExecutor", "Report", "Result"},
    "codedcomputing.runtime.faults": {
        "KINDS", "Adversarial", "FaultModel", "Fixed", "Independent", "InjectedFault", "corrupt",
    },
    "codedcomputing.runtime.ray_cluster": {"RayCluster"},
    "codedcomputing.runtime.record": {"Gathered", "WorkerRecord"},
    "codedcomputing.serving": {
        "OUTCOMES", "SCHEMES", "Answer", "Coded", "Hedge", "Interference", "NoRedundancy", "ParM",
        "QueryFailed", "QueryTimeout", "RayServer", "ReplicaLost", "Replication", "Scheme", "ServingRecord",
        "SimulatedServer", "ThreadServer", "bursty_arrivals", "can_pin", "drive", "make_scheme",
        "mean_service", "parse_scheme", "poisson_arrivals",
    },
    "codedcomputing.stragglers": {"bernoulli", "contiguous", "random"},
    "codedcomputing.tuning": {"TuningResult", "tune"},
}  # fmt: skip


@functools.cache
def exported(src: Path = SRC) -> dict[str, list[str]]:
    """``{dotted module: its __all__}`` for every public module under ``src`` (no part of its
    name starts with ``_``, ``__init__`` aside) that has an ``__all__``, read from the source."""
    found = {}
    for path in sorted((src / PACKAGE).rglob("*.py")):
        parts = path.relative_to(src).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if any(part.startswith("_") for part in parts):
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            targets = node.targets if isinstance(node, ast.Assign) else []
            if any(isinstance(target, ast.Name) and target.id == "__all__" for target in targets):
                found[".".join(parts)] = list(ast.literal_eval(node.value))
    return found


@pytest.mark.parametrize("module", sorted(EXPORTS))
def test_each_module_exports_the_names_listed(module):
    assert set(exported()[module]) == EXPORTS[module]


@pytest.mark.parametrize("module", sorted(exported()))
def test_every_exported_name_exists_once_and_is_public(module):
    names = exported()[module]
    assert len(names) == len(set(names)), f"{module}.__all__ repeats a name"
    loaded = importlib.import_module(module)
    for name in names:
        assert hasattr(loaded, name), f"{module}.__all__ names {name}, which it does not define"
        assert not name.startswith("_") or name == "__version__", f"{module}.__all__ exports {name}"


@pytest.mark.parametrize("module", sorted(EXPORTS))
def test_an_exported_function_or_class_has_a_docstring(module):
    loaded = importlib.import_module(module)
    for name in EXPORTS[module]:
        value = getattr(loaded, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert inspect.getdoc(value), f"{module}.{name} has no docstring"


def test_the_counting_reads_every_public_module_and_skips_private_ones():
    found = exported()
    assert "codedcomputing" in found and "codedcomputing.runtime.delays" in found
    assert not any(part.startswith("_") for module in found for part in module.split("."))


# -- the names decided (docs/design/api-names.rst) ------------------------------------------


def test_the_three_alive_hold_the_same_workers_in_their_stated_orders():
    """Report.alive: arrival order, the rows of the gathered results; Result.alive and
    Decoded.alive: sorted, without erasures."""
    import numpy as np

    import codedcomputing as cc

    code = cc.GCC(4, 12)
    cluster = cc.SimulatedCluster(delays=cc.delays.ShiftedExponential(rate=1.0, scale=1.0), seed=3)
    X = np.linspace(-1.0, 1.0, 8).reshape(4, 2)
    result = cc.CodedExecutor(code, np.tanh, cluster).run(X, wait_for=9)
    report = result.report
    arrival = report.latency[report.alive]
    assert np.all(np.diff(arrival) >= 0) and not np.all(np.diff(report.alive) > 0)
    np.testing.assert_array_equal(result.alive, np.sort(report.alive))
    np.testing.assert_array_equal(result.alive, report.decoded.alive)
    # a result with NaN is an erasure: the decode's alive leaves it out, sorted
    Y = np.tanh(code.encode(X))[[7, 2, 5, 0, 9]]
    Y[1] = np.nan
    with pytest.warns(cc.NonFiniteResultWarning):
        decoded = code.decode_details(Y, [7, 2, 5, 0, 9])
    assert decoded.alive.tolist() == [0, 5, 7, 9] and decoded.erased.tolist() == [2]


def test_a_straggler_pattern_returns_the_workers_that_return():
    import codedcomputing as cc

    assert len(cc.stragglers.random(50, 5, rng=0)) == 45
    assert cc.stragglers.contiguous(10, 3, rng=0).size == 7
    assert cc.stragglers.bernoulli(10, 0.0, rng=0).tolist() == list(range(10))


def test_points_assignment_is_told_its_kind_and_gradient_coding_has_no_codes_registry():
    import codedcomputing as cc

    with pytest.raises(TypeError, match="kind"):
        cc.points.assignment(5)  # the codes' defaults differ (natural; ManifoldGCC golden)
    assert cc.points.assignment(5, "natural").tolist() == [0, 1, 2, 3, 4]
    assert cc.GCC(4, 12).get_params()["assignment"] == "natural"
    assert not hasattr(cc.gradient_coding, "CODES") and "gcc" in cc.CODES


def main(argv: list[str]) -> None:
    found = exported(Path(argv[0]) if argv else SRC)
    for module, names in found.items():
        print(f"{len(names):4d} {module}: {' '.join(names)}")
    total = sum(len(names) for names in found.values())
    distinct = len({name for names in found.values() for name in names})
    print(f"{total} names exported in {len(found)} modules' __all__ ({distinct} distinct)")


if __name__ == "__main__":
    main(sys.argv[1:])
