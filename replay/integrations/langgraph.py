"""Replay and fork of LangGraph runs: the user's graph, unchanged, on the recorded state.

A session captured by `capture.frameworks.langgraph` names its graph (``module:attribute``
of the `CapturedGraph`), the method it ran (``invoke``, ``ainvoke``, ``stream``,
``astream``) with its input (a ``Command(resume=...)`` too), config and arguments, and the
checkpoint the run loaded. `replay_graph` calls the same method on the current graph with
the same arguments, inside `capture.replaying`, on an in-memory checkpointer seeded with
that checkpoint (`capture.frameworks.langgraph.seeded_checkpointer`): no database, no
human. The journaled model and tools are played as for any captured entry
(`replay.entry_replay.EntryPlayer`): each model request compared with the recorded one and
the recorded reply served (a changed prompt, node, edge or tool schema diverges at the
first request it changes), tools served, run and compared (``pure`` or ``--live-tool``), or
never run (side effects), and the verdict judged event by event.

A fork (``save=ForkPoint(seq)``) runs the graph again from the start with the recorded
replies up to the fork point and the live model after it (the graph's own model: what
LangGraph users call time travel, with the events before the fork point checked against
the recording, and lineage): a model call answered past the fork point is asked of the
model, never served.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentloop import AgentLoadError, AgentLoopError
from capture.frameworks.langgraph import (
    METADATA_KEY,
    METHODS,
    CapturedGraph,
    Seed,
    UnrestorableState,
    decode_value,
    seeded,
    seeded_checkpointer,
)
from journal import ENTRY_INPUTS_KEY, Journal, RecordedEvent, SessionStarted, loads_strict

from .._captured import CapturedRun
from .._follow import RecordingFollower
from .._run import ForkPoint, completed, replay_session
from .._session import recorded_start
from .._verdict import ReplayResult
from ..entry_replay import EntryPlayer, captured_driver, check_tools
from ..options import ReplayOptions

__all__ = ["CAPTURED_WITH", "GraphPlayer", "replay_captured", "replay_graph"]

CAPTURED_WITH = "langgraph"
"""The ``captured_with`` of the sessions this module replays."""


class GraphPlayer(EntryPlayer):
    """`EntryPlayer`, asking the live model for every reply past ``live_after`` (a fork)."""

    def __init__(
        self,
        recorded: Sequence[RecordedEvent],
        follower: RecordingFollower,
        options: ReplayOptions,
        live_after: int | None,
    ) -> None:
        super().__init__(recorded, follower, options)
        self.live_after = live_after

    def model(self, seq: int, request: dict[str, Any], whole: dict[str, Any]) -> Any:
        """The recorded reply, up to the fork point; past it, None: the model answers."""
        if self.live_after is not None and seq > self.live_after:
            if self.llm.went_live_at is None:
                self.llm.went_live_at = seq
            return None
        return super().model(seq, request, whole)


def _run_of(journal: Journal, session_id: str) -> tuple[str, Any, Any, dict[str, Any], Seed]:
    """What the recorded run was given (method, input, config, kwargs) and its seed.

    Raises:
        AgentLoadError: the session keeps no graph run, or a value a replay cannot restore.
    """
    started = recorded_start(journal, session_id)
    where = f"session {session_id}"
    text = started.metadata.get(ENTRY_INPUTS_KEY)
    state = started.metadata.get(METADATA_KEY)
    try:
        given = loads_strict(text) if isinstance(text, str) else None
    except ValueError:
        given = None
    if not isinstance(given, dict) or given.get("method") not in METHODS:
        raise AgentLoadError(f"{where} keeps no LangGraph run (metadata.entry_inputs)")
    if not isinstance(state, dict):
        raise AgentLoadError(f"{where} keeps no LangGraph state (metadata.{METADATA_KEY})")
    try:
        had = state.get("checkpointer") is not None  # a graph compiled without one runs so
        seed = Seed(seeded_checkpointer(state.get("checkpoint")) if had else None, state)
        value = decode_value(given.get("input"), "input")
        config = decode_value(given.get("config"), "config") or None
        kwargs = decode_value(given.get("kwargs"), "arguments") or {}
    except UnrestorableState as error:
        raise AgentLoadError(f"{where}: {error}") from error
    except (KeyError, TypeError, ValueError) as error:
        raise AgentLoadError(
            f"{where}: the recorded LangGraph state is malformed ({error})"
        ) from error
    return str(given["method"]), value, config, dict(kwargs), seed


async def _streamed(chunks: Any) -> list[Any]:
    return [chunk async for chunk in chunks]


def _call(
    graph: CapturedGraph, method: str, value: Any, config: Any, kwargs: dict[str, Any]
) -> object:
    """Run ``method`` of ``graph`` to its end (a stream read whole)."""
    outcome = getattr(graph, method)(value, config, **kwargs)
    if method == "stream":
        return list(outcome)
    if method == "astream":
        return completed(_streamed(outcome))
    return completed(outcome)


def replay_graph(
    journal: Journal,
    session_id: str,
    graph: Any,
    options: ReplayOptions | None = None,
    *,
    save: bool | ForkPoint = False,
) -> ReplayResult:
    """Run a recorded LangGraph run again on ``graph`` and compare (see the module).

    Args:
        journal: the journal holding the session.
        session_id: a session captured by `capture.Capture.graph`.
        graph: the graph (the `CapturedGraph` ``capture.graph(...)`` returned).
        options: how the replay runs (`ReplayOptions`): tools run for real, side effects
            allowed, the live model (the graph's own: ``"agent"`` or True), the rules.
        save: keep the replay in ``journal``; a `ForkPoint` keeps it as a fork, whose model
            is live past the fork point.

    Raises:
        AgentLoadError: ``graph`` is no captured graph, or the session keeps no run of one.
        AgentLoopError: a live model other than the graph's own, or a tool name the
            graph's capture does not have.
    """
    options = options or ReplayOptions()
    if options.live_model not in (None, True, "agent"):
        raise AgentLoopError(
            "a LangGraph session goes on live with the graph's own model: --live-model agent"
        )
    if not isinstance(graph, CapturedGraph):
        raise AgentLoadError(
            f"{type(graph).__name__} is not a captured graph: name the object "
            "capture.graph(...) returned"
        )
    check_tools(graph, options)
    method, value, config, kwargs, seed = _run_of(journal, session_id)
    fork = save.seq if isinstance(save, ForkPoint) else None

    def call(started: SessionStarted) -> object:
        with seeded(seed):
            return _call(graph, method, value, config, kwargs)

    def player_of(recorded: Sequence[RecordedEvent], follower: RecordingFollower) -> EntryPlayer:
        return GraphPlayer(recorded, follower, options, fork)

    return replay_session(
        journal,
        session_id,
        captured_driver(session_id, call, player_of),
        save=save,
        live_model=bool(options.live_model) or fork is not None,
        rules=options.rules,
    )


def replay_captured(run: CapturedRun) -> ReplayResult:
    """How `replay.Replayer` replays LangGraph sessions (`replay._captured.CapturedPath`)."""
    return replay_graph(run.journal, run.session_id, run.target, run.options, save=run.save)
