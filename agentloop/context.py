"""The model's context, built from the journal: an immutable prefix and an append-only log.

* prefix: the system prompt and the tool specs shown to the model; its hash is recorded in
  ``session_started`` so a replay can tell whether the prompt changed;
* log: chat messages derived from the session's events, one event at a time, each message
  remembering the seq it came from; ``context_compacted`` events replace a range of them
  with a summary frame, a ``system`` message (a single large tool result keeps its place,
  with its content replaced);
* scratch: a dict for the agent's own volatile notes; never sent, never journaled.

Compaction is decided by the pure `plan_compaction` from the log and the guardrails, and
happens through events, so a replay rebuilds exactly the same context.

Before that, a tool result too large to keep is compacted where it is recorded:
`compact_result` turns a result whose canonical JSON is larger than ``max_result_bytes``
into a stand-in of at most that size, so an ``action_committed`` stays well under the
journal's event size limit.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, assert_never

import orjson

from journal import (
    ActionCommitted,
    ActionFailed,
    ActionProposed,
    AgentCompleted,
    AgentEvent,
    AgentHalted,
    CircuitOpened,
    ContextCompacted,
    FallbackInvoked,
    Guardrails,
    ModelCallFailed,
    RepairApplied,
    SessionStarted,
    ToolCall,
    UserInput,
    VerificationFailed,
    canonical_bytes,
    clip,
    prefix_hash,
)

__all__ = [
    "COMPACTED_RESULT",
    "Context",
    "Message",
    "compact_result",
    "estimate_tokens",
    "plan_compaction",
    "prefix_hash",
]

_CHARS_PER_TOKEN = 4


def estimate_tokens(text: str) -> int:
    """A deterministic token estimate: one token per four characters."""
    return (len(text) + _CHARS_PER_TOKEN - 1) // _CHARS_PER_TOKEN


COMPACTED_RESULT = "compacted_result"
"""The one key of the object that stands in for a compacted tool result."""

_STAND_IN_ROOM = 200
"""Bytes kept for the stand-in's own keys, size and digest besides its head."""


def compact_result(result: Any, max_bytes: int | None) -> Any:
    """Return ``result`` as it is recorded: itself, or a stand-in when it is too large.

    A result whose canonical JSON is larger than ``max_bytes`` (None: never) becomes
    ``{"compacted_result": {"bytes": N, "sha256": H, "head": T}}``: its size, the sha256 hex
    of its canonical bytes, and the start of its text (a string as it is, anything else as
    its JSON), cut so the stand-in's canonical JSON is at most ``max_bytes``. Pure and
    deterministic, so a replay compacts a live result the same way, and a recorded
    stand-in (under the limit) is kept as it is.
    """
    if max_bytes is None:
        return result
    size = len(orjson.dumps(result))  # compact JSON: as long as the canonical bytes
    if size <= max_bytes:
        return result
    body = canonical_bytes(result)
    text = result if isinstance(result, str) else body.decode("utf-8")
    budget = max(0, max_bytes - _STAND_IN_ROOM)
    cut = min(len(text), budget)
    while cut:  # each round shrinks the cut: escapes and non-ASCII take several bytes
        encoded = len(orjson.dumps(text[:cut]))
        if encoded <= budget:
            break
        cut = cut * budget // encoded
    return {
        COMPACTED_RESULT: {
            "bytes": len(body),
            "sha256": hashlib.sha256(body).hexdigest(),
            "head": text[:cut],
        }
    }


@dataclass
class Message:
    """One chat message of the log and the seq of the event it came from."""

    seq: int
    role: str
    content: str
    tool_call_id: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    failed_tool: str | None = None

    def tokens(self) -> int:
        """Estimated tokens of the message as sent: its content and its calls' arguments."""
        return estimate_tokens(self.content) + sum(
            estimate_tokens(call.tool)
            + estimate_tokens(call.args if isinstance(call.args, str) else _json(call.args))
            for call in self.tool_calls
        )

    def as_chat(self) -> dict[str, Any]:
        """The message in the OpenAI chat format."""
        message: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_call_id is not None:
            message["tool_call_id"] = self.tool_call_id
        if self.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call.call_id,
                    "type": "function",
                    "function": {
                        "name": call.tool,
                        "arguments": call.args
                        if isinstance(call.args, str)
                        else orjson.dumps(call.args).decode(),
                    },
                }
                for call in self.tool_calls
            ]
        return message


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()


