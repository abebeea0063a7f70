"""Capture of code the user owns, replayable at its boundaries.

* `Capture`: decorate the entry function and the tools, wrap the model client; each entry
  call is one session, its model requests and responses and its tool calls journaled as
  they cross those boundaries (`capture.scope`).
* `Recorder`: a few typed calls to journal any hand-written loop (`capture.recorder`).
* `JournaledOpenAI`: a wrapper of the openai client that journals each model call
  (`capture.clients.openai_journaled`).
* `Capture.mcp` and `Capture.mcp_stdio`: an MCP client session whose tool calls are
  journaled (`capture.clients.mcp`; `LIST_TOOLS`, `mcp_tool_names`: its names).
* The capture halves of framework integrations, one module each in `capture.frameworks`.

All of them write through a `Destination` (`capture.output`): redaction, tail sampling,
and fail-open writes that go to a `Spool` when the journal cannot take them, moved into
the journal later by `drain` (``agent-journal drain``).

The seam a replay plugs into is defined here and implemented by `replay`: a replay runs
the captured code again inside `replaying`, where a `Player` decides the outcomes of the
calls (`capture.play`), and a replay that cannot go on halts with rule `REPLAY_STOPPED`;
recorded exceptions come back as their own types (`exception_record`, `rebuilt`).

Where things go: a model or tool client's wrapper in `capture.clients` (one module per
client), a framework's hooks in `capture.frameworks`, examples of captured code in
`capture.examples`. This package imports `journal` and nothing of `agentloop` or `replay`.
"""

from ._extras import MissingExtraError, missing_extra
from .clients.mcp_names import LIST_TOOLS, mcp_tool_names
from .clients.openai_journaled import JournaledOpenAI
from .exceptions import (
    MODEL_CALL,
    ReplayedException,
    exception_record,
    frame_note,
    raised_by_model_call,
    rebuilt,
)
from .order import RecordedOrder
from .output import Destination, Sampling, SessionOutput
from .placement import current_session
from .play import (
    REPLAY_STOPPED,
    AsyncToolPlayer,
    FailedCall,
    Player,
    ReplayTarget,
    ToolPlay,
    halt_of,
    replay_target,
    replaying,
)
from .proposal_order import InProposalOrder
from .recorder import ModelOutput, Recorder
from .requests import full_requests, json_value, request_record
from .returns import as_return_type, return_type
from .scope import Capture, is_method
from .session import CAPTURED_WITH, CapturedSession, ToolInfo
from .spool import DrainReport, Spool, SpoolCounts, drain, spool_line, spool_path_for

__all__ = [
    "CAPTURED_WITH",
    "LIST_TOOLS",
    "MODEL_CALL",
    "REPLAY_STOPPED",
    "AsyncToolPlayer",
    "Capture",
    "CapturedSession",
    "Destination",
    "DrainReport",
    "FailedCall",
    "InProposalOrder",
    "JournaledOpenAI",
    "MissingExtraError",
    "ModelOutput",
    "Player",
    "RecordedOrder",
    "Recorder",
    "ReplayTarget",
    "ReplayedException",
    "Sampling",
    "SessionOutput",
    "Spool",
    "SpoolCounts",
    "ToolInfo",
    "ToolPlay",
    "as_return_type",
    "current_session",
    "drain",
    "exception_record",
    "frame_note",
    "full_requests",
    "halt_of",
    "is_method",
    "json_value",
    "mcp_tool_names",
    "missing_extra",
    "raised_by_model_call",
    "rebuilt",
    "replay_target",
    "replaying",
    "request_record",
    "return_type",
    "spool_line",
    "spool_path_for",
]
