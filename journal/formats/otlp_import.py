"""Import OTLP traces (OpenTelemetry GenAI, OpenInference) as sessions.

Spans are grouped into sessions by ``session.id`` or ``gen_ai.conversation.id`` (on any
span of a trace: the whole trace joins that session), else by trace (the session id is
the trace id). A session's traces are taken in the order they started, and within them:

* the first model call → ``session_started``: its model, its leading system messages as
  the system prompt, OpenInference's tool specs, and metadata ``imported_from: "otlp"``,
  ``captured_with: "trace"`` (how a replay runs it: `replay.trace_replay`), the first
  trace's id,
  the shape read, whether the trace holds message content, and the first user message as
  the entry's argument (``entry_inputs``);
* the user messages new in a model call's request → ``user_input``;
* the tool results new in it → ``action_committed`` (the text sent to the model) for the
  previous reply's calls, or the outcome of the tool span of that call when there is one
  (``action_failed`` when it failed);
* a model call → ``action_proposed`` built, as a capture builds it, from a chat completion
  rebuilt from the reply (kept as ``response``; the request's messages in ``request``),
  or ``model_call_failed`` when its span failed (status ERROR, an ``exception`` event);
* at the end of each trace, the last reply, without calls → ``agent_completed``; a root
  span with status ERROR → ``agent_halted`` (rule ``error``).

Each trace is mapped as if it were the session's last, so the session of a conversation's
first traces is a prefix of the session of all of them: a later trace extends the stored
session (`Journal.import_sessions` appends the new tail), as ``collect`` relies on.

What has no event is counted, never guessed (spans of other operations, tool spans no call
asked for, a trace recorded without content). Times are the spans' own; ids derive from
the trace, so importing again is a no-op.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from ..canonical import check_json, valid_session_id
from ..errors import InvalidEventError, InvalidInputError
from ..events import (
    ActionCommitted,
    ActionFailed,
    ActionProposed,
    AgentCompleted,
    AgentConfig,
    AgentEvent,
    AgentHalted,
    ModelCallFailed,
    SessionStarted,
    UserInput,
)
from ..keys import CAPTURED_WITH_KEY, ENTRY_INPUTS_KEY
from .openai_import import ConvertedFile, ConvertedSession, Findings
from .openai_messages import proposal_from_completion, tool_specs_of
from .otlp_messages import ModelCall, ToolSpan, model_call_of, projection, tool_span_of
from .otlp_read import LogRecord, OtlpBatch, Span, read_otlp

__all__ = [
    "CAPTURED_WITH",
    "CONTENT_SETTINGS",
    "SESSION_KEYS",
    "convert_batch",
    "convert_otlp",
    "request_digest",
    "session_key",
]

CAPTURED_WITH = "trace"
"""The ``captured_with`` of imported traces: `replay.trace_replay` replays them."""
SESSION_KEYS = ("session.id", "gen_ai.conversation.id")
"""Span attributes that name the session a trace belongs to, in order."""
CONTENT_SETTINGS = {
    "genai": "OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental with "
    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=span_only",
    "genai-events": "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true",
    "openinference": "OPENINFERENCE_HIDE_INPUTS and OPENINFERENCE_HIDE_OUTPUTS unset (false)",
}
"""The instrumentation setting that records message content, by the shape read."""
_ERROR = 2


def request_digest(messages: Sequence[Any]) -> str:
    """The digest of a request's `projection` (what a replay of a trace compares)."""
    body = orjson.dumps(projection(messages), option=orjson.OPT_SORT_KEYS)
    return "trace:" + hashlib.sha256(body).hexdigest()


