"""Hostile input, fuzzed through every entry point that reads outside data.

Entry points: ``import`` (JSONL, OpenAI transcripts and ATIF trajectories), ``diff`` and
``replay`` on files, a SQLite file crafted to look like a journal (read by every command),
and fixture files through the pytest plugin. Inputs: valid files cut short, with invalid
UTF-8, NaN and numbers too big for 64 bits, 100-level nesting, 50 MB payloads, duplicate
keys, unknown types and versions, wrong types anywhere, lines dropped, repeated or swapped
(hypothesis draws them; ``tests/fuzz_atheris.py`` does the same with coverage guidance,
opt-in).

Every input either goes through (exit 0, or 1 for a finding), or gets one clear line on
stderr naming where (``file:line``, or session and seq) with exit 2: never a traceback,
never an internal error, never a partial write (table dumps compared before and after).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from textual.pilot import Pilot

from journal import Journal, export_session, import_file
from journal.canonical import dumps_canonical

from .drill_agent import drill_journal
from .drill_helpers import drill_size
from .helpers import REPO, drop_triggers, foreign, one_error_line, run_cli, snapshot
from .openai_helpers import assistant, call, tool, user
from .tui_helpers import drive, open_app, press, screen_text

MARK = "@@hostile@@"

HOSTILE_VALUES: dict[str, str] = {
    "NaN": "NaN",
    "Infinity": "Infinity",
    "-Infinity": "-Infinity",
    "float past double": "1e400",
    "int past int64": "9223372036854775808",
    "negative int past int64": "-99999999999999999999999",
    "int of 5000 digits": "9" * 5000,
    "100 nested arrays": "[" * 100 + "]" * 100,
    "100 nested objects": '{"a":' * 100 + "1" + "}" * 100,
    "duplicate keys": '{"a": 1, "a": 2}',
    "lone surrogate": '"\\ud800"',
    "escapes": '"\\u0000\\u001b[2J\\u009b"',
    "array": '["not", "an", "object"]',
    "object": '{"type": "user_input"}',
    "null": "null",
    "true": "true",
    "string": '"x"',
    "empty string": '""',
    "negative": "-1",
    "float": "1.5",
    "unknown type": '"tool_called"',
    "future version": "99",
    "long string": '"' + "x" * 100_000 + '"',
}
"""Raw JSON text put in place of a value (some of it is not JSON at all, on purpose)."""


def _replace_value(line: bytes, key: str, raw: str) -> bytes:
    record = json.loads(line)
    record[key] = MARK
    return json.dumps(record).replace(json.dumps(MARK), raw).encode()


@st.composite
def mutated(draw: st.DrawFn, base: bytes) -> bytes:
    """A hostile variant of a file: its bytes damaged, or one value made hostile."""
    lines = base.split(b"\n")
    kind = draw(
        st.sampled_from(
            ["value", "value", "value", "cut", "bytes", "drop", "repeat", "swap", "garbage"]
        )
    )
    index = draw(st.integers(0, len(lines) - 2))  # the last element is the empty tail
    if kind == "value":
        try:
            keys = sorted(json.loads(lines[index]))
        except (ValueError, TypeError):
            keys = []
        key = draw(st.sampled_from([*keys, "extra"])) if keys else "extra"
        raw = HOSTILE_VALUES[draw(st.sampled_from(sorted(HOSTILE_VALUES)))]
        if keys:
            lines[index] = _replace_value(lines[index], key, raw)
    elif kind == "cut":
        line = lines[index]
        lines[index] = line[: draw(st.integers(0, max(len(line) - 1, 0)))]
        if draw(st.booleans()):
            lines = lines[: index + 1]  # the file ends there, without its newline
    elif kind == "bytes":
        at = draw(st.integers(0, len(lines[index])))
        junk = draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x00", b"\r", b'"']))
        lines[index] = lines[index][:at] + junk + lines[index][at:]
    elif kind == "drop":
        del lines[index]
    elif kind == "repeat":
        lines.insert(index, lines[index])
    elif kind == "swap":
        other = draw(st.integers(0, len(lines) - 2))
        lines[index], lines[other] = lines[other], lines[index]
    else:
        lines.insert(index, draw(st.binary(max_size=40)).replace(b"\n", b""))
    return b"\n".join(lines)


def _outcome(result: Any, path: Path, allowed: tuple[int, ...] = (0, 2)) -> str | None:
    """Check a command's exit; return its error line when it refused the input."""
    output = result.stdout + result.stderr
    assert "Traceback" not in output and result.exit_code in allowed, output[-2000:]
    if result.exit_code != 2:
        return None
    line = one_error_line(result)
    assert line.startswith(f"agent-journal: {path}"), line  # it names the file (and line)
    return line


