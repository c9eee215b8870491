"""The HTTP endpoint's contract: /predict, /health, /metrics, malformed requests, and shutdown."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

pytest.importorskip("starlette")
pytest.importorskip("httpx")

import warnings

with warnings.catch_warnings():  # Starlette 1.x would rather have httpx2 under its TestClient
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

from codedcomputing import BACC
from codedcomputing.runtime.delays import Bimodal
from codedcomputing.serving import Coded, NoRedundancy, ParM, RayServer, ThreadServer, http
from codedcomputing.serving.http import create_app
from live_servers import free_port, uvicorn_thread

SHAPE = (2, 3)
W = np.random.default_rng(7).normal(size=(6, 4))


def f(x):
    """A fixed linear map of the flattened input: (B, 2, 3) -> (B, 4)."""
    return np.asarray(x, dtype=np.float64).reshape(len(x), -1) @ W


def app_for(scheme=None, replicas=2, **options):
    return create_app(
        lambda: ThreadServer(f, replicas, scheme or NoRedundancy(), time_unit=1e-3, seed=0, keep_record=True),
        SHAPE,
        **options,
    )


def wait_ready(client, seconds=300.0) -> Counter:
    """Polls /health until 200; the statuses it got (/metrics counts them too)."""
    deadline = time.monotonic() + seconds
    seen = Counter()
    while True:
        status = client.get("/health").status_code
        seen[status] += 1
        if status == 200:
            return seen
        assert time.monotonic() < deadline, "the server did not get ready"
        time.sleep(0.01)


def responses_by_code(metrics: str) -> Counter:
    """``coded_http_responses_total`` by status code, from /metrics' text."""
    counts = Counter()
    for line in metrics.splitlines():
        if line.startswith("coded_http_responses_total{"):
            name, value = line.rsplit(" ", 1)
            counts[int(name.split('"')[1])] = int(value)
    return counts


def nested(depth: int, open_: bytes = b"[", close: bytes = b"]") -> bytes:
    return b'{"inputs": [' + open_ * depth + b"1" + close * depth + b"]}"


def test_predict_answers_each_input_with_f_flattened_or_not():
    rng = np.random.default_rng(0)
    xs = rng.normal(size=(5, *SHAPE)).astype(np.float32)
    app = app_for()
    with TestClient(app) as client:
        wait_ready(client)
        nested = client.post("/predict", json={"inputs": xs.tolist()})
        flat = client.post("/predict", json={"inputs": xs.reshape(5, -1).tolist()})
        mixed = client.post("/predict", json={"inputs": [xs[0].tolist(), xs[1].ravel().tolist()]})
    for response, rows in ((nested, xs), (flat, xs), (mixed, xs[:2])):
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["exact"] == [True] * len(rows)
        np.testing.assert_allclose(body["outputs"], f(rows), rtol=1e-6)
    record = app.state.serving["server"].record()
    assert record.num_queries == 1 + 5 + 5 + 2  # the warm-up and one query per input
    assert not record.failed.any()


def test_health_is_503_until_the_replicas_are_ready():
    release = threading.Event()

    def slow_server():
        release.wait(10)
        return ThreadServer(f, 2, NoRedundancy(), time_unit=1e-3)

    app = create_app(slow_server, SHAPE)
    with TestClient(app) as client:
        assert client.get("/health").status_code == 503
        assert client.post("/predict", json={"inputs": [[0] * 6]}).status_code == 503
        release.set()
        wait_ready(client)
        assert client.get("/health").json() == {"status": "ready"}


