"""The openai client, wrapped: ``chat.completions.create`` and ``responses.create`` journaled.

`captured_client` returns a stand-in for an ``OpenAI`` or ``AsyncOpenAI`` client whose two
creating calls go through the captured session the code runs in (`session_of_call`), and
everything else straight to the client. Outside a session they call straight through.

In a session, a call journals its request and the raw response (`CapturedSession`); with
``stream=True`` the chunks reach the code as they arrive and the response is journaled
once it is whole (what follows its last choice's ``finish_reason`` or the Responses API's
terminal event is read at once), or the stream is consumed, closed, or left for the
session's next model call. In a replay the `Player` may serve a recorded
response instead: the client's own types are rebuilt from the recorded JSON (a stream
yields its recorded chunks in order), so the code reads what it read then.

The client's other ways to call the model (``parse``, ``stream``, the ``with_raw_response``
and ``with_streaming_response`` forms) are not journaled: in a session each such call is
named once on the logger ``capture`` (the call goes on), and in a replay it stops
the replay in one line naming it, instead of reaching a server (`Unjournaled`).
"""

from __future__ import annotations

from typing import Any

from .calls import (
    Unjournaled,
    _Create,
    _derived,
    _Proxy,
    _unjournaled,
    client_settings,
)
from .openai_streams import Kind

__all__ = ["UNJOURNALED", "Unjournaled", "captured_client", "client_settings"]

UNJOURNALED = ("parse", "stream", "with_raw_response", "with_streaming_response")
"""What the client's ``chat.completions`` and ``responses`` offer beside ``create``, and the
client's own raw forms: calls of the model agent-journal does not journal."""


def _rebuilt(kind: Kind, body: Any, chunk: bool) -> Any:
    """The openai object a recorded body was parsed into (the body itself without openai).

    The client parses what the server sent leniently (``openai._models.construct_type``: a
    field the server left out stays out, no validation), so a replay rebuilds with the same
    function; a strict ``model_validate`` would refuse bodies of servers that send fewer
    fields than the SDK's types declare, which the client itself accepted.
    """
    try:
        from openai._models import construct_type

        if kind == "chat":
            from openai.types.chat import ChatCompletion, ChatCompletionChunk

            model: Any = ChatCompletionChunk if chunk else ChatCompletion
        else:
            from openai.types.responses import Response, ResponseStreamEvent

            model = ResponseStreamEvent if chunk else Response
    except ImportError:  # pragma: no cover - a client-like object without the openai package
        return body
    return construct_type(value=body, type_=model)


def captured_client(client: Any) -> Any:
    """``client`` with ``chat.completions.create`` and ``responses.create`` journaled.

    A client derived from it (``with_options``, ``copy``: the same client with other
    settings) is captured too.
    """
    own: dict[str, Any] = {
        name: _derived(getattr(client, name), captured_client)
        for name in ("with_options", "copy")
        if callable(getattr(client, name, None))
    }
    own.update(_unjournaled("", client, UNJOURNALED))
    settings = client_settings(client)
    chat = getattr(client, "chat", None)
    if chat is not None:
        completions = _Proxy(
            chat.completions,
            create=_Create("chat", chat.completions.create, settings, _rebuilt),
            **_unjournaled("chat.completions.", chat.completions, UNJOURNALED),
        )
        own["chat"] = _Proxy(chat, completions=completions)
    responses = getattr(client, "responses", None)
    if responses is not None:
        own["responses"] = _Proxy(
            responses,
            create=_Create("responses", responses.create, settings, _rebuilt),
            **_unjournaled("responses.", responses, UNJOURNALED),
        )
    return _Proxy(client, **own)
