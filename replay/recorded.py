"""Recorded stand-ins for the loop's ports: the model, the tools and the clock.

* `RecordedLLM` serves the recorded ``action_proposed`` outputs in order; asking for one
  more than was recorded raises `RecordingExhausted` (a divergence, never a hang). A model
  call that failed in the recording (``agent_halted`` rule ``error``, "the model call
  failed: ...") fails again at the same seq with the same message.
* `RecordedTools` serves recorded tool outcomes, paired by position *and* by tool +
  canonical arguments, never by call id alone: real transcripts reuse ids and models
  reorder calls. A call the recording never ran is reported, and answered with a failure
  that makes the divergence visible. Tools named live run for real, and a live result
  that differs from the recorded one is reported.
* `RecordedClock` returns the recorded timestamp of the seq being written.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from agentloop import LiveToolExecutor, ModelRequest, ModelResponse, Tool, ToolError, ToolOutcome
from journal import (
    ActionCommitted,
    ActionFailed,
    ActionProposed,
    AgentHalted,
    JournalError,
    RecordedEvent,
    SessionState,
    ToolCall,
    call_key,
    parse_ts,
)

from ._verdict import Exhaustion, LiveDifference, UnrecordedCall

__all__ = [
    "RecordedClock",
    "RecordedLLM",
    "RecordedOutcome",
    "RecordedTools",
    "RecordingExhausted",
    "args_as_recorded",
    "response_of",
]


class RecordingExhausted(JournalError):
    """The code asked the model for more than the recording holds (at ``seq``)."""

    def __init__(self, message: str, seq: int | None = None) -> None:
        super().__init__(message)
        self.seq = seq


MODEL_FAILED = "the model call failed: "
"""How the loop's halt reason begins when the model port raised."""


class RecordedModelFailure(ToolError):
    """A model call that failed in the recording, raised again with the recorded message.

    A `ToolError` so that the loop reports its message as it is, which makes the halt
    identical to the recorded one.
    """


class RecordedLLM:
    """Serves recorded model outputs in order.

    ``exhaustion`` says where the code first asked for more than was recorded (None while
    it has not), for the verdict.
    """

    def __init__(self, proposals: Sequence[RecordedEvent]) -> None:
        self._proposals = [p for p in proposals if isinstance(p.event, ActionProposed)]
        self._failures = {
            p.seq: p.event.reason.removeprefix(MODEL_FAILED)
            for p in proposals
            if isinstance(p.event, AgentHalted)
            and p.event.rule == "error"
            and p.event.reason.startswith(MODEL_FAILED)
        }
        self._next = 0
        self.exhaustion: Exhaustion | None = None

    @property
    def served(self) -> int:
        """How many recorded outputs were served."""
        return self._next

    @property
    def exhausted(self) -> bool:
        """True when every recorded output was served."""
        return self._next >= len(self._proposals)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """The next recorded output; see `agentloop.LLMProvider`."""
        return self.next_response(request.seq)

    def next_response(self, seq: int) -> ModelResponse:
        """The next recorded output, asked for by the event that will take ``seq``.

        Raises:
            RecordingExhausted: every recorded output was served (names the seq).
        """
        failed = self._failures.get(seq)
        if failed is not None and self.exhausted:
            raise RecordedModelFailure(failed)
        if self._next >= len(self._proposals):
            reason = (
                f"recording exhausted at seq {seq}: the code asked for model output "
                f"#{self._next + 1}, the recording has {len(self._proposals)}"
            )
            if self.exhaustion is None:
                self.exhaustion = Exhaustion(seq, reason)
            raise RecordingExhausted(reason, seq)
        recorded = self._proposals[self._next]
        self._next += 1
        event = recorded.event
        assert isinstance(event, ActionProposed)
        return response_of(event)


def response_of(event: ActionProposed) -> ModelResponse:
    """The model output a recorded ``action_proposed`` holds."""
    return ModelResponse(
        calls=list(event.calls),
        text=event.text,
        reasoning=event.reasoning,
        model=event.model,
        usage=event.usage,
        latency_ms=event.latency_ms,
        cost=event.cost,
    )