# -- JSONL and OpenAI files ---------------------------------------------------------------------


class Corpus(dict[str, Any]):
    """The inputs of the fuzzed tests (shown by name only when hypothesis reports a case)."""

    def __repr__(self) -> str:
        return "corpus"


def make_corpus(folder: Path) -> Corpus:
    """Valid inputs to damage, and a journal (holding something else) to import into."""
    source = folder / "source.db"
    [session_id, other] = drill_journal(source, sessions=2, turns=1, seed=4)
    db = folder / "journal.db"
    with Journal.open(source) as journal, Journal.open(db) as target:
        exported = export_session(journal, session_id)
        target.import_records(other, [("-", row.record()) for row in journal.stored_events(other)])
    messages = [user("look it up"), assistant(None, call("c1", "lookup", {"q": "x"}))]
    messages += [tool("c1", "found"), assistant("done", usage={"prompt_tokens": 5})]
    openai = json.dumps(
        [{"messages": messages, "metadata": {"session_id": f"chat-{n}"}} for n in range(2)],
        indent=1,
    ).encode()
    atif = b"".join(  # JSON Lines: one trajectory a line, so a line's values get damaged too
        json.dumps(json.loads(path.read_bytes())).encode() + b"\n"
        for path in sorted((Path(__file__).parent / "data" / "atif").glob("*.json"))
    )
    return Corpus(folder=folder, db=db, jsonl=exported, openai=openai, atif=atif)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    """See `make_corpus`."""
    return make_corpus(tmp_path_factory.mktemp("hostile"))


def _fresh(corpus: dict[str, Any], name: str, data: bytes) -> tuple[Path, Path]:
    """A scratch copy of the journal and the hostile file, in a folder of their own."""
    folder = corpus["folder"] / "case"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    db = folder / "journal.db"
    shutil.copyfile(corpus["db"], db)
    path = folder / name
    path.write_bytes(data)
    return db, path


def _check_import(corpus: dict[str, Any], data: bytes, fmt: str) -> None:
    db, path = _fresh(corpus, "hostile.jsonl" if fmt == "jsonl" else "hostile.json", data)
    before = snapshot(db)
    result = run_cli("import", "--format", fmt, path, "--db", db)
    if _outcome(result, path) is not None:
        assert snapshot(db) == before
        return
    with Journal.open(db) as journal:
        assert journal.verify().ok


def _check_files(corpus: dict[str, Any], data: bytes) -> None:
    """``diff`` and ``replay`` on a hostile file: a verdict, or one line naming the file."""
    _, path = _fresh(corpus, "hostile.jsonl", data)
    base = path.with_name("base.jsonl")
    base.write_bytes(corpus["jsonl"])
    _outcome(run_cli("diff", base, path), path, (0, 1, 2))
    _outcome(run_cli("replay", path), path, (0, 1, 2))


