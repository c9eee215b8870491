"""The HTTP endpoint on a live uvicorn server on loopback, as ordinary clients see it: errors keep
a keep-alive connection usable (or say ``Connection: close``), deep JSON is a 400, an oversized
body's 413 is read by ``urllib``, a query past its deadline is a 504."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from contextlib import contextmanager

import numpy as np
import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from codedcomputing.serving import NoRedundancy, ThreadServer
from codedcomputing.serving import http as serving_http
from codedcomputing.serving.http import create_app
from live_servers import uvicorn_thread

pytestmark = pytest.mark.slow  # each test starts uvicorn

SHAPE = (2, 3)
W = np.random.default_rng(7).normal(size=(6, 4))
UNLUCKY = 13.0  # an input starting with it makes the model hang (504) or the server fail (500)


def f(x):
    """A fixed linear map of the flattened input: (B, 2, 3) -> (B, 4)."""
    return np.asarray(x, dtype=np.float64).reshape(len(x), -1) @ W


class FailingSubmit(ThreadServer):
    """A server whose submit raises an unexpected error on inputs starting with UNLUCKY: the
    app's own error path (a JSON 500), not a failed query."""

    def submit(self, x):
        if np.asarray(x).flat[0] == UNLUCKY:
            raise ZeroDivisionError("an unexpected error in the app")
        return super().submit(x)


@contextmanager
def serving(app):
    """``app`` on uvicorn on 127.0.0.1, ready (GET /health 200): yields the port."""
    with uvicorn_thread(app) as port:
        deadline = time.monotonic() + 300  # a hang guard only
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        while get(connection, "/health")[0] != 200:
            assert time.monotonic() < deadline, "the server did not get ready"
            time.sleep(0.02)
        connection.close()
        yield port


def get(connection, path):
    connection.request("GET", path)
    response = connection.getresponse()
    return response.status, response.read()


def post(connection, body: bytes, path="/predict", method="POST", content_type="application/json"):
    """One request on ``connection``: (status, JSON body or text, response)."""
    connection.request(method, path, body=body, headers={"Content-Type": content_type})
    response = connection.getresponse()
    raw = response.read()
    is_json = response.getheader("content-type", "").startswith("application/json")
    return response.status, json.loads(raw) if is_json else raw.decode(), response


def metrics_by_code(port) -> Counter:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    status, text = get(connection, "/metrics")
    connection.close()
    assert status == 200
    counts = Counter()
    for line in text.decode().splitlines():
        if line.startswith("coded_http_responses_total{"):
            name, value = line.rsplit(" ", 1)
            counts[int(name.split('"')[1])] = int(value)
    return counts


def valid_body(rows: np.ndarray) -> bytes:
    return json.dumps({"inputs": rows.tolist()}).encode()


def nested(depth: int, open_: bytes = b"[", close: bytes = b"]") -> bytes:
    return b'{"inputs": [' + open_ * depth + b"1" + close * depth + b"]}"


DEEP = [  # (kind, body, the statuses it may get)
    # the probe: orjson reads it (an input of the wrong shape: 422); the standard
    # library may not, nested in the server's own frames (400)
    ("arrays 1,000 deep", nested(1000), (400, 422)),
    ("arrays 5,000 deep", nested(5000), (400,)),
    ("objects 5,000 deep", nested(5000, b'{"a": ', b"}"), (400,)),
    (
        "deep under another key",
        b'{"inputs": [[1, 2, 3, 4, 5, 6]], "x": ' + b"[" * 5000 + b"]" * 5000 + b"}",
        (400,),
    ),
]