@dataclass
class RecordedOutcome:
    """One recorded tool outcome: its seq, its tool + args key, and whether it was served."""

    seq: int
    key: str
    event: ActionCommitted | ActionFailed
    used: bool = False

    def outcome(self) -> ToolOutcome:
        """The recorded outcome as the tool port reports it."""
        event = self.event
        if isinstance(event, ActionCommitted):
            return ToolOutcome(ok=True, result=event.result, duration_ms=event.duration_ms)
        return ToolOutcome(
            ok=False,
            kind=event.kind,
            message=event.message,
            duration_ms=event.duration_ms,
            abandoned=event.abandoned,
        )


def args_as_recorded(args: Any) -> Any:
    """A tool's validated arguments as the journal records them (a model becomes JSON)."""
    return args.model_dump(mode="json") if hasattr(args, "model_dump") else args


@dataclass
class RecordedTools:
    """Serves recorded tool outcomes; see the module docstring for the pairing rule.

    Args:
        events: the recorded session.
        live: tool names to run for real instead (``True`` for every tool).
    """

    events: Sequence[RecordedEvent]
    live: bool | frozenset[str] = False
    unrecorded: list[UnrecordedCall] = field(default_factory=list)
    live_differences: list[LiveDifference] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._outcomes = [
            RecordedOutcome(item.seq, call_key(item.event.tool, item.event.args), item.event)
            for item in self.events
            if isinstance(item.event, (ActionCommitted, ActionFailed))
        ]
        self._position = 0
        self._live = LiveToolExecutor()

    def is_live(self, tool: str) -> bool:
        """True when ``tool`` runs for real in this replay."""
        return self.live is True or (isinstance(self.live, frozenset) and tool in self.live)

    def take(self, tool: str, args: Any) -> RecordedOutcome | None:
        """Take the first unused recorded outcome of ``tool`` with ``args`` (None: never ran).

        The search starts at the current position, so calls in recorded order pair up by
        position, and a reordered call finds its own outcome further on.
        """
        key = call_key(tool, args)
        while self._position < len(self._outcomes) and self._outcomes[self._position].used:
            self._position += 1
        for outcome in self._outcomes[self._position :]:
            if not outcome.used and outcome.key == key:
                outcome.used = True
                return outcome
        return None

    async def execute(
        self, tool: Tool, call: ToolCall, args: Any, state: SessionState, timeout_s: float
    ) -> ToolOutcome:
        """Serve (or, for live tools, run and compare) one call; see `agentloop.ToolExecutor`."""
        recorded_args = args_as_recorded(args)
        recorded = self.take(tool.name, recorded_args)
        if self.is_live(tool.name):
            outcome = await self._live.execute(tool, call, args, state, timeout_s)
            if recorded is not None:
                self.compare_live(tool.name, recorded_args, recorded, outcome)
            return outcome
        if recorded is None:
            self.unrecorded.append(UnrecordedCall(tool.name, recorded_args))
            return ToolOutcome(
                ok=False,
                kind="infrastructure",
                message=f"replay: the recording never ran {tool.name} with these arguments",
            )
        return recorded.outcome()

    def compare_live(
        self, tool: str, args: dict[str, Any], recorded: RecordedOutcome, live: ToolOutcome
    ) -> None:
        """Note a live outcome that differs from the recorded one in `live_differences`."""
        event = recorded.event
        was = event.result if isinstance(event, ActionCommitted) else {"error": event.message}
        now = live.result if live.ok else {"error": live.message}
        if was != now:
            self.live_differences.append(LiveDifference(tool, args, was, now, recorded.seq))


class RecordedClock:
    """The recorded time of each seq (after the recording's end: its last time)."""

    def __init__(self, events: Iterable[RecordedEvent]) -> None:
        self._times = [parse_ts(item.ts) for item in events]

    def __call__(self, seq: int) -> datetime:
        """The time event ``seq`` was recorded at."""
        if not self._times:
            raise RecordingExhausted("the recording has no events")
        return self._times[min(seq, len(self._times) - 1)]
