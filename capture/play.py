"""Capturing or replaying: which session captured code is in, and where its outcomes come from.

`capture.Capture` journals the user's own code at its boundaries: the model client
and the tools. In production each wrapped call runs for real and is journaled. A replay
runs the same code, unchanged, inside `replaying`: the wrapped calls are journaled the
same way, but a `Player` decides their outcomes (the recording's, or a live run it
allows). Which applies is a context variable, so the user's code needs no replay-only
branch, and sessions of concurrent requests (threads with their own context, asyncio
tasks) never mix.

Nothing here imports `replay`: the replay package implements `Player`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Protocol

from journal import Clock, HaltSession, Journal

from .order import RecordedOrder

__all__ = [
    "REPLAY_STOPPED",
    "AsyncToolPlayer",
    "FailedCall",
    "Player",
    "ReplayTarget",
    "ToolPlay",
    "halt_of",
    "replay_target",
    "replaying",
]

REPLAY_STOPPED = "replay_stopped"
"""The halt rule of a replay that stopped where the recording no longer fits (a request it
does not hold, a call it never ran, a call that may not run for real) and nothing live may
answer: the session says why it ended where it did (`journal.HaltSession`)."""


def halt_of(error: BaseException) -> HaltSession | None:
    """The `HaltSession` ``error`` is, or the one a group of exceptions holds alone.

    Code on anyio task groups (an MCP client session, ``asyncio.TaskGroup``) hands an
    exception of its block on inside a ``BaseExceptionGroup``; a halt raised there is
    still the halt.
    """
    if isinstance(error, HaltSession):
        return error
    if isinstance(error, BaseExceptionGroup):
        halts, rest = error.split(HaltSession)
        while halts is not None and rest is None:
            first = halts.exceptions[0]
            if isinstance(first, HaltSession):
                return first
            halts = first if isinstance(first, BaseExceptionGroup) else None
    return None


@dataclass(frozen=True)
class ToolPlay:
    """What a replay does with one tool call: run it for real, or give a recorded outcome.

    ``live`` runs the tool. Otherwise ``error`` (an `exception_record`) is raised again, or
    ``result`` is returned. ``as_sent`` says the recorded result is the text the code sent
    the model, not the tool's value: the recording took it from a message, no call of the
    tool having been journaled (a pool thread's call that two sessions waited for); the
    code is given the value that text encodes, as the tool's declared type, where it has
    one. ``unfinished`` marks a call the recording started and never
    finished (it was still running when the entry failed): an async call waits while the
    rest of the code runs, as it did, and raises ``unfinished`` when the code waits on it
    alone; a sync call raises it at once.
    """

    live: bool = False
    result: Any = None
    error: dict[str, Any] | None = None
    unfinished: BaseException | None = None
    as_sent: bool = False


@dataclass(frozen=True)
class FailedCall:
    """A recorded model call that raised, as a `Player` serves it: raise it again.

    ``error`` is the recorded exception (an `exception_record`), raised as its own type
    from the call; ``chunks`` the chunk bodies a stream had sent before it broke (None: the
    call was no stream, or raised before its first chunk), served first.
    """

    error: dict[str, Any]
    chunks: list[Any] | None = None


class Player(Protocol):
    """Where the outcomes of captured calls come from during a replay."""

    def model(self, seq: int, request: dict[str, Any], whole: dict[str, Any]) -> Any:
        """The recorded response body to serve, or None to call the live model.

        A stream's response is the list of its chunk bodies. A `FailedCall` is a call
        that raised in the recording: the wrapper raises it again. ``seq`` is where the
        response will be journaled; ``request`` is the request as the capture records it
        (see `capture.requests`), ``whole`` the request in full (its parameters and
        all its messages).

        Raises:
            HaltSession: no recorded response fits and no live model may answer.
        """
        ...

    def tool(
        self, tool: str, args: dict[str, Any], *, side_effects: bool, pure: bool = False
    ) -> ToolPlay:
        """What to do with a call of ``tool`` with ``args`` (exactly as the code passed them).

        ``side_effects`` and ``pure`` are how the tool was declared (`capture.ToolInfo`).

        Raises:
            HaltSession: the recording never ran this call and it may not run live.
        """
        ...

    def nested(self, tool: str | None, outer: str, *, side_effects: bool = False) -> None:
        """Allow a call made by the tool ``outer`` while it runs for real.

        The call is of the decorated tool ``tool``, or of the model (``tool`` None). It is
        part of ``outer``'s run: it runs, and is not journaled on its own.

        Raises:
            HaltSession: ``tool`` has side effects and may not run for real, or the model
                may not be called for real.
        """
        ...


class AsyncToolPlayer(Protocol):
    """Where a framework capture's tool calls go in a replay (`capture.frameworks`).

    The capture hands each call to `arun` instead of running it; in production it has
    none and runs the tool itself.
    """

    async def arun(
        self, tool: str, args: Mapping[str, Any], live: Callable[[], Awaitable[Any]] | None
    ) -> Any:
        """The outcome of a call of ``tool`` with ``args``.

        Its recorded result returned or its recorded exception raised, or, for a tool that
        runs for real, what ``live()`` gives (compared with the recording).
        """
        ...


@dataclass(frozen=True)
class ReplayTarget:
    """Where a replayed entry journals, and who decides its outcomes.

    ``order`` is the recording's order of the calls, which the replay journals wherever
    it ran them in an order the recording allows (`capture.RecordedOrder`).
    ``model_failures`` False journals no failed model calls: the recording predates them
    (`journal.predates`), so its replay writes what it holds.
    """

    journal: Journal
    session_id: str
    replay_of: str
    clock: Clock
    player: Player
    order: RecordedOrder | None = None
    model_failures: bool = True


_TARGET: ContextVar[ReplayTarget | None] = ContextVar("agent_journal_replay", default=None)


def replay_target() -> ReplayTarget | None:
    """The replay the current context runs in, if any."""
    return _TARGET.get()


@contextmanager
def replaying(target: ReplayTarget) -> Iterator[ReplayTarget]:
    """Run captured code as a replay: its next entry journals into ``target``."""
    token = _TARGET.set(target)
    try:
        yield target
    finally:
        _TARGET.reset(token)
