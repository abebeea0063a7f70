"""What a failure means in the record: how it is classified and worded, and the halt code raises.

Every writer of the journal (the agentloop runtime, the capture of the user's code, a
replay's recorded ports) records a failure the same way, so a session and its replay agree:

* `failure_kind`: the kind (business, infrastructure, timeout) an exception is, unless a
  classifier says otherwise; `failure_message` and `describe_error` its one bounded line;
  `failure_of` both, for an exception or a plain message.
* `HaltSession`: raised by code (a port, a replay's stand-in) to end the session with a
  halt of its own rule and reason instead of rule ``error``.
* `ReplayedFailure`: a failure the recording holds, raised again by a replay with its
  recorded message and kind.
"""

from __future__ import annotations

from typing import get_args

from ._event_summary import clip
from .events import FailureKind

__all__ = [
    "MESSAGE_LIMIT",
    "HaltSession",
    "ReplayedFailure",
    "describe_error",
    "failure_kind",
    "failure_message",
    "failure_of",
    "one_line",
    "status_code_of",
]

_KINDS: tuple[str, ...] = get_args(FailureKind)
MESSAGE_LIMIT = 300
"""The longest one-line message a failure is recorded with, in characters."""


class HaltSession(BaseException):
    """Raised by a port to end the session with ``agent_halted`` of ``rule`` and ``reason``.

    The loop (the agentloop runtime, or a recorder around a hand-written loop) records
    the halt with this rule instead of rule ``error``: a replay's recorded model raises it
    when no recorded output fits the context (rule ``replay_stopped``), so the session says
    why it ended where it did. A `BaseException`, like ``KeyboardInterrupt``: the user's
    ``except Exception`` does not swallow it and carry on past the end of the record.
    """

    def __init__(self, rule: str, reason: str) -> None:
        super().__init__(f"{rule}: {reason}")
        self.rule = rule
        self.reason = reason


class ReplayedFailure(Exception):
    """A failure the recording holds, raised again by a replay's recorded ports.

    A recorder records it with its message and kind exactly as they were recorded, so
    a replay of a failed call or a crashed loop matches the original.
    """

    def __init__(self, message: str, kind: FailureKind = "business") -> None:
        super().__init__(message)
        self.message = message
        self.kind: FailureKind = kind


def one_line(text: str) -> str:
    """``text`` clipped to one bounded line (`MESSAGE_LIMIT` characters)."""
    return clip(text, MESSAGE_LIMIT)


def describe_error(error: BaseException, *, typed: bool = True) -> str:
    """One bounded line for an exception: ``Type: message`` (just the message if not typed).

    A `ReplayedFailure` keeps its recorded message as it is.
    """
    if isinstance(error, ReplayedFailure):
        return error.message
    text = one_line(str(error)) or type(error).__name__
    return one_line(f"{type(error).__name__}: {text}") if typed else text


def failure_kind(error: BaseException) -> FailureKind:
    """The kind of failure an exception is, unless a classifier says otherwise.

    The exception's own ``kind`` attribute when it names a kind (``agentloop.ToolError``
    is ``business``), else ``timeout`` for a ``TimeoutError``, ``business`` for a
    ``ValueError`` or ``LookupError``, ``infrastructure`` for anything else. The one rule
    of the runtime (`agentloop.classify_error`) and of every capture.
    """
    own = getattr(error, "kind", None)
    if isinstance(own, str) and own in _KINDS:
        return own  # type: ignore[return-value]
    if isinstance(error, TimeoutError):
        return "timeout"
    if isinstance(error, (ValueError, LookupError)):
        return "business"
    return "infrastructure"


def failure_message(error: BaseException) -> str:
    """The one-line message a failure is recorded with.

    A business error's text as it is (it is meant for the model), any other prefixed with
    its type: by the exception's own kind (`failure_kind`), whatever a classifier decides.
    """
    return describe_error(error, typed=failure_kind(error) != "business")


def failure_of(
    error: BaseException | str, kind: FailureKind | None = None
) -> tuple[FailureKind, str]:
    """The kind (``kind``, else `failure_kind`) and `failure_message` of a tool failure.

    A plain message is a business failure unless ``kind`` says otherwise.
    """
    if isinstance(error, str):
        return kind or "business", one_line(error)
    return kind or failure_kind(error), failure_message(error)


def status_code_of(error: BaseException) -> int | None:
    """The HTTP status an API error carries, or None.

    Its ``status_code``, as most SDKs name it, or its ``code`` when that is an HTTP status
    (100 to 599: google-genai's ``APIError``).
    """
    status = getattr(error, "status_code", None)
    if type(status) is int:
        return status
    code = getattr(error, "code", None)
    return code if type(code) is int and 100 <= code <= 599 else None