def _result_text(result: Any) -> str:
    return result if isinstance(result, str) else _json(result)


@dataclass
class Context:
    """The log of chat messages derived from a session's events, kept incrementally."""

    messages: list[Message] = field(default_factory=list)
    scratch: dict[str, Any] = field(default_factory=dict)
    _answered: dict[str, int] = field(default_factory=dict)
    _chat: list[dict[str, Any]] = field(default_factory=list)
    """``as_chat()`` of the first messages, kept so a step renders only what is new."""
    _failed: int = 0
    """How many messages answer a call that failed (a failure run needs two)."""
    _counted: list[int] = field(default_factory=list)
    """``tokens()`` of the first messages, kept so a step counts only what is new."""
    _results_fit: tuple[int, int] = (0, 0)
    """(limit, n): no tool result among the first n messages is over ``limit`` tokens."""

    def tokens(self) -> int:
        """Estimated tokens of the log."""
        counted = self._counted
        if len(counted) < len(self.messages):
            counted.extend(m.tokens() for m in self.messages[len(counted) :])
        return sum(counted)

    def oversized_result(self, limit: int) -> Message | None:
        """The first tool result over ``limit`` estimated tokens, if any.

        Only the messages new or changed since the last look with the same limit are read.
        """
        checked_limit, start = self._results_fit
        messages = self.messages
        for index in range(start if checked_limit == limit else 0, len(messages)):
            message = messages[index]
            if message.role == "tool" and estimate_tokens(message.content) > limit:
                self._results_fit = (limit, index)
                return message
        self._results_fit = (limit, len(messages))
        return None

    def chat(self) -> list[dict[str, Any]]:
        """The log in the OpenAI chat format (a new list; treat its messages as read-only)."""
        rendered = self._chat
        if len(rendered) < len(self.messages):
            rendered.extend(m.as_chat() for m in self.messages[len(rendered) :])
        return list(rendered)

    def _changed(self, index: int) -> None:
        """Message ``index`` changed in place: render and count it (and what follows) again."""
        del self._chat[index:]
        del self._counted[index:]
        limit, fit = self._results_fit
        self._results_fit = (limit, min(fit, index))

    @property
    def failed_answers(self) -> int:
        """How many messages answer a call that failed or was rejected."""
        return self._failed

    def _answer(self, seq: int, call_id: str, content: str, failed_tool: str | None) -> None:
        index = self._answered.get(call_id)
        if index is not None and index < len(self.messages):
            earlier = self.messages[index]
            if earlier.tool_call_id == call_id and earlier.seq >= self._last_proposal_seq():
                self._failed += (failed_tool is not None) - (earlier.failed_tool is not None)
                earlier.content = f"{earlier.content}\n{content}"
                earlier.failed_tool = failed_tool
                self._changed(index)
                return
        self._answered[call_id] = len(self.messages)
        self._failed += failed_tool is not None
        self.messages.append(
            Message(seq, "tool", content, tool_call_id=call_id, failed_tool=failed_tool)
        )

    def _last_proposal_seq(self) -> int:
        for message in reversed(self.messages):
            if message.tool_calls:
                return message.seq
        return -1

    def add(self, seq: int, event: AgentEvent) -> None:
        """Extend the log with one event (in seq order)."""
        match event:
            case (
                SessionStarted()
                | CircuitOpened()
                | FallbackInvoked()
                | AgentHalted()
                | ModelCallFailed()  # the model never answered: nothing to show it
            ):
                pass
            case UserInput():
                self.messages.append(Message(seq, "user", event.text))
            case ActionProposed():
                if event.calls:
                    self.messages.append(
                        Message(seq, "assistant", event.text or "", tool_calls=list(event.calls))
                    )
            case RepairApplied():
                self._add_repair(seq, event)
            case VerificationFailed() if event.stage == "empty_reply":
                # no call to answer: a note to the model, before it is asked again
                self.messages.append(Message(seq, "system", f"rejected: {event.message}"))
            case VerificationFailed():
                self._answer(
                    seq, event.call_id, f"rejected ({event.stage}): {event.message}", event.tool
                )
            case ActionCommitted():
                self._answer(seq, event.call_id, _result_text(event.result), None)
            case ActionFailed():
                self._answer(
                    seq, event.call_id, f"error ({event.kind}): {event.message}", event.tool
                )
            case ContextCompacted():
                self._compact(event)
            case AgentCompleted():
                self.messages.append(Message(seq, "assistant", event.answer))
            case _:
                assert_never(event)

    def _add_repair(self, seq: int, event: RepairApplied) -> None:
        if event.level == "storm" and event.call_id is not None:
            self._answer(seq, event.call_id, f"suppressed: {event.detail}", event.tool)
            return
        if not self.messages or not self.messages[-1].tool_calls and event.level != "scavenge":
            return
        if event.level == "scavenge" and isinstance(event.after, list):
            calls = [ToolCall.model_validate(call) for call in event.after]
            last = self.messages[-1] if self.messages else None
            if last is not None and last.role == "assistant" and last.seq == seq - 1:
                last.tool_calls = calls
                self._changed(len(self.messages) - 1)
            else:
                self.messages.append(Message(seq, "assistant", "", tool_calls=calls))
            return
        if event.call_id is not None and isinstance(event.after, dict):
            last = self.messages[-1]
            self._changed(len(self.messages) - 1)
            last.tool_calls = [
                ToolCall(call_id=c.call_id, tool=c.tool, args=event.after)
                if c.call_id == event.call_id and c.tool == event.tool
                else c
                for c in last.tool_calls
            ]

    def _compact(self, event: ContextCompacted) -> None:
        inside = [i for i, m in enumerate(self.messages) if event.from_seq <= m.seq <= event.to_seq]
        if not inside:
            return
        if len(inside) == 1 and self.messages[inside[0]].role == "tool":
            self.messages[inside[0]].content = event.summary
            self._changed(inside[0])
            return
        first = inside[0]
        frame = Message(
            event.to_seq,
            "system",
            f"[summary of steps {event.from_seq}..{event.to_seq}] {event.summary}",
        )
        kept = [m for i, m in enumerate(self.messages) if i not in set(inside)]
        kept.insert(first, frame)
        self.messages = kept
        self._answered = {
            m.tool_call_id: i for i, m in enumerate(self.messages) if m.tool_call_id is not None
        }
        self._failed = sum(m.failed_tool is not None for m in self.messages)
        self._changed(first)


