"""The recording proxy's HTTP server: forward, stream through, journal; or answer a replay.

``POST`` of a wire format's path (`capture.proxy.WIRES`: ``/v1/chat/completions``,
``/v1/responses``, ``/v1/messages``) is a model call. Its conversation is found
(`Conversations`: by ``X-Agent-Journal-Session``, else by continuity), what the request
brings is journaled, and then:

* **recording** (a `Recording` source): the request goes to the upstream of its wire
  format's family. A stream is passed on event by event as each arrives, its chunk
  bodies journaled once it ends; only the event that ends it (``[DONE]``,
  ``message_stop``, ``response.completed``, or an error event) waits for the journal's
  write, so the agent's next request always finds the response journaled. An answer
  is journaled before it is sent. An error status (4xx, 5xx) is journaled as a failed
  call (`UpstreamError`) and passed on as it came; an upstream that did not answer
  (refused, reset, timed out) is journaled as its ``OSError`` and the agent's connection
  is closed unanswered, as the upstream's was. Journaling never fails a call: a write the
  journal cannot take goes to the spool (`capture.Destination`), and a request the
  journal cannot map is forwarded and named once on the logger ``capture.proxy``.
* **replaying** (a source whose sessions have a `capture.Player`): nothing is sent
  anywhere. The player answers with the recorded response (a stream as its recorded
  chunks), raises the recorded failure again (the same status and body, or the
  connection closed), or refuses the request (`Refusal`): the agent gets a 422 with a JSON
  body in its wire format's error shape naming the session, the seq and the fields that
  differ, which its client raises (``x-should-retry: false``: no client retries it).

Any other path is forwarded as it is when recording (``GET /v1/models`` too) and not
journaled; a replay answers ``GET /v1/models`` with the models its recordings name and
anything else with a 404. Credentials (``Authorization``, ``x-api-key``, any header) are
forwarded and never journaled: the journal gets bodies and the ``X-Agent-Journal-*``
headers only, redacted as the `Destination` says.

`ProxyServer` listens on 127.0.0.1 unless told otherwise, and closes a conversation no
request continued for ``idle`` seconds (a timer). `ProxyServer.stop` stops taking
connections, waits (up to ``grace`` seconds) for the exchanges under way, then breaks the
upstream connections of those still open and journals each as cut (a ``TimeoutError``
naming the grace, with what a stream had sent), and closes every session (their answers,
their sampling), so nothing is left half-written.
"""

from __future__ import annotations

import http.client
import logging
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

import orjson

from journal import HaltSession, JournalError, json_stand_in, loads_exact

from ..exceptions import rebuilt
from ..output import Destination
from ..play import FailedCall
from ..recorder import Recorder
from .anthropic_wire import MESSAGES
from .conversations import Conversations, FoundBy
from .openai_wire import CHAT, RESPONSES
from .session import Exchange, ProxySession
from .sse import SseReader
from .upstream import HOP_BY_HOP, KEPT_ERROR_HEADERS, Upstream, UpstreamError, UpstreamResponse
from .wire import Family, Wire

__all__ = [
    "METADATA_PREFIX",
    "SESSION_HEADER",
    "WIRES",
    "ProxyServer",
    "Recording",
    "Refusal",
    "SessionSource",
    "proxy_metadata",
]

log = logging.getLogger("capture.proxy")

WIRES: Mapping[str, Wire] = {wire.path: wire for wire in (CHAT, RESPONSES, MESSAGES)}
"""The model calls the proxy journals, by path."""

SESSION_HEADER = "x-agent-journal-session"
"""The request header that names a conversation (its session)."""
METADATA_PREFIX = "x-agent-journal-meta-"
"""``X-Agent-Journal-Meta-KEY: value`` keeps ``KEY: value`` in the session's metadata."""

REFUSED_STATUS = 422
"""The status of a replay's refusal: a client raises it and does not retry it."""

_SESSION_ID = re.compile(r"[A-Za-z0-9_.:-]{1,128}")

