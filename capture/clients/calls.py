"""What every wrapped model client shares: one journaled creating call, its served streams.

A client wrapper (`capture.clients.openai`, `capture.clients.anthropic`,
`capture.clients.litellm`) builds a `_Create` per creating call (``chat.completions.create``,
``responses.create``, ``messages.create``, ``litellm.completion``)
with its response kind and the function that rebuilds a recorded body as the client's own
type: in a session the call journals its request and response (a stream as it passes,
`capture.clients.openai_streams`), in a replay the `Player` may serve the recorded one
instead (a stream as `_Served`, a failed call raised again). `Unjournaled` stands for the
calls of the model a wrapper does not journal; `_Proxy` for the wrapped client and its
namespaces.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

from journal import HaltSession

from ..exceptions import raised_by_model_call, rebuilt
from ..placement import session_of_call
from ..play import REPLAY_STOPPED, FailedCall
from ..session import CapturedSession, inside_a_tool
from .openai_streams import (
    AsyncRecordedStream,
    Kind,
    RecordedStream,
    StreamRecording,
    body_of,
    end_open,
)

__all__ = ["Rebuild", "Unjournaled", "client_settings", "served_stream"]

log = logging.getLogger("capture")

BESIDE_CREATE = frozenset(
    {"parse", "stream", "count_tokens", "with_raw_response", "with_streaming_response"}
)
"""The names of the calls beside ``create`` the wrappers do not journal (every client's)."""

_WARNED: set[str] = set()
_WARNED_LOCK = threading.Lock()


class _Served:
    """A recorded stream, served: its chunks rebuilt in order, both ways.

    Iterable and a context manager, sync and async, as the client's own streams are. A
    stream that broke in the recording raises ``error`` after its chunks (``on_error``
    journals it first, where the code meets it).
    """

    def __init__(
        self,
        chunks: list[Any],
        *,
        error: BaseException | None = None,
        on_error: Callable[[], None] | None = None,
    ) -> None:
        self._chunks = iter(chunks)
        self._error = error
        self._on_error = on_error

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        try:
            return next(self._chunks)
        except StopIteration:
            error, self._error = self._error, None
            if error is None:
                raise
            if self._on_error is not None:
                self._on_error()
            raise error from None

    def __aiter__(self) -> _Served:
        return self

    async def __anext__(self) -> Any:
        try:
            return next(self)
        except StopIteration:
            raise StopAsyncIteration from None

    def close(self) -> None:
        """Nothing to close: the chunks are in memory."""

    def __enter__(self) -> _Served:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> _Served:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


class _AsyncServed(_Served):
    """`_Served` for an async client, whose streams' ``close`` is awaited."""

    async def close(self) -> None:  # type: ignore[override]
        """Nothing to close: the chunks are in memory."""

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


Rebuild = Callable[[Kind, Any, bool], Any]
"""``rebuild(kind, body, chunk)``: the client's object a recorded body was parsed into."""


def served_stream(
    chunks: list[Any],
    *,
    is_async: bool,
    error: BaseException | None = None,
    on_error: Callable[[], None] | None = None,
) -> _Served:
    """A recorded stream served to the code: its (rebuilt) chunks, then ``error`` if any."""
    kind = _AsyncServed if is_async else _Served
    return kind(chunks, error=error, on_error=on_error)


def client_settings(client: Any) -> dict[str, Any] | None:
    """The settings of an openai client that shape a call beyond its request.

    ``max_retries`` (the client retries a 429 or a 5xx itself, before the code sees it) and
    ``timeout`` (a number, or an ``httpx.Timeout`` as its four parts); None for an object
    that has neither (a client-like stand-in).
    """
    settings: dict[str, Any] = {}
    retries = getattr(client, "max_retries", None)
    if isinstance(retries, int):
        settings["max_retries"] = retries
    timeout = getattr(client, "timeout", None)
    if isinstance(timeout, int | float) or timeout is None and "max_retries" in settings:
        settings["timeout"] = timeout
    elif all(hasattr(timeout, part) for part in ("connect", "read", "write", "pool")):
        settings["timeout"] = {
            part: getattr(timeout, part) for part in ("connect", "read", "write", "pool")
        }
    return settings or None


class _Create:
    """One creating call (``chat.completions.create``, ``messages.create``, ...), journaled.

    ``rebuild(kind, body, chunk)`` makes the client's object of a recorded body. A client
    whose calls are not a request body given as keywords (``google-genai``'s
    ``generate_content``) overrides `request_of`, `streams` and `rebuilt`.
    """

    def __init__(
        self,
        kind: Kind,
        create: Callable[..., Any],
        settings: dict[str, Any] | None,
        rebuild: Rebuild,
    ) -> None:
        self.kind = kind
        self.create = create
        self.settings = settings
        self.rebuild = rebuild
        self.is_async = inspect.iscoroutinefunction(inspect.unwrap(create))

    def request_of(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """The request a call of ``kwargs`` sends, as it is journaled: ``kwargs`` itself."""
        return kwargs

    def streams(self, kwargs: dict[str, Any]) -> bool:
        """Whether a call of ``kwargs`` answers with a stream (``stream=True``)."""
        return bool(kwargs.get("stream"))

    def rebuilt(self, body: Any, chunk: bool, kwargs: dict[str, Any]) -> Any:
        """The client's object of a recorded ``body`` (a chunk's) for a call of ``kwargs``."""
        del kwargs
        return self.rebuild(self.kind, body, chunk)

    def __call__(self, **kwargs: Any) -> Any:
        tool = inside_a_tool(None)
        if tool is not None:  # part of a decorated tool's run: its outcome stands for it
            _warn_once(
                f"inside {tool}",
                f"agent-journal: a model call made inside tool {tool} is part of that tool's "
                "run and is not journaled; make the code that calls the model an entry "
                "(@capture.entry) to journal it as a session of its own",
            )
            return self.create(**kwargs)
        session = session_of_call(f"a {self.kind} model call")
        if session is None:
            return self.create(**kwargs)
        end_open(session.recorder)
        if self.is_async:
            return self._acall(session, kwargs)
        record, served, started = self._begin(session, kwargs)
        if served is not None:
            return self._serve(session, record, served, kwargs)
        try:
            response = self.create(**kwargs)
        except BaseException as error:
            self._failed(session, record, error, started)
            raise
        return self._after(session, record, response, kwargs, started)

    async def _acall(self, session: CapturedSession, kwargs: dict[str, Any]) -> Any:
        record, served, started = await self._abegin(session, kwargs)
        if served is not None:
            return self._serve(session, record, served, kwargs)
        try:
            response = await self.create(**kwargs)
        except BaseException as error:
            self._failed(session, record, error, started)
            raise
        return self._after(session, record, response, kwargs, started)

    @staticmethod
    def _failed(
        session: CapturedSession, record: dict[str, Any], error: BaseException, started: float
    ) -> None:
        """Journal a call that raised (a 429, a 500, a timeout), marked as a model call's."""
        raised_by_model_call(error)
        latency = round((session.timer() - started) * 1000, 3)
        session.model_failed(record, error, latency_ms=latency)

    def _recorded(
        self, session: CapturedSession, kwargs: dict[str, Any]
    ) -> tuple[dict[str, Any], dict[str, Any], int]:
        """Journal what the request brings: its record, the request whole, its response's seq.

        What is recorded of the call is `request_of` it; a wrapper adds here what the
        request does not say (litellm's provider).
        """
        return session.before_model(self.request_of(kwargs), self.settings, kind=self.kind)

    def _begin(
        self, session: CapturedSession, kwargs: dict[str, Any]
    ) -> tuple[dict[str, Any], Any, float]:
        record, whole, seq = self._recorded(session, kwargs)
        player = session.player
        served = None if player is None else player.model(seq, record, whole)
        return record, served, session.timer()

    async def _abegin(
        self, session: CapturedSession, kwargs: dict[str, Any]
    ) -> tuple[dict[str, Any], Any, float]:
        """`_begin` for an async call: in a replay, served in the recorded order."""
        record, whole, seq = self._recorded(session, kwargs)
        player = session.player
        if player is None:
            return record, None, session.timer()
        seq = await _recorded_turn(session, player, seq, record, whole)
        return record, player.model(seq, record, whole), session.timer()

    def _serve(
        self, session: CapturedSession, record: dict[str, Any], served: Any, kwargs: dict[str, Any]
    ) -> Any:
        stream = self.streams(kwargs)
        if isinstance(served, FailedCall):
            return self._serve_failure(session, record, served, kwargs)
        session.after_model(self.kind, record, served, stream=stream, latency_ms=None)
        if stream:
            chunks = [self.rebuilt(chunk, True, kwargs) for chunk in served]
            return served_stream(chunks, is_async=self.is_async)
        return self.rebuilt(served, False, kwargs)

    def _serve_failure(
        self,
        session: CapturedSession,
        record: dict[str, Any],
        failed: FailedCall,
        kwargs: dict[str, Any],
    ) -> Any:
        """Raise a recorded failure again: at once, or after the chunks a stream had sent."""
        error = raised_by_model_call(rebuilt(failed.error))

        def journal() -> None:
            session.model_failed(record, error, chunks=failed.chunks, recorded=failed.error)

        if not self.streams(kwargs) or failed.chunks is None:
            journal()
            raise error
        chunks = [self.rebuilt(chunk, True, kwargs) for chunk in failed.chunks]
        return served_stream(chunks, is_async=self.is_async, error=error, on_error=journal)

    def _after(
        self,
        session: CapturedSession,
        record: dict[str, Any],
        response: Any,
        kwargs: dict[str, Any],
        started: float,
    ) -> Any:
        if self.streams(kwargs):
            kind = self.kind

            def journal(chunks: list[Any], latency_ms: float) -> None:
                session.after_model(kind, record, chunks, stream=True, latency_ms=latency_ms)

            def broke(chunks: list[Any], latency_ms: float, error: BaseException) -> None:
                raised_by_model_call(error)
                session.model_failed(record, error, latency_ms=latency_ms, chunks=chunks)

            choices = record.get("params", {}).get("n")
            recording = StreamRecording(
                session.recorder,
                kind,
                choices,
                journal,
                timer=session.timer,
                started=started,
                failed=broke,
            )
            session.hold(recording)
            return (AsyncRecordedStream if self.is_async else RecordedStream)(response, recording)
        latency = round((session.timer() - started) * 1000, 3)
        session.after_model(self.kind, record, body_of(response), stream=False, latency_ms=latency)
        return response


class Unjournaled:
    """A client call (or namespace of calls) that is not journaled; see the module.

    Called outside a session, it runs as it is. In a session it runs and is named once per
    process (warning, logger ``capture``): the session records no model call for
    it. In a replay it raises `HaltSession` (rule ``replay_stopped``) naming it: a replay
    cannot serve it, and does not call a server for it.
    """

    def __init__(self, name: str, wrapped: Any) -> None:
        self._name = name
        self._wrapped = wrapped

    def __getattr__(self, name: str) -> Any:
        return Unjournaled(f"{self._name}.{name}", getattr(self._wrapped, name))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call through; in a session name the call once, in a replay stop (see the class)."""
        session = session_of_call(f"client.{self._name}")
        if session is not None:
            use = "stream=True" if self._name.split(".")[-1] == "stream" else "..."
            instead = f"write it as {self._creating()}.create({use})"
            if session.player is not None:
                raise HaltSession(
                    REPLAY_STOPPED,
                    f"replay stopped: the code called client.{self._name}(), which agent-journal "
                    f"does not journal, so a replay cannot serve it ({instead})",
                )
            _warn_once(
                self._name,
                f"agent-journal: client.{self._name}() is not journaled: session "
                f"{session.recorder.session_id} records no model call for it and its replay "
                f"stops there ({instead})",
            )
        return self._wrapped(*args, **kwargs)

    def _creating(self) -> str:
        """The ``create`` this call stands beside (``chat.completions`` or ``responses``)."""
        path = [p for p in self._name.split(".") if p not in BESIDE_CREATE]
        return "client." + ".".join(path[:-1] if path and path[-1] == "create" else path)


def _warn_once(name: str, message: str) -> None:
    with _WARNED_LOCK:
        if name in _WARNED:
            return
        _WARNED.add(name)
    log.warning(message)


def _unjournaled(prefix: str, resource: Any, names: tuple[str, ...]) -> dict[str, Any]:
    """The `Unjournaled` stand-ins of what ``resource`` offers beside ``create`` (``names``)."""
    return {
        name: Unjournaled(f"{prefix}{name}", getattr(resource, name))
        for name in names
        if hasattr(resource, name)
    }


_WAIT_SECONDS = 2.0
"""How long a replayed async call waits for the calls the recording answered before it."""


async def _recorded_turn(
    session: CapturedSession, player: Any, seq: int, record: dict[str, Any], whole: dict[str, Any]
) -> int:
    """The seq a replayed async call is served at: its recorded one, once the code reaches it.

    Concurrent model calls are journaled in the order their responses arrived; a replay
    serves at once, so a call the recording answered after others (`EntryPlayer.recorded_at`)
    waits while the rest of the code writes up to its seq (at most ``_WAIT_SECONDS``;
    then it is served where it is, and the replay says what differs).
    """
    recorded_at = getattr(player, "recorded_at", None)
    target = recorded_at(seq, record, whole) if callable(recorded_at) else seq
    recorder = session.recorder
    deadline = session.timer() + _WAIT_SECONDS
    turns = 0
    while recorder.next_seq < target and not recorder.ended and session.timer() < deadline:
        turns += 1
        await asyncio.sleep(0 if turns < 100 else 0.001)
    return recorder.next_seq


def _derived(derive: Callable[..., Any], wrap: Callable[[Any], Any]) -> Callable[..., Any]:
    """``derive`` (a client's ``with_options``), returning its client captured by ``wrap``."""

    @functools.wraps(derive)
    def captured(*args: Any, **kwargs: Any) -> Any:
        return wrap(derive(*args, **kwargs))

    return captured


class _Proxy:
    """An object whose attributes are the wrapped one's, but for those given."""

    def __init__(self, wrapped: Any, **own: Any) -> None:
        self._wrapped = wrapped
        self.__dict__.update(own)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._wrapped, name)
