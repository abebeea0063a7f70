r"""Server-sent events, read as the bytes arrive: each whole event with its raw bytes.

The proxy forwards a stream event by event, as each one is complete (its blank line has
arrived), and keeps each event's ``data`` parsed for the journal. Lines end in ``\n``,
``\r\n`` or ``\r``; comments (``: ping``) are events with no data; ``data`` lines of one
event are joined by ``\n``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from journal import loads_exact

__all__ = ["SseEvent", "SseReader"]

_END = re.compile(rb"\r\n\r\n|\n\n|\r\r|\r\n\n|\n\r\n")
"""The blank line that ends an event (a line ending twice, in any of the three forms)."""


@dataclass(frozen=True)
class SseEvent:
    """One event: its raw bytes (what is forwarded), its name and its data."""

    raw: bytes
    event: str | None
    data: str | None

    def json(self) -> Any:
        """The data parsed as JSON, or the data text when it is not JSON (``[DONE]``)."""
        if self.data is None:
            return None
        try:
            return loads_exact(self.data)
        except ValueError:
            return self.data


class SseReader:
    """Split a stream's bytes into whole events as they arrive (`feed`), the rest at `end`."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, data: bytes) -> list[SseEvent]:
        """The events ``data`` completes (with what came before it)."""
        self._buffer += data
        events: list[SseEvent] = []
        while True:
            found = _END.search(self._buffer)
            if found is None:
                return events
            raw, self._buffer = self._buffer[: found.end()], self._buffer[found.end() :]
            events.append(_parsed(raw))

    def end(self) -> bytes:
        """The bytes after the last whole event (an event cut off), handed over once."""
        rest, self._buffer = self._buffer, b""
        return rest


def _parsed(raw: bytes) -> SseEvent:
    name: str | None = None
    data: list[str] = []
    for line in raw.decode("utf-8", "replace").splitlines():
        if not line or line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "event":
            name = value
        elif field == "data":
            data.append(value)
    return SseEvent(raw, name, "\n".join(data) if data else None)