_STRIP = {"openai": "/v1", "anthropic": ""}
"""What each family's base URL already ends with (see `Upstream`)."""


class Refusal(HaltSession):
    """A replay refuses a request: it does not match the recording (or nothing is left).

    ``details`` go into the error body the agent gets: ``session`` (the recorded one),
    ``seq``, ``differences`` (``path``, ``expected``, ``actual``).
    """

    def __init__(self, rule: str, reason: str, details: Mapping[str, Any] | None = None) -> None:
        super().__init__(rule, reason)
        self.details = dict(details or {})


class SessionSource(Protocol):
    """Where the sessions of new conversations come from: a recording, or a replay."""

    def open(
        self,
        wire: Wire,
        request: Mapping[str, Any],
        *,
        name: str | None,
        found_by: FoundBy,
        metadata: Mapping[str, str],
    ) -> ProxySession | str:
        """The session of a conversation that begins with ``request`` (or why none)."""
        ...

    def models(self) -> list[str]:
        """The models a replay can name (``GET /v1/models``); empty when recording."""
        ...


class Recording:
    """Sessions recorded into a `Destination` (redaction, sampling, the spool).

    A conversation named by the header gets that name as its session id, or, when the
    journal holds a session of that name already, the first free ``NAME.N``; one found by
    continuity gets ``proxy-<hex>``.
    """

    def __init__(self, destination: Destination, metadata: Mapping[str, Any] | None = None):
        self.destination = destination
        self.metadata = dict(metadata or {})
        self._used: set[str] = set()
        self._lock = threading.Lock()

    def open(
        self,
        wire: Wire,
        request: Mapping[str, Any],
        *,
        name: str | None,
        found_by: FoundBy,
        metadata: Mapping[str, str],
    ) -> ProxySession:
        """A new session for a conversation (see the class)."""
        session_id = self._free(name) if name else f"proxy-{uuid.uuid4().hex[:16]}"
        return ProxySession(
            Recorder(self.destination, session_id),
            wire,
            proxy_metadata(wire, name, found_by, {**self.metadata, **metadata}),
            name=name,
        )

    def _free(self, name: str) -> str:
        with self._lock:
            for n in range(1, 10_000):
                candidate = name if n == 1 else f"{name[:120]}.{n}"
                if candidate not in self._used and not self._stored(candidate):
                    self._used.add(candidate)
                    return candidate
        return f"{name[:100]}.{uuid.uuid4().hex[:12]}"

    def _stored(self, session_id: str) -> bool:
        journal = self.destination.usable()
        if journal is None:
            return False
        try:
            return journal.summary(session_id) is not None
        except (JournalError, OSError):
            return False

    def models(self) -> list[str]:
        """None: a recording forwards ``GET /v1/models``."""
        return []


def proxy_metadata(
    wire: Wire, name: str | None, found_by: FoundBy, metadata: Mapping[str, Any]
) -> dict[str, Any]:
    """A proxy session's metadata: how it was found, and the request headers' metadata."""
    return {**metadata, "proxy": {"wire": wire.name, "found_by": found_by, "name": name}}


def _header_name(value: str | None) -> str | None:
    if value is None:
        return None
    if _SESSION_ID.fullmatch(value):
        return value
    log.warning(
        "agent-journal proxy: X-Agent-Journal-Session %r is no session id (1 to 128 letters, "
        "digits and -_.:); the conversation is found by continuity instead",
        value[:200],
    )
    return None


class _Server(ThreadingHTTPServer):
    request_queue_size = 128  # (the default 5 resets connections of agents that start at once)
    daemon_threads = True
    block_on_close = False
    proxy: ProxyServer


