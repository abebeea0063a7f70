"""Replay of an imported trace (OTLP GenAI, OpenInference) through the user's own code.

A session imported by `journal.formats.otlp_import` holds what the trace held: each model
call's request messages and reply, the tools' results as sent to the model (or their tool
spans' outcomes). Its replay runs the entry the user names (``--agent module:function``,
called with the trace's first user message), whose model client and tools are wrapped by
a `capture.Capture`, inside `capture.replaying`, as for a captured entry
(`replay.entry_replay`), with two differences:

* **a request is compared in the trace's terms**: the roles, texts, tool calls (name and
  arguments as values) and tool results of its messages (`journal.formats` ``projection``),
  not the whole request's digest: a trace keeps no tools list, no parameters, and the
  ids are the served ones. The first request that differs stops the replay there,
  naming the first message that differs;
* **a tool result is the text the code sent the model**, handed to the decorated tool's
  caller as the tool's declared return type (a ``dict`` from its JSON text).

A trace recorded without message content cannot be replayed: the error says which setting
of the instrumentation records it.
"""

from __future__ import annotations

from typing import Any

from agentloop import AgentLoadError
from capture import Capture
from journal import (
    ActionProposed,
    Journal,
    ModelCallFailed,
    SessionStarted,
)
from journal.formats import CONTENT_SETTINGS, message_projection, request_digest

from ._captured import CapturedRun
from ._run import ForkPoint, completed, replay_session
from ._verdict import ReplayResult
from .entry_replay import EntryPlayer, _check_not_a_method, _entry_inputs, captured_driver
from .normalize import DEFAULT_RULES, NormalizationRules
from .options import ReplayOptions

__all__ = ["TRACE_RULES", "TracePlayer", "replay_captured", "replay_trace"]

TRACE_RULES = {
    "action_proposed": ("request", "response"),
    "model_call_failed": ("request", "response", "error"),
    "session_started": (
        "config",
        "metadata",
        "model",
        "model_settings",
        "client_settings",
        "system_prompt",
        "system_prompt_hash",
    ),
}
"""What a replay of a trace leaves out of the comparison of events, beside the options'
rules: the requests and replies (the player compares a request in the trace's terms and
serves the traced reply), and the configuration a trace does not hold."""


class TracePlayer(EntryPlayer):
    """`EntryPlayer`, comparing each request with the traced one in the trace's terms."""

    def model(self, seq: int, request: dict[str, Any], whole: dict[str, Any]) -> Any:
        """The traced reply when the request's messages match the traced ones."""
        item = self._recorded[seq] if seq < len(self._recorded) else None
        event = item.event if item is not None else None
        traced = event.request if isinstance(event, ActionProposed | ModelCallFailed) else None
        if traced is not None and str(traced.get("digest", "")).startswith("trace:"):
            key = str(request.get("messages_key", "messages"))
            found = whole.get(key)
            asked: list[Any] = found if isinstance(found, list) else []
            if request_digest(asked) != traced["digest"] and self.follower.fits():
                recorded = traced.get("messages")
                why = _first_difference(recorded if isinstance(recorded, list) else [], asked)
                return self._off_record(
                    seq, f"the request at seq {seq} differs from the traced one: {why}"
                )
            request = {**request, "digest": traced["digest"]}
        return super().model(seq, request, whole)


def _first_difference(traced: list[Any], asked: list[Any]) -> str:
    """The first message of a request that is not the traced one, as one line."""
    before, after = message_projection(traced), message_projection(asked)
    for index, (old, new) in enumerate(zip(before, after, strict=False)):
        if old != new:
            return f"message {index}: {str(old)[:80]} -> {str(new)[:80]}"
    return f"{len(before)} messages traced, {len(after)} sent"


def _check_content(started: SessionStarted, session_id: str) -> None:
    if started.metadata.get("otlp_content") is False:
        shape = str(started.metadata.get("otlp_shape"))
        setting = CONTENT_SETTINGS.get(shape, "the instrumentation's message-content setting")
        raise AgentLoadError(
            f"session {session_id} was traced without message content, so there is nothing "
            f"to serve the code; record it with {setting}"
        )


def replay_trace(
    journal: Journal,
    session_id: str,
    entry: Any,
    options: ReplayOptions | None = None,
    *,
    save: bool | ForkPoint = False,
) -> ReplayResult:
    """Run ``entry`` on an imported trace's first user message, served the trace; compare.

    Raises:
        AgentLoadError: ``entry`` is not callable, or the trace holds no message content.
    """
    options = options or ReplayOptions()
    if not callable(entry):
        raise AgentLoadError(f"{type(entry).__name__} is not an entry function")
    _check_not_a_method(entry)
    started = next(iter(journal.events(session_id, stop=1))).event
    assert isinstance(started, SessionStarted)
    _check_content(started, session_id)

    capture = getattr(entry, "__capture__", None) or Capture(Journal.open(":memory:"))

    def call(started: SessionStarted) -> object:
        inputs = _entry_inputs(started.metadata.get("entry_inputs"), session_id)
        # a session of the replay (the code need not be an entry): its end is the last reply
        with capture.session(inputs=inputs):
            return completed(entry(*inputs.get("args", []), **inputs.get("kwargs", {})))

    rules: NormalizationRules = (options.rules or DEFAULT_RULES).extended(TRACE_RULES)
    return replay_session(
        journal,
        session_id,
        captured_driver(
            session_id, call, lambda recorded, follower: TracePlayer(recorded, follower, options)
        ),
        save=save,
        live_model=bool(options.live_model),
        rules=rules,
    )


def replay_captured(run: CapturedRun) -> ReplayResult:
    """How `replay.Replayer` replays imported traces (`replay._captured.CapturedPath`)."""
    return replay_trace(run.journal, run.session_id, run.target, run.options, save=run.save)