@pytest.mark.parametrize("parser", ["orjson", "json"])
def test_deep_json_is_a_json_4xx_and_the_same_connection_serves_on(parser, monkeypatch):
    """JSON nested past the parser's depth is a 400 with the JSON error body (once a text 500
    from a RecursionError that dropped the connection without a word); a valid request on the
    same keep-alive connection is then answered."""
    if parser == "json":
        monkeypatch.setattr(serving_http, "_fast_loads", None)
    elif serving_http._fast_loads is None:
        pytest.skip("orjson is not installed")
    x = np.arange(6, dtype=np.float32).reshape(1, *SHAPE)
    app = create_app(lambda: ThreadServer(f, 2, NoRedundancy(), time_unit=1e-3), SHAPE)
    with serving(app) as port:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        connection.connect()
        sock = connection.sock
        for kind, body, statuses in DEEP:
            status, content, response = post(connection, body)
            assert status in statuses and content["error"], (kind, status, content)
            assert status == 422 or "nested too deep" in content["error"], (kind, content)
            assert not response.will_close, kind
            status, content, response = post(connection, valid_body(x))
            assert status == 200, (kind, content)
            np.testing.assert_allclose(content["outputs"], f(x), rtol=1e-6)
            assert connection.sock is sock, f"{kind}: the connection was not kept"
        connection.close()