class ProxyServer:
    """The proxy: an HTTP server on a thread of its own; see the module.

    Args:
        source: where new conversations' sessions come from.
        upstreams: each family's base URL (``openai``, ``anthropic``); none to replay.
        listen: the address to listen on (port 0: any free one).
        grace: seconds `stop` waits for exchanges under way.
        idle: seconds after which a conversation no request continued is closed.
    """

    def __init__(
        self,
        source: SessionSource,
        upstreams: Mapping[Family, str] | None = None,
        *,
        listen: tuple[str, int] = ("127.0.0.1", 0),
        grace: float = 10.0,
        idle: float = 3600.0,
    ) -> None:
        self.source = source
        self.upstreams = {
            family: Upstream(url, strip=_STRIP[family]) for family, url in (upstreams or {}).items()
        }
        self.conversations = Conversations()
        self.grace = grace
        self.idle = idle
        self._server = _Server(listen, _Handler)
        self._server.proxy = self
        self._thread: threading.Thread | None = None
        self._busy = 0
        self._quiet = threading.Condition()
        self._closing = threading.Event()
        self._idle_stop = threading.Event()
        self._stopping = False
        self._warned: set[str] = set()

    @property
    def address(self) -> tuple[str, int]:
        """The host and port it listens on."""
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    @property
    def url(self) -> str:
        """Its base URL (``http://127.0.0.1:PORT``)."""
        host, port = self.address
        return f"http://{host}:{port}"

    @property
    def env(self) -> dict[str, str]:
        """The environment variables that point the official clients at it."""
        return {"OPENAI_BASE_URL": f"{self.url}/v1", "ANTHROPIC_BASE_URL": self.url}

    def start(self) -> ProxyServer:
        """Serve from a thread of its own."""
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        threading.Thread(target=self._expiring, daemon=True).start()
        return self

    def stop(self) -> None:
        """Stop cleanly; see the module.

        No new connection, the exchanges under way finished (or cut after ``grace``
        seconds), every session closed.
        """
        self._stopping = True
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join()
            self._thread = None
        deadline = time.monotonic() + self.grace
        with self._quiet:
            while self._busy and time.monotonic() < deadline:
                self._quiet.wait(0.05)
            self._closing.set()
            cut = self._busy
        if cut:
            log.warning(
                "agent-journal proxy: %d call%s still under way after the grace of %g s: cut, "
                "each journaled as a failed call",
                cut,
                "" if cut == 1 else "s",
                self.grace,
            )
        self._idle_stop.set()
        for upstream in self.upstreams.values():
            upstream.abort()  # the calls still under way end now, journaled as cut
        with self._quiet:
            while self._busy and time.monotonic() < deadline + 5:
                self._quiet.wait(0.05)
        for session in self.conversations.sessions():
            self._journaling(session, "closing it", session.close)
        self._server.server_close()
        for upstream in self.upstreams.values():
            upstream.close()

    def __enter__(self) -> ProxyServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @contextmanager
    def _exchange(self) -> Iterator[None]:
        with self._quiet:
            self._busy += 1
        try:
            yield
        finally:
            with self._quiet:
                self._busy -= 1
                self._quiet.notify_all()

    def _journaling(self, session: ProxySession, what: str, write: Callable[[], Any]) -> Any:
        """Journal through ``write``; a recording never fails the call for it (see module)."""
        try:
            return write()
        except (JournalError, ValueError, TypeError, HaltSession) as error:
            if session.player is not None:
                raise
            if session.session_id not in self._warned:
                self._warned.add(session.session_id)
                log.warning(
                    "agent-journal proxy: session %s: could not journal %s (%s); the call "
                    "goes on, and the session records no more of it",
                    session.session_id,
                    what,
                    error,
                )
            session.closed = True
            return None

    def _expiring(self) -> None:
        """Close the conversations idle for ``idle`` seconds, until the stop."""
        every = min(max(self.idle / 4, 0.01), 30.0)
        while not self._idle_stop.wait(every):
            for session in self.conversations.expire(self.idle):
                self._journaling(session, "closing it", session.close)

    def _cut(self) -> TimeoutError:
        """What a call still under way when the grace is over is journaled as."""
        return TimeoutError(
            f"the proxy stopped while the call was under way (its grace of {self.grace:g} s "
            "was over)"
        )

    # -- one request ---------------------------------------------------------------

    def handle(self, handler: _Handler) -> None:  # noqa: C901 - one route per branch
        """Answer one request (see the module)."""
        if self._stopping:
            return handler.drop()
        with self._exchange():
            path = handler.path.partition("?")[0]
            body = handler.read_body()
            wire = WIRES.get(path) if handler.command == "POST" else None
            request = _json_object(body) if wire is not None else None
            if wire is None or request is None:
                return self._other(handler, path, body)
            name = _header_name(handler.headers.get(SESSION_HEADER))
            metadata = {
                key[len(METADATA_PREFIX) :]: value
                for key, value in ((k.lower(), v) for k, v in handler.headers.items())
                if key.startswith(METADATA_PREFIX)
            }

            def open_new(found_by: FoundBy) -> ProxySession | str:
                return self.source.open(
                    wire, request, name=name, found_by=found_by, metadata=metadata
                )

            taken = self.conversations.take(wire, request, name, open_new)
            if isinstance(taken, str):
                return handler.refuse(wire, Refusal("replay_refused", taken))
            try:
                if taken.player is not None:
                    return self._replay(handler, wire, taken, request)
                return self._record(handler, wire, taken, request, body)
            finally:
                taken.done()

    def _other(self, handler: _Handler, path: str, body: bytes | None) -> None:
        upstream = self._upstream_for(path)
        if upstream is None:
            if path.rstrip("/") == "/v1/models" and handler.command == "GET":
                models = [
                    {"id": m, "object": "model", "owned_by": "agent-journal"}
                    for m in self.source.models()
                ]
                return handler.send_json(200, {"object": "list", "data": models})
            return handler.send_json(
                404,
                {
                    "error": {
                        "message": f"agent-journal proxy: nothing answers {handler.command} "
                        f"{path} here "
                        "(a replay answers the model calls it recorded)",
                        "type": "not_found",
                    }
                },
            )
        try:
            response = upstream.send(handler.command, handler.path, handler.headers.items(), body)
        except (OSError, http.client.HTTPException):
            return handler.drop()
        handler.relay(response, upstream)
        return None

    def _upstream_for(self, path: str) -> Upstream | None:
        if not self.upstreams:
            return None
        family: Family = "anthropic" if path.startswith("/v1/messages") else "openai"
        return self.upstreams.get(family) or next(iter(self.upstreams.values()))

    def _record(
        self,
        handler: _Handler,
        wire: Wire,
        session: ProxySession,
        request: dict[str, Any],
        body: bytes | None,
    ) -> None:
        exchange: Exchange | None = self._journaling(
            session, "the request", lambda: session.begin(request)
        )

        def journal(what: str, write: Callable[[Exchange], Any]) -> None:
            if exchange is not None and not session.closed:
                self._journaling(session, what, lambda: write(exchange))

        upstream = self.upstreams.get(wire.family)
        if upstream is None:
            error = ConnectionRefusedError(f"the proxy has no upstream for {wire.family}")
            journal("the failed call", lambda e: session.failed(e, error))
            return handler.send_json(502, wire.error(502, str(error), {}))
        try:
            response = upstream.send("POST", handler.path, handler.headers.items(), body)
        except (OSError, http.client.HTTPException) as error:
            sent = self._cut() if self._closing.is_set() else _as_exception(error)
            journal("the failed call", lambda e: session.failed(e, sent))
            return handler.drop()
        if response.status >= 400:
            data = response.body.read()
            upstream.release(response)
            failure = UpstreamError(
                f"{response.status} {response.reason}",
                response.status,
                _json_or_text(data),
                {k.lower(): v for k, v in response.headers if k.lower() in KEPT_ERROR_HEADERS},
            )
            journal("the failed call", lambda e: session.failed(e, failure))
            return handler.send_bytes(response.status, response.headers, data)
        if response.header("content-type").startswith("text/event-stream"):
            return self._stream(handler, wire, session, response, upstream, journal)
        data = response.body.read()
        upstream.release(response)
        answer = _json_or_text(data)
        if isinstance(answer, dict):
            journal("the response", lambda e: session.answered(e, answer, stream=False))
        else:
            self._journaling(session, "the response", _unreadable(wire, data))
        return handler.send_bytes(response.status, response.headers, data)

    def _stream(
        self,
        handler: _Handler,
        wire: Wire,
        session: ProxySession,
        response: UpstreamResponse,
        upstream: Upstream,
        journal: Callable[[str, Callable[[Exchange], Any]], None],
    ) -> None:
        """Pass a stream on as it arrives; see the module."""
        reader = SseReader()
        chunks: list[Any] = []
        held: list[bytes] = []
        failure: UpstreamError | None = None
        handler.start_stream(response.status, response.headers)
        try:
            while True:
                data = response.body.read1(65536)
                if self._closing.is_set():
                    raise self._cut()
                if not data:
                    break
                for event in reader.feed(data):
                    payload = event.json()
                    if isinstance(payload, dict):
                        chunks.append(json_stand_in(payload))
                    if wire.failed(event.event, payload) and failure is None:
                        failure = UpstreamError("the stream sent an error", None, payload)
                    if held or failure is not None or wire.terminal(event.event, payload):
                        held.append(event.raw)
                    else:
                        handler.write_chunk(event.raw)
        except (OSError, http.client.HTTPException) as error:
            upstream.discard(response)
            broke = self._cut() if self._closing.is_set() else _as_exception(error)
            journal("the broken stream", lambda e: session.failed(e, broke, chunks=chunks))
            return handler.drop()
        upstream.release(response)
        if failure is not None:
            journal("the failed stream", lambda e: session.failed(e, failure, chunks=chunks))
        else:
            journal("the stream", lambda e: session.answered(e, chunks, stream=True))
        for raw in held:
            handler.write_chunk(raw)
        handler.write_chunk(reader.end())
        handler.end_stream()
        return None

    def _replay(
        self, handler: _Handler, wire: Wire, session: ProxySession, request: dict[str, Any]
    ) -> None:
        player = session.player
        assert player is not None
        try:
            exchange = session.begin(request)
            served = player.model(exchange.seq, exchange.record, exchange.whole)
            if served is None:
                raise Refusal("replay_stopped", "a replay through the proxy has no live model")
        except HaltSession as stop:
            session.stopped(stop)
            return handler.refuse(wire, stop, session.session_id)
        if isinstance(served, FailedCall):
            return self._replay_failure(handler, wire, session, exchange, served)
        stream = isinstance(served, list)
        session.answered(exchange, served, stream=stream)
        if not stream:
            return handler.send_json(200, served)
        handler.start_stream(200, [("Content-Type", "text/event-stream")])
        for raw in wire.events(served):
            handler.write_chunk(raw)
        handler.write_chunk(wire.end)
        handler.end_stream()
        return None

    def _replay_failure(
        self,
        handler: _Handler,
        wire: Wire,
        session: ProxySession,
        exchange: Exchange,
        failed: FailedCall,
    ) -> None:
        """Raise a recorded failure again, as the upstream did (see `UpstreamError`)."""
        error = rebuilt(failed.error)
        session.failed(
            exchange,
            error if isinstance(error, Exception) else Exception(str(error)),
            chunks=failed.chunks,
            recorded=failed.error,
        )
        attributes = failed.error.get("attributes") or {}
        status = attributes.get("status_code")
        if isinstance(error, UpstreamError) and isinstance(status, int):
            headers = [(k, str(v)) for k, v in (attributes.get("headers") or {}).items()]
            body = attributes.get("body")
            data = body.encode() if isinstance(body, str) else orjson.dumps(body)
            return handler.send_bytes(status, headers, data)
        if failed.chunks is not None:
            handler.start_stream(200, [("Content-Type", "text/event-stream")])
            for raw in wire.events(failed.chunks):
                handler.write_chunk(raw)
            if isinstance(error, UpstreamError):  # an error event: the stream ended there
                return handler.end_stream()
        return handler.drop()


