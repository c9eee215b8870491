"""The HTTP endpoint's overhead (``coded serve``): its throughput with a trivial model, and the
latency it adds over ``ThreadServer.submit`` for one LeNet-5 query.

(a) Throughput: ``coded serve --model identity`` (f(x) = x) on 2 replica threads in a subprocess;
    a closed-loop client of C keep-alive connections (raw asyncio HTTP/1.1, cheaper than httpx,
    so that the client takes less of the 2 cores than the server) posts for D seconds; queries/s
    (inputs answered per second) for 1 input per request and for several, for small inputs
    (10 numbers) and MNIST-sized ones (784). Repeated; mean and 95% bootstrap interval.
(b) Added latency: ``coded serve --model lenet5`` (2 replicas) in a subprocess and a
    ThreadServer with the same model and replicas in this process; the same MNIST digits, one
    query at a time, alternating which path goes first; per digit the HTTP latency (a
    keep-alive ``http.client`` connection: the request sent, the JSON answer parsed) minus the
    direct one (``submit(x).result()``); the median of the paired differences with a 95%
    bootstrap interval.

Run: ``OMP_NUM_THREADS=1 python benchmarks/perf/bench_http.py [--quick] [--part a|b] [--http-impl h11]``
[--no-orjson] (the server parses JSON with the standard library, as without orjson).
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
from importlib.util import find_spec
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
from common import bootstrap

NO_ORJSON = False


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Served:
    """``coded serve ARGS`` in a subprocess, ready (GET /health 200) on entry, SIGTERM on exit."""

    def __init__(self, *args):
        self.port = free_port()
        serve = [*args, "--port", str(self.port)]
        block = "import sys; sys.modules['orjson'] = None; " if NO_ORJSON else ""  # as if not installed
        command = [sys.executable, "-c", f"{block}from codedcomputing.cli import app; app()", "serve", *serve]
        self.process = subprocess.Popen(command, env=dict(os.environ, OMP_NUM_THREADS="1"))

    def __enter__(self):
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError("coded serve exited")
            try:
                connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=1)
                connection.request("GET", "/health")
                if connection.getresponse().status == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError("coded serve did not get ready")

    def __exit__(self, *exc):
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


async def closed_loop(port: int, body: bytes, connections: int, seconds: float) -> tuple[int, int]:
    """Requests answered 200 and others, by ``connections`` keep-alive connections posting ``body``."""
    request = (
        f"POST /predict HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    counts = [0, 0]
    stop = time.perf_counter() + seconds

    async def one():
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        while time.perf_counter() < stop:
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
            await reader.readexactly(length)
            counts[0 if head.startswith(b"HTTP/1.1 200") else 1] += 1
        writer.close()

    await asyncio.gather(*(one() for _ in range(connections)))
    return counts[0], counts[1]


def throughput(args) -> None:
    print(f"(a) throughput, identity model, 2 replicas, {args.connections} connections, {args.seconds:g} s x "
          f"{args.repeats} repeats; queries/s: mean [95% CI]")  # fmt: skip
    rng = np.random.default_rng(0)
    for size in (10, 784):
        served = Served("--model", "identity", "--input-shape", str(size), "--replicas", "2", *args.serve)
        with served:
            for batch in (1, 8, 32):
                body = json.dumps(
                    {"inputs": rng.normal(size=(batch, size)).astype(np.float32).tolist()}
                ).encode()
                asyncio.run(closed_loop(served.port, body, args.connections, 0.5))  # warm-up
                rates, errors = [], 0
                for _ in range(args.repeats):
                    ok, bad = asyncio.run(closed_loop(served.port, body, args.connections, args.seconds))
                    rates.append(ok * batch / args.seconds)
                    errors += bad
                mean, low, high = bootstrap(rates, np.mean)
                print(
                    f"  input of {size:>3} numbers, {batch:>2} per request: {mean:8.0f} "
                    f"[{low:.0f}, {high:.0f}] queries/s ({mean / batch:.0f} requests/s), non-200: {errors}"
                )


def added_latency(args) -> None:
    import torch

    torch.set_num_threads(1)
    from codedcomputing import datasets, models
    from codedcomputing.serving import NoRedundancy, ThreadServer

    digits = datasets.mnist().test_x[: args.queries]
    f = models.numpy_function("lenet5", progress=False)
    bodies = [json.dumps({"inputs": [x.ravel().tolist()]}).encode() for x in digits]
    direct, over_http = [], []
    with (
        Served("--model", "lenet5", "--replicas", "2") as served,
        ThreadServer(f, 2, NoRedundancy(), time_unit=1e-3) as server,
    ):
        connection = http.client.HTTPConnection("127.0.0.1", served.port)
        headers = {"content-type": "application/json"}

        def via_http(i):
            began = time.perf_counter()
            connection.request("POST", "/predict", bodies[i], headers)
            answer = json.loads(connection.getresponse().read())
            elapsed = time.perf_counter() - began
            assert answer["exact"] == [True]
            return elapsed

        def via_submit(i):
            began = time.perf_counter()
            server.submit(digits[i]).result()
            return time.perf_counter() - began

        for i in range(20):  # warm-up both paths
            via_http(i), via_submit(i)
        for i in range(len(digits)):
            if i % 2:
                over_http.append(via_http(i))
                direct.append(via_submit(i))
            else:
                direct.append(via_submit(i))
                over_http.append(via_http(i))
            time.sleep(0.002)  # low load: one query at a time, with gaps
    direct, over_http = np.array(direct) * 1e3, np.array(over_http) * 1e3
    added, low, high = bootstrap(over_http - direct, np.median)
    print(f"(b) one LeNet-5 query, 2 replicas, {len(digits)} digits, both paths interleaved:")
    print(f"  p50 direct submit {np.median(direct):.3f} ms, p50 over HTTP {np.median(over_http):.3f} ms")
    print(f"  added by HTTP (median of paired differences): {added:.3f} ms [95% CI {low:.3f}, {high:.3f}]")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter runs")
    parser.add_argument("--part", choices=("a", "b", "both"), default="both")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--http-impl", default="auto", help="uvicorn's parser: auto, h11 or httptools")
    parser.add_argument("--no-orjson", action="store_true", help="the server parses JSON with the stdlib")
    args = parser.parse_args()
    global NO_ORJSON
    NO_ORJSON = args.no_orjson
    args.serve = ["--http-impl", args.http_impl]
    orjson = "used" if find_spec("orjson") and not NO_ORJSON else "not used"
    loop = "uvloop" if find_spec("uvloop") else "asyncio"
    print(f"uvicorn parser {args.http_impl}, event loop {loop}; orjson {orjson}", flush=True)
    args.seconds, args.repeats, args.queries = (1.0, 3, 200) if args.quick else (3.0, 5, 1000)
    if args.part in ("a", "both"):
        throughput(args)
    if args.part in ("b", "both"):
        added_latency(args)


if __name__ == "__main__":
    main()
