"""Timelines of state, deterministic re-run, fork, diff and regression fixtures.

Replay a recorded session with the current code and see where it differs::

    from journal import Journal
    from replay import Replayer

    with Journal.open("agent-journal.db") as journal:
        result = Replayer().replay(journal, "demo-refund-buggy-s0")
        print(result.verdict, result.first_divergence)
"""

from .diff import Change, DiffResult, DiffRow, align, diff_records, field_changes
from .fork import ForkResult, fork
from .loop import RecordedModel, RecordedToolPort, replay_loop
from .normalize import (
    DEFAULT_RULES,
    NormalizationRules,
    fingerprint,
    normalize,
    normalized_bytes,
    record_of,
)
from .recorded import (
    LiveDifference,
    RecordedClock,
    RecordedLLM,
    RecordedOutcome,
    RecordedTools,
    RecordingExhausted,
    UnrecordedCall,
)
from .replayer import Divergence, DivergenceError, Replayer, ReplayResult, agent_for, compare
from .timeline import SNAPSHOT_INTERVAL, StateChange, Timeline, state_changes

__all__ = [
    "DEFAULT_RULES",
    "SNAPSHOT_INTERVAL",
    "Change",
    "DiffResult",
    "DiffRow",
    "Divergence",
    "DivergenceError",
    "ForkResult",
    "LiveDifference",
    "NormalizationRules",
    "RecordedClock",
    "RecordedLLM",
    "RecordedModel",
    "RecordedOutcome",
    "RecordedToolPort",
    "RecordedTools",
    "RecordingExhausted",
    "ReplayResult",
    "Replayer",
    "StateChange",
    "Timeline",
    "UnrecordedCall",
    "agent_for",
    "align",
    "compare",
    "diff_records",
    "field_changes",
    "fingerprint",
    "fork",
    "normalize",
    "normalized_bytes",
    "record_of",
    "replay_loop",
    "state_changes",
]
