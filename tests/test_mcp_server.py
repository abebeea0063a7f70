"""``agent-journal mcp``: the server spawned over stdio, driven by the mcp package's own client.

Every tool answers what the matching CLI command answers with ``--json`` (on a SQLite file
and on PostgreSQL); bad arguments, unknown sessions and fixture names that leave the folder
are tool errors of one line; a replay from the server never runs a model or a side-effect
tool live: the support desk's e-mail tool appends to a file and the model server counts its
requests, and neither moves while the server replays, identical or diverged.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from journal import Journal
from tui.compact import MAX_STRING, bounded

from . import replay_helpers as rh
from . import support_app as app
from .fake_openai import Faulty, serving
from .helpers import REPO, run_cli, run_process
from .stores import open_store

TOOLS = ["list_sessions", "timeline", "state_at", "search", "diff", "replay", "make_fixture"]
BUGGY, FIXED_TWIN = rh.BUGGY, "demo-refund-fixed-s0"


class Client:
    """One server process and its client session."""

    def __init__(self, session: ClientSession) -> None:
        self.session = session

    async def call(self, tool: str, **arguments: Any) -> tuple[bool, str]:
        """The tool's answer: whether it is an error, and its one text block."""
        result = await self.session.call_tool(tool, arguments)
        [block] = result.content
        assert block.type == "text"
        return bool(result.is_error), block.text

    async def json(self, tool: str, **arguments: Any) -> Any:
        """A tool's answer that must not be an error, parsed."""
        failed, text = await self.call(tool, **arguments)
        assert not failed, text
        return json.loads(text)

    async def error(self, tool: str, **arguments: Any) -> str:
        """A tool's answer that must be an error of one line, without a traceback."""
        failed, text = await self.call(tool, **arguments)
        assert failed, text
        assert "\n" not in text and "Traceback" not in text
        assert text.startswith(f"Error executing tool {tool}: ")
        return text.removeprefix(f"Error executing tool {tool}: ")


