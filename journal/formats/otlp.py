"""Export sessions as OpenTelemetry traces: OTLP/JSON following the GenAI semantic conventions.

The document is the protobuf JSON mapping of ``ExportTraceServiceRequest`` (what an OTLP/HTTP
collector takes at ``/v1/traces`` with ``Content-Type: application/json``): trace and span
ids as hex, 64-bit integers as decimal strings, enums as integers. One trace per session:

* ``invoke_agent`` (kind INTERNAL), the root: the whole session, with
  ``gen_ai.operation.name``, ``gen_ai.provider.name``, ``gen_ai.agent.name`` (the agent
  reference), ``gen_ai.conversation.id`` (the session id), ``gen_ai.request.model``, the
  token totals, and span events for turns, breakers, fallbacks, compactions, answers and
  the halt; status ERROR (``error.type`` = the rule) when the session halted or failed;
* ``chat {model}`` (kind CLIENT) per ``action_proposed``: ``gen_ai.request.model``,
  ``gen_ai.response.model``, ``gen_ai.usage.input_tokens`` / ``output_tokens`` /
  ``cache_read.input_tokens``, ``gen_ai.response.finish_reasons``; the gate's verdicts on
  its calls (``verification_failed``, repairs) are span events on it; a
  ``model_call_failed`` is such a span with status ERROR, ``error.type`` the exception's
  class and ``http.response.status_code`` its status;
* ``execute_tool {tool}`` (kind INTERNAL) per ``action_committed`` / ``action_failed``:
  ``gen_ai.tool.name``, ``gen_ai.tool.call.id``, ``gen_ai.tool.type``; status ERROR with
  ``error.type`` = the failure kind when it failed.

Ids are deterministic: the trace id is derived from the session id, a span id from the
session id and the seq of the event it stands for, so exporting again gives the same
bytes. Times come from ``ts``: a span ends at its event's ``ts`` and starts ``latency_ms``
(or ``duration_ms``) earlier, or at the previous event when that is not recorded.

Message content (user text, answers, tool arguments and results, error messages, the
system prompt) is left out unless ``content=True``: the conventions make it opt-in, as it
is likely to hold personal data.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import orjson

from ..canonical import dumps_canonical, parse_ts
from ..events import (
    ActionCommitted,
    ActionFailed,
    ActionProposed,
    AgentCompleted,
    AgentHalted,
    CircuitOpened,
    ContextCompacted,
    FallbackInvoked,
    ModelCallFailed,
    RepairApplied,
    SessionStarted,
    UserInput,
    VerificationFailed,
)
from ..keys import CAPTURED_WITH_KEY
from ..records import RecordedEvent
from ..store import Journal

__all__ = [
    "SCOPE",
    "otlp_document",
    "otlp_json",
    "session_spans",
    "span_id",
    "trace_id",
]

SCOPE = "agent-journal"
"""The instrumentation scope (and service) name of exported spans."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_INTERNAL = 1
_CLIENT = 3
_ERROR = 2


def _package_version() -> str:
    try:
        return version("agent-journal")
    except PackageNotFoundError:
        return "0"


def trace_id(session_id: str) -> str:
    """The 32-hex-digit trace id of a session (the same on every export)."""
    return hashlib.sha256(f"agent-journal trace {session_id}".encode()).hexdigest()[:32]


def span_id(session_id: str, seq: int) -> str:
    """The 16-hex-digit id of the span that stands for event ``seq`` of a session."""
    return hashlib.sha256(f"agent-journal span {session_id} {seq}".encode()).hexdigest()[:16]


def _nanos(moment: datetime) -> int:
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


def _value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, str):
        return {"stringValue": value}
    if isinstance(value, (list, tuple)):
        return {"arrayValue": {"values": [_value(item) for item in value]}}
    return {"stringValue": dumps_canonical(value).decode("utf-8")}


