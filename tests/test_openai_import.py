"""Importing OpenAI-style transcripts: every shape, every messy case, the real data, bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from journal import (
    ActionCommitted,
    ActionFailed,
    ActionProposed,
    AgentCompleted,
    AgentHalted,
    Journal,
    SessionStarted,
    ToolCall,
    UserInput,
    export_session,
    fold,
    import_file,
    import_openai,
)
from journal.formats.openai_import import EPOCH, convert_file

from .helpers import one_error_line, run_cli, snapshot
from .openai_helpers import (
    SAMPLE,
    assistant,
    call,
    events_of,
    real_transcripts,
    tool,
    types_of,
    user,
    write_json,
    write_jsonl,
)
from .stores import PgSchema
from .strategies import json_values, texts

CONVERSATION: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a travel agent."},
    assistant("Hi! How can I help?"),
    user("weather in Oslo?"),
    assistant(None, call("c1", "weather", '{"city": "Oslo"}')),
    tool("c1", '{"temp": 3}'),
    assistant("It is 3 degrees in Oslo."),
    user("and Lima?"),
    assistant("", call("c2", "weather", {"city": "Lima"})),
    tool("c2", "Error: no station"),
    assistant("Lima has no weather station."),
]
TYPES = [
    "session_started",
    "agent_completed",  # the greeting: no model call
    "user_input",
    "action_proposed",
    "action_committed",
    "action_proposed",
    "agent_completed",
    "user_input",
    "action_proposed",
    "action_failed",
    "action_proposed",
    "agent_completed",
]


def _import(journal: Journal, path: Path, **options: Any) -> list[str]:
    report = import_openai(journal, [path], **options)
    assert not report.errors
    ids: list[str] = report.files[0]["session_ids"]
    return ids


# -- every input shape ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("shape", "expected_ids"),
    [
        ("messages", ["chat-0"]),
        ("object", ["s-1"]),
        ("array_of_objects", ["s-1", "chat-1"]),
        ("array_of_arrays", ["chat-0", "chat-1"]),
        ("jsonl_objects", ["s-1", "chat-1"]),
        ("jsonl_messages", ["chat-0"]),
    ],
)
def test_every_input_shape_imports_the_same_conversation(
    tmp_path: Path, journal: Journal, shape: str, expected_ids: list[str]
) -> None:
    with_meta = {"messages": CONVERSATION, "metadata": {"session_id": "s-1", "reward": 1.0}}
    no_meta = {"messages": CONVERSATION}
    path = tmp_path / ("chat.jsonl" if shape.startswith("jsonl") else "chat.json")
    if shape == "messages":
        write_json(path, CONVERSATION)
    elif shape == "object":
        write_json(path, with_meta)
    elif shape == "array_of_objects":
        write_json(path, [with_meta, no_meta])
    elif shape == "array_of_arrays":
        write_json(path, [CONVERSATION, CONVERSATION])
    elif shape == "jsonl_objects":
        write_jsonl(path, [with_meta, no_meta])
    else:
        write_jsonl(path, CONVERSATION)
    assert _import(journal, path, error_prefix="Error:") == expected_ids
    for session_id in expected_ids:
        assert types_of(journal, session_id) == TYPES
        state = journal.state(session_id)
        assert (state.status, state.turns, state.steps, state.failures) == ("completed", 2, 2, 1)
        started = events_of(journal, session_id)[0]
        assert isinstance(started, SessionStarted)
        assert started.agent is None
        assert started.system_prompt == "You are a travel agent."
        assert started.metadata["imported_from"] == "openai"


def test_the_mapping_of_one_conversation(tmp_path: Path, journal: Journal) -> None:
    path = write_json(tmp_path / "chat.json", {"messages": CONVERSATION, "metadata": {}})
    [session_id] = _import(journal, path, error_prefix="Error:")
    events = events_of(journal, session_id)
    assert events[1] == AgentCompleted(answer="Hi! How can I help?")
    assert events[2] == UserInput(text="weather in Oslo?")
    assert events[3] == ActionProposed(  # the argument text is kept as it was written
        calls=[
            ToolCall(
                call_id="c1", tool="weather", args={"city": "Oslo"}, arguments='{"city": "Oslo"}'
            )
        ]
    )
    assert events[4] == ActionCommitted(
        call_id="c1", tool="weather", args={"city": "Oslo"}, result='{"temp": 3}'
    )
    # arguments given as an object are taken as they are
    assert isinstance(events[8], ActionProposed)
    assert events[8].calls[0].args == {"city": "Lima"}
    assert events[9] == ActionFailed(
        call_id="c2",
        tool="weather",
        kind="business",
        message="Error: no station",
        args={"city": "Lima"},
    )
    # synthetic times: the epoch plus a second per event, so a re-import is byte-identical
    stamps = [item.ts for item in journal.events(session_id)]
    assert stamps[0] == "2000-01-01T00:00:00.000000Z" and stamps[3] == "2000-01-01T00:00:03.000000Z"
    assert EPOCH.year == 2000


def test_without_an_error_prefix_error_text_is_a_result(tmp_path: Path, journal: Journal) -> None:
    path = write_json(tmp_path / "chat.json", CONVERSATION)
    [session_id] = _import(journal, path)
    assert "action_failed" not in types_of(journal, session_id)
    assert journal.state(session_id).failures == 0


# -- the messy cases ------------------------------------------------------------------


def test_repeated_call_ids_pair_by_position(tmp_path: Path, journal: Journal) -> None:
    messages = [
        user("two lookups"),
        assistant(None, call("x", "lookup", '{"q": "a"}'), call("x", "lookup", '{"q": "b"}')),
        tool("x", "result a"),
        tool("x", "result b"),
        assistant("done"),
        user("again"),
        assistant(None, call("x", "lookup", '{"q": "c"}')),
        tool("x", "result c"),
        assistant("done again"),
    ]
    converted = convert_file(write_json(tmp_path / "chat.json", messages))
    events = [event for event, _ in converted.sessions[0].events]
    outcomes = [e for e in events if isinstance(e, ActionCommitted)]
    assert [(o.args["q"], o.result) for o in outcomes] == [
        ("a", "result a"),
        ("b", "result b"),
        ("c", "result c"),
    ]
    assert converted.notes.counts == {"repeated_call_id": 1}
    assert "chat.json:" in converted.notes.examples["repeated_call_id"][0]
    state = fold(events)
    assert (state.steps, state.committed, state.pending_calls) == (3, 3, [])


def test_invalid_json_arguments_are_kept_raw(tmp_path: Path, journal: Journal) -> None:
    messages = [
        user("book it"),
        assistant(None, call("c1", "book", '{"flight": "HAT1'), call("c2", "book", "[1, 2]")),
        tool("c1", "Error: bad arguments"),
        tool("c2", "Error: bad arguments"),
        assistant("Sorry."),
    ]
    path = write_json(tmp_path / "chat.json", messages)
    converted = convert_file(path, error_prefix="Error:")
    proposal = converted.sessions[0].events[2][0]
    assert isinstance(proposal, ActionProposed)
    assert [c.args for c in proposal.calls] == ['{"flight": "HAT1', "[1, 2]"]
    assert converted.notes.counts == {"invalid_arguments": 2, "outcome_without_arguments": 2}
    failed = converted.sessions[0].events[3][0]
    assert isinstance(failed, ActionFailed) and failed.args == {}
    [session_id] = _import(journal, path, error_prefix="Error:")
    assert journal.state(session_id).failures == 2


def test_error_flags_mark_failures(tmp_path: Path, journal: Journal) -> None:
    messages = [
        user("go"),
        assistant(None, call("a", "t", "{}"), call("b", "t", "{}"), call("c", "t", "{}")),
        tool("a", "boom", error=True),
        tool("b", "also boom", is_error=True),
        tool("c", "fine", error=False),
        assistant("ok"),
    ]
    [session_id] = _import(journal, write_json(tmp_path / "chat.json", messages))
    kinds = [type(e).__name__ for e in events_of(journal, session_id)[3:6]]
    assert kinds == ["ActionFailed", "ActionFailed", "ActionCommitted"]


def test_no_final_answer_halts_with_the_metadata_rule(tmp_path: Path, journal: Journal) -> None:
    cut = {
        "messages": [user("change my flight"), assistant("")],
        "metadata": {"session_id": "cut", "termination": "agent_error"},
    }
    errors = {
        "messages": [
            user("rename"),
            assistant(None, call("a", "rename", "{}")),
            tool("a", "Error: passengers"),
        ],
        "metadata": {"session_id": "errors", "termination": "too_many_errors"},
    }
    left = {"messages": [user("hello"), assistant(None, call("a", "t", "{}"))], "metadata": {}}
    path = write_json(tmp_path / "ends.json", [cut, errors, left])
    report = import_openai(journal, [path], error_prefix="Error:")
    assert types_of(journal, "cut")[-2:] == ["action_proposed", "agent_halted"]
    halt = events_of(journal, "cut")[-1]
    assert isinstance(halt, AgentHalted) and halt.rule == "agent_error"
    assert "termination: agent_error" in halt.reason
    assert (journal.state("errors").status, journal.state("errors").halt_rule) == (
        "halted",
        "too_many_errors",
    )
    assert journal.state("ends-2").status == "running"
    assert report.notes.counts == {"no_final_answer": 1}
    assert report.unmapped.counts == {"unanswered_call": 1}


def test_many_turns_and_a_greeting(tmp_path: Path, journal: Journal) -> None:
    messages: list[dict[str, Any]] = [assistant("Welcome!")]
    for turn in range(30):
        messages += [
            user(f"question {turn}"),
            assistant(None, call(f"c{turn}", "lookup", {"n": turn})),
            tool(f"c{turn}", f"answer {turn}"),
            assistant(f"reply {turn}"),
        ]
    [session_id] = _import(journal, write_json(tmp_path / "long.json", messages))
    state = journal.state(session_id)
    assert (state.status, state.turns, state.steps, state.model_calls) == ("completed", 30, 30, 60)
    assert state.answer == "reply 29"
    assert types_of(journal, session_id)[:3] == ["session_started", "agent_completed", "user_input"]


def test_reasoning_usage_cost_and_model(tmp_path: Path, journal: Journal) -> None:
    messages = [
        user("hi"),
        assistant(
            "hello",
            reasoning_content="be polite",
            usage={
                "prompt_tokens": 12,
                "completion_tokens": 3,
                "prompt_tokens_details": {"cached_tokens": 8},
            },
            cost=0.002,
            model="m-2",
        ),
        user("and?"),
        assistant("more", reasoning="think", usage={"input_tokens": 5, "output_tokens": 1}),
    ]
    document = {"messages": messages, "metadata": {"model": "m-1"}}
    [session_id] = _import(journal, write_json(tmp_path / "chat.json", document))
    first, second = [e for e in events_of(journal, session_id) if isinstance(e, ActionProposed)]
    assert (first.reasoning, first.model, first.cost) == ("be polite", "m-2", 0.002)
    assert (first.usage.input_tokens, first.usage.output_tokens, first.usage.cached_tokens) == (
        12,
        3,
        8,
    )
    assert (second.reasoning, second.model, second.usage.input_tokens) == ("think", "m-1", 5)
    summary = journal.require(session_id)
    assert (summary.model, summary.tokens_in, summary.tokens_out, summary.cost) == (
        "m-1",
        17,
        4,
        0.002,
    )


def test_legacy_function_calls_and_content_parts(tmp_path: Path, journal: Journal) -> None:
    messages = [
        user([{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "x"}}]),
        {
            "role": "assistant",
            "content": None,
            "function_call": {"name": "find", "arguments": "{}"},
        },
        {"role": "function", "name": "find", "content": "found"},
        assistant([{"type": "text", "text": "here"}]),
    ]
    path = write_json(tmp_path / "legacy.json", messages)
    report = import_openai(journal, [path])
    [session_id] = report.files[0]["session_ids"]
    events = events_of(journal, session_id)
    assert events[1] == UserInput(text="look")
    assert isinstance(events[3], ActionCommitted) and events[3].result == "found"
    assert events[-1] == AgentCompleted(answer="here")
    assert report.unmapped.counts == {"content_part:image_url": 1}
    assert report.notes.counts == {"missing_call_id": 1}


def test_what_cannot_be_mapped_is_reported_not_dropped(tmp_path: Path, journal: Journal) -> None:
    messages = [
        user("hi"),
        tool("ghost", "a result nobody asked for"),
        {"role": "critic", "content": "meh"},
        assistant("ok", audio={"id": "a1"}, refusal=None),
        {"role": "system", "content": "late rule"},
        user("bye"),
        assistant(
            None, call("c1", "t", "{}"), {"type": "function", "function": {"arguments": "{}"}}
        ),
        user("hello?"),
        assistant("sorry"),
    ]
    path = write_json(tmp_path / "messy.json", messages)
    report = import_openai(journal, [path])
    assert report.unmapped.counts == {
        "orphan_tool_result": 1,
        "role:critic": 1,
        "field:assistant.audio": 1,
        "system_message_mid_conversation": 1,
        "unreadable_tool_call": 1,
        "unanswered_call": 1,
    }
    examples = report.unmapped.examples
    assert examples["role:critic"] == [
        f"{path}:11 (conversation 0, message 2): unknown role 'critic'"
    ]
    assert examples["orphan_tool_result"][0].startswith(f"{path}:6 (conversation 0, message 1)")
    document = report.as_json()
    assert document["unmapped"]["total"] == 6
    assert document["unmapped"]["kinds"]["unanswered_call"]["count"] == 1


def test_tools_and_system_prompt_go_to_session_started(tmp_path: Path, journal: Journal) -> None:
    spec = {
        "type": "function",
        "function": {"name": "t", "description": "a tool", "parameters": {"type": "object"}},
    }
    document = {"messages": CONVERSATION, "tools": [spec], "id": "conv-9", "metadata": {"x": 1}}
    [session_id] = _import(journal, write_json(tmp_path / "chat.json", document))
    assert session_id == "conv-9"
    started = events_of(journal, session_id)[0]
    assert isinstance(started, SessionStarted)
    assert [(t.name, t.description) for t in started.config.tools] == [("t", "a tool")]
    assert len(started.system_prompt_hash) == 64
    assert started.metadata == {"id": "conv-9", "x": 1, "imported_from": "openai"}


def test_message_times_are_used(tmp_path: Path, journal: Journal) -> None:
    messages = [
        {**user("hi"), "timestamp": "2026-11-29T10:00:00Z"},
        {**assistant("hello"), "created": 1_795_946_405},  # epoch seconds: 10:00:05
        {**user("again"), "created_at": "2026-11-29T09:00:00+00:00"},  # earlier: not used
        assistant("bye"),
    ]
    [session_id] = _import(journal, write_json(tmp_path / "timed.json", messages))
    stamps = [item.ts for item in journal.events(session_id)]
    assert stamps == [
        "2026-11-29T10:00:00.000000Z",  # session_started: the first message's time
        "2026-11-29T10:00:00.000000Z",
        "2026-11-29T10:00:05.000000Z",
        "2026-11-29T10:00:05.000000Z",
        "2026-11-29T10:00:05.000000Z",  # times never go back
        "2026-11-29T10:00:05.000000Z",
        "2026-11-29T10:00:05.000000Z",
    ]


# -- the real transcripts -------------------------------------------------------------


def test_the_50_real_transcripts(tmp_path: Path) -> None:
    path = real_transcripts()
    with Journal.open(tmp_path / "j.db") as journal:
        report = import_openai(journal, [path], error_prefix="Error:")
        document = report.as_json()
        assert (document["sessions"], document["tool_calls"], document["failed_calls"]) == (
            50,
            344,
            79,
        )
        assert (
            document["messages"],
            document["unmapped"]["total"],
            document["notes"]["total"],
        ) == (1632, 0, 0)
        summaries = journal.sessions()
        assert len(summaries) == 50
        assert sum(s.steps for s in summaries) == 344
        assert sum(s.failures for s in summaries) == 79
        rules = sorted({(s.status, s.halt_rule) for s in summaries})
        assert rules == [
            ("halted", "agent_error"),
            ("halted", "too_many_errors"),
            ("halted", "user_stop"),
        ]
        first = events_of(journal, "airline-qwen2.5-7b-0")
        assert isinstance(first[0], SessionStarted)
        assert first[0].metadata == {
            "task_id": "0",
            "model": "qwen2.5:7b",
            "reward": 1.0,
            "termination": "user_stop",
            "imported_from": "openai",
        }
        assert first[1] == AgentCompleted(answer="Hi! How can I help you today?")
        # the same content again is a no-op
        again = import_openai(journal, [path], error_prefix="Error:")
        assert again.as_json()["new_events"] == 0
        assert journal.verify().ok
    without_prefix = convert_file(path)
    assert (without_prefix.tool_calls, without_prefix.failed_calls) == (344, 0)


def test_round_trip_through_jsonl(tmp_path: Path) -> None:
    with Journal.open(tmp_path / "a.db") as source, Journal.open(tmp_path / "b.db") as copy:
        ids = _import(source, SAMPLE, error_prefix="Error:")
        assert ids == ["airline-task-0", "airline-task-48", "airline-task-11"]
        for session_id in ids:
            exported = export_session(source, session_id)
            path = tmp_path / f"{session_id}.jsonl"
            path.write_bytes(exported)
            assert import_file(copy, path).new_events == journal_events(source, session_id)
            assert export_session(copy, session_id) == exported
            assert copy.state(session_id) == source.state(session_id)


def journal_events(journal: Journal, session_id: str) -> int:
    return journal.require(session_id).events


# -- the CLI: report, idempotence, bad input ------------------------------------------


def test_cli_imports_reports_and_is_idempotent(tmp_path: Path) -> None:
    db = tmp_path / "j.db"
    first = run_cli("import", "--format", "openai", "--error-prefix", "Error:", SAMPLE, "--db", db)
    assert first.exit_code == 0, first.stderr
    assert "3 sessions (3 new, 48 events), 33 messages, 4 tool calls, 2 failed" in first.stdout
    assert "every message was mapped" in first.stdout
    before = snapshot(db)
    again = run_cli(
        "import", "--format", "openai", "--error-prefix", "Error:", SAMPLE, "--db", db, "--json"
    )
    assert again.exit_code == 0
    document = json.loads(again.stdout)
    assert (document["sessions"], document["new_sessions"], document["new_events"]) == (3, 0, 0)
    assert document["files"][0]["session_ids"] == [
        "airline-task-0",
        "airline-task-48",
        "airline-task-11",
    ]
    assert snapshot(db) == before


def test_an_erased_conversation_is_not_imported_again(tmp_path: Path, pg_schema: PgSchema) -> None:
    for db in (str(tmp_path / "j.db"), pg_schema.url):
        args = ("import", "--format", "openai", "--error-prefix", "Error:", SAMPLE, "--db", db)
        assert run_cli(*args).exit_code == 0
        with Journal.open(db) as journal:
            journal.erase("airline-task-48", reason="the customer asked")
        again = run_cli(*args, "--json")
        assert again.exit_code == 0, again.stderr
        # with --json the report goes to stderr: stdout holds the JSON alone
        assert f"skipped airline-task-48: erased from this journal ({SAMPLE})" in again.stderr
        assert f"imported {SAMPLE}: 2 sessions, already present" in again.stderr
        document = json.loads(again.stdout)
        assert document["files"][0]["erased"] == ["airline-task-48"]
        assert (document["new_sessions"], document["new_events"]) == (0, 0)
        with Journal.open(db) as journal:
            assert journal.summary("airline-task-48") is None
            assert journal.summary("airline-task-0") is not None and journal.verify().ok


def test_cli_report_lists_what_was_not_mapped(tmp_path: Path) -> None:
    path = write_json(tmp_path / "odd.json", [user("hi"), tool("nope", "x"), assistant("ok")])
    result = run_cli("import", "--format", "openai", path, "--db", tmp_path / "j.db")
    assert result.exit_code == 0
    assert "could not map: 1" in result.stdout
    assert "orphan_tool_result: 1" in result.stdout
    assert f"{path}:6 (conversation 0, message 1)" in result.stdout


BAD_INPUTS: list[tuple[str, str, str]] = [
    (
        "not_json.json",
        '[\n {"role": "user",\n  "content": oops}\n]\n',
        "not_json.json:3: not valid JSON",
    ),
    (
        "dupe.json",
        '[\n {"role": "user",\n  "content": "a", "content": "b"}\n]\n',
        "dupe.json:2: not valid JSON: duplicate key 'content'",
    ),
    (
        "no_role.json",
        '[\n {"role": "user", "content": "a"},\n {"content": "b"}\n]\n',
        'no_role.json:3: message 1 has no "role"',
    ),
    ("messages.json", '{"messages": {"role": "user"}}', 'messages.json:1: "messages" is dict'),
    ("number.json", "42\n", "number.json:1: expected a conversation"),
    ("empty.json", "  \n", "empty.json:1: empty file"),
    (
        "lines.jsonl",
        '{"messages": []}\n{"messages": []}\n{"messages": [}\n',
        "lines.jsonl:3: not valid JSON",
    ),
    (
        "mixed.jsonl",
        '{"messages": []}\n{"role": "user", "content": "x"}\n',
        "mixed.jsonl:2: a chat message among conversations",
    ),
    (
        "twice.json",
        '[{"messages": [], "metadata": {"session_id": "a"}},\n'
        ' {"messages": [], "metadata": {"session_id": "a"}}]',
        "twice.json:2 (conversation 1): session id 'a' is used by",
    ),
    (
        "bigint.json",
        '[\n {"role": "user", "content": "a", "n": 99999999999999999999}\n]\n',
        "bigint.json:2: not valid JSON: integer",
    ),
    ("binary.json", "", "binary.json:1: not valid UTF-8"),
]


@pytest.mark.parametrize(("name", "text", "message"), BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_input_is_one_line_exit_2_and_nothing_written(
    tmp_path: Path, name: str, text: str, message: str
) -> None:
    path = tmp_path / name
    if name == "binary.json":
        path.write_bytes(b"\xff\xfe[]")
    else:
        path.write_text(text, encoding="utf-8")
    db = tmp_path / "j.db"
    good = write_json(tmp_path / "good.json", CONVERSATION)
    result = run_cli("import", "--format", "openai", good, path, "--db", db)
    line = one_error_line(result)
    assert message in line, line
    assert str(tmp_path) in line
    assert not db.exists()  # the good file before it was not written either


def test_a_conflicting_file_writes_none_of_its_sessions(tmp_path: Path) -> None:
    db = tmp_path / "j.db"
    one = {"messages": [user("a"), assistant("b")], "metadata": {"session_id": "one"}}
    two = {"messages": [user("c"), assistant("d")], "metadata": {"session_id": "two"}}
    assert (
        run_cli(
            "import", "--format", "openai", write_json(tmp_path / "two.json", two), "--db", db
        ).exit_code
        == 0
    )
    before = snapshot(db)
    changed = {
        "messages": [user("c"), assistant("something else")],
        "metadata": {"session_id": "two"},
    }
    path = write_json(tmp_path / "both.json", [one, changed])
    result = run_cli("import", "--format", "openai", path, "--db", db)
    assert result.exit_code == 2
    assert "exists already with different content" in result.stderr
    assert "Traceback" not in result.stderr
    assert snapshot(db) == before  # "one" was not written either: the file is all or nothing


@pytest.mark.parametrize(
    "write",
    [
        lambda path: write_json(path, [{"messages": CONVERSATION}]),  # indented: line 1 is "["
        lambda path: path.write_text(json.dumps(CONVERSATION) + "\n"),  # one line, an array
        lambda path: write_jsonl(path, [{"messages": CONVERSATION}]),  # JSONL of conversations
        lambda path: write_jsonl(path, CONVERSATION),  # JSONL of messages
    ],
)
def test_a_transcript_imported_without_format_openai_is_told_to_add_it(
    tmp_path: Path, write: Any
) -> None:
    path = tmp_path / "transcripts.json"
    write(path)
    db = tmp_path / "j.db"
    line = one_error_line(run_cli("import", path, "--db", db))
    assert line.startswith(f"agent-journal: {path}:1: not an agent-journal file"), line
    assert line.endswith("OpenAI chat transcripts import with --format openai)"), line
    assert not db.exists()


def test_a_file_refused_for_a_conflict_is_not_reported_as_present(tmp_path: Path) -> None:
    """Importing again with --error-prefix changes the sessions: the file is refused whole."""
    db = tmp_path / "j.db"
    assert run_cli("import", "--format", "openai", SAMPLE, "--db", db).exit_code == 0
    result = run_cli(
        "import", "--format", "openai", "--error-prefix", "Error:", SAMPLE, "--db", db, "--json"
    )
    assert result.exit_code == 2
    [item] = json.loads(result.stdout)["files"]
    assert item["error"].startswith("session airline-task-")
    assert "exists already with different content" in item["error"]
    assert result.stderr.splitlines()[0] == (
        f"not imported {SAMPLE}: 3 sessions, 33 messages, 4 tool calls, 2 failed"
    )


def test_an_export_imported_with_format_openai_is_told_to_drop_it(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text(
        '{"format":"agent-journal","format_version":1,"session_id":"s"}\n'
        '{"seq":0,"session_id":"s","ts":"2026-11-29T23:00:00.000000Z","type":"session_started",'
        '"v":1}\n'
    )
    line = one_error_line(run_cli("import", "--format", "openai", path, "--db", tmp_path / "j.db"))
    assert line == (
        f'agent-journal: {path}:1: message 0 has no "role" (an agent-journal file: import it '
        "without --format openai)"
    )


def test_format_options_are_checked(tmp_path: Path) -> None:
    result = run_cli("import", "--error-prefix", "E", SAMPLE, "--db", tmp_path / "j.db")
    assert result.exit_code == 2
    assert "--error-prefix and --json apply to --format openai" in result.stderr


_field_values = json_values | st.lists(
    st.fixed_dictionaries(
        {"id": texts, "function": st.fixed_dictionaries({"name": texts, "arguments": json_values})}
    ),
    max_size=3,
)
_messages = st.lists(
    st.dictionaries(
        st.sampled_from(
            ["content", "tool_calls", "tool_call_id", "name", "error", "usage", "reasoning"]
        ),
        _field_values,
        max_size=4,
    ).flatmap(
        lambda fields: st.sampled_from(["user", "assistant", "tool", "system", "x"]).map(
            lambda role: {**fields, "role": role}
        )
    ),
    max_size=8,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(conversations=st.lists(_messages, min_size=1, max_size=3), prefix=st.none() | texts)
def test_any_json_conversation_imports_or_is_refused_cleanly(
    tmp_path: Path, conversations: list[list[dict[str, Any]]], prefix: str | None
) -> None:
    """Whatever the messages hold, the import maps or reports it: never a crash."""
    path = write_json(tmp_path / "fuzz.json", [{"messages": m} for m in conversations])
    converted = convert_file(path, error_prefix=prefix)
    assert len(converted.sessions) == len(conversations)
    with Journal.open(":memory:") as journal:
        report = import_openai(journal, [path], error_prefix=prefix)
        for session_id in report.files[0]["session_ids"]:
            assert journal.state(session_id) == fold(journal.events(session_id))


def test_a_file_imports_whole_on_every_store(any_journal: Journal, tmp_path: Path) -> None:
    """A file's sessions are written in one transaction, on SQLite and on PostgreSQL."""
    report = import_openai(any_journal, [SAMPLE], error_prefix="Error:")
    assert report.as_json()["new_events"] == 48
    heads = {s.session_id: s.head_hash for s in any_journal.sessions()}
    fresh = {"messages": [user("new")], "metadata": {"session_id": "fresh"}}
    clash = {"messages": [user("different")], "metadata": {"session_id": "airline-task-0"}}
    clashing = import_openai(any_journal, [write_json(tmp_path / "clash.json", [fresh, clash])])
    assert clashing.errors and "airline-task-0" in clashing.errors[0]
    assert any_journal.summary("fresh") is None  # written before the clash, rolled back with it
    assert {s.session_id: s.head_hash for s in any_journal.sessions()} == heads
    again = import_openai(any_journal, [SAMPLE], error_prefix="Error:")
    assert again.as_json()["new_events"] == 0