@asynccontextmanager
async def connected(
    db: str, *options: str, env: dict[str, str] | None = None
) -> AsyncIterator[Client]:
    """``agent-journal mcp --db DB OPTIONS`` spawned from the repository's root."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-c", "from tui.cli import main; main()", "mcp", "--db", db, *options],
        cwd=REPO,
        env=env,
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield Client(session)


def served(
    db: str | Path, *options: str | Path, env: dict[str, str] | None = None
) -> Callable[[Callable[[Client], Coroutine[Any, Any, None]]], None]:
    """Run the decorated coroutine once against a fresh server (a decorator that calls)."""

    def run(body: Callable[[Client], Coroutine[Any, Any, None]]) -> None:
        async def main() -> None:
            async with connected(str(db), *map(str, options), env=env) as client:
                await body(client)

        anyio.run(main)

    return run


def cli_json(*args: object) -> Any:
    result = run_cli(*args, "--json")
    assert result.exit_code in (0, 1), result.stderr
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return rh.demo_file(tmp_path_factory.mktemp("mcp"))


@pytest.fixture(params=["sqlite", "postgres"])
def demo_target(request: pytest.FixtureRequest, demo_db: Path, tmp_path: Path) -> Iterator[str]:
    """The demo sessions on each store: the SQLite file, a copy in a PostgreSQL schema."""
    if request.param == "sqlite":
        yield str(demo_db)
        return
    with open_store("postgres", tmp_path) as store:
        rh.copy_all(demo_db, store.journal)
        yield store.target


def test_the_server_lists_its_tools_with_their_arguments(demo_db: Path) -> None:
    @served(demo_db)
    async def _(client: Client) -> None:
        listed = (await client.session.list_tools()).tools
        assert [tool.name for tool in listed] == TOOLS
        schemas = {tool.name: tool.input_schema for tool in listed}
        assert schemas["replay"]["properties"].keys() == {"session", "ignore"}
        assert schemas["timeline"]["required"] == ["session"]
        assert all(tool.description for tool in listed)


def test_every_reading_tool_answers_as_its_cli_command(demo_target: str) -> None:
    db = ("--db", demo_target)
    expected = {
        "sessions": cli_json("sessions", *db, "--limit", "3"),
        "halted": cli_json("sessions", *db, "--status", "halted"),
        "show": cli_json("show", BUGGY, *db),
        "state": cli_json("state", BUGGY, *db, "--at", "3"),
        "last_state": cli_json("state", BUGGY, *db),
        "search": cli_json("search", "refund", *db, "--limit", "5"),
        "diff": cli_json("diff", BUGGY, FIXED_TWIN, *db),
        "replay": cli_json("replay", BUGGY, *db),
        "diverged": cli_json("replay", "demo-crawler-s0", *db, "--ignore", "*.text"),
    }
    assert expected["replay"]["verdict"] == "identical"
    assert expected["diff"]["verdict"] == "diverged"

    @served(demo_target)
    async def _(client: Client) -> None:
        listed = await client.json("list_sessions", limit=3)
        assert listed == {"sessions": expected["sessions"]}
        halted = await client.json("list_sessions", status="halted")
        assert halted["sessions"] == expected["halted"]
        assert {s["status"] for s in halted["sessions"]} == {"halted"}

        timeline = await client.json("timeline", session=BUGGY)
        assert timeline["session"] == expected["show"]["session"]
        assert timeline["events"] == [
            [e["seq"], e["ts"], e["type"], row[3]]
            for e, row in zip(expected["show"]["events"], timeline["events"], strict=True)
        ]
        assert timeline["next_seq"] is None
        detail = await client.json("timeline", session=BUGGY, detail=True)
        assert detail["events"] == expected["show"]["events"]

        assert await client.json("state_at", session=BUGGY, seq=3) == expected["state"]
        assert await client.json("state_at", session=BUGGY) == expected["last_state"]
        found = await client.json("search", query="refund", limit=5)
        assert found == {"hits": expected["search"]}
        assert await client.json("diff", a=BUGGY, b=FIXED_TWIN) == expected["diff"]
        assert await client.json("replay", session=BUGGY) == expected["replay"]


def test_the_summaries_of_a_timeline_are_the_journals(demo_db: Path) -> None:
    with Journal.open(demo_db) as journal:
        rows = [[r.seq, r.ts, r.type, r.summary] for r in journal.stored_events(BUGGY)]

    @served(demo_db)
    async def _(client: Client) -> None:
        assert (await client.json("timeline", session=BUGGY))["events"] == rows
        page = await client.json("timeline", session=BUGGY, from_seq=2, limit=3)
        assert (page["events"], page["next_seq"]) == (rows[2:5], 5)
        ranged = await client.json("timeline", session=BUGGY, from_seq=6, to_seq=6)
        assert (ranged["events"], ranged["next_seq"]) == (rows[6:7], None)


def test_list_sessions_filters_by_text_and_metadata(demo_db: Path) -> None:
    expected = [s["session_id"] for s in cli_json("sessions", "--db", demo_db)]
    with Journal.open(demo_db) as journal:
        holding = {hit.session_id for hit in journal.search("refund", limit=1000)}

    @served(demo_db)
    async def _(client: Client) -> None:
        found = await client.json("list_sessions", text="refund", limit=50)
        ids = [s["session_id"] for s in found["sessions"]]
        assert ids == [s for s in expected if s in holding] and ids
        tagged = await client.json("list_sessions", meta={"scenario": "crawler"})
        assert [s["session_id"] for s in tagged["sessions"]] == ["demo-crawler-s0"]
        assert (await client.json("list_sessions", since="2d", limit=2))["sessions"] == (
            cli_json("sessions", "--db", demo_db, "--limit", "2")
        )


def test_bad_arguments_are_one_line_errors(demo_db: Path) -> None:
    @served(demo_db)
    async def _(client: Client) -> None:
        assert await client.error("state_at", session=BUGGY, seq="abc") == (
            "argument seq: Input should be a valid integer, unable to parse string "
            "as an integer (got 'abc')"
        )
        assert await client.error("list_sessions", limit=0) == (
            "argument limit: Input should be greater than or equal to 1 (got 0)"
        )
        assert "argument status: Input should be 'running'" in await client.error(
            "list_sessions", status="lost"
        )
        assert await client.error("timeline") == ("argument session: Field required (got {})")
        assert await client.error("replay", session=BUGGY, live_tools=True) == (
            "unknown argument 'live_tools' (it takes session, ignore)"
        )
        assert await client.error("state_at", session=BUGGY, seq=99) == (
            f"session {BUGGY}: seq 99: no such seq (it has seqs 0..7)"
        )
        assert await client.error("timeline", session=BUGGY, from_seq=5, to_seq=2) == (
            "to_seq 2 is before from_seq 5"
        )
        assert (await client.error("list_sessions", since="yesterday")).startswith(
            "since: 'yesterday' is not a time: give RFC 3339"
        )
        assert (await client.error("search", query="refund", type="refunded")).startswith(
            "type 'refunded': not an event type (action_committed, "
        )
        assert (await client.error("diff", a=BUGGY, b=BUGGY, ignore=["x"])).startswith(
            "--ignore 'x': expected EVENT_TYPE.dotted.path or *.dotted.path"
        )


def test_a_session_that_does_not_exist_is_named(demo_db: Path, tmp_path: Path) -> None:
    missing = f"session ghost: not in {demo_db}"

    @served(demo_db, "--fixtures", tmp_path / "fixtures")
    async def _(client: Client) -> None:
        assert await client.error("timeline", session="ghost") == missing
        assert await client.error("state_at", session="ghost") == missing
        assert await client.error("search", query="refund", session="ghost") == missing
        assert await client.error("diff", a=BUGGY, b="ghost") == missing
        assert await client.error("replay", session="ghost") == missing
        assert await client.error("make_fixture", session="ghost") == missing

    assert not (tmp_path / "fixtures").exists()


def test_make_fixture_writes_what_the_fixture_command_writes_inside_the_folder_only(
    demo_db: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "fixtures"
    by_cli = tmp_path / "cli.jsonl"  # unredacted: redaction's placeholders differ per run
    written = run_cli("fixture", BUGGY, "--db", demo_db, "-o", by_cli, "--no-redact")
    assert written.exit_code == 0, written.stderr

    @served(demo_db, "--fixtures", folder)
    async def _(client: Client) -> None:
        made = await client.json("make_fixture", session=BUGGY, redact=False)
        assert made == {
            "path": str(folder.resolve() / f"{BUGGY}.jsonl"),
            "note": written.stdout.strip().replace(str(by_cli), made["path"]),
        }
        assert (folder / f"{BUGGY}.jsonl").read_bytes() == by_cli.read_bytes()
        assert await client.error("make_fixture", session=BUGGY) == (
            f"{BUGGY}.jsonl exists in the fixtures folder: pass overwrite to replace it"
        )
        again = await client.json("make_fixture", session=BUGGY, name="refund")
        assert again["note"] == f"wrote {folder.resolve() / 'refund.jsonl'}: 8 events, " + (
            "completed, redacted"
        )
        replaced = await client.json("make_fixture", session=BUGGY, overwrite=True)
        assert replaced["note"].endswith("redacted")
        for name in ("../escape", "..", "a/b.jsonl", "/tmp/abs.jsonl", "a\\b", "x..jsonl", ""):
            assert await client.error("make_fixture", session=BUGGY, name=name) == (
                f"fixture name {name!r}: give a plain file name (no path separator, no '..')"
            )

    assert sorted(p.name for p in folder.iterdir()) == sorted([f"{BUGGY}.jsonl", "refund.jsonl"])
    assert (folder / "refund.jsonl").read_text().count("\n") == 9  # the header, 8 events
    assert (folder / f"{BUGGY}.jsonl").read_bytes() != by_cli.read_bytes()  # now redacted
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cli.jsonl", "fixtures"]


def test_make_fixture_without_a_fixtures_folder_is_refused(demo_db: Path) -> None:
    @served(demo_db)
    async def _(client: Client) -> None:
        assert await client.error("make_fixture", session=BUGGY) == (
            "this server was started without --fixtures DIR: no fixture folder"
        )


def test_a_missing_journal_is_one_line_and_exit_2(tmp_path: Path) -> None:
    result = run_process("mcp", "--db", tmp_path / "none.db")
    assert (result.returncode, result.stdout) == (2, "")
    [line] = result.stderr.splitlines()
    assert line.startswith("agent-journal: ") and "none.db" in line
    assert not (tmp_path / "none.db").exists()


# -- replay never runs anything live ------------------------------------------------------------


@pytest.fixture
def support(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, str, str]]:
    """The support desk's session recorded into a file; the model server still up (counting
    requests: `Faulty.requests`); the e-mail tool appending to ``outbox.txt``. Yields the
    journal, the session and the server's URL."""
    outbox = tmp_path / "outbox.txt"
    monkeypatch.setenv("SUPPORT_OUTBOX", str(outbox))
    Faulty.faults, Faulty.requests = [], []
    path = tmp_path / "support.db"
    with serving(Faulty) as url, Journal.open(path) as journal:
        app.bind(journal, url)
        assert app.answer("Where is order 5?").startswith("Order 5")
        (summary,) = journal.sessions()
        journal.close()
        yield path, summary.session_id, url
    app.OUTBOX.clear()


