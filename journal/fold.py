"""What a session's events mean: `SessionState` and the pure `fold` / `apply` that build it.

The runtime decides from this state (incrementally, one `apply` per event), the store's
``sessions`` projection is this state, and replay, the CLI and the TUI show it: one fold,
so a live run and its replay cannot disagree.

Counting rules (documented once, here):

* a *step* is one tool call the gate decided on: committed, failed, or rejected at any
  stage except ``step_limit`` (which is the refusal to take one more step) and
  ``empty_reply`` (a reply with no call at all);
* a *failure* is an ``action_failed`` or a ``verification_failed``; a commit resets the
  consecutive count, and so do a new turn and a ``circuit_opened`` (the breaker takes over
  that streak of failures);
* ``tool_failures`` counts a tool's infrastructure and timeout failures (its breaker's
  input); business failures go back to the model and do not count there;
* ``repeats`` counts, per turn, committed calls by tool and canonical args hash (a
  successful call done again duplicates its work and its side effects); ``storms``
  counts storm repairs in the turn; ``schema_retries`` counts schema rejections in a row
  (a commit, a failure or another rejection stage resets it);
* ``identical_failures`` holds, per call key (tool + canonical args), how its last
  failure read (``business: message``, or ``stage: message`` for a rejection at
  ``unknown_tool``, ``schema`` or ``guard``) and how many times in a row the call failed
  exactly so, counted across turns (no new turn resets it); the same call failing
  differently starts again at 1, and a commit of it clears it. Only the
  `IDENTICAL_FAILURES_KEPT` calls that failed last are held (the one whose last failure is
  the oldest is forgotten first), so the state stays bounded in a long session: a streak
  is a call failing again before that many other calls failed. The args are those the
  event records: validated for a tool failure, as proposed for a rejection. Infrastructure
  and timeout failures are left to the breaker, which counts them per tool across the
  session already (and routes to a fallback where counting them here would halt);
* ``empty_replies`` counts, per turn, replies rejected for being empty (stage
  ``empty_reply``: a failure, not a step);
* a *model failure* is a ``model_call_failed``: a call of the model that raised (a rate
  limit a retry absorbed, a 500 the code caught). It counts in ``model_failures`` (and
  ``last_model_error``), never in ``failures``: it is no tool call, so it neither moves
  the consecutive-failure limit nor resets it, and ``model_calls`` counts the answers the
  model gave. ``model_failures_in_row`` counts those since the model last answered (or
  the turn began): the runtime's ``model_retries`` limit;
* status: ``running`` until an ending, ``completed`` after ``agent_completed`` (a new
  ``user_input`` makes it ``running`` again), ``halted`` after ``agent_halted``, ``failed``
  when the halt's rule is ``error``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .canonical import canonical_bytes
from .events import (
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
)
from .records import RecordedEvent

__all__ = [
    "FOLD_VERSION",
    "IDENTICAL_FAILURES_KEPT",
    "SessionState",
    "SessionStatus",
    "apply",
    "call_key",
    "fold",
]

FOLD_VERSION = 5
"""Bumped whenever the meaning of events changes; stored snapshots of older versions are rebuilt."""

IDENTICAL_FAILURES_KEPT = 256
"""How many failed calls `SessionState.identical_failures` holds, the last to fail (v4)."""

SessionStatus = Literal["running", "completed", "halted", "failed"]


def call_key(tool: str, args: object) -> str:
    """Return ``tool:hash`` where hash is the first 16 hex of sha256 over the canonical args."""
    digest = hashlib.sha256(
        args.encode("utf-8") if isinstance(args, str) else canonical_bytes(args)
    )
    return f"{tool}:{digest.hexdigest()[:16]}"


class SessionState(BaseModel):
    """The state of a session after some prefix of its events. JSON-serialisable.

    Treat it as immutable: `apply` returns a new state and never changes its input.
    """

    model_config = ConfigDict(extra="forbid")

    fold_version: int = FOLD_VERSION
    session_id: str | None = None
    agent: str | None = None
    model: str | None = None
    guardrails: Guardrails = Field(default_factory=Guardrails)
    tools: list[str] = Field(default_factory=list)
    replay_of: str | None = None
    forked_from: str | None = None
    fork_seq: int | None = None

    status: SessionStatus = "running"
    events: int = 0
    last_seq: int = -1
    started: str | None = None
    ended: str | None = None
    last_ts: str | None = None

    turns: int = 0
    turn_steps: int = 0
    steps: int = 0
    committed: int = 0
    failures: int = 0
    rejections: int = 0
    consecutive_failures: int = 0
    tool_failures: dict[str, int] = Field(default_factory=dict)
    open_breakers: list[str] = Field(default_factory=list)
    fallbacks: int = 0
    repeats: dict[str, int] = Field(default_factory=dict)
    identical_failures: dict[str, tuple[str, int]] = Field(default_factory=dict)
    empty_replies: int = 0
    schema_retries: int = 0
    storms: int = 0
    repairs: int = 0
    compactions: int = 0
    pending_calls: list[ToolCall] = Field(default_factory=list)

    model_calls: int = 0
    model_failures: int = 0
    model_failures_in_row: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    tokens_cached: int = 0
    cost: float = 0.0
    latency_ms: float = 0.0

    last_error: str | None = None
    last_model_error: str | None = None
    answer: str | None = None
    halt_rule: str | None = None
    halt_reason: str | None = None

    @property
    def ended_session(self) -> bool:
        """True once the session is halted or failed: no further turn may start."""
        return self.status in ("halted", "failed")

    @property
    def cache_hit_rate(self) -> float:
        """Share of input tokens served from the provider's prompt cache."""
        return self.tokens_cached / self.tokens_in if self.tokens_in else 0.0

    @property
    def tool_success_rate(self) -> float:
        """Committed calls over all calls that ran or were rejected."""
        return self.committed / self.steps if self.steps else 0.0


