"""Traces the real instrumentations write, imported and replayed through the app's own code.

`tests/traced_run.py` runs `tests/traced_app.py` (a plain openai-client loop) in a process of
its own under opentelemetry-instrumentation-openai-v2 (semconv 1.37 attributes, content on
and off; its legacy path with messages as log records) or openinference-instrumentation-openai,
against `tests/fake_openai.py`, exporting with the SDK's OTLP JSON file exporters, OTLP
protobuf files, or the OTLP/HTTP exporters to ``agent-journal collect``. Then, with the
server stopped: the import's ``show`` is what the loop did, the same loop replays
identical, and planted changes diverge at the seq they change.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests import traced_app
from tests.fake_openai import serving
from tui.cli import cli

HERE = Path(__file__).parent
ENTRY = "tests.traced_app:answer"
EXPECTED = [
    "session_started",
    "user_input",
    "action_proposed",
    "action_committed",
    "action_proposed",
    "action_committed",
    "action_proposed",
    "action_committed",
    "action_proposed",
    "agent_completed",
]


def _run_app(
    shape: str, export: str, url: str, *questions: str, conversation: str | None = None
) -> None:
    env = {**os.environ, **({"SHOP_CONVERSATION": conversation} if conversation else {})}
    done = subprocess.run(
        [sys.executable, str(HERE / "traced_run.py"), shape, export, url, *questions],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("Order 7 is in stock") == max(len(questions), 1)


def _invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def _sessions(db: Path) -> list[dict[str, object]]:
    code, out, _ = _invoke("sessions", "--db", str(db), "--json")
    assert code == 0
    return list(json.loads(out))


def _replay(db: Path, session: str, planted: set[str] = frozenset()) -> dict[str, object]:  # type: ignore[assignment]
    traced_app.PLANTED.clear()
    traced_app.PLANTED.update(planted)
    try:
        code, out, err = _invoke("replay", session, "--db", str(db), "--agent", ENTRY, "--json")
    finally:
        traced_app.PLANTED.clear()
    document = json.loads(out)
    assert code == (0 if document["verdict"] == "identical" else 1), err
    return dict(document)


def _check_replays(db: Path, session: str) -> None:
    sent = list(traced_app.SENT)
    assert _replay(db, session)["verdict"] == "identical"
    for planted, seq in (("prompt", 2), ("result", 4), ("args", 5)):
        document = _replay(db, session, {planted})
        assert document["verdict"] == "diverged", planted
        divergence = document["first_divergence"]
        assert isinstance(divergence, dict) and divergence["seq"] == seq, (planted, divergence)
    assert traced_app.SENT == sent  # send_email (side effects) never ran


def _types(db: Path, session: str) -> list[str]:
    code, out, _ = _invoke("show", session, "--db", str(db))
    assert code == 0
    return [line.split()[2] for line in out.splitlines()[1:] if line.strip()]


@pytest.mark.parametrize(
    ("shape", "suffix"),
    [
        ("genai", "jsonl"),
        ("genai-events", "jsonl"),
        ("openinference", "jsonl"),
        ("genai-events", "bin"),
    ],
)
def test_a_traced_session_imports_and_replays_through_the_app(
    tmp_path: Path, shape: str, suffix: str
) -> None:
    trace = tmp_path / f"trace.{suffix}"
    kind = "proto" if suffix == "bin" else "json"
    with serving() as url:
        _run_app(shape, f"{kind}:{trace}", url)
    db = tmp_path / "journal.db"
    code, out, err = _invoke("import", "--format", "otlp", str(trace), "--db", str(db), "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["format"] == "otlp" and report["tool_calls"] == 3
    assert report["unmapped"]["total"] == 0
    (session,) = _sessions(db)
    session_id = str(session["session_id"])
    assert session["status"] == "completed"
    assert _types(db, session_id) == EXPECTED
    # importing again writes nothing
    assert _invoke("import", "--format", "otlp", str(trace), "--db", str(db))[0] == 0
    assert len(_sessions(db)) == 1
    _check_replays(db, session_id)  # the server is stopped


def test_a_trace_without_content_imports_and_says_why_it_cannot_replay(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    with serving() as url:
        _run_app("genai-off", f"json:{trace}", url)
    db = tmp_path / "journal.db"
    code, out, _ = _invoke("import", "--format", "otlp", str(trace), "--db", str(db))
    assert code == 0 and "no_content" in out
    (session,) = _sessions(db)
    code, _, err = _invoke("replay", str(session["session_id"]), "--db", str(db), "--agent", ENTRY)
    assert code == 2
    assert err.count("\n") == 1 and "without message content" in err
    assert "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=span_only" in err


@pytest.fixture
def collector(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    db = tmp_path / "collected.db"
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from tui.console import main; main()",
            "collect",
            "--listen",
            "127.0.0.1:0",
            "--quiet",
            "0.3",
            "--db",
            str(db),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=HERE.parent,
        env={**os.environ, "PYTHONPATH": str(HERE.parent)},
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line.startswith("collecting on http://"), process.stderr.read() if process.stderr else ""
    try:
        yield line.split()[-1], db
    finally:
        process.send_signal(signal.SIGTERM)
        _, errors = process.communicate(timeout=30)
        assert process.returncode == 0, errors
        assert "refused" not in errors, errors


def _wait_for(db: Path, count: int) -> list[dict[str, object]]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if db.exists():
            found = _sessions(db)
            if len(found) >= count:
                return found
        time.sleep(0.2)
    raise AssertionError(f"collect wrote fewer than {count} sessions")


@pytest.mark.parametrize("shape", ["genai", "genai-events"])
def test_collect_receives_the_sdks_otlp_http_exporter(
    collector: tuple[str, Path], shape: str
) -> None:
    endpoint, db = collector
    with serving() as url:
        _run_app(
            shape, f"http:{endpoint}", url, "where is order 7, three of them?", "order 7 please"
        )
    found = _wait_for(db, 2)
    assert sorted(int(str(s["events"])) for s in found) == [10, 10]
    first = next(s for s in found if _replayable_first(db, str(s["session_id"])))
    _check_replays(db, str(first["session_id"]))


def _replayable_first(db: Path, session: str) -> bool:
    code, out, _ = _invoke("show", session, "--db", str(db))
    return "three of them" in out


def _trace_files(trace: Path) -> tuple[Path, Path, Path]:
    """The file exporter's lines split by trace: the first, the second, and both."""
    lines = trace.read_bytes().splitlines()
    ids = [
        {
            span["traceId"]
            for r in json.loads(line).get("resourceSpans", [])
            for s in r["scopeSpans"]
            for span in s["spans"]
        }
        for line in lines
    ]
    first = next(iter(ids[0]))
    files = []
    for name, keep in (("first", lambda i: i == {first}), ("second", lambda i: first not in i)):
        path = trace.with_name(f"{name}.jsonl")
        path.write_bytes(b"\n".join(line for line, i in zip(lines, ids, strict=True) if keep(i)))
        files.append(path)
    return files[0], files[1], trace


