"""Capture in production: fail open to the spool and drain, redaction before writing, tail
sampling, and the session scope.

The captured code is `tests.capture_prod_app` (a plain chat-completions loop), its model
`tests/fake_openai.py`'s policy served from a thread on 127.0.0.1; the journals are real
SQLite files and a real PostgreSQL schema; a journal is held busy by a foreign connection's
open write transaction.
"""

from __future__ import annotations

import itertools
import json
import logging
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from capture import Destination, JournaledOpenAI, Recorder, Sampling, Spool, drain, spool_line
from journal import AgentHalted, Journal, JournalBusyError, SessionStarted, StoreError
from journal.formats import Redactor
from replay import replay_entry
from tui.cli import cli

from . import capture_prod_app as app
from . import strategies
from .fake_openai import Handler
from .stores import PgSchema, with_search_path
from .tcp_proxy import postgres_proxy

openai = pytest.importorskip("openai")

QUESTION = "order 101 please"
EVENTS_PER_SESSION = 10
"""What one answered session of the app holds: ``session_started``, ``user_input``, four
model outputs, three tool results, ``agent_completed``."""
UNREACHABLE = "postgresql://127.0.0.1:9/test"
"""A PostgreSQL URL where nothing listens (the discard port): connecting fails at once."""


@pytest.fixture
def model() -> Iterator[Any]:
    """An openai client talking to the fake model server."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02})
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield openai.OpenAI(base_url=url, api_key="local", max_retries=0)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


class Held:
    """A foreign connection holding the SQLite journal's write lock (an open transaction)."""

    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.conn.execute("BEGIN IMMEDIATE")

    def release(self) -> None:
        self.conn.execute("COMMIT")
        self.conn.close()