MALFORMED = [
    ("not json", {"content": b"{inputs: [1,2", "headers": {"content-type": "application/json"}}, 400, "JSON"),
    ("cut short", {"content": b'{"inputs": [[1, 2, 3'}, 400, "JSON"),
    ("empty body", {"content": b""}, 400, "JSON"),
    ("not UTF-8", {"content": b'{"inputs": [[1, 2, 3, 4, 5, 6]], "x": "\xff"}'}, 400, "utf-8"),
    ("arrays 3,000 deep", {"content": nested(3000)}, 400, "nested too deep"),
    ("objects 2,000 deep", {"content": nested(2000, b'{"a": ', b"}")}, 400, "nested too deep"),
    ("NaN", {"content": b'{"inputs": [[NaN, 1, 2, 3, 4, 5]]}'}, 400, "NaN"),
    ("Infinity", {"content": b'{"inputs": [[1, 2, 3, 4, 5, -Infinity]]}'}, 400, "Infinity"),
    ("overflow to inf", {"content": b'{"inputs": [[1e400, 1, 2, 3, 4, 5]]}'}, 422, "inputs[0]"),
    ("a 5,000-digit integer", {"content": b'{"inputs": [[' + b"9" * 5000 + b', 1, 2, 3, 4, 5]]}'}, 422,
     "out of range"),
    ("float32 overflow", {"content": b'{"inputs": [[1, 2, 3, 4, 5, 6], [1e39, 1, 2, 3, 4, 5]]}'}, 422,
     "inputs[1]"),
    ("wrong size", {"json": {"inputs": [[1, 2, 3]]}}, 422, "shape"),
    ("wrong shape", {"json": {"inputs": [[[1, 2], [3, 4], [5, 6]]]}}, 422, "(2, 3)"),
    ("second input wrong", {"json": {"inputs": [[1, 2, 3, 4, 5, 6], [1, 2]]}}, 422, "inputs[1]"),
    ("missing inputs", {"json": {"input": [[1, 2, 3, 4, 5, 6]]}}, 422, '"inputs"'),
    ("not an object", {"json": [[1, 2, 3, 4, 5, 6]]}, 422, '"inputs"'),
    ("empty", {"json": {"inputs": []}}, 422, "non-empty"),
    ("inputs not a list", {"json": {"inputs": 5}}, 422, "non-empty"),
    ("nulls", {"json": {"inputs": [[None] * 6]}}, 422, "numeric"),
    ("objects in inputs", {"json": {"inputs": [{"x": [1, 2, 3, 4, 5, 6]}]}}, 422, "numeric"),
    ("strings", {"json": {"inputs": [["1", "2", "3", "4", "5", "6"]]}}, 422, "numeric"),
    ("booleans", {"json": {"inputs": [[True] * 6]}}, 422, "numeric"),
    ("ragged", {"json": {"inputs": [[[1, 2, 3], [4, 5]]]}}, 422, "inputs[0]"),
    ("text/plain", {"content": b'{"inputs": [[1,2,3,4,5,6]]}', "headers": {"content-type": "text/plain"}},
     415, "application/json"),
    ("oversized", {"json": {"inputs": [[0.5] * 6] * 1000}}, 413, "max_body_bytes"),
    ("too many inputs", {"json": {"inputs": [[1] * 6] * 20}}, 413, "max_inputs"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("request_", "status", "word"), [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED]
)
@pytest.mark.parametrize("parser", ["orjson", "json"])
def test_malformed_requests_get_a_4xx_naming_the_problem(request_, status, word, parser, monkeypatch):
    if parser == "json":  # the standard library alone, as without orjson installed
        monkeypatch.setattr(http, "_fast_loads", None)
        monkeypatch.setattr(http, "_fast_dumps", None)
    elif http._fast_loads is None:
        pytest.skip("orjson is not installed")
    request_ = {"headers": {"content-type": "application/json"}, **request_}
    app = app_for(max_body_bytes=20_000, max_inputs=16)
    with TestClient(app) as client:
        wait_ready(client)
        response = client.post("/predict", **request_)
        assert client.post("/predict", json={"inputs": [[1, 2, 3, 4, 5, 6]]}).status_code == 200
    assert response.status_code == status, response.text
    assert word in response.json()["error"]
    assert app.state.serving["server"].record().num_queries == 2  # the warm-up and the valid one


def test_malformed_traffic_mixed_with_valid_traffic_disturbs_no_query():
    """Concurrent valid and malformed requests: every valid input answered once, with its own f(x)."""
    rng = np.random.default_rng(1)
    valid = [rng.normal(size=(1 + i % 3, 6)).astype(np.float32) for i in range(40)]
    bad = [body for _, body, _, _ in MALFORMED] * 3
    service = Bimodal(base=1.0, p=0.2, slowdown=5.0)  # 1-5 ms tasks, so requests overlap
    app = create_app(
        lambda: ThreadServer(f, 3, NoRedundancy(), service=service, time_unit=1e-3, seed=2, keep_record=True),
        SHAPE,
        max_body_bytes=20_000,
        max_inputs=16,
    )

    def send(item):
        kind, payload = item
        if kind == "valid":
            return kind, payload, client.post("/predict", json={"inputs": payload.tolist()})
        return (
            kind,
            payload,
            client.post("/predict", **{"headers": {"content-type": "application/json"}, **payload}),
        )

    work = [("valid", x) for x in valid] + [("bad", body) for body in bad]
    order = rng.permutation(len(work))
    with TestClient(app) as client:
        seen = wait_ready(client)
        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(send, [work[i] for i in order]))
        metrics = client.get("/metrics").text
    for kind, payload, response in results:
        if kind == "valid":
            assert response.status_code == 200, response.text
            np.testing.assert_allclose(response.json()["outputs"], f(payload), rtol=1e-6)
        else:
            assert 400 <= response.status_code < 500
    record = app.state.serving["server"].record()
    num_inputs = sum(len(x) for x in valid)
    assert record.num_queries == 1 + num_inputs and not record.failed.any()
    assert f'coded_queries_total{{outcome="own"}} {num_inputs}' in metrics
    seen.update(response.status_code for _, _, response in results)
    assert responses_by_code(metrics) == seen  # every response, /health's included
    assert seen[200] == len(valid) + 1


