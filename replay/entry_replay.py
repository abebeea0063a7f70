"""Replay of code captured around an entry function: the user's own loop, unchanged.

A session captured by `capture.Capture` names its entry (``module:qualname``) and
keeps the entry's arguments. A replay calls that function again with those arguments,
inside `capture.replaying`: the wrapped model client and the decorated tools
journal into a scratch session as they did in production, and an `EntryPlayer` decides
their outcomes:

* **a model request** is compared with the request recorded at the same seq (its digest:
  the messages, tools, model and parameters); the recorded response is served only when
  they match and everything written before matches the recording. Otherwise, with a live
  model (``live_model``: the client's real call) the code goes on live; without one the
  replay stops (``agent_halted``, rule ``replay_stopped``, naming what differed).
* **a tool call** gets its recorded outcome, paired by position and tool + canonical
  arguments: the value is returned (as the tool's declared return type when it validates),
  a recorded exception is raised again as its own type (`capture.rebuilt`). A
  call the recording never ran stops the replay. Tools named live run for real; a tool
  declared with side effects runs for real only when also allowed by name, and past a
  divergence with a live model every other tool runs for real.

No server, no API key: nothing leaves the process unless a tool or the model is live.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from agentloop import AgentLoadError, AgentLoopError
from capture import (
    MODEL_CALL,
    REPLAY_STOPPED,
    FailedCall,
    Player,
    RecordedOrder,
    ReplayTarget,
    ToolPlay,
    full_requests,
    is_method,
    mcp_tool_names,
    raised_by_model_call,
    rebuilt,
    replaying,
)
from journal import (
    ENTRY_INPUTS_KEY,
    ActionCommitted,
    ActionFailed,
    ActionProposed,
    AgentHalted,
    HaltSession,
    Journal,
    ModelCallFailed,
    RecordedEvent,
    SessionStarted,
    canonical_bytes,
    loads_strict,
    predates,
)

from ._captured import CapturedRun
from ._follow import RecordingFollower
from ._live import checked_live
from ._run import Drive, Driver, ForkPoint, completed, replay_session, run_code
from ._verdict import ReplayResult, UnrecordedCall
from .diff import field_changes
from .options import ReplayOptions
from .recorded import (
    RecordedCallFailure,
    RecordedClock,
    RecordedLLM,
    RecordedModelFailure,
    RecordedTools,
    recorded_error,
)

__all__ = ["CAPTURED_WITH", "EntryPlayer", "replay_captured", "replay_entry"]

CAPTURED_WITH = "entry"
"""The ``captured_with`` of sessions captured around an entry function."""


def _entry_inputs(text: object, session_id: str) -> dict[str, Any]:
    """The entry's recorded arguments: ``{"args": [...], "kwargs": {...}}``, keys in order."""
    try:
        inputs = loads_strict(text) if isinstance(text, str) else None
    except ValueError:
        inputs = None
    if not isinstance(inputs, dict):
        raise AgentLoadError(
            f"session {session_id} keeps no entry_inputs: it was not captured by "
            "capture.Capture.entry"
        )
    return inputs


def _request_changes(recorded: dict[str, Any], asked: dict[str, Any]) -> str:
    """The first differences between a recorded request and the one asked now."""
    changes = field_changes(recorded, asked)
    shown = []
    for change in changes[:3]:
        before, after = change.shown(60)
        shown.append(f"{change.path}: {before} -> {after}")
    return "; ".join(shown) or "the same fields, other values"


