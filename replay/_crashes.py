"""Where a replayed loop's recording crashed, raised again by the call it came out of, once.

A recorder's session an exception ended holds its halt (rule ``error``), whose record notes
where the exception was raised (`capture.raised_at`). A replay's model or tool port
raises it again at that seq when the code calls it from a line, and a call on that line,
that the exception came out of (a 503 of the model API, a tool's error); not when the
code's own line raised it (a bug, now fixed: the replay goes on past it), and only once (a
retry the code now makes is not refused again: it goes on too). A crash recorded before
tracebacks were noted is raised by the first call at its place, as it was.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from types import FrameType
from typing import Any

from capture import REPLAY_STOPPED, frame_note, rebuilt
from journal import AgentHalted, HaltSession, RecordedEvent, ReplayedFailure

_OWN_PACKAGES = frozenset({"journal", "replay"})
"""Packages whose frames stand between the code and its replayed port (the port itself,
an integration's model)."""


class RecordedCrashes:
    """The crashes of a recorded session (its halts with rule ``error``), by seq.

    One is shared by a replay's model and tool ports.
    """

    def __init__(self, recorded: Sequence[RecordedEvent]) -> None:
        self._halts = {
            item.seq: item.event
            for item in recorded
            if isinstance(item.event, AgentHalted) and item.event.rule == "error"
        }
        self._raised: set[int] = set()

    def at(self, seq: int) -> AgentHalted | None:
        """The recorded crash at ``seq``, if any."""
        return self._halts.get(seq)

    def raised_again(self, halt: AgentHalted) -> BaseException | None:
        """The exception to raise for ``halt`` from the port call being made, if any.

        The one that came out of this call: the halt's own or one it was raised while
        handling (`capture.raised_at`), as its own type (`capture.rebuilt`);
        a `journal.ReplayedFailure` with the halt's message when none was recorded. Where
        it came out of a call around this one on its line (``check(llm(...))``), after this
        one returned, the recording holds nothing of what this one returned: the replay
        stops there, saying so (`journal.HaltSession`, rule ``replay_stopped``). None when
        none came out of this call, or it was raised once already.
        """
        seq = next((at for at, recorded in self._halts.items() if recorded is halt), None)
        if seq is None or seq in self._raised:
            return None
        caller = _port_caller()
        record, around = _came_out_of(halt, caller)
        if record is None and around is None:
            return None
        self._raised.add(seq)
        if around is not None and caller is not None:
            return HaltSession(
                REPLAY_STOPPED,
                f"replay stopped at seq {seq}: the recording holds nothing of what "
                f"{caller[2]} returned: the session crashed in {around} ({halt.reason}) "
                "before it was journaled",
            )
        if record:
            error = rebuilt(record)
            if isinstance(error, Exception):
                return error
        return ReplayedFailure(halt.reason, "infrastructure")


def _port_caller() -> list[str] | None:
    """The code that called the replayed port, noted as `capture.raised_at` notes it.

    The first frame outside agent-journal's own packages.
    """
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and (
        str(frame.f_globals.get("__name__", "")).partition(".")[0] in _OWN_PACKAGES
    ):
        frame = frame.f_back
    if frame is None:
        return None
    return frame_note(frame.f_code, frame.f_lineno, frame.f_lasti)


def _came_out_of(
    halt: AgentHalted, caller: list[str] | None
) -> tuple[dict[str, Any] | None, str | None]:
    """The record of the exception of ``halt`` that came out of the call the code makes
    now (``caller``), or the call around it on its line that one came out of.

    One came out of this call when its traceback passed the same function, line and call,
    into what that call called; of a call around it when the traceback passed the same
    function and line in a call whose text holds this one's. ``(None, None)`` when neither;
    the halt's own record (``{}`` for none) when it was recorded before tracebacks were
    noted (raised by the call at its place, as it was).
    """
    own = dict(halt.error) if halt.error is not None else {}
    traces = own.get("raised_at")
    if not isinstance(traces, list):
        return own, None
    if caller is None:
        return None, None
    around = None
    for index, trace in enumerate(traces):
        frames = trace.get("frames") if isinstance(trace, dict) else None
        for frame in frames[:-1] if isinstance(frames, list) else ():
            if frame == caller:
                error = own if index == 0 else trace.get("error")
                return (error if isinstance(error, dict) else {}), None
            if frame[:2] == caller[:2] and caller[2] and caller[2] in str(frame[2]):
                around = str(frame[2])
    return None, around
