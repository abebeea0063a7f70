"""Recorded stand-ins for the loop's ports: the model, the tools and the clock.

* `RecordedLLM` serves the ``action_proposed`` recorded at the seq being asked for, and
  only while the replay still matches the recording: past a divergence, or past the
  recording's end, nothing recorded is served (a live model answers, or the replay stops
  with a halt that says why; never a hang). A model call that failed in the recording
  (``agent_halted`` rule ``error``) fails again at the same seq with the same message.
* `RecordedTools` serves recorded tool outcomes, paired by position *and* by tool +
  canonical arguments, never by call id alone: real transcripts reuse ids and models
  reorder calls. A call the recording never ran is reported, and answered with a failure
  that makes the divergence visible. Tools named live run for real, and a live result
  that differs from the recorded one is reported.
* `RecordedClock` returns the recorded timestamp of the seq being written.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic_core import to_jsonable_python

from agentloop import (
    LiveToolExecutor,
    LLMProvider,
    ModelRequest,
    ModelResponse,
    Tool,
    ToolError,
    ToolOutcome,
)
from capture import REPLAY_STOPPED
from journal import (
    ActionCommitted,
    ActionFailed,
    ActionProposed,
    AgentHalted,
    HaltSession,
    JournalError,
    ModelCallFailed,
    RecordedEvent,
    ReplayedFailure,
    SessionState,
    ToolCall,
    call_key,
    parse_ts,
    sets_ordered,
)

from ._follow import RecordingFollower
from ._verdict import Exhaustion, LiveDifference, UnrecordedCall

__all__ = [
    "OffTheRecord",
    "RecordedCallFailure",
    "RecordedClock",
    "RecordedLLM",
    "RecordedOutcome",
    "RecordedTools",
    "RecordingExhausted",
    "ReplayDiverged",
    "args_as_recorded",
    "recorded_error",
]


class OffTheRecord(JournalError):
    """No recorded model output fits the request at ``seq``: nothing is served."""

    def __init__(self, message: str, seq: int) -> None:
        super().__init__(message)
        self.seq = seq


class RecordingExhausted(OffTheRecord):
    """The code asked the model for more than the recording holds (at ``seq``)."""


class ReplayDiverged(OffTheRecord):
    """The replay no longer follows the recording, so no recorded output fits its context."""


MODEL_FAILED = "the model call failed: "
"""How the loop's halt reason begins when the model port raised."""


class RecordedModelFailure(ToolError):
    """A model call that failed in the recording, raised again with the recorded message.

    A `ToolError` so that the loop reports its message as it is, which makes the halt
    identical to the recorded one.
    """


class RecordedCallFailure(JournalError):
    """The recording holds a failed call of the model at ``event``'s seq: raise it again.

    Raised by `RecordedLLM.next_response`; each replay path raises the recorded exception
    from the call as its code met it (`recorded_error`).
    """

    def __init__(self, event: ModelCallFailed, seq: int) -> None:
        super().__init__(f"the recorded model call at seq {seq} failed: {event.message}")
        self.event = event
        self.seq = seq


def recorded_error(event: ModelCallFailed) -> dict[str, Any]:
    """The exception record a failed call is raised again from.

    Its own, or, for a failure recorded without one, a `ReplayedFailure` of its message and
    kind (`capture.rebuilt` makes it).
    """
    if event.error is not None:
        return dict(event.error)
    return {
        "type": "journal.failures:ReplayedFailure",
        "mro": [],
        "args": [event.message],
        "attributes": {"message": event.message, "kind": event.kind},
        "message": event.message,
    }


def _model_failure(halt: AgentHalted) -> Exception:
    return RecordedModelFailure(halt.reason.removeprefix(MODEL_FAILED))


