"""Capture and replay agents built on other frameworks, as ordinary agent-journal sessions.

* `replay.integrations.pydantic_ai`: a pydantic-ai capability that journals each model
  request and response and each tool call, and a pydantic-ai model that serves a journal's
  recorded responses (``pip install 'agent-journal[pydantic-ai]'``);
* `replay.integrations.openai_agents`: run hooks for the OpenAI Agents SDK and a replay
  ``Model`` (``pip install 'agent-journal[openai-agents]'``).

Both journal through `journal.Recorder` and replay through `replay.replay_loop`. Nothing
imports these modules but you: agent-journal works without either framework, and
importing one whose framework is missing raises `MissingExtraError` with the pip line.
"""

from __future__ import annotations

from pydantic import JsonValue
from pydantic_core import to_jsonable_python

from journal import JournalError
from journal.canonical import canonical_bytes

__all__ = ["MissingExtraError", "answer_text", "jsonable", "missing_extra"]


class MissingExtraError(JournalError, ImportError):
    """An integration's framework is not installed; the message says what to install."""


def missing_extra(package: str, extra: str, error: ImportError) -> MissingExtraError:
    """The one-line error for an integration whose ``package`` cannot be imported."""
    return MissingExtraError(
        f"{package} is not installed ({error.msg}): pip install 'agent-journal[{extra}]'"
    )


def jsonable(value: object) -> JsonValue:
    """A framework's value as JSON; what has no JSON form becomes its ``str``.

    Captures use it so that an odd tool result never breaks the user's run.
    """
    converted: JsonValue = to_jsonable_python(value, fallback=str)
    return converted


def answer_text(output: object) -> str:
    """A run's final output as the answer text: a string as is, anything else as JSON."""
    if isinstance(output, str):
        return output
    return canonical_bytes(jsonable(output)).decode("utf-8")