def test_replay_from_the_server_runs_no_model_and_no_side_effect_tool(
    support: tuple[Path, str, str], tmp_path: Path
) -> None:
    path, session, url = support
    outbox = tmp_path / "outbox.txt"
    assert outbox.read_text().count("\n") == 1  # the recorded run sent one e-mail
    requests = len(Faulty.requests)
    env = {
        "SUPPORT_OUTBOX": str(outbox),
        "SUPPORT_MODEL_URL": url,  # reachable: a live call would be counted
        "SUPPORT_JOURNAL": str(tmp_path / "capture.db"),
    }
    by_cli = run_cli("replay", session, "--db", path, "--json")
    assert by_cli.exit_code == 0, by_cli.stderr

    @served(path, env=env)
    async def identical(client: Client) -> None:
        result = await client.json("replay", session=session)
        assert result == json.loads(by_cli.stdout)
        assert result["verdict"] == "identical"
        assert result["served"]["not_run"] == ["lookup_order", "send_email"]
        await client.error("replay", session=session, allow_side_effects=["send_email"])
        await client.error("replay", session=session, live_model="agent")

    assert outbox.read_text().count("\n") == 1
    assert len(Faulty.requests) == requests

    @served(path, env=env | {"SUPPORT_CHANGES": "stock"})
    async def diverged(client: Client) -> None:
        result = await client.json("replay", session=session)
        assert result["verdict"] == "diverged"
        assert result["first_divergence"]["seq"] == 7  # check_stock's result, run for real

    assert outbox.read_text().count("\n") == 1  # past the divergence nothing ran on
    assert len(Faulty.requests) == requests
    assert not (tmp_path / "capture.db").exists()  # and nothing was captured anew
    with Journal.open(path) as journal:
        assert [s.session_id for s in journal.sessions()] == [session]  # no replay saved


