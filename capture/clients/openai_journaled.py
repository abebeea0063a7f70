"""Capture a hand-written loop on the openai client into a journal, ready to replay.

Wrap the client; the loop stays as it is::

    from openai import OpenAI
    from journal import Journal
    from journal import JournaledOpenAI

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
An ``AsyncOpenAI`` client works alike (``await client.chat.completions.create(...)``), and
so does ``stream=True``: the chunks reach the code as they arrive and the response they
make up is journaled once whole (`capture.clients.openai_streams`). Everything but
``chat.completions.create`` passes through to the wrapped client untouched. The events
are written by a `capture.Recorder`, so its order rules hold (a model call after a turn's
final answer needs a new user message: `RecordingOrderError`).
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable, Mapping
from types import SimpleNamespace, TracebackType
from typing import Any, Self

from pydantic import JsonValue

from journal import ActionCommitted, ActionFailed, AgentHalted, Clock, FailureKind, Journal
from journal.formats import (
    MODEL_SETTINGS,
    content_text,
    proposal_from_completion,
    response_body,
    system_prompt_of,
)

from ..output import Destination
from ..recorder import Recorder
from ..requests import assembled_chat, sent_parameters
from .openai_streams import AsyncRecordedStream, RecordedStream, StreamRecording, end_open

__all__ = ["JournaledOpenAI"]


def _role(message: Any) -> Any:
    return message.get("role") if isinstance(message, Mapping) else None


class JournaledOpenAI:
    """An ``OpenAI`` or ``AsyncOpenAI`` client whose ``chat.completions.create`` is journaled.

    Args:
        client: the openai client (or anything with ``chat.completions.create``).
        journal: where the events go (a `Destination` to set the spool, redaction or
            sampling; a journal alone fails open to the spool beside it).
        session_id: the session to write (default: a new id).
        metadata: kept in ``session_started``.
        error_prefix: a tool message whose content starts with it is a failure.
        clock: the time of each event by seq (default: the journal's clock).
        timer: monotonic seconds, to measure each call's latency.
    """

    def __init__(
        self,
        client: Any,
        journal: Journal | Destination,
        session_id: str | None = None,
        *,
        metadata: Mapping[str, JsonValue] | None = None,
        error_prefix: str | None = None,
        clock: Clock | None = None,
        timer: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.client = client
        self.recorder = Recorder(journal, session_id, clock=clock)
        self.metadata = dict(metadata or {})
        self.error_prefix = error_prefix
        self.timer = timer
        self._inputs: list[str] = []
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self.create))

    @property
    def session_id(self) -> str:
        """The session being written."""
        return self.recorder.session_id

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """End the session as the recorder's ``with`` does: an escaping exception fails it."""
        self.recorder.__exit__(exc_type, exc, tb)

    def record_result(
        self, call_id: str, result: JsonValue, *, duration_ms: float | None = None
    ) -> ActionCommitted | ActionFailed:
        """Journal the result of a call of the last response (``action_committed``).

        Raises:
            RecordingOrderError: no call of the last response with this id is waiting.
        """
        return self.recorder.tool_result(call_id, result, duration_ms=duration_ms)

    def record_error(
        self,
        call_id: str,
        message: str,
        *,
        kind: FailureKind = "business",
        duration_ms: float | None = None,
    ) -> ActionFailed:
        """Journal the failure of a call of the last response (``action_failed``).

        Raises:
            RecordingOrderError: no call of the last response with this id is waiting.
        """
        return self.recorder.tool_failure(call_id, message, kind=kind, duration_ms=duration_ms)

    def halt(self, rule: str, reason: str) -> AgentHalted:
        """End the session (``agent_halted``): a limit of your loop, an error, the user left."""
        return self.recorder.halt(rule, reason)

    def _before(self, request: Mapping[str, Any]) -> None:
        """Journal what the request carries that is new: the start, tool results, user input."""
        messages = request.get("messages") or []
        recorder = self.recorder
        if not recorder.started:
            prompt, _, _ = system_prompt_of(messages)
            recorder.start(
                model=request.get("model"),
                system_prompt=prompt,
                tools=request.get("tools") or (),
                model_settings={k: request[k] for k in MODEL_SETTINGS if k in request},
                metadata=self.metadata,
                captured_with="openai",
            )
        last_assistant = max(
            (i for i, m in enumerate(messages) if _role(m) == "assistant"), default=-1
        )
        inputs: list[str] = []
        for message in messages[last_assistant + 1 :]:
            if not isinstance(message, Mapping):
                continue
            text, _ = content_text(message.get("content"))
            call_id = message.get("tool_call_id")
            if _role(message) == "user":
                inputs.append(text)
            elif _role(message) == "tool" and any(c.call_id == call_id for c in recorder.pending):
                assert isinstance(call_id, str)
                failed = message.get("error") is True or bool(
                    self.error_prefix and text.startswith(self.error_prefix)
                )
                if failed:
                    recorder.tool_failure(call_id, text, kind="business")
                else:
                    recorder.tool_result(call_id, text)
        # A retry of a call that raised sends the same user messages again: journal them once.
        seen = len(self._inputs)
        fresh = inputs[seen:] if inputs[:seen] == self._inputs else inputs
        for text in fresh:
            recorder.user_input(text)
        self._inputs = inputs

    def create(self, **request: Any) -> Any:
        """Call ``chat.completions.create`` on the wrapped client and journal the exchange.

        With an async client, returns the coroutine to await, as the client does.
        """
        end_open(self.recorder)
        self._before(sent_parameters(request))
        started = self.timer()
        create = self.client.chat.completions.create
        if inspect.iscoroutinefunction(inspect.unwrap(create)):
            return self._acreate(create, request, started)
        return self._after(create(**request), request, started, is_async=False)

    async def _acreate(
        self, create: Callable[..., Awaitable[Any]], request: dict[str, Any], started: float
    ) -> Any:
        return self._after(await create(**request), request, started, is_async=True)

    def _after(
        self, response: Any, request: Mapping[str, Any], started: float, *, is_async: bool
    ) -> Any:
        """Journal the response (a stream: once whole), and hand it to the code."""
        if not request.get("stream"):
            self._journal(response_body(response), (self.timer() - started) * 1000)
            return response

        def journal(chunks: list[Any], latency_ms: float) -> None:
            self._journal(assembled_chat(chunks), latency_ms)

        recording = StreamRecording(
            self.recorder, "chat", request.get("n"), journal, timer=self.timer, started=started
        )
        return (AsyncRecordedStream if is_async else RecordedStream)(response, recording)

    def _journal(self, body: Any, latency_ms: float) -> None:
        proposal = proposal_from_completion(body, latency_ms=latency_ms)
        self.recorder.model_output(proposal)
        self._inputs = []
        if not proposal.calls:
            self.recorder.final(proposal.text or "")
