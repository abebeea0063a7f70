"""Capture of agents built on other frameworks, as ordinary agent-journal sessions.

One module per framework, each the capture half of an integration (its replay half, the
stand-in model and ``replay_agent``, is in `replay.integrations`):

* `capture.frameworks.pydantic_ai`: a pydantic-ai capability that journals each model
  request and response and each tool call (``pip install 'agent-journal[pydantic-ai]'``);
* `capture.frameworks.openai_agents`: run hooks for the OpenAI Agents SDK
  (``pip install 'agent-journal[openai-agents]'``).

Both journal through `capture.Recorder`. Both frameworks run the calls of one response
concurrently; their outcomes are journaled in the order the model proposed the calls
(`capture.InProposalOrder`), never in completion order, so a capture and its replay agree.
Nothing imports these modules but you: agent-journal works without either framework, and
importing one whose framework is missing raises `capture.MissingExtraError` with the pip
line.

A new framework goes here as a module of its own, sharing what is below: `ModelRequests`
(the requests journaled beside the responses), `jsonable` and `answer_text`.
"""

from __future__ import annotations

from typing import Any

from pydantic import JsonValue

from journal import canonical_bytes, sets_ordered

from ..requests import json_value, request_record

__all__ = ["ModelRequests", "answer_text", "jsonable"]


def jsonable(value: object) -> JsonValue:
    """A framework's value as JSON; what has no JSON form becomes its ``str``.

    Captures use it so that an odd tool result never breaks the user's run (bytes that are
    not UTF-8 as base64: `capture.json_value`). A set is a list in a fixed order, as
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
    captured client's request is kept (`capture.request_record`: the messages new
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
