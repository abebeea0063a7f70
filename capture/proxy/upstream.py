"""The upstream a wire format's requests are forwarded to, over kept-alive connections.

`Upstream` sends a request as the client sent it (its headers but the hop-by-hop ones and
the proxy's own ``X-Agent-Journal-*``; ``Accept-Encoding: identity`` so the journal can
read the answer) and hands back the response unread, so a stream is passed on as it
arrives. Connections are kept for the next request; one that the server closed while idle
is replaced once, before anything was sent on it, never after.

`UpstreamError` is how a failed call is journaled when the upstream answered: an HTTP
status of 400 or more (its body and the headers a client acts on kept), or an error event
in a stream. A call the upstream never answered (refused, reset, timed out) is journaled as
the ``OSError`` it raised.
"""

from __future__ import annotations

import http.client
import socket
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

__all__ = ["HOP_BY_HOP", "Upstream", "UpstreamError", "UpstreamResponse", "forwarded_headers"]

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
    }
)
"""Headers of one hop, never forwarded (the length is written anew)."""

OWN_PREFIX = "x-agent-journal-"
"""The proxy's own request headers (the session's name, its metadata): never forwarded."""

KEPT_ERROR_HEADERS = (
    "content-type",
    "retry-after",
    "retry-after-ms",
    "x-should-retry",
    "request-id",
    "x-request-id",
)
"""The headers of an error answer a client acts on: journaled with it, sent again by a
replay. No other header of the upstream's is ever journaled."""


class UpstreamError(Exception):
    """The upstream answered a model call with an error; see the module.

    ``status_code`` is the HTTP status (None for an error event inside a stream that began
    with 200), ``body`` the answer's JSON (or its text), ``headers`` those of
    `KEPT_ERROR_HEADERS` it sent.
    """

    def __init__(
        self,
        message: str = "",
        status_code: int | None = None,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.body = body
        self.headers = dict(headers or {})


def forwarded_headers(headers: Iterable[tuple[str, str]], host: str) -> list[tuple[str, str]]:
    """A client's request headers as sent upstream (see the module)."""
    kept = [
        (name, value)
        for name, value in headers
        if name.lower() not in HOP_BY_HOP
        and not name.lower().startswith(OWN_PREFIX)
        and name.lower() != "accept-encoding"
    ]
    return [*kept, ("Host", host), ("Accept-Encoding", "identity")]


@dataclass
class UpstreamResponse:
    """An answer being read: its status and headers, the body still to read."""

    status: int
    reason: str
    headers: list[tuple[str, str]]
    body: http.client.HTTPResponse
    connection: http.client.HTTPConnection

    def header(self, name: str) -> str:
        """A header's value ('' when absent)."""
        return self.body.getheader(name) or ""


class Upstream:
    """One upstream base URL (``https://api.openai.com/v1``), its connections kept.

    Args:
        base_url: the base URL its official client takes.
        strip: the part of a request's path the base URL already ends with (``/v1`` for
            OpenAI's, whose base URL includes it; nothing for Anthropic's).
        timeout: seconds to wait for the upstream to connect or send more.
    """

    def __init__(self, base_url: str, *, strip: str = "", timeout: float = 600.0) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"upstream {base_url!r}: expected an http:// or https:// URL")
        self.base_url = base_url
        self.https = parts.scheme == "https"
        self.host = parts.hostname
        self.port = parts.port or (443 if self.https else 80)
        self.netloc = parts.netloc
        self.prefix = parts.path.rstrip("/")
        self.strip = strip
        self.timeout = timeout
        self._idle: list[http.client.HTTPConnection] = []
        self._busy: dict[http.client.HTTPConnection, socket.socket | None] = {}
        """The connections of calls under way, with their sockets (kept: a connection whose
        answer closes it lets go of its socket while the answer is still read)."""
        self._lock = threading.Lock()

    def path_for(self, path: str) -> str:
        """The upstream path of a request's path (query included)."""
        if self.strip and (path == self.strip or path.startswith(self.strip + "/")):
            path = path[len(self.strip) :]
        return self.prefix + path

    def _connection(self) -> tuple[http.client.HTTPConnection, bool]:
        with self._lock:
            reused = bool(self._idle)
            kind = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
            connection = (
                self._idle.pop() if reused else kind(self.host, self.port, timeout=self.timeout)
            )
            self._busy[connection] = connection.sock
        return connection, reused

    def send(
        self, method: str, path: str, headers: Iterable[tuple[str, str]], body: bytes | None
    ) -> UpstreamResponse:
        """Send a request; the answer's body is left to read (`release` when read).

        Raises:
            OSError, http.client.HTTPException: the upstream did not answer.
        """
        sent = forwarded_headers(headers, self.netloc)
        for attempt in (0, 1):
            connection, reused = self._connection()
            try:
                connection.putrequest(
                    method, self.path_for(path), skip_host=True, skip_accept_encoding=True
                )
                for name, value in sent:
                    connection.putheader(name, value)
                if body is not None:
                    connection.putheader("Content-Length", str(len(body)))
                connection.endheaders(body)
                with self._lock:
                    self._busy[connection] = connection.sock
                response = connection.getresponse()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                self._forget(connection)
                if reused and attempt == 0:
                    continue  # the server closed it while it was idle: nothing was read
                raise
            except BaseException:
                self._forget(connection)
                raise
            return UpstreamResponse(
                response.status, response.reason, response.getheaders(), response, connection
            )
        raise AssertionError("unreachable")  # pragma: no cover

    def release(self, response: UpstreamResponse) -> None:
        """Keep a fully read answer's connection for the next request (or close it)."""
        if response.body.will_close or not response.body.isclosed():
            return self.discard(response)
        with self._lock:
            self._busy.pop(response.connection, None)
            self._idle.append(response.connection)
        return None

    def discard(self, response: UpstreamResponse) -> None:
        """Close a broken answer's connection and its reader (it is never reused)."""
        response.body.close()
        self._forget(response.connection)

    def _forget(self, connection: http.client.HTTPConnection) -> None:
        with self._lock:
            self._busy.pop(connection, None)
        connection.close()

    def abort(self) -> None:
        """Break the connections of the calls under way: their reads end at once.

        The calls see their connection broken (an ``OSError``, or the end of the body);
        `ProxyServer.stop` does this once its grace is over.
        """
        with self._lock:
            busy = [sock for sock in self._busy.values() if sock is not None]
        for sock in busy:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        """Close every kept connection."""
        with self._lock:
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()