TURN = ["user_input", "action_proposed", "agent_completed"]
"""The conversation's second question: the model answers from what the first one found."""


def _conversation(tmp_path: Path) -> tuple[Path, Path, Path]:
    trace = tmp_path / "trace.jsonl"
    with serving() as url:
        _run_app(
            "genai",
            f"json:{trace}",
            url,
            "where is order 7, three of them?",
            "and order 7 again?",
            conversation="chat-7",
        )
    return _trace_files(trace)


def test_a_later_trace_of_a_stored_conversation_extends_it(tmp_path: Path) -> None:
    """The stored session is a prefix of the conversation's traces: they append to it; a
    trace of the conversation whose stored part differs is a conflict, and nothing changes."""
    first, second, both = _conversation(tmp_path)
    db = tmp_path / "journal.db"
    code, out, err = _invoke("import", "--format", "otlp", str(first), "--db", str(db))
    assert code == 0, err
    assert _types(db, "chat-7") == EXPECTED
    code, out, err = _invoke("import", "--format", "otlp", str(both), "--db", str(db))
    assert code == 0, err
    assert "1 session (0 new" not in out and "already present" not in out, out
    assert _types(db, "chat-7") == [*EXPECTED, *TURN]
    (session,) = _sessions(db)
    assert session["status"] == "completed"
    before = _types(db, "chat-7")
    code, out, err = _invoke("import", "--format", "otlp", str(second), "--db", str(db))
    assert code == 2 and "exists already with different content" in err
    assert _types(db, "chat-7") == before


def test_collect_extends_a_written_session_with_its_later_trace(tmp_path: Path) -> None:
    """What collect does between requests: the first trace is written once done, the
    second (the same session.id) appended to it when it is done."""
    from journal import Journal
    from journal.formats import TraceCollector, read_otlp

    first, second, _ = _conversation(tmp_path)
    now = [0.0]
    collector = TraceCollector(quiet=1.0, clock=lambda: now[0])
    with Journal.open(tmp_path / "collected.db") as journal:
        collector.add(read_otlp(first))
        now[0] += 2
        report = collector.flush(journal)
        assert report is not None and report.errors == []
        assert journal.require("chat-7").events == len(EXPECTED)
        collector.add(read_otlp(second))
        assert collector.flush(journal) is None  # not quiet yet
        now[0] += 2
        report = collector.flush(journal)
        assert report is not None and report.errors == [], report.errors
        assert report.total("new_events") == len(TURN)
        assert [item.event.type for item in journal.events("chat-7")] == [*EXPECTED, *TURN]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"spanId": "zz"}]}]}]}\n', "spanId"),
        (b'{"resourceSpans": []}\n{"resourceSpans": [\n', "trace.jsonl:2: not JSON"),
        (b"\x00\x01garbage", "not an OTLP protobuf request"),
        (b'{"hello": 1}', "not an OTLP request"),
    ],
)
def test_hostile_input_is_one_line_and_writes_nothing(
    tmp_path: Path, content: bytes, message: str
) -> None:
    trace = tmp_path / "trace.jsonl"
    trace.write_bytes(content)
    db = tmp_path / "journal.db"
    code, _, err = _invoke("import", "--format", "otlp", str(trace), "--db", str(db))
    assert code == 2
    assert err.count("\n") == 1 and message in err and "Traceback" not in err
    assert not db.exists()