def _summarise(messages: list[Message], limit_tokens: int) -> str:
    lines = []
    for m in messages:
        if m.tool_calls:
            lines.append("called " + ", ".join(f"{c.tool}" for c in m.tool_calls))
        elif m.role == "tool":
            lines.append(f"-> {m.content}")
        elif m.role == "system":
            lines.append(m.content)  # an earlier summary frame, kept as it reads
        else:
            lines.append(f"{m.role}: {m.content}")
    return clip(" | ".join(lines), limit_tokens * _CHARS_PER_TOKEN)


def plan_compaction(
    context: Context, rails: Guardrails, window_tokens: int | None
) -> ContextCompacted | None:
    """Decide one compaction to apply before the next model call, or None.

    In order: a tool result larger than ``compact_result_tokens`` is cut to a summary of at
    most ``compact_summary_tokens``; a run of identical failures of one tool is folded into
    one frame (when that is shorter); and when the log passes ``compact_early`` (or
    ``compact_urgent``) of the model's window, the oldest turns (all but the current one)
    become one summary frame of at most ``compact_summary_tokens`` and at most half their
    size; when that is not enough at the urgent level, the current turn's earlier steps are
    summarised too (its user message and its latest step are kept). Tokens count message contents
    and tool-call arguments.
    """
    m = context.oversized_result(rails.compact_result_tokens)
    if m is not None:
        tokens = estimate_tokens(m.content)
        summary = _summarise([m], rails.compact_summary_tokens)
        return ContextCompacted(
            from_seq=m.seq,
            to_seq=m.seq,
            summary=f"[result compacted from ~{tokens} tokens] {summary}",
            tokens_before=tokens,
            tokens_after=estimate_tokens(summary),
        )
    least = rails.compact_failure_run
    run = (
        _failure_run(context.messages, least)
        if least is not None and context.failed_answers >= least
        else None
    )
    if run is not None:
        start, end = run
        failed = [m for m in context.messages[start : end + 1] if m.role == "tool"]
        summary = (
            f"{len(failed)} calls to {failed[0].failed_tool} failed the same way: "
            f"{failed[-1].content}"
        )
        folded = _range(context, start, end, summary)
        if folded.tokens_after is not None and folded.tokens_after < (folded.tokens_before or 0):
            return folded
    if window_tokens:
        used = context.tokens()
        if used > rails.compact_urgent * window_tokens:
            last_user = max(
                (i for i, m in enumerate(context.messages) if m.role == "user"), default=0
            )
            if _worth_compacting(context.messages[:last_user]):
                return _range(context, 0, last_user - 1, None, rails.compact_summary_tokens)
            turn = _earlier_in_turn(context.messages, last_user)
            if turn is not None:
                return _range(context, *turn, None, rails.compact_summary_tokens)
        if used > rails.compact_early * window_tokens:
            users = [i for i, m in enumerate(context.messages) if m.role == "user"]
            if len(users) > 1 and _worth_compacting(context.messages[: users[-1]]):
                return _range(context, 0, users[-1] - 1, None, rails.compact_summary_tokens)
    return None


