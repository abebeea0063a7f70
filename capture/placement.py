"""Which captured session a wrapped call belongs to.

A session is open in the context that runs its entry (a context variable, so sessions of
concurrent requests on threads or asyncio tasks never mix). A call from a thread that did
not inherit that context (a ``ThreadPoolExecutor`` running a response's calls at once) is
placed by what the open sessions are waiting for (`session_of_call`); one that cannot be
placed runs unjournaled with a warning, or is refused in a replay.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from journal import HaltSession

from .play import REPLAY_STOPPED
from .session import CapturedSession
from .spool import LOG_INTERVAL

__all__ = ["current_session", "opened", "session_of_call"]

_SESSION: ContextVar[CapturedSession | None] = ContextVar("agent_journal_session", default=None)


_OPEN: list[CapturedSession] = []
"""The sessions open in this process, oldest first."""
_OPEN_LOCK = threading.Lock()
_THREAD = threading.local()
"""``opened``: this thread has opened a session (its calls outside one are outside one)."""
_UNPLACED_LOGGED = [-math.inf]
"""When a call no session could be found for was last logged (once per `LOG_INTERVAL`)."""
log = logging.getLogger("capture")


def current_session() -> CapturedSession | None:
    """The captured session the current context is in, if any."""
    return _SESSION.get()


def session_of_call(
    what: str, proposed: Callable[[], tuple[str, dict[str, Any]]] | None = None
) -> CapturedSession | None:
    """The session a wrapped call (of the client or a tool, named ``what``) belongs to.

    The current context's; else, for a call from a helper thread that did not inherit it
    (a ``ThreadPoolExecutor`` running a response's calls at once), the only session open
    in the process, or, with several open, the only one whose model proposed this very
    call and is waiting for it (``proposed`` gives a tool call's name and arguments): a
    server's concurrent requests each run their own calls on a pool. A thread that opened
    a session itself (a request's, a replay's) is a helper only for such a call (a pool's
    thread runs requests and calls alike): its other calls outside a session are outside
    one. When nothing tells which (a model call, the same call waiting in two
    sessions): in production the call runs as it is, unjournaled, and a warning says so
    (at most one per 10 s); while a replay is open it is refused (`HaltSession`, rule
    ``replay_stopped``), so a replay never runs a tool for real that it should have
    served. ``contextvars.copy_context().run`` around the thread's work carries the
    session there.
    """
    session = _SESSION.get()
    if session is not None:
        return session
    with _OPEN_LOCK:
        open_now = list(_OPEN)
    if not open_now:
        return None
    opened = getattr(_THREAD, "opened", False)
    if len(open_now) == 1 and not opened:
        return open_now[0]
    if proposed is not None:
        tool, args = proposed()
        waiting = [s for s in open_now if s.waits_for(tool, args)]
        if len(waiting) == 1:
            return waiting[0]
    if opened:
        return None
    unplaced = (
        f"{what} was called outside the context of its session (from a thread that did not "
        f"inherit it?) while {len(open_now)} sessions are open in this process, so it "
        "cannot be told which one it belongs to"
    )
    if any(open_session.player is not None for open_session in open_now):
        raise HaltSession(
            REPLAY_STOPPED,
            f"{unplaced}; a replay does not run it (contextvars."
            "copy_context().run carries the session into the thread)",
        )
    now = time.monotonic()
    if now - _UNPLACED_LOGGED[0] >= LOG_INTERVAL:
        _UNPLACED_LOGGED[0] = now
        log.warning(
            "%s: it ran unjournaled (contextvars.copy_context().run carries the session into "
            "the thread)",
            unplaced,
        )
    return None


@contextmanager
def opened(session: CapturedSession) -> Iterator[None]:
    """Open ``session`` in the current context (and in this process) for the block."""
    token = _SESSION.set(session)
    _THREAD.opened = True
    with _OPEN_LOCK:
        _OPEN.append(session)
    try:
        yield
    finally:
        with _OPEN_LOCK:
            _OPEN.remove(session)
        _SESSION.reset(token)
