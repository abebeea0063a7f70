"""MCP tools captured and replayed: a real MCP server over stdio, the openai client as the model.

`tests.mcp_app` is the user's code: an ``AsyncOpenAI`` loop on `tests.fake_openai` whose
tools are those of `tests.mcp_tools_server` (the ``mcp`` package's own ``MCPServer``, run as
a process over stdio). Replays run with the model's server stopped, and where a test says
so with the MCP server's command pointing at nothing.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import ClientSession, MCPError
from mcp.client._memory import InMemoryTransport
from mcp.server.mcpserver import MCPServer
from mcp.types import (
    AudioContent,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

from agentloop import AgentLoopError
from capture import LIST_TOOLS
from journal import ActionCommitted, ActionFailed, Journal, SessionStarted
from replay import ReplayOptions, ReplayResult, replay_entry

from . import mcp_app as app
from .client_replays import fixture_green_then_red
from .fake_openai import serving
from .helpers import run_cli

QUESTION = "Where is order 5?"
THREE = "Where is order 5? I need three units."
"""The model writes the quantity as the string "3" (fake_openai's planted bug)."""


@pytest.fixture(autouse=True)
def _server_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The server's outbox and start log in the test's folder; the app as it ships."""
    monkeypatch.setenv("MCP_OUTBOX", str(tmp_path / "outbox.txt"))
    monkeypatch.setenv("MCP_STARTS", str(tmp_path / "starts.txt"))
    monkeypatch.delenv("MCP_SERVER_CHANGES", raising=False)
    (tmp_path / "outbox.txt").write_text("")
    (tmp_path / "starts.txt").write_text("")
    monkeypatch.setattr(app, "PURE", {"check_stock"})
    monkeypatch.setattr(app, "COMMAND", list(app.COMMAND))
    app.CHANGES.clear()
    yield
    app.CHANGES.clear()


def outbox(tmp_path: Path) -> list[str]:
    return (tmp_path / "outbox.txt").read_text().splitlines()


def starts(tmp_path: Path) -> int:
    return len((tmp_path / "starts.txt").read_text().splitlines())


def no_server(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The MCP server's command points at nothing: no replay can start it."""
    monkeypatch.setattr(app, "COMMAND", [str(tmp_path / "no-such-server")])


@contextmanager
def recorded(journal: Journal | None = None) -> Iterator[Journal]:
    """A journal of the app's sessions, the model's server up while the block runs."""
    journal = journal or Journal.open(":memory:")
    with serving() as url:
        app.bind(journal, url)
        yield journal


def record(*questions: str, entry: Any = None) -> tuple[Journal, list[str]]:
    """The sessions of ``questions``, in their order."""
    with recorded() as journal:
        for question in questions:
            asyncio.run((entry or app.answer)(question))
    asked = {question_of(journal, s.session_id): s.session_id for s in journal.sessions()}
    return journal, [asked[question] for question in questions]


def question_of(journal: Journal, session: str) -> str:
    return str(next(e.text for e in events(journal, session) if e.type == "user_input"))


def replayed(journal: Journal, session: str, entry: Any = None, **options: Any) -> ReplayResult:
    return replay_entry(journal, session, entry or app.answer, ReplayOptions(**options))


def events(journal: Journal, session: str) -> list[Any]:
    return [item.event for item in journal.events(session)]


def seq_of(journal: Journal, session: str, tool: str) -> int:
    return next(
        item.seq
        for item in journal.events(session)
        if isinstance(item.event, ActionCommitted | ActionFailed) and item.event.tool == tool
    )


LOOP = [
    "session_started",
    "action_committed",  # list_tools, journaled once the first request started the session
    "user_input",
    "action_proposed",
    "action_committed",  # lookup_order
    "action_proposed",
    "action_committed",  # check_stock
    "action_proposed",
    "action_committed",  # send_email
    "action_proposed",
    "agent_completed",
]


def test_calls_results_is_error_and_mcp_errors_are_journaled_live(tmp_path: Path) -> None:
    journal, (ok, refused, missing) = record(QUESTION, "Where is order 9?", "Where is order 13?")
    found = events(journal, ok)
    assert [event.type for event in found] == LOOP
    started = found[0]
    assert isinstance(started, SessionStarted)
    assert started.model == app.MODEL and started.system_prompt == app.prompt()
    assert [tool.name for tool in started.config.tools] == [
        "lookup_order",
        "check_stock",
        "send_email",
    ]
    listing, lookup = found[1], found[4]
    assert isinstance(listing, ActionCommitted) and listing.tool == LIST_TOOLS
    assert isinstance(listing.result, dict)
    assert [tool["name"] for tool in listing.result["tools"]] == [
        "lookup_order",
        "check_stock",
        "send_email",
    ]
    assert isinstance(lookup, ActionCommitted) and lookup.args == {"order_id": "5"}
    assert isinstance(lookup.result, dict) and lookup.result["isError"] is False
    assert lookup.result["structuredContent"] == {"order_id": "5", "sku": "SKU-3"}
    assert lookup.result["content"][0]["type"] == "text"
    assert outbox(tmp_path) == ["customer@example.com: order 5"]
    # an MCPError the server raised: the call's failure, with its code and data
    failed = events(journal, refused)[6]
    assert isinstance(failed, ActionFailed) and failed.tool == "check_stock"
    assert failed.error is not None and failed.error["type"] == "mcp.shared.exceptions:MCPError"
    assert failed.error["attributes"]["error"] == {
        "code": -32602,
        "message": "unknown sku SKU-9",
        "data": {"sku": "SKU-9"},
    }
    # an isError result: a result, as the code got it
    answered = events(journal, missing)[4]
    assert isinstance(answered, ActionCommitted) and isinstance(answered.result, dict)
    assert answered.result["isError"] is True


def test_unchanged_code_replays_identical_with_no_server_and_sends_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(app, "PURE", set())  # every call served: no server needed
    journal, sessions = record(QUESTION, "Where is order 9?", "Where is order 13?", THREE)
    sent, spawned = outbox(tmp_path), starts(tmp_path)
    assert spawned == 4
    no_server(monkeypatch, tmp_path)
    for session in sessions:
        result = replayed(journal, session)
        assert result.identical, result.first_divergence
        assert LIST_TOOLS in result.served.not_run
    assert outbox(tmp_path) == sent  # the side-effect tool never ran
    assert starts(tmp_path) == spawned  # no server was started


def test_a_served_mcp_error_is_raised_again_as_itself() -> None:
    caught: list[MCPError] = []

    @app.capture.entry
    async def ask_for_sku9(question: str) -> str:
        async with app.capture.mcp_stdio(app.server()) as shop:
            try:
                await shop.call_tool("check_stock", {"sku": "SKU-9", "quantity": 1})
            except MCPError as error:
                caught.append(error)
                return f"{error.code}: {error.message} {error.data}"
        return "no error"

    with recorded() as journal:
        answered = asyncio.run(ask_for_sku9(question="x"))
    (summary,) = journal.sessions()
    result = replayed(journal, summary.session_id, ask_for_sku9)
    assert result.identical, result.first_divergence
    live, again = caught
    assert type(again) is MCPError and again is not live
    assert (again.code, again.message, again.data) == (live.code, live.message, live.data)
    assert answered == "-32602: unknown sku SKU-9 {'sku': 'SKU-9'}"


def test_a_pure_tool_runs_live_and_a_changed_server_diverges_at_its_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal, (session,) = record(QUESTION)
    result = replayed(journal, session)
    assert result.identical, result.first_divergence
    assert result.served.ran == ("check_stock",)
    assert starts(tmp_path) == 2  # the replay started the server for the pure tool only
    monkeypatch.setenv("MCP_SERVER_CHANGES", "stock")  # reserved units no longer in stock
    divergence = replayed(journal, session).first_divergence
    assert divergence is not None and divergence.seq == seq_of(journal, session, "check_stock")
    assert "in_stock" in " ".join(str(change.path) for change in divergence.changes)
    assert outbox(tmp_path) == ["customer@example.com: order 5"]


def test_a_pure_tool_whose_server_cannot_start_diverges_there_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal, (session,) = record(QUESTION)
    no_server(monkeypatch, tmp_path)
    divergence = replayed(journal, session).first_divergence
    assert divergence is not None and divergence.seq == seq_of(journal, session, "check_stock")
    assert divergence.actual is not None and divergence.actual["type"] == "action_failed"
    assert "no-such-server" in divergence.actual["message"]


def test_a_fix_in_the_loop_diverges_at_the_call_it_changes() -> None:
    journal, (session,) = record(THREE)
    assert replayed(journal, session).identical
    app.CHANGES.add("fix")  # the quantity "3" sent as 3
    divergence = replayed(journal, session).first_divergence
    assert divergence is not None and divergence.seq == seq_of(journal, session, "check_stock")
    assert "quantity" in " ".join(str(change.path) for change in divergence.changes)


def test_a_side_effect_tool_runs_live_only_when_named_and_allowed(tmp_path: Path) -> None:
    journal, (session,) = record(QUESTION)
    with pytest.raises(AgentLoopError, match="--allow-side-effects send_email"):
        replayed(journal, session, live_tools=["send_email"])
    assert outbox(tmp_path) == ["customer@example.com: order 5"]
    result = replayed(
        journal, session, live_tools=["send_email"], allow_side_effects=["send_email"]
    )
    assert result.identical, result.first_divergence
    assert outbox(tmp_path) == ["customer@example.com: order 5"] * 2
    with pytest.raises(AgentLoopError, match="no tool 'send_mail'"):
        replayed(journal, session, live_tools=["send_mail"])


def test_the_tool_names_a_recording_listed_may_be_named_live_before_the_code_runs() -> None:
    journal, (session,) = record(QUESTION)
    for name in ("lookup_order", LIST_TOOLS):
        app.capture.tools.pop(name, None)  # a fresh process knows them from the recording
    result = replayed(journal, session, live_tools=["lookup_order", LIST_TOOLS])
    assert result.identical, result.first_divergence
    assert result.served.ran == ("check_stock", "lookup_order", LIST_TOOLS)


def test_a_session_the_code_opens_itself_replays_identical(tmp_path: Path) -> None:
    journal, (session,) = record(QUESTION, entry=app.answer_own_session)
    result = replayed(journal, session, app.answer_own_session)
    assert result.identical, result.first_divergence
    assert starts(tmp_path) == 2  # the code opens its server in a replay too
    assert outbox(tmp_path) == ["customer@example.com: order 5"]


def test_a_replay_that_stops_inside_the_sdks_task_groups_diverges_and_halts_as_stopped() -> None:
    journal, (session,) = record(THREE, entry=app.answer_own_session)
    app.CHANGES.add("fix")  # diverges at check_stock; the next model call stops the replay
    result = replay_entry(journal, session, app.answer_own_session, ReplayOptions(), save=True)
    divergence = result.first_divergence
    assert divergence is not None and divergence.seq == seq_of(journal, session, "check_stock")
    halted = events(journal, result.replay_session_id)[-1]
    assert halted.type == "agent_halted" and halted.rule == "replay_stopped"


def test_a_method_no_call_journals_stops_a_replay_that_started_no_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    @app.capture.entry
    async def prompts(question: str) -> str:
        async with app.capture.mcp_stdio(app.server(), io={"lookup_order"}) as shop:
            await shop.call_tool("lookup_order", {"order_id": "5"})
            listed = await shop.list_prompts()
            return f"{len(listed.prompts)} prompts"

    with recorded() as journal:
        assert asyncio.run(prompts(QUESTION)) == "0 prompts"
    (summary,) = journal.sessions()
    no_server(monkeypatch, tmp_path)
    divergence = replayed(journal, summary.session_id, prompts).first_divergence
    assert divergence is not None and divergence.actual is not None
    assert divergence.actual["rule"] == "replay_stopped"
    assert "list_prompts()" in divergence.actual["reason"]


QUESTIONS = [
    f"Where is order {n}?" + (" I need three units." if n % 4 == 1 else "") for n in range(20)
]


@pytest.mark.slow  # two minutes: a server process per session and per pure-tool replay
def test_twenty_sessions_replay_identical_and_planted_changes_diverge_where_they_should(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with recorded() as journal:
        for index, question in enumerate(QUESTIONS):
            entry = app.answer_own_session if index % 5 == 4 else app.answer
            asyncio.run(entry(question))
    entries = {}
    for summary in journal.sessions():
        started = events(journal, summary.session_id)[0]
        assert isinstance(started, SessionStarted) and started.agent is not None
        entries[summary.session_id] = getattr(app, started.agent.split(":")[1])
    assert len(entries) == 20
    sent = outbox(tmp_path)
    identical = [replayed(journal, s, e).identical for s, e in entries.items()]
    assert identical == [True] * 20
    app.CHANGES.add("fix")  # only the sessions where the model wrote "3" change
    fixed = {s: replayed(journal, s, e).first_divergence for s, e in entries.items()}
    moved = {s: d.seq for s, d in fixed.items() if d is not None}
    # the sessions whose check_stock the model asked for with "3" (orders 1, 5, 9, 17; the
    # lookup of order 13 failed first)
    expected = {
        s: seq_of(journal, s, "check_stock")
        for s in entries
        if any(
            isinstance(e, ActionCommitted | ActionFailed)
            and e.tool == "check_stock"
            and isinstance(e.args.get("quantity"), str)
            for e in events(journal, s)
        )
    }
    assert moved == expected and len(moved) == 4
    app.CHANGES.clear()
    app.CHANGES.add("prompt")
    prompted = [replayed(journal, s, e).first_divergence for s, e in entries.items()]
    assert [d.seq if d else None for d in prompted] == [0] * 20
    assert outbox(tmp_path) == sent


def test_a_fixture_of_an_mcp_session_is_green_then_red(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal, (session,) = record(THREE)
    fixture_green_then_red(pytester, monkeypatch, (journal, session), "tests.mcp_app", "fix", 6)


def test_sessions_on_either_store_replay_identical_and_the_cli_reads_them(
    any_store: Any, tmp_path: Path
) -> None:
    journal = any_store.journal
    with recorded(journal):
        for question in (QUESTION, "Where is order 9?", "Where is order 13?"):
            asyncio.run(app.answer(question))
    summaries = list(journal.sessions())
    assert len(summaries) == 3 and {s.status for s in summaries} == {"completed"}
    for summary in summaries:
        result = replayed(journal, summary.session_id)
        assert result.identical, result.first_divergence
    listed = json.loads(run_cli("sessions", "--db", any_store.target, "--json").stdout)
    assert {row["session_id"] for row in listed} == {s.session_id for s in summaries}
    assert {row["agent"] for row in listed} == {"tests.mcp_app:answer"}
    first = next(s.session_id for s in summaries if question_of(journal, s.session_id) == QUESTION)
    shown = run_cli("show", first, "--db", any_store.target)
    assert shown.exit_code == 0
    assert LIST_TOOLS in shown.stdout and "check_stock" in shown.stdout


# -- a CallToolResult through the journal ----------------------------------------------

_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)
_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=8,
)
_BLOCKS = st.one_of(
    st.builds(TextContent, type=st.just("text"), text=_TEXT),
    st.builds(
        ImageContent, type=st.just("image"), data=st.just("aGk="), mime_type=st.just("image/png")
    ),
    st.builds(
        AudioContent, type=st.just("audio"), data=st.just("aGk="), mime_type=st.just("audio/wav")
    ),
    st.builds(
        ResourceLink,
        type=st.just("resource_link"),
        uri=st.just("file:///notes.txt"),
        name=_TEXT,
    ),
    st.builds(
        EmbeddedResource,
        type=st.just("resource"),
        resource=st.builds(TextResourceContents, uri=st.just("file:///a.txt"), text=_TEXT),
    ),
)
_RESULTS = st.builds(
    CallToolResult,
    content=st.lists(_BLOCKS, max_size=4),
    structured_content=st.none() | st.dictionaries(_TEXT, _JSON, max_size=3),
    is_error=st.booleans(),
)

echo = MCPServer("echo")
GIVEN: list[CallToolResult] = []
READ: list[CallToolResult] = []


@echo.tool()
def give() -> CallToolResult:
    """The result the test drew."""
    return GIVEN[-1]


@app.capture.entry
async def give_back(question: str) -> str:
    async with InMemoryTransport(echo) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            READ.append(await app.capture.mcp(session, io={"give"}).call_tool("give", {}))
    return question


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_RESULTS)
def test_any_call_tool_result_is_served_back_equal(result: CallToolResult) -> None:
    GIVEN[:] = [result]
    READ.clear()
    with recorded() as journal:
        asyncio.run(give_back("x"))
    (summary,) = journal.sessions()
    GIVEN[:] = [CallToolResult(content=[TextContent(type="text", text="not the recording")])]
    replay = replayed(journal, summary.session_id, give_back)
    assert replay.identical, replay.first_divergence
    live, again = READ
    assert type(again) is CallToolResult
    assert again == live
    assert again.model_dump(mode="json") == live.model_dump(mode="json")
