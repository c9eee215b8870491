"""Every module of the package whose docstrings have examples runs them as doctests.

The modules are found by walking the package's folders (:func:`pkgutil.iter_modules`, the
walk :func:`pkgutil.walk_packages` does, without importing anything at collection) and keeping
those whose source holds a ``>>>`` prompt; each is then imported and run by :mod:`doctest`. A
module that needs an optional dependency (an extra of ``pyproject.toml``) that is not installed
is skipped, naming it; any other import error fails.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil
import sys
from pathlib import Path

import pytest

import codedcomputing

# The top-level import names of the optional extras in pyproject.toml (cli, torch, ray, plot,
# models, serve); the core needs numpy and scipy alone.
OPTIONAL = frozenset(
    {"typer", "rich", "torch", "ray", "matplotlib", "mlxtend", "sklearn", "starlette", "uvicorn", "orjson"}
)
OPTIONFLAGS = doctest.NORMALIZE_WHITESPACE


def all_modules(path=codedcomputing.__path__, prefix="codedcomputing.") -> dict[str, Path]:
    """Every module of the package, by dotted name, with its source file; none is imported."""
    found = {}
    for info in pkgutil.iter_modules(path, prefix):
        folder = Path(info.module_finder.path)
        short = info.name.rpartition(".")[2]
        if info.ispkg:
            found[info.name] = folder / short / "__init__.py"
            found.update(all_modules([str(folder / short)], info.name + "."))
        else:
            found[info.name] = folder / f"{short}.py"
    return found


def modules_with_examples() -> list[str]:
    return sorted(name for name, source in all_modules().items() if ">>>" in source.read_text("utf-8"))


def import_or_skip(name: str, optional=OPTIONAL):
    """Import module ``name``; skip the test if it needs an optional dependency that is missing."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as error:
        missing = (error.name or "").partition(".")[0]
        if missing in optional:
            pytest.skip(f"{name} needs {missing} (an optional dependency), not installed")
        raise


def test_the_walk_finds_every_module_and_the_examples_the_issue_named():
    modules = all_modules()
    package = Path(codedcomputing.__file__).parent
    on_disk = {
        ".".join(("codedcomputing", *p.relative_to(package).with_suffix("").parts)).removesuffix(".__init__")
        for p in package.rglob("*.py")
    }
    assert set(modules) | {"codedcomputing"} == on_disk
    assert all(source.is_file() for source in modules.values())
    with_examples = modules_with_examples()
    assert {"codedcomputing.codes.manifold", "codedcomputing.gradient_coding.codes"} <= set(with_examples)
    assert "codedcomputing.codes.gcc" in with_examples


@pytest.mark.parametrize("name", modules_with_examples())
def test_docstring_examples_run(name):
    module = import_or_skip(name)
    result = doctest.testmod(module, optionflags=OPTIONFLAGS, report=False)
    assert result.attempted > 0, f"{name}: '>>>' in the source but no example doctest can run"
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} examples failed (output above)"


def test_a_missing_optional_dependency_skips_and_any_other_missing_module_fails(tmp_path, monkeypatch):
    (tmp_path / "needs_an_extra.py").write_text("import not_installed_extra\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(pytest.skip.Exception, match="needs_an_extra needs not_installed_extra"):
        import_or_skip("needs_an_extra", optional={"not_installed_extra"})
    with pytest.raises(ModuleNotFoundError, match="not_installed_extra"):
        import_or_skip("needs_an_extra", optional=OPTIONAL)
    assert "needs_an_extra" not in sys.modules
