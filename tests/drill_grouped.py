"""The writers the group-commit crash drill kills: sessions appended at once.

``write_grouped`` runs one thread per session on one shared `Journal` (so their appends
share commits), each appending one event per call forever, and reports ``SESSION SEQ``
after every append that returned. ``write_grouped_async`` does the same from coroutines
of one event loop awaiting `Journal.append_async` (written in batches by a pool thread).
"""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import Callable, Iterator
from itertools import count

from journal import AgentCompleted, AgentEvent, Journal, SessionStarted, UserInput


def _events(rng: random.Random) -> Iterator[AgentEvent]:
    """A session's start, then turns of a question and an answer of random sizes."""
    yield SessionStarted(agent="tests.drill_grouped:none")
    for turn in count():
        yield UserInput(text=f"question {turn} " + "q" * rng.randint(0, 3000))
        yield AgentCompleted(answer=f"answer {turn} " + "a" * rng.randint(0, 3000))


def write_grouped(path: str, prefix: str, threads: int, report: Callable[[str], None]) -> None:
    """Append to sessions ``PREFIX-0`` ... from ``threads`` threads into ``path`` until killed."""
    journal = Journal.open(path)
    start = threading.Barrier(threads)

    def run(index: int) -> None:
        session_id = f"{prefix}-{index}"
        start.wait()
        for event in _events(random.Random(f"{prefix}/{index}")):
            seq = journal.append(session_id, [event])
            report(f"{session_id} {seq}")

    workers = [threading.Thread(target=run, args=(index,)) for index in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()


def write_grouped_async(
    path: str, prefix: str, coroutines: int, report: Callable[[str], None]
) -> None:
    """`write_grouped` with a coroutine per session awaiting `Journal.append_async`."""
    journal = Journal.open(path)

    async def run(index: int) -> None:
        session_id = f"{prefix}-{index}"
        for event in _events(random.Random(f"{prefix}/{index}")):
            seq = await journal.append_async(session_id, [event])
            report(f"{session_id} {seq}")

    async def main() -> None:
        await asyncio.gather(*(run(index) for index in range(coroutines)))

    asyncio.run(main())
