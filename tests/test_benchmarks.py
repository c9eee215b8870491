"""The benchmark scripts: each compiles, imports only the library, third-party packages and
the shared ``benchmarks/common.py`` (no script imports another or the tests), defines none of
the shared helpers again, and is listed in ``benchmarks/README.md``; the shared helpers'
intervals hold what they promise. Reads the scripts as text: runs none of them."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import numpy as np
import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
SCRIPTS = sorted([*BENCHMARKS.glob("perf/*.py"), *BENCHMARKS.glob("studies/*.py")])
# Helpers the library or common.py provides; a script that writes its own copy duplicates it.
PROVIDED_ELSEWHERE = {"golden_stride", "simplex_lsq", "simplex_weights", "load_baseline"}
# Module names a script must not import: the other scripts and the tests' modules.
OWN_MODULES = {p.stem for p in SCRIPTS} | {p.stem for p in (BENCHMARKS.parent / "tests").rglob("*.py")}


def _load_common():
    spec = importlib.util.spec_from_file_location("benchmarks_common", BENCHMARKS / "common.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


common = _load_common()
SHARED = {
    node.name
    for node in ast.parse((BENCHMARKS / "common.py").read_text()).body
    if isinstance(node, ast.FunctionDef) and not node.name.startswith("_")
}


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def _top_modules(tree: ast.Module) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            raise AssertionError(f"line {node.lineno}: a relative import")
    return names


def test_the_scripts_are_found():
    assert len(SCRIPTS) >= 30
    assert {path.parent.name for path in SCRIPTS} == {"perf", "studies"}


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_script_compiles_and_imports_only_the_library_and_common(path):
    source = path.read_text()
    compile(source, str(path), "exec")
    tree = ast.parse(source)
    assert ast.get_docstring(tree), "a script says in its docstring what it measures and how to run it"
    for name in _top_modules(tree):
        if name in ("codedcomputing", "common", "__future__"):
            continue
        assert name not in OWN_MODULES, f"imports {name}: share code through common.py or the library"
    if "common" in _top_modules(tree):
        assert "sys.path.insert(0, str(Path(__file__).resolve().parents[1]))" in source


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_script_defines_none_of_the_shared_helpers(path):
    defined = {
        node.name
        for node in _tree(path).body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    }
    assert not defined & (SHARED | PROVIDED_ELSEWHERE), "import it from common.py or the library"


def test_no_helper_is_written_twice():
    """No two scripts hold a top-level function with the same body (docstring aside)."""
    seen: dict[str, str] = {}
    for path in SCRIPTS:
        for node in _tree(path).body:
            if isinstance(node, ast.FunctionDef) and node.name != "main":
                body = node.body[1:] if ast.get_docstring(node) else node.body
                key = ast.dump(ast.Module(body=body, type_ignores=[]))
                where = f"{path.parent.name}/{path.name}:{node.name}"
                assert key not in seen, f"{where} repeats {seen[key]}"
                seen[key] = where


def test_every_script_is_in_the_index():
    index = (BENCHMARKS / "README.md").read_text()
    missing = [f"{p.parent.name}/{p.name}" for p in SCRIPTS if f"{p.parent.name}/{p.name}" not in index]
    assert not missing


def test_bootstrap_brackets_the_statistic():
    values = np.random.default_rng(1).exponential(size=200)
    median, low, high = common.bootstrap(values, np.median, np.random.default_rng(0))
    assert median == np.median(values)
    assert low < median < high
    mean, low, high = common.bootstrap(values, np.mean)
    assert low < mean < high
    assert common.bootstrap(values, np.mean) == (mean, low, high)  # seeded by default
    with pytest.raises(ValueError, match="values"):
        common.bootstrap(np.ones((3, 2)))


def test_ratio_interval_is_paired():
    rng = np.random.default_rng(2)
    trial = rng.exponential(size=100)  # a shared per-trial difficulty
    ratio, low, high = common.ratio_interval(2 * trial, trial, np.random.default_rng(0))
    assert ratio == pytest.approx(2.0)
    assert (low, high) == pytest.approx((2.0, 2.0))  # paired: the trials' spread cancels
    ratio, low, high = common.ratio_interval(trial, np.zeros(100), np.random.default_rng(0))
    assert ratio == np.inf
    with pytest.raises(ValueError, match="denominator"):
        common.ratio_interval(trial, trial[:10], rng)


def test_interleaved_rotates_the_order_and_times_every_call():
    order = []
    times = common.interleaved(
        {"a": lambda arg: order.append(("a", arg)), "b": lambda arg: order.append(("b", arg))},
        3,
        setup=lambda r: r * 10,
    )
    assert order == [("a", 0), ("b", 0), ("b", 10), ("a", 10), ("a", 20), ("b", 20)]
    assert {name: t.shape for name, t in times.items()} == {"a": (3,), "b": (3,)}
    assert all(np.all(t >= 0) for t in times.values())


def test_random_mlp_is_seeded_and_smooth():
    f = common.random_mlp(np.random.default_rng(3))
    g = common.random_mlp(np.random.default_rng(3))
    x = np.random.default_rng(4).normal(size=(5, 64))
    assert f(x).shape == (5, 10)
    assert np.array_equal(f(x), g(x))
    assert np.max(np.abs(f(x + 1e-6) - f(x))) < 1e-4
