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

from collections.abc import Callable, Iterable
from typing import Any

from agentloop import TrustList, call_factory
from journal import DEPS_FACTORY_KEY, ActionProposed, Journal, RecordedEvent, UserInput

from .._captured import CapturedReplay
from .._live import checked_live
from .._run import ForkPoint
from .._session import recorded_start
from .._verdict import ReplayResult
from ..normalize import DEFAULT_RULES, NormalizationRules

__all__ = [
    "DEPS_FACTORY",
    "captured_replay",
    "checked_live",
    "compared_requests",
    "first_requests",
]


DEPS_FACTORY = DEPS_FACTORY_KEY
"""The ``session_started`` metadata key naming the factory of an agent's dependencies."""


def captured_replay(
    replay_agent: Callable[..., ReplayResult], *, deps: str | None = None
) -> CapturedReplay:
    """An integration's ``replay_captured`` (see `replay._captured`) over its ``replay_agent``.

    A live model (``live_model``: ``"agent"`` for the agent's own model, True for it when
    it has one, a ``module:factory`` returning one of the framework's models, or such a
    model) goes to ``replay_agent`` as its ``live_model``, the factory's model in place of
    the reference; a factory named by the user runs as given (`agentloop.call_factory`).

    ``deps`` names the ``replay_agent`` keyword that takes the agent's dependencies: when
    the session records a ``deps_factory`` reference (`DEPS_FACTORY`), the factory, if
    the trust list allows it, is called once and its value passed there.
    """

    def replay_captured(
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
        rules: NormalizationRules = DEFAULT_RULES,
    ) -> ReplayResult:
        del allow_side_effects  # (the frameworks declare no side effects)
        setup: dict[str, object] = {}
        if live_model is True or live_model == "agent":
            setup["live_model"] = live_model
        elif isinstance(live_model, str):
            setup["live_model"] = call_factory(live_model, what="live model")
        elif live_model:
            setup["live_model"] = live_model
        factory = recorded_start(journal, session_id).metadata.get(DEPS_FACTORY)
        if deps is not None and isinstance(factory, str):
            where = f"session {session_id}"
            checked = (trust or TrustList.discover()).require(
                factory, what="deps factory", where=where
            )
            setup[deps] = call_factory(checked, what=f"{where}: deps factory")
        return replay_agent(
            journal,
            session_id,
            target,
            live=live,
            reference=reference,
            save=save,
            rules=rules,
            **setup,
        )

    return replay_captured


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
        isinstance(item.event, ActionProposed)
        and item.event.request is not None
        and item.event.request.get("params", {}).get("form") == form
        for item in journal.events(session_id)
    )
    return compared, rules if compared else rules.extended({"action_proposed": ["request"]})
