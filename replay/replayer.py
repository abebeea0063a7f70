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

from agentloop import Agent
from journal import CAPTURED_WITH_KEY, Journal

from ._captured import captured_path, run_captured
from ._session import recorded_start
from ._verdict import DivergenceError, ReplayResult
from .agent_replay import agent_for, replay_agent_session
from .options import ReplayOptions

__all__ = ["Replayer"]


class Replayer:
    """Re-runs recorded sessions with the current code.

    Args:
        options: how the replays run (`ReplayOptions`: the agent to run instead of the
            recorded one, tools run live, tools with side effects allowed, a live model,
            the comparison rules, the trust list). By default every model reply and tool
            outcome comes from the recording: no API key, no side effects.
        save: store each replay in the journal as a new session with ``replay_of``.
    """

    def __init__(self, options: ReplayOptions | None = None, *, save: bool = False) -> None:
        if options is not None and not isinstance(options, ReplayOptions):
            raise TypeError(f"Replayer takes ReplayOptions, not {type(options).__name__}")
        self.options = options or ReplayOptions()
        self.save = save

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
        options = self.options
        started = recorded_start(journal, session_id)  # the run reads the whole recording
        where = f"session {session_id}" if source is None else f"{source}: session {session_id}"
        kind = started.metadata.get(CAPTURED_WITH_KEY)
        if isinstance(options.agent, Agent) or (path := captured_path(kind)) is None:
            agent = agent_for(started, session_id, options, where=where)
            return replay_agent_session(journal, session_id, agent, options, save=self.save)
        return run_captured(
            path, journal, session_id, started, options, where=where, save=self.save
        )

    def replay_or_raise(self, journal: Journal, session_id: str) -> ReplayResult:
        """Like `replay`, but raise `DivergenceError` when the replay diverges."""
        result = self.replay(journal, session_id)
        if not result.identical:
            raise DivergenceError(result)
        return result
