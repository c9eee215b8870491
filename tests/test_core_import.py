"""``import codedcomputing`` loads the core only (numpy, scipy and the package's codes and
runtime); the models, datasets, cache and gradient coding load at first use, and the command
line needs the ``cli`` extra, saying so in one line when it is missing."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest

import codedcomputing as cc
from codedcomputing import __main__ as entry
from codedcomputing._progress import progress

# Optional dependencies (extras) and the package's non-core modules.
NOT_IN_THE_CORE = (
    "torch",
    "typer",
    "click",
    "rich",
    "matplotlib",
    "ray",
    "starlette",
    "uvicorn",
    "httpx",
    "orjson",
    "sklearn",
    "mlxtend",
    "codedcomputing.models",
    "codedcomputing.datasets",
    "codedcomputing.cache",
    "codedcomputing.gradient_coding",
    "codedcomputing.experiments",
    "codedcomputing.reproduce",
    "codedcomputing.serving",
    "codedcomputing.cli",
)

# In a fresh interpreter: the modules after the import, and after touching the lazy attributes.
SCRIPT = """
import json, sys
import codedcomputing as cc
after_import = sorted(sys.modules)
from codedcomputing.models import load
from codedcomputing.datasets import load as load_dataset
from codedcomputing.cache import cache_dir
from codedcomputing.gradient_coding import CyclicRepetition
touched = [
    cc.models.load is load,
    cc.datasets.load is load_dataset,
    cc.cache.cache_dir is cache_dir,
    cc.gradient_coding.CyclicRepetition is CyclicRepetition,
]
print(json.dumps({"after_import": after_import, "touched": touched, "dir": dir(cc)}))
"""


@pytest.fixture(scope="module")
def fresh():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def loaded(modules: list[str], name: str) -> bool:
    return any(m == name or m.startswith(name + ".") for m in modules)


def test_importing_the_package_loads_no_extra_and_no_lazy_submodule(fresh):
    modules = fresh["after_import"]
    assert [name for name in NOT_IN_THE_CORE if loaded(modules, name)] == []
    assert loaded(modules, "codedcomputing.codes") and loaded(modules, "codedcomputing.runtime")


def test_the_lazy_submodules_are_attributes_and_listed(fresh):
    # the first touch imported the submodule itself, bound to the same objects as its own import
    assert fresh["touched"] == [True, True, True, True]
    assert {"models", "datasets", "cache", "gradient_coding", "GCC", "runtime"} <= set(fresh["dir"])
    assert {"models", "datasets", "gradient_coding"} <= set(cc.__all__)


def test_an_unknown_attribute_is_still_an_attribute_error():
    with pytest.raises(AttributeError, match="has no attribute 'modelz'"):
        cc.modelz  # noqa: B018
    assert not hasattr(cc, "zoo")


def test_coded_without_typer_says_which_extra_to_install(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "typer", None)  # "import typer" now raises ModuleNotFoundError
    monkeypatch.delitem(sys.modules, "codedcomputing.cli", raising=False)
    with pytest.raises(SystemExit) as exit_:
        entry.main()
    message = str(exit_.value.code)
    assert "pip install 'codedcomputing[cli]'" in message and "typer" in message
    assert "\n" not in message  # one line, no traceback


def test_coded_reraises_a_missing_module_that_is_not_the_cli_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "codedcomputing.cli", None)
    with pytest.raises(ModuleNotFoundError) as error:
        entry.main()
    assert error.value.name == "codedcomputing.cli"


def test_coded_runs_the_command_line_when_the_extra_is_there(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["coded", "--help"])
    with pytest.raises(SystemExit) as exit_:
        entry.main()
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "Usage:" in out and "experiment" in out  # the cli's own help, with its commands


def test_progress_without_rich_prints_plain_lines_even_on_a_terminal(monkeypatch):
    monkeypatch.setenv("TTY_COMPATIBLE", "1")  # rich, if importable, would draw a bar here
    monkeypatch.setitem(sys.modules, "rich.console", None)
    out = io.StringIO()
    with progress("work", 2, interval_s=0.0, file=out) as advance:
        advance(2)
    assert out.getvalue().splitlines()[0] == "work: 0/2 (0%), started"
    assert out.getvalue().splitlines()[-1].startswith("work: 2/2 (100%), done in")


# The core's work with the extras, threadpoolctl included, made unimportable.
WITHOUT_EXTRAS = """
import sys
BLOCKED = {"typer", "click", "rich", "threadpoolctl", "torch", "matplotlib", "ray", "starlette"}
class Uninstalled:  # found before any installed package: "import name" raises ModuleNotFoundError
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Uninstalled())
import numpy as np
import codedcomputing as cc
from codedcomputing._arraylib import one_blas_thread
X = np.random.default_rng(0).normal(size=(10, 3))
f = lambda batch: np.tanh(batch)
with cc.ThreadCluster(num_threads=4, seed=0) as cluster:
    result = cc.CodedExecutor(cc.GCC(10, 50), f, cluster).run(X, wait_for=50, deadline=None)
with one_blas_thread:  # without threadpoolctl the one-thread limit is off, not an error
    pass
print(float(np.max(np.abs(result.estimates - f(X)))), len(one_blas_thread.libraries))
"""


def test_the_core_runs_with_no_extra_and_no_threadpoolctl():
    done = subprocess.run([sys.executable, "-c", WITHOUT_EXTRAS], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    error, libraries = done.stdout.split()
    assert float(error) < 0.01 and libraries == "0"  # GCC's estimate of tanh from all 50 workers