_set = object.__setattr__
_ALL_FIELDS = frozenset(SessionState.model_fields)


def _fast_build(values: dict[str, Any]) -> SessionState:
    """A `SessionState` over ``values`` (every field, in order), without validation.

    What `apply` returns: it computes the new values in a plain dict, since pydantic's
    ``__setattr__`` (about ten per event) cost more than the rest of the fold together,
    and sets the instance's attributes directly (model_construct, the public way, costs
    about 3x more per event). Every field counts as set, as in a state validated from its
    stored JSON. It relies on pydantic's private attributes (``__pydantic_extra__``,
    ``__pydantic_fields_set__``, ``__pydantic_private__``): `_build` checks once, at
    import, that it builds what `_plain_build` builds, and uses the plain one otherwise.
    """
    new = SessionState.__new__(SessionState)
    _set(new, "__dict__", values)
    _set(new, "__pydantic_extra__", None)
    _set(new, "__pydantic_fields_set__", set(_ALL_FIELDS))
    _set(new, "__pydantic_private__", None)
    return new


def _plain_build(values: dict[str, Any]) -> SessionState:
    """`_fast_build` through pydantic's public ``model_construct``."""
    return SessionState.model_construct(set(_ALL_FIELDS), **values)


def _fast_build_behaves() -> bool:
    """Whether `_fast_build` builds what `_plain_build` builds, with this pydantic."""
    probe = SessionState(session_id="probe", tools=["t"], steps=2)
    try:
        fast, plain = _fast_build(dict(probe.__dict__)), _plain_build(dict(probe.__dict__))
        return (
            fast == plain == probe
            and fast.model_dump() == plain.model_dump() == probe.model_dump()
            and fast.model_fields_set == plain.model_fields_set
            and fast.__pydantic_extra__ == plain.__pydantic_extra__
            and fast.__pydantic_private__ == plain.__pydantic_private__
            and fast.model_copy(update={"steps": 3}).steps == 3
            and SessionState.model_validate_json(fast.model_dump_json()) == plain
        )
    except Exception:  # a pydantic whose internals moved: take the plain path
        return False


_build = _fast_build if _fast_build_behaves() else _plain_build
"""How `apply` builds states: the fast path when it behaves as the plain one, probed once."""


def _scavenged(calls: list[Any]) -> list[ToolCall]:
    """The calls a scavenge repair took from the text: they are pending like proposed ones."""
    found = []
    for call in calls:
        try:
            found.append(ToolCall.model_validate(call))
        except ValidationError:
            continue
    return found


def _resolve(pending: list[ToolCall], call_id: str, tool: str) -> list[ToolCall]:
    """Drop the first pending call answered by (call_id, tool); ids may repeat."""
    for index, call in enumerate(pending):
        if call.call_id == call_id and call.tool == tool:
            return pending[:index] + pending[index + 1 :]
    return pending


def _pending(pending: list[ToolCall], call_id: str, tool: str) -> ToolCall | None:
    """The first pending call (call_id, tool) names, if any."""
    for call in pending:
        if call.call_id == call_id and call.tool == tool:
            return call
    return None


