"""Capture and replay agents built on other frameworks, as ordinary agent-journal sessions.

* `replay.integrations.pydantic_ai`: a pydantic-ai capability that journals each model
  request and response and each tool call, and a pydantic-ai model that serves a journal's
  recorded responses (``pip install 'agent-journal[pydantic-ai]'``);
* `replay.integrations.openai_agents`: run hooks for the OpenAI Agents SDK and a replay
  ``Model`` (``pip install 'agent-journal[openai-agents]'``).

Both journal through `journal.Recorder` and replay through `replay.replay_loop`. Both
frameworks run the calls of one response concurrently; their outcomes are journaled in the
order the model proposed the calls (`InProposalOrder`), never in completion order, so a
capture and its replay agree. Nothing imports these modules but you: agent-journal works
without either framework, and importing one whose framework is missing raises
`MissingExtraError` with the pip line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from pydantic import JsonValue

from agentloop import TrustList, call_factory
from journal import (
    DEPS_FACTORY_KEY,
    ActionProposed,
    Journal,
    JournalError,
    RecordedEvent,
    UserInput,
    canonical_bytes,
    sets_ordered,
)
from journal.capture import InProposalOrder, json_value, request_record

from .._captured import CapturedReplay
from .._live import checked_live
from .._run import ForkPoint
from .._session import recorded_start
from .._verdict import ReplayResult
from ..normalize import DEFAULT_RULES, NormalizationRules

__all__ = [
    "DEPS_FACTORY",
    "InProposalOrder",
    "MissingExtraError",
    "ModelRequests",
    "answer_text",
    "captured_replay",
    "checked_live",
    "compared_requests",
    "first_requests",
    "jsonable",
    "missing_extra",
]


DEPS_FACTORY = DEPS_FACTORY_KEY
"""The ``session_started`` metadata key naming the factory of an agent's dependencies."""


class MissingExtraError(JournalError, ImportError):
    """An integration's framework is not installed; the message says what to install."""


def missing_extra(package: str, extra: str, error: ImportError) -> MissingExtraError:
    """The one-line error for an integration whose ``package`` cannot be imported."""
    return MissingExtraError(
        f"{package} is not installed ({error.msg}): pip install 'agent-journal[{extra}]'"
    )


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


def jsonable(value: object) -> JsonValue:
    """A framework's value as JSON; what has no JSON form becomes its ``str``.

    Captures use it so that an odd tool result never breaks the user's run (bytes that are
    not UTF-8 as base64: `journal.capture.json_value`). A set is a list in a fixed order, as
    `journal.sets_ordered` makes it: its own order follows the hash seed, which changes from
    run to run.
    """
    converted: JsonValue = json_value(sets_ordered(value), str)
    return converted


def answer_text(output: object) -> str:
    """A run's final output as the answer text: a string as is, anything else as JSON."""
    if isinstance(output, str):
        return output
    return canonical_bytes(jsonable(output)).decode("utf-8")


class ModelRequests:
    """What a framework's model is sent, journaled beside each response as a client's is.

    A framework resends the whole conversation at each model call; `record` keeps it as a
    captured client's request is kept (`journal.capture.request_record`: the messages new
    since the previous request, the other parameters, a digest), so that a replay whose
    code sends the model something else (a history processor, an input filter, a tool
    result handled otherwise) differs at that response's ``request``, where a replay of
    the responses alone would be identical.

    Args:
        form: names how the integration turns the framework's messages into JSON (its
            parameter ``form``): a session recorded in another form (or with no requests)
            is replayed without journaling them (`compared_requests`), so that a new
            version of agent-journal does not make old sessions diverge.
    """

    def __init__(self, form: str) -> None:
        self.form = form
        self.enabled = True
        """False journals no request (a replay of a session recorded in another form)."""
        self._previous: list[Any] = []

    def record(self, messages: list[JsonValue], **params: JsonValue) -> dict[str, Any] | None:
        """The request record of ``messages`` (as the model sees them) and ``params``."""
        if not self.enabled:
            return None
        record, self._previous = request_record(
            {**params, "form": self.form, "messages": messages}, self._previous
        )
        return record


def first_requests(recorded: Iterable[RecordedEvent]) -> list[dict[str, Any] | None]:
    """Each turn's first model request in a recorded session, None where none was recorded.

    One per user input: its parameters, and under its ``messages_key`` every message it
    sent (the record keeps those new since the previous request, as
    `journal.capture.full_requests` reads them): what the code began the turn with, the
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
