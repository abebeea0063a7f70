"""The Verify phase: a pure decision per proposed call, in a fixed order.

1. ``unknown_tool``: the tool does not exist;
2. ``schema``: the arguments are not a JSON object or do not fit the tool's schema;
3. ``guard``: the tool's own pure check over (args, state) refuses;
4. guardrails: ``step_limit`` (tool calls per turn), ``repeat`` (the same tool + canonical
   args already committed ``max_repeats`` times this turn), ``storm`` (a duplicate of an earlier
   call within the last ``storm_window`` calls of the same response);
5. ``circuit_open``: the tool's breaker is open.

The function reads the session state (the fold) plus what the current response already
planned; it never mutates anything, never calls a tool, and never reads the clock.
Consecutive failures and identical failures (one call failing the same way
``max_identical_failures`` times, counted across turns) are not per-call stages: the loop
halts when the fold's count reaches the limit after a failure.

A reply without calls is decided by `verify_reply`: an empty one (no text, no calls) is
rejected with stage ``empty_reply`` and the model is asked again, ``empty_reply_retries``
times per turn, then the session halts (rule ``empty_reply``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from journal import SessionState, ToolCall, VerificationStage, call_key, describe_error

from .tools import ArgsInvalid, Tool

__all__ = [
    "EMPTY_REPLY",
    "Accepted",
    "Decision",
    "Plan",
    "Rejected",
    "guard_error_message",
    "verify_call",
    "verify_reply",
]


@dataclass(frozen=True)
class Accepted:
    """The call may run: ``fn_args`` for the tool, ``args`` as recorded."""

    call: ToolCall
    tool: Tool
    fn_args: Any
    args: dict[str, Any]
    key: str = field(init=False, compare=False)
    """The repeat key: tool + canonical args hash (every accepted call is checked by it:
    made with the decision, where a cached property took a lock per call)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", call_key(self.tool.name, self.args))


@dataclass(frozen=True)
class Rejected:
    """The call may not run.

    ``halt`` names the rule that ends the session after this rejection (None: the model
    is told and may try again). ``suppress`` marks a first storm: the call is dropped
    with a reflection message instead of a rejection. ``fallback`` is the tool to route to
    when the breaker is open and one is configured.
    """

    call: ToolCall
    stage: VerificationStage
    message: str
    halt: str | None = None
    suppress: bool = False
    fallback: Tool | None = None


Decision = Accepted | Rejected


@dataclass
class Plan:
    """What the current response has already planned, on top of the folded state."""

    steps: int = 0
    keys: Counter[str] = field(default_factory=Counter)
    recent: list[str] = field(default_factory=list)
    storms_before: int = 0

    def add(self, accepted: Accepted, window: int) -> None:
        """Count an accepted call (it will run before the state sees it)."""
        self.steps += 1
        self.keys[accepted.key] += 1
        self.recent = [*self.recent, accepted.key][-window:]

    def flushed(self) -> None:
        """The planned calls ran and are in the state now; keep only the storm window."""
        self.steps = 0
        self.keys = Counter()


def _check_args(call: ToolCall, tool: Tool, state: SessionState) -> Decision:
    if isinstance(call.args, str):
        return Rejected(
            call,
            "schema",
            f"the arguments of {tool.name} are not valid JSON; send one complete JSON object "
            f"matching its schema: {_schema_hint(tool)}",
            halt=_retries_exhausted(state),
        )
    try:
        fn_args, recorded = tool.validate(dict(call.args))
    except ArgsInvalid as e:
        return Rejected(
            call,
            "schema",
            f"invalid arguments for {tool.name}: {e}. Fix them to match: {_schema_hint(tool)}",
            halt=_retries_exhausted(state),
        )
    if tool.guard is not None:
        refusal = tool.guard(fn_args, state)
        if refusal is not None:
            return Rejected(call, "guard", refusal)
    return Accepted(call, tool, fn_args, recorded)


