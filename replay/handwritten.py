"""Replay a hand-written loop that journals through `capture.Recorder`, with its recorded inputs.

A hand-written loop is replayable when its entry point takes its ports::

    def run(llm, tools, recorder, inputs) -> object: ...

* ``llm(...)``: the model. It returns the model's whole output (anything
  `Recorder.model_output` takes; the recorded model returns an ``agentloop.ModelResponse``).
* ``tools(name, args)``: runs one tool call and returns its result, raising on failure.
* ``recorder``: the `capture.Recorder` the loop journals through (it calls ``start``).
* ``inputs``: the user inputs to answer, in order.

``run`` may be a coroutine function. `replay_loop` calls it once with a `RecordedModel`
(the recorded outputs in order), a `RecordedToolPort` (the recorded results, paired by
position and tool + canonical arguments as in `replay.RecordedTools`; tools named live
run through your own port and are compared), a recorder writing a new session at the
recorded clock (``replay_of`` the original), and the recorded user inputs. What the loop
records now is compared with the recording by `replay.compare` under the same
normalisation rules, and the result is an ordinary `ReplayResult`.

Asking the model for more than was recorded raises `RecordingExhausted`, naming the seq;
the recorder records it as the loop's halt, so it shows as the divergence at that step.
Where the recording ends with the loop's crash (a halt with rule ``error``), the port the
loop calls at that seq from the call the crash came out of raises it again
(`replay._crashes`), so an unchanged loop crashes the same way and the replay is
identical, and a loop whose own line no longer raises goes on past it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

from pydantic_core import to_jsonable_python

from agentloop import AgentLoadError, AgentLoopError, ToolOutcome
from capture import RecordedOrder, Recorder, rebuilt
from journal import (
    ActionCommitted,
    Journal,
    RecordedEvent,
    ReplayedFailure,
    SessionStarted,
    UserInput,
    failure_of,
    predates,
)

from ._captured import CapturedRun
from ._crashes import RecordedCrashes
from ._follow import RecordingFollower
from ._run import Drive, ForkPoint, completed, replay_session, run_code
from ._verdict import ReplayResult, UnrecordedCall
from .options import ReplayOptions
from .recorded import (
    OffTheRecord,
    RecordedCallFailure,
    RecordedClock,
    RecordedLLM,
    RecordedOutcome,
    RecordedTools,
    recorded_error,
)

__all__ = [
    "CAPTURED_WITH",
    "LoopRun",
    "RecordedModel",
    "RecordedToolPort",
    "ToolPort",
    "replay_captured",
    "replay_loop",
]

CAPTURED_WITH = "recorder"
"""The ``captured_with`` metadata of sessions a hand-written loop journals with `Recorder`."""

ToolPort = Callable[[str, dict[str, Any]], Any]
"""A loop's tool dispatch: ``tools(name, args) -> result`` (raises on failure)."""

LoopRun = Callable[[Any, Any, Recorder, list[str]], object]
"""A replayable loop: ``run(llm, tools, recorder, inputs)``, plain or a coroutine function."""


class RecordedModel:
    """The model port of a replayed loop: the output recorded at each seq.

    Call it with anything (the request is not looked at); it returns the output recorded
    for the seq the loop's recorder writes next, as an ``agentloop.ModelResponse``, while
    the replay follows the recording (`replay.RecordedLLM`). Where the recorded loop
    crashed, out of this call, it raises the crash again (``crashes``, shared with the
    tool port: `replay._crashes`). Off the record,
    ``live`` (the loop's own model port, called with the same arguments) answers, or the
    replay stops with a `journal.HaltSession` the recorder records.
    """

    def __init__(
        self,
        recorded: Sequence[RecordedEvent],
        recorder: Recorder,
        *,
        follower: RecordingFollower | None = None,
        live: Callable[..., Any] | None = None,
        crashes: RecordedCrashes | None = None,
    ) -> None:
        crashes = crashes if crashes is not None else RecordedCrashes(recorded)
        self.llm = RecordedLLM(recorded, follower=follower, failure=crashes.raised_again)
        self._recorder = recorder
        self._live = live

    @property
    def exhausted(self) -> bool:
        """True when every recorded output was served."""
        return self.llm.exhausted

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """The recorded output for this point of the loop (or the live model's).

        Raises:
            HaltSession: no recorded output fits, and no live model (rule
                ``replay_stopped``).
            ReplayedFailure: the recorded loop crashed at this point.
        """
        seq = self._recorder.next_seq
        try:
            return self.llm.next_response(seq)
        except RecordedCallFailure as failure:  # the recorded call raised: so does this one
            raise rebuilt(recorded_error(failure.event)) from None
        except OffTheRecord as off:
            if self._live is None:
                raise self.llm.stop(off) from off
            if self.llm.went_live_at is None:
                self.llm.went_live_at = seq
            return self._live(*args, **kwargs)