FUZZ = settings(
    max_examples=100, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
MANY = settings(FUZZ, max_examples=drill_size(300, 1500))


def _fuzz(check: Callable[[dict[str, Any], bytes], None], source: str, many: bool) -> Any:
    @(MANY if many else FUZZ)
    @given(data=st.data())
    def run(corpus: dict[str, Any], data: st.DataObject) -> None:
        check(corpus, data.draw(mutated(corpus[source]), label="input"))

    return pytest.mark.slow(run) if many else run


test_a_hostile_jsonl_import = _fuzz(lambda c, d: _check_import(c, d, "jsonl"), "jsonl", False)
test_a_hostile_openai_import = _fuzz(lambda c, d: _check_import(c, d, "openai"), "openai", False)
test_a_hostile_atif_import = _fuzz(lambda c, d: _check_import(c, d, "atif"), "atif", False)
test_diff_and_replay_of_a_hostile_file = _fuzz(_check_files, "jsonl", False)
test_many_hostile_jsonl_imports = _fuzz(lambda c, d: _check_import(c, d, "jsonl"), "jsonl", True)
test_many_hostile_openai_imports = _fuzz(lambda c, d: _check_import(c, d, "openai"), "openai", True)
test_many_hostile_atif_imports = _fuzz(lambda c, d: _check_import(c, d, "atif"), "atif", True)
test_many_hostile_files_to_diff_and_replay = _fuzz(_check_files, "jsonl", True)


# -- a SQLite file crafted to look like a journal ----------------------------------------------

SQL_VALUES = [
    "'garbage {'",
    "'[1, 2]'",
    "'null'",
    '\'{"type": "user_input", "text": 7}\'',
    "42",
    "2.5",
    "-1",
    "9223372036854775807",
    "''",
    "x'ff00fe'",
    "x'1b5b324a'",
    "'\u001b[2J[bold]x[/bold]'",
]
"""SQL literals a foreign writer may leave in any column: garbage, wrong types, blobs."""

EVENT_COLUMNS = ("seq", "ts", "type", "v", "body", "hash", "summary")
SESSION_COLUMNS = (
    "agent",
    "status",
    "events",
    "steps",
    "cost",
    "started",
    "last_seq",
    "head_hash",
    "replay_of",
    "fork_seq",
    "latency_ms",
    "fold_version",
    "state",
)
STRUCTURE = [
    "UPDATE meta SET value = '0' WHERE key = 'schema_version'",
    "UPDATE meta SET value = '1' WHERE key = 'schema_version'",
    "UPDATE meta SET value = '2' WHERE key = 'schema_version'",
    "UPDATE meta SET value = '999' WHERE key = 'schema_version'",
    "UPDATE meta SET value = 'three' WHERE key = 'schema_version'",
    "UPDATE meta SET value = 'md5' WHERE key = 'chain'",
    "UPDATE meta SET value = 'hmac-sha256' WHERE key = 'chain'",
    "DELETE FROM meta WHERE key = 'format'",
    "DROP TABLE sessions",
    "DROP TABLE events",
    "DROP TABLE erasures",
    "ALTER TABLE sessions DROP COLUMN repairs",
    "DELETE FROM sessions",
    "DELETE FROM events WHERE seq = 3",
    "INSERT INTO erase_authorised VALUES ('drill-4-0')",
    "CREATE TABLE users (id INTEGER)",
]
"""Whole-schema damage: a meta table that lies, tables and columns missing, triggers gone."""

TAMPER = st.one_of(
    st.builds(
        lambda column, seq, value: (
            f"UPDATE events SET {column} = {value} WHERE session_id = 'drill-4-0' AND seq = {seq}"
        ),
        st.sampled_from(EVENT_COLUMNS),
        st.integers(0, 11),
        st.sampled_from(SQL_VALUES),
    ),
    st.builds(
        lambda column, value: f"UPDATE sessions SET {column} = {value}",
        st.sampled_from(SESSION_COLUMNS),
        st.sampled_from(SQL_VALUES),
    ),
    st.sampled_from(STRUCTURE),
)

READERS: list[list[str]] = [
    ["sessions"],
    ["sessions", "--json"],
    ["show", "drill-4-0"],
    ["show", "drill-4-0", "--json"],
    ["verify"],
    ["verify", "--json"],
    ["state", "drill-4-0"],
    ["state", "drill-4-0", "--at", "3"],
    ["export", "drill-4-0"],
    ["export", "drill-4-0", "--format", "otlp"],
    ["replay", "drill-4-0"],
    ["diff", "drill-4-0", "drill-4-1"],
]


def make_crafted_base(folder: Path) -> Path:
    """A journal of two drill sessions (``drill-4-0`` of 12 events) to craft from."""
    db = folder / "base.db"
    drill_journal(db, sessions=2, turns=1, seed=4)
    return db


@pytest.fixture(scope="module")
def crafted_base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """See `make_crafted_base`."""
    return make_crafted_base(tmp_path_factory.mktemp("crafted"))


def _check_crafted(base: Path, tampers: list[str], commands: list[list[str]]) -> None:
    db = base.with_name("crafted.db")
    shutil.copyfile(base, db)
    with foreign(db) as conn:
        drop_triggers(conn)  # what any writer with the file in hand can do first
        for statement in tampers:
            try:
                conn.execute(statement)
            except sqlite3.Error:
                pass  # (a tamper the schema refuses, or one made moot by an earlier one)
    before = snapshot(db)
    for command in commands:
        result = run_cli(*command, "--db", db)
        output = result.stdout + result.stderr
        assert "Traceback" not in output and result.exit_code in (0, 1, 2), (command, output)
        if result.exit_code == 2:  # (show and export may have streamed the events before)
            [line] = result.stderr.splitlines()
            assert line.startswith("agent-journal: ")
            assert str(db) in line or "session " in line, line  # it names where
        assert snapshot(db) == before, command


def _fuzz_crafted(many: bool) -> Any:
    @(MANY if many else FUZZ)
    @given(
        tampers=st.lists(TAMPER, min_size=1, max_size=3),
        commands=st.lists(st.sampled_from(READERS), min_size=1, max_size=4, unique_by=tuple),
    )
    def run(crafted_base: Path, tampers: list[str], commands: list[list[str]]) -> None:
        _check_crafted(crafted_base, tampers, commands)

    return pytest.mark.slow(run) if many else run


test_a_crafted_sqlite_journal = _fuzz_crafted(False)
test_many_crafted_sqlite_journals = _fuzz_crafted(True)


@pytest.mark.parametrize(
    "tamper", STRUCTURE + [f"UPDATE events SET {c} = x'ff00fe'" for c in EVENT_COLUMNS]
)
def test_every_command_on_a_crafted_journal(crafted_base: Path, tamper: str) -> None:
    _check_crafted(crafted_base, [tamper], READERS)


def test_the_tui_shows_a_crafted_journal_without_crashing(crafted_base: Path) -> None:
    db = crafted_base.with_name("crafted.db")
    for tamper in [
        "UPDATE events SET body = 'garbage {' WHERE seq = 1",
        "UPDATE events SET v = 'x', summary = x'1b5b324a' WHERE seq = 2",
        "UPDATE events SET seq = 2.5 WHERE seq = 2",
        "UPDATE sessions SET state = 'nope', status = 'weird' WHERE session_id = 'drill-4-0'",
    ]:
        shutil.copyfile(crafted_base, db)
        with foreign(db) as conn:
            drop_triggers(conn)
            conn.execute(tamper)

        async def walk(pilot: Pilot[Any]) -> None:
            for key in ("enter", "j", "j", "G"):
                await press(pilot, key)
            assert "\x1b" not in screen_text(pilot.app)  # type: ignore[arg-type]

        drive(open_app(db, session=None), walk)  # the sessions list, then the session


# -- fixture files through the pytest plugin --------------------------------------------------

FIXTURE_DAMAGE: dict[str, tuple[Callable[[list[bytes]], None], str]] = {
    "cut": (lambda lines: lines.__setitem__(3, lines[3][:25]), ":4: not valid JSON"),
    "utf8": (lambda lines: lines.__setitem__(2, lines[2] + b"\xff"), ":3: not valid UTF-8"),
    "nan": (lambda lines: lines.__setitem__(2, lines[2][:-1] + b',"x":NaN}'), ":3: not valid"),
    "int": (lambda lines: lines.__setitem__(2, lines[2][:-1] + b',"x":1e400}'), ":3: not valid"),
    "deep": (
        lambda lines: lines.__setitem__(
            2, lines[2][:-1] + b',"x":' + b"[" * 100 + b"]" * 100 + b"}"
        ),
        ":3: not valid JSON: nested",
    ),
    "dup": (lambda lines: lines.__setitem__(2, lines[2][:-1] + b',"seq":2}'), ":3: not valid"),
    "type": (
        lambda lines: lines.__setitem__(2, lines[2].replace(b'"user_input"', b'"tool_called"')),
        ":3: unknown event type 'tool_called'",
    ),
    "version": (
        lambda lines: lines.__setitem__(2, lines[2].replace(b'"v":1', b'"v":99')),
        ":3: event type 'user_input' v99 is newer",
    ),
    "hash": (
        lambda lines: lines.__setitem__(2, lines[2].replace(b'"text":"', b'"text":"X')),
        ":3: hash",
    ),
    "header": (
        lambda lines: lines.__setitem__(
            0, lines[0].replace(b'"format_version":1', b'"format_version":9')
        ),
        ":1: format_version 9 is not supported",
    ),
}


@pytest.mark.parametrize("update", [False, True], ids=["run", "--journal-update"])
def test_hostile_fixture_files_fail_alone_naming_file_and_line(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, update: bool
) -> None:
    monkeypatch.setenv("PYTEST_ADDOPTS", "-p no:textual-snapshot -p no:cacheprovider")
    folder = pytester.path / "fixtures"
    folder.mkdir()
    good = (REPO / "fixtures" / "refund-overrefund-fixed.jsonl").read_bytes()
    (folder / "good.jsonl").write_bytes(good)
    for name, (damage, _) in FIXTURE_DAMAGE.items():
        lines = good.split(b"\n")
        damage(lines)
        (folder / f"{name}.jsonl").write_bytes(b"\n".join(lines))
    before = {path.name: path.read_bytes() for path in folder.iterdir()}
    result = pytester.runpytest_subprocess(*(["--journal-update"] if update else []))
    result.assert_outcomes(passed=1, failed=len(FIXTURE_DAMAGE))
    output = result.stdout.str()
    assert "Traceback" not in output
    for name, (_, error) in FIXTURE_DAMAGE.items():
        assert f"{name}.jsonl{error}" in output, name
    assert {path.name: path.read_bytes() for path in folder.iterdir()} == before


# -- 50 MB payloads --------------------------------------------------------------------------


def _big_file(path: Path, text: str, tail: bytes = b"") -> Path:
    header = {"format": "agent-journal", "format_version": 1, "session_id": "big"}
    start = {"seq": 0, "session_id": "big", "ts": "2026-11-29T23:00:00.000000Z"}
    start.update(type="session_started", v=1, agent="tests.drill_agent:build")
    said = {**start, "seq": 1, "type": "user_input", "text": text}
    del said["agent"]
    lines = [json.dumps(item).encode() for item in (header, start, said)]
    path.write_bytes(b"\n".join(lines) + tail + b"\n")
    return path


def test_a_50_mb_payload_is_refused_naming_its_line_or_imported_whole_without_a_limit(
    tmp_path: Path,
) -> None:
    db = tmp_path / "journal.db"
    Journal.open(db).close()
    big = "x" * (50 * 2**20)
    before = snapshot(db)
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(_big_file(tmp_path / "whole.jsonl", big).read_bytes()[: 30 * 2**20])
    line = _outcome(run_cli("import", cut, "--db", db), cut)
    assert line is not None and line.startswith(f"agent-journal: {cut}:3: not valid JSON: ")
    whole = tmp_path / "whole.jsonl"
    size = len(dumps_canonical(json.loads(whole.read_bytes().splitlines()[2])))

    def refused(path: Path) -> str:
        return (
            f"agent-journal: {path}:3: session big seq 1: the user_input event is {size:,} "
            "bytes of canonical JSON, over the journal's limit of 16,777,216 (max_event_bytes); "
            "nothing was written"
        )

    # The import streams: the first bad line in file order is the one named.
    nan = _big_file(tmp_path / "nan.jsonl", big, b"\n" + b'{"seq": NaN}')
    assert _outcome(run_cli("import", nan, "--db", db), nan) == refused(nan)
    assert snapshot(db) == before
    assert _outcome(run_cli("import", whole, "--db", db), whole) == refused(whole)
    assert snapshot(db) == before
    other = _big_file(tmp_path / "other.jsonl", big[:-1] + "y")
    assert _outcome(run_cli("diff", whole, other), whole) == refused(whole)  # read as imports
    with Journal.open(db, max_event_bytes=None) as journal:  # no limit: it is taken whole
        import_file(journal, whole)
        assert journal.verify().ok and journal.require("big").events == 2
    assert run_cli("export", "big", "--db", db, "-o", tmp_path / "again.jsonl").exit_code == 0


# -- coverage-guided, with atheris (opt-in: slow) ----------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("target", ["jsonl", "openai", "atif", "files", "sqlite"])
def test_atheris_finds_no_input_that_gets_through_badly(target: str) -> None:
    pytest.importorskip("atheris")
    runs = drill_size(1000, 5000)
    done = subprocess.run(
        [sys.executable, "-m", "tests.fuzz_atheris", target, f"-atheris_runs={runs}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"Done {runs} in" in done.stderr, done.stderr[-500:]