# -- bounded answers ----------------------------------------------------------------------------


def test_a_long_payload_is_cut_and_the_answer_says_so() -> None:
    doc = {"events": [{"seq": n, "result": "x" * 5000} for n in range(200)]}
    text = bounded(doc, max_chars=20_000)
    shown = json.loads(text)
    assert len(text) <= 20_000
    assert shown["truncated"][0] == "200 long strings cut to 120 characters"
    assert "characters cut]" in shown["events"][0]["result"]
    assert shown["truncated"][1] == (
        "events: the first 100 of 200 shown; ask for fewer (limit) or a narrower range"
    )
    assert shown["events"] == [
        {"seq": n, "result": "x" * 90 + "…[4880 characters cut]…" + "x" * 30} for n in range(100)
    ]


TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=3000)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | TEXT,
    lambda inner: (
        st.lists(inner, max_size=8) | st.dictionaries(TEXT.filter(lambda t: len(t) < 9), inner)
    ),
    max_leaves=40,
)


@given(doc=st.dictionaries(st.text(max_size=8), JSON, max_size=6))
def test_bounded_is_valid_json_within_its_size_and_unchanged_when_it_fits(
    doc: dict[str, Any],
) -> None:
    text = bounded(doc, max_chars=4_000)
    assert len(text) <= 4_000
    shown = json.loads(text)
    fits = len(orjson.dumps(doc)) <= 3_600 and all(
        not isinstance(v, str) or len(v) <= MAX_STRING for v in _strings(doc)
    )
    if fits:
        assert shown == doc
    else:
        assert shown["truncated"]


def _strings(value: Any) -> Iterator[Any]:
    if isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    else:
        yield value