_CALL_STAGES = frozenset({"unknown_tool", "schema", "guard"})
"""Rejection stages that are about the call itself, so count as its identical failures."""


_State = dict[str, Any]
"""A state's field values: ``new`` is being built, ``old`` is the state before the event."""


def _ran(new: _State) -> None:
    new["schema_retries"] = 0
    new["steps"] += 1
    new["turn_steps"] += 1


def _failed(new: _State, message: str) -> None:
    new["failures"] += 1
    new["consecutive_failures"] += 1
    new["last_error"] = message


def _failed_as(new: _State, old: _State, key: str, signature: str) -> None:
    """Count one more failure of call ``key`` reading ``signature``; see the counting rules."""
    failures = old["identical_failures"]
    last = failures.get(key)
    count = last[1] + 1 if last is not None and last[0] == signature else 1
    if new is not old:  # in `fold`, which owns its copy, the dict is changed in place
        failures = new["identical_failures"] = dict(failures)
    if last is not None:
        del failures[key]  # it goes last: the order is that of the calls' last failures
    failures[key] = (signature, count)
    if len(failures) > IDENTICAL_FAILURES_KEPT:
        del failures[next(iter(failures))]


def _session_started(new: _State, old: _State, event: SessionStarted) -> None:
    new.update(
        agent=event.agent,
        model=event.model,
        guardrails=event.config.guardrails,
        tools=[tool.name for tool in event.config.tools],
        replay_of=event.replay_of,
        forked_from=event.forked_from,
        fork_seq=event.fork_seq,
        started=new["last_ts"],
    )


def _user_input(new: _State, old: _State, event: UserInput) -> None:
    new.update(
        turns=old["turns"] + 1,
        turn_steps=0,
        repeats={},
        empty_replies=0,
        schema_retries=0,
        storms=0,
        consecutive_failures=0,
        model_failures_in_row=0,
    )
    if old["status"] not in ("halted", "failed"):  # an ended session stays ended
        new.update(status="running", ended=None)


def _action_proposed(new: _State, old: _State, event: ActionProposed) -> None:
    usage = event.usage
    new.update(
        model_calls=old["model_calls"] + 1,
        model_failures_in_row=0,
        pending_calls=list(event.calls),
        tokens_in=old["tokens_in"] + usage.input_tokens,
        tokens_out=old["tokens_out"] + usage.output_tokens,
        tokens_cached=old["tokens_cached"] + usage.cached_tokens,
        cost=old["cost"] + (event.cost or 0.0),
        latency_ms=old["latency_ms"] + (event.latency_ms or 0.0),
    )


def _model_call_failed(new: _State, old: _State, event: ModelCallFailed) -> None:
    new["model_failures"] += 1
    new["model_failures_in_row"] += 1
    new["last_model_error"] = event.message


def _repair_applied(new: _State, old: _State, event: RepairApplied) -> None:
    new["repairs"] += 1
    if event.level == "storm":
        new["storms"] += 1
        if event.call_id is not None and event.tool is not None:
            new["pending_calls"] = _resolve(old["pending_calls"], event.call_id, event.tool)
    elif event.level == "scavenge" and isinstance(event.after, list):
        new["pending_calls"] = _scavenged(event.after)


def _verification_failed(new: _State, old: _State, event: VerificationFailed) -> None:
    stage = event.stage
    new["rejections"] += 1
    new["schema_retries"] = old["schema_retries"] + 1 if stage == "schema" else 0
    _failed(new, event.message)
    if stage == "empty_reply":  # no call: not a step
        new["empty_replies"] = old["empty_replies"] + 1
        return
    if stage != "step_limit":
        new["steps"] += 1
        new["turn_steps"] += 1
    pending = old["pending_calls"]
    if stage in _CALL_STAGES:
        call = _pending(pending, event.call_id, event.tool)
        if call is not None:
            _failed_as(new, old, call_key(call.tool, call.args), f"{stage}: {event.message}")
    new["pending_calls"] = _resolve(pending, event.call_id, event.tool)


def _action_committed(new: _State, old: _State, event: ActionCommitted) -> None:
    _ran(new)
    key = call_key(event.tool, event.args)
    repeats = old["repeats"]
    new["repeats"] = {**repeats, key: repeats.get(key, 0) + 1}
    failures = old["identical_failures"]
    if key in failures:
        if new is old:  # in `fold`, which owns its copy
            del failures[key]
        else:
            new["identical_failures"] = {k: v for k, v in failures.items() if k != key}
    new["committed"] += 1
    new["consecutive_failures"] = 0
    new["pending_calls"] = _resolve(old["pending_calls"], event.call_id, event.tool)


