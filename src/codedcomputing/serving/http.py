"""An HTTP endpoint over a :class:`~codedcomputing.serving.ThreadServer`: a Starlette app, a uvicorn runner.

The serving core knows nothing of HTTP; this module is a thin ASGI app over the server's public
API (``start``, ``submit(x) -> Future[Answer]``, ``close``), so it serves thread replicas and
Ray actor replicas (:class:`~codedcomputing.serving.RayServer`, a ThreadServer) alike. Start
or join Ray in the main thread before :func:`run` and shut it down after (``coded serve
--backend ray`` does): a RayServer left to start its own Ray would start it in the lifespan's
worker thread (such a process ended with SIGABRT at exit in 2 of 3 runs here, Ray 2.60), so it
refuses, and ``/health`` reports the failed start with the fix.
It needs the ``serve`` extra (``pip install 'codedcomputing[serve]'``: Starlette and uvicorn);
nothing else in the package imports it. ``coded serve`` runs it; :func:`create_app` builds it
for tests and embedding.

Contract (clients and tests rely on it):

- ``POST /predict`` with ``Content-Type: application/json`` and a body
  ``{"inputs": [x_1, ..., x_m]}`` (m >= 1; each ``x_i`` a nested list of numbers of the model's
  input shape, or the same numbers flattened) answers 200 with
  ``{"outputs": [f_1, ..., f_m], "exact": [e_1, ..., e_m]}``: ``f_i`` the answer to ``x_i``
  (``f(x_i)``, or its decode from the coding group), ``e_i`` whether it is ``f(x_i)`` itself.
  Each input is one query submitted to the server; the response waits for all of them.
- Every response the app sends has a JSON body ``{"error": "..."}`` naming the problem unless it
  is a 200 (or ``/metrics``' text). Malformed requests get a 4xx and submit nothing: 415 a
  content type other than JSON; 413 a body over ``max_body_bytes`` (or more than
  ``max_inputs`` inputs); 400 a body that is not JSON: not UTF-8, cut short, NaN and Infinity
  tokens, or arrays and objects nested deeper than the parser goes (orjson: 1,024 levels; the
  standard library: Python's recursion limit, about 1,000, less the server's own frames); 422
  valid JSON that is not an object with a non-empty list ``"inputs"`` of finite numeric
  inputs of the model's shape (a number too large for the input dtype, ``1e400`` or a
  5,000-digit integer, is not finite; of duplicate keys the last counts, as in both parsers);
  404 a path other than the three below; 405 another method (with ``Allow``). 500: an
  unexpected error in the app (logged with its traceback). 503 ``{"error": "..."}``: the
  server is not ready yet, failed to start, or is shutting down (a request still waiting at
  uvicorn's graceful-shutdown timeout is answered so, not cancelled without a word).
- A partial answer: when some inputs of a request could not be answered (a replica failed their
  queries and no other path could), the request answers 503 with ``{"error": "...", "failed":
  [i, ...], "outputs": [...], "exact": [...]}``: ``error`` names each failed input and why,
  ``failed`` lists their indices (ascending), and ``outputs``/``exact`` are as for a 200 with
  ``null`` at the failed indices, so a client may keep the answered ones and resend only the
  failed inputs. When every failed input failed by the server's per-query deadline
  (:class:`~codedcomputing.serving.QueryTimeout`, ``query_timeout``; ``coded serve
  --query-timeout``, default 30 s), the same body comes with 504. Every input's query is
  answered or failed once; none is resubmitted by the server.
- Connections: every response keeps a keep-alive connection open, or says ``Connection:
  close`` and the server then closes it. Before it answers, the app reads what the client has
  not yet sent of the request's body and discards it (never kept), at most ``4 *
  max_body_bytes`` bytes of body in all, so that a client that sends its whole body before it
  reads (``urllib``, ``http.client``) reads the answer, a 413 included; a body declared or found
  longer than that bound (and a body a client holds back for ``Expect: 100-continue``) gets
  its answer at once with ``Connection: close``. uvicorn closes, with ``Connection: close``,
  when the client asks it, on HTTP/1.0 and at shutdown. A request uvicorn itself cannot parse
  gets uvicorn's text 400 and a closed connection; it never reaches the app.
- ``GET /health``: 200 ``{"status": "ready"}`` once the replicas are started and a warm-up
  query has been answered; 503 ``{"status": "starting"}`` before (and ``"closing"`` after);
  503 ``{"status": "failed", "error": "..."}`` when starting the server raised (the error,
  e.g. a RayServer asked to start Ray in the lifespan's worker thread).
- ``GET /metrics``: Prometheus text format (0.0.4): ``coded_queries_total{outcome}`` and
  ``coded_query_latency_seconds{outcome,quantile}`` (0.5, 0.99, 0.999 over the last 10,000
  queries of each outcome, NaN before the first; ``_sum`` and ``_count`` over all) for the
  outcomes of :data:`~codedcomputing.serving.OUTCOMES` (``own``: its own task, exact;
  ``replica``: a replication copy; ``hedge``: the hedged backup; ``decoded``: its group's
  decode), the count also for ``failed``; ``coded_queries_in_flight`` (queries that requests
  wait for); ``coded_http_responses_total{code}``: every response the app sends, whatever its
  path and status (``/health`` and ``/metrics`` too; a scrape counts the responses before
  it, not itself); not uvicorn's own answers to requests it cannot parse. Written by hand, a
  few lines: ``prometheus_client``'s Summary exports no quantiles, so it would add a
  dependency and still leave the percentiles to us.
- Shutdown (SIGINT or SIGTERM to ``coded serve``): uvicorn stops accepting connections and waits
  for the requests in flight (their queries are answered); with a graceful-shutdown timeout
  (``coded serve --graceful-timeout``) the requests still waiting then are answered 503 with
  ``Connection: close``. Then the lifespan closes the server
  (:meth:`~codedcomputing.serving.ThreadServer.close`): queries that no request waits for any
  more fail at once, rather than being computed for nobody, and the process exits 0.

Speed-ups used when installed (``pip install orjson httptools uvloop``; the contract is the same
without them): orjson parses the request bodies and writes the answers (a malformed body is
parsed again by the standard library, whose message names the problem); uvicorn then picks
httptools over h11 and uvloop over asyncio's event loop (``docs/serving.rst``: measured).

Why the depth of a body is bounded by catching the parser's RecursionError rather than by
scanning the bytes first: a scan of the bytes outside strings (numpy, escapes handled) took
2.4-8x as long as orjson's whole parse of the same body (16 MB down to one 784-number input),
on every request; the parsers bound the depth themselves, orjson at 1,024 levels in C and the
standard library through Python's recursion limit, so the one failure was an uncaught
RecursionError, and catching it costs nothing on the valid path.

Why Starlette and uvicorn: an app is a list of routes of plain async handlers with one lifespan
function, and the server is a separate, widely used and well kept program (the stack under
FastAPI), small enough to read; an ASGI app can also run under any other ASGI server.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future

import numpy as np

from .records import OUTCOMES
from .threads import QueryFailed, QueryTimeout, ThreadServer

try:
    from starlette.applications import Starlette
    from starlette.exceptions import HTTPException
    from starlette.middleware import Middleware
    from starlette.requests import ClientDisconnect, Request
    from starlette.responses import Response
    from starlette.routing import Route
except ImportError as err:  # pragma: no cover - the serve extra is missing
    raise ImportError(
        "codedcomputing.serving.http needs Starlette and uvicorn: pip install 'codedcomputing[serve]'"
    ) from err

try:  # optional: parses a 784-number input in ~40 us where the standard library takes ~350 us
    from orjson import dumps as _fast_dumps
    from orjson import loads as _fast_loads
except ImportError:  # pragma: no cover - orjson is not installed
    _fast_dumps = _fast_loads = None

__all__ = ["HTTPMetrics", "create_app", "run"]

QUANTILES = (0.5, 0.99, 0.999)
_WINDOW = 10_000  # latencies kept per outcome for the quantiles
_log = logging.getLogger(__name__)


class HTTPMetrics:
    """Counts and latencies per outcome, and responses per status code, as Prometheus text."""

    def __init__(self):
        self.outcomes = (*OUTCOMES, "failed")
        self.count = dict.fromkeys(self.outcomes, 0)
        self.total = dict.fromkeys(self.outcomes, 0.0)
        self.window = {outcome: deque(maxlen=_WINDOW) for outcome in self.outcomes}
        self.responses: dict[int, int] = {}
        self.in_flight = 0

    def query(self, outcome: str, latency: float | None) -> None:
        """Count one query; ``latency`` in seconds (None for a failed one)."""
        self.count[outcome] += 1
        if latency is None:
            return
        self.total[outcome] += latency
        self.window[outcome].append(latency)

    def response(self, code: int) -> None:
        self.responses[code] = self.responses.get(code, 0) + 1

    def text(self) -> str:
        lines = [
            "# HELP coded_queries_total Queries answered, by how (failed: no path could answer).",
            "# TYPE coded_queries_total counter",
        ]
        lines += [f'coded_queries_total{{outcome="{o}"}} {self.count[o]}' for o in self.outcomes]
        lines += [
            "# HELP coded_query_latency_seconds Query latency from submit to answer, by outcome.",
            "# TYPE coded_query_latency_seconds summary",
        ]
        for outcome in OUTCOMES:  # a failed query has no latency
            window = np.asarray(self.window[outcome], dtype=np.float64)
            for q in QUANTILES:
                value = repr(float(np.quantile(window, q))) if window.size else "NaN"
                lines.append(f'coded_query_latency_seconds{{outcome="{outcome}",quantile="{q}"}} {value}')
            lines.append(f'coded_query_latency_seconds_sum{{outcome="{outcome}"}} {self.total[outcome]!r}')
            lines.append(f'coded_query_latency_seconds_count{{outcome="{outcome}"}} {self.count[outcome]}')
        lines += [
            "# HELP coded_queries_in_flight Queries that requests are waiting for.",
            "# TYPE coded_queries_in_flight gauge",
            f"coded_queries_in_flight {self.in_flight}",
            "# HELP coded_http_responses_total HTTP responses, by status code.",
            "# TYPE coded_http_responses_total counter",
        ]
        lines += [f'coded_http_responses_total{{code="{c}"}} {n}' for c, n in sorted(self.responses.items())]
        return "\n".join(lines) + "\n"


class _BadRequest(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def _reject_constant(token: str):
    raise ValueError(f"{token} is not allowed (inputs must be finite)")


def _parse_inputs(body: bytes, shape: tuple, dtype: np.dtype, max_inputs: int) -> np.ndarray:
    """The request body's inputs as an ``(m, *shape)`` array of ``dtype``; :class:`_BadRequest` if not."""
    payload = None
    if _fast_loads is not None:
        try:
            payload = _fast_loads(body)
        except ValueError:  # the standard parser names the problem (or reads 1e400 as inf)
            payload = None
    try:
        if payload is None:  # integers as floats, as orjson reads those beyond 64 bits
            payload = json.loads(body, parse_constant=_reject_constant, parse_int=float)
    except (ValueError, UnicodeDecodeError) as err:
        raise _BadRequest(400, f"the body is not valid JSON: {err}") from None
    except RecursionError:  # the module docstring: why not a scan for the depth first
        raise _BadRequest(400, "the body's JSON is nested too deep (about 1,000 levels or more)") from None
    if not isinstance(payload, dict) or "inputs" not in payload:
        raise _BadRequest(422, 'the body must be a JSON object with a key "inputs" (a list of inputs)')
    inputs = payload["inputs"]
    if not isinstance(inputs, list) or not inputs:
        raise _BadRequest(422, '"inputs" must be a non-empty list of inputs')
    if len(inputs) > max_inputs:
        raise _BadRequest(413, f'"inputs" holds {len(inputs)} inputs, more than max_inputs={max_inputs}')
    size = math.prod(shape)
    try:
        rows = np.asarray(inputs)
    except ValueError:  # ragged: one input at a time, to name the bad one
        rows = None
    if rows is None or rows.ndim < 2 or rows.dtype.kind not in "iuf":
        rows = np.empty((len(inputs), *shape), dtype=dtype)
        for i, item in enumerate(inputs):
            rows[i] = _one_input(item, i, shape, size)
    elif rows[0].size != size or (rows.ndim > 2 and rows.shape[1:] != shape):
        raise _BadRequest(
            422, f"inputs[0] has shape {rows.shape[1:]}; each input must have shape {shape} or {size} numbers"
        )
    with np.errstate(over="ignore"):
        rows = rows.reshape(len(inputs), *shape).astype(dtype, copy=False)
    finite = np.isfinite(rows.reshape(len(inputs), -1)).all(axis=1)
    if not finite.all():
        raise _BadRequest(422, f"inputs[{int(np.argmin(finite))}] holds a number out of range for {dtype}")
    return rows