def test_coded_scheme_answers_exact_or_decoded_with_exact_flags():
    """Coded BACC 4/6 with stragglers: exact answers are f(x) itself, decoded ones are flagged."""
    code = BACC(4, 6, systematic=True)
    service = Bimodal(base=2.0, p=0.3, slowdown=20.0)
    app = create_app(
        lambda: ThreadServer(
            f, 6, Coded(code, tau=5.0, max_group_wait=50.0), service=service, time_unit=1e-3, seed=3
        ),
        SHAPE,
    )
    xs = np.random.default_rng(4).normal(size=(4, 8, 6)).astype(np.float32)
    with TestClient(app) as client:
        wait_ready(client)
        bodies = [client.post("/predict", json={"inputs": group.tolist()}).json() for group in xs]
        metrics = client.get("/metrics").text
    exact = np.concatenate([b["exact"] for b in bodies])
    outputs = np.concatenate([b["outputs"] for b in bodies])
    truth = f(xs.reshape(-1, 6))
    np.testing.assert_allclose(outputs[exact], truth[exact], rtol=1e-6)
    decoded = int(metrics.split('coded_queries_total{outcome="decoded"} ')[1].split()[0])
    assert decoded == int((~exact).sum()) > 0
    assert np.all(np.isfinite(outputs))