def _attributes(values: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [
        {"key": key, "value": _value(value)} for key, value in values.items() if value is not None
    ]


def _json_text(value: Any) -> str:
    return value if isinstance(value, str) else dumps_canonical(value).decode("utf-8")


class _Trace:
    """Builds the spans of one session from its events, in one pass."""

    def __init__(self, session_id: str, content: bool, provider: str | None) -> None:
        self.session_id = session_id
        self.trace = trace_id(session_id)
        self.root_id = span_id(session_id, 0)
        self.content = content
        self.provider = provider
        self.spans: list[dict[str, Any]] = []
        self.root_events: list[dict[str, Any]] = []
        self.root: dict[str, Any] = {}
        self.root_attributes: dict[str, Any] = {}
        self.model: str | None = None
        self.previous = 0
        self.start = 0
        self.chat: dict[str, Any] | None = None
        self.proposal_time = 0
        self.inputs: list[dict[str, Any]] = []
        self.turns = 0
        self.tokens = [0, 0]

    def span(
        self, seq: int, name: str, kind: int, start: int, end: int, attributes: dict[str, Any]
    ) -> dict[str, Any]:
        span: dict[str, Any] = {
            "traceId": self.trace,
            "spanId": span_id(self.session_id, seq),
            "parentSpanId": self.root_id,
            "name": name,
            "kind": kind,
            "startTimeUnixNano": str(max(start, self.start)),
            "endTimeUnixNano": str(end),
            "attributes": _attributes(
                {
                    "gen_ai.provider.name": self.provider,
                    "gen_ai.conversation.id": self.session_id,
                    **attributes,
                }
            ),
        }
        self.spans.append(span)
        return span

    @staticmethod
    def event(name: str, at: int, attributes: dict[str, Any]) -> dict[str, Any]:
        return {"timeUnixNano": str(at), "name": name, "attributes": _attributes(attributes)}

    def add(self, item: RecordedEvent) -> None:
        now = _nanos(parse_ts(item.ts))
        event = item.event
        if isinstance(event, SessionStarted):
            self.started(event, now)
        elif isinstance(event, ActionProposed):
            self.proposed(item.seq, event, now)
        elif isinstance(event, ModelCallFailed):
            self.failed_call(item.seq, event, now)
        elif isinstance(event, (ActionCommitted, ActionFailed)):
            self.tool(item.seq, event, now)
        elif isinstance(event, (VerificationFailed, RepairApplied)):
            self.verdict(event, now)
        else:
            self.milestone(event, now)
        self.previous = now

    def started(self, event: SessionStarted, now: int) -> None:
        self.start = self.previous = now
        self.model = event.model
        if self.provider is None:
            self.provider = _provider_of(event.metadata)
        name = "invoke_agent" + (f" {event.agent}" if event.agent else "")
        self.root = {
            "traceId": self.trace,
            "spanId": self.root_id,
            "name": name,
            "kind": _INTERNAL,
            "startTimeUnixNano": str(now),
        }
        self.root_attributes = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.provider.name": self.provider,
            "gen_ai.agent.name": event.agent,
            "gen_ai.conversation.id": self.session_id,
            "gen_ai.request.model": event.model,
            "agent_journal.replay_of": event.replay_of,
            "agent_journal.forked_from": event.forked_from,
        }
        if self.content and event.system_prompt:
            self.root_attributes["gen_ai.system_instructions"] = _json_text(
                [{"type": "text", "content": event.system_prompt}]
            )

    def proposed(self, seq: int, event: ActionProposed, now: int) -> None:
        model = event.model or self.model
        start = (
            now - int((event.latency_ms or 0) * 1_000_000) if event.latency_ms else self.previous
        )
        usage = event.usage
        self.tokens[0] += usage.input_tokens
        self.tokens[1] += usage.output_tokens
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": model,
            "gen_ai.response.model": event.model,
            "gen_ai.usage.input_tokens": usage.input_tokens,
            "gen_ai.usage.output_tokens": usage.output_tokens,
            "gen_ai.usage.cache_read.input_tokens": usage.cached_tokens or None,
            "gen_ai.response.finish_reasons": ["tool_calls" if event.calls else "stop"],
            "agent_journal.cost": event.cost,
            "agent_journal.seq": seq,
        }
        if self.content:
            attributes["gen_ai.output.messages"] = _json_text([_output_message(event)])
        self.chat = self.span(
            seq, f"chat {model}" if model else "chat", _CLIENT, start, now, attributes
        )
        self.proposal_time = now

    def failed_call(self, seq: int, event: ModelCallFailed, now: int) -> None:
        """A chat span whose status is the error (``error.type``: the exception's class)."""
        model = event.model or self.model
        start = now - int(event.latency_ms * 1_000_000) if event.latency_ms else self.previous
        error = event.error or {}
        kind = str(error.get("type", "")).rpartition(":")[2] or event.kind
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": model,
            "error.type": kind,
            "http.response.status_code": event.status_code,
            "agent_journal.seq": seq,
        }
        span = self.span(seq, f"chat {model}" if model else "chat", _CLIENT, start, now, attributes)
        span["status"] = {"code": _ERROR, "message": event.message if self.content else kind}

    def tool(self, seq: int, event: ActionCommitted | ActionFailed, now: int) -> None:
        start = (
            now - int(event.duration_ms * 1_000_000)
            if event.duration_ms is not None
            else self.proposal_time or self.previous
        )
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": event.tool,
            "gen_ai.tool.call.id": event.call_id,
            "gen_ai.tool.type": "function",
            "agent_journal.seq": seq,
        }
        if isinstance(event, ActionFailed):
            attributes["error.type"] = event.kind
        if self.content:
            attributes["gen_ai.tool.call.arguments"] = _json_text(event.args)
            if isinstance(event, ActionCommitted):
                attributes["gen_ai.tool.call.result"] = _json_text(event.result)
        span = self.span(seq, f"execute_tool {event.tool}", _INTERNAL, start, now, attributes)
        if isinstance(event, ActionFailed):
            span["status"] = {
                "code": _ERROR,
                "message": event.message if self.content else event.kind,
            }

    def verdict(self, event: VerificationFailed | RepairApplied, now: int) -> None:
        if isinstance(event, VerificationFailed):
            name = "agent_journal.verification_failed"
            attributes: dict[str, Any] = {
                "gen_ai.tool.name": event.tool,
                "gen_ai.tool.call.id": event.call_id,
                "agent_journal.stage": event.stage,
                "agent_journal.message": event.message,
            }
        else:
            name = "agent_journal.repair_applied"
            attributes = {
                "gen_ai.tool.name": event.tool,
                "gen_ai.tool.call.id": event.call_id,
                "agent_journal.level": event.level,
                "agent_journal.detail": event.detail,
            }
        record = self.event(name, now, attributes)
        if self.chat is None:
            self.root_events.append(record)
        else:
            self.chat.setdefault("events", []).append(record)

    def milestone(self, event: Any, now: int) -> None:
        attributes: dict[str, Any]
        if isinstance(event, UserInput):
            self.turns += 1
            name, attributes = "agent_journal.turn", {"agent_journal.turn": self.turns}
            if self.content:
                self.inputs.append(
                    {"role": "user", "parts": [{"type": "text", "content": event.text}]}
                )
        elif isinstance(event, AgentCompleted):
            name = "agent_journal.agent_completed"
            attributes = {"agent_journal.answer": event.answer if self.content else None}
        elif isinstance(event, AgentHalted):
            name = "agent_journal.agent_halted"
            attributes = {"agent_journal.rule": event.rule, "agent_journal.reason": event.reason}
            self.root["status"] = {"code": _ERROR, "message": f"{event.rule}: {event.reason}"}
            self.root_attributes["error.type"] = event.rule
        elif isinstance(event, CircuitOpened):
            name = "agent_journal.circuit_opened"
            attributes = {"gen_ai.tool.name": event.tool, "agent_journal.failures": event.failures}
        elif isinstance(event, FallbackInvoked):
            name = "agent_journal.fallback_invoked"
            attributes = {"gen_ai.tool.name": event.tool, "agent_journal.fallback": event.fallback}
        elif isinstance(event, ContextCompacted):
            name = "agent_journal.context_compacted"
            attributes = {
                "agent_journal.from_seq": event.from_seq,
                "agent_journal.to_seq": event.to_seq,
            }
        else:  # pragma: no cover - every event type is handled above
            return
        self.root_events.append(self.event(name, now, attributes))

    def finish(self) -> list[dict[str, Any]]:
        self.root_attributes["gen_ai.usage.input_tokens"] = self.tokens[0]
        self.root_attributes["gen_ai.usage.output_tokens"] = self.tokens[1]
        if self.inputs:
            self.root_attributes["gen_ai.input.messages"] = _json_text(self.inputs)
        self.root["endTimeUnixNano"] = str(self.previous)
        self.root["attributes"] = _attributes(self.root_attributes)
        if self.root_events:
            self.root["events"] = self.root_events
        return [self.root, *self.spans]


