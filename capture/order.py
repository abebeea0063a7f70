"""The order tool calls ran in, as a replay journals it: the recording's where it agrees.

The order the code ran a response's calls in is a fact of its own: each outcome keeps
``ran_after``, the positions of the step's calls that had finished before it started on
the same thread and asyncio task (`journal.ActionCommitted`): one after the other there is
the order the code wrote. Calls on other threads or tasks (a ``ThreadPoolExecutor``,
``asyncio.gather``) run in an order the machine's timing decides, so they constrain
nothing (`strand` says where code runs one statement after another).

A replay journals the recording's ``ran_after`` wherever what it saw agrees with it
(`RecordedOrder`): a recording of concurrent calls, whose timing is the machine's, and a
replay whose stand-ins answer at once then write the same events, while a replay that
ran two calls the other way round, one after the other, writes what it saw and diverges
there. (How the outcomes themselves are journaled in proposal order is
`capture.proposal_order`.)
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from journal import ActionCommitted, ActionFailed, ActionProposed, RecordedEvent

__all__ = ["RecordedOrder", "Strand", "strand"]

Positions = tuple[int, ...]
Strand = tuple[int, int | None]
"""Where code runs one statement after another: a thread, and the asyncio task in it."""


def strand() -> Strand:
    """The thread and the asyncio task (if any) the caller runs in."""
    try:
        task = asyncio.current_task()
    except RuntimeError:  # no event loop running in this thread
        task = None
    return threading.get_ident(), None if task is None else id(task)


class RecordedOrder:
    """The order a recording's calls ran in, to judge the order a replay ran them in.

    Args:
        recording: the recorded session, by seq: its events, or their flat records (as
            `journal.export_session` writes them).
    """

    def __init__(self, recording: Iterable[RecordedEvent | Mapping[str, Any]]) -> None:
        self._at: dict[int, tuple[str, int, dict[int, Positions]]] = {}
        """For each outcome's seq: its call id and position, and the ``ran_after`` of its step."""
        step: dict[int, Positions] = {}
        calls: list[Any] = []
        taken: set[int] = set()
        for item in recording:
            seq, proposed, call_id, ran_after = _facts(item)
            if proposed is not None:
                step, calls, taken = {}, proposed, set()
            elif call_id is not None:
                position = next(
                    (i for i, call in enumerate(calls) if call == call_id and i not in taken),
                    None,
                )
                if position is None:
                    continue
                taken.add(position)
                step[position] = tuple(ran_after or ())
                self._at[seq] = (str(call_id), position, step)

    def ran_after(self, seq: int, call_id: str, observed: Positions | None) -> Positions | None:
        """What to journal as ``ran_after`` at ``seq`` for ``call_id``, which saw ``observed``.

        The recording's, unless the replay ran this call after one that the recording ran
        after it (the two ran the other way round, one after the other): then ``observed``,
        and the replay diverges at ``seq``. Also ``observed`` where the recording holds no
        outcome of ``call_id`` at ``seq`` (a replay gone off the record, re-recording).
        """
        found = self._at.get(seq)
        if found is None or found[0] != call_id:
            return observed
        _, position, step = found
        reversed_pair = any(position in step.get(other, ()) for other in observed or ())
        if reversed_pair:
            return observed
        return step.get(position) or None


def _facts(item: RecordedEvent | Mapping[str, Any]) -> tuple[int, list[Any] | None, Any, Any]:
    """An event's seq, its proposed call ids, or the call id and ``ran_after`` of its outcome."""
    if isinstance(item, RecordedEvent):
        event = item.event
        if isinstance(event, ActionProposed):
            return item.seq, [call.call_id for call in event.calls], None, None
        if isinstance(event, (ActionCommitted, ActionFailed)):
            return item.seq, None, event.call_id, event.ran_after
        return item.seq, None, None, None
    kind, seq = item.get("type"), item.get("seq")
    if not isinstance(seq, int):
        return -1, None, None, None
    if kind == "action_proposed":
        calls = item.get("calls") or []
        return seq, [call.get("call_id") for call in calls if isinstance(call, Mapping)], None, None
    if kind in ("action_committed", "action_failed"):
        return seq, None, item.get("call_id"), item.get("ran_after")
    return seq, None, None, None
