"""Group commit on SQLite: concurrent appends share a transaction and its commit.

The leader is held inside its transaction (its first hash waits for the test) while the
other callers queue up behind it, so what is grouped is decided by the test, not by the
scheduler: the leader commits alone, the queue commits next, as one.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from journal import (
    AgentCompleted,
    AgentEvent,
    ConflictError,
    InvalidEventError,
    Journal,
    SessionStarted,
    StoreError,
    UnplannedWriteError,
    UserInput,
)
from journal.sqlite import SQLiteJournal

from .helpers import foreign

START = SessionStarted(agent="tests.group:none")
BENCH = Path(__file__).resolve().parents[1] / "bench" / "group_commit_bench.py"
WAIT = 30.0
"""Seconds a test waits for a thread before it fails (never reached when all is well)."""


def _statements(journal: Journal) -> list[str]:
    """Every statement the journal's connection runs from now on (its first word or two)."""
    seen: list[str] = []
    journal._conn.set_trace_callback(  # type: ignore[attr-defined]
        lambda text: seen.append(" ".join(text.split()[:2]).upper())
    )
    return seen


def _text(event: AgentEvent) -> str | None:
    """A user input's text (None for any other event)."""
    return event.text if isinstance(event, UserInput) else None


def _commits(statements: list[str]) -> int:
    return sum(text.startswith("COMMIT") for text in statements)


class Held:
    """Holds the leader of the next commit inside its transaction until `release`.

    The journal's hasher waits at its first call, which an append of a new session makes
    inside the transaction (there is no cached head to plan on before it).
    """

    def __init__(self, journal: Journal) -> None:
        self.entered = threading.Event()
        self._release = threading.Event()
        original = journal.hasher

        def hasher(previous: str, body: bytes) -> str:
            if not self.entered.is_set():
                self.entered.set()
                assert self._release.wait(WAIT)
            return original(previous, body)

        journal.hasher = hasher

    def release(self) -> None:
        self._release.set()


def _queued(journal: Journal, count: int) -> None:
    """Wait until ``count`` appends are queued behind the commit in progress."""
    deadline = time.monotonic() + WAIT
    while journal._group.waiting < count:  # type: ignore[attr-defined]
        assert time.monotonic() < deadline, "the appends never queued"
        time.sleep(0.001)


@contextmanager
def _calls(calls: list[Callable[[], Any]]) -> Iterator[list[Any]]:
    """Run each call on a thread of its own; the list holds each one's result or exception
    once the block ends."""
    outcomes: list[Any] = [None] * len(calls)

    def run(index: int) -> None:
        try:
            outcomes[index] = calls[index]()
        except Exception as e:
            outcomes[index] = e

    threads = [threading.Thread(target=run, args=(index,)) for index in range(len(calls))]
    for thread in threads:
        thread.start()
    try:
        yield outcomes
    finally:
        for thread in threads:
            thread.join(WAIT)
            assert not thread.is_alive()


def _grouped(
    journal: Journal, first: Callable[[], Any], rest: list[Callable[[], Any]]
) -> tuple[Any, list[Any], list[str]]:
    """Run ``first`` as the held leader and ``rest`` queued behind it, then let them go.

    Returns what ``first`` and each of ``rest`` returned (or raised), and the statements run.
    """
    held = Held(journal)
    with _calls([first]) as leader:
        assert held.entered.wait(WAIT)
        statements = _statements(journal)
        with _calls(rest) as outcomes:
            _queued(journal, len(rest))
            held.release()
    journal._conn.set_trace_callback(None)  # type: ignore[attr-defined]
    return leader[0], outcomes, statements


