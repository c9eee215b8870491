"""Starting ``coded`` stays cheap: importing the command line loads neither torch, matplotlib,
Ray, the HTTP stack nor the experiments; the commands that use them import them."""

from __future__ import annotations

import json
import subprocess
import sys

from codedcomputing import cli
from codedcomputing.experiments import EXPERIMENTS

# Modules a command imports when it runs, never the command line's import.
NOT_AT_START = (
    "torch",
    "matplotlib",
    "ray",
    "starlette",
    "uvicorn",
    "httpx",
    "codedcomputing.experiments",
    "codedcomputing.reproduce",
    "codedcomputing.serving",
)


def test_importing_the_command_line_loads_no_heavy_module():
    script = "import json, sys, codedcomputing.cli; print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    modules = json.loads(done.stdout)
    loaded = [name for name in NOT_AT_START if any(m == name or m.startswith(name + ".") for m in modules)]
    assert loaded == []


def test_the_command_lines_experiment_names_are_the_experiments():
    assert cli.EXPERIMENT_NAMES == tuple(EXPERIMENTS)