class EntryPlayer(Player):
    """The outcomes of a replayed entry's calls: recorded, or live where allowed.

    Args:
        recorded: the recorded session.
        follower: whether the replay still matches the recording.
        options: the tools to run for real (``live_tools``), those with side effects that
            may (``allow_side_effects``), and whether the client's real model answers where
            no recorded response fits (``live_model``).
    """

    def __init__(
        self,
        recorded: Sequence[RecordedEvent],
        follower: RecordingFollower,
        options: ReplayOptions,
    ) -> None:
        self.follower = follower
        self.options = options
        self.live_model = bool(options.live_model)
        self.llm = RecordedLLM(recorded, follower=follower)
        self.tools = RecordedTools(recorded, follower=follower if self.live_model else None)
        self._recorded = recorded
        self._unfinished = _unfinished_calls(recorded)
        self.predates_failed_calls = bool(recorded) and predates(recorded[0].v, "model_call_failed")
        """A recording before failed calls were journaled: one that ended the session is
        raised again from its halt (`_raise_again`)."""
        asked = [
            (item.seq, item.event.request)
            for item in recorded
            if isinstance(item.event, ActionProposed | ModelCallFailed)
            and item.event.request is not None
        ]
        wholes = full_requests(request for _, request in asked)
        self._requests = {seq: whole for (seq, _), whole in zip(asked, wholes, strict=True)}
        """Each recorded request in full, by the seq of its response."""
        self._taken: set[int] = set()
        self._raised: set[int] = set()
        """The seqs where a model call raised the recorded exception again (`_raise_again`)."""
        """The responses `recorded_at` gave to a call."""

    def recorded_at(self, seq: int, request: dict[str, Any], whole: dict[str, Any]) -> int:
        """The seq whose recorded response answers a request asked when ``seq`` is next.

        ``seq`` itself, unless concurrent calls (``asyncio.gather`` of model calls) were
        answered in another order than they were asked: then the first later response
        recorded for the same request and not taken by another call, which the capture
        waits for (`capture.clients.openai`), so the replay writes in the recorded order.
        """
        if not self.follower.fits():
            return seq
        asked = canonical_bytes(whole)
        for item in self._recorded[seq:]:
            event = item.event
            if (
                isinstance(event, ActionProposed | ModelCallFailed)
                and item.seq not in self._taken
                and event.request is not None
                and (
                    event.request.get("digest") == request.get("digest")
                    or canonical_bytes(self._requests.get(item.seq)) == asked
                )
            ):
                self._taken.add(item.seq)
                return item.seq
        return seq

    def model(self, seq: int, request: dict[str, Any], whole: dict[str, Any]) -> Any:
        """The recorded response when the request and the run so far match; see the module.

        A recorded failed call (``model_call_failed``) is served as a `FailedCall`: the
        capture raises it again from the call.
        """
        item = self._recorded[seq] if seq < len(self._recorded) else None
        event = item.event if item is not None else None
        recorded = self._requests.get(seq)
        if (
            isinstance(event, ActionProposed | ModelCallFailed)
            and event.request is not None
            and recorded is not None
            and event.request.get("digest") != request.get("digest")
            and canonical_bytes(recorded) != canonical_bytes(whole)
            and self.follower.fits()
        ):
            why = (
                f"the request at seq {seq} differs from the recorded one: "
                f"{_request_changes(recorded, whole)}"
            )
            return self._off_record(seq, why)
        try:
            self.llm.next_response(seq)
        except HaltSession:
            raise
        except RecordedCallFailure as failure:  # the recorded call raised: raise it again
            chunks = failure.event.response
            return FailedCall(
                recorded_error(failure.event), chunks if isinstance(chunks, list) else None
            )
        except RecordedModelFailure as crash:  # the recorded entry raised here instead
            if isinstance(event, AgentHalted) and self._raise_again(seq, event):
                assert event.error is not None
                raised = event.error.get("model_error") or event.error  # what the call raised
                assert isinstance(raised, dict)
                raise raised_by_model_call(rebuilt(raised)) from None
            why = f"the code asked for model output at seq {seq}, where the recorded entry raised"
            return self._off_record(seq, f"{why} {crash}")
        except Exception as off:  # off the record
            return self._off_record(seq, str(off))
        assert isinstance(event, ActionProposed)
        return event.response

    def _raise_again(self, seq: int, halt: AgentHalted) -> bool:
        """Whether the model call asking for seq ``seq`` raises again what ended the session.

        That is, the recorded model call raised it (``halt``), in a recording that predates
        failed-call events (a newer one holds the failure at the call's own seq); the first
        time only: code that catches it and asks again stops there instead (`_off_record`).
        """
        if (
            not self.predates_failed_calls
            or halt.error is None
            or halt.error.get("raised_by") != MODEL_CALL
            or seq in self._raised
        ):
            return False
        self._raised.add(seq)
        return True

    def _off_record(self, seq: int, why: str) -> Any:
        if self.live_model:
            if self.llm.went_live_at is None:
                self.llm.went_live_at = seq
            return None
        if self.llm.stopped_at is None:
            self.llm.stopped_at = seq
        raise HaltSession(
            REPLAY_STOPPED,
            f"replay stopped at seq {seq}: {why}; no live model to go on with (--live-model)",
        )

    def nested(self, tool: str | None, outer: str, *, side_effects: bool = False) -> None:
        """Let a call made by a tool that runs for real run too.

        Not a tool with side effects that were not allowed, nor the model without a live
        model: the replay stops there.
        """
        if tool is None and not self.live_model:
            raise HaltSession(
                REPLAY_STOPPED,
                f"replay stopped: {outer} runs for real and calls the model, which a replay "
                "serves only to the entry itself (--live-model lets it call the model)",
            )
        if tool is not None and side_effects and tool not in self.options.allow_side_effects:
            raise HaltSession(
                REPLAY_STOPPED,
                f"replay stopped: {outer} runs for real and calls {tool}, which has side "
                f"effects (--allow-side-effects {tool} lets it run for real)",
            )

    def tool(
        self, tool: str, args: dict[str, Any], *, side_effects: bool, pure: bool = False
    ) -> ToolPlay:
        """The recorded outcome of a call, or a live run where allowed; see the module.

        A tool declared ``pure`` runs for real and is compared, as one named live is.
        """
        allowed = self.options.allow_side_effects
        named = tool in self.options.named_live
        every = (self.options.live_tools is True or pure) and not side_effects
        recorded = self.tools.take(tool, args)
        # with a live model, tools run for real off the record: a call the recording never
        # ran, or any call once what the replay wrote left the recording
        past = self.tools.follower is not None and (recorded is None or not self.follower.fits())
        if named or every or (past and (not side_effects or tool in allowed)):
            if side_effects and tool not in allowed:
                raise AgentLoopError(
                    f"tool {tool} has side effects: it runs for real in a replay only when "
                    f"allowed too (--allow-side-effects {tool})"
                )
            self.tools.note_ran(tool)
            return ToolPlay(live=True)
        if recorded is None:
            how = (
                f"it has side effects: --allow-side-effects {tool} lets it run for real"
                if side_effects
                else "--live-tool runs it for real"
            )
            ran = self.tools.times_ran(tool, args)
            never = (
                f"which the recording ran only {ran} time{'s' * (ran > 1)}, every outcome "
                "given already"
                if ran
                else "which the recording never ran"
            )
            call = UnrecordedCall(tool, dict(args))
            stop = HaltSession(
                REPLAY_STOPPED, f"replay stopped: the code called {call.text}, {never} ({how})"
            )
            if canonical_bytes([tool, args]) in self._unfinished:
                return ToolPlay(unfinished=stop)
            self.tools.unrecorded.append(call)
            raise stop
        event = recorded.event
        self.tools.note_served(tool)
        if isinstance(event, ActionCommitted):
            # untimed: no call of the tool was journaled, the result is the message's text
            return ToolPlay(result=event.given_result, as_sent=event.duration_ms is None)
        error = event.error or {
            "type": "capture.exceptions:ReplayedException",
            "mro": [],
            "args": [event.message],
            "attributes": {},
            "message": event.message,
        }
        return ToolPlay(error=error)


