"""Deterministic re-run of a recorded session with the current code, compared event by event.

`Replayer` is the front door of every replay (the CLI, the TUI and the fixtures plugin go
through it). It chooses the path by what recorded the session:

* a session an agentloop `Agent` ran: `replay.agent_replay` re-runs the agent on recorded
  ports (the recorded agent reference is rebuilt when the trust list allows it);
* a session captured from code the user owns (``captured_with`` in its metadata: a
  hand-written loop, pydantic-ai, the OpenAI Agents SDK): the module `replay._captured`
  names re-runs that code on what its reference names.

Either way the verdict comes from `replay._verdict`: identical, or the first divergence
with the seq, the expected and the actual event, and the field-level difference.
"""

from __future__ import annotations

from collections.abc import Iterable

from agentloop import Agent, TrustList
from journal import CAPTURED_WITH_KEY, Journal

from ._captured import captured_replay, run_captured
from ._session import recorded_start
from ._verdict import DivergenceError, ReplayResult
from .agent_replay import LiveModel, agent_for, live_model_for, replay_agent_session
from .normalize import DEFAULT_RULES, NormalizationRules

__all__ = ["Replayer"]


class Replayer:
    """Re-runs recorded sessions with the current code.

    Args:
        agent: the agent (or ``module:factory``) to run instead of the recorded reference.
        live_tools: ``True`` to run every tool for real, or the names of tools to run live;
            by default every tool result comes from the recording (no side effects).
        save: store the replay in the journal as a new session with ``replay_of``.
        rules: what counts as volatile; see `replay.normalize`.
        trust: which recorded references may run (default: `TrustList.discover` from the
            current folder when a replay starts); ``agent`` runs whatever it says.
        live_model: what answers where no recorded model output fits the replay's context
            (it diverged, or ran past the recording): ``"agent"`` (or True) for the
            agent's own model, ``"module:factory"`` for a factory that returns one, or a
            model object. From there the replay re-records, its tools running live as in
            the original run. Without one (the default) the replay stops there with a
            halt of rule ``replay_stopped``, and no recorded reply is ever served to a
            context it was not recorded for.
        allow_side_effects: tools declared with side effects (`capture.Capture.tool`)
            that may run for real when named live.
    """

    def __init__(
        self,
        *,
        agent: str | Agent | None = None,
        live_tools: bool | Iterable[str] = False,
        save: bool = False,
        rules: NormalizationRules = DEFAULT_RULES,
        trust: TrustList | None = None,
        live_model: LiveModel = None,
        allow_side_effects: Iterable[str] = (),
    ) -> None:
        self.agent = agent
        self.live_model = live_model
        self.allow_side_effects = frozenset(allow_side_effects)
        self.live: bool | frozenset[str] = (
            live_tools if isinstance(live_tools, bool) else frozenset(live_tools)
        )
        self.save = save
        self.rules = rules
        self.trust = trust

    def replay(
        self, journal: Journal, session_id: str, *, source: str | None = None
    ) -> ReplayResult:
        """Replay one session of ``journal`` and compare it with its recording.

        ``source`` names where the session came from (a JSONL file) in error messages.

        Raises:
            SessionNotFoundError: no such session.
            AgentLoadError: no agent to run, or it cannot be built.
            UntrustedReferenceError: the recorded reference is not trusted (and none given).
        """
        started = recorded_start(journal, session_id)  # the run reads the whole recording
        where = f"session {session_id}" if source is None else f"{source}: session {session_id}"
        kind = started.metadata.get(CAPTURED_WITH_KEY)
        if isinstance(self.agent, Agent) or (replay_captured := captured_replay(kind)) is None:
            agent = agent_for(started, session_id, self.agent, self.trust, where=where)
            return replay_agent_session(
                journal,
                session_id,
                agent,
                live=self.live,
                live_model=live_model_for(self.live_model, agent),
                save=self.save,
                rules=self.rules,
            )
        return run_captured(
            replay_captured,
            journal,
            session_id,
            started,
            agent=self.agent,
            trust=self.trust,
            where=where,
            live=self.live,
            live_model=self.live_model,
            allow_side_effects=self.allow_side_effects,
            save=self.save,
            rules=self.rules,
        )

    def replay_or_raise(self, journal: Journal, session_id: str) -> ReplayResult:
        """Like `replay`, but raise `DivergenceError` when the replay diverges."""
        result = self.replay(journal, session_id)
        if not result.identical:
            raise DivergenceError(result)
        return result
