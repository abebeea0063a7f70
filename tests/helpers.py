"""Shared test helpers: a sample session, foreign connections, table dumps, the CLI, a schema check.

Nothing here asserts on its own; tests compare what these return.
"""

from __future__ import annotations

import functools
import json
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
from click.testing import CliRunner, Result

from journal import (
    ActionCommitted,
    ActionFailed,
    ActionProposed,
    AgentCompleted,
    AgentConfig,
    AgentHalted,
    CircuitOpened,
    ContextCompacted,
    FallbackInvoked,
    Guardrails,
    Journal,
    RepairApplied,
    SessionStarted,
    StoredEvent,
    ToolCall,
    ToolSpec,
    Usage,
    UserInput,
    VerificationFailed,
    chain_hash,
)
from journal._sqlite_schema import TRIGGERS
from journal.canonical import GENESIS_HASH
from journal.events import EventModel

REPO = Path(__file__).resolve().parents[1]
T0 = datetime(2026, 11, 29, 23, 0, tzinfo=UTC)
TS0 = "2026-11-29T23:00:00.000000Z"

REFUND_MESSAGE = "amount ($150) exceeds the order total ($100); propose a refund of at most $100"


class TickingClock:
    """A journal clock that starts at `T0` and moves one millisecond per call."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> datetime:
        self.calls += 1
        return T0 + timedelta(milliseconds=self.calls - 1)


def sample_session() -> list[EventModel]:
    """A realistic two-turn session that uses every event type and ends failed.

    Turn 1: a search commits, a refund is rejected by its guard, a truncated refund call is
    repaired and fails on infrastructure, the breaker opens and the fallback runs, the
    context is compacted and the turn is answered. Turn 2 halts with rule ``error``.
    """
    order = {"amount": 100, "order": 7}
    return [
        SessionStarted(
            agent="tests.agents:build",
            config=AgentConfig(
                guardrails=Guardrails(storm_window=3),
                tools=[
                    ToolSpec(name="search", parallel_safe=True),
                    ToolSpec(name="refund", fallback="manual_refund"),
                ],
            ),
            system_prompt="You are a refunds agent.",
            model="model-1",
            metadata={"user": "u1"},
        ),
        UserInput(text="refund order 7"),
        ActionProposed(
            calls=[
                ToolCall(call_id="c1", tool="search", args={"q": "order 7"}),
                ToolCall(call_id="c2", tool="refund", args={"amount": 150, "order": 7}),
            ],
            usage=Usage(input_tokens=100, output_tokens=20, cached_tokens=50),
            cost=0.25,
            latency_ms=120.0,
        ),
        ActionCommitted(call_id="c1", tool="search", args={"q": "order 7"}, result={"total": 100}),
        VerificationFailed(call_id="c2", tool="refund", stage="guard", message=REFUND_MESSAGE),
        ActionProposed(
            calls=[ToolCall(call_id="c3", tool="refund", args='{"amount": 100, "order": 7')],
            usage=Usage(input_tokens=120, output_tokens=10, cached_tokens=100),
            cost=0.5,
            latency_ms=80.0,
        ),
        RepairApplied(
            level="truncation",
            detail="closed the object",
            call_id="c3",
            tool="refund",
            before='{"amount": 100, "order": 7',
            after=order,
        ),
        ActionFailed(
            call_id="c3",
            tool="refund",
            kind="infrastructure",
            message="payments API unreachable",
            args=order,
        ),
        CircuitOpened(tool="refund", failures=3),
        FallbackInvoked(tool="refund", fallback="manual_refund", call_id="c3"),
        ContextCompacted(from_seq=1, to_seq=9, summary="tried to refund order 7"),
        AgentCompleted(answer="Refund queued for manual review."),
        UserInput(text="thanks"),
        AgentHalted(rule="error", reason="ValueError: boom"),
    ]


def short_session() -> list[EventModel]:
    """A minimal answered session: start, one input, one commit, the answer."""
    return [
        SessionStarted(agent="tests.agents:short"),
        UserInput(text="hi"),
        ActionProposed(calls=[ToolCall(call_id="c1", tool="echo", args={"x": 1})]),
        ActionCommitted(call_id="c1", tool="echo", args={"x": 1}, result="hi"),
        AgentCompleted(answer="hello"),
    ]


def make_journal(path: Path, sessions: dict[str, list[EventModel]]) -> Path:
    """Create a journal at ``path`` holding ``sessions`` (each appended in one call)."""
    with Journal.open(path, clock=TickingClock()) as journal:
        for session_id, events in sessions.items():
            journal.append(session_id, events)
    return path


@contextmanager
def foreign(path: Path) -> Iterator[sqlite3.Connection]:
    """A plain ``sqlite3.connect()`` in autocommit that sets no pragma: not ours."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        yield conn
    finally:
        conn.close()


