"""What every replay path shares around running the code: where it writes, what follows the
recording, how it is judged, and when it is kept.

A path (the agentloop runtime, a hand-written loop) supplies only how to drive the code on
recorded ports (`Drive`). `replay_session` gives it a scratch journal and a
`RecordingFollower`, judges what it wrote (`replay._verdict.judge`), and copies the replay
into the journal when it was asked to save it, unless the replay ran with another
configuration and no live model: its recorded replies then answered a context they were
not recorded for, and such a run is reported, never kept.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from journal import Journal, RecordedEvent, SessionStarted, loads_strict

from ._follow import RecordingFollower
from ._session import free_session_id, load_recording
from ._verdict import ReplayResult, judge
from .normalize import DEFAULT_RULES, NormalizationRules
from .recorded import RecordedLLM, RecordedTools

__all__ = ["Drive", "Driver", "keep_replay", "replay_session"]


@dataclass(frozen=True)
class Drive:
    """How a run of the code on recorded ports went, as judging needs it."""

    llm: RecordedLLM
    tools: RecordedTools
    error: str | None
    """The one-line text of an exception that escaped the code, if any."""
    agent: str | None
    """The reference of what ran."""


Driver = Callable[[Journal, str, RecordingFollower, Sequence[RecordedEvent], SessionStarted], Drive]
"""``drive(scratch, replay_id, follower, recorded, started)``: run the code, writing the
session ``replay_id`` into ``scratch``, with recorded ports that consult ``follower``."""


def replay_session(
    journal: Journal,
    session_id: str,
    drive: Driver,
    *,
    save: bool = False,
    live_model: bool = False,
    rules: NormalizationRules = DEFAULT_RULES,
) -> ReplayResult:
    """Replay ``session_id`` through ``drive`` and judge it; keep it in ``journal`` on ``save``.

    ``live_model`` says the driver's model goes on live off the record: a replay with a
    changed configuration is then kept too (it re-records), otherwise not.

    Raises:
        SessionNotFoundError: no such session.
    """
    recorded, started = load_recording(journal, session_id)
    replay_id = free_session_id(journal, session_id, "replay")
    with Journal.open(":memory:") as scratch:
        follower = RecordingFollower(scratch, replay_id, recorded, rules)
        ran = drive(scratch, replay_id, follower, recorded, started)
        result = judge(
            recorded,
            list(scratch.events(replay_id)),
            replay_id=replay_id,
            saved=False,
            agent=ran.agent,
            rules=rules,
            error=ran.error,
            exhaustion=ran.llm.exhaustion,
            unrecorded=ran.tools.unrecorded,
            live_differences=ran.tools.live_differences,
            stopped_at=ran.llm.stopped_at,
            live_from=ran.llm.went_live_at,
        )
        if not save:
            return result
        if result.config_changes and not live_model:
            return replace(
                result,
                unsaved=(
                    "not saved: the configuration changed, so the recorded replies answered "
                    "a context they were not recorded for; replay with a live model "
                    "(--live-model) to re-record"
                ),
            )
        keep_replay(scratch, journal, replay_id)
    return replace(result, saved=True)


def keep_replay(scratch: Journal, journal: Journal, replay_id: str) -> None:
    """Copy a replay from its scratch journal into ``journal``, its chain computed there."""
    journal.import_records(
        replay_id,
        (
            (f"replay {replay_id}: seq {row.seq}", loads_strict(row.body))
            for row in scratch.stored_events(replay_id)
        ),
    )
