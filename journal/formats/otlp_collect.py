"""What ``agent-journal collect`` keeps between OTLP requests: traces until they are done.

A trace is done when its root span (no parent in the trace) has ended and no span of it
arrived for ``quiet`` seconds. Its session (by ``session.id`` / ``gen_ai.conversation.id``,
else the trace) is then mapped with every trace of that session received so far and
imported: a later trace of a stored conversation extends it when the stored session is
its prefix (its events are appended), and is a conflict otherwise, as ``import`` says.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..store import Journal
from .openai_import import ImportReport, import_converted
from .otlp_import import convert_batch, session_key
from .otlp_read import OtlpBatch

__all__ = ["TraceCollector"]


@dataclass
class _Pending:
    batch: OtlpBatch = field(default_factory=OtlpBatch)
    last: float = 0.0


class TraceCollector:
    """Buffers received spans and records by trace; `flush` imports the traces that are done."""

    def __init__(self, quiet: float = 2.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.quiet = quiet
        self.clock = clock
        self._lock = threading.Lock()
        self._traces: dict[str, _Pending] = {}
        self._orphans: dict[str, list[object]] = {}
        self._sessions: dict[str, OtlpBatch] = {}
        """Every batch of a session written so far (a continuation is mapped whole)."""

    def add(self, batch: OtlpBatch) -> None:
        """Take one request's spans and records."""
        now = self.clock()
        with self._lock:
            for span in batch.spans:
                pending = self._traces.setdefault(span.trace_id, _Pending())
                pending.batch.spans.append(span)
                pending.last = now
            for record in batch.logs:
                pending = self._traces.setdefault(record.trace_id or "", _Pending())
                pending.batch.logs.append(record)
                pending.last = now

    def _done(self, pending: _Pending, now: float, force: bool) -> bool:
        if not pending.batch.spans:
            return False
        ids = {span.span_id for span in pending.batch.spans}
        rooted = any(
            span.parent_id is None or span.parent_id not in ids for span in pending.batch.spans
        )
        return force or (rooted and now - pending.last >= self.quiet)

    def flush(self, journal: Journal, *, force: bool = False) -> ImportReport | None:
        """Import the sessions of the traces that are done (all of them with ``force``)."""
        now = self.clock()
        with self._lock:
            done = [tid for tid, p in self._traces.items() if tid and self._done(p, now, force)]
            if not done:
                return None
            touched: dict[str, OtlpBatch] = {}
            for trace_id in done:
                pending = self._traces.pop(trace_id)
                key = session_key(pending.batch.spans)
                whole = self._sessions.setdefault(key, OtlpBatch())
                whole.extend(pending.batch)
                touched[key] = whole
        converted = [
            convert_batch(batch, f"collect (session {key})") for key, batch in touched.items()
        ]
        return import_converted(journal, converted)
