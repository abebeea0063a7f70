"""Anthropic's Messages API as the journal reads it: pure functions over its JSON.

Shared by the captured ``anthropic`` client (`capture.clients.anthropic`) and the proxy's
``/v1/messages`` (`capture.proxy.anthropic_wire`), so a session either records holds the
same events for the same exchanges.

A request's ``system`` is the system prompt, its ``tools`` (``name``, ``description``,
``input_schema``) the tool specs, in OpenAI's format as the journal keeps them (server tools
such as web search are not the agent's: left out of the specs, kept in the request). A user
message's ``text`` blocks are the user's input and its ``tool_result`` blocks the results of
the model's calls (``is_error`` makes one a failure). A response's ``text`` blocks are the
text, ``tool_use`` blocks the calls (the arguments as the model emitted them: a stream's
``input_json_delta`` pieces joined; a whole message's ``input`` object as canonical JSON,
keys sorted, as the journal keeps the message), ``thinking`` blocks the reasoning
(``redacted_thinking`` has none to show: the raw response keeps it, verbatim, as it keeps
every block and the signatures). Usage: ``input_tokens`` is what the request read in all
(Anthropic's own ``input_tokens`` plus the cache reads and the cache writes, as OpenAI counts
its prompt tokens), ``cached_tokens`` the cache reads; the cache writes stay in the raw
usage (``cache_creation_input_tokens``). A stream is the named events ``message_start`` ...
``message_stop``; an ``error`` event is a failure the client raises.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from journal import ActionProposed, ToolCall, Usage, canonical_bytes, json_stand_in
from journal.formats import content_text, parse_arguments

from ..turns import StartFields, Turn

__all__ = [
    "SETTINGS",
    "TERMINAL",
    "assembled_message",
    "message_proposal",
    "start_fields",
    "text_of",
    "turn_of",
]

SETTINGS = (
    "max_tokens",
    "temperature",
    "top_p",
    "top_k",
    "stop_sequences",
    "tool_choice",
    "thinking",
)
"""Messages API request parameters that are the model's settings."""

TERMINAL = "message_stop"
"""The stream event after which the message is whole."""


def text_of(content: Any) -> str:
    """The text of a ``system`` or message content (a string, or a list of blocks)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    texts = [
        block["text"]
        for block in content
        if isinstance(block, Mapping)
        and block.get("type") == "text"
        and isinstance(block.get("text"), str)
    ]
    return "\n".join(texts)


def _tool_spec(tool: Mapping[str, Any]) -> dict[str, Any] | None:
    name = tool.get("name")
    if not isinstance(name, str) or "input_schema" not in tool:
        return None  # a server tool (web search, code execution): not the agent's
    function: dict[str, Any] = {"name": name, "parameters": tool.get("input_schema") or {}}
    if isinstance(tool.get("description"), str):
        function["description"] = tool["description"]
    return {"type": "function", "function": function}


def start_fields(request: Mapping[str, Any]) -> StartFields:
    """What a session's first request says of the model (system prompt, tools, settings)."""
    tools = request.get("tools")
    specs = (
        [
            spec
            for spec in (_tool_spec(t) for t in tools if isinstance(t, Mapping))
            if spec is not None
        ]
        if isinstance(tools, list)
        else []
    )
    model = request.get("model")
    return StartFields(
        model=model if isinstance(model, str) else None,
        system_prompt=text_of(request.get("system")),
        tools=specs,
        model_settings={name: request[name] for name in SETTINGS if name in request},
    )


def turn_of(messages: Sequence[Any]) -> Turn:
    """What the messages after the model's last one bring: user texts, tool results."""
    last = max(
        (
            i
            for i, m in enumerate(messages)
            if isinstance(m, Mapping) and m.get("role") == "assistant"
        ),
        default=-1,
    )
    turn = Turn()
    for message in messages[last + 1 :]:
        if not isinstance(message, Mapping) or message.get("role") != "user":
            continue
        content = message.get("content")
        blocks = content if isinstance(content, list) else []
        for block in blocks:
            if isinstance(block, Mapping) and block.get("type") == "tool_result":
                result = block.get("content")
                text = result if isinstance(result, str) else content_text(result)[0]
                turn.results.append(
                    (str(block.get("tool_use_id")), text, block.get("is_error") is True)
                )
        if isinstance(content, str) or any(
            isinstance(b, Mapping) and b.get("type") == "text" for b in blocks
        ):
            turn.inputs.append(text_of(content))
    return turn


