"""Timelines of state, deterministic re-run, fork, diff and regression fixtures.

Replay a recorded session with the current code and see where it differs::

    from journal import Journal
    from replay import Replayer

    with Journal.open("agent-journal.db") as journal:
        result = Replayer().replay(journal, "demo-refund-buggy-s0")
        print(result.verdict, result.first_divergence)
"""

from ._run import ForkPoint
from ._session import known_tools, session_records
from ._verdict import (
    Divergence,
    DivergenceError,
    Exhaustion,
    LiveDifference,
    ReplayResult,
    Served,
    UnrecordedCall,
    compare,
    configuration_divergence,
)
from .agent_replay import agent_for, replay_agent_session
from .diff import (
    ABSENT,
    Change,
    DiffResult,
    DiffRow,
    align,
    behaviour_rules,
    config_changes,
    diff_records,
    field_changes,
)
from .entry_replay import replay_entry
from .fixtures import FixtureReplay, replay_fixture, write_fixture
from .fork import ForkResult, fork
from .handwritten import RecordedModel, RecordedToolPort, replay_loop
from .normalize import (
    CONFIG_FIELDS,
    DEFAULT_RULES,
    NormalizationRules,
    describe,
    fingerprint,
    normalize,
    normalized_bytes,
    record_of,
)
from .options import EVERY_TOOL, ReplayOptions
from .recorded import (
    RecordedClock,
    RecordedLLM,
    RecordedOutcome,
    RecordedTools,
    RecordingExhausted,
)
from .replayer import Replayer
from .timeline import SNAPSHOT_INTERVAL, StateChange, Timeline, state_changes

__all__ = [
    "ABSENT",
    "CONFIG_FIELDS",
    "DEFAULT_RULES",
    "EVERY_TOOL",
    "SNAPSHOT_INTERVAL",
    "Change",
    "DiffResult",
    "DiffRow",
    "Divergence",
    "DivergenceError",
    "Exhaustion",
    "FixtureReplay",
    "ForkPoint",
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
    "ReplayOptions",
    "ReplayResult",
    "Replayer",
    "Served",
    "StateChange",
    "Timeline",
    "UnrecordedCall",
    "agent_for",
    "align",
    "behaviour_rules",
    "compare",
    "config_changes",
    "configuration_divergence",
    "describe",
    "diff_records",
    "field_changes",
    "fingerprint",
    "fork",
    "known_tools",
    "normalize",
    "normalized_bytes",
    "record_of",
    "replay_agent_session",
    "replay_entry",
    "replay_fixture",
    "replay_loop",
    "session_records",
    "state_changes",
    "write_fixture",
]
