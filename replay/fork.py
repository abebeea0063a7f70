"""Fork: copy a session's prefix into a new session and run on from there with current code.

The new session records ``forked_from`` and ``fork_seq`` in its ``session_started``; the
copied events keep their recorded timestamps. From the fork point on, the loop runs the
current code: while what it writes still matches the recording, it is served the recorded
model outputs and tool results; from the first difference on, the agent's own model and
real tools take over. The recorded user inputs after the fork point are fed turn by turn.
A fork point inside a proposal drops that proposal's unanswered calls: the loop observes
and proposes again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agentloop import (
    Agent,
    AgentRuntime,
    LiveToolExecutor,
    LLMProvider,
    ModelRequest,
    ModelResponse,
    Tool,
    ToolOutcome,
    TrustList,
    counter_ids,
)
from journal import (
    ActionProposed,
    InvalidInputError,
    Journal,
    RecordedEvent,
    SessionStarted,
    SessionState,
    ToolCall,
    UserInput,
)

from ._follow import RecordingFollower
from ._session import free_session_id, load_recording
from .agent_replay import agent_for
from .normalize import DEFAULT_RULES, NormalizationRules
from .recorded import RecordedTools, args_as_recorded, response_of

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


class _HybridModel:
    """The recorded output at the requested seq while the fork fits, else the agent's own.

    The recorded output is served only where the recording has one at that very seq: a
    fork point inside a proposal (its calls unanswered) is proposed again by the agent's
    own model, never answered with the recorded output meant for after those calls ran.
    """

    def __init__(
        self,
        recorded: Sequence[RecordedEvent],
        own: LLMProvider | None,
        follower: RecordingFollower,
    ) -> None:
        self.recorded, self.own, self.follower = recorded, own, follower

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if request.seq < len(self.recorded) and self.follower.fits():
            event = self.recorded[request.seq].event
            if isinstance(event, ActionProposed):
                return response_of(event)
        if self.own is None:
            raise InvalidInputError(
                f"fork {request.session_id}: the recording no longer fits at seq {request.seq} "
                "and the agent has no model of its own to continue with"
            )
        return await self.own.complete(request)


class _HybridTools:
    def __init__(self, recorded: RecordedTools, follower: RecordingFollower) -> None:
        self.recorded, self.follower, self.live = recorded, follower, LiveToolExecutor()

    async def execute(
        self, tool: Tool, call: ToolCall, args: Any, state: SessionState, timeout_s: float
    ) -> ToolOutcome:
        if self.follower.fits():
            recorded = self.recorded.take(tool.name, args_as_recorded(args))
            if recorded is not None:
                return recorded.outcome()
        return await self.live.execute(tool, call, args, state, timeout_s)


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
    *,
    agent: str | Agent | None = None,
    trust: TrustList | None = None,
    rules: NormalizationRules = DEFAULT_RULES,
) -> ForkResult:
    """Fork ``session_id`` after event ``at_seq`` into a new session and run it on.

    The recorded agent runs only when ``trust`` (default: `TrustList.discover`) allows it;
    ``agent`` runs as given. ``rules`` say what counts as volatile when the fork is matched
    against the recording.

    Raises:
        SessionNotFoundError: no such session.
        InvalidInputError: ``at_seq`` is outside the session.
        AgentLoadError: no agent to run (none recorded and none given).
        UntrustedReferenceError: the recorded agent is not trusted (and none was given).
    """
    recorded, started = load_recording(journal, session_id)
    if not 0 <= at_seq < len(recorded):
        raise InvalidInputError(
            f"session {session_id}: cannot fork at seq {at_seq}; it has seqs 0..{len(recorded) - 1}"
        )
    built = agent_for(started, session_id, agent, trust)
    fork_id = free_session_id(journal, session_id, "fork")
    prefix = recorded[: at_seq + 1]
    _copy_prefix(journal, fork_id, prefix, started, built)
    follower = RecordingFollower(journal, fork_id, recorded, rules, checked=at_seq)
    after = recorded[at_seq + 1 :]
    runtime = AgentRuntime(
        built,
        journal,
        llm=_HybridModel(recorded, built.llm, follower),
        tools=_HybridTools(RecordedTools(after), follower),
        ids=counter_ids(fork_id),
    )
    inputs = [item.event.text for item in after if isinstance(item.event, UserInput)]

    async def run_on() -> None:
        result = await runtime.continue_turn(fork_id)
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
