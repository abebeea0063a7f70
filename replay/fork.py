"""Fork: copy a session's prefix into a new session and run on from there with current code.

The new session records ``forked_from`` and ``fork_seq`` in its ``session_started``; the
copied events keep their recorded timestamps. From the fork point on, the loop runs the
current code: while what it writes still matches the recording, it is served the recorded
model outputs and tool results; from the first difference on, the agent's own model and
real tools take over. The recorded user inputs after the fork point are fed turn by turn.
A fork point inside a proposal has the current code decide that proposal's calls not
answered before it (verify them and run them, recorded results served while the fork
matches): what the current code does with the recorded proposal.

A session captured from code this project cannot resume midway (an entry, a hand-written
loop, a pydantic-ai or Agents SDK agent: ``captured_with`` in its metadata) is forked by
running that code again from the start through its replay path and keeping the run as a
fork (`replay._run.ForkPoint`): up to the fork point it must write what the recording holds,
and past it the same rule applies (recorded outputs while it matches, then the live model).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from agentloop import Agent, AgentRuntime, counter_ids
from journal import (
    CAPTURED_WITH_KEY,
    InvalidInputError,
    Journal,
    RecordedEvent,
    SessionStarted,
    UserInput,
)

from ._captured import CapturedPath, captured_path, run_captured
from ._follow import RecordingFollower
from ._live import checked_live
from ._run import ForkPoint
from ._session import free_session_id, load_recording
from .agent_replay import agent_for, checked_side_effects, live_model_for
from .options import ReplayOptions
from .recorded import RecordedLLM, RecordedTools

__all__ = ["ForkResult", "fork"]


@dataclass(frozen=True)
class ForkResult:
    """The new session a fork wrote, and how far the recording carried it."""

    session_id: str
    forked_from: str
    fork_seq: int
    status: str
    last_seq: int
    recorded_until: int
    """The last seq at which the fork still matched the recording."""


def _copy_prefix(
    journal: Journal,
    fork_id: str,
    prefix: Sequence[RecordedEvent],
    started: SessionStarted,
    agent: Agent,
) -> None:
    head = started.model_copy(
        update={
            "forked_from": prefix[0].session_id,
            "fork_seq": prefix[-1].seq,
            "replay_of": None,
            "agent": agent.reference,
        }
    )
    journal.append(fork_id, [head], expected_seq=0, ts=prefix[0].ts)
    group: list[RecordedEvent] = []
    for item in prefix[1:]:
        if group and item.ts != group[0].ts:
            journal.append(
                fork_id, [g.event for g in group], expected_seq=group[0].seq, ts=group[0].ts
            )
            group = []
        group.append(item)
    if group:
        journal.append(fork_id, [g.event for g in group], expected_seq=group[0].seq, ts=group[0].ts)


def fork(
    journal: Journal,
    session_id: str,
    at_seq: int,
    options: ReplayOptions | None = None,
) -> ForkResult:
    """Fork ``session_id`` after event ``at_seq`` into a new session and run it on.

    ``options`` (`ReplayOptions`) say how: the recorded agent runs only when their trust
    list allows it, ``agent`` runs as given; ``rules`` say what counts as volatile when the
    fork is matched against the recording; ``live_model`` answers once the recording no
    longer fits (without options: the agent's own model, ``live_model=True``); with none,
    or an agent without a model, the fork stops there with a halt of rule
    ``replay_stopped``. Tools named in ``live_tools`` run for real from the fork point on
    (a fix inside a tool can be forked on); a captured session's tools declared with side
    effects run for real only when named in ``allow_side_effects``.

    Raises:
        SessionNotFoundError: no such session.
        InvalidInputError: ``at_seq`` is outside the session.
        AgentLoadError: no agent to run (none recorded and none given), or the live model
            named cannot be built.
        UntrustedReferenceError: the recorded agent is not trusted (and none was given).
        AgentLoopError: a captured session whose code now leaves the recording before the
            fork point (nothing is written), or a tool named live the agent does not have.
    """
    options = options or ReplayOptions(live_model=True)
    recorded, started = load_recording(journal, session_id)
    if not 0 <= at_seq < len(recorded):
        raise InvalidInputError(
            f"session {session_id}: cannot fork at seq {at_seq}; it has seqs 0..{len(recorded) - 1}"
        )
    path = captured_path(started.metadata.get(CAPTURED_WITH_KEY))
    if path is not None and not isinstance(options.agent, Agent):
        return _fork_captured(path, journal, session_id, started, ForkPoint(at_seq), options)
    built = agent_for(started, session_id, options)
    live_model = options.live_model
    live = None if live_model is True and built.llm is None else live_model_for(live_model, built)
    named = checked_live(options.live_tools, (tool.name for tool in built.tools))
    checked_side_effects(built, options)
    fork_id = free_session_id(journal, session_id, "fork")
    prefix = recorded[: at_seq + 1]
    _copy_prefix(journal, fork_id, prefix, started, built)
    follower = RecordingFollower(journal, fork_id, recorded, options.rules, checked=at_seq)
    after = recorded[at_seq + 1 :]
    runtime = AgentRuntime(
        built,
        journal,
        llm=RecordedLLM(recorded, follower=follower, live_model=live),
        tools=RecordedTools(
            after, named, follower=follower, allow_side_effects=options.allow_side_effects
        ),
        ids=counter_ids(fork_id),
    )
    inputs = [item.event.text for item in after if isinstance(item.event, UserInput)]

    async def run_on() -> None:
        result = await runtime.continue_turn(fork_id, decide_pending=True)
        for text in inputs:
            if result.status in ("halted", "failed"):
                return
            result = await runtime.run_turn(fork_id, text)

    asyncio.run(run_on())
    follower.fits()
    state = journal.state(fork_id)
    return ForkResult(
        session_id=fork_id,
        forked_from=session_id,
        fork_seq=at_seq,
        status=state.status,
        last_seq=state.last_seq,
        recorded_until=follower.checked,
    )


def _fork_captured(
    path: CapturedPath,
    journal: Journal,
    session_id: str,
    started: SessionStarted,
    point: ForkPoint,
    options: ReplayOptions,
) -> ForkResult:
    """Fork a captured session by re-running its code and keeping the run as a fork."""
    where = f"session {session_id}"
    result = run_captured(path, journal, session_id, started, options, where=where, save=point)
    state = journal.state(result.replay_session_id)
    divergence = result.behaviour_divergence
    return ForkResult(
        session_id=result.replay_session_id,
        forked_from=session_id,
        fork_seq=point.seq,
        status=state.status,
        last_seq=state.last_seq,
        recorded_until=state.last_seq if divergence is None else divergence.seq - 1,
    )