class RecordedToolPort:
    """The tool port of a replayed loop: recorded outcomes, or live runs compared with them.

    A recorded result is returned; a recorded exception is raised again as its own type
    (`capture.rebuilt`), and a failure recorded without one as a
    `ReplayedFailure` with the recorded message and kind. A call the recording never ran is noted in
    ``tools.unrecorded`` and raised as an infrastructure failure.

    Args:
        recorded: the recorded session.
        recorder: the replay's recorder (for the seq being written).
        live_tools: ``True`` to run every tool for real, or the names of the tools to run
            live (`ReplayOptions.live_tools`).
        tool_port: the loop's own tool port, which runs the live tools.
        follower: when given, every tool runs live once the replay left the recording.
        crashes: the recording's crashes, shared with the model port (`replay._crashes`).
    """

    def __init__(
        self,
        recorded: Sequence[RecordedEvent],
        recorder: Recorder,
        *,
        live_tools: bool | Iterable[str] = False,
        tool_port: ToolPort | None = None,
        follower: RecordingFollower | None = None,
        crashes: RecordedCrashes | None = None,
    ) -> None:
        self.tools = RecordedTools(
            recorded,
            live_tools if isinstance(live_tools, bool) else frozenset(live_tools),
            follower=follower,
        )
        self._crashes = crashes if crashes is not None else RecordedCrashes(recorded)
        self._recorder = recorder
        self._tool_port = tool_port
        self._follower = follower

    def __call__(self, tool: str, args: Mapping[str, Any]) -> Any:
        """Serve (or, for a live tool, run and compare) one call of a plain loop."""
        if self.tools.is_live(tool) and self._tool_port is None:
            raise ValueError(f"{tool} is to run live, but replay_loop was given no tool_port")
        port = self._tool_port
        return self.run(tool, args, None if port is None else lambda: port(tool, dict(args)))

    def run(self, tool: str, args: Mapping[str, Any], live: Callable[[], Any] | None) -> Any:
        """Serve one call; a live tool runs through ``live()`` and is compared."""
        recorded = self.tools.take(tool, dict(args))
        if live is None or not self.tools.is_live(tool):
            return self._serve(tool, args, recorded)
        self.tools.note_ran(tool)
        try:
            result = live()
        except Exception as error:
            self._observe(tool, args, recorded, error=error)
            raise
        self._observe(tool, args, recorded, result=result)
        return result

    async def arun(
        self, tool: str, args: Mapping[str, Any], live: Callable[[], Awaitable[Any]] | None
    ) -> Any:
        """`run` for async frameworks: a live tool is awaited through ``live()``."""
        recorded = self.tools.take(tool, dict(args))
        if live is None or not self.tools.is_live(tool):
            return self._serve(tool, args, recorded)
        self.tools.note_ran(tool)
        try:
            result = await live()
        except Exception as error:
            self._observe(tool, args, recorded, error=error)
            raise
        self._observe(tool, args, recorded, result=result)
        return result

    def _serve(self, tool: str, args: Mapping[str, Any], recorded: RecordedOutcome | None) -> Any:
        if recorded is None:
            seq = self._recorder.next_seq
            on_record = self._follower is None or self._follower.fits()
            halt = self._crashes.at(seq) if on_record else None
            crash = None if halt is None else self._crashes.raised_again(halt)
            if crash is not None:
                raise crash
            self.tools.unrecorded.append(UnrecordedCall(tool, dict(args)))
            raise ReplayedFailure(
                f"replay: the recording never ran {tool} with these arguments", "infrastructure"
            )
        event = recorded.event
        self.tools.note_served(tool)
        if isinstance(event, ActionCommitted):
            return event.given_result
        if event.error is not None:
            raise rebuilt(event.error)  # the loop's except clauses see the original type
        raise ReplayedFailure(event.message, event.kind)

    def _observe(
        self,
        tool: str,
        args: Mapping[str, Any],
        recorded: RecordedOutcome | None,
        *,
        result: Any = None,
        error: Exception | None = None,
    ) -> None:
        if recorded is None:
            return
        if error is None:
            outcome = ToolOutcome(ok=True, result=to_jsonable_python(result, fallback=repr))
        else:
            kind, message = failure_of(error)
            outcome = ToolOutcome(ok=False, kind=kind, message=message)
        self.tools.compare_live(tool, dict(args), recorded, outcome)