def _schema_hint(tool: Tool) -> str:
    properties = tool.parameters.get("properties", {})
    required = set(tool.parameters.get("required", []))
    parts = [
        f"{name}{'' if name in required else '?'}: {spec.get('type', 'any')}"
        for name, spec in properties.items()
        if isinstance(spec, dict)
    ]
    return "{" + ", ".join(parts) + "}"


def _retries_exhausted(state: SessionState) -> str | None:
    return "repair_retries" if state.schema_retries >= state.guardrails.repair_retries else None


def verify_call(
    call: ToolCall,
    *,
    tools: dict[str, Tool],
    state: SessionState,
    plan: Plan,
    reroute: bool = True,
) -> Decision:
    """Decide whether ``call`` may run, given the state and what this response planned.

    ``reroute=False`` decides a call that is itself a fallback: when its breaker is open
    too it halts rather than routing on (fallbacks do not chain, so they cannot loop).

    Raises whatever a tool's guard raises: a guard is agent code, and an exception in it
    fails the session (the loop records it as ``agent_halted`` with rule ``error``).
    """
    tool = tools.get(call.tool)
    if tool is None:
        known = ", ".join(sorted(tools)) or "none"
        return Rejected(
            call, "unknown_tool", f"there is no tool named {call.tool!r}; the tools are: {known}"
        )
    decision = _check_args(call, tool, state)
    if isinstance(decision, Rejected):
        return decision
    rails = state.guardrails
    if state.turn_steps + plan.steps >= rails.max_steps:
        return Rejected(
            call,
            "step_limit",
            f"the limit of {rails.max_steps} tool calls per turn is reached; "
            "answer with what you have",
            halt="step_limit",
        )
    key = decision.key
    if state.repeats.get(key, 0) + plan.keys[key] >= rails.max_repeats:
        return Rejected(
            call,
            "repeat",
            f"{tool.name} was already called {rails.max_repeats} times with these exact "
            "arguments this turn; the result will not change",
            halt="repeat",
        )
    if key in plan.recent[-(rails.storm_window - 1) :]:
        first = plan.storms_before == 0
        return Rejected(
            call,
            "storm",
            f"duplicate call: {tool.name} with these arguments is already in this response. "
            + (
                "It was suppressed; use the earlier result and send each call once."
                if first
                else "A second storm in this turn ends the session."
            ),
            halt=None if first else "storm",
            suppress=first,
        )
    if tool.name in state.open_breakers:
        fallback = tools.get(tool.fallback) if tool.fallback and reroute else None
        return Rejected(
            call,
            "circuit_open",
            f"{tool.name} is unavailable (its circuit breaker is open after repeated failures)"
            + (f"; routed to {fallback.name}" if fallback else ""),
            halt=None if fallback else "circuit_open",
            fallback=fallback,
        )
    return decision


EMPTY_REPLY = ToolCall(call_id="", tool="")
"""What a `Rejected` of stage ``empty_reply`` names as its call: there is none."""


def verify_reply(text: str | None, state: SessionState) -> Rejected | None:
    """Decide a reply without calls: None takes it as the turn's answer.

    An empty reply (no text, or only whitespace) is rejected while the turn has
    ``empty_reply_retries`` left (the model is told what to change and asked again), and
    halts the session (rule ``empty_reply``) after that. With ``empty_reply_retries`` None
    every reply is an answer, as in sessions recorded before the setting existed.
    """
    retries = state.guardrails.empty_reply_retries
    if retries is None or (text is not None and text.strip()):
        return None
    if state.empty_replies >= retries:
        return Rejected(
            EMPTY_REPLY,
            "empty_reply",
            f"the model replied with nothing (no text, no tool call) {state.empty_replies + 1} "
            f"times this turn (retries allowed: {retries})",
            halt="empty_reply",
        )
    return Rejected(
        EMPTY_REPLY,
        "empty_reply",
        "your reply was empty: no text and no tool call. Answer the user in text, or call "
        "one of the tools",
    )


def guard_error_message(tool: Tool, error: BaseException) -> str:
    """The halt reason when a tool's guard raised instead of returning."""
    return f"the guard of {tool.name} raised {describe_error(error)}"
