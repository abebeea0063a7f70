"""Replay of sessions an agentloop `Agent` ran: the same runtime, on recorded ports.

`replay_agent_session` rebuilds nothing itself: it takes the `Agent` (see `agent_for` for
building one from the session's recorded reference, under the trust list), swaps its
ports for recorded ones (`replay.recorded`), feeds the recorded user inputs turn by turn,
and hands what the runtime journals now to the shared verdict (`replay._verdict`).

* A recording without a terminal event (a crash, a cut transcript) is replayed up to its
  end and is identical if that prefix matches.
* Asking the model for more than was recorded is a divergence ("recording exhausted at
  seq N"), never a hang.
* An exception in the agent's code is journaled by the loop as a halt with rule
  ``error``; it shows as a divergence at that step, with the exception's message.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import replace

from agentloop import Agent, AgentRuntime, TrustList, counter_ids, load_agent
from journal import (
    AgentCompleted,
    AgentHalted,
    Journal,
    RecordedEvent,
    SessionStarted,
    StoreError,
    UserInput,
    predated_settings,
)

from ._session import free_session_id, load_recording, replay_target
from ._verdict import ReplayResult, judge
from .normalize import DEFAULT_RULES, NormalizationRules
from .recorded import RecordedClock, RecordedLLM, RecordedTools

__all__ = ["agent_for", "replay_agent_session"]


def agent_for(
    started: SessionStarted,
    session_id: str,
    override: str | Agent | None,
    trust: TrustList | None = None,
    *,
    where: str | None = None,
) -> Agent:
    """The agent to replay a session with: the override, else the recorded reference.

    A recorded reference runs only when ``trust`` (default: `TrustList.discover`) allows
    it; an override runs as given. ``where`` names the session in messages (default
    ``session ID``).

    Raises:
        AgentLoadError: neither is there, or the reference cannot be built.
        UntrustedReferenceError: only the recorded reference is there, and it is not
            trusted.
    """
    if isinstance(override, Agent):
        return override
    trust = trust or TrustList.discover()
    reference = trust.choose(started.agent, override, where=where or f"session {session_id}")
    trust.activate()
    seed = started.metadata.get("seed")
    return load_agent(reference, **({"seed": seed} if isinstance(seed, int) else {}))


def replay_agent_session(
    journal: Journal,
    session_id: str,
    agent: Agent,
    *,
    live: bool | Iterable[str] = False,
    save: bool = False,
    rules: NormalizationRules = DEFAULT_RULES,
) -> ReplayResult:
    """Re-run ``agent`` on a session's recorded inputs and compare with the recording.

    Args:
        journal: the journal holding the session.
        session_id: the session to replay.
        agent: the agent to run (its model and tools are swapped for recorded ones).
        live: tools to run for real (``True``: all) instead of serving the recording.
        save: keep the replay in ``journal`` (``replay_of`` the original).
        rules: what counts as volatile; see `replay.normalize`.

    Raises:
        SessionNotFoundError: no such session.
    """
    recorded, started = load_recording(journal, session_id)
    agent = _with_recorded_rules(agent, started, recorded[0].v)
    with replay_target(journal, save) as target:
        replay_id = free_session_id(target, session_id, "replay")
        llm = RecordedLLM(recorded)
        tools = RecordedTools(recorded, live if isinstance(live, bool) else frozenset(live))
        runtime = AgentRuntime(
            agent,
            target,
            llm=llm,
            tools=tools,
            clock=RecordedClock(recorded),
            ids=counter_ids(replay_id),
        )
        error = _run(runtime, replay_id, session_id, started, recorded)
        replayed = list(target.events(replay_id))
    return judge(
        recorded,
        replayed,
        replay_id=replay_id,
        saved=save,
        agent=agent.reference,
        rules=rules,
        error=error,
        exhaustion=llm.exhaustion,
        unrecorded=tools.unrecorded,
        live_differences=tools.live_differences,
    )


def _with_recorded_rules(agent: Agent, started: SessionStarted, version: int) -> Agent:
    """``agent`` with the guardrails added since ``session_started`` v1 as the recording ran.

    ``max_identical_failures``, ``empty_reply_retries`` and ``max_result_bytes`` take the
    recorded values (a v1 record's are the upcast ones that reproduce how it ran), so a
    replay finds those rules firing where they fired, and a saved replay or a copy of an old
    session replays the same way again. An import records no configuration of its own (it
    has no agent): its replay keeps the agent's values, but for those a v1 import predates.
    """
    names = predated_settings(1 if started.agent is not None else version)  # 1: all of them
    recorded = started.config.guardrails
    update = {name: getattr(recorded, name) for name in names}
    if all(getattr(agent.guardrails, name) == value for name, value in update.items()):
        return agent
    return replace(agent, guardrails=agent.guardrails.model_copy(update=update))


def _is_greeting(recorded: Sequence[RecordedEvent], index: int) -> bool:
    """An ``agent_completed`` before any user input or model call: a greeting."""
    return all(
        isinstance(item.event, (SessionStarted, AgentCompleted)) for item in recorded[:index]
    )


def _ends_from_outside(recorded: Sequence[RecordedEvent], index: int) -> bool:
    """An ``agent_halted`` right after a turn's answer: the session was ended from outside."""
    return index > 0 and isinstance(recorded[index - 1].event, AgentCompleted)


def _run(
    runtime: AgentRuntime,
    replay_id: str,
    session_id: str,
    started: SessionStarted,
    recorded: Sequence[RecordedEvent],
) -> str | None:
    """Drive the replay; return the text of an exception the loop itself raised, if any."""

    async def drive() -> None:
        runtime.start(replay_id, metadata=started.metadata, replay_of=session_id)
        for index, item in enumerate(recorded):
            event = item.event
            after = recorded[index + 1].event if index + 1 < len(recorded) else None
            if isinstance(event, UserInput):
                if isinstance(after, AgentHalted) and after.rule != "error":
                    # The session was ended from outside before the agent answered.
                    runtime.stop(replay_id, after.rule, after.reason, last_input=event.text)
                    return
                result = await runtime.run_turn(replay_id, event.text)
                if result.status in ("halted", "failed"):
                    return
            elif isinstance(event, AgentCompleted) and _is_greeting(recorded, index):
                runtime.greet(replay_id, event.answer)
            elif isinstance(event, AgentHalted) and _ends_from_outside(recorded, index):
                runtime.stop(replay_id, event.rule, event.reason)

    try:
        asyncio.run(drive())
    except StoreError:
        raise  # the journal refused the replay's write: a fault of the store, not a divergence
    except Exception as error:  # the replay must report, never crash
        return f"{type(error).__name__}: {error}"
    return None