def _drive(
    run: LoopRun, llm: RecordedModel, tools: RecordedToolPort, recorder: Recorder, inputs: list[str]
) -> str | None:
    """Run the loop inside its recorder; the text of an exception it raised (`run_code`)."""

    def loop() -> object:
        with recorder:
            return completed(run(llm, tools, recorder, inputs))

    return run_code(loop)


def replay_loop(
    journal: Journal,
    session_id: str,
    run: LoopRun,
    options: ReplayOptions | None = None,
    *,
    tool_port: ToolPort | None = None,
    model_port: Callable[..., Any] | None = None,
    save: bool | ForkPoint = False,
) -> ReplayResult:
    """Re-run a recorder-made session through ``run`` with its recorded inputs, and compare.

    Args:
        journal: the journal holding the session.
        session_id: the session to replay.
        run: the loop's entry point, ``run(llm, tools, recorder, inputs)``.
        options: how the replay runs (`ReplayOptions`): the tools to run for real
            (``live_tools``), through ``tool_port``; whether to go on live where no recorded
            output fits (``live_model``: True or ``"agent"``), with ``model_port`` (off the
            record every tool runs live, through ``tool_port``); the comparison rules.
        tool_port: the loop's own tool port, needed when ``options`` names tools live (and
            when it goes on live: off the record every tool runs live).
        model_port: the loop's own model port, answering where no recorded output fits
            when ``options.live_model`` says so; without one the replay stops there.
        save: keep the replay in ``journal`` (``replay_of`` the original); a `ForkPoint`
            keeps it as a fork instead (see `replay._run`).

    Raises:
        SessionNotFoundError: no such session.
        AgentLoopError: a live model other than the loop's own (``model_port``).
    """
    options = options or ReplayOptions()
    if options.live_model not in (None, True, "agent"):
        raise _needs_ports(session_id)
    live_model = model_port if options.live_model else None

    def drive(
        scratch: Journal,
        replay_id: str,
        follower: RecordingFollower,
        recorded: Sequence[RecordedEvent],
        started: SessionStarted,
    ) -> Drive:
        inputs = [item.event.text for item in recorded if isinstance(item.event, UserInput)]
        recorder = Recorder(
            scratch,
            replay_id,
            clock=RecordedClock(recorded),
            replay_of=session_id,
            order=RecordedOrder(recorded),
            model_failures=not predates(recorded[0].v, "model_call_failed"),
        )
        crashes = RecordedCrashes(recorded)
        llm = RecordedModel(recorded, recorder, follower=follower, live=live_model, crashes=crashes)
        tools = RecordedToolPort(
            recorded,
            recorder,
            live_tools=options.live_tools,
            tool_port=tool_port,
            follower=follower if live_model is not None else None,
            crashes=crashes,
        )
        error = _drive(run, llm, tools, recorder, inputs)
        return Drive(llm=llm.llm, tools=tools.tools, error=error, agent=started.agent)

    return replay_session(
        journal,
        session_id,
        drive,
        save=save,
        live_model=live_model is not None,
        rules=options.rules,
    )


def replay_captured(run: CapturedRun) -> ReplayResult:
    """Replay a session a hand-written loop journaled, through its ``run`` (the target).

    How `replay.Replayer` replays sessions whose ``captured_with`` is ``recorder``
    (`replay._captured.CapturedPath`). Its model and tools live need the loop's own ports,
    which only `replay_loop` takes: a replay or fork from here has no live model
    (``live_model`` True, "the agent's own if any", is none), so it stops where the
    recording no longer fits.

    Raises:
        AgentLoadError: the target is not callable.
        AgentLoopError: live tools or another live model were asked for (the loop's own
            ports are needed: call `replay_loop` with ``tool_port`` / ``model_port``).
    """
    if not callable(run.target):
        raise AgentLoadError(
            f"agent {run.reference}: {type(run.target).__name__} is not a loop's run function"
        )
    if run.options.live_tools:
        raise _needs_ports(run.session_id)
    return replay_loop(run.journal, run.session_id, run.target, run.options, save=run.save)


def _needs_ports(session_id: str) -> AgentLoopError:
    return AgentLoopError(
        f"session {session_id} is a hand-written loop: running its tools or its model "
        "live needs the loop's own ports; call replay.replay_loop(..., tool_port=..., "
        "model_port=...)"
    )
