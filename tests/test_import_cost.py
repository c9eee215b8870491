"""``import codedcomputing`` stays cheap (so does starting ``coded``): the codes and the spline
engine import scipy's heavy submodules (sparse graphs, spatial, stats, interpolate) inside
the functions that use them, not when the package loads."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "codedcomputing"

# Loaded at first use, never by ``import codedcomputing`` (scipy.stats alone took ~0.3 s,
# scipy.linalg ~0.2 s).
NOT_AT_IMPORT = (
    "scipy.linalg",
    "scipy.sparse",
    "scipy.spatial",
    "scipy.stats",
    "scipy.interpolate",
    "scipy.optimize",
    "scipy.special",
)

# Modules whose own imports may not name scipy at module level: the math core.
CORE = [*sorted((PACKAGE / "codes").glob("*.py")), *sorted((PACKAGE / "spline").glob("*.py"))] + [
    PACKAGE / f"{name}.py" for name in ("points", "_arraylib", "utils", "tuning", "adversaries", "metrics")
]


def test_importing_the_package_loads_no_heavy_scipy_submodule():
    script = "import json, sys, codedcomputing; print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    modules = json.loads(done.stdout)
    assert "codedcomputing.codes.layout" in modules and "codedcomputing.spline.gaps" in modules
    loaded = [name for name in NOT_AT_IMPORT if any(m == name or m.startswith(name + ".") for m in modules)]
    assert loaded == []


def module_level_imports(tree: ast.Module) -> list[str]:
    """The modules imported by the statements that run when the module loads (class bodies
    and ``if``/``try`` blocks included, function bodies and ``if TYPE_CHECKING:`` not)."""
    found, pending = [], list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            found.append(node.module or "")
        elif isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING"):
            pending += node.orelse
        elif isinstance(node, (ast.ClassDef, ast.If, ast.Try, ast.With)):
            pending += [child for child in ast.iter_child_nodes(node) if isinstance(child, ast.stmt)]
    return found


def test_the_codes_and_the_spline_engine_import_scipy_where_they_use_it():
    eager = {
        path.relative_to(PACKAGE).as_posix(): names
        for path in CORE
        if (names := [n for n in module_level_imports(ast.parse(path.read_text())) if n.startswith("scipy")])
    }
    assert eager == {}