def _earlier_in_turn(messages: list[Message], last_user: int) -> tuple[int, int] | None:
    """The current turn's steps before its latest one (whole steps), if worth a summary."""
    starts = [i for i in range(last_user + 1, len(messages)) if messages[i].tool_calls]
    if len(starts) < 2:
        return None
    start, end = last_user + 1, starts[-1] - 1
    return (start, end) if _worth_compacting(messages[start : end + 1]) else None


def _worth_compacting(messages: list[Message]) -> bool:
    """A range is worth a summary unless it is empty or only summary frames already."""
    return any(m.role != "system" for m in messages)


def _range(
    context: Context, start: int, end: int, summary: str | None, limit: int = 800
) -> ContextCompacted:
    chosen = context.messages[start : end + 1]
    before = sum(m.tokens() for m in chosen)
    # A summary is at most half of what it replaces, so compacting always shrinks the log.
    text = summary if summary is not None else _summarise(chosen, min(limit, max(1, before // 2)))
    return ContextCompacted(
        from_seq=chosen[0].seq,
        to_seq=chosen[-1].seq,
        summary=text,
        tokens_before=before,
        tokens_after=estimate_tokens(text),
    )


def _failure_run(messages: list[Message], least: int) -> tuple[int, int] | None:
    """Find the last run of ``least`` or more proposals whose answers all failed alike."""
    groups: list[tuple[int, int, str | None, str]] = []
    index = 0
    while index < len(messages):
        m = messages[index]
        if m.tool_calls:
            end = index
            while end + 1 < len(messages) and messages[end + 1].role == "tool":
                end += 1
            answers = messages[index + 1 : end + 1]
            failed = {(a.failed_tool, a.content) for a in answers}
            if answers and len(failed) == 1 and answers[0].failed_tool is not None:
                tool, content = next(iter(failed))
                groups.append((index, end, tool, content))
            else:
                groups.append((index, end, None, ""))
            index = end + 1
        else:
            groups.append((index, index, None, ""))
            index += 1
    run: list[tuple[int, int, str | None, str]] = []
    for group in groups:
        if group[2] is not None and run and (run[-1][2], run[-1][3]) == (group[2], group[3]):
            run.append(group)
        elif group[2] is not None:
            if len(run) >= least:
                break
            run = [group]
        else:
            if len(run) >= least:
                break
            run = []
    if len(run) >= least:
        return run[0][0], run[-1][1]
    return None
