"""The JSONL file format: export, import all or nothing, idempotence, conflicts, bad files."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings

from journal import (
    EventTooLargeError,
    InvalidInputError,
    Journal,
    SessionConflictError,
    SessionNotFoundError,
    UserInput,
    export_session,
    import_file,
    write_jsonl,
)
from journal.events import EventModel
from journal.formats.jsonl import ImportResult

from .helpers import (
    TickingClock,
    dump_tables,
    jsonl_lines,
    make_journal,
    one_error_line,
    run_cli,
    sample_session,
    short_session,
    write_lines,
)
from .strategies import sessions


@pytest.fixture
def exported(tmp_path: Path) -> bytes:
    """The JSONL export of `sample_session` as session ``s``."""
    make_journal(tmp_path / "source.db", {"s": sample_session()})
    with Journal.open(tmp_path / "source.db") as journal:
        return export_session(journal, "s")


@pytest.fixture
def target(tmp_path: Path) -> Path:
    """A journal that already holds another session, to import into."""
    return make_journal(tmp_path / "target.db", {"other": short_session()})


def records_of(data: bytes) -> list[dict[str, Any]]:
    return jsonl_lines(data)[1:]


# -- the format --------------------------------------------------------------------------


def test_export_is_a_header_then_one_canonical_record_per_line(exported: bytes) -> None:
    lines = exported.split(b"\n")
    assert lines[-1] == b""  # every line ends with a newline, the last one too
    header, *records = [orjson.loads(line) for line in lines[:-1]]
    assert header == {
        "format": "agent-journal",
        "format_version": 1,
        "session_id": "s",
        "agent": "tests.agents:build",
        "model": "model-1",
        "status": "failed",
        "started": "2026-11-29T23:00:00.000000Z",
        "ended": "2026-11-29T23:00:00.000000Z",
        "replay_of": None,
        "forked_from": None,
        "fork_seq": None,
    }
    assert [(r["session_id"], r["seq"], r["type"], r["v"]) for r in records] == [
        ("s", seq, event.type, event.VERSION) for seq, event in enumerate(sample_session())
    ]
    for line in lines[:-1]:
        assert line == orjson.dumps(orjson.loads(line), option=orjson.OPT_SORT_KEYS)
    assert records[1] == {
        "session_id": "s",
        "seq": 1,
        "ts": "2026-11-29T23:00:00.000000Z",
        "type": "user_input",
        "v": 1,
        "text": "refund order 7",
        "hash": records[1]["hash"],
    }


def test_export_import_export_is_byte_identical(
    exported: bytes, target: Path, tmp_path: Path
) -> None:
    source = tmp_path / "s.jsonl"
    source.write_bytes(exported)
    with Journal.open(target) as journal:
        assert import_file(journal, source) == ImportResult(str(source), "s", 14)
        assert export_session(journal, "s") == exported
        assert journal.verify().ok


def test_write_jsonl_is_the_export_written_atomically(exported: bytes, tmp_path: Path) -> None:
    out = tmp_path / "out" / "s.jsonl"
    out.parent.mkdir()
    with Journal.open(tmp_path / "source.db") as journal:
        assert write_jsonl(journal, "s", out) == 14
        with pytest.raises(SessionNotFoundError, match="session nope: not in"):
            write_jsonl(journal, "nope", out.with_name("nope.jsonl"))
        with pytest.raises(InvalidInputError, match="missing/x.jsonl: cannot write"):
            write_jsonl(journal, "s", tmp_path / "missing" / "x.jsonl")
    assert out.read_bytes() == exported
    assert sorted(p.name for p in out.parent.iterdir()) == ["s.jsonl"]  # no temporary left


@settings(max_examples=30, deadline=None)
@given(sessions())
def test_any_session_survives_export_and_import_byte_for_byte(events: list[EventModel]) -> None:
    with tempfile.TemporaryDirectory() as directory:
        first, second = Path(directory) / "a.db", Path(directory) / "b.db"
        make_journal(first, {"gen.1": events})
        with Journal.open(first) as journal:
            data = export_session(journal, "gen.1")
            state = journal.state("gen.1")
        source = Path(directory) / "gen.jsonl"
        source.write_bytes(data)
        with Journal.open(second) as journal:
            assert import_file(journal, source).new_events == len(events)
            assert export_session(journal, "gen.1") == data
            assert journal.state("gen.1") == state
        assert dump_tables(first)["events"] == dump_tables(second)["events"]


# -- all or nothing ----------------------------------------------------------------------


BREAKAGE: dict[str, tuple[dict[str, Any] | None, str]] = {
    "malformed": (None, "not valid JSON"),
    "wrong-hash": ({"hash": "0" * 64}, "hash 000000000000… does not match the chain (expected "),
    "unknown-type": ({"type": "tool_called"}, "unknown event type 'tool_called'"),
    "seq-gap": ({"seq": 9}, "seq 9, expected 3"),
    "other-session": ({"session_id": "x"}, "session_id 'x', expected 's'"),
    "bad-field": ({"tool": 42}, "invalid action_committed event: tool: Input should be a valid"),
    "extra-field": ({"unexpected": True}, "Extra inputs are not permitted"),
    "nan": ({"duration_ms": float("nan")}, "not valid JSON: NaN is not a finite number"),
}


@pytest.mark.parametrize("how", sorted(BREAKAGE))
def test_a_bad_line_5_of_10_imports_nothing(
    exported: bytes, target: Path, tmp_path: Path, how: str
) -> None:
    change, error = BREAKAGE[how]
    lines: list[dict[str, Any] | bytes] = list(jsonl_lines(exported)[:10])
    record = {k: v for k, v in jsonl_lines(exported)[4].items() if k != "hash"}  # seq 3
    if change is None:
        lines[4] = b'{"seq": 3, "session_id": '
    elif how == "nan":
        lines[4] = orjson.dumps(record).replace(b'"duration_ms":null', b'"duration_ms":NaN')
    else:
        lines[4] = record | change
    source = write_lines(tmp_path / "bad.jsonl", lines)
    before = dump_tables(target)
    with Journal.open(target) as journal, pytest.raises(InvalidInputError) as caught:
        import_file(journal, source)
    assert str(caught.value).startswith(f"{source}:5: ")
    assert error in str(caught.value)
    assert dump_tables(target) == before


def test_a_bad_line_after_the_stored_prefix_appends_nothing(
    exported: bytes, tmp_path: Path
) -> None:
    lines = exported.splitlines()
    prefix = write_lines(tmp_path / "prefix.jsonl", lines[:6])
    longer = write_lines(tmp_path / "longer.jsonl", [*lines[:11], b"[1, 2]"])
    with Journal.open(tmp_path / "j.db") as journal:
        assert import_file(journal, prefix).new_events == 5
        before = dump_tables(tmp_path / "j.db")
        with pytest.raises(InvalidInputError, match=r"longer\.jsonl:12: expected a JSON object"):
            import_file(journal, longer)
        assert dump_tables(tmp_path / "j.db") == before


# -- idempotence and conflicts -----------------------------------------------------------


def test_importing_the_same_content_again_is_a_no_op(
    exported: bytes, target: Path, tmp_path: Path
) -> None:
    source = write_lines(tmp_path / "s.jsonl", exported.splitlines())
    prefix = write_lines(tmp_path / "prefix.jsonl", exported.splitlines()[:8])
    with Journal.open(target) as journal:
        import_file(journal, source)
        before = dump_tables(target)
        assert import_file(journal, source).new_events == 0
        assert import_file(journal, prefix).new_events == 0
        assert dump_tables(target) == before


def test_a_longer_recording_of_a_stored_session_appends_the_rest(
    exported: bytes, tmp_path: Path
) -> None:
    lines = exported.splitlines()
    with Journal.open(tmp_path / "j.db") as journal:
        assert import_file(journal, write_lines(tmp_path / "a.jsonl", lines[:4])).new_events == 3
        assert import_file(journal, write_lines(tmp_path / "b.jsonl", lines)).new_events == 11
        assert export_session(journal, "s") == exported


@pytest.mark.parametrize("length", [4, 14, 15], ids=["shorter", "same-length", "longer"])
def test_different_content_for_a_stored_session_is_a_conflict(
    exported: bytes, tmp_path: Path, length: int
) -> None:
    with Journal.open(tmp_path / "j.db", clock=TickingClock()) as journal:
        journal.append("s", sample_session()[:2])
        journal.append("s", [UserInput(text="a different road")])
        journal.append("s", [UserInput(text=str(n)) for n in range(10)])  # 13 events stored
        before = dump_tables(tmp_path / "j.db")
        source = write_lines(tmp_path / "s.jsonl", exported.splitlines()[:length])
        with pytest.raises(SessionConflictError) as caught:
            import_file(journal, source)
        assert str(caught.value).startswith(
            f"{source}: session s: exists already with different content (stored head seq "
        )
        assert dump_tables(tmp_path / "j.db") == before


# -- hashes ------------------------------------------------------------------------------


def test_absent_hashes_are_computed(exported: bytes, tmp_path: Path) -> None:
    header, *records = jsonl_lines(exported)
    stripped = [header, *({k: v for k, v in r.items() if k != "hash"} for r in records)]
    for name, lines in {"none": stripped, "some": [*stripped[:6], *[header, *records][6:]]}.items():
        source = write_lines(tmp_path / f"{name}.jsonl", lines)
        with Journal.open(tmp_path / f"{name}.db") as journal:
            assert import_file(journal, source).new_events == 14
            assert export_session(journal, "s") == exported


def test_a_wrong_hash_is_an_error_naming_file_and_line(exported: bytes, tmp_path: Path) -> None:
    lines: list[dict[str, Any] | bytes] = list(jsonl_lines(exported))
    lines[9] = {**lines[9], "hash": "f" * 64}  # type: ignore[dict-item]
    source = write_lines(tmp_path / "s.jsonl", lines)
    with Journal.open(tmp_path / "j.db") as journal:
        with pytest.raises(InvalidInputError, match=r"s\.jsonl:10: hash ffffffffffff… does not"):
            import_file(journal, source)
        assert journal.sessions() == []


def test_windows_line_endings_import_and_export_canonically(
    exported: bytes, tmp_path: Path
) -> None:
    source = tmp_path / "crlf.jsonl"
    source.write_bytes(exported.replace(b"\n", b"\r\n"))
    with Journal.open(tmp_path / "j.db") as journal:
        import_file(journal, source)
        assert export_session(journal, "s") == exported


# -- files that are not journals ---------------------------------------------------------

HEADER = b'{"format":"agent-journal","format_version":1,"session_id":"s"}'
START = (
    b'{"seq":0,"session_id":"s","ts":"2026-11-29T23:00:00.000000Z","type":"session_started","v":1}'
)


@pytest.mark.parametrize(
    ("content", "error"),
    [
        (b"", ":1: empty file, expected an agent-journal header"),
        (b"\n", ":1: empty line"),
        (b"hello world\n", ":1: not valid JSON"),
        (b"PK\x03\x04\x00\xff\xfe", ":1: not valid UTF-8 (byte 5)"),
        (b"SQLite format 3\x00" + bytes(100), ":1: not valid JSON"),
        (b'{"session_id":"s"}\n', ':1: not an agent-journal file (header "format" is None)'),
        (
            b'{"format":"agent-journal","format_version":2,"session_id":"s"}\n',
            ":1: format_version 2",
        ),
        (b'{"format":"agent-journal","format_version":1}\n', ":1: header has no session_id"),
        (HEADER + b"\n", ": header only, no events"),
        (HEADER + b"\n" + START + b"\n\n", ":3: empty line"),
        (HEADER + b"\n[" + START + b"]\n", ":2: expected a JSON object, got list"),
        (HEADER + b'\n{"seq":0,"seq":1}\n', ":2: not valid JSON: duplicate key 'seq'"),
        (HEADER + b'\n{"v":NaN}\n', ":2: not valid JSON: NaN is not a finite number"),
        (
            HEADER + b"\n" + START[:-1] + b',"agent":"\\ud800"}\n',
            ":2: not valid JSON: lone surrogate",
        ),
        (HEADER + b"\n" + START.replace(b"00.000000Z", b"00Z") + b"\n", ":2: timestamp"),
        (HEADER + b"\n" + START.replace(b'"v":1', b'"v":"1"') + b"\n", ":2: v '1' is not"),
        (HEADER + b"\n" + START.replace(b'"v":1', b'"v":7') + b"\n", ":2: event type "),
    ],
)
def test_bad_files_are_rejected_naming_file_and_line(
    tmp_path: Path, target: Path, content: bytes, error: str
) -> None:
    source = tmp_path / "in.jsonl"
    source.write_bytes(content)
    before = dump_tables(target)
    with Journal.open(target) as journal, pytest.raises(InvalidInputError) as caught:
        import_file(journal, source)
    assert str(caught.value).startswith(f"{source}{error}")
    assert "\n" not in str(caught.value)
    assert dump_tables(target) == before


def test_a_missing_file_or_a_directory_is_rejected(tmp_path: Path, target: Path) -> None:
    with Journal.open(target) as journal:
        with pytest.raises(InvalidInputError, match=r"nope\.jsonl: no such file$"):
            import_file(journal, tmp_path / "nope.jsonl")
        with pytest.raises(InvalidInputError, match="is a directory, not a JSONL file"):
            import_file(journal, tmp_path)


def test_an_event_over_the_journals_limit_is_one_error_line_and_nothing_is_imported(
    tmp_path: Path,
) -> None:
    big = UserInput(text="x" * (16 * 1024 * 1024))  # a 16 MiB text: over the default limit
    with Journal.open(tmp_path / "source.db", max_event_bytes=None) as source:
        source.append("s", [*short_session()[:2], big])
        path = tmp_path / "big.jsonl"
        write_jsonl(source, "s", path)
        size = len(next(source.stored_events("s", start=2)).body.encode())
    result = run_cli("import", path, "--db", tmp_path / "j.db")
    assert one_error_line(result) == (
        f"agent-journal: {path}:4: session s seq 2: the user_input event is {size:,} bytes of "
        "canonical JSON, over the journal's limit of 16,777,216 (max_event_bytes); nothing "
        "was written"
    )
    with Journal.open(tmp_path / "j.db") as journal:
        assert list(journal.sessions()) == []
        with pytest.raises(EventTooLargeError) as caught:
            import_file(journal, path)
    assert (caught.value.session_id, caught.value.seq, caught.value.size) == ("s", 2, size)


def test_a_file_cut_at_a_line_boundary_is_refused(exported: bytes, tmp_path: Path) -> None:
    cut = write_lines(tmp_path / "cut.jsonl", exported.splitlines()[:6])
    with Journal.open(tmp_path / "j.db") as journal:
        with pytest.raises(InvalidInputError, match="the header says the session is failed but"):
            import_file(journal, cut, whole=True)
        assert journal.sessions() == []
        assert import_file(journal, cut).new_events == 5  # a prefix, taken as it is