def _one_input(item, i: int, shape: tuple, size: int) -> np.ndarray:
    try:
        row = np.asarray(item)
    except ValueError:
        raise _BadRequest(422, f"inputs[{i}] is not a numeric array (ragged nesting)") from None
    if row.dtype.kind not in "iuf":
        raise _BadRequest(422, f"inputs[{i}] is not a numeric array (it holds {row.dtype.kind!r} values)")
    if row.size != size or (row.ndim > 1 and row.shape != shape):
        raise _BadRequest(
            422, f"inputs[{i}] has shape {row.shape}; each input must have shape {shape} or {size} numbers"
        )
    return row.reshape(shape)


def _json(status: int, content, headers=None) -> Response:
    encoded = _fast_dumps(content) if _fast_dumps is not None else json.dumps(content).encode()
    return Response(encoded, status_code=status, headers=headers, media_type="application/json")


class _RequestBody:
    """One request's body as the app reads it (``receive``); ``settle`` reads and discards what
    is left of it, at most ``limit`` bytes of body in all, before the response."""

    def __init__(self, scope, receive, limit: int):
        headers = dict(scope.get("headers", ()))
        length = headers.get(b"content-length", b"")
        self.declared = int(length) if length.isdigit() else None
        self.ended = not self.declared and b"transfer-encoding" not in headers  # no body
        self.expects_continue = headers.get(b"expect", b"").lower() == b"100-continue"
        self.limit, self.read, self.asked = limit, 0, False
        self.closing = False  # set: the connection closes after this response, whatever is left
        self._receive = receive

    async def receive(self):
        self.asked = True
        message = await self._receive()
        if message["type"] == "http.request":
            self.read += len(message.get("body", b""))
            self.ended = not message.get("more_body", False)
        else:  # http.disconnect: nothing more will come
            self.ended = True
        return message

    async def settle(self) -> bool:
        """Read and discard the rest of the body; True when the connection can serve on."""
        if self.closing:
            return False
        if self.ended:
            return True
        if (self.declared is not None and self.declared > self.limit) or (
            self.expects_continue and not self.asked  # the client waits for a 100: it sent nothing
        ):
            return False
        while not self.ended and self.read <= self.limit:
            await self.receive()
        return self.read <= self.limit


