"""The HTTP mix: 5,000 requests from 8 keep-alive clients against one live server, valid requests
mixed with 30 kinds of malformed ones. Every valid request is answered 200 once with its own
f(x); every malformed one gets its kind's 4xx with a JSON body naming the problem; no connection
fails or is closed; and /metrics counts the responses by code exactly as the clients do."""

from __future__ import annotations

import http.client
import json
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from codedcomputing.serving import NoRedundancy, ThreadServer
from codedcomputing.serving.http import create_app
from live_servers import uvicorn_thread

SHAPE = (2, 3)
W = np.random.default_rng(7).normal(size=(6, 4))
MAX_BODY = 32_768  # so the server reads and discards bodies up to 4x: 128 KiB
MAX_INPUTS = 16  # the table's "too many inputs" sends 17
REQUESTS, CLIENTS = 5_000, 8


def f(x):
    """A fixed linear map of the flattened input: (B, 2, 3) -> (B, 4)."""
    return np.asarray(x, dtype=np.float64).reshape(len(x), -1) @ W


ROW = b"[1, 2, 3, 4, 5, 6]"
ONE = b'{"inputs": [' + ROW + b"]}"  # a valid body
JSON = {"Content-Type": "application/json"}


def predict(body: bytes, headers=JSON, method="POST", path="/predict"):
    return method, path, headers, body


def nested(depth: int, open_: bytes = b"[", close: bytes = b"]") -> bytes:
    return b'{"inputs": [' + open_ * depth + b"1" + close * depth + b"]}"


# kind: (request, the status it gets, a word its JSON error names)
MALFORMED = {
    "text/plain": (predict(ONE, {"Content-Type": "text/plain"}), 415, "application/json"),
    "no content type": (predict(ONE, {}), 415, "application/json"),
    "not JSON": (predict(b"{inputs: [1, 2"), 400, "not valid JSON"),
    "cut short": (predict(b'{"inputs": [[1, 2, 3'), 400, "not valid JSON"),
    "empty body": (predict(b""), 400, "not valid JSON"),
    "trailing data": (predict(ONE + b" x"), 400, "not valid JSON"),
    "not UTF-8": (predict(b'{"inputs": [' + ROW + b'], "x": "\xff"}'), 400, "utf-8"),
    "NaN": (predict(b'{"inputs": [[NaN, 1, 2, 3, 4, 5]]}'), 400, "NaN"),
    "Infinity": (predict(b'{"inputs": [[1, 2, 3, 4, 5, -Infinity]]}'), 400, "Infinity"),
    "arrays 3,000 deep": (predict(nested(3000)), 400, "nested too deep"),
    "objects 2,000 deep": (predict(nested(2000, b'{"a": ', b"}")), 400, "nested too deep"),
    "overflow to inf": (predict(b'{"inputs": [[1e400, 1, 2, 3, 4, 5]]}'), 422, "out of range"),
    "float32 overflow": (predict(b'{"inputs": [' + ROW + b", [1e39, 1, 2, 3, 4, 5]]}"), 422, "inputs[1]"),
    "a 5,000-digit integer": (predict(b'{"inputs": [[' + b"9" * 5000 + b", 1, 2, 3, 4, 5]]}"), 422, "range"),
    "wrong size": (predict(b'{"inputs": [[1, 2, 3]]}'), 422, "shape"),
    "wrong shape": (predict(b'{"inputs": [[[1, 2], [3, 4], [5, 6]]]}'), 422, "(2, 3)"),
    "ragged": (predict(b'{"inputs": [[[1, 2, 3], [4, 5]]]}'), 422, "ragged"),
    "strings": (predict(b'{"inputs": [["1", "2", "3", "4", "5", "6"]]}'), 422, "numeric"),
    "booleans": (predict(b'{"inputs": [[true, true, true, true, true, true]]}'), 422, "numeric"),
    "nulls": (predict(b'{"inputs": [[null, 1, 2, 3, 4, 5]]}'), 422, "numeric"),
    "objects in inputs": (predict(b'{"inputs": [{"x": [1, 2, 3, 4, 5, 6]}]}'), 422, "numeric"),
    "empty inputs": (predict(b'{"inputs": []}'), 422, "non-empty"),
    "inputs not a list": (predict(b'{"inputs": 5}'), 422, "non-empty"),
    "missing inputs": (predict(b'{"input": [' + ROW + b"]}"), 422, '"inputs"'),
    "not an object": (predict(b"[" + ROW + b"]"), 422, '"inputs"'),
    "duplicate keys": (predict(b'{"inputs": [' + ROW + b'], "inputs": [[1, 2]]}'), 422, "shape"),  # the last
    "oversized body": (predict(b'{"inputs": [' + b" " * (2 * MAX_BODY) + b"]}"), 413, "max_body_bytes"),
    "too many inputs": (predict(b'{"inputs": [' + b", ".join([ROW] * 17) + b"]}"), 413, "max_inputs"),
    "wrong method": (predict(b"", method="GET"), 405, "not allowed"),
    "unknown path": (predict(ONE, path="/v1/predict"), 404, "no endpoint"),
}  # fmt: skip