def _provider_of(metadata: Mapping[str, Any]) -> str:
    """The provider from the session's metadata: ``provider``, else the format it came in."""
    named = metadata.get("provider")
    if isinstance(named, str) and named:
        return named
    if "openai" in (metadata.get("imported_from"), metadata.get(CAPTURED_WITH_KEY)):
        return "openai"
    return "_OTHER"


def _output_message(event: ActionProposed) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    if event.reasoning:
        parts.append({"type": "reasoning", "content": event.reasoning})
    if event.text:
        parts.append({"type": "text", "content": event.text})
    parts.extend(
        {"type": "tool_call", "id": call.call_id, "name": call.tool, "arguments": call.args}
        for call in event.calls
    )
    return {
        "role": "assistant",
        "parts": parts,
        "finish_reason": "tool_call" if event.calls else "stop",
    }


def session_spans(
    events: Iterable[RecordedEvent], *, content: bool = False, provider: str | None = None
) -> list[dict[str, Any]]:
    """The OTLP/JSON spans of one session's events (the root ``invoke_agent`` span first)."""
    trace: _Trace | None = None
    for item in events:
        if trace is None:
            trace = _Trace(item.session_id, content, provider)
        trace.add(item)
    return [] if trace is None else trace.finish()


def otlp_document(
    journal: Journal,
    session_ids: Sequence[str],
    *,
    content: bool = False,
    provider: str | None = None,
) -> dict[str, Any]:
    """The ``ExportTraceServiceRequest`` of some sessions, as an OTLP/JSON object.

    Raises:
        SessionNotFoundError: a session is not in the journal.
    """
    spans: list[dict[str, Any]] = []
    for session_id in session_ids:
        journal.require(session_id)
        spans.extend(session_spans(journal.events(session_id), content=content, provider=provider))
    release = _package_version()
    return {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": _attributes({"service.name": SCOPE, "service.version": release})
                },
                "scopeSpans": [{"scope": {"name": SCOPE, "version": release}, "spans": spans}],
            }
        ]
    }


def otlp_json(document: Mapping[str, Any]) -> bytes:
    """Serialise an OTLP/JSON document (keys in a stable order, no whitespace)."""
    return orjson.dumps(document, option=orjson.OPT_SORT_KEYS)