def run_threads(
    count: int,
    sessions: int,
    question: str = QUESTION,
    *,
    midway: Callable[[], None] | None = None,
) -> list[BaseException]:
    """Run ``sessions`` entry calls in each of ``count`` threads; the errors they raised.

    ``midway`` is called once, by the thread that finishes the middle call of the run,
    while the others are inside theirs.
    """
    errors: list[BaseException] = []
    done = itertools.count(1)
    middle = count * sessions // 2

    def work() -> None:
        for _ in range(sessions):
            try:
                app.answer(question)
            except BaseException as error:  # noqa: BLE001 - any failure of a user call counts
                errors.append(error)
            if next(done) == middle and midway is not None:
                midway()

    threads = [threading.Thread(target=work) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def assert_whole(journal: Journal, sessions: int) -> None:
    """``sessions`` sessions, each completed with all its events, and verify clean."""
    summaries = journal.sessions()
    assert len(summaries) == sessions
    assert {s.status for s in summaries} == {"completed"}
    assert {journal.last_seq(s.session_id) for s in summaries} == {EVENTS_PER_SESSION - 1}
    report = journal.verify()
    assert report.ok, report.problems


# -- fail open ---------------------------------------------------------------------------


def test_a_busy_journal_fails_no_call_and_the_drain_loses_nothing(
    tmp_path: Path, model: Any, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "prod.db"
    Journal.open(path).close()
    capture = app.configure(model, str(path))
    held = Held(path)
    caplog.set_level(logging.WARNING, logger="capture")
    errors = run_threads(8, 6, midway=held.release)
    assert errors == []
    spool = capture.destination.spool
    assert spool is not None
    assert spool.counts.sessions > 0 and spool.counts.events > 0
    assert spool.counts.lost == 0
    assert any("goes to the spool" in r.getMessage() for r in caplog.records)
    with Journal.open(path) as journal:
        first = drain(journal, spool)
        assert first.left == {}
        assert first.sessions > 0
        again = drain(journal, spool)
        assert (again.sessions, again.events) == (0, 0)
        assert_whole(journal, 8 * 6)
    assert spool.pending() == {}


@pytest.mark.slow
def test_a_journal_held_for_30_seconds_fails_no_call(tmp_path: Path, model: Any) -> None:
    """The issue's drill: the lock held 30 s while 8 threads capture, then the drain."""
    path = tmp_path / "held.db"
    Journal.open(path).close()
    capture = app.configure(model, str(path))
    held = Held(path)
    released = threading.Event()

    def release() -> None:
        held.release()
        released.set()

    timer = threading.Timer(30.0, release)
    timer.start()
    errors: list[BaseException] = []
    finished = itertools.count(1)

    def work() -> None:
        while not released.is_set():
            try:
                app.answer(QUESTION)
            except BaseException as error:  # noqa: BLE001 - any failure of a user call counts
                errors.append(error)
            next(finished)
            time.sleep(0.05)
        for _ in range(3):  # and after the release, back to the journal
            app.answer(QUESTION)
            next(finished)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    timer.join()
    total = next(finished) - 1
    assert errors == []
    spool = capture.destination.spool
    assert spool is not None and spool.counts.lost == 0
    with Journal.open(path) as journal:
        assert drain(journal, spool).left == {}
        assert_whole(journal, total)


def test_fail_closed_raises_the_journals_error(tmp_path: Path, model: Any) -> None:
    path = tmp_path / "strict.db"
    Journal.open(path).close()
    app.configure(model, str(path), fail_open=False)
    held = Held(path)
    try:
        with pytest.raises(JournalBusyError):
            app.answer(QUESTION)
    finally:
        held.release()
    assert not Path(f"{path}.spool").exists()


def test_an_unreachable_postgresql_spools_and_drains_into_postgresql(
    tmp_path: Path, model: Any, pg_schema: PgSchema
) -> None:
    spool_path = tmp_path / "pg.spool"
    capture = app.configure(model, UNREACHABLE, spool=spool_path)
    assert run_threads(8, 2) == []
    assert capture.destination.spool is not None
    assert capture.destination.spool.counts.sessions == 16
    result = CliRunner().invoke(cli, ["drain", str(spool_path), "--db", pg_schema.url])
    assert result.exit_code == 0, result.output
    assert "16 sessions" in result.output
    again = CliRunner().invoke(cli, ["drain", str(spool_path), "--db", pg_schema.url, "--json"])
    assert again.exit_code == 0, again.output
    assert '"sessions":0' in again.output.replace(" ", "")
    with Journal.open(pg_schema.url) as journal:
        assert_whole(journal, 16)


def test_postgresql_going_down_mid_run_fails_no_call_and_the_drain_loses_nothing(
    tmp_path: Path, model: Any, pg_schema: PgSchema
) -> None:
    proxy, through = postgres_proxy(pg_schema.server)  # as the capture sees it; stopped below
    seen = with_search_path(through, pg_schema.name)
    capture = app.configure(model, seen, spool=tmp_path / "down.spool")
    try:
        errors = run_threads(8, 4, midway=proxy.stop)
    finally:
        capture.journal.close()
    assert errors == []
    spool = capture.destination.spool
    assert spool is not None and spool.counts.sessions > 0 and spool.counts.lost == 0
    with Journal.open(pg_schema.url) as journal:
        report = drain(journal, spool)
        assert report.left == {}
        assert_whole(journal, 8 * 4)


def test_a_session_the_journal_took_in_part_drains_whole(tmp_path: Path) -> None:
    path = tmp_path / "split.db"
    with Journal.open(path) as journal:
        recorder = Recorder(Destination(str(path)))
        recorder.start(agent="app:bot", model="m")
        recorder.user_input("hello")
        held = Held(path)
        recorder.model_output(text="hi")
        recorder.final("hi")
        held.release()
        assert recorder.spooling
        assert journal.last_seq(recorder.session_id) == 1
        spool = recorder.destination.spool
        assert spool is not None and spool.pending() == {recorder.session_id: 2}
        report = drain(journal, spool)
        assert (report.sessions, report.events, report.left) == (1, 2, {})
        assert journal.require(recorder.session_id).status == "completed"
        assert journal.verify().ok


def test_a_spooled_session_that_conflicts_stays_in_the_spool(tmp_path: Path) -> None:
    path = tmp_path / "conflict.db"
    spool = Spool.at(tmp_path / "conflict.spool")
    with Journal.open(path) as journal:
        recorder = Recorder(Destination(UNREACHABLE, spool=spool), "s-1")
        recorder.start(agent="app:bot")
        other = Recorder(journal, "s-1")
        other.start(agent="someone:else")
        report = drain(journal, spool)
        assert report.sessions == 0
        assert "s-1" in report.left
        assert spool.pending() == {"s-1": 1}
        result = CliRunner().invoke(cli, ["drain", str(spool.path), "--db", str(path)])
        assert result.exit_code == 1
        assert "s-1" in result.output


def test_drain_names_a_bad_spool_line(tmp_path: Path) -> None:
    spool = tmp_path / "bad.spool"
    spool.write_text("not json\n")
    result = CliRunner().invoke(cli, ["drain", str(spool), "--db", str(tmp_path / "j.db")])
    assert result.exit_code == 2
    assert f"{spool}.draining-" in result.output and ":1: not valid JSON" in result.output


def test_drain_with_nothing_spooled_creates_no_journal(tmp_path: Path) -> None:
    typo = tmp_path / "typo.db"
    nothing = CliRunner().invoke(cli, ["drain", "--db", str(typo), "--json"])
    assert nothing.exit_code == 0, nothing.output
    assert json.loads(nothing.output) == {
        "spool": f"{typo}.spool",
        "sessions": 0,
        "events": 0,
        "left": {},
    }
    named = tmp_path / "nowhere.spool"
    said = CliRunner().invoke(cli, ["drain", str(named), "--db", str(typo)])
    assert (said.exit_code, said.output) == (
        0,
        f"drained 0 sessions (0 new events) from {named}; 0 left in the spool\n",
    )
    assert list(tmp_path.iterdir()) == []  # no journal made for nothing to drain


# -- redaction ---------------------------------------------------------------------------

REDACTOR = Redactor(patterns={"account": r"ACCT-[0-9]{6}"})
QUESTION_WITH_SECRETS = f"order 101 for {app.EMAIL}, card {app.CARD}, {app.API_KEY}, {app.ACCOUNT}"


def raw_bytes(path: Path) -> bytes:
    """A SQLite journal's bytes as on disk: the file, its WAL and shared memory."""
    return b"".join(
        candidate.read_bytes()
        for candidate in (path, Path(f"{path}-wal"), Path(f"{path}-shm"))
        if candidate.exists()
    )


def test_nothing_that_matches_a_rule_reaches_the_journal_and_the_replay_is_identical(
    tmp_path: Path, model: Any
) -> None:
    path = tmp_path / "redacted.db"
    with Journal.open(path) as journal:
        app.configure(model, journal, redactor=REDACTOR)
        answer = app.answer(QUESTION_WITH_SECRETS)
        assert answer.startswith("Order 101 is in stock")
        (summary,) = journal.sessions()
        stored = raw_bytes(path)
        for secret in app.PLANTED:
            assert secret.encode() not in stored, secret
        assert b"user-" in stored and b"redacted-account-" in stored
        result = replay_entry(journal, summary.session_id, app.answer)
        assert result.verdict == "identical", result.first_divergence


def test_nothing_that_matches_a_rule_reaches_the_spool(tmp_path: Path, model: Any) -> None:
    spool = tmp_path / "redacted.spool"
    app.configure(model, UNREACHABLE, spool=spool, redactor=REDACTOR)
    app.answer(QUESTION_WITH_SECRETS)
    held = spool.read_bytes()
    assert held.count(b"\n") == EVENTS_PER_SESSION
    for secret in app.PLANTED:
        assert secret.encode() not in held, secret


# -- tail sampling -----------------------------------------------------------------------


def test_sampling_keeps_failed_sessions_and_the_share_of_the_rest(
    tmp_path: Path, model: Any
) -> None:
    with Journal.open(tmp_path / "sampled.db") as journal:
        app.configure(model, journal, sampling=Sampling(share=0.0))
        for _ in range(3):
            app.answer(QUESTION)
        with pytest.raises(KeyError):
            app.answer("no number here")
        (kept,) = journal.sessions()
        assert kept.status == "failed"
        started = next(journal.events(kept.session_id)).event
        assert isinstance(started, SessionStarted)
        assert started.metadata["sampling"] == {
            "share": 0.0,
            "rule": "failed, halted; share of the rest",
        }
        app.configure(model, journal, sampling=Sampling(share=1.0))
        app.answer(QUESTION)
        assert len(journal.sessions()) == 2
        everything = next(s for s in journal.sessions() if s.status == "completed")
        result = replay_entry(journal, everything.session_id, app.answer)
        assert result.verdict == "identical", result.first_divergence


def test_a_session_past_the_buffer_is_written_whatever_its_end(tmp_path: Path, model: Any) -> None:
    with Journal.open(tmp_path / "bounded.db") as journal:
        app.configure(model, journal, sampling=Sampling(share=0.0, buffer_events=4))
        app.answer(QUESTION)
        (summary,) = journal.sessions()
        assert journal.last_seq(summary.session_id) == EVENTS_PER_SESSION - 1
        assert journal.verify().ok


def test_the_share_is_kept_of_the_sessions_that_end_well() -> None:
    from journal import SessionState

    sampling = Sampling(share=0.25)
    kept = sum(sampling.keeps(f"session-{n}", SessionState()) for n in range(4000))
    assert 800 < kept < 1200
    assert all(sampling.keeps(f"session-{n}", SessionState(status="failed")) for n in range(100))


def test_a_predicate_keeps_what_it_names() -> None:
    from journal import SessionState

    def long_answers(state: SessionState) -> bool:
        return state.events > 10

    sampling = Sampling(share=0.0, keep=long_answers)
    assert sampling.keeps("s", SessionState(events=11))
    assert not sampling.keeps("s", SessionState(events=3))
    assert "long_answers" in sampling.rule


# -- the session scope -------------------------------------------------------------------


def test_a_scope_records_an_escaping_exception_as_a_failed_session(
    tmp_path: Path, model: Any
) -> None:
    with Journal.open(tmp_path / "scope.db") as journal:
        capture = app.configure(model, journal, metadata={"service": "support"})
        with (
            pytest.raises(RuntimeError),
            capture.session(metadata={"customer": "c-42"}, tags=["beta"]),
        ):
            app.client.chat.completions.create(
                model="fake-1", messages=[{"role": "user", "content": QUESTION}], tools=app.TOOLS
            )
            raise RuntimeError("the code crashed")
        (summary,) = journal.sessions()
        assert summary.status == "failed"
        events = [item.event for item in journal.events(summary.session_id)]
        started, halted = events[0], events[-1]
        assert isinstance(started, SessionStarted) and isinstance(halted, AgentHalted)
        assert started.metadata["service"] == "support"
        assert started.metadata["customer"] == "c-42"
        assert started.metadata["tags"] == ["beta"]
        assert halted.rule == "error" and "the code crashed" in halted.reason


def test_a_scope_that_ends_without_an_answer_ends_with_the_models_text(
    tmp_path: Path, model: Any
) -> None:
    with Journal.open(tmp_path / "scope.db") as journal:
        capture = app.configure(model, journal)
        with capture.session():
            app.client.chat.completions.create(
                model="fake-1", messages=[{"role": "user", "content": QUESTION}]
            )
        (summary,) = journal.sessions()
        assert summary.status == "completed"


def test_the_client_wrapper_as_a_context_manager_fails_a_crashed_session(
    tmp_path: Path, model: Any
) -> None:
    with Journal.open(tmp_path / "wrapper.db") as journal:
        with pytest.raises(ValueError), JournaledOpenAI(model, journal) as client:
            client.create(model="fake-1", messages=[{"role": "user", "content": QUESTION}])
            raise ValueError("bad input")
        (summary,) = journal.sessions()
        assert summary.status == "failed"


def test_a_recorder_on_an_unreachable_journal_does_not_raise(tmp_path: Path) -> None:
    spool = Spool.at(tmp_path / "r.spool")
    with Recorder(Destination(UNREACHABLE, spool=spool)) as recorder:
        recorder.start(agent="app:bot")
        recorder.user_input("hello")
    assert recorder.spooling
    assert spool.pending() == {recorder.session_id: 2}
    with pytest.raises(StoreError):
        Recorder(Destination(UNREACHABLE, fail_open=False)).start(agent="app:bot")


# -- the spool round trip ----------------------------------------------------------------


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(session=strategies.sessions(), cut=st.integers(min_value=0), data=st.data())
def test_a_session_split_anywhere_drains_to_what_one_journal_would_hold(
    tmp_path: Path, session: list[Any], cut: int, data: st.DataObject
) -> None:
    """The part before ``cut`` appended, the rest spooled (twice over), drained twice:
    the stored rows are those of the whole session appended to one journal."""
    cut %= len(session) + 1
    times = data.draw(st.lists(strategies.timestamps, min_size=len(session), max_size=len(session)))
    folder = Path(tempfile.mkdtemp(dir=tmp_path))
    spool = Spool.at(folder / "s.spool")
    with Journal.open(folder / "split.db") as split, Journal.open(folder / "whole.db") as whole:
        for seq, (event, moment) in enumerate(zip(session, times, strict=True)):
            whole.append("s", [event], expected_seq=seq, ts=moment)
            if seq < cut:
                split.append("s", [event], expected_seq=seq, ts=moment)
        rest = [spool_line("s", seq, times[seq], session[seq]) for seq in range(cut, len(session))]
        if rest:
            spool.append(rest)
            spool.append(rest[: len(rest) // 2])  # a line spooled twice (a retried write)
        drain(split, spool)
        assert drain(split, spool).events == 0
        assert [row.line() for row in split.stored_events("s")] == [
            row.line() for row in whole.stored_events("s")
        ]


def test_a_scope_inside_a_session_is_part_of_it(tmp_path: Path, model: Any) -> None:
    with Journal.open(tmp_path / "nested.db") as journal:
        capture = app.configure(model, journal)
        with capture.session(tags=["outer"]) as outer, capture.session(tags=["inner"]) as inner:
            assert inner is outer
            app.answer(QUESTION)  # an entry called inside a session joins it too
        (summary,) = journal.sessions()
        started = next(journal.events(summary.session_id)).event
        assert isinstance(started, SessionStarted) and started.metadata["tags"] == ["outer"]


class Attempts:
    """Stands for a journal and counts the appends tried on it."""

    def __init__(self, inner: Journal) -> None:
        self.inner = inner
        self.appends = 0

    def append(self, *args: Any, **kwargs: Any) -> int:
        self.appends += 1
        return self.inner.append(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_recorders_on_one_journal_share_its_failure(tmp_path: Path) -> None:
    from journal.sqlite import SQLiteJournal

    path = tmp_path / "shared.db"
    with SQLiteJournal(str(path), busy_timeout_ms=50) as opened:
        journal = Attempts(opened)
        held = Held(path)
        first = Recorder(journal)  # type: ignore[arg-type]
        first.start(agent="app:bot")
        second = Recorder(journal)  # type: ignore[arg-type]
        second.start(agent="app:bot")
        held.release()
        assert first.spooling and second.spooling
        assert journal.appends == 1  # the second left the journal alone
        spool = first.destination.spool
        assert spool is not None and spool is second.destination.spool
        assert drain(opened, spool).sessions == 2
