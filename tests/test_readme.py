"""The README's commands and example stay true."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_usage_example_runs_and_gcc_recovers_the_outputs(capsys):
    """The python block in the README runs, and the MSE it prints is small, accuracy high."""
    block = re.search(r"```python\n(.*?)```", README, re.S).group(1)
    exec(compile(block, "README.md", "exec"), {})
    mse, rel_acc = (float(v) for v in capsys.readouterr().out.split())
    assert mse < 1e-3
    assert rel_acc >= 0.9
    assert np.isfinite(mse)


def test_ci_runs_exactly_the_readme_test_command():
    """.ci/run extracts the command that follows the test-command marker, and it runs pytest."""
    script = (ROOT / ".ci" / "run").read_text()
    extract = re.search(r"cmd=\$\((.*)\)\n", script).group(1)
    command = subprocess.run(["bash", "-c", extract], cwd=ROOT, capture_output=True, text=True, check=True)
    marker = README.index("<!-- test-command -->")
    block = README[marker:].split("```bash\n", 1)[1].split("\n", 1)[0]
    assert command.stdout.strip() == block.strip()
    assert "pip install torch==2.13.0" in block and block.endswith("python -m pytest --durations=20")


def test_readme_starts_with_the_two_set_up_and_run_commands():
    """The first two bash blocks: the main job (coded demo) and the tests."""
    blocks = re.findall(r"```bash\n(.*?)\n```", README, re.S)
    assert blocks[0].startswith("python3 -m venv .venv") and blocks[0].endswith("coded demo")
    assert blocks[1].startswith("python3 -m venv .venv") and "pytest" in blocks[1]


def test_adversarial_example_runs_and_the_robust_decoder_beats_the_liars():
    """The README's RobustGCC block runs; its estimates are close despite ten liars at M."""
    (block,) = [b for b in re.findall(r"```python\n(.*?)```", README, re.S) if "RobustGCC" in b]
    names: dict = {}
    exec(compile(block, "README.md", "exec"), names)
    X, est = names["X"], names["est"]
    assert names["attacked"].workers.size == 10
    assert float(np.mean((est - X * np.sin(X)) ** 2)) < 1e-2


def test_gradient_coding_example_runs_and_trains(capsys):
    """The README's gradient-coding block runs; the loss it prints falls."""
    (block,) = [b for b in re.findall(r"```python\n(.*?)```", README, re.S) if "CyclicRepetition" in b]
    exec(compile(block, "README.md", "exec"), {})
    words = capsys.readouterr().out.split()
    before, after = float(words[1]), float(words[3])
    assert after < 0.6 * before
