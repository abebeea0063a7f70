"""Tool outcomes journaled in the order the model proposed the calls, whatever order they end in.

Frameworks and user code run the calls of one response concurrently; their outcomes are
journaled in proposal order (as the agentloop runtime commits them), so a capture and
its replay write the same sequence whichever call finishes first. Each outcome keeps the
order it ran in (``ran_after``, `capture.order`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from .order import Strand, strand
from .recorder import Recorder

__all__ = ["InProposalOrder"]


class InProposalOrder:
    """Journals the outcomes of one response's calls in the order the model proposed them.

    ``add`` takes a call's write (a result, a failure, a rejection) when the call finishes
    and writes every waiting outcome whose earlier calls are journaled already; ``flush``
    (when the step ends) writes the rest, skipping calls that never ran (an unknown tool,
    a final-output call). ``finished`` (taken when a call starts) and ``add``'s
    ``started_after`` give an outcome its ``ran_after``. ``add`` is called where the call
    ran (its thread and task).
    """

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder
        self._waiting: dict[str, list[Callable[[], object]]] = {}
        self._finished: dict[int, Strand] = {}

    def finished(self) -> frozenset[int]:
        """Positions of the step's calls finished on the caller's thread and task."""
        here = strand()
        return frozenset(position for position, ran in self._finished.items() if ran == here)

    def add(
        self,
        call_id: str,
        write: Callable[..., object],
        *,
        started_after: Collection[int] | None = None,
    ) -> None:
        """Queue the write that answers ``call_id``; write what is in order now.

        With ``started_after`` (what `finished` said when the call started), ``write`` is
        called with ``ran_after``: those positions sorted, or None when there are none.
        """
        position = self._position(call_id)
        if position is not None:
            self._finished[position] = strand()
        if started_after is not None:
            ran_after = tuple(sorted(started_after)) or None
            self._waiting.setdefault(call_id, []).append(lambda: write(ran_after=ran_after))
        else:
            self._waiting.setdefault(call_id, []).append(write)
        self._write(complete=False)

    def flush(self) -> None:
        """Write every queued outcome, in proposal order; the next step starts afresh."""
        self._write(complete=True)
        self._waiting.clear()
        self._finished.clear()

    def _position(self, call_id: str) -> int | None:
        """The first position of ``call_id`` in the model output not yet finished."""
        return next(
            (
                i
                for i, call in enumerate(self.recorder.proposal)
                if call.call_id == call_id and i not in self._finished
            ),
            None,
        )

    def _write(self, *, complete: bool) -> None:
        for call in self.recorder.pending:
            writes = self._waiting.get(call.call_id)
            if not writes:
                if complete:
                    continue
                return
            writes.pop(0)()
