"""Which module replays a captured session: one registry from ``captured_with`` to it.

Sessions journaled through `capture.Recorder` (a hand-written loop) or a framework
integration carry ``captured_with`` in their metadata. Each kind is replayed by one module
that exposes ``replay_captured(journal, session_id, target, *, reference, live, save,
rules, live_model, allow_side_effects, trust)``, where ``target`` is what the session's
reference names (a loop's ``run``, a framework's agent object), ``live_model`` what
`replay.Replayer` was given and ``trust`` the list any other reference the session records
(a pydantic-ai ``deps`` factory) must be on.
The modules are imported only when a session of their kind is replayed, so an
integration's framework is needed only for its own sessions.

A replay needs no API key, but code that builds its client as ``OpenAI()`` (pydantic-ai's
and the Agents SDK's OpenAI models alike) refuses to start without ``OPENAI_API_KEY``:
while a replay with no live model imports and runs such code, an unset key is set to a
placeholder (`keyless`), which never reaches a server (nothing is sent).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, nullcontext
from typing import Any, Protocol, cast

from agentloop import TrustList, load_object
from journal import Journal, SessionStarted

from ._run import ForkPoint
from ._verdict import ReplayResult
from .normalize import NormalizationRules

__all__ = [
    "CAPTURED_REPLAYS",
    "PLACEHOLDER_KEY",
    "CapturedReplay",
    "captured_replay",
    "keyless",
    "run_captured",
]

PLACEHOLDER_KEY = "agent-journal-replay-no-key"
"""``OPENAI_API_KEY`` while a replay without a live model runs code that needs one set."""

CAPTURED_REPLAYS = {
    "entry": "replay.entry_replay",
    "recorder": "replay.handwritten",
    "pydantic-ai": "replay.integrations.pydantic_ai",
    "openai-agents": "replay.integrations.openai_agents",
}
"""``captured_with`` → the module that replays such sessions (its ``CAPTURED_WITH``)."""


class CapturedReplay(Protocol):
    """The ``replay_captured`` function of a module in `CAPTURED_REPLAYS`."""

    def __call__(
        self,
        journal: Journal,
        session_id: str,
        target: object,
        *,
        reference: str | None,
        live: bool | Iterable[str] = False,
        live_model: object = None,
        allow_side_effects: Iterable[str] = (),
        trust: TrustList | None = None,
        save: bool | ForkPoint = False,
        rules: NormalizationRules = ...,
    ) -> ReplayResult:
        """Replay ``session_id`` through ``target`` and judge it."""
        ...


def captured_replay(captured_with: object) -> CapturedReplay | None:
    """The function that replays sessions captured with ``captured_with`` (None: not captured).

    Raises:
        MissingExtraError: the integration's framework is not installed.
    """
    if not isinstance(captured_with, str) or captured_with not in CAPTURED_REPLAYS:
        return None
    module = importlib.import_module(CAPTURED_REPLAYS[captured_with])
    return cast(CapturedReplay, module.replay_captured)


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
    replay: CapturedReplay,
    journal: Journal,
    session_id: str,
    started: SessionStarted,
    *,
    agent: str | None,
    trust: TrustList | None,
    where: str,
    **options: Any,
) -> ReplayResult:
    """Run ``replay`` on what the session's reference names (``agent`` when given).

    The recorded reference runs only when ``trust`` (default: `TrustList.discover`) allows
    it; ``options`` go to ``replay`` as they are. Without a live model, the code is imported
    and run `keyless`.

    Raises:
        AgentLoadError: no reference to run, or it cannot be imported.
        UntrustedReferenceError: the recorded reference is not trusted (and none given).
    """
    trust = trust or TrustList.discover()
    reference = trust.choose(started.agent, agent, where=where)
    trust.activate()
    # (a live model needs the real key: none is made up for it)
    with nullcontext() if options.get("live_model") else keyless():
        return replay(
            journal, session_id, load_object(reference), reference=reference, trust=trust, **options
        )
