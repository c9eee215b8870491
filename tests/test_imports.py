"""The package's imports run one way: helpers -> spline -> codes -> tuning -> runtime ->
gradient_coding -> experiments -> reproduce -> cli, with no cycle, lazy imports inside functions included.

The graph is read from the source (AST), so an import that a test run never reaches counts
too. ``python tests/test_imports.py [SRC]`` prints the cycles and the imports against the
layers of any checkout's ``src`` folder.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = "codedcomputing"
SRC = Path(__file__).resolve().parents[1] / "src"

# The first component below the package -> its layer. A module may import its own layer or
# lower ones, never a higher one.
LAYERS = {
    "_version": 0,
    "_validation": 0,
    "_arraylib": 0,
    "_progress": 0,
    "errors": 0,
    "cache": 0,
    "utils": 0,  # the array helpers published for code authors (issue 25, section 5)
    "points": 1,
    "stragglers": 1,
    "metrics": 1,
    "datasets": 1,
    "models": 1,
    "spline": 2,
    "codes": 3,
    "testing": 4,
    "adversaries": 4,
    "tuning": 4,
    "runtime": 5,
    "gradient_coding": 6,  # training with gradient codes runs on the runtime's clusters
    "serving": 6,  # a query stream on replicas: schemes on the runtime's delay models and the codes
    "experiments": 7,
    "reproduce": 8,  # runs every experiment and reports on the papers' claims
    "cli": 9,
    "__main__": 9,  # the coded entry point: it imports the cli
    "": 9,  # the package's own __init__: it gathers everything
}


def modules(src: Path) -> dict[str, Path]:
    """``{dotted module name: file}`` for every module of the package under ``src``."""
    found = {}
    for path in sorted((src / PACKAGE).rglob("*.py")):
        parts = path.relative_to(src).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The package's modules that module ``name`` imports, at any depth of its code."""
    is_package = path.name == "__init__.py"
    here = name if is_package else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here.split(".")
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            # ``from pkg import sub`` imports the submodule ``pkg.sub`` when there is one
            targets = [
                f"{module}.{alias.name}" if f"{module}.{alias.name}" in known else module
                for alias in node.names
            ]
        else:
            continue
        for target in targets:
            while target and target not in known:  # ``import a.b.c`` of a name inside a module
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def graph(src: Path = SRC) -> dict[str, set[str]]:
    known = modules(src)
    return {name: imports(name, path, known) for name, path in known.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(edges[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def layer(module: str) -> int:
    parts = module.split(".")
    return LAYERS[parts[1] if len(parts) > 1 else ""]


def upward(edges: dict[str, set[str]]) -> list[str]:
    """Imports from a lower layer into a higher one."""
    return sorted(
        f"{source} (layer {layer(source)}) imports {target} (layer {layer(target)})"
        for source, targets in edges.items()
        for target in targets
        if layer(target) > layer(source)
    )


def test_every_module_has_a_layer():
    unknown = {name.split(".")[1] for name in modules(SRC) if "." in name} - set(LAYERS)
    assert not unknown, f"give these a layer in LAYERS: {sorted(unknown)}"


def test_every_layer_names_a_module():
    present = {name.split(".")[1] if "." in name else "" for name in modules(SRC)}
    assert set(LAYERS) - present == set(), "LAYERS names modules that are gone"


def test_the_import_graph_has_no_cycle():
    assert cycles(graph()) == []


def test_imports_point_down_the_layers():
    assert upward(graph()) == []


def test_the_reader_sees_lazy_and_relative_imports(tmp_path):
    package = tmp_path / PACKAGE
    (package / "codes").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "tuning.py").write_text("from .codes import gcc\n")
    (package / "codes" / "__init__.py").write_text("from .gcc import GCC\n")
    (package / "codes" / "gcc.py").write_text("def decode():\n    from ..tuning import tune\n")
    edges = graph(tmp_path)
    assert edges[f"{PACKAGE}.codes.gcc"] == {f"{PACKAGE}.tuning"}
    assert edges[f"{PACKAGE}.tuning"] == {f"{PACKAGE}.codes.gcc"}
    assert cycles(edges) == [[f"{PACKAGE}.codes.gcc", f"{PACKAGE}.tuning"]]
    assert upward(edges) == [f"{PACKAGE}.codes.gcc (layer 3) imports {PACKAGE}.tuning (layer 4)"]


if __name__ == "__main__":
    edges = graph(Path(sys.argv[1]) if len(sys.argv) > 1 else SRC)
    print(f"{len(edges)} modules, {sum(map(len, edges.values()))} imports")
    print("cycles:", cycles(edges) or "none")
    print("against the layers:", *(upward(edges) or ["none"]), sep="\n  ")