def dump_tables(path: Path) -> dict[str, Any]:
    """Every schema object and every row of every table, read by a foreign connection."""
    with foreign(path) as conn:
        objects = conn.execute(
            "SELECT type, name, sql FROM sqlite_master ORDER BY type, name"
        ).fetchall()
        tables = [name for kind, name, _ in objects if kind == "table"]
        return {
            "schema": objects,
            **{t: conn.execute(f'SELECT * FROM "{t}" ORDER BY rowid').fetchall() for t in tables},
        }


def snapshot(path: Path) -> object:
    """What a failed command must leave as it was: nothing, the raw bytes, or the tables."""
    if not path.exists():
        return None
    data = path.read_bytes()
    if not data.startswith(b"SQLite format 3\x00"):
        return data
    return dump_tables(path)


def drop_triggers(conn: sqlite3.Connection) -> None:
    """Drop the append-only triggers (the first step of any tampering)."""
    for name in TRIGGERS:
        conn.execute(f"DROP TRIGGER IF EXISTS {name}")


def restore_triggers(conn: sqlite3.Connection) -> None:
    """Put the exact append-only triggers back, so verify sees only the tampering."""
    drop_triggers(conn)
    for sql in TRIGGERS.values():
        conn.execute(sql)


def rechain(conn: sqlite3.Connection, session_id: str, key: bytes | None = None) -> None:
    """Recompute a session's whole chain from its stored bodies and fix the projection.

    This is the forgery verify cannot see without an HMAC key (triggers must be dropped).
    """
    previous = GENESIS_HASH
    rows = conn.execute(
        "SELECT seq, body FROM events WHERE session_id = ? ORDER BY seq", (session_id,)
    ).fetchall()
    for seq, body in rows:
        previous = chain_hash(previous, body.encode("utf-8"), key)
        conn.execute(
            "UPDATE events SET hash = ? WHERE session_id = ? AND seq = ?",
            (previous, session_id, seq),
        )
    conn.execute("UPDATE sessions SET head_hash = ? WHERE session_id = ?", (previous, session_id))


def jsonl_lines(data: bytes) -> list[dict[str, Any]]:
    """Parse a JSONL document into its objects (header first)."""
    return [orjson.loads(line) for line in data.splitlines()]


def stored(event_type: str, version: int, fields: dict[str, Any], seq: int = 1) -> StoredEvent:
    """A stored row of session ``s`` as another writer could have left it (body taken as is)."""
    body = {"session_id": "s", "seq": seq, "ts": TS0, "type": event_type, "v": version, **fields}
    text = orjson.dumps(body, option=orjson.OPT_SORT_KEYS).decode()
    return StoredEvent("s", seq, TS0, event_type, version, text, GENESIS_HASH, "")


def write_lines(path: Path, objects: list[dict[str, Any] | bytes]) -> Path:
    """Write objects (canonically) or raw byte lines as a JSONL file."""
    path.write_bytes(
        b"".join(
            (item if isinstance(item, bytes) else orjson.dumps(item, option=orjson.OPT_SORT_KEYS))
            + b"\n"
            for item in objects
        )
    )
    return path


def run_cli(*args: object, env: dict[str, str] | None = None) -> Result:
    """Run ``agent-journal ARGS`` in-process with click's runner (stdout and stderr apart)."""
    from tui.cli import cli

    return CliRunner(env=env).invoke(
        cli, [str(a) for a in args], catch_exceptions=False, prog_name="agent-journal"
    )


def run_process(*args: object) -> subprocess.CompletedProcess[str]:
    """Run ``agent-journal ARGS`` as a real process (the console script's ``main``)."""
    return subprocess.run(
        [sys.executable, "-c", "from tui.cli import main; main()", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        check=False,
    )


def one_error_line(result: Result) -> str:
    """The single stderr line of a bad-input exit, after checking there is no traceback."""
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stdout + result.stderr
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith("agent-journal: ")
    return line


def worker(*args: object, **popen: Any) -> subprocess.Popen[str]:
    """Start ``python -m tests.workers ARGS`` (see tests/workers.py)."""
    return subprocess.Popen(
        [sys.executable, "-m", "tests.workers", *map(str, args)], cwd=REPO, text=True, **popen
    )


def schema_errors(
    instance: Any, schema: dict[str, Any], root: dict[str, Any] | None = None
) -> list[str]:
    """Where ``instance`` breaks ``schema`` (JSON Schema draft 2020-12, via jsonschema).

    ``root`` supplies ``$defs`` when ``schema`` is one branch of a bigger schema.
    """
    if root is not None:
        schema = {**schema, "$defs": root.get("$defs", {})}
    validator = _validator(json.dumps(schema, sort_keys=True))
    return sorted(error.message for error in validator.iter_errors(instance))


@functools.lru_cache(maxsize=16)
def _validator(schema_text: str) -> Any:
    from jsonschema import Draft202012Validator

    schema = json.loads(schema_text)
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)