def test_parm_answers_over_http_with_a_stand_in_parity_function():
    """ParM 2 with stragglers, its parity model a stand-in that is exact for the linear f (the sum
    of a group's inputs through f): every answer is f(x), the decoded ones flagged not exact."""
    service = Bimodal(base=2.0, p=0.3, slowdown=20.0)
    scheme = ParM(2, max_group_wait=50.0, parity_f=lambda groups: f(np.sum(groups, axis=1)))
    app = create_app(lambda: ThreadServer(f, 3, scheme, service=service, time_unit=1e-3, seed=3), SHAPE)
    xs = np.random.default_rng(5).normal(size=(4, 6, 6)).astype(np.float32)
    with TestClient(app) as client:
        wait_ready(client)
        bodies = [client.post("/predict", json={"inputs": group.tolist()}).json() for group in xs]
        metrics = client.get("/metrics").text
    exact = np.concatenate([b["exact"] for b in bodies])
    outputs = np.concatenate([b["outputs"] for b in bodies])
    np.testing.assert_allclose(outputs, f(xs.reshape(-1, 6)), rtol=1e-4, atol=1e-4)  # float32 inputs
    decoded = int(metrics.split('coded_queries_total{outcome="decoded"} ')[1].split()[0])
    assert decoded == int((~exact).sum()) > 0


def test_a_request_with_failed_inputs_answers_503_with_the_answered_ones():
    """The partial-answer contract: 503 naming every failed input, ``failed`` their indices, the
    other inputs' outputs and exact flags in place (null at the failed ones); the server serves on."""

    def fails_on_large(x):
        if np.abs(x).max() > 100:
            raise ValueError("input too large for this replica")
        return f(x)

    app = create_app(lambda: ThreadServer(fails_on_large, 2, NoRedundancy(), time_unit=1e-3, seed=0), SHAPE)
    xs = np.random.default_rng(6).normal(size=(5, 6))
    xs[[1, 3]] *= 1000
    with TestClient(app) as client:
        seen = wait_ready(client)
        partial = client.post("/predict", json={"inputs": xs.tolist()})
        after = client.post("/predict", json={"inputs": xs[[0, 2]].tolist()})
        metrics = client.get("/metrics").text
    assert partial.status_code == 503
    body = partial.json()
    assert body["failed"] == [1, 3]
    assert "2 of 5 inputs" in body["error"] and "inputs[1]" in body["error"] and "inputs[3]" in body["error"]
    assert "input too large" in body["error"] and "inputs[0]" not in body["error"]
    assert body["exact"] == [True, None, True, None, True]
    assert body["outputs"][1] is None and body["outputs"][3] is None
    answered = [0, 2, 4]
    np.testing.assert_allclose(
        [body["outputs"][i] for i in answered], f(xs[answered].astype(np.float32)), rtol=1e-6
    )
    assert after.status_code == 200  # the failures disturbed no other query
    assert 'coded_queries_total{outcome="failed"} 2' in metrics
    assert 'coded_queries_total{outcome="own"} 5' in metrics  # 3 and 2
    assert responses_by_code(metrics)[503] == seen[503] + 1  # /health's while starting, and this one


def test_a_server_that_fails_to_start_is_reported_by_health_and_predict():
    def broken():
        raise ValueError("no model at that path")

    with TestClient(create_app(broken, SHAPE)) as client:
        deadline = time.monotonic() + 300
        while client.get("/health").json()["status"] == "starting":
            assert time.monotonic() < deadline
            time.sleep(0.01)
        health = client.get("/health")
        predict = client.post("/predict", json={"inputs": [[0] * 6]})
    assert health.status_code == 503
    assert health.json() == {"status": "failed", "error": "ValueError: no model at that path"}
    assert (
        predict.status_code == 503
        and "failed to start (ValueError: no model at that path)" in predict.json()["error"]
    )


def test_a_ray_server_started_in_the_lifespan_thread_is_refused_with_the_fix(monkeypatch):
    """The lifespan starts the server in a worker thread: a RayServer that would start Ray there
    (which aborted processes at exit) fails to start, and /health says how to fix it."""
    ray = pytest.importorskip("ray")

    def init(*args, **kwargs):
        raise AssertionError("ray.init must not be called from the lifespan's thread")

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", init)
    app = create_app(lambda: RayServer(f, 2, NoRedundancy()), SHAPE)
    with TestClient(app) as client:
        deadline = time.monotonic() + 300
        while client.get("/health").json()["status"] == "starting":
            assert time.monotonic() < deadline
            time.sleep(0.01)
        health = client.get("/health").json()
    assert health["status"] == "failed"
    assert (
        "RuntimeError" in health["error"]
        and "main thread" in health["error"]
        and "ray.init()" in health["error"]
    )