@pytest.mark.parametrize("sent", ["content-length", "chunked"])
def test_urllib_reads_the_413_of_a_body_several_times_the_limit(sent):
    """urllib sends its whole body before it reads (and asks Connection: close): the server
    reads and discards a body up to 4x max_body_bytes, then answers 413, so the client reads
    the 413 (it saw a connection reset or a broken pipe when the server answered and closed
    at once)."""
    limit = 2**20
    app = create_app(lambda: ThreadServer(f, 1, NoRedundancy(), time_unit=1e-3), SHAPE, max_body_bytes=limit)
    body = b'{"inputs": [' + b" " * int(3.5 * limit) + b"]}"
    with serving(app) as port:
        url = f"http://127.0.0.1:{port}/predict"
        for _ in range(3):
            data = (
                body
                if sent == "content-length"
                else iter([body[i : i + 65536] for i in range(0, len(body), 65536)])
            )
            request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
            with pytest.raises(urllib.error.HTTPError) as caught:
                urllib.request.urlopen(request, timeout=60)
            assert caught.value.code == 413
            assert "max_body_bytes" in json.loads(caught.value.read())["error"]
        valid = urllib.request.Request(
            url, data=valid_body(np.ones((1, 6))), headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(valid, timeout=60) as response:
            assert response.status == 200
        assert metrics_by_code(port)[413] == 3


def read_head(sock) -> tuple[str, dict]:
    """The status line and headers of the first response on ``sock``."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"the server closed before a full response head: {data!r}"
        data += chunk
    head = data.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in head[1:])
    return head[0], {k.lower(): v.lower() for k, v in headers.items()}


def closes(sock) -> bool:
    """Whether the server closes ``sock`` (EOF or a reset) within a generous wait."""
    sock.settimeout(60)
    try:
        while sock.recv(65536):
            pass
    except ConnectionResetError:
        pass
    return True


@pytest.mark.parametrize("case", ["beyond the bound", "expect 100-continue"])
def test_a_body_the_server_will_not_read_gets_its_413_with_connection_close(case):
    """A body declared longer than 4x max_body_bytes is not read: the 413 comes at once and
    says Connection: close, and the server closes. So does one the client holds back for
    Expect: 100-continue (no 100 is sent: the client need not send it)."""
    limit = 4096
    app = create_app(lambda: ThreadServer(f, 1, NoRedundancy(), time_unit=1e-3), SHAPE, max_body_bytes=limit)
    length = 5 * limit if case == "beyond the bound" else 2 * limit
    expect = "Expect: 100-continue\r\n" if case == "expect 100-continue" else ""
    with serving(app) as port, socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        head = (
            f"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {length}\r\n{expect}\r\n"
        )
        sock.sendall(head.encode() + (b" " * 1000 if not expect else b""))
        status, headers = read_head(sock)
        assert status.startswith("HTTP/1.1 413"), status
        assert headers.get("connection") == "close", headers
        assert closes(sock)
        assert metrics_by_code(port)[413] == 1


def test_one_keep_alive_connection_survives_every_kind_of_error():
    """On one connection: 400 (deep and bad JSON), 404, 405, 413 (a body within the bound, read
    and discarded; too many inputs), 415, 422, 500 (an unexpected error) and 200s: each answered
    with a JSON body, none closes the connection, and /metrics counts each by its code."""
    app = create_app(
        lambda: FailingSubmit(f, 2, NoRedundancy(), time_unit=1e-3),
        SHAPE,
        max_body_bytes=16384,
        max_inputs=8,
    )
    x = np.random.default_rng(0).normal(size=(3, 6)).astype(np.float32)
    requests = [
        (400, "nested too deep", {"body": nested(5000)}),
        (400, "JSON", {"body": b'{"inputs": [[1, 2'}),
        (404, "no endpoint", {"body": b"{}", "path": "/nope"}),
        (405, "not allowed", {"body": b"", "method": "GET"}),
        (405, "not allowed", {"body": b"{}", "path": "/health"}),
        (413, "max_body_bytes", {"body": b'{"inputs": [' + b" " * 40_000 + b"]}"}),
        (413, "max_inputs", {"body": valid_body(np.ones((9, 6)))}),
        (415, "application/json", {"body": valid_body(x), "content_type": "text/plain"}),
        (422, "inputs[0]", {"body": b'{"inputs": [[1, 2, 3]]}'}),
        (500, "ZeroDivisionError", {"body": valid_body(np.full((1, 6), UNLUCKY))}),
        (200, None, {"body": valid_body(x)}),
    ]
    seen = Counter()
    with serving(app) as port:
        before = metrics_by_code(port)
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        connection.connect()
        sock = connection.sock
        for expected, word, request in requests * 2:
            status, content, response = post(connection, **request)
            seen[status] += 1
            assert status == expected, (request, status, content)
            assert not response.will_close and connection.sock is sock, (expected, "closed")
            if word is None:
                np.testing.assert_allclose(content["outputs"], f(x), rtol=1e-6)
            else:
                assert word in content["error"], (expected, content)
            if expected == 405:
                assert response.getheader("allow"), "a 405 names the allowed methods"
        connection.close()
        counted = metrics_by_code(port) - before
    counted[200] -= 1  # the /metrics scrape that read ``before``
    assert +counted == seen


def test_a_query_past_its_deadline_answers_504_with_the_answered_inputs():
    """query_timeout: the model hangs on one input; that input fails by QueryTimeout, and the
    request answers 504 with the partial-answer body (the others' outputs in place); the
    connection and the server serve on."""
    release = threading.Event()

    def hangs_on_unlucky(x):
        if np.asarray(x).flat[0] == UNLUCKY:
            release.wait(300)
        return f(x)

    app = create_app(
        lambda: ThreadServer(hangs_on_unlucky, 2, NoRedundancy(), time_unit=1e-3, query_timeout=10_000.0),
        SHAPE,
    )
    x = np.random.default_rng(1).normal(size=(3, 6)).astype(np.float32)
    x[2, 0] = UNLUCKY  # last: queued behind neither of the others on its replica (FIFO)
    try:
        with serving(app) as port:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            status, content, response = post(connection, valid_body(x))
            after = post(connection, valid_body(x[:1]))  # on the replica that is not stuck
            counted = metrics_by_code(port)
            release.set()
    finally:
        release.set()
    assert status == 504, content
    assert content["failed"] == [2]
    assert "1 of 3 inputs" in content["error"] and "inputs[2]" in content["error"]
    assert "query_timeout" in content["error"]
    assert content["exact"] == [True, True, None] and content["outputs"][2] is None
    np.testing.assert_allclose(content["outputs"][:2], f(x[:2]), rtol=1e-6)
    assert not response.will_close
    assert after[0] == 200
    assert counted[504] == 1
