"""``coded serve`` on a port in use, and ``coded bench-serve``'s decoded share."""

from __future__ import annotations

import re
import socket
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
pytest.importorskip("httpx")

from typer.testing import CliRunner

from codedcomputing import BACC
from codedcomputing.cli import _exact_flags, app
from codedcomputing.runtime.delays import Bimodal
from codedcomputing.serving import Coded, ThreadServer
from codedcomputing.serving.http import create_app
from live_servers import uvicorn_thread

SHAPE = (2, 3)
W = np.random.default_rng(7).normal(size=(6, 4))


def f(x):
    """A fixed linear map of the flattened input: (B, 2, 3) -> (B, 4)."""
    return np.asarray(x, dtype=np.float64).reshape(len(x), -1) @ W


def test_serve_on_a_port_in_use_says_so_in_one_line_and_exits_3():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        command = [
            sys.executable,
            "-m",
            "codedcomputing",
            "serve",
            "--model",
            "identity",
            "--port",
            str(port),
        ]
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    output = done.stdout + done.stderr
    assert done.returncode == 3, output
    assert done.stdout == "" and len(output.splitlines()) == 1, output
    assert f"127.0.0.1:{port} is in use" in output
    assert "Traceback" not in output and "http://" not in output


def test_bench_serve_prints_the_share_of_answers_the_server_decoded():
    """Coded BACC 4/6 with stragglers: the decoded line's counts are the server's own."""
    service = Bimodal(base=2.0, p=0.3, slowdown=20.0)
    scheme = Coded(BACC(4, 6, systematic=True), tau=5.0, max_group_wait=20.0)
    server_app = create_app(
        lambda: ThreadServer(f, 6, scheme, service=service, time_unit=1e-3, seed=3), SHAPE
    )
    with uvicorn_thread(server_app) as port:
        options = "--rate 100 --duration 0.5 --inputs-from random --input-shape 2,3 --batch 4".split()
        result = CliRunner().invoke(app, ["bench-serve", f"http://127.0.0.1:{port}", *options])
        import httpx

        metrics = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    assert result.exit_code == 0, result.output
    output = " ".join(result.output.split())
    sent = int(output.split(" requests")[0])
    found = re.search(r"decoded: (\d+) of (\d+) answers \((\d+\.\d)%\)", output)
    assert found, output
    decoded, answers = int(found.group(1)), int(found.group(2))
    assert f"answered {sent}; errors: none" in output
    assert 0 <= decoded <= answers == 4 * sent
    assert found.group(3) == f"{100 * decoded / answers:.1f}"
    served = {
        outcome: int(count)
        for outcome, count in re.findall(r'coded_queries_total\{outcome="(\w+)"\} (\d+)', metrics)
    }
    assert decoded == served["decoded"] > 0
    # every answer is counted once by its outcome; the server's warm-up query is not counted
    assert answers == sum(count for outcome, count in served.items() if outcome != "failed")


@pytest.mark.parametrize(
    ("body", "flags"),
    [
        (b'{"outputs":[[1.0],[2.0]],"exact":[true,false]}', [True, False]),
        (b'{"outputs": [[1.0], null], "exact": [true, null]}', [True, None]),  # a partial answer
        (b'{"error":"not ready"}', []),
        (b'{"outputs":[[1.0]],"exact":[tr', []),  # a body cut short
    ],
)
def test_bench_serve_reads_the_exact_flags_at_the_end_of_a_body(body, flags):
    at = body.rfind(b'"exact"')
    assert _exact_flags(body[at:] if at >= 0 else b"") == flags
