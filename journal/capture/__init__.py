"""Capture of code the user owns, replayable at its boundaries.

* `Capture`: decorate the entry function and the tools, wrap the openai client; each entry
  call is one session, its model requests and responses and its tool calls journaled as
  they cross those boundaries (`journal.capture.scope`).
* `Recorder`: a few typed calls to journal any hand-written loop.
* `JournaledOpenAI`: a wrapper of the openai client that journals each model call.

All three write through a `Destination` (`journal.capture.output`): redaction, tail
sampling, and fail-open writes that go to a `Spool` when the journal cannot take them,
moved into the journal later by `drain` (``agent-journal drain``).

A replay runs the captured code again inside `replaying`, where a `Player` decides the
outcomes of the calls (`journal.capture.play`); recorded exceptions come back as their own
types (`exception_record`, `rebuilt`).
"""

from .exceptions import (
    MODEL_CALL,
    ReplayedException,
    exception_record,
    frame_note,
    raised_by_model_call,
    rebuilt,
)
from .openai_client import JournaledOpenAI
from .order import InProposalOrder, RecordedOrder
from .output import Destination, Sampling, SessionOutput
from .placement import current_session
from .play import Player, ReplayTarget, ToolPlay, replay_target, replaying
from .recorder import (
    HaltSession,
    ModelOutput,
    Recorder,
    ReplayedFailure,
    describe_error,
    failure_kind,
    failure_message,
    failure_of,
)
from .requests import full_requests, json_value, request_record
from .returns import as_return_type, return_type
from .scope import CAPTURED_WITH, Capture, CapturedSession, ToolInfo, is_method
from .spool import DrainReport, Spool, SpoolCounts, drain, spool_line, spool_path_for

__all__ = [
    "CAPTURED_WITH",
    "MODEL_CALL",
    "Capture",
    "CapturedSession",
    "Destination",
    "DrainReport",
    "HaltSession",
    "InProposalOrder",
    "JournaledOpenAI",
    "ModelOutput",
    "Player",
    "RecordedOrder",
    "Recorder",
    "ReplayTarget",
    "ReplayedException",
    "ReplayedFailure",
    "Sampling",
    "SessionOutput",
    "Spool",
    "SpoolCounts",
    "ToolInfo",
    "ToolPlay",
    "as_return_type",
    "current_session",
    "describe_error",
    "drain",
    "exception_record",
    "failure_kind",
    "failure_message",
    "failure_of",
    "frame_note",
    "full_requests",
    "is_method",
    "json_value",
    "raised_by_model_call",
    "rebuilt",
    "replay_target",
    "replaying",
    "request_record",
    "return_type",
    "spool_line",
    "spool_path_for",
]