def test_metrics_are_prometheus_text():
    app = app_for()
    with TestClient(app) as client:
        seen = wait_ready(client)
        client.post("/predict", json={"inputs": [[1, 2, 3, 4, 5, 6]] * 3})
        client.post("/predict", json={"inputs": [[1, 2, 3]]})
        response = client.get("/metrics")
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    samples = {}
    for line in response.text.splitlines():
        if not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            samples[name] = float(value)
    assert samples['coded_queries_total{outcome="own"}'] == 3
    assert samples['coded_query_latency_seconds_count{outcome="own"}'] == 3
    p50 = samples['coded_query_latency_seconds{outcome="own",quantile="0.5"}']
    p999 = samples['coded_query_latency_seconds{outcome="own",quantile="0.999"}']
    assert 0 < p50 <= p999 < 5
    assert np.isnan(samples['coded_query_latency_seconds{outcome="decoded",quantile="0.5"}'])
    assert samples['coded_http_responses_total{code="200"}'] == 1 + 1  # /predict and /health
    assert samples['coded_http_responses_total{code="422"}'] == 1
    assert samples.get('coded_http_responses_total{code="503"}', 0) == seen[503]


class FailingSubmit(ThreadServer):
    """A server whose submit raises an unexpected error on an input starting with 13: the app's
    own error path (a JSON 500), not a failed query."""

    def submit(self, x):
        if np.asarray(x).flat[0] == 13:
            raise ZeroDivisionError("an unexpected error in the app")
        return super().submit(x)


def test_every_response_is_counted_by_its_code_with_a_json_error_body():
    """Routing's 404 and 405, an unexpected error's 500, a deep body's 400, the handler's own
    replies, /health and /metrics: each response has its code in coded_http_responses_total
    (a scrape counts those before it), and each error a JSON body naming the problem."""
    app = create_app(lambda: FailingSubmit(f, 2, NoRedundancy(), time_unit=1e-3), SHAPE)
    requests = [
        ("GET", "/nope", {}, 404, "no endpoint at /nope"),
        ("DELETE", "/predict", {}, 405, "method DELETE is not allowed on /predict"),
        ("POST", "/health", {"json": {}}, 405, "not allowed on /health"),
        ("POST", "/predict", {"content": nested(3000)}, 400, "nested too deep"),
        ("POST", "/predict", {"json": {"inputs": [[13, 1, 2, 3, 4, 5]]}}, 500, "ZeroDivisionError"),
        ("POST", "/predict", {"json": {"inputs": [[1, 2, 3, 4, 5, 6]]}}, 200, None),
        ("GET", "/health", {}, 200, None),
        ("GET", "/metrics", {}, 200, None),
    ]
    with TestClient(app) as client:
        seen = wait_ready(client)
        for method, path, options, status, word in requests:
            headers = {"content-type": "application/json"}
            response = client.request(method, path, headers=headers, **options)
            seen[response.status_code] += 1
            assert response.status_code == status, (method, path, response.text)
            if word is not None:
                assert response.headers["content-type"] == "application/json"
                assert word in response.json()["error"], response.json()
            if status == 405:
                assert response.headers["allow"]
        counted = responses_by_code(client.get("/metrics").text)
    assert counted == seen


def test_create_app_checks_its_arguments():
    with pytest.raises(ValueError, match="input_shape"):
        create_app(lambda: None, (0, 3))
    with pytest.raises(ValueError, match="max_body_bytes"):
        create_app(lambda: None, SHAPE, max_body_bytes=0)
    with pytest.raises(ValueError, match="input_dtype"):
        create_app(lambda: None, SHAPE, input_dtype=np.int64)
    with pytest.raises(ValueError, match="make_server"):
        create_app(None, SHAPE)