def test_appends_queued_behind_a_commit_share_the_next_one(tmp_path: Path) -> None:
    with Journal.open(tmp_path / "j.db") as journal:
        sessions = [f"s{n}" for n in range(8)]
        first, outcomes, statements = _grouped(
            journal,
            lambda: journal.append(sessions[0], [START]),
            [
                lambda sid=sid: journal.append(sid, [START, UserInput(text=sid)])
                for sid in sessions[1:]
            ],
        )
        assert (first, outcomes) == (0, [1] * 7)
        assert _commits(statements) == 2  # the leader's own, then the seven queued, at once
        assert statements.count("SAVEPOINT AGENT_JOURNAL_GROUPED") == 7
        for sid in sessions[1:]:
            assert [_text(e.event) for e in journal.events(sid, start=1)] == [sid]
        assert journal.verify().ok


def test_a_failing_append_in_a_group_fails_only_its_caller(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    with Journal.open(path) as journal:
        for sid in ("a", "b", "c", "d"):
            journal.append(sid, [START])
        with foreign(path) as conn:  # a foreign trigger that drops session d's rows
            conn.execute(
                "CREATE TRIGGER drop_d BEFORE INSERT ON events WHEN NEW.session_id = 'd' "
                "BEGIN SELECT RAISE(IGNORE); END"
            )
        calls: list[Callable[[], Any]] = [
            lambda: journal.append("a", [UserInput(text="a1")]),
            lambda: journal.append("b", [UserInput(text="b1")], expected_seq=5),  # conflict
            lambda: journal.append("a", [UserInput(text="a2")]),  # a again, on a1
            lambda: journal.append("c", [START]),  # a second start: rejected
            lambda: journal.append("d", [UserInput(text="d1")]),  # dropped: unplanned
            lambda: journal.append("b", [UserInput(text="b1")], expected_seq=1),
            lambda: journal.append("c", [UserInput(text="c1")]),
        ]
        first, outcomes, statements = _grouped(
            journal, lambda: journal.append("new", [START]), calls
        )
        assert first == 0 and _commits(statements) == 2
        a1, conflict, a2, second_start, dropped, b1, c1 = outcomes
        assert ({a1, a2}, b1, c1) == ({1, 2}, 1, 1)  # a1 and a2 in the order they queued
        assert isinstance(conflict, ConflictError)
        assert isinstance(second_start, InvalidEventError)
        assert isinstance(dropped, UnplannedWriteError)
        with foreign(path) as conn:
            conn.execute("DROP TRIGGER drop_d")
        texts = {sid: [_text(e.event) for e in journal.events(sid)] for sid in "abcd"}
        assert (texts["a"][a1], texts["a"][a2]) == ("a1", "a2")
        assert texts == {
            "a": [None, *sorted(["a1", "a2"], key=lambda text: {"a1": a1, "a2": a2}[text])],
            "b": [None, "b1"],
            "c": [None, "c1"],
            "d": [None],
        }
        # the cached heads follow what was committed, not what was rolled back
        assert [journal.append(sid, [AgentCompleted(answer=sid)]) for sid in "abcd"] == [
            3,
            2,
            2,
            1,
        ]
        assert journal.verify().ok


def test_a_failure_of_the_transaction_fails_every_append_of_the_group(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    with Journal.open(path) as journal:
        for sid in ("a", "b", "c"):
            journal.append(sid, [START])
        with foreign(path) as conn:  # ends the whole transaction, not one statement
            conn.execute(
                "CREATE TRIGGER end_all BEFORE INSERT ON events WHEN NEW.session_id = 'c' "
                "BEGIN SELECT RAISE(ROLLBACK, 'no c'); END"
            )
        first, outcomes, _ = _grouped(
            journal,
            lambda: journal.append("new", [START]),
            [lambda sid=sid: journal.append(sid, [UserInput(text=sid)]) for sid in "abc"],
        )
        assert first == 0
        assert all(isinstance(found, StoreError) for found in outcomes), outcomes
        assert all("no c" in str(found) for found in outcomes)
        assert [journal.last_seq(sid) for sid in "abc"] == [0, 0, 0]  # a and b rolled back too
        with foreign(path) as conn:
            conn.execute("DROP TRIGGER end_all")
        assert [journal.append(sid, [UserInput(text=sid)]) for sid in "abc"] == [1, 1, 1]
        assert journal.verify().ok


def test_a_lone_append_runs_the_statements_of_an_ungrouped_one(tmp_path: Path) -> None:
    """Alone, nothing waits: no savepoint, one transaction, the same SQL as without."""
    traces = []
    for name, grouped in (("on", True), ("off", False)):
        with SQLiteJournal(str(tmp_path / f"{name}.db"), group_commit=grouped) as journal:
            statements = _statements(journal)
            journal.append("s", [START])
            journal.append("s", [UserInput(text="hi")])
            journal.append("s", [AgentCompleted(answer="hello")], expected_seq=2)
            traces.append(statements)
    assert traces[0] == traces[1]
    assert _commits(traces[0]) == 3 and not any("SAVEPOINT" in text for text in traces[0])


def test_async_appends_share_commits(tmp_path: Path) -> None:
    with Journal.open(tmp_path / "j.db") as journal:
        held = Held(journal)

        async def main() -> tuple[int, list[int], list[str]]:
            leader = asyncio.ensure_future(journal.append_async("s0", [START]))
            while not held.entered.is_set():
                await asyncio.sleep(0.001)
            statements = _statements(journal)
            rest = [
                asyncio.ensure_future(journal.append_async(f"s{n}", [START])) for n in range(1, 8)
            ]
            while journal._async_appends.waiting < 7:  # type: ignore[attr-defined]
                await asyncio.sleep(0.001)
            held.release()
            return await leader, list(await asyncio.gather(*rest)), statements

        first, seqs, statements = asyncio.run(asyncio.wait_for(main(), WAIT))
        assert (first, seqs) == (0, [0] * 7)
        assert _commits(statements) == 2
        assert len(journal.sessions()) == 8 and journal.verify().ok


def test_an_async_append_that_fails_fails_only_its_own_caller(tmp_path: Path) -> None:
    """In a batch of coroutines' appends, a conflict and an invalid event are raised to their
    own callers; the rest are committed in the same commit, and a cancelled caller's
    append is written all the same (as documented), without an unretrieved error."""
    with Journal.open(tmp_path / "j.db") as journal:
        journal.append("taken", [START])
        held = Held(journal)

        async def main() -> tuple[list[Any], list[str]]:
            leader = asyncio.ensure_future(journal.append_async("s0", [START]))
            while not held.entered.is_set():
                await asyncio.sleep(0.001)
            statements = _statements(journal)
            calls = [
                journal.append_async("s1", [START]),
                journal.append_async("taken", [START], expected_seq=0),
                journal.append_async("s2", [UserInput(text="no start")]),
                journal.append_async("cancelled", [START]),
                journal.append_async("s3", [START]),
            ]
            tasks = [asyncio.ensure_future(call) for call in calls]
            while journal._async_appends.waiting < len(calls):  # type: ignore[attr-defined]
                await asyncio.sleep(0.001)
            tasks[3].cancel()
            held.release()
            await leader
            return list(await asyncio.gather(*tasks, return_exceptions=True)), statements

        outcomes, statements = asyncio.run(asyncio.wait_for(main(), WAIT))
        assert outcomes[0] == 0 and outcomes[4] == 0
        assert isinstance(outcomes[1], ConflictError)
        assert isinstance(outcomes[2], InvalidEventError)
        assert isinstance(outcomes[3], asyncio.CancelledError)
        assert _commits(statements) == 2
        assert sorted(s.session_id for s in journal.sessions()) == [
            "cancelled",
            "s0",
            "s1",
            "s3",
            "taken",
        ]
        assert journal.last_seq("taken") == 0 and journal.verify().ok


def test_event_loops_on_two_threads_each_get_their_own_results(tmp_path: Path) -> None:
    """Coroutines of two event loops (a thread each) appending to one journal at once: each
    append is settled in its own loop with its own seq."""
    with Journal.open(tmp_path / "j.db") as journal:

        def loop_of(name: str) -> list[int]:
            async def session(n: int) -> list[int]:
                sid = f"{name}-{n}"
                first = [await journal.append_async(sid, [START])]
                texts = [UserInput(text=f"{sid}/{k}") for k in range(20)]
                return first + [await journal.append_async(sid, [text]) for text in texts]

            async def main() -> list[int]:
                found = await asyncio.gather(*(session(n) for n in range(4)))
                return [seq for seqs in found for seq in seqs]

            return asyncio.run(main())

        with _calls([lambda: loop_of("a"), lambda: loop_of("b")]) as outcomes:
            pass
        assert outcomes == [list(range(21)) * 4] * 2
        for name in "ab":
            for n in range(4):
                texts = [_text(e.event) for e in journal.events(f"{name}-{n}", start=1)]
                assert texts == [f"{name}-{n}/{k}" for k in range(20)]
        assert journal.verify().ok


def test_an_async_append_with_no_thread_to_write_it_fails_and_the_next_one_works(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At interpreter shutdown the pool takes no work: the append raises what it said, and
    nothing is left waiting for a drainer that never started."""
    from journal import _async_appends

    class Closed:
        def submit(self, *args: object) -> None:
            raise RuntimeError("cannot schedule new futures after interpreter shutdown")

    with Journal.open(tmp_path / "j.db") as journal:

        async def main() -> int:
            with monkeypatch.context() as patched:
                patched.setattr(_async_appends, "append_pool", Closed)
                with pytest.raises(RuntimeError, match="after interpreter shutdown"):
                    await journal.append_async("s", [START])
            return await journal.append_async("s", [START])

        assert asyncio.run(asyncio.wait_for(main(), WAIT)) == 0
        assert journal.last_seq("s") == 0 and journal.verify().ok


def test_append_async_on_either_store(any_journal: Journal) -> None:
    """Coroutines appending at once: each gets its own seqs, a conflict fails its caller."""

    async def session(sid: str) -> list[int]:
        seqs = [await any_journal.append_async(sid, [START])]
        for n in range(10):
            seqs.append(await any_journal.append_async(sid, [UserInput(text=f"{sid}/{n}")]))
        return seqs

    async def main() -> tuple[list[list[int]], list[int | BaseException]]:
        seqs = await asyncio.gather(*(session(f"s{n}") for n in range(8)))
        racing = [
            any_journal.append_async("s0", [AgentCompleted(answer=str(n))], expected_seq=11)
            for n in range(2)
        ]
        return list(seqs), list(await asyncio.gather(*racing, return_exceptions=True))

    seqs, raced = asyncio.run(asyncio.wait_for(main(), WAIT))
    assert seqs == [list(range(11))] * 8
    assert 11 in raced and sum(isinstance(found, ConflictError) for found in raced) == 1
    for n in range(8):
        texts = [_text(e.event) for e in any_journal.events(f"s{n}", start=1, stop=11)]
        assert texts == [f"s{n}/{k}" for k in range(10)]
    assert any_journal.last_seq("s0") == 11 and any_journal.verify().ok


def test_a_waiting_append_interrupted_is_withdrawn_and_the_rest_go_on(tmp_path: Path) -> None:
    """Ctrl-C in a caller waiting for a commit: its append is not written, nobody hangs."""
    with Journal.open(tmp_path / "j.db") as journal:
        held = Held(journal)
        with _calls([lambda: journal.append("leader", [START])]) as leader:
            assert held.entered.wait(WAIT)
            statements = _statements(journal)

            def behind() -> int:
                _queued(journal, 1)  # the main thread's append waits first
                return journal.append("behind", [START])

            def interrupt() -> None:
                _queued(journal, 2)
                os.kill(os.getpid(), signal.SIGINT)

            with _calls([behind, interrupt]) as outcomes:
                with pytest.raises(KeyboardInterrupt):
                    journal.append("interrupted", [START])
                held.release()
        assert (leader, outcomes) == ([0], [0, None])
        assert _commits(statements) == 2  # the leader's, then the one queued behind
        assert [s.session_id for s in journal.sessions()] == ["behind", "leader"]


def test_a_caller_interrupted_in_a_batch_does_not_strand_the_callers_woken_after_it(
    tmp_path: Path,
) -> None:
    """The callers of a batch are woken one after the other, each by the one before it; one
    interrupted while its write was in the batch is left out of that chain (its write may
    still be committed, as documented), and the caller after it is woken all the same."""
    with Journal.open(tmp_path / "j.db") as journal:
        first = Held(journal)
        interrupted = threading.Event()
        with _calls([lambda: journal.append("leader", [START])]) as leader:
            assert first.entered.wait(WAIT)
            batch = Held(journal)  # holds the next commit: x leads it, m and y wait in it
            later: list[Any] = []

            def conduct() -> None:
                _queued(journal, 2)  # x, then the main thread's m
                with _calls([lambda: journal.append("y", [START])]) as outcome:
                    _queued(journal, 3)
                    first.release()
                    assert batch.entered.wait(WAIT)
                    os.kill(os.getpid(), signal.SIGINT)
                    assert interrupted.wait(WAIT)
                    batch.release()
                later.extend(outcome)

            with _calls([lambda: journal.append("x", [START])]) as x:
                _queued(journal, 1)
                with _calls([conduct]):
                    with pytest.raises(KeyboardInterrupt):
                        journal.append("m", [START])
                    interrupted.set()
        assert (leader, x, later) == ([0], [0], [0])
        assert sorted(s.session_id for s in journal.sessions()) == ["leader", "m", "x", "y"]
        assert journal.verify().ok


def test_threads_appending_to_one_session_take_dense_seqs(tmp_path: Path) -> None:
    with Journal.open(tmp_path / "j.db") as journal:
        journal.append("s", [START])
        conflicts = [0]

        def plain(worker: int) -> list[int]:
            return [journal.append("s", [UserInput(text=f"{worker}/{n}")]) for n in range(40)]

        def optimistic(worker: int) -> list[int]:
            seqs: list[int] = []
            while len(seqs) < 40:
                last = journal.last_seq("s")
                assert last is not None
                try:
                    text = f"{worker}/{len(seqs)}"
                    seqs.append(journal.append("s", [UserInput(text=text)], expected_seq=last + 1))
                except ConflictError:
                    conflicts[0] += 1
            return seqs

        work = [lambda w=w: plain(w) for w in range(3)] + [
            lambda w=w: optimistic(w) for w in range(3, 6)
        ]
        with _calls(work) as outcomes:
            pass
        seqs = [seq for found in outcomes for seq in found]
        assert sorted(seqs) == list(range(1, 241))
        for found in outcomes:
            assert found == sorted(found)  # each thread's appends in its own order
        texts = [_text(e.event) for e in journal.events("s", start=1)]
        assert sorted(texts) == sorted(f"{w}/{n}" for w in range(6) for n in range(40))
        assert journal.verify().ok


def test_the_bench_runs_and_prints_every_case() -> None:
    """The smallest run of bench/group_commit_bench.py (no timing is asserted)."""
    done = subprocess.run(
        [sys.executable, str(BENCH), "--sessions", "2", "--appends", "4", "--repeat", "1"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode in (0, 1) and not done.stderr, done.stderr  # 1: a target missed
    for case in "abcdef":
        assert done.stdout.count(f"| ({case}) ") == 2, done.stdout  # normal and full
    assert "durability=normal" in done.stdout and "durability=full" in done.stdout
