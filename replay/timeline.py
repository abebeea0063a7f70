"""The state of a session after any seq, through snapshots, never a refold from zero.

Snapshots of the folded state are kept every `SNAPSHOT_INTERVAL` events in a derived
table of the journal, keyed by (session, seq, fold version). They are built on first
need: the first question about a late seq folds forward once and leaves snapshots behind;
every later question folds at most ``interval - 1`` events from the nearest snapshot.
They are derived data: never exported, checked by `verify`, rebuilt when the fold changes.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from journal import FOLD_VERSION, InvalidInputError, Journal, SessionState, StoreError, apply

__all__ = ["SNAPSHOT_INTERVAL", "StateChange", "Timeline", "state_changes"]

SNAPSHOT_INTERVAL = 256
"""Events between two stored snapshots."""


@dataclass(frozen=True)
class StateChange:
    """One field of the state that an event changed."""

    path: str
    before: Any
    after: Any


def state_changes(before: SessionState, after: SessionState) -> list[StateChange]:
    """The fields that differ between two states (nested objects compared one level down)."""
    old, new = before.model_dump(mode="json"), after.model_dump(mode="json")
    changes: list[StateChange] = []
    for key in new:
        if old.get(key) == new[key]:
            continue
        if isinstance(old.get(key), dict) and isinstance(new[key], dict):
            for sub in sorted(set(old[key]) | set(new[key])):
                if old[key].get(sub) != new[key].get(sub):
                    changes.append(
                        StateChange(f"{key}.{sub}", old[key].get(sub), new[key].get(sub))
                    )
        else:
            changes.append(StateChange(key, old.get(key), new[key]))
    return changes


class Timeline:
    """Random access to the state after any seq of one session.

    Args:
        journal: where the session is (and where snapshots are kept).
        session_id: the session.
        interval: events between snapshots.
        cache: states kept in memory (the most recently asked).
    """

    def __init__(
        self,
        journal: Journal,
        session_id: str,
        *,
        interval: int = SNAPSHOT_INTERVAL,
        cache: int = 128,
    ) -> None:
        self.journal = journal
        self.session_id = session_id
        self.interval = interval
        self._cache: OrderedDict[int, SessionState] = OrderedDict()
        self._cache_size = cache
        self._store_snapshots = True
        self.last_seq = journal.require(session_id).last_seq

    def refresh(self) -> int:
        """Re-read the session's last seq (it may have grown) and return it."""
        self.last_seq = self.journal.require(self.session_id).last_seq
        return self.last_seq

    def state_at(self, seq: int) -> SessionState:
        """The state after event ``seq`` (``-1`` for the state before any event)."""
        if seq < -1 or seq > self.last_seq:
            self.refresh()
            if seq < -1 or seq > self.last_seq:
                raise InvalidInputError(
                    f"session {self.session_id}: seq {seq} is outside 0..{self.last_seq}"
                )
        if seq == -1:
            return SessionState()
        cached = self._cache.get(seq)
        if cached is not None:
            self._cache.move_to_end(seq)
            return cached
        state = self._fold_to(seq)
        self._remember(seq, state)
        return state

    def changes_at(self, seq: int) -> list[StateChange]:
        """What event ``seq`` changed in the state."""
        return state_changes(self.state_at(seq - 1), self.state_at(seq))

    def _remember(self, seq: int, state: SessionState) -> None:
        self._cache[seq] = state
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)

    def _fold_to(self, seq: int) -> SessionState:
        found = self.journal.load_snapshot(self.session_id, seq, FOLD_VERSION)
        base_seq, state = found if found is not None else (-1, SessionState())
        nearer = max((s for s in self._cache if base_seq < s < seq), default=None)
        if nearer is not None:
            base_seq, state = nearer, self._cache[nearer]
        fresh: list[tuple[int, SessionState]] = []
        for recorded in self.journal.events(self.session_id, start=base_seq + 1, stop=seq + 1):
            state = apply(state, recorded)
            if (recorded.seq + 1) % self.interval == 0:
                fresh.append((recorded.seq, state))
        if fresh and self._store_snapshots:
            try:
                self.journal.save_snapshots(self.session_id, FOLD_VERSION, fresh)
            except StoreError:
                # A full, read-only or busy journal still answers: snapshots are derived
                # data, kept in memory for this timeline instead.
                self._store_snapshots = False
        if fresh and not self._store_snapshots:
            for snapshot_seq, snapshot in fresh:
                self._remember(snapshot_seq, snapshot)
        return state
