"""Live streams of the openai client, passed to the code chunk by chunk and journaled once.

`RecordedStream` (and `AsyncRecordedStream` for ``AsyncOpenAI``) stands for the stream the
client returned: the code iterates it as it would the client's, each chunk recorded as it
passes. The response is journaled (a `StreamRecording`'s ``journal`` callback, with every
chunk body and the latency) once, at the first of:

* the response is whole: every choice has its ``finish_reason`` (chat completions), or the
  Responses API's terminal event arrived, or Anthropic's ``message_stop``. What follows
  (the usage chunk, the end of the stream) is read at once and handed on as the code asks
  for it, so code that stops reading at the ``finish_reason`` without closing the stream is
  journaled whole;
* the stream is exhausted, or closed (``close()``, a ``with`` block);
* the session makes its next model call (`end_open`): a stream the code left earlier is
  journaled with what was read.

Used by the capture's wrapped client (`capture.clients.openai`) and by `JournaledOpenAI`.
"""

from __future__ import annotations

import inspect
import time
import weakref
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, Literal

from ..requests import jsonable
from .anthropic_messages import TERMINAL as ANTHROPIC_TERMINAL
from .genai_messages import finished as genai_finished

__all__ = ["AsyncRecordedStream", "RecordedStream", "StreamRecording", "body_of", "end_open"]

Kind = Literal["chat", "responses", "anthropic", "genai"]
"""The response kinds: chat completions, the Responses API, Anthropic's Messages API,
Google's ``generateContent``."""

TERMINAL = frozenset({"response.completed", "response.incomplete", "response.failed"})
"""The Responses API stream events after which the response is whole."""

_OPEN: weakref.WeakKeyDictionary[Any, list[weakref.ref[StreamRecording]]] = (
    weakref.WeakKeyDictionary()
)
"""The streams of each session (by its recorder) not yet journaled; weakly, so that a stream
the code dropped does not keep its session alive."""


_TRANSPORT = frozenset({"sdk_http_response"})
"""Fields of a client's objects that hold the HTTP exchange, not the body (google-genai's
response headers): not journaled."""


def body_of(value: Any) -> Any:
    """The JSON body the client parsed ``value`` (a response, a chunk) from."""
    dump = getattr(value, "model_dump", None)
    if not callable(dump):
        return jsonable(value)
    return dump(mode="json", exclude_unset=True, exclude=_TRANSPORT)


class StreamRecording:
    """The chunks of one live stream so far; see the module.

    Args:
        owner: what the stream's session is known by (its recorder): `end_open` ends the
            owner's recordings.
        kind: ``chat``, ``responses`` or ``anthropic`` (`Kind`).
        choices: the request's ``n`` (how many choices must finish; default 1).
        journal: called once with the chunk bodies and the latency in ms.
        timer: monotonic seconds; ``started`` is when the request was sent.
        failed: called instead of ``journal`` when the stream broke before the response was
            whole, with the chunks so far, the latency and the exception (None: ``journal``
            is called then too, with what arrived).
    """

    def __init__(
        self,
        owner: object,
        kind: Kind,
        choices: object,
        journal: Callable[[list[Any], float], None],
        *,
        timer: Callable[[], float] = time.perf_counter,
        started: float,
        failed: Callable[[list[Any], float, BaseException], None] | None = None,
    ) -> None:
        self.owner, self.kind, self.journal = owner, kind, journal
        self.failed = failed
        self.timer, self.started = timer, started
        self.chunks: list[Any] = []
        self.done = False
        self._choices = choices if isinstance(choices, int) and choices > 0 else 1
        self._finished: set[int] = set()
        _OPEN.setdefault(owner, []).append(weakref.ref(self))

    def add(self, chunk: Any) -> Any:
        """Record one chunk as it passes; returns it."""
        self.chunks.append(body_of(chunk))
        return chunk

    def whole(self) -> bool:
        """Whether the last chunk completes the response (what may follow is metadata)."""
        body = self.chunks[-1] if self.chunks else None
        if not isinstance(body, dict):
            return False
        if self.kind == "responses":
            return body.get("type") in TERMINAL
        if self.kind == "anthropic":
            return body.get("type") == ANTHROPIC_TERMINAL
        if self.kind == "genai":
            return genai_finished(body)
        for choice in body.get("choices") or []:
            if isinstance(choice, dict) and choice.get("finish_reason"):
                self._finished.add(int(choice.get("index") or 0))
        return len(self._finished) >= self._choices

    def end(self) -> None:
        """Journal what arrived (once)."""
        if self._close():
            self.journal(self.chunks, self._latency())

    def fail(self, error: BaseException) -> None:
        """The stream broke with ``error`` before it was whole: journal that (once)."""
        if self.failed is None or not isinstance(error, Exception):
            self.end()
        elif self._close():
            self.failed(self.chunks, self._latency(), error)

    def _close(self) -> bool:
        """Mark the recording done; False when it was already."""
        if self.done:
            return False
        self.done = True
        waiting = _OPEN.get(self.owner)
        if waiting is not None:
            waiting[:] = [ref for ref in waiting if ref() not in (None, self)]
        return True

    def _latency(self) -> float:
        return round((self.timer() - self.started) * 1000, 3)


