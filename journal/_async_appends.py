"""Appends of asyncio code on SQLite: queued by the coroutines, written in batches by one
thread at a time.

Handing each append to a thread of the pool (as `Journal.append_async` does on a store
without group commit) costs two hand-offs between threads per append: to a worker, and back
to the event loop; and the workers then take turns at the interpreter lock with each other.
Here a call queues its write and awaits a future. One thread of the process's pool at a time
(the drainer) takes everything queued, runs it as one batch of the journal's group commit
(`GroupCommit.run_many`: one transaction, each write in its own savepoint, threads' appends
joining the same commits), and settles the batch's futures with one call into each event
loop. Appends made while it commits queue for its next batch. A future is settled only after
the commit that holds its write, as a thread's append returns only then.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ._group_commit import GroupCommit, append_pool
from ._sqltx import SqlTx

if TYPE_CHECKING:
    import asyncio

__all__ = ["AsyncAppends"]

T = TypeVar("T")

_Queued = tuple[Callable[[SqlTx], Any], Callable[[Any], None], "asyncio.Future[Any]"]
"""A write, what runs once it is committed, and the future its caller awaits."""


class AsyncAppends:
    """The queue of writes awaited by coroutines, drained into ``group`` (see the module)."""

    def __init__(self, group: GroupCommit) -> None:
        self._group = group
        self._mutex = threading.Lock()
        self._queue: list[_Queued] = []
        self._draining = False
        """True while a drainer has been handed the queue (it runs, or is about to)."""

    @property
    def waiting(self) -> int:
        """How many writes are queued for the drainer's next batch (not the one it writes)."""
        with self._mutex:
            return len(self._queue)

    async def run(self, write: Callable[[SqlTx], T], committed: Callable[[T], None]) -> T:
        """Run ``write`` in a (shared) transaction; return what it returned, once committed.

        What ``write`` raises is raised here, translated as `GroupCommit.run_many` does.
        Cancelling the awaiting task does not withdraw the write: it may still be committed.
        """
        import asyncio  # here: the other users of a journal need not load asyncio

        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        with self._mutex:
            self._queue.append((write, committed, future))
            start, self._draining = not self._draining, True
        if start:
            try:
                append_pool().submit(self._drain)
            except BaseException as error:  # no thread to run it (the interpreter shuts down)
                with self._mutex:  # none will: what queued behind this call fails with it
                    queued, self._queue, self._draining = self._queue, [], False
                _settle([(other, error) for _, _, other in queued if other is not future])
                raise
        return await future

    def _drain(self) -> None:
        """Write what is queued, batch after batch, until the queue is empty."""
        while True:
            with self._mutex:
                batch, self._queue = self._queue, []
                if not batch:
                    self._draining = False
                    return
            outcomes: list[Any]
            try:
                outcomes = self._group.run_many([(write, done) for write, done, _ in batch])
            except BaseException as error:  # the commit itself was interrupted: none written
                outcomes = [error] * len(batch)
            futures = [future for _, _, future in batch]
            _settle(list(zip(futures, outcomes, strict=True)))


def _settle(settled: list[tuple[asyncio.Future[Any], Any]]) -> None:
    """Hand each future its outcome in its own event loop (one call into each loop)."""
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], Any]]] = {}
    for future, outcome in settled:
        by_loop.setdefault(future.get_loop(), []).append((future, outcome))
    for loop, outcomes in by_loop.items():
        try:
            loop.call_soon_threadsafe(_resolve, outcomes)
        except RuntimeError:  # the loop is closed: no one awaits these any more
            pass


def _resolve(outcomes: list[tuple[asyncio.Future[Any], Any]]) -> None:
    """In the futures' loop: set each one's result or exception (a cancelled one is left)."""
    for future, outcome in outcomes:
        if future.done():
            continue
        if isinstance(outcome, BaseException):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)