def _action_failed(new: _State, old: _State, event: ActionFailed) -> None:
    _ran(new)
    _failed(new, event.message)
    if event.kind == "business":
        _failed_as(new, old, call_key(event.tool, event.args), f"business: {event.message}")
    else:
        failures = old["tool_failures"]
        new["tool_failures"] = {**failures, event.tool: failures.get(event.tool, 0) + 1}
    new["pending_calls"] = _resolve(old["pending_calls"], event.call_id, event.tool)


def _circuit_opened(new: _State, old: _State, event: CircuitOpened) -> None:
    new["open_breakers"] = sorted({*old["open_breakers"], event.tool})
    new["consecutive_failures"] = 0


def _fallback_invoked(new: _State, old: _State, event: FallbackInvoked) -> None:
    new["fallbacks"] += 1


def _context_compacted(new: _State, old: _State, event: ContextCompacted) -> None:
    new["compactions"] += 1


def _agent_completed(new: _State, old: _State, event: AgentCompleted) -> None:
    new.update(status="completed", answer=event.answer, ended=new["last_ts"], pending_calls=[])


def _agent_halted(new: _State, old: _State, event: AgentHalted) -> None:
    new.update(
        status="failed" if event.rule == "error" else "halted",
        halt_rule=event.rule,
        halt_reason=event.reason,
        last_error=event.reason,
        ended=new["last_ts"],
        pending_calls=[],
    )


_Handler = Callable[[_State, _State, Any], None]
_HANDLERS: dict[type[BaseModel], _Handler] = {
    SessionStarted: _session_started,
    UserInput: _user_input,
    ActionProposed: _action_proposed,
    ModelCallFailed: _model_call_failed,
    RepairApplied: _repair_applied,
    VerificationFailed: _verification_failed,
    ActionCommitted: _action_committed,
    ActionFailed: _action_failed,
    CircuitOpened: _circuit_opened,
    FallbackInvoked: _fallback_invoked,
    ContextCompacted: _context_compacted,
    AgentCompleted: _agent_completed,
    AgentHalted: _agent_halted,
}
"""What each event type does to the state, found by the event's exact type (a chain of
``isinstance`` checks cost more than the rest of an `apply`)."""


def _handler(event: AgentEvent) -> _Handler:
    found = _HANDLERS.get(type(event))
    if found is not None:
        return found
    for kind, handler in _HANDLERS.items():  # a subclass of an event model
        if isinstance(event, kind):
            return handler
    raise TypeError(f"not an event: {type(event).__name__}")


def _advance(new: _State, old: _State, item: AgentEvent | RecordedEvent) -> None:
    """Write the field values after ``item`` into ``new``; ``old`` holds those before it.

    ``new`` may be ``old`` itself: every rule reads a field of ``old`` before it writes that
    field, and replaces containers instead of changing them, except ``identical_failures``
    (one entry per call that failed, up to `IDENTICAL_FAILURES_KEPT`), which `fold` copies
    once and the rules then change in place when ``new`` is ``old``.
    """
    new["events"] += 1
    if isinstance(item, RecordedEvent):
        event = item.event
        new["last_seq"] = item.seq
        new["last_ts"] = item.ts
        if event.type == "session_started":
            new["session_id"] = item.session_id
    else:
        event = item
        new["last_seq"] += 1
    _handler(event)(new, old, event)


def apply(state: SessionState, item: AgentEvent | RecordedEvent) -> SessionState:
    """Return the state after one more event; ``state`` is left unchanged.

    ``item`` may be a bare event or a `RecordedEvent`; only the latter moves ``last_seq``
    and the timestamps.
    """
    old = state.__dict__
    new = old.copy()
    _advance(new, old, item)
    return _build(new)


def fold(
    events: Iterable[AgentEvent | RecordedEvent], state: SessionState | None = None
) -> SessionState:
    """Fold events into a `SessionState`, from scratch or on top of ``state``.

    The same as `apply` event by event (``state`` is left unchanged); only the last state
    is built as a model. One event (an append's) is `apply`: it copies only the containers
    that event changes, where a longer fold copies ``identical_failures`` once up front.
    """
    current = state if state is not None else SessionState()
    if type(events) is list and len(events) == 1:
        return apply(current, events[0])
    values: _State | None = None
    for item in events:
        if values is None:
            values = current.__dict__.copy()
            values["identical_failures"] = dict(values["identical_failures"])  # see _advance
        _advance(values, values, item)
    return current if values is None else _build(values)
