"""Replay agents built on other frameworks: the replay halves of the integrations.

* `replay.integrations.pydantic_ai`: a pydantic-ai model that serves a journal's recorded
  responses, and ``replay_agent`` (``pip install 'agent-journal[pydantic-ai]'``);
* `replay.integrations.openai_agents`: a replay ``Model`` for the OpenAI Agents SDK, and
  its ``replay_agent`` (``pip install 'agent-journal[openai-agents]'``).

Their capture halves (what journals a run in production) are in `capture.frameworks`.
Both replay through `replay.replay_loop`, re-running the user's unchanged agent on the
recorded inputs. Nothing imports these modules but a replay of such a session (or you):
importing one whose framework is missing raises `capture.MissingExtraError` with the
pip line.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agentloop import call_factory
from journal import (
    DEPS_FACTORY_KEY,
    ActionProposed,
    Journal,
    ModelCallFailed,
    RecordedEvent,
    UserInput,
)

from .._captured import CapturedRun
from .._live import checked_live
from .._session import recorded_start
from ..normalize import NormalizationRules

__all__ = [
    "DEPS_FACTORY",
    "checked_live",
    "compared_requests",
    "first_requests",
    "framework_live_model",
    "recorded_deps",
]


DEPS_FACTORY = DEPS_FACTORY_KEY
"""The ``session_started`` metadata key naming the factory of an agent's dependencies."""


def framework_live_model(spec: object) -> object:
    """`ReplayOptions.live_model` as a framework's ``replay_agent`` reads it.

    None for none; True or ``"agent"`` as they are (the agent's own model: True only when
    it has one, ``"agent"`` or fail); a ``module:factory`` called (the user named it, so it
    runs as given: `agentloop.call_factory`) for the framework model it returns; a model
    object as it is.

    Raises:
        AgentLoadError: the factory cannot be imported or raised.
    """
    if spec is None or spec is False:
        return None
    if spec is True or spec == "agent":
        return spec
    if isinstance(spec, str):
        return call_factory(spec, what="live model")
    return spec


def recorded_deps(run: CapturedRun) -> object:
    """The agent's dependencies, from the ``deps_factory`` the session records (or None).

    The factory runs only when the run's trust list allows it; it is called once.

    Raises:
        UntrustedReferenceError: the factory is not trusted.
        AgentLoadError: it cannot be imported or raised.
    """
    factory = recorded_start(run.journal, run.session_id).metadata.get(DEPS_FACTORY)
    if not isinstance(factory, str):
        return None
    where = f"session {run.session_id}"
    checked = run.trust.require(factory, what="deps factory", where=where)
    return call_factory(checked, what=f"{where}: deps factory")


def first_requests(recorded: Iterable[RecordedEvent]) -> list[dict[str, Any] | None]:
    """Each turn's first model request in a recorded session, None where none was recorded.

    One per user input: its parameters, and under its ``messages_key`` every message it
    sent (the record keeps those new since the previous request, as
    `capture.full_requests` reads them): what the code began the turn with, the
    agent that asked, the history it passed.
    """
    firsts: list[dict[str, Any] | None] = []
    sent: list[Any] = []  # the latest request's messages, whole again
    asked = True
    for item in recorded:
        event = item.event
        if isinstance(event, UserInput):
            firsts.append(None)
            asked = False
        elif isinstance(event, ActionProposed) and event.request is not None:
            record = event.request
            new = record.get("messages")
            sent = [
                *sent[: int(str(record.get("from", 0)))],
                *(new if isinstance(new, list) else []),
            ]
            if not asked:
                params = record.get("params")
                key = str(record.get("messages_key", "messages"))
                firsts[-1] = {**(params if isinstance(params, dict) else {}), key: sent}
            asked = True
    return firsts


def compared_requests(
    journal: Journal, session_id: str, form: str, rules: NormalizationRules
) -> tuple[bool, NormalizationRules]:
    """Whether a replay journals and compares the requests, and the rules it judges with.

    Only a session that journaled its requests in ``form`` has them compared; any other
    replays as before requests were journaled: its replay journals none, and its recorded
    ones (another version's form) are left out of the comparison.
    """
    compared = any(
        isinstance(item.event, ActionProposed | ModelCallFailed)
        and item.event.request is not None
        and item.event.request.get("params", {}).get("form") == form
        for item in journal.events(session_id)
    )
    uncompared = {"action_proposed": ["request"], "model_call_failed": ["request"]}
    return compared, rules if compared else rules.extended(uncompared)
