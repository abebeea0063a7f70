"""The anthropic client, wrapped: ``messages.create`` and the ``messages.stream`` helper journaled.

`captured_anthropic` (what ``Capture.anthropic`` returns) stands for an ``Anthropic`` or
``AsyncAnthropic`` client whose ``messages.create`` goes through the captured session the
code runs in, exactly as the openai client's ``create`` does (one `_Create` for both:
`capture.clients.calls`): each call journals its request (``system``, ``tools``, ``tool_choice``,
``thinking`` and every other parameter, the messages new since the last call) and the raw
response, with ``stream=True`` the event bodies as they pass (journaled once
``message_stop`` arrives, or the stream is closed or left). ``tool_use`` blocks are the
proposed calls; the ``tool_result`` blocks of the next request are their results (when no
decorated tool journaled them); ``thinking`` and ``redacted_thinking`` blocks are kept
verbatim in the raw response, their signatures too, so a replay hands the code the very
blocks it must send back. What the JSON means: `capture.clients.anthropic_messages`.

``messages.stream(...)`` is the SDK's own helper (``MessageStream``: its events, its
``text_stream``, ``get_final_message()``) over a journaled ``create(stream=True)``, so its
request records as that call's. A call that raises (``RateLimitError``, an
``APIStatusError`` such as the 529 ``OverloadedError``, a connection error, a stream that
breaks) is journaled as ``model_call_failed`` and raised again as its own type by a replay.

In a replay the recorded bodies are rebuilt as the SDK's own types (``Message``, each
``RawMessageStreamEvent``) with the function the client parses with, so the code reads what
it read. ``messages.parse``, ``messages.count_tokens``, ``messages.stream`` with an
``output_format`` and the raw-response forms are not journaled (`Unjournaled`: named once
in a session, a stop in a replay); ``messages.batches``, ``beta`` and the rest pass through.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._extras import missing_extra
from ..requests import sent_parameters
from .calls import (
    Unjournaled,
    _Create,
    _derived,
    _Proxy,
    _unjournaled,
    client_settings,
)
from .openai_streams import Kind

try:
    from anthropic import NOT_GIVEN
    from anthropic._models import construct_type
    from anthropic.lib.streaming import AsyncMessageStream, MessageStream
    from anthropic.types import Message, RawMessageStreamEvent
except ImportError as error:  # pragma: no cover - exercised with the package hidden
    raise missing_extra("anthropic", "anthropic", error) from error

__all__ = ["KIND", "UNJOURNALED", "captured_anthropic"]

KIND: Kind = "anthropic"
"""The request and response kind of the journaled calls (`CapturedSession.before_model`)."""

UNJOURNALED = ("parse", "count_tokens", "with_raw_response", "with_streaming_response")
"""What the client's ``messages`` offer beside ``create`` and ``stream`` that is not
journaled; the client's own raw forms are not either."""

_CLIENT_UNJOURNALED = ("with_raw_response", "with_streaming_response")


def _rebuilt(kind: Kind, body: Any, chunk: bool) -> Any:
    """The anthropic object a recorded body was parsed into, parsed as the client does.

    Leniently (``construct_type``: what the server left out stays out, no validation), as
    the client itself parses what a server sends.
    """
    del kind
    return construct_type(value=body, type_=RawMessageStreamEvent if chunk else Message)


class _StreamManager:
    """What ``messages.stream(...)`` returns: the SDK's stream helper over a journaled call.

    ``with`` (``async with`` for ``AsyncAnthropic``) makes the call (``open``: a journaled
    ``create(stream=True)``) and gives the SDK's own ``MessageStream`` over its events.
    """

    def __init__(self, open_stream: Callable[[], Any]) -> None:
        self._open = open_stream
        self._stream: Any = None

    def __enter__(self) -> MessageStream[Any]:
        stream: MessageStream[Any] = MessageStream(self._open(), output_format=NOT_GIVEN)
        self._stream = stream
        return stream

    def __exit__(self, *exc: object) -> None:
        if self._stream is not None:
            self._stream.close()

    async def __aenter__(self) -> AsyncMessageStream[Any]:
        stream: AsyncMessageStream[Any] = AsyncMessageStream(
            await self._open(), output_format=NOT_GIVEN
        )
        self._stream = stream
        return stream

    async def __aexit__(self, *exc: object) -> None:
        if self._stream is not None:
            await self._stream.close()


class _Stream:
    """``messages.stream(...)``, journaled as the ``create(stream=True)`` it sends."""

    def __init__(self, create: _Create, messages: Any) -> None:
        self._create = create
        self._messages = messages

    def __call__(self, **kwargs: Any) -> Any:
        """The helper's manager; a structured ``output_format`` is not journaled."""
        if sent_parameters({"output_format": kwargs.get("output_format")}).get("output_format"):
            return Unjournaled("messages.stream", self._messages.stream)(**kwargs)
        request = {key: value for key, value in kwargs.items() if key != "output_format"}
        request["stream"] = True
        return _StreamManager(lambda: self._create(**request))


def captured_anthropic(client: Any) -> Any:
    """``client`` (``Anthropic`` or ``AsyncAnthropic``) with its model calls journaled.

    A client derived from it (``with_options``, ``copy``) is captured too.
    """
    own: dict[str, Any] = {
        name: _derived(getattr(client, name), captured_anthropic)
        for name in ("with_options", "copy")
        if callable(getattr(client, name, None))
    }
    own.update(_unjournaled("", client, _CLIENT_UNJOURNALED))
    messages = client.messages
    create = _Create(KIND, messages.create, client_settings(client), _rebuilt)
    own["messages"] = _Proxy(
        messages,
        create=create,
        stream=_Stream(create, messages),
        **_unjournaled("messages.", messages, UNJOURNALED),
    )
    return _Proxy(client, **own)