class _EveryResponse:
    """ASGI middleware around the routes, for the contract's guarantees on every response:
    counted by status in ``metrics``; sent once what is left of the request body was read and
    discarded (at most ``drain_bytes`` of body), else with ``Connection: close``; an unexpected
    error answered by a JSON 500, a cancelled request (uvicorn's graceful-shutdown timeout) by
    a JSON 503 with ``Connection: close``."""

    def __init__(self, app, metrics: HTTPMetrics, drain_bytes: int):
        self.app, self.metrics, self.drain_bytes = app, metrics, drain_bytes

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        body = _RequestBody(scope, receive, self.drain_bytes)
        sent = {"start": False, "end": False}

        async def send_counted(message) -> None:
            if message["type"] == "http.response.start":
                if not await body.settle():
                    message = {**message, "headers": [*message.get("headers", ()), (b"connection", b"close")]}
                self.metrics.response(message["status"])
                sent["start"] = True
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                sent["end"] = True
            await send(message)

        try:
            await self.app(scope, body.receive, send_counted)
        except asyncio.CancelledError:
            if sent["start"]:
                raise
            task = asyncio.current_task()
            if hasattr(task, "uncancel"):  # Python 3.11+: the request is answered, not cancelled
                task.uncancel()
            body.closing = True
            error = "the server is shutting down: the request was cancelled before it was answered"
            await _json(503, {"error": error})(scope, body.receive, send_counted)
        except Exception as err:
            if sent["end"]:  # answered already: logged, and the connection serves on
                _log.exception("error after the response to %s %s", scope["method"], scope["path"])
            elif sent["start"]:  # a response cut short: uvicorn closes the connection
                raise
            else:
                _log.exception("unexpected error on %s %s", scope["method"], scope["path"])
                error = f"the server failed on this request ({type(err).__name__}: {err})"
                await _json(500, {"error": error})(scope, body.receive, send_counted)


