"""Capture a hand-written loop on the openai client into a journal, ready to replay.

Wrap the client; the loop stays as it is::

    from openai import OpenAI
    from journal import Journal
    from journal.capture_openai import JournaledOpenAI

    with Journal.open("agent-journal.db") as journal:
        client = JournaledOpenAI(OpenAI(), journal, session_id="support-42")
        reply = client.chat.completions.create(model="gpt-4.1", messages=messages, tools=tools)
        ...  # run the tool calls, append the results as "tool" messages, call create again

Each ``chat.completions.create`` journals, in the runtime's order:

* on the first call, ``session_started``: the model and its settings, the leading system
  messages as the system prompt, the ``tools`` as tool specs, your metadata plus
  ``"captured_with": "openai"``;
* the tool results the request carries for the calls of the previous response
  (``action_committed``, or ``action_failed`` for ``"error": true`` or content starting
  with ``error_prefix``), unless `record_result` / `record_error` journaled them already
  (use those to record durations, or results the messages do not carry);
* the user messages after the last assistant message (``user_input``);
* the response as ``action_proposed`` (every call, text, reasoning, model, usage, cost,
  latency), and ``agent_completed`` when it has no tool calls.

So the session replays with ``agent-journal replay SESSION --agent module:factory``
through an agent whose tools are the same OpenAI specs (`agentloop.Tool.from_openai`).
``stream=True`` is not captured (it raises). Everything but ``chat.completions.create``
passes through to the wrapped client untouched.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

from pydantic import JsonValue

from .events import (
    ActionCommitted,
    ActionFailed,
    AgentCompleted,
    AgentConfig,
    AgentEvent,
    AgentHalted,
    FailureKind,
    SessionStarted,
    UserInput,
)
from .openai_messages import (
    MODEL_SETTINGS,
    PendingCalls,
    content_text,
    prefix_hash,
    proposal_from_completion,
    response_body,
    system_prompt_of,
    tool_specs_of,
)
from .store import Journal

__all__ = ["JournaledOpenAI"]


def _role(message: Any) -> Any:
    return message.get("role") if isinstance(message, Mapping) else None


def _system_now() -> datetime:
    return datetime.now(UTC)


class JournaledOpenAI:
    """An ``openai.OpenAI`` client whose ``chat.completions.create`` journals every call.

    Args:
        client: the openai client (or anything with ``chat.completions.create``).
        journal: where the events go.
        session_id: the session to write (default: a new ``openai-<hex>`` id).
        metadata: kept in ``session_started``.
        error_prefix: a tool message whose content starts with it is a failure.
        clock: the time of each event (default: the system clock).
        timer: monotonic seconds, to measure each call's latency.
    """

    def __init__(
        self,
        client: Any,
        journal: Journal,
        session_id: str | None = None,
        *,
        metadata: Mapping[str, JsonValue] | None = None,
        error_prefix: str | None = None,
        clock: Callable[[], datetime] = _system_now,
        timer: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.client = client
        self.journal = journal
        self.session_id = session_id or f"openai-{uuid.uuid4().hex[:16]}"
        self.metadata = dict(metadata or {})
        self.error_prefix = error_prefix
        self.clock = clock
        self.timer = timer
        self.pending = PendingCalls()
        self._inputs: list[str] = []
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self.create))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    # -- journaling ------------------------------------------------------------------

    def _append(self, events: Sequence[AgentEvent]) -> None:
        if events:
            seq = self.journal.last_seq(self.session_id)
            self.journal.append(
                self.session_id,
                events,
                expected_seq=0 if seq is None else seq + 1,
                ts=self.clock(),
            )

    def _outcome(
        self,
        call_id: str,
        *,
        result: Any = None,
        error: str | None = None,
        kind: FailureKind = "business",
    ) -> ActionCommitted | ActionFailed | None:
        call = self.pending.take(call_id)
        if call is None:
            return None
        args = call.args if isinstance(call.args, dict) else {}
        if error is not None:
            return ActionFailed(
                call_id=call_id, tool=call.tool, kind=kind, message=error, args=args
            )
        return ActionCommitted(call_id=call_id, tool=call.tool, args=args, result=result)

    def record_result(
        self, call_id: str, result: JsonValue, *, duration_ms: float | None = None
    ) -> None:
        """Journal the result of a call of the last response (``action_committed``).

        Raises:
            KeyError: no call of the last response with this id is waiting for a result.
        """
        event = self._outcome(call_id, result=result)
        if not isinstance(event, ActionCommitted):
            raise KeyError(f"no call {call_id!r} of the last response waits for a result")
        self._append([event.model_copy(update={"duration_ms": duration_ms})])

    def record_error(
        self,
        call_id: str,
        message: str,
        *,
        kind: FailureKind = "business",
        duration_ms: float | None = None,
    ) -> None:
        """Journal the failure of a call of the last response (``action_failed``).

        Raises:
            KeyError: no call of the last response with this id is waiting for a result.
        """
        event = self._outcome(call_id, error=message, kind=kind)
        if not isinstance(event, ActionFailed):
            raise KeyError(f"no call {call_id!r} of the last response waits for a result")
        self._append([event.model_copy(update={"duration_ms": duration_ms})])

    def halt(self, rule: str, reason: str) -> None:
        """End the session (``agent_halted``): a limit of your loop, an error, the user left."""
        self._append([AgentHalted(rule=rule, reason=reason)])

    # -- the wrapped call ------------------------------------------------------------

    def _before(self, request: Mapping[str, Any]) -> list[AgentEvent]:
        messages = request.get("messages") or []
        events: list[AgentEvent] = []
        if self.journal.last_seq(self.session_id) is None:
            prompt, _, _ = system_prompt_of(messages)
            tools, _ = tool_specs_of(request.get("tools"))
            events.append(
                SessionStarted(
                    config=AgentConfig(tools=tools),
                    system_prompt=prompt,
                    system_prompt_hash=prefix_hash(prompt, request.get("tools")),
                    model=request.get("model"),
                    model_settings={k: request[k] for k in MODEL_SETTINGS if k in request},
                    metadata={**self.metadata, "captured_with": "openai"},
                )
            )
        last_assistant = max(
            (i for i, m in enumerate(messages) if _role(m) == "assistant"), default=-1
        )
        inputs: list[str] = []
        for message in messages[last_assistant + 1 :]:
            text, _ = content_text(message.get("content") if isinstance(message, Mapping) else None)
            if _role(message) == "user":
                inputs.append(text)
            elif _role(message) == "tool" and isinstance(message.get("tool_call_id"), str):
                failed = message.get("error") is True or bool(
                    self.error_prefix and text.startswith(self.error_prefix)
                )
                event = self._outcome(
                    message["tool_call_id"], result=text, error=text if failed else None
                )
                if event is not None:
                    events.append(event)
        # A retry of a call that raised sends the same user messages again: journal them once.
        fresh = (
            inputs[len(self._inputs) :] if inputs[: len(self._inputs)] == self._inputs else inputs
        )
        events.extend(UserInput(text=text) for text in fresh)
        self._inputs = inputs
        return events

    def create(self, **request: Any) -> Any:
        """Call ``chat.completions.create`` on the wrapped client and journal the exchange."""
        if request.get("stream"):
            raise ValueError("JournaledOpenAI does not capture streamed responses (stream=True)")
        self._append(self._before(request))
        started = self.timer()
        response = self.client.chat.completions.create(**request)
        latency = (self.timer() - started) * 1000
        proposal = proposal_from_completion(response_body(response), latency_ms=latency)
        self.pending.reset(proposal.calls)
        self._inputs = []
        events: list[AgentEvent] = [proposal]
        if not proposal.calls:
            events.append(AgentCompleted(answer=proposal.text or ""))
        self._append(events)
        return response