def _unreadable(wire: Wire, data: bytes) -> Callable[[], None]:
    def complain() -> None:
        raise ValueError(f"the {wire.name} answer is not a JSON object ({data[:80]!r})")

    return complain


def _as_exception(error: BaseException) -> Exception:
    return error if isinstance(error, Exception) else ConnectionError(str(error))


def _json_or_text(data: bytes) -> Any:
    try:
        return json_stand_in(loads_exact(data))
    except ValueError:
        return data.decode("utf-8", "replace")


def _json_object(data: bytes | None) -> dict[str, Any] | None:
    if not data:
        return None
    try:
        value = loads_exact(data)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


class _Handler(BaseHTTPRequestHandler):
    """One client connection; every request goes to `ProxyServer.handle`."""

    protocol_version = "HTTP/1.1"
    timeout = 120
    server: _Server

    def do_POST(self) -> None:  # noqa: N802 - the http.server API
        self.server.proxy.handle(self)

    do_GET = do_PUT = do_DELETE = do_PATCH = do_POST  # noqa: N815

    def read_body(self) -> bytes | None:
        length = self.headers.get("Content-Length")
        if length is not None:
            return self.rfile.read(int(length))
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            parts: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    self.rfile.readline()
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline()
        return None

    def _head(
        self, status: int, headers: list[tuple[str, str]], extra: list[tuple[str, str]]
    ) -> None:
        self.send_response(status)
        for name, value in headers:
            if name.lower() not in HOP_BY_HOP:
                self.send_header(name, value)
        for name, value in extra:
            self.send_header(name, value)
        self.end_headers()

    def send_bytes(self, status: int, headers: list[tuple[str, str]], data: bytes) -> None:
        self._head(status, headers, [("Content-Length", str(len(data)))])
        self._write(data)

    def send_json(self, status: int, body: Any, extra: Sequence[tuple[str, str]] = ()) -> None:
        self.send_bytes(status, [("Content-Type", "application/json"), *extra], orjson.dumps(body))

    def refuse(self, wire: Wire, stop: HaltSession, session_id: str | None = None) -> None:
        details = dict(getattr(stop, "details", {}) or {})
        if session_id is not None:
            details.setdefault("replay_session", session_id)
        self.send_json(
            REFUSED_STATUS,
            wire.error(REFUSED_STATUS, stop.reason, details),
            [("x-should-retry", "false")],
        )

    def start_stream(self, status: int, headers: list[tuple[str, str]]) -> None:
        self._chunked = self.request_version == "HTTP/1.1"
        if not self._chunked:
            self.close_connection = True
        self._head(status, headers, [("Transfer-Encoding", "chunked")] if self._chunked else [])

    def write_chunk(self, data: bytes) -> None:
        if data:
            self._write(b"%x\r\n%s\r\n" % (len(data), data) if self._chunked else data)

    def end_stream(self) -> None:
        if self._chunked:
            self._write(b"0\r\n\r\n")

    def relay(self, response: UpstreamResponse, upstream: Upstream) -> None:
        """Pass an answer on as it arrives, unread by the journal."""
        self.start_stream(response.status, response.headers)
        try:
            while data := response.body.read1(65536):
                self.write_chunk(data)
        except (OSError, http.client.HTTPException):
            upstream.discard(response)
            return self.drop()
        upstream.release(response)
        self.end_stream()
        return None

    def drop(self) -> None:
        """Close the connection unanswered: the client sees it broken, as the upstream was."""
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _write(self, data: bytes) -> None:
        try:
            self.wfile.write(data)
            self.wfile.flush()
        except OSError:  # the agent went away: the exchange is journaled all the same
            self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:
        del format, args
