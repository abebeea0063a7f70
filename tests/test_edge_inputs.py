"""Edge cases of reading outside data (issue 20, items 5 and 6), each through the real CLI.

Files that never end (a FIFO, ``/dev/zero``, ``/dev/urandom``), documents nested past the
interpreter's recursion limit, integers of thousands of digits, values a mapping cannot
use, a row whose seq was damaged, an export cut at a line boundary: each is one clear line
on stderr and exit 2 (or a named, reported unmapped value), and a failed ``import`` or
``copy`` leaves no journal file behind.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from journal import Journal, export_session

from .helpers import (
    drop_triggers,
    foreign,
    make_journal,
    one_error_line,
    restore_triggers,
    run_cli,
    sample_session,
)


def _left_behind(db: Path) -> list[str]:
    return sorted(p.name for p in db.parent.glob(db.name + "*"))


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize("fmt", ["jsonl", "openai"])
@pytest.mark.parametrize("source", ["fifo", "/dev/zero", "/dev/urandom"])
def test_only_regular_files_are_read(
    request: pytest.FixtureRequest, tmp_path: Path, fmt: str, source: str
) -> None:
    path = request.getfixturevalue("fifo") if source == "fifo" else Path(source)
    db = tmp_path / "new.db"
    line = one_error_line(run_cli("import", "--format", fmt, "--db", db, path))
    kind = "FIFO (named pipe)" if source == "fifo" else "character device"
    assert line == f"agent-journal: {path}: is a {kind}, not a regular file; only files are read"
    assert _left_behind(db) == []


@pytest.mark.parametrize("depth", [980, 1000, 5000])
def test_deep_nesting_is_one_line(tmp_path: Path, depth: int) -> None:
    path = tmp_path / "deep.json"
    path.write_text("[" * depth + "]" * depth)
    line = one_error_line(run_cli("import", "--format", "openai", "--db", tmp_path / "j.db", path))
    assert "not valid JSON" in line and ("nested" in line or "deeper" in line)
    assert _left_behind(tmp_path / "j.db") == []


def test_a_huge_integer_is_named_in_our_words(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    path.write_text('{"messages": [{"role": "user", "content": "hi", "n": ' + "9" * 5000 + "}]}")
    line = one_error_line(run_cli("import", "--format", "openai", "--db", tmp_path / "j.db", path))
    assert line.endswith("an integer of 5000 digits is outside signed 64 bits")
    assert "set_int_max_str_digits" not in line


def test_values_the_mapping_cannot_use_are_reported_by_name(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    answer = {
        "role": "assistant",
        "content": "ok",
        "usage": {"prompt_tokens": -5, "completion_tokens": "lots"},
        "created": "yesterday",
    }
    path.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}, answer]}))
    result = run_cli("import", "--format", "openai", "--db", tmp_path / "j.db", "--json", path)
    assert result.exit_code == 0
    kinds = json.loads(result.stdout)["unmapped"]["kinds"]
    assert set(kinds) == {
        "value:assistant.created",
        "value:assistant.usage.prompt_tokens",
        "value:assistant.usage.completion_tokens",
    }
    assert "created='yesterday' (not used)" in kinds["value:assistant.created"]["examples"][0]
    assert "every message was mapped" not in result.stderr


@pytest.mark.parametrize("command", ["show", "export"])
def test_a_damaged_seq_is_an_error_not_a_shorter_session(tmp_path: Path, command: str) -> None:
    db = make_journal(tmp_path / "j.db", {"s": sample_session()})
    with foreign(db) as conn:
        drop_triggers(conn)
        conn.execute("UPDATE events SET seq = '5x' WHERE session_id = 's' AND seq = 5")
        restore_triggers(conn)
    result = run_cli(command, "s", "--db", db)
    assert result.exit_code == 2
    assert "Traceback" not in result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith("agent-journal: ") and "session s: seq 5 is missing or its row" in line


def test_an_export_cut_at_a_line_boundary_is_refused(tmp_path: Path) -> None:
    db = make_journal(tmp_path / "j.db", {"s": sample_session()})
    with Journal.open(db) as journal:
        lines = export_session(journal, "s").splitlines(keepends=True)
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(b"".join(lines[:8]))
    target = tmp_path / "new.db"
    line = one_error_line(run_cli("import", "--db", target, cut))
    assert "the header says the session is" in line and "the file was cut short" in line
    assert _left_behind(target) == []


def test_a_failed_copy_leaves_no_journal_behind(tmp_path: Path) -> None:
    source = make_journal(tmp_path / "src.db", {"s": sample_session()})
    with foreign(source) as conn:
        drop_triggers(conn)
        conn.execute(
            "UPDATE events SET body = replace(body, 'refund order 7', 'refund order 8') "
            "WHERE session_id = 's' AND seq = 1"
        )
        restore_triggers(conn)
    target = tmp_path / "dst.db"
    result = run_cli("copy", "--from", source, "--to", target)
    assert result.exit_code == 2, result.stderr
    assert _left_behind(target) == []