def _moment(nanos: int) -> datetime:
    return datetime.fromtimestamp(nanos // 1_000_000_000, UTC).replace(
        microsecond=(nanos // 1000) % 1_000_000
    )


def _session_key(spans: Sequence[Span], notes: Findings) -> str:
    for span in spans:
        for key in SESSION_KEYS:
            value = span.attributes.get(key)
            if value is None:
                continue
            if isinstance(value, str) and valid_session_id(value):
                return value
            notes.add("invalid_session_id", span.where, f"{key}={value!r:.60} is not a session id")
    return spans[0].trace_id


def session_key(spans: Sequence[Span]) -> str:
    """The session a trace's spans belong to: its ``session.id`` and the like, else the trace."""
    return _session_key(spans, Findings())


@dataclass
class _Trace:
    trace_id: str
    spans: list[Span]

    @property
    def start(self) -> int:
        return min(span.start_ns for span in self.spans)


def _completion(call: ModelCall) -> dict[str, Any]:
    """The chat completion a reply stands for (what a replay serves the code)."""
    reply = dict(call.reply or {"role": "assistant", "content": None})
    reply["role"] = "assistant"
    reply.setdefault("content", None)
    usage = call.usage
    body: dict[str, Any] = {
        "id": str(call.span.attributes.get("gen_ai.response.id") or f"trace-{call.span.span_id}"),
        "object": "chat.completion",
        "created": call.span.end_ns // 1_000_000_000,
        "model": call.model or "unknown",
        "choices": [
            {
                "index": 0,
                "message": reply,
                "finish_reason": call.finish_reason
                or ("tool_calls" if reply.get("tool_calls") else "stop"),
            }
        ],
        "usage": {
            "prompt_tokens": usage["prompt_tokens"],
            "completion_tokens": usage["completion_tokens"],
            "total_tokens": usage["prompt_tokens"] + usage["completion_tokens"],
        },
    }
    if usage["cached_tokens"]:
        body["usage"]["prompt_tokens_details"] = {"cached_tokens": usage["cached_tokens"]}
    return body


def _request(messages: list[dict[str, Any]], model: str | None) -> dict[str, Any]:
    return {
        "digest": request_digest(messages),
        "messages_key": "messages",
        "from": 0,
        "messages": messages,
        "params": {"model": model} if model else {},
    }


def _from_model(message: dict[str, Any]) -> bool:
    return message.get("role") == "assistant"


class _Session:
    """Maps the traces of one session to events; see the module docstring for the rules."""

    def __init__(self, session_id: str, traces: list[_Trace], logs: dict[str, list[LogRecord]]):
        self.session_id = session_id
        self.traces = traces
        self.logs = logs
        self.events: list[tuple[AgentEvent, datetime]] = []
        self.pending: list[dict[str, Any]] = []
        self.tool_spans: dict[str, ToolSpan] = {}
        self.last: ActionProposed | None = None
        self.tool_calls = 0
        self.failed_calls = 0
        self.messages = 0

    def emit(self, event: AgentEvent, nanos: int) -> None:
        moment = _moment(nanos)
        if self.events and moment < self.events[-1][1]:
            moment = self.events[-1][1]
        self.events.append((event, moment))

    def convert(self, unmapped: Findings, notes: Findings) -> list[tuple[AgentEvent, datetime]]:
        calls: list[ModelCall] = []
        tools: list[ToolSpan] = []
        roots: list[Span] = []
        turns: list[tuple[int, list[Span]]] = []  # per trace: calls up to its end, its roots
        ids = {span.span_id for trace in self.traces for span in trace.spans}
        for trace in self.traces:
            own: list[Span] = []
            for span in sorted(trace.spans, key=lambda s: (s.start_ns, s.end_ns)):
                call = model_call_of(span, self.logs.get(span.span_id, []))
                tool = None if call is not None else tool_span_of(span)
                if call is not None:
                    calls.append(call)
                elif tool is not None:
                    tools.append(tool)
                elif span.parent_id is None or span.parent_id not in ids:
                    own.append(span)
                else:
                    unmapped.add(f"span:{span.name[:40]}", span.where, "a span of no mapped kind")
            roots.extend(own)
            turns.append((len(calls), own))
        if not calls:
            raise InvalidInputError(f"{self.traces[0].spans[0].where}: no model call in the trace")
        for tool in tools:
            if tool.call_id:
                self.tool_spans[tool.call_id] = tool
        first = calls[0]
        content = all(call.inputs is not None for call in calls)
        shape = first.shape
        if not content:
            notes.add(
                "no_content",
                first.span.where,
                f"recorded without message content (the setting: {CONTENT_SETTINGS[shape]})",
            )
        self.start(first, content, roots)
        previous: list[dict[str, Any]] = []
        done = 0
        for end, own in turns:
            for call in calls[done:end]:
                self.model_call(call, previous, unmapped)
                previous = [*(call.inputs or []), *([call.reply] if call.reply else [])]
            if end > done:
                self.finish(own, calls[end - 1])
            done = end
        used = {e.call_id for e, _ in self.events if isinstance(e, ActionCommitted | ActionFailed)}
        for tool in tools:
            if tool.call_id not in used:
                unmapped.add(
                    "orphan_tool_span", tool.span.where, f"{tool.tool}: no call asked for it"
                )
        return self.events

    def start(self, first: ModelCall, content: bool, roots: list[Span]) -> None:
        inputs = first.inputs or []
        system = []
        for message in inputs:
            if message.get("role") not in ("system", "developer"):
                break
            system.append(str(message.get("content") or ""))
        user = next((m for m in inputs if m.get("role") == "user"), None)
        specs, _ = tool_specs_of(first.tools) if first.tools else ([], [])
        metadata: dict[str, Any] = {
            "imported_from": "otlp",
            CAPTURED_WITH_KEY: CAPTURED_WITH,
            "otlp_shape": first.shape,
            "otlp_content": content,
            # the first trace only: a later trace of the conversation appends to the session
            "trace_id": self.traces[0].trace_id,
        }
        if user is not None:
            metadata[ENTRY_INPUTS_KEY] = orjson.dumps(
                {"args": [user.get("content") or ""], "kwargs": {}}
            ).decode()
        service = first.span.resource.get("service.name")
        if isinstance(service, str):
            metadata["service"] = service
        prompt = "\n\n".join(system)
        from ..canonical import prefix_hash

        self.emit(
            SessionStarted(
                config=AgentConfig(tools=specs),
                system_prompt=prompt,
                system_prompt_hash=prefix_hash(prompt, []),
                model=first.model,
                metadata=metadata,
            ),
            min(r.start_ns for r in roots) if roots else first.span.start_ns,
        )

    def model_call(
        self, call: ModelCall, previous: list[dict[str, Any]], unmapped: Findings
    ) -> None:
        inputs = call.inputs or []
        start = 0
        while start < min(len(previous), len(inputs)) and projection(
            [previous[start]]
        ) == projection([inputs[start]]):
            start += 1
        new = inputs[start:]
        last_model = max((i for i, m in enumerate(new) if _from_model(m)), default=-1)
        self.messages += len(new)
        for message in new[last_model + 1 :]:
            if message.get("role") == "user":
                self.emit(UserInput(text=str(message.get("content") or "")), call.span.start_ns)
            elif message.get("role") == "tool":
                self.outcome(message, call.span.start_ns, unmapped, call.span.where)
        self.answer_unanswered(call.span.start_ns)
        request = _request(inputs, call.model)
        if call.failure is not None:
            self.failed_calls += 1
            failure = call.failure
            kind = (
                failure["type"].replace(".", ":") if ":" not in failure["type"] else failure["type"]
            )
            if "." in failure["type"] and ":" not in failure["type"]:
                module, _, name = failure["type"].rpartition(".")
                kind = f"{module}:{name}"
            self.emit(
                ModelCallFailed(
                    message=f"{kind.rpartition(':')[2]}: {failure['message']}",
                    status_code=failure["status_code"],
                    model=call.model,
                    request=request,
                    error={
                        "type": kind if ":" in kind else f"builtins:{kind}",
                        "mro": [],
                        "args": [failure["message"]],
                        "attributes": {},
                        "message": failure["message"],
                    },
                ),
                call.span.end_ns,
            )
            self.last = None
            return
        body = _completion(call)
        proposal = proposal_from_completion(
            body, latency_ms=round((call.span.end_ns - call.span.start_ns) / 1e6, 3)
        ).model_copy(update={"request": request, "response": body})
        self.tool_calls += len(proposal.calls)
        self.emit(proposal, call.span.end_ns)
        self.last = proposal
        self.pending = [
            {"call_id": c.call_id, "tool": c.tool, "args": c.args} for c in proposal.calls
        ]

    def outcome(self, message: dict[str, Any], nanos: int, unmapped: Findings, where: str) -> None:
        call_id = message.get("tool_call_id")
        index = next((i for i, c in enumerate(self.pending) if c["call_id"] == call_id), 0)
        if not self.pending:
            unmapped.add(
                "orphan_tool_result", where, f"a tool result for {call_id!r} answers no call"
            )
            return
        call = self.pending.pop(index)
        self.commit(call, str(message.get("content") or ""), nanos)

    def commit(self, call: dict[str, Any], text: str | None, nanos: int) -> None:
        args = call["args"] if isinstance(call["args"], dict) else {}
        tool = self.tool_spans.get(call["call_id"])
        if tool is not None and tool.failure is not None:
            self.emit(
                ActionFailed(
                    call_id=call["call_id"],
                    tool=call["tool"],
                    kind="business",
                    message=tool.failure,
                    args=args,
                ),
                tool.span.end_ns,
            )
            return
        if tool is not None and text is None:
            text = (
                tool.result if isinstance(tool.result, str) else orjson.dumps(tool.result).decode()
            )
        self.emit(
            ActionCommitted(call_id=call["call_id"], tool=call["tool"], args=args, result=text),
            tool.span.end_ns if tool is not None else nanos,
        )

    def answer_unanswered(self, nanos: int) -> None:
        """Calls whose result no request sent on: answered by their tool span, if any."""
        for call in self.pending:
            if call["call_id"] in self.tool_spans:
                self.commit(call, None, nanos)
        self.pending = []

    def finish(self, roots: list[Span], last: ModelCall) -> None:
        """The end of one trace: its unanswered calls, its answer, its halt."""
        self.answer_unanswered(last.span.end_ns)
        failed = next((r for r in roots if r.status_code == _ERROR), None)
        end = max((r.end_ns for r in roots), default=last.span.end_ns)
        if (
            self.last is not None
            and not self.last.calls
            and isinstance(self.events[-1][0], ActionProposed)
        ):
            self.emit(AgentCompleted(answer=self.last.text or ""), end)
        if failed is not None:
            self.emit(
                AgentHalted(
                    rule="error", reason=failed.status_message or f"span {failed.name} failed"
                ),
                failed.end_ns,
            )


def _slug(path: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.:\-]", "_", Path(path).name)[:100] or "trace"


def convert_batch(batch: OtlpBatch, where: str) -> ConvertedFile:
    """Map the spans and log records of one file (or body) to sessions (nothing written).

    Raises:
        InvalidInputError: a trace with no model call, or an event that cannot be stored.
    """
    converted = ConvertedFile(where, [], Findings(), Findings())
    by_trace: dict[str, list[Span]] = {}
    for span in batch.spans:
        by_trace.setdefault(span.trace_id, []).append(span)
    logs: dict[str, list[LogRecord]] = {}
    for record in batch.logs:
        if record.span_id is None:
            converted.unmapped.add(
                "log_record", record.where, f"{record.event_name or 'a record'} with no span"
            )
            continue
        logs.setdefault(record.span_id, []).append(record)
    sessions: dict[str, list[_Trace]] = {}
    for trace_id, spans in by_trace.items():
        key = _session_key(spans, converted.notes)
        sessions.setdefault(key, []).append(_Trace(trace_id, spans))
    for session_id, traces in sessions.items():
        traces.sort(key=lambda trace: trace.start)
        mapper = _Session(session_id, traces, logs)
        events = mapper.convert(converted.unmapped, converted.notes)
        session = ConvertedSession(session_id, f"{where} (session {session_id})", events)
        for at, flat in session.records():
            try:
                check_json(flat)
            except InvalidEventError as e:
                raise InvalidInputError(f"{at}: {e}") from e
        converted.sessions.append(session)
        converted.messages += mapper.messages
        converted.tool_calls += mapper.tool_calls
        converted.failed_calls += mapper.failed_calls
    return converted


def convert_otlp(paths: Iterable[str | Path]) -> list[ConvertedFile]:
    """Read and map every OTLP file before anything is written (see `convert_batch`).

    Raises:
        InvalidInputError: malformed input (one line naming ``file:line`` and the span).
    """
    return [convert_batch(read_otlp(path), str(path)) for path in paths]