def create_app(
    make_server: Callable[[], ThreadServer],
    input_shape,
    *,
    input_dtype=np.float32,
    max_body_bytes: int = 16 * 2**20,
    max_inputs: int = 1024,
    close_timeout: float | None = 30.0,
):
    """The ASGI app serving ``POST /predict``, ``GET /health`` and ``GET /metrics`` (module docstring).

    Parameters
    ----------
    make_server : callable
        Returns a new, not started :class:`~codedcomputing.serving.ThreadServer` (or
        :class:`~codedcomputing.serving.RayServer`); called once, in
        the app's lifespan, which starts it (in a worker thread: ``/health`` answers 503 until
        then), sends it one warm-up query of zeros, and closes it at shutdown.
    input_shape : tuple of int
        One input's shape (the model's, without the batch axis).
    input_dtype : numpy dtype, default float32
        The inputs are cast to it before they are submitted.
    max_body_bytes : int, default 16 MiB
        Larger bodies get 413, nothing of them kept; a body up to 4x this is read to its end
        first (module docstring: connections).
    max_inputs : int, default 1024
        More inputs in one request get 413.
    close_timeout : float or None, default 30
        Seconds the shutdown waits for requests still waiting for their queries (none under
        uvicorn, which closes the lifespan after its requests); then the server closes, and
        queries no request waits for fail at once.
    """
    if not callable(make_server):
        raise ValueError(f"make_server must be a callable returning a ThreadServer, got {make_server!r}")
    try:
        shape = tuple(int(n) for n in input_shape)
    except (TypeError, ValueError):
        raise ValueError(f"input_shape must be a tuple of positive ints, got {input_shape!r}") from None
    if not shape or min(shape) < 1:
        raise ValueError(f"input_shape must be a tuple of positive ints, got {input_shape!r}")
    dtype = np.dtype(input_dtype)
    if dtype.kind != "f":
        raise ValueError(f"input_dtype must be a floating dtype, got {dtype}")
    for value, name in ((max_body_bytes, "max_body_bytes"), (max_inputs, "max_inputs")):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    state = {"status": "starting", "server": None, "error": None}
    metrics = HTTPMetrics()
    waiting: set[asyncio.Future] = set()  # the requests' waits for their queries' answers
    orphans: list[Future] = []  # queries whose request stopped waiting (cancelled at shutdown)

    def start_server() -> None:
        try:
            server = make_server()
            if not isinstance(server, ThreadServer):
                raise ValueError(f"make_server must return a ThreadServer, got {server!r}")
            state["server"] = server.start()
            server.submit(np.zeros(shape, dtype=dtype)).result()  # warm-up: the replicas answer
        except Exception as err:  # reported by /health and /predict, not lost in the lifespan
            state["error"] = f"{type(err).__name__}: {err}"
            state["status"] = "failed"
            raise
        state["status"] = "ready"

    @contextlib.asynccontextmanager
    async def lifespan(app):
        starting = asyncio.create_task(asyncio.to_thread(start_server))
        try:
            yield
        finally:
            state["status"] = "closing"
            with contextlib.suppress(Exception):
                await starting
            if waiting:
                await asyncio.wait(set(waiting), timeout=close_timeout)
            if state["server"] is not None:  # nobody waits for the orphans: failed, not computed
                timeout = 0.0 if any(not query.done() for query in orphans) else close_timeout
                await asyncio.to_thread(state["server"].close, timeout)

    async def predict(request: Request) -> Response:
        if state["status"] != "ready":
            why = f" to start ({state['error']})" if state["status"] == "failed" else ""
            return _json(503, {"error": f"the server is {state['status']}{why}"})
        content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if content_type != "application/json":
            return _json(415, {"error": f"content type must be application/json, got {content_type!r}"})
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > max_body_bytes:
            error = f"the body ({declared} bytes) exceeds max_body_bytes={max_body_bytes}"
            return _json(413, {"error": error})
        chunks, length = [], 0
        try:
            async for chunk in request.stream():
                length += len(chunk)
                if length > max_body_bytes:
                    return _json(413, {"error": f"the body exceeds max_body_bytes={max_body_bytes}"})
                chunks.append(chunk)
        except ClientDisconnect:
            return _json(400, {"error": "the client disconnected before the body ended"})
        try:
            rows = _parse_inputs(b"".join(chunks), shape, dtype, max_inputs)
        except _BadRequest as bad:
            return _json(bad.status, {"error": str(bad)})
        server = state["server"]
        try:
            futures = [server.submit(row) for row in rows]
        except RuntimeError as err:  # closed between the check and the submit
            return _json(503, {"error": str(err)})
        answered = asyncio.gather(*(asyncio.wrap_future(f) for f in futures), return_exceptions=True)
        waiting.add(answered)
        metrics.in_flight += len(futures)
        try:
            answers = await answered
        except asyncio.CancelledError:  # the middleware answers 503; the server fails these at close
            orphans.extend(f for f in futures if not f.done())
            raise
        finally:
            metrics.in_flight -= len(futures)
            waiting.discard(answered)
        failed = [i for i, a in enumerate(answers) if isinstance(a, BaseException)]
        for answer in answers:
            if isinstance(answer, BaseException):
                metrics.query("failed", None)
            else:
                metrics.query(answer.outcome, answer.latency)
        outputs = [None if i in failed else np.asarray(a.estimate).tolist() for i, a in enumerate(answers)]
        exact = [None if i in failed else a.exact for i, a in enumerate(answers)]
        if failed:
            reasons = []
            for i in failed:
                why = answers[i]
                kind = "" if isinstance(why, QueryFailed) else f"{type(why).__name__}: "
                reasons.append(f"inputs[{i}] ({kind}{why})")
            content = {
                "error": f"{len(failed)} of {len(answers)} inputs were not answered: " + "; ".join(reasons)
            }
            content.update(failed=failed, outputs=outputs, exact=exact)
            timed_out = all(isinstance(answers[i], QueryTimeout) for i in failed)
            return _json(504 if timed_out else 503, content)
        return _json(200, {"outputs": outputs, "exact": exact})

    async def health(request: Request) -> Response:
        status = state["status"]
        content = {"status": status} if status != "failed" else {"status": status, "error": state["error"]}
        return _json(200 if status == "ready" else 503, content)

    async def metrics_text(request: Request) -> Response:
        return Response(metrics.text(), media_type="text/plain; version=0.0.4; charset=utf-8")

    async def no_route(request: Request, exc: HTTPException) -> Response:
        path = request.url.path
        if exc.status_code == 404:
            error = f"no endpoint at {path}: POST /predict, GET /health, GET /metrics"
        elif exc.status_code == 405:
            allowed = (exc.headers or {}).get("Allow", "")
            error = f"method {request.method} is not allowed on {path} (allowed: {allowed})"
        else:
            error = str(exc.detail)
        return _json(exc.status_code, {"error": error}, headers=exc.headers)

    routes = [
        Route("/predict", predict, methods=["POST"]),
        Route("/health", health, methods=["GET"]),
        Route("/metrics", metrics_text, methods=["GET"]),
    ]
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        middleware=[Middleware(_EveryResponse, metrics=metrics, drain_bytes=4 * max_body_bytes)],
        exception_handlers={HTTPException: no_route},
    )
    app.state.metrics = metrics
    app.state.serving = state
    return app


def run(app, host: str = "127.0.0.1", port: int = 8000, *, log_level: str = "warning", **config) -> None:
    """Serve ``app`` with uvicorn until SIGINT or SIGTERM, then shut down gracefully and return.

    uvicorn's own ``run`` raises the caught signal again after its graceful shutdown (the
    process then dies of it); here a drained shutdown returns normally, so ``coded serve``
    exits 0. ``config``: more ``uvicorn.Config`` options (e.g. ``timeout_graceful_shutdown``:
    seconds the drain waits for requests in flight before it cancels them, which an app from
    :func:`create_app` answers 503; None, uvicorn's default: no limit).
    """
    import uvicorn

    class _Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self):
            with super().capture_signals():
                yield
                self._captured_signals.clear()  # handled: shut down and exit normally

    config = uvicorn.Config(app, host=host, port=port, log_level=log_level, lifespan="on", **config)
    server = _Server(config)
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("run serves from the main thread (it handles SIGINT and SIGTERM)")
    server.run()
    if not server.started:
        raise RuntimeError(f"the HTTP server could not start on {host}:{port} (see the log above)")
