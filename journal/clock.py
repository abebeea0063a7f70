"""Clocks: the time an event is written at.

A `Clock` is asked for the time of the event about to take ``seq``: the live clock
(`system_clock`) ignores the seq; a replay's clock returns the time the recording has at
that seq, so a re-run writes the recorded times. The runtime and the recorder take one.
A journal itself stamps appends given no time with its `Now` (`utc_now` by default).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

__all__ = ["Clock", "Now", "system_clock", "utc_now"]

Clock = Callable[[int], datetime]
"""The time at which event ``seq`` is written."""

Now = Callable[[], datetime]
"""The current time, for a journal's appends."""


def utc_now() -> datetime:
    """The current UTC time (a journal's default `Now`)."""
    return datetime.now(UTC)


def system_clock(seq: int) -> datetime:
    """The live `Clock`: the current UTC time, whatever the seq."""
    return utc_now()
