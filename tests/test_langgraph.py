"""LangGraph and LangChain, captured and replayed: tests/langgraph_app against a real server.

Twenty sessions are recorded with a ``ChatOpenAI`` on an OpenAI-compatible server the
test starts (`tests.langgraph_app.server`): ten runs of the prebuilt ReAct agent, and five
threads of the hand-built shop graph, two turns each (the first ends at its
``interrupt()``, the second resumes it with ``Command(resume=...)``, from the SQLite
checkpointer). Then the server is stopped and the checkpointer's database closed, and
every session replays; changed graphs diverge where they change; a fork asks the model
again only past its fork point.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from click.testing import CliRunner
from langgraph.types import Command

from agentloop import AgentLoadError, TrustList
from capture.frameworks.langgraph import UnrestorableState, decode_value, encode_value
from journal import ENTRY_INPUTS_KEY, Journal, RecordedEvent
from replay import Replayer, ReplayOptions, fork, replay_fixture, write_fixture
from replay.integrations.langgraph import replay_graph
from tests.fake_openai import serving
from tests.langgraph_app.server import Counting
from tui.cli import cli

TRUST = TrustList(["tests.*"])
SHOP_THREADS = [
    ("t-1", "order 12 and order 34", "yes"),
    ("t-2", "order 34 and order 56", "yes"),
    ("t-3", "order 12 and order 78", "no"),
    ("t-4", "order 56 and order 78", "yes"),
]
"""Threads whose first turn ends at the approval and whose second resumes it."""


@dataclass
class Project:
    journal: Journal
    db: Path
    port: int
    react: ModuleType
    shop: ModuleType
    notes: ModuleType
    common: ModuleType
    react_sessions: list[str]
    shop_turns: dict[str, list[str]]
    """thread id -> its sessions, in turn order."""


def _new_session(journal: Journal, before: set[str]) -> str:
    (found,) = {s.session_id for s in journal.sessions()} - before
    return found


def _run(journal: Journal, call: Any) -> str:
    before = {s.session_id for s in journal.sessions()}
    call()
    return _new_session(journal, before)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Project]:
    folder = tmp_path_factory.mktemp("langgraph")
    db = folder / "agent-journal.db"
    os.environ["AGENT_JOURNAL_TEST_CHECKPOINTS"] = str(folder / "checkpoints.db")
    Counting.requests = []
    journal = Journal.open(db)
    with serving(Counting) as url:
        os.environ["AGENT_JOURNAL_TEST_MODEL_URL"] = url
        common = importlib.import_module("tests.langgraph_app.common")
        react = importlib.import_module("tests.langgraph_app.react")
        shop = importlib.import_module("tests.langgraph_app.shop")
        notes = importlib.import_module("tests.langgraph_app.notes")
        common.capture.journal = journal
        react_sessions = [
            _run(journal, lambda n=n: react.agent.invoke({"messages": [("user", f"order {n}")]}))
            for n in range(100, 110)
        ]
        turns: dict[str, list[str]] = {}
        for thread, question, answer in SHOP_THREADS:
            config = {"configurable": {"thread_id": thread}}
            first = _run(
                journal,
                lambda q=question, c=config: shop.graph.invoke({"messages": [("user", q)]}, c),
            )
            second = _run(
                journal, lambda a=answer, c=config: shop.graph.invoke(Command(resume=a), c)
            )
            turns[thread] = [first, second]
        config = {"configurable": {"thread_id": "t-5"}}
        first = _run(
            journal,
            lambda: shop.graph.invoke({"messages": [("user", "order 404 and order 12")]}, config),
        )
        second = _run(
            journal,
            lambda: shop.graph.invoke(
                {"messages": [("user", "and now order 34 and order 56")]}, config
            ),
        )
        turns["t-5"] = [first, second]
        port = int(url.rsplit(":", 1)[1].split("/")[0])
    shop.connection.close()  # the replays below have no database: any use of it would raise
    yield Project(journal, db, port, react, shop, notes, common, react_sessions, turns)
    journal.close()


def _events(journal: Journal, session_id: str) -> list[RecordedEvent]:
    return list(journal.events(session_id))


def _seq_of(journal: Journal, session_id: str, kind: str, nth: int = 0) -> int:
    return [e.seq for e in _events(journal, session_id) if e.event.type == kind][nth]


def _replay(project: Project, session_id: str, **options: Any) -> Any:
    return Replayer(ReplayOptions(trust=TRUST, **options)).replay(project.journal, session_id)


def test_twenty_sessions_recorded_replay_identical_with_no_server_and_no_database(
    project: Project,
) -> None:
    sessions = project.react_sessions + [s for turns in project.shop_turns.values() for s in turns]
    assert len(sessions) == 20
    sent = list(project.common.SENT)
    results = [_replay(project, session) for session in sessions]
    assert [r.verdict for r in results] == ["identical"] * 20
    assert project.common.SENT == sent  # send_email has side effects: never run again
    served = sum(r.served.model_replies for r in results)
    tools = sum(r.served.tool_results for r in results)
    print(f"\n20/20 identical: {served} model replies, {tools} tool results served")
    assert served > 40 and tools > 40


def test_a_graph_run_records_graph_thread_node_and_loaded_state(project: Project) -> None:
    first, second = project.shop_turns["t-1"]
    started = _events(project.journal, first)[0].event
    state = started.metadata["langgraph"]
    assert (state["graph"], state["thread_id"], state["checkpointer"]) == (
        "shop",
        "t-1",
        "SqliteSaver",
    )
    assert state["checkpoint"] is None  # a new thread loads nothing
    assert started.metadata["captured_with"] == "langgraph"
    assert started.agent == "tests.langgraph_app.shop:graph"
    proposals = [
        e.event for e in _events(project.journal, first) if e.event.type == "action_proposed"
    ]
    assert [len(p.calls) for p in proposals] == [2, 2, 1]  # parallel lookups, parallel checks
    graph = [p.request["params"]["graph"] for p in proposals]
    assert graph[1] == {"node": "agent", "step": 3, "ran": [[2, "tools"], [3, "agent"]]}
    resumed = _events(project.journal, second)[0].event
    loaded = resumed.metadata["langgraph"]["checkpoint"]
    assert loaded["pending_writes"][0][1] == "__interrupt__"
    inputs = json.loads(resumed.metadata[ENTRY_INPUTS_KEY])
    assert inputs["method"] == "invoke"
    assert decode_value(inputs["input"]) == Command(resume="yes")


def test_the_interrupted_thread_replays_with_the_recorded_resume_value(project: Project) -> None:
    answers = {}
    for thread, _, _ in SHOP_THREADS:
        second = project.shop_turns[thread][1]
        result = Replayer(ReplayOptions(trust=TRUST), save=True).replay(project.journal, second)
        assert result.identical
        final = _events(project.journal, result.replay_session_id)[-1].event
        answers[thread] = json.loads(final.answer)["approved"]
    assert answers == {thread: answer for thread, _, answer in SHOP_THREADS}


def test_a_tool_exception_is_an_outcome_the_tool_node_handles_again(project: Project) -> None:
    first = project.shop_turns["t-5"][0]
    failed = [e.event for e in _events(project.journal, first) if e.event.type == "action_failed"]
    assert [(f.tool, f.error["type"]) for f in failed] == [
        ("lookup_order", "langchain_core.tools.base:ToolException")
    ]
    assert _replay(project, first).identical


def test_a_call_the_tool_node_refused_is_a_failure_from_its_error_message(
    project: Project,
) -> None:
    checker = project.notes.checker
    session = _run(project.journal, lambda: checker.invoke({"messages": [("user", "stock?")]}))
    failed = [e.event for e in _events(project.journal, session) if e.event.type == "action_failed"]
    assert [(f.tool, f.kind) for f in failed] == [("check_stock", "business")]
    assert "quantity" in failed[0].message
    assert _replay(project, session).identical


def test_a_changed_system_prompt_diverges_at_the_configuration_and_the_first_request(
    project: Project,
) -> None:
    session = project.react_sessions[0]
    result = _replay(project, session, agent="tests.langgraph_app.react:terse")
    assert result.first_divergence.seq == 0
    assert "system_prompt" in result.first_divergence.reason
    assert result.behaviour_divergence.seq == _seq_of(project.journal, session, "action_proposed")


def test_a_changed_edge_condition_diverges_where_the_run_now_goes_elsewhere(
    project: Project,
) -> None:
    first = project.shop_turns["t-1"][0]
    result = _replay(project, first, agent="tests.langgraph_app.shop:skips_approval")
    halt = _seq_of(project.journal, first, "agent_completed")  # the recording stopped at approve
    assert result.behaviour_divergence.seq == halt
    assert result.behaviour_divergence.actual["type"] == "agent_halted"
    assert "send_email" in result.behaviour_divergence.actual["reason"]


def test_a_node_added_diverges_at_the_first_request_after_it(project: Project) -> None:
    first = project.shop_turns["t-2"][0]
    result = _replay(project, first, agent="tests.langgraph_app.shop:audited")
    assert result.behaviour_divergence.seq == _seq_of(project.journal, first, "action_proposed", 1)
    assert "graph.ran" in result.behaviour_divergence.reason


def test_a_fixed_tool_run_live_diverges_at_its_result(project: Project) -> None:
    first = project.shop_turns["t-1"][0]
    served = _replay(project, first, agent="tests.langgraph_app.shop:fixed")
    assert served.identical  # served from the recording, the fix cannot show
    live = _replay(
        project, first, agent="tests.langgraph_app.shop:fixed", live_tools=["check_stock"]
    )
    assert live.behaviour_divergence.seq == _seq_of(project.journal, first, "action_committed", 2)
    assert live.behaviour_divergence.changes[0].path == "result.in_stock"


def test_a_fork_asks_the_model_only_past_the_fork_point(project: Project) -> None:
    session = project.react_sessions[3]
    replies = [
        e.seq for e in _events(project.journal, session) if e.event.type == "action_proposed"
    ]
    Counting.requests = []
    with serving(Counting, port=project.port):
        forked = fork(
            project.journal, session, replies[1], ReplayOptions(trust=TRUST, live_model=True)
        )
    assert len(Counting.requests) == len(replies) - 2  # the replies after seq replies[1]
    assert (forked.forked_from, forked.fork_seq, forked.status) == (
        session,
        replies[1],
        "completed",
    )
    head = _events(project.journal, forked.session_id)[0].event
    assert (head.forked_from, head.fork_seq) == (session, replies[1])


def test_replay_and_fork_from_the_command_line(project: Project) -> None:
    session = project.shop_turns["t-4"][1]
    runner = CliRunner()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AGENT_JOURNAL_TRUST", "tests.*")
        replayed = runner.invoke(cli, ["replay", session, "--db", str(project.db), "--json"])
        assert replayed.exit_code == 0, replayed.output
        assert json.loads(replayed.output)["verdict"] == "identical"
        at = _seq_of(project.journal, session, "action_committed")  # the e-mail, sent on resume
        Counting.requests = []
        with serving(Counting, port=project.port):
            forked = runner.invoke(cli, ["fork", session, "--at", str(at), "--db", str(project.db)])
    assert forked.exit_code == 0, forked.output
    assert len(Counting.requests) == 1  # the one reply after the e-mail, asked again
    assert "completed" in forked.output


def test_a_fixture_of_a_graph_run_is_green_then_red(project: Project, tmp_path: Path) -> None:
    session = project.shop_turns["t-2"][0]
    path = write_fixture(project.journal, session, tmp_path / "shop.jsonl")
    assert replay_fixture(path, ReplayOptions(trust=TRUST)).passed
    red = replay_fixture(path, ReplayOptions(trust=TRUST, agent="tests.langgraph_app.shop:audited"))
    assert not red.passed


def test_a_streamed_fake_model_and_a_failed_call_replay(project: Project) -> None:
    notes = project.notes
    notes.REPLIES[:] = [ConnectionError("the model is away"), "a note about LangGraph"]
    journal = project.journal
    before = {s.session_id for s in journal.sessions()}
    chunks = list(
        notes.graph.stream({"messages": [("user", "write a note")]}, stream_mode="messages")
    )
    session = _new_session(journal, before)
    assert "".join(chunk.content for chunk, _ in chunks) == "a note about LangGraph"
    kinds = [e.event.type for e in _events(journal, session)]
    assert kinds[:4] == ["session_started", "user_input", "model_call_failed", "action_proposed"]
    assert _replay(project, session).identical
    notes.REPLIES[:] = ["an async note"]
    later = _run(journal, lambda: asyncio.run(notes.graph.ainvoke({"messages": [("user", "x")]})))
    assert _replay(project, later).identical


def test_async_and_streamed_react_runs_replay(project: Project) -> None:
    agent = project.react.agent
    with serving(Counting, port=project.port):
        later = _run(
            project.journal,
            lambda: asyncio.run(agent.ainvoke({"messages": [("user", "order 7")]})),
        )
        streamed = _run(
            project.journal,
            lambda: list(agent.stream({"messages": [("user", "order 8")]}, stream_mode="messages")),
        )
    assert _replay(project, later).identical
    assert _replay(project, streamed).identical
    at = _seq_of(project.journal, streamed, "action_proposed")
    first = _events(project.journal, streamed)[at]
    assert isinstance(first.event.response, list)  # the SSE chunks, as LangChain read them


def test_a_plain_chain_with_structured_output_and_a_batch_replays(project: Project) -> None:
    session = _run(project.journal, lambda: project.notes.judge("12"))
    kinds = [e.event.type for e in _events(project.journal, session)]
    assert kinds.count("action_proposed") == 3
    assert _replay(project, session).identical


def test_state_that_cannot_be_given_back_is_refused_in_one_line(project: Project) -> None:
    class Handle:
        pass

    recorded = encode_value({"handle": Handle(), "kept": (1, "a")})
    assert decode_value(encode_value({"kept": (1, "a")})) == {"kept": (1, "a")}
    with pytest.raises(UnrestorableState, match=r"\$\.handle holds a .*Handle"):
        decode_value(recorded)
    with pytest.raises(AgentLoadError, match="not a captured graph"):
        replay_graph(project.journal, project.react_sessions[0], object())


def test_the_wrappers_are_the_frameworks_own_classes(project: Project) -> None:
    from langchain_core.tools import StructuredTool
    from langchain_openai import ChatOpenAI

    common = project.common
    assert isinstance(common.chat_model(), ChatOpenAI)
    assert isinstance(common.lookup_order, StructuredTool)
    assert common.lookup_order.name == "lookup_order"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert common.lookup_order.invoke({"order_id": "3"}) == {"order_id": "3", "sku": "SKU-3"}


def test_the_pytest_plugin_replays_a_graph_fixture_green_then_red(
    project: Project, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(
        "PYTEST_ADDOPTS", "-p no:textual-snapshot -p no:cacheprovider -p no:langsmith_plugin"
    )
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parents[1]))
    monkeypatch.setenv("AGENT_JOURNAL_TRUST", "tests.*")
    (pytester.path / "fixtures").mkdir()
    first, resumed = project.shop_turns["t-1"]
    write_fixture(project.journal, first, pytester.path / "fixtures" / "first.jsonl")
    write_fixture(project.journal, resumed, pytester.path / "fixtures" / "resumed.jsonl")
    pytester.runpytest_subprocess().assert_outcomes(passed=2)
    pytester.makeini(
        "[pytest]\njournal_agent = tests.langgraph_app.shop:fixed\n"
        "journal_live_tools = check_stock\n"
    )
    # the first turn checks stock (the fix shows); the resumed one sends the e-mail only
    pytester.runpytest_subprocess().assert_outcomes(passed=1, failed=1)


def test_a_recorded_state_that_cannot_be_restored_is_one_line_and_exit_2(
    project: Project,
) -> None:
    resumed = project.shop_turns["t-2"][1]
    events = [e.event for e in _events(project.journal, resumed)]
    started = events[0]
    state = json.loads(json.dumps(started.metadata["langgraph"]))
    values = state["checkpoint"]["checkpoint"]["channel_values"]
    values["approved"] = {"__lg__": "object", "type": "datetime:datetime", "value": "2026"}
    metadata = {**started.metadata, "langgraph": state}
    project.journal.append("unrestorable", [started.model_copy(update={"metadata": metadata})])
    project.journal.append("unrestorable", events[1:], expected_seq=1)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AGENT_JOURNAL_TRUST", "tests.*")
        done = CliRunner().invoke(cli, ["replay", "unrestorable", "--db", str(project.db)])
    assert done.exit_code == 2
    assert "checkpoint.channel_values.approved holds a datetime:datetime" in done.output
    assert done.output.count("\n") == 1