class RecordedLLM:
    """Serves the recorded model output of each seq, while the replay follows the recording.

    The output recorded at seq N answers the request for seq N, and only while everything
    the replay wrote before it matches the recording (``follower``): a recorded reply is
    never paired with a context it was not recorded for. Where the recording holds the
    run's crash (a halt with rule ``error``), the request fails again with the recorded
    message (``failure`` builds the exception the loop turns into that halt).

    Off the record (the replay diverged, or asks past the recording's end) the ``live_model``
    model answers when there is one (`went_live_at` says from where); without one, the
    request raises `journal.HaltSession` with rule `REPLAY_STOPPED`, so a saved replay
    ends there with a halt that says why. ``exhaustion`` records a request past the end
    of the recording, for the verdict.

    Args:
        recorded: the recorded session.
        follower: tells whether the replay still matches the recording (None: always).
        live_model: the model that answers off the record, if any.
        failure: builds the exception raised where the recording holds a crash (from its
            halt); None when the crash did not come out of this call (the request then
            goes on as one the recording has no output for).
    """

    def __init__(
        self,
        recorded: Sequence[RecordedEvent],
        *,
        follower: RecordingFollower | None = None,
        live_model: LLMProvider | None = None,
        failure: Callable[[AgentHalted], BaseException | None] = _model_failure,
    ) -> None:
        self._recorded = list(recorded)
        self._proposals = sum(isinstance(item.event, ActionProposed) for item in recorded)
        self.follower = follower
        self.live_model = live_model
        self._failure = failure
        self.served = 0
        """How many recorded outputs were served."""
        self.failures_raised = 0
        """How many recorded failed calls were raised again."""
        self.exhaustion: Exhaustion | None = None
        self.went_live_at: int | None = None
        """The seq of the first request the live model answered."""
        self.stopped_at: int | None = None
        """The seq of the request no recorded output fitted, with no live model."""

    @property
    def exhausted(self) -> bool:
        """True when every recorded output was served."""
        return self.served >= self._proposals

    def next_response(self, seq: int) -> ModelResponse:
        """The recorded output for the request that will take ``seq``.

        Raises:
            ReplayDiverged: the replay no longer follows the recording.
            RecordingExhausted: the recording has nothing at or after ``seq``.
            OffTheRecord: the recording holds something else than a model output there.
            Exception: what ``failure`` builds, where the recording holds a crash.
        """
        follower = self.follower
        if follower is not None and not follower.fits():
            raise ReplayDiverged(
                f"the replay diverged from the recording at seq {follower.diverged_at}, "
                f"so no recorded model output fits seq {seq}",
                seq,
            )
        event = self._recorded[seq].event if seq < len(self._recorded) else None
        if isinstance(event, ActionProposed):
            self.served += 1
            return ModelResponse.of(event)
        if isinstance(event, ModelCallFailed):
            self.failures_raised += 1
            raise RecordedCallFailure(event, seq)
        if isinstance(event, AgentHalted) and event.rule == "error":
            failure = self._failure(event)
            if failure is not None:
                raise failure
        if self.served >= self._proposals:
            off: OffTheRecord = RecordingExhausted(
                f"recording exhausted at seq {seq}: the code asked for model output "
                f"#{self.served + 1}, the recording has {self._proposals}",
                seq,
            )
        else:
            assert event is not None  # (past the end, every recorded output was served)
            off = OffTheRecord(
                f"the code asked for model output at seq {seq}, where the recording has "
                f"{event.type}",
                seq,
            )
        if self.exhaustion is None:
            self.exhaustion = Exhaustion(seq, str(off))
        raise off

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """The recorded output, else the live model's; see `agentloop.LLMProvider`.

        Raises:
            HaltSession: off the record with no live model (rule `REPLAY_STOPPED`).
        """
        try:
            return self.next_response(request.seq)
        except RecordedCallFailure as failure:  # raised again as the loop recorded it
            event = failure.event
            again = ReplayedFailure(event.message, event.kind)
            again.status_code = event.status_code  # type: ignore[attr-defined]
            raise again from None
        except OffTheRecord as off:
            if self.live_model is None:
                raise self.stop(off) from off
            if self.went_live_at is None:
                self.went_live_at = request.seq
            return await self.live_model.complete(request)

    def stop(self, off: OffTheRecord) -> HaltSession:
        """The halt of a replay that found no recorded output at ``off.seq`` (and notes it)."""
        if self.stopped_at is None:
            self.stopped_at = off.seq
        return HaltSession(
            REPLAY_STOPPED,
            f"replay stopped at seq {off.seq}: {off}; no live model to go on with (--live-model)",
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
        live_tools: tool names to run for real instead (``True`` for every tool).
        follower: when given, every tool runs for real once the replay no longer follows
            the recording (a live model re-records from there, as the original ran).
        allow_side_effects: tools declared with side effects that may run for real (an
            agentloop tool's ``side_effects``); the others are always served.

    It counts, for the verdict, the outcomes it served and the calls that ran for real,
    by tool (`served`, `ran`): the paths that serve or run a call themselves (a captured
    entry, a hand-written loop) say so with `note_served` and `note_ran`.
    """

    events: Sequence[RecordedEvent]
    live_tools: bool | frozenset[str] = False
    follower: RecordingFollower | None = None
    allow_side_effects: frozenset[str] = frozenset()
    unrecorded: list[UnrecordedCall] = field(default_factory=list)
    live_differences: list[LiveDifference] = field(default_factory=list)
    served: dict[str, int] = field(default_factory=dict)
    """Recorded outcomes served, by tool: those tools' code did not run."""
    ran: dict[str, int] = field(default_factory=dict)
    """Calls that ran for real, by tool (named live, pure, or past a divergence)."""

    def __post_init__(self) -> None:
        self._outcomes = [
            RecordedOutcome(item.seq, call_key(item.event.tool, item.event.args), item.event)
            for item in self.events
            if isinstance(item.event, (ActionCommitted, ActionFailed))
        ]
        self._position = 0
        self._live = LiveToolExecutor()

    def is_live(self, tool: str, *, pure: bool = False, side_effects: bool = False) -> bool:
        """True when ``tool`` runs for real in this replay (now).

        Named live, every tool live, declared ``pure``, or past a divergence with a live
        model; a tool with ``side_effects`` only when also allowed.
        """
        if side_effects and tool not in self.allow_side_effects:
            return False
        live = self.live_tools
        if pure or live is True or (isinstance(live, frozenset) and tool in live):
            return True
        return self.follower is not None and not self.follower.fits()

    def note_served(self, tool: str) -> None:
        """Count a recorded outcome of ``tool`` served (its code did not run)."""
        self.served[tool] = self.served.get(tool, 0) + 1

    def note_ran(self, tool: str) -> None:
        """Count a call of ``tool`` that ran for real."""
        self.ran[tool] = self.ran.get(tool, 0) + 1

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

    def unserved(self) -> frozenset[int]:
        """The seqs of the recorded outcomes no call of the replay asked for (so far)."""
        return frozenset(outcome.seq for outcome in self._outcomes if not outcome.used)

    def times_ran(self, tool: str, args: Any) -> int:
        """How many outcomes of ``tool`` with ``args`` the recording holds, used or not."""
        key = call_key(tool, args)
        return sum(1 for outcome in self._outcomes if outcome.key == key)

    async def execute(
        self, tool: Tool, call: ToolCall, args: Any, state: SessionState, timeout_s: float
    ) -> ToolOutcome:
        """Serve (or, for live tools, run and compare) one call; see `agentloop.ToolExecutor`."""
        recorded_args = args_as_recorded(args)
        recorded = self.take(tool.name, recorded_args)
        if self.is_live(tool.name, pure=tool.pure, side_effects=tool.side_effects):
            self.note_ran(tool.name)
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
        self.note_served(tool.name)
        return recorded.outcome()

    def compare_live(
        self, tool: str, args: dict[str, Any], recorded: RecordedOutcome, live: ToolOutcome
    ) -> None:
        """Note a live outcome that differs from the recorded one in `live_differences`."""
        event = recorded.event
        was = event.result if isinstance(event, ActionCommitted) else {"error": event.message}
        # as the runtime journals a result (sets in a fixed order), and never unprintable
        now = (
            to_jsonable_python(sets_ordered(live.result), fallback=repr)
            if live.ok
            else {"error": live.message}
        )
        if was != now:
            self.live_differences.append(LiveDifference(tool, args, was, now, recorded.seq))


class RecordedClock:
    """The recorded time of each seq (after the recording's end: its last time)."""

    def __init__(self, events: Iterable[RecordedEvent]) -> None:
        self._times = [parse_ts(item.ts) for item in events]

    def __call__(self, seq: int) -> datetime:
        """The time event ``seq`` was recorded at."""
        if not self._times:
            raise RecordingExhausted("the recording has no events", seq)
        return self._times[min(seq, len(self._times) - 1)]
