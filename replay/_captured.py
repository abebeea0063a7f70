"""Which path replays a captured session: one typed table from ``captured_with`` to it.

Sessions journaled through `capture.Recorder` (a hand-written loop), around an entry
(`capture.Capture`) or by a framework integration carry ``captured_with`` in their
metadata. Each kind is replayed by one `CapturedPath`: a function of a `CapturedRun`,
which holds everything a replay of it needs (the session, what its reference names, the
`ReplayOptions` as the caller built them, and what to keep). The paths are imported only
when a session of their kind is replayed, so an integration's framework is needed only for
its own sessions.

A replay needs no API key, but code that builds its client as ``OpenAI()`` (pydantic-ai's
and the Agents SDK's OpenAI models alike) refuses to start without ``OPENAI_API_KEY``:
while a replay with no live model imports and runs such code, an unset key is set to a
placeholder (`keyless`), which never reaches a server (nothing is sent).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass

from agentloop import AgentLoadError, TrustList, load_object
from journal import Journal, SessionStarted

from ._run import ForkPoint
from ._verdict import ReplayResult
from .options import ReplayOptions

__all__ = [
    "CAPTURED_PATHS",
    "PLACEHOLDER_KEY",
    "CapturedPath",
    "CapturedRun",
    "captured_path",
    "keyless",
    "run_captured",
]

PROXY_CAPTURED_WITH = "proxy"
"""The ``captured_with`` of the proxy's sessions (`capture.proxy.CAPTURED_WITH`)."""

PLACEHOLDER_KEY = "agent-journal-replay-no-key"
"""``OPENAI_API_KEY`` while a replay without a live model runs code that needs one set."""


@dataclass(frozen=True)
class CapturedRun:
    """One replay of a captured session, as its path is given it.

    ``target`` is what the session's reference names (an entry function, a loop's ``run``,
    a framework's agent object), ``reference`` that reference; ``trust`` the trust list any
    other reference the session records (a pydantic-ai ``deps`` factory) must be on;
    ``save`` keeps the run as a replay (True) or as a fork (a `ForkPoint`).
    """

    journal: Journal
    session_id: str
    target: object
    reference: str | None
    options: ReplayOptions
    trust: TrustList
    save: bool | ForkPoint = False


CapturedPath = Callable[[CapturedRun], ReplayResult]
"""How one kind of captured session is replayed."""


def _entry() -> CapturedPath:
    from .entry_replay import replay_captured

    return replay_captured


def _handwritten() -> CapturedPath:
    from .handwritten import replay_captured

    return replay_captured


def _pydantic_ai() -> CapturedPath:
    from .integrations.pydantic_ai import replay_captured

    return replay_captured


def _openai_agents() -> CapturedPath:
    from .integrations.openai_agents import replay_captured

    return replay_captured


def _langgraph() -> CapturedPath:
    from .integrations.langgraph import replay_captured

    return replay_captured


def _trace() -> CapturedPath:
    from .trace_replay import replay_captured

    return replay_captured


CAPTURED_PATHS: Mapping[str, Callable[[], CapturedPath]] = {
    "entry": _entry,
    "recorder": _handwritten,
    "pydantic-ai": _pydantic_ai,
    "openai-agents": _openai_agents,
    "langgraph": _langgraph,
    "trace": _trace,
}
"""``captured_with`` → the path that replays such sessions (imported when first asked for)."""


def captured_path(captured_with: object) -> CapturedPath | None:
    """The path that replays sessions captured with ``captured_with`` (None: not captured).

    Raises:
        MissingExtraError: the integration's framework is not installed.
        AgentLoadError: the proxy recorded the session: its code runs outside, against a
            replaying proxy (`replay.proxy`).
    """
    if captured_with == PROXY_CAPTURED_WITH:
        raise AgentLoadError(
            "the session was recorded by agent-journal proxy: its agent runs outside this "
            "process; replay it with agent-journal proxy --replay SESSION and run the agent "
            "against that proxy"
        )
    if not isinstance(captured_with, str) or captured_with not in CAPTURED_PATHS:
        return None
    return CAPTURED_PATHS[captured_with]()


@contextmanager
def keyless() -> Iterator[None]:
    """``OPENAI_API_KEY`` set to `PLACEHOLDER_KEY` for the block, unless one is set."""
    if os.environ.get("OPENAI_API_KEY"):
        yield
        return
    os.environ["OPENAI_API_KEY"] = PLACEHOLDER_KEY
    try:
        yield
    finally:
        if os.environ.get("OPENAI_API_KEY") == PLACEHOLDER_KEY:
            del os.environ["OPENAI_API_KEY"]


def run_captured(
    path: CapturedPath,
    journal: Journal,
    session_id: str,
    started: SessionStarted,
    options: ReplayOptions,
    *,
    where: str,
    save: bool | ForkPoint = False,
) -> ReplayResult:
    """Run ``path`` on what the session's reference names (``options.agent`` when given).

    The recorded reference runs only when the options' trust list allows it. Without a
    live model, the code is imported and run `keyless`.

    Raises:
        AgentLoadError: no reference to run, or it cannot be imported.
        UntrustedReferenceError: the recorded reference is not trusted (and none given).
    """
    trust = options.trust_list()
    given = options.agent if isinstance(options.agent, str) else None
    reference = trust.choose(started.agent, given, where=where)
    trust.activate()
    # (a live model needs the real key: none is made up for it)
    with nullcontext() if options.live_model else keyless():
        target = load_object(reference)  # (code that builds its client as it is imported)
        return path(CapturedRun(journal, session_id, target, reference, options, trust, save))