def message_proposal(body: Mapping[str, Any], *, latency_ms: float | None = None) -> ActionProposed:
    """A whole message (``"type": "message"``) as ``action_proposed``."""
    texts: list[str] = []
    thoughts: list[str] = []
    calls: list[ToolCall] = []
    for block in body.get("content") or []:
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif kind == "thinking" and isinstance(block.get("thinking"), str):
            thoughts.append(block["thinking"])
        elif kind == "tool_use":
            given = block.get("input")
            raw = block.get("partial_json")  # (the text a stream sent, kept by assembly)
            if isinstance(raw, str):
                args, _ = parse_arguments(raw)
                text = raw
            else:
                args, _ = parse_arguments(given if isinstance(given, Mapping) else None)
                # an object, no text: its canonical text (keys sorted), as the journal keeps
                # the response it came in, so that a replay of it gives the same text
                text = canonical_bytes(json_stand_in(args)).decode()
            calls.append(
                ToolCall(
                    call_id=str(block.get("id")),
                    tool=str(block.get("name")),
                    args=args,
                    arguments=text,
                )
            )
    usage = body.get("usage") if isinstance(body.get("usage"), Mapping) else {}
    assert isinstance(usage, Mapping)
    model = body.get("model")
    cache_read = _count(usage.get("cache_read_input_tokens"))
    cache_write = _count(usage.get("cache_creation_input_tokens"))
    return ActionProposed(
        calls=calls,
        text="".join(texts) or None,
        reasoning="\n".join(thoughts) or None,
        model=model if isinstance(model, str) else None,
        usage=Usage(
            input_tokens=_count(usage.get("input_tokens")) + cache_read + cache_write,
            output_tokens=_count(usage.get("output_tokens")),
            cached_tokens=cache_read,
        ),
        latency_ms=latency_ms,
    )


def _count(value: object) -> int:
    return value if type(value) is int and value >= 0 else 0


def assembled_message(events: Sequence[Any]) -> dict[str, Any]:
    """The message a stream's event bodies make up.

    Its ``tool_use`` blocks keep the ``partial_json`` text they were sent as.
    """
    message: dict[str, Any] = {"type": "message", "content": []}
    blocks: dict[int, dict[str, Any]] = {}
    for event in events:
        if not isinstance(event, Mapping):
            continue
        kind = event.get("type")
        if kind == "message_start" and isinstance(event.get("message"), Mapping):
            message.update({k: v for k, v in event["message"].items() if k != "content"})
        elif kind == "content_block_start" and isinstance(event.get("content_block"), Mapping):
            blocks[int(event.get("index") or 0)] = dict(event["content_block"])
        elif kind == "content_block_delta" and isinstance(event.get("delta"), Mapping):
            _add_delta(blocks.setdefault(int(event.get("index") or 0), {}), event["delta"])
        elif kind == "message_delta":
            delta = event.get("delta")
            if isinstance(delta, Mapping):
                message.update(delta)
            if isinstance(event.get("usage"), Mapping):
                message["usage"] = {**(message.get("usage") or {}), **event["usage"]}
    message["content"] = [blocks[index] for index in sorted(blocks)]
    return message


_DELTAS = {
    "text_delta": "text",
    "input_json_delta": "partial_json",
    "thinking_delta": "thinking",
    "signature_delta": "signature",
}
"""Each text delta of a stream, and the field of its block the pieces are joined into."""


def _add_delta(block: dict[str, Any], delta: Mapping[str, Any]) -> None:
    name = _DELTAS.get(str(delta.get("type")))
    if name is not None:
        block[name] = str(block.get(name, "")) + str(delta.get(name, ""))
