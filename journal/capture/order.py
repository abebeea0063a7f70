"""Tool outcomes journaled in the order the model proposed the calls, whatever order they finish in.

Frameworks and user code run the calls of one response concurrently; their outcomes are
journaled in proposal order (as the agentloop runtime commits them), so a capture and
its replay write the same sequence whichever call finishes first.
"""

from __future__ import annotations

from collections.abc import Callable

from .recorder import Recorder

__all__ = ["InProposalOrder"]


class InProposalOrder:
    """Journals the outcomes of one response's calls in the order the model proposed them.

    ``add`` takes a call's write (a result, a failure, a rejection) when the call finishes
    and writes every waiting outcome whose earlier calls are journaled already; ``flush``
    (when the step ends) writes the rest, skipping calls that never ran (an unknown tool,
    a final-output call).
    """

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder
        self._waiting: dict[str, list[Callable[[], object]]] = {}

    def add(self, call_id: str, write: Callable[[], object]) -> None:
        """Queue the write that answers ``call_id``; write what is in order now."""
        self._waiting.setdefault(call_id, []).append(write)
        self._write(complete=False)

    def flush(self) -> None:
        """Write every queued outcome, in proposal order."""
        self._write(complete=True)
        self._waiting.clear()

    def _write(self, *, complete: bool) -> None:
        for call in self.recorder.pending:
            writes = self._waiting.get(call.call_id)
            if not writes:
                if complete:
                    continue
                return
            writes.pop(0)()