def test_the_table_holds_30_distinct_kinds():
    assert len(MALFORMED) == 30
    assert len({repr(request) for request, _, _ in MALFORMED.values()}) == 30


@pytest.mark.slow
def test_5000_requests_from_8_keep_alive_clients_valid_and_malformed():
    rng = np.random.default_rng(0)
    kinds = list(MALFORMED)
    work = []  # (kind, request, inputs or None)
    for _ in range(REQUESTS):
        if rng.random() < 0.5:
            x = rng.normal(size=(int(rng.integers(1, 4)), *SHAPE)).astype(np.float32)
            rows = x.tolist() if rng.random() < 0.5 else x.reshape(len(x), -1).tolist()
            work.append(("valid", predict(json.dumps({"inputs": rows}).encode()), x))
        else:
            kind = kinds[int(rng.integers(len(kinds)))]
            work.append((kind, MALFORMED[kind][0], None))
    app = create_app(
        lambda: ThreadServer(f, 3, NoRedundancy(), time_unit=1e-3, seed=0, keep_record=True),
        SHAPE,
        max_body_bytes=MAX_BODY,
        max_inputs=MAX_INPUTS,
    )
    with uvicorn_thread(app) as port:
        statuses = Counter()  # every response the clients got, by code
        health = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        deadline = time.monotonic() + 300  # a hang guard only
        while True:
            health.request("GET", "/health")
            response = health.getresponse()
            response.read()
            statuses[response.status] += 1
            if response.status == 200:
                break
            assert time.monotonic() < deadline, "the server did not get ready"
            time.sleep(0.02)
        health.close()

        def client(share):
            """One keep-alive connection sending its share in order: (kind, status, body, x,
            closed) per request, or the error that ended the share."""
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            results = []
            try:
                for kind, (method, path, headers, body), x in share:
                    connection.request(method, path, body=body, headers=headers)
                    response = connection.getresponse()
                    raw = response.read()
                    results.append((kind, response.status, raw, x, response.will_close))
            except (OSError, http.client.HTTPException) as err:
                return results, f"{type(err).__name__}: {err}"
            finally:
                connection.close()
            return results, None

        with ThreadPoolExecutor(CLIENTS) as pool:
            shares = [pool.submit(client, work[i::CLIENTS]) for i in range(CLIENTS)]
            outcomes = [share.result(timeout=1800) for share in shares]  # a hang guard only
        scrape = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        scrape.request("GET", "/metrics")
        metrics = scrape.getresponse().read().decode()
        scrape.close()
    errors = [error for _, error in outcomes if error is not None]
    assert not errors, errors
    results = [result for share, _ in outcomes for result in share]
    assert len(results) == REQUESTS
    wrong = []
    for kind, status, raw, x, closed in results:
        statuses[status] += 1
        if closed:
            wrong.append((kind, status, "the server closed the connection"))
        if kind == "valid":
            body = json.loads(raw)
            if status != 200:
                wrong.append((kind, status, body))
            else:
                np.testing.assert_allclose(body["outputs"], f(x), rtol=1e-6)
                assert body["exact"] == [True] * len(x)
        else:
            _, expected, word = MALFORMED[kind]
            body = json.loads(raw)  # every error's body is JSON
            if status != expected or word not in body.get("error", ""):
                wrong.append((kind, status, body))
    assert not wrong, wrong[:10]
    counted = Counter()
    for line in metrics.splitlines():
        if line.startswith("coded_http_responses_total{"):
            name, value = line.rsplit(" ", 1)
            counted[int(name.split('"')[1])] = int(value)
    assert counted == statuses
    valid = [x for kind, _, x in work if kind == "valid"]
    record = app.state.serving["server"].record()  # closed with the server
    assert record.num_queries == 1 + sum(len(x) for x in valid)  # the warm-up, each input once
    assert not record.failed.any()
    assert f'coded_queries_total{{outcome="own"}} {record.num_queries - 1}' in metrics
    print(f"{REQUESTS} requests: {len(valid)} valid; responses by code {dict(sorted(statuses.items()))}")