def _unfinished_calls(recorded: Sequence[RecordedEvent]) -> frozenset[bytes]:
    """The calls (tool and args) of the last proposal with no outcome when the session halted.

    They were still running when the entry failed: asyncio.gather's other calls, when one
    of them raised.
    """
    if not recorded or not isinstance(recorded[-1].event, AgentHalted):
        return frozenset()
    running: dict[str, bytes] = {}
    for item in recorded:
        event = item.event
        if isinstance(event, ActionProposed):
            running = {
                call.call_id: canonical_bytes([call.tool, call.args]) for call in event.calls
            }
        elif isinstance(event, ActionCommitted | ActionFailed):
            running.pop(event.call_id, None)
    return frozenset(running.values())


def _check_not_a_method(entry: Any) -> None:
    """Refuse a method: its instance was recorded as its repr, and cannot be rebuilt."""
    if is_method(entry):
        raise AgentLoadError(
            f"entry {entry.__module__}:{entry.__qualname__} is a method: a replay cannot "
            "rebuild the instance it ran on; capture a module-level function that builds it "
            "and calls the method"
        )


def check_tools(
    entry: Any, options: ReplayOptions, recorded: Callable[[], Iterable[RecordedEvent]] = tuple
) -> None:
    """Refuse bad tool names before anything runs.

    A tool named live or allowed must be one the entry's capture decorated, or an MCP tool
    the ``recorded`` session listed (`capture.clients.mcp_names`: its mode is declared
    where the code opens the MCP session, so the call itself checks it); a tool with side
    effects named live must be allowed too.
    """
    capture = getattr(entry, "__capture__", None)
    if capture is None:
        return
    known: dict[str, Any] = capture.tools
    allowed = options.allow_side_effects
    named = options.named_live | allowed
    listed = set(mcp_tool_names(recorded())) - set(known) if named - set(known) else set()
    checked_live(named, {*known, *listed})
    risky = sorted(
        name
        for name in options.named_live - listed
        if known[name].side_effects and name not in allowed
    )
    if risky:
        raise AgentLoopError(
            f"tool {risky[0]} has side effects: it runs for real in a replay only when "
            f"allowed too (--allow-side-effects {risky[0]})"
        )