def _start_coded_serve(options: list[str], port: int, *, on_poll=None):
    """``coded serve OPTIONS --port PORT`` in a process of its own on 127.0.0.1, once its
    ``/health`` answers 200 (at most 300 s); ``on_poll(process)`` at each look. The caller stops it
    (a signal, else kill); a process that died or never got ready is killed here, and the test
    fails with its output."""
    import httpx

    command = [sys.executable, "-c", "from codedcomputing.cli import app; app()", "serve", *options]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    process = subprocess.Popen(
        [*command, "--port", str(port)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    deadline = time.monotonic() + 300
    try:
        while True:
            assert process.poll() is None, process.stdout.read().decode()
            assert time.monotonic() < deadline, f"coded serve {' '.join(options)} did not get ready in 300 s"
            if on_poll is not None:
                on_poll(process)
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    return process
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
    except BaseException:
        if process.poll() is None:
            process.kill()
            process.wait()
        raise


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_coded_serve_drains_in_flight_queries_on_a_signal_and_exits_0(sig):
    import httpx

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    serve = "--model identity --input-shape 4 --replicas 2 --service-ms 1000".split()
    process = _start_coded_serve(serve, port)
    deadline = time.monotonic() + 300
    try:
        xs = np.arange(24, dtype=np.float32).reshape(6, 4)

        def post(x):
            return httpx.post(f"{url}/predict", json={"inputs": [x.tolist()]}, timeout=20)

        with ThreadPoolExecutor(6) as pool:
            futures = [pool.submit(post, x) for x in xs]  # 1 s each on 2 replicas: 3 s in all
            while True:  # all six reached the server, and some are still in flight
                metrics = httpx.get(f"{url}/metrics", timeout=5).text
                in_flight = int(metrics.split("\ncoded_queries_in_flight ")[1].split()[0])
                answered = metrics.split('coded_queries_total{outcome="own"} ')[1].split()[0]
                if in_flight + int(answered) == 6:
                    break
                assert time.monotonic() < deadline + 10, "the six queries did not reach the server"
                time.sleep(0.02)
            assert in_flight > 0, "the queries were answered before the signal: a busy machine?"
            process.send_signal(sig)
            responses = [future.result() for future in futures]
        assert process.wait(timeout=20) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    for x, response in zip(xs, responses, strict=True):
        assert response.status_code == 200, response.text
        assert json.loads(response.text) == {"outputs": [x.tolist()], "exact": [True]}


@pytest.mark.slow
def test_coded_serve_answers_503_at_its_graceful_timeout_and_exits_soon_after():
    """--graceful-timeout 1 with three 3-second queries queued on one replica: SIGTERM; the
    requests still waiting at the timeout get 503 JSON with Connection: close (once uvicorn's
    text 500), and the process exits 0 without computing the queries nobody waits for (once
    2.4-5.2 s after such a timeout). The exit time is printed; the bound asserted is a hang
    guard for a busy machine (timeout + 30 s), not the goal (timeout + 1 s)."""
    import httpx

    timeout = 1.0
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    serve = "--model identity --input-shape 4 --replicas 1 --service-ms 3000".split()
    process = _start_coded_serve([*serve, "--graceful-timeout", str(timeout)], port)
    deadline = time.monotonic() + 300
    try:
        xs = np.arange(12, dtype=np.float32).reshape(3, 4)

        def post(x):
            return httpx.post(f"{url}/predict", json={"inputs": [x.tolist()]}, timeout=60)

        with ThreadPoolExecutor(3) as pool:
            futures = [pool.submit(post, x) for x in xs]  # 3 s each, one after another
            while True:
                metrics = httpx.get(f"{url}/metrics", timeout=5).text
                if int(metrics.split("\ncoded_queries_in_flight ")[1].split()[0]) == 3:
                    break
                assert time.monotonic() < deadline + 10, "the three queries did not reach the server"
                time.sleep(0.02)
            process.send_signal(signal.SIGTERM)
            signalled = time.monotonic()
            responses = [future.result() for future in futures]
        code = process.wait(timeout=timeout + 30)
        exited = time.monotonic() - signalled
        output = process.stdout.read().decode()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    print(f"coded serve exited {exited:.2f} s after SIGTERM (graceful timeout {timeout} s)")
    assert code == 0, output
    statuses = [response.status_code for response in responses]
    assert statuses.count(503) >= 2, statuses  # the queued ones at least; the first may be answered
    for x, response in zip(xs, responses, strict=True):
        if response.status_code == 200:
            assert response.json() == {"outputs": [x.tolist()], "exact": [True]}
        else:
            assert response.status_code == 503, response.text
            assert "shutting down" in response.json()["error"]
            assert response.headers["connection"] == "close"


def _children(pid: int) -> set[int]:
    """The processes whose parent is ``pid`` (Linux /proc)."""
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    parent = int(stat.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if parent == pid:
                found.add(int(entry))
    return found


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads the process table from /proc")
def test_coded_serve_on_ray_answers_then_drains_and_stops_the_ray_it_started():
    """One Ray actor replica on a local Ray the server starts: health, one predict, SIGTERM; the
    server exits 0 and the Ray processes it started (its children) are gone. About 30 s on 2
    shared cores, most of it Ray's start."""
    pytest.importorskip("ray")
    import httpx

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    serve = "--model identity --input-shape 4 --replicas 1 --backend ray".split()
    started: set[int] = set()
    process = _start_coded_serve(serve, port, on_poll=lambda p: started.update(_children(p.pid)))
    try:
        started |= _children(process.pid)
        response = httpx.post(f"{url}/predict", json={"inputs": [[1.0, -2.0, 3.5, 4.0]]}, timeout=30)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=40) == 0
        output = process.stdout.read().decode()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert response.status_code == 200, response.text
    assert json.loads(response.text) == {"outputs": [[1.0, -2.0, 3.5, 4.0]], "exact": [True]}
    assert "1 ray replicas (a local Ray)" in output
    assert started, "the server started no Ray process of its own"
    deadline = time.monotonic() + 120  # Ray's processes exit on their own once told to
    while any(_alive(pid) for pid in started) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [pid for pid in started if _alive(pid)], output


def test_the_package_and_the_cli_do_not_import_the_http_stack():
    code = (
        "import sys, codedcomputing, codedcomputing.serving, codedcomputing.cli; "
        "print(sorted(m for m in ('starlette', 'uvicorn', 'httpx') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == "[]"


def test_bench_serve_reports_every_request_of_an_open_loop_run():
    from typer.testing import CliRunner

    from codedcomputing.cli import app as cli

    with uvicorn_thread(app_for(replicas=2)) as port:
        options = "--rate 200 --duration 0.5 --inputs-from random --input-shape 2,3 --batch 2".split()
        result = CliRunner().invoke(cli, ["bench-serve", f"http://127.0.0.1:{port}", *options])
        metrics = httpx_get(f"http://127.0.0.1:{port}/metrics")
    assert result.exit_code == 0, result.output
    sent = int(result.output.split(" requests")[0])
    assert f"answered {sent}; errors: none" in " ".join(result.output.split())
    assert "p99.9" in result.output and sent > 50
    assert f'coded_http_responses_total{{code="200"}} {sent}' in metrics
    assert f'coded_queries_total{{outcome="own"}} {2 * sent}' in metrics


def httpx_get(url: str) -> str:
    import httpx

    return httpx.get(url, timeout=10).text


def test_coded_serve_refuses_bad_options_before_serving():
    from typer.testing import CliRunner

    from codedcomputing.cli import app as cli

    for options, word in (
        (["--ray-address", "auto"], "needs --backend ray"),  # the thread backend joins no cluster
        (["--scheme", "bogus"], "'bogus'"),
        (["--scheme", "parm", "--model", "identity"], "parm needs"),
        (["--scheme", "coded:code=lcc"], "'lcc'"),
        (["--scheme", "replication:copies=3", "--replicas", "2"], "copies"),
        (["--scheme", "coded:k=4,parities=2", "--replicas", "2"], "num_replicas"),
        (["--scheme", "hedge:dely=3"], "'dely'"),
        (["--scheme", "hedge:delay"], "key=value"),
        (["--model", "no/such/model.pt"], "torch.save"),
        (["--model", "identity", "--input-shape", "2,x"], "positive ints"),
        (["--stragglers", "0.1"], "--service-ms"),
    ):
        result = CliRunner().invoke(cli, ["serve", *options])
        assert result.exit_code == 2, (options, result.output)
        assert word in " ".join(result.output.split()), (options, result.output)


def test_coded_serve_passes_its_graceful_timeout_to_uvicorn(monkeypatch):
    from typer.testing import CliRunner

    from codedcomputing.cli import app as cli
    from codedcomputing.serving import http

    seen = []
    monkeypatch.setattr(http, "run", lambda app, host, port, **config: seen.append(config))
    port = ["--port", str(free_port())]  # serve checks that its port is free before it starts
    for options, expected in (([], None), (["--graceful-timeout", "2.5"], 2.5)):
        result = CliRunner().invoke(
            cli, ["serve", "--model", "identity", "--input-shape", "3", *port, *options]
        )
        assert result.exit_code == 0, result.output
        assert seen[-1]["timeout_graceful_shutdown"] == expected
    result = CliRunner().invoke(cli, ["serve", "--model", "identity", "--graceful-timeout", "-1"])
    assert result.exit_code == 2 and "graceful-timeout" in result.output


def test_coded_serve_gives_the_server_its_query_timeout_in_its_time_units(monkeypatch):
    """--query-timeout SECONDS (default 30) reaches ThreadServer(query_timeout=...) in the
    server's clock units (milliseconds, as the scheme's times); not positive: refused."""
    from typer.testing import CliRunner

    from codedcomputing.cli import app as cli
    from codedcomputing.serving import http

    made = []
    create_app = http.create_app
    monkeypatch.setattr(
        http, "create_app", lambda make, *a, **k: made.append(make) or create_app(make, *a, **k)
    )
    monkeypatch.setattr(http, "run", lambda app, host, port, **config: None)
    port = ["--port", str(free_port())]
    for options, expected in (([], 30_000.0), (["--query-timeout", "2.5"], 2_500.0)):
        result = CliRunner().invoke(
            cli, ["serve", "--model", "identity", "--input-shape", "3", *port, *options]
        )
        assert result.exit_code == 0, result.output
        server = made[-1]()
        assert server.time_unit == 1e-3 and server.query_timeout == expected
    for bad in ("0", "-1"):
        result = CliRunner().invoke(cli, ["serve", "--model", "identity", "--query-timeout", bad])
        assert result.exit_code == 2 and "query-timeout" in result.output


def test_a_torch_module_saved_whole_is_served_as_a_numpy_function(tmp_path):
    torch = pytest.importorskip("torch")
    from codedcomputing.cli import _serving_model

    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(6, 3))
    torch.save(module, tmp_path / "model.pt")
    f_saved, shape = _serving_model(str(tmp_path / "model.pt"), SHAPE)
    x = np.random.default_rng(5).normal(size=(4, *SHAPE)).astype(np.float32)
    with torch.no_grad():
        expected = module(torch.as_tensor(x)).numpy()
    assert shape == SHAPE
    np.testing.assert_allclose(f_saved(x), expected, rtol=1e-6)
    torch.save({"not": "a module"}, tmp_path / "dict.pt")
    import typer

    with pytest.raises(typer.BadParameter, match="not a torch module"):
        _serving_model(str(tmp_path / "dict.pt"), SHAPE)