def end_open(owner: object) -> None:
    """Journal the streams of ``owner``'s session the code left unread (a new model call)."""
    for ref in list(_OPEN.get(owner, [])):
        recording = ref()
        if recording is not None:
            recording.end()


class _Passing:
    """What the sync and async streams share: the recording, the chunks read ahead."""

    def __init__(self, source: Any, recording: StreamRecording) -> None:
        self._source = source
        self._recording = recording
        self._ahead: deque[Any] = deque()
        self._error: BaseException | None = None

    def _queued(self) -> tuple[bool, Any]:
        """A chunk read ahead, if any (True and it); the error met reading ahead is raised."""
        if self._ahead:
            return True, self._ahead.popleft()
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        return False, None

    def _complete(self) -> bool:
        """Whether the chunk just recorded completes the response (then: read the rest)."""
        return not self._recording.done and self._recording.whole()

    def _read_ahead(self, chunk: Any, error: BaseException | None = None) -> None:
        """Keep a chunk read ahead (recorded), or the error reading ahead met."""
        if error is not None:
            self._error = error
        else:
            self._ahead.append(self._recording.add(chunk))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._source, name)


class RecordedStream(_Passing):
    """A live stream the code iterates, its chunks recorded as they pass; see the module."""

    def __init__(self, source: Any, recording: StreamRecording) -> None:
        super().__init__(source, recording)
        self._iterator: Iterator[Any] = iter(source)

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        queued, chunk = self._queued()
        if queued:
            return chunk
        try:
            chunk = self._recording.add(next(self._iterator))
        except StopIteration:
            self._recording.end()
            raise
        except BaseException as error:  # it broke: a dropped connection, an error event
            self._recording.fail(error)
            raise
        if self._complete():
            try:  # the rest (usage, the end of the stream) is read now
                for rest in self._iterator:
                    self._read_ahead(rest)
            except Exception as error:  # raised where the code would have met it
                self._read_ahead(None, error)
            self._recording.end()
        return chunk

    def close(self) -> None:
        """Close the stream; what arrived so far is journaled."""
        self._recording.end()
        close = getattr(self._source, "close", None)
        if callable(close):
            close()

    def __enter__(self) -> RecordedStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncRecordedStream(_Passing):
    """`RecordedStream` for ``AsyncOpenAI``."""

    def __init__(self, source: Any, recording: StreamRecording) -> None:
        super().__init__(source, recording)
        self._iterator: AsyncIterator[Any] = aiter(source)

    def __aiter__(self) -> AsyncIterator[Any]:
        return self

    async def __anext__(self) -> Any:
        queued, chunk = self._queued()
        if queued:
            return chunk
        try:
            chunk = self._recording.add(await anext(self._iterator))
        except StopAsyncIteration:
            self._recording.end()
            raise
        except BaseException as error:  # it broke: a dropped connection, an error event
            self._recording.fail(error)
            raise
        if self._complete():
            try:  # the rest (usage, the end of the stream) is read now
                async for rest in self._iterator:
                    self._read_ahead(rest)
            except Exception as error:  # raised where the code would have met it
                self._read_ahead(None, error)
            self._recording.end()
        return chunk

    async def close(self) -> None:
        """Close the stream; what arrived so far is journaled."""
        self._recording.end()
        close = getattr(self._source, "close", None)
        if callable(close):
            result = close()
            if inspect.isawaitable(result):
                await result

    async def __aenter__(self) -> AsyncRecordedStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
