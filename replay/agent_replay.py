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

from collections.abc import Sequence
from dataclasses import replace

from agentloop import (
    Agent,
    AgentLoadError,
    AgentLoopError,
    AgentRuntime,
    LLMProvider,
    TrustList,
    call_factory,
    counter_ids,
    load_agent,
)
from journal import (
    AgentCompleted,
    AgentHalted,
    Journal,
    RecordedEvent,
    SessionStarted,
    UserInput,
    predated_settings,
    predates,
)

from ._follow import RecordingFollower
from ._live import checked_live
from ._run import Drive, completed, replay_session, run_code
from ._verdict import ReplayResult
from .options import ReplayOptions
from .recorded import RecordedClock, RecordedLLM, RecordedTools

__all__ = ["agent_for", "checked_side_effects", "live_model_for", "replay_agent_session"]


def agent_for(
    started: SessionStarted,
    session_id: str,
    options: ReplayOptions,
    *,
    where: str | None = None,
) -> Agent:
    """The agent to replay a session with: ``options.agent``, else the recorded reference.

    A recorded reference runs only when the options' trust list allows it; one given in
    the options runs as given. ``where`` names the session in messages (default
    ``session ID``).

    Raises:
        AgentLoadError: neither is there, or the reference cannot be built.
        UntrustedReferenceError: only the recorded reference is there, and it is not
            trusted.
    """
    if isinstance(options.agent, Agent):
        return options.agent
    trust = options.trust_list()
    reference = trust.choose(started.agent, options.agent, where=where or f"session {session_id}")
    trust.activate()
    seed = started.metadata.get("seed")
    return load_agent(reference, **({"seed": seed} if isinstance(seed, int) else {}))


def live_model_for(spec: object, agent: Agent) -> LLMProvider | None:
    """The model that answers off the record in a replay of ``agent``, from ``spec``.

    ``spec`` is `ReplayOptions.live_model`. A ``module:factory`` is given by the user, so
    it runs as given (see `agentloop.TrustList`), imported from the trust list's folders.

    Raises:
        AgentLoadError: the agent has no model of its own, the factory cannot be imported
            or does not return a model, or ``spec`` is an object that is no model.
    """
    if spec is None or spec is False:
        return None
    if spec is True or spec == "agent":
        if agent.llm is None:
            raise AgentLoadError(
                f"agent {agent.reference}: it has no model of its own to go on live with; "
                "name one with --live-model MODULE:FACTORY"
            )
        return agent.llm
    if isinstance(spec, str):
        TrustList.discover().activate()
        built = call_factory(spec, what="live model")
        if not isinstance(built, LLMProvider):
            raise AgentLoadError(
                f"live model {spec}: the factory returned {type(built).__name__}, which has "
                "no async complete(request)"
            )
        return built
    if not isinstance(spec, LLMProvider):
        raise AgentLoadError(
            f"live model {type(spec).__name__}: an agentloop agent goes on live with an "
            "object that has an async complete(request)"
        )
    return spec


def replay_agent_session(
    journal: Journal,
    session_id: str,
    agent: Agent,
    options: ReplayOptions | None = None,
    *,
    save: bool = False,
) -> ReplayResult:
    """Re-run ``agent`` on a session's recorded inputs and compare with the recording.

    Args:
        journal: the journal holding the session.
        session_id: the session to replay.
        agent: the agent to run (its model and tools are swapped for recorded ones).
        options: how the replay runs (`ReplayOptions`): the tools run live; the live model
            that answers where no recorded output fits (the replay diverged, or ran past
            the recording), from where the tools run live too, as in the original run
            (without one the replay stops there); the comparison rules.
        save: keep the replay in ``journal`` (``replay_of`` the original).

    Raises:
        SessionNotFoundError: no such session.
        AgentLoopError: a tool named live that the agent does not have.
        AgentLoadError: the live model cannot be built.
    """
    options = options or ReplayOptions()
    live_model = live_model_for(options.live_model, agent)
    named = checked_live(options.live_tools, (tool.name for tool in agent.tools))
    checked_side_effects(agent, options)

    def drive(
        scratch: Journal,
        replay_id: str,
        follower: RecordingFollower,
        recorded: Sequence[RecordedEvent],
        started: SessionStarted,
    ) -> Drive:
        llm = RecordedLLM(recorded, follower=follower, live_model=live_model)
        tools = RecordedTools(
            recorded,
            named,
            follower=follower if live_model is not None else None,
            allow_side_effects=options.allow_side_effects,
        )
        runtime = AgentRuntime(
            _with_recorded_rules(agent, started, recorded[0].v),
            scratch,
            llm=llm,
            tools=tools,
            clock=RecordedClock(recorded),
            ids=counter_ids(replay_id),
            model_failures=not predates(recorded[0].v, "model_call_failed"),
        )
        error = _run(runtime, replay_id, session_id, started, recorded)
        return Drive(llm=llm, tools=tools, error=error, agent=agent.reference)

    return replay_session(
        journal,
        session_id,
        drive,
        save=save,
        live_model=live_model is not None,
        rules=options.rules,
    )


def checked_side_effects(agent: Agent, options: ReplayOptions) -> None:
    """Refuse a tool with side effects named live but not allowed, before anything runs.

    Raises:
        AgentLoopError: such a tool (naming it live would do nothing: it is never run).
    """
    risky = sorted(
        tool.name
        for tool in agent.tools
        if tool.side_effects
        and tool.name in options.named_live
        and tool.name not in options.allow_side_effects
    )
    if risky:
        raise AgentLoopError(
            f"tool {risky[0]} has side effects: it runs for real in a replay only when "
            f"allowed too (--allow-side-effects {risky[0]})"
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

    return run_code(lambda: completed(drive()))
