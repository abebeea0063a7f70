"""Following a recording while a re-run writes: does what it wrote so far still match?

A replay or a fork serves recorded model outputs only while the events it has written
match the recording, seq for seq, under the comparison's rules (`replay.normalize`): a
recorded reply is never paired with a context it was not recorded for. `RecordingFollower`
answers "still on the record?" incrementally, reading only what was written since it last
looked, so following a session of n events costs O(n) comparisons in all.
"""

from __future__ import annotations

from collections.abc import Sequence

from journal import Journal, RecordedEvent

from .diff import behaviour_rules
from .normalize import DEFAULT_RULES, NormalizationRules, fingerprint, record_of

__all__ = ["RecordingFollower"]


class RecordingFollower:
    """Whether a session being written still matches a recording, seq for seq.

    Seq 0 (``session_started``) is not compared: a run's configuration is judged apart
    (`replay.diff.config_changes`), and a fork's head names its lineage.

    Args:
        journal: where the new session is written.
        session_id: the new session.
        recorded: the recording it follows.
        rules: what counts as volatile.
        checked: the last seq already known to match (a fork's copied prefix).
    """

    def __init__(
        self,
        journal: Journal,
        session_id: str,
        recorded: Sequence[RecordedEvent],
        rules: NormalizationRules = DEFAULT_RULES,
        *,
        checked: int = 0,
    ) -> None:
        self.journal = journal
        self.session_id = session_id
        self.recorded = recorded
        self.rules = behaviour_rules(rules)
        self.checked = checked
        self.diverged_at: int | None = None
        """The first seq the new session wrote that differs from the recording."""

    def fits(self) -> bool:
        """True while everything written so far matches the recording."""
        if self.diverged_at is not None:
            return False
        for item in self.journal.events(self.session_id, start=self.checked + 1):
            if item.seq >= len(self.recorded) or fingerprint(
                record_of(item), self.rules
            ) != fingerprint(record_of(self.recorded[item.seq]), self.rules):
                self.diverged_at = item.seq
                return False
            self.checked = item.seq
        return True