def replay_entry(
    journal: Journal,
    session_id: str,
    entry: Any,
    options: ReplayOptions | None = None,
    *,
    save: bool | ForkPoint = False,
) -> ReplayResult:
    """Call a captured session's entry again with its recorded arguments, and compare.

    Args:
        journal: the journal holding the session.
        session_id: the captured session.
        entry: the entry function (decorated with `capture.Capture.entry`).
        options: how the replay runs (`ReplayOptions`): the tools run for real
            (``live_tools``; ``True``: every tool without side effects), the tools with
            side effects that may (``allow_side_effects``), whether the client's real
            model answers where no recorded response fits (``live_model``: ``"agent"`` or
            True), the comparison rules.
        save: keep the replay in ``journal``; a `ForkPoint` keeps it as a fork instead.

    Raises:
        AgentLoadError: ``entry`` is not callable, or the session keeps no arguments.
        AgentLoopError: a live model other than the client's own, or a tool name the
            entry's capture does not have.
    """
    options = options or ReplayOptions()
    if options.live_model not in (None, True, "agent"):
        raise AgentLoopError(
            "an entry session goes on live with the client it was captured with: --live-model agent"
        )
    if not callable(entry):
        raise AgentLoadError(f"{type(entry).__name__} is not an entry function")
    _check_not_a_method(entry)
    check_tools(entry, options, lambda: journal.events(session_id))

    def call(started: SessionStarted) -> object:
        inputs = _entry_inputs(started.metadata.get(ENTRY_INPUTS_KEY), session_id)
        return entry(*inputs.get("args", []), **inputs.get("kwargs", {}))

    return replay_session(
        journal,
        session_id,
        captured_driver(
            session_id, call, lambda recorded, follower: EntryPlayer(recorded, follower, options)
        ),
        save=save,
        live_model=bool(options.live_model),
        rules=options.rules,
    )


PlayerFactory = Callable[[Sequence[RecordedEvent], RecordingFollower], EntryPlayer]
"""Builds the player of a replay from the recording and its follower."""


def captured_driver(
    session_id: str, call: Callable[[SessionStarted], object], player_of: PlayerFactory
) -> Driver:
    """How a replay of captured code drives it: ``call`` inside `capture.replaying`.

    The code's wrapped model and tools journal into the replay's scratch session and are
    played by the player ``player_of`` builds; what ``call`` returns is run to its end (a
    coroutine awaited), and an exception it raises is the verdict's, never the replayer's.
    """

    def drive(
        scratch: Journal,
        replay_id: str,
        follower: RecordingFollower,
        recorded: Sequence[RecordedEvent],
        started: SessionStarted,
    ) -> Drive:
        player = player_of(recorded, follower)
        target = ReplayTarget(
            journal=scratch,
            session_id=replay_id,
            replay_of=session_id,
            clock=RecordedClock(recorded),
            player=player,
            order=RecordedOrder(recorded),
            model_failures=not player.predates_failed_calls,
        )

        def run() -> object:
            with replaying(target):
                return completed(call(started))

        error = run_code(run)  # the capture journaled it; the verdict reports it
        return Drive(
            llm=player.llm,
            tools=player.tools,
            error=error,
            agent=started.agent,
            uncalled=player.tools.unserved(),
        )

    return drive


def replay_captured(run: CapturedRun) -> ReplayResult:
    """How `replay.Replayer` replays entry sessions (`replay._captured.CapturedPath`)."""
    return replay_entry(run.journal, run.session_id, run.target, run.options, save=run.save)
