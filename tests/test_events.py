"""Typed events: the discriminated union, the one mapper, versions, upcasters, the JSON Schema."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from journal import (
    EVENT_ADAPTER,
    EVENT_TYPES,
    Guardrails,
    InvalidEventError,
    Journal,
    StoredEvent,
    UnknownEventTypeError,
    UnknownVersionError,
    UserInput,
    chain_hash,
    decode,
    encode,
    event_json_schema,
    export_session,
    import_file,
    predated_settings,
    register_upcaster,
)
from journal._event_summary import SUMMARY_WIDTH, clip, summarize
from journal.events import (
    ActionCommitted,
    ActionFailed,
    ActionProposed,
    AgentCompleted,
    AgentHalted,
    CircuitOpened,
    ContextCompacted,
    EventModel,
    FallbackInvoked,
    RepairApplied,
    SessionStarted,
    ToolCall,
    VerificationFailed,
)
from journal.upcasting import (
    PREDATED_FACTS,
    PREDATED_SETTINGS,
    predates,
    unregister_upcaster,
    upcast,
)

from .helpers import (
    REPO,
    TS0,
    make_journal,
    run_cli,
    sample_session,
    schema_errors,
    stored,
    write_lines,
)
from .strategies import EVENT_STRATEGIES, timestamps

ZEROS = "0" * 64


def test_there_is_a_strategy_for_every_event_type() -> None:
    assert set(EVENT_STRATEGIES) == set(EVENT_TYPES)
    assert set(EVENT_TYPES) == {
        "session_started",
        "user_input",
        "action_proposed",
        "model_call_failed",
        "repair_applied",
        "verification_failed",
        "action_committed",
        "action_failed",
        "circuit_opened",
        "fallback_invoked",
        "context_compacted",
        "agent_completed",
        "agent_halted",
    }


@pytest.mark.parametrize("event_type", sorted(EVENT_TYPES))
@settings(max_examples=40)
@given(data=st.data(), ts=timestamps)
def test_every_event_type_round_trips_through_encode_and_decode(
    event_type: str, data: st.DataObject, ts: str
) -> None:
    event = data.draw(EVENT_STRATEGIES[event_type])
    row = encode("s", 4, ts, event, ZEROS, chain_hash)
    back = decode(row)
    assert type(back.event) is EVENT_TYPES[event_type]
    assert back.event == event
    version = EVENT_TYPES[event_type].VERSION
    assert (back.session_id, back.seq, back.ts, back.v, back.hash) == (
        "s",
        4,
        ts,
        version,
        row.hash,
    )
    assert encode("s", 4, ts, back.event, ZEROS, chain_hash) == row
    assert EVENT_ADAPTER.validate_json(event.model_dump_json()) == event


def test_the_union_dispatches_on_type() -> None:
    assert EVENT_ADAPTER.validate_python({"type": "user_input", "text": "hi"}) == UserInput(
        text="hi"
    )
    with pytest.raises(ValidationError, match="Unable to extract tag using discriminator"):
        EVENT_ADAPTER.validate_python({"text": "hi"})
    with pytest.raises(ValidationError, match="does not match any of the expected tags"):
        EVENT_ADAPTER.validate_python({"type": "tool_called", "text": "hi"})
    with pytest.raises(ValidationError, match=r"user_input\.text\n +Field required"):
        EVENT_ADAPTER.validate_python({"type": "user_input", "answer": "hi"})


def test_events_are_frozen_and_forbid_unknown_fields() -> None:
    event = UserInput(text="hi")
    with pytest.raises(ValidationError, match="frozen"):
        event.text = "changed"  # type: ignore[misc]
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        UserInput(text="hi", mood="happy")  # type: ignore[call-arg]


def test_decode_rejects_an_unknown_type_naming_it_and_the_place() -> None:
    with pytest.raises(UnknownEventTypeError) as caught:
        decode(stored("tool_called", 1, {"tool": "x"}))
    assert str(caught.value).startswith("session s seq 1: unknown event type 'tool_called' (known:")


def test_decode_rejects_a_newer_version_naming_type_and_version() -> None:
    with pytest.raises(UnknownVersionError) as caught:
        decode(stored("user_input", 2, {"text": "hi"}))
    assert str(caught.value) == (
        "session s seq 1: event type 'user_input' v2 is newer than this code (v1); "
        "upgrade agent-journal"
    )


def test_an_old_version_without_upcaster_is_an_error_naming_type_and_version() -> None:
    with pytest.raises(UnknownVersionError, match="'user_input' v0 has no upcaster to v1"):
        decode(stored("user_input", 0, {"message": "hi"}))


def test_body_that_disagrees_with_its_envelope_is_rejected() -> None:
    row = stored("user_input", 1, {"text": "hi"})
    moved = StoredEvent("s", 2, row.ts, row.type, row.v, row.body, row.hash, row.summary)
    with pytest.raises(InvalidEventError, match="session s seq 2: body field 'seq' disagrees"):
        decode(moved)


@pytest.fixture
def user_input_v0() -> Iterator[None]:
    """An upcaster that lifts user_input v0 (field ``message``) to v1 (field ``text``)."""

    @register_upcaster("user_input", 0)
    def rename(payload: dict[str, Any]) -> dict[str, Any]:
        payload["text"] = payload.pop("message")
        return payload

    yield
    unregister_upcaster("user_input", 0)


@pytest.mark.usefixtures("user_input_v0")
def test_a_registered_upcaster_lifts_old_records_when_read() -> None:
    old = stored("user_input", 0, {"message": "hello"})
    back = decode(old)
    assert back.event == UserInput(text="hello")
    assert back.v == 0  # the record keeps the version it was written at


@pytest.mark.usefixtures("user_input_v0")
def test_old_records_import_unchanged_and_export_byte_identical(tmp_path: Path) -> None:
    header = {"format": "agent-journal", "format_version": 1, "session_id": "s"}
    start = {"session_id": "s", "seq": 0, "ts": TS0, "type": "session_started", "v": 1}
    old = {"session_id": "s", "seq": 1, "ts": TS0, "type": "user_input", "v": 0, "message": "hi"}
    source = write_lines(tmp_path / "old.jsonl", [header, start, old])
    with Journal.open(tmp_path / "j.db") as journal:
        assert import_file(journal, source).new_events == 2
        assert [e.event for e in journal.events("s")][1] == UserInput(text="hi")
        lines = export_session(journal, "s").splitlines()
    assert json.loads(lines[2]) | {"hash": None} == old | {"hash": None}


def test_upcasters_must_lift_an_old_version_of_a_known_type() -> None:
    with pytest.raises(UnknownVersionError, match="current version is v1"):
        register_upcaster("user_input", 1)
    with pytest.raises(UnknownEventTypeError, match="'tool_called'"):
        register_upcaster("tool_called", 0)


def test_unregistering_restores_the_error() -> None:
    register_upcaster("agent_completed", 0)(lambda payload: payload)
    unregister_upcaster("agent_completed", 0)
    with pytest.raises(UnknownVersionError, match="no upcaster"):
        decode(stored("agent_completed", 0, {"answer": "a"}))


# -- the project's own upcasters -------------------------------------------------------------

OLD_BEHAVIOUR = {
    "max_identical_failures": None,
    "empty_reply_retries": None,
    "max_result_bytes": None,
}


def test_the_settings_added_in_v2_are_those_a_v1_session_predates() -> None:
    assert SessionStarted.VERSION == 3 and ActionFailed.VERSION >= 2
    assert predated_settings(1) == {**PREDATED_SETTINGS[2], **PREDATED_SETTINGS[3]}
    assert PREDATED_SETTINGS[2] == OLD_BEHAVIOUR
    assert predated_settings(2) == PREDATED_SETTINGS[3] == {"model_retries": 0}
    assert predated_settings(3) == {}
    new = Guardrails()
    assert (new.max_identical_failures, new.empty_reply_retries, new.max_result_bytes) == (
        3,
        2,
        1_048_576,
    )


@pytest.mark.parametrize(
    ("fields", "guardrails"),
    [
        ({}, Guardrails(**OLD_BEHAVIOUR)),
        ({"config": {}}, Guardrails(**OLD_BEHAVIOUR)),
        (
            {"config": {"guardrails": {"max_steps": 4}, "tools": [{"name": "t"}]}},
            Guardrails(max_steps=4, **OLD_BEHAVIOUR),
        ),
    ],
)
def test_a_v1_session_started_reads_with_the_settings_it_ran_with(
    fields: dict[str, Any], guardrails: Guardrails
) -> None:
    old = decode(stored("session_started", 1, fields, seq=0))
    assert old.v == 1  # the record keeps the version it was written at
    assert isinstance(old.event, SessionStarted)
    assert old.event.config.guardrails == guardrails
    assert decode(stored("session_started", 2, {}, seq=0)).event == SessionStarted()


def test_a_v2_session_started_reads_with_no_client_settings_and_predates_failed_calls() -> None:
    settings = {"max_retries": 2, "timeout": 600.0}
    old = decode(stored("session_started", 2, {"model": "m"}, seq=0))
    assert old.v == 2 and old.event == SessionStarted(model="m", client_settings=None)
    new = decode(stored("session_started", 3, {"client_settings": settings}, seq=0))
    assert new.event == SessionStarted(client_settings=settings)
    assert [predates(v, "model_call_failed") for v in (1, 2, 3)] == [True, True, False]
    assert [predates(v, "client_settings") for v in (1, 2, 3)] == [True, True, False]
    assert set(PREDATED_FACTS) == {"model_call_failed", "client_settings"}


def test_upcasting_a_session_started_leaves_the_payload_it_was_given_as_it_was() -> None:
    payload = {"config": {"guardrails": {"max_steps": 4}}, "type": "session_started"}
    before = orjson.dumps(payload)
    lifted = upcast("session_started", 1, payload)
    assert lifted["config"]["guardrails"] == {"max_steps": 4, **OLD_BEHAVIOUR, "model_retries": 0}
    assert orjson.dumps(payload) == before


def test_a_v1_action_failed_reads_as_not_abandoned_and_v2_records_it() -> None:
    fields = {"call_id": "c", "tool": "t", "kind": "timeout", "message": "slow"}
    assert decode(stored("action_failed", 1, fields)).event == ActionFailed(**fields)
    abandoned = decode(stored("action_failed", 2, {**fields, "abandoned": True}))
    assert abandoned.event == ActionFailed(**fields, abandoned=True)


def test_a_v1_journal_keeps_its_bytes_through_import_and_export(tmp_path: Path) -> None:
    fixture = REPO / "fixtures" / "incidents-breaker-fallback.jsonl"
    with Journal.open(tmp_path / "j.db") as journal:
        session_id = import_file(journal, fixture).session_id
        [started] = [e for e in journal.events(session_id, stop=1)]
        assert started.v == 1
        assert isinstance(started.event, SessionStarted)
        assert started.event.config.guardrails.empty_reply_retries is None
        exported = export_session(journal, session_id).splitlines()
    assert exported[1:] == fixture.read_bytes().splitlines()[1:]  # every event, byte for byte


# -- the JSON Schema ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def printed_schema() -> dict[str, Any]:
    result = run_cli("schema")
    assert result.exit_code == 0
    schema: dict[str, Any] = json.loads(result.stdout)
    return schema


def test_schema_command_prints_the_json_schema_of_a_record(printed_schema: dict[str, Any]) -> None:
    assert printed_schema == event_json_schema()
    assert printed_schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    mapping = printed_schema["discriminator"]["mapping"]
    assert set(mapping) == set(EVENT_TYPES)
    assert [branch["$ref"] for branch in printed_schema["oneOf"]] == [
        f"#/$defs/{model.__name__}" for model in EVENT_TYPES.values()
    ]
    for event_type, ref in mapping.items():
        definition = printed_schema["$defs"][ref.removeprefix("#/$defs/")]
        assert definition["properties"]["type"]["const"] == event_type
        assert {"session_id", "seq", "ts", "type", "v"} <= set(definition["required"])
        assert "hash" in definition["properties"]
        assert definition["additionalProperties"] is False


def test_schema_validates_every_exported_record(
    printed_schema: dict[str, Any], tmp_path: Path
) -> None:
    make_journal(tmp_path / "j.db", {"s": sample_session()})
    with Journal.open(tmp_path / "j.db") as journal:
        records = [json.loads(line) for line in export_session(journal, "s").splitlines()[1:]]
    assert len(records) == len(sample_session())
    for record in records:
        assert schema_errors(record, printed_schema) == [], record["type"]


@settings(max_examples=150)
@given(event=st.one_of(list(EVENT_STRATEGIES.values())), ts=timestamps)
def test_schema_validates_records_of_any_event(
    printed_schema: dict[str, Any], event: Any, ts: str
) -> None:
    record = json.loads(encode("s", 0, ts, event, ZEROS, chain_hash).line())
    assert schema_errors(record, printed_schema) == []


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"mood": "happy"}, "('mood' was unexpected)"),
        ({"text": None}, "None is not of type 'string'"),
        ({"ts": "2026-11-29T23:00:00Z"}, "does not match"),
        ({"hash": "XYZ"}, "does not match"),
        ({"seq": -1}, "-1 is less than the minimum of 0"),
        ({"v": True}, "True is not of type 'integer'"),
        ({"session_id": "has space"}, "does not match"),
        ({"session_id": None}, "None is not of type 'string'"),
    ],
)
def test_schema_rejects_bad_records(
    printed_schema: dict[str, Any], change: dict[str, Any], error: str
) -> None:
    record = json.loads(encode("s", 1, TS0, UserInput(text="hi"), ZEROS, chain_hash).line())
    assert schema_errors(record, printed_schema) == []
    bad = record | change
    assert schema_errors(bad, printed_schema) != []
    branch = {"$ref": printed_schema["discriminator"]["mapping"]["user_input"]}
    assert any(error in problem for problem in schema_errors(bad, branch, printed_schema))


def test_schema_rejects_an_unknown_type_and_a_missing_envelope(
    printed_schema: dict[str, Any],
) -> None:
    record = json.loads(encode("s", 1, TS0, UserInput(text="hi"), ZEROS, chain_hash).line())
    assert schema_errors(record | {"type": "tool_called"}, printed_schema) != []
    for field in ("session_id", "seq", "ts", "type", "v"):
        assert schema_errors({k: v for k, v in record.items() if k != field}, printed_schema)


# -- one-line summaries ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("event", "summary"),
    [
        (
            SessionStarted(
                agent="app:build", model="m1", replay_of="r0", forked_from="f", fork_seq=3
            ),
            "app:build model=m1 replay_of=r0 forked_from=f@3",
        ),
        (SessionStarted(), "unknown agent model=-"),
        (UserInput(text="  hello\n\tworld  "), "hello world"),
        (
            ActionProposed(
                calls=[
                    ToolCall(call_id="c1", tool="search", args={"q": "x", "a": 1}),
                    ToolCall(call_id="c2", tool="raw", args="{bad"),
                ],
                text="looking",
            ),
            'search({"a":1,"q":"x"}), raw({bad) | looking',
        ),
        (ActionProposed(reasoning="thinking"), "reasoning: thinking"),
        (ActionProposed(text="just text", reasoning="r"), "just text"),
        (RepairApplied(level="flatten", detail="d"), "flatten: d"),
        (
            VerificationFailed(call_id="c", tool="t", stage="schema", message="bad arg"),
            "schema t: bad arg",
        ),
        (ActionCommitted(call_id="c", tool="t", result={"b": 2, "a": [1]}), 't -> {"a":[1],"b":2}'),
        (ActionFailed(call_id="c", tool="t", kind="timeout", message="slow"), "timeout t: slow"),
        (
            ActionFailed(call_id="c", tool="t", kind="timeout", message="slow", abandoned=True),
            "timeout t abandoned: slow",
        ),
        (
            VerificationFailed(call_id="", tool="", stage="empty_reply", message="say something"),
            "empty_reply: say something",
        ),
        (CircuitOpened(tool="t", failures=3), "t open after 3 failures"),
        (FallbackInvoked(tool="t", fallback="u"), "t -> u"),
        (ContextCompacted(from_seq=2, to_seq=9, summary="sum"), "seq 2..9: sum"),
        (AgentCompleted(answer="x" * 200), "x" * 159 + "…"),
        (AgentCompleted(answer="a\u00a0 b\u2028c"), "a b c"),
        (AgentHalted(rule="repeat", reason="again"), "repeat: again"),
    ],
)
def test_each_event_type_has_this_one_line_summary(event: EventModel, summary: str) -> None:
    assert summarize(event) == summary
    assert len(summary) <= SUMMARY_WIDTH


class _Answer(AgentCompleted):
    pass


def test_a_subclass_of_an_event_model_is_summarised_like_its_base() -> None:
    assert summarize(_Answer(answer="done")) == "done"


def test_every_separator_but_the_space_is_unprintable() -> None:
    """What lets `clip` skip flattening a printable text without doubled or outer spaces."""
    spaces = [chr(code) for code in range(0x110000) if chr(code).isspace()]
    assert " " in spaces and len(spaces) > 20
    assert [c for c in spaces if c.isprintable()] == [" "]


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("plain words", "plain words"),
        (" lead", "lead"),
        ("trail ", "trail"),
        ("two  spaces", "two spaces"),
        ("tab\there", "tab here"),
        ("nbsp\u00a0and\u3000ideographic", "nbsp and ideographic"),
        ("", ""),
        ("x" * SUMMARY_WIDTH + " " * 5 * SUMMARY_WIDTH, "x" * SUMMARY_WIDTH),  # all at the start
        ("x" * SUMMARY_WIDTH + " " * 5 * SUMMARY_WIDTH + "y", "x" * (SUMMARY_WIDTH - 1) + "…"),
    ],
)
def test_clip_flattens_whitespace_to_single_spaces(text: str, line: str) -> None:
    assert clip(text) == line


@settings(max_examples=300)
@given(
    st.lists(
        st.one_of(
            st.text(alphabet="ab\u00e9", min_size=1, max_size=40),
            st.text(alphabet=" \t\n\u00a0\u2028", min_size=1, max_size=30),
        ),
        max_size=60,
    ),
    st.integers(1, 60),
)
def test_clip_of_a_long_text_is_its_whole_text_flattened_and_cut(
    parts: list[str], width: int
) -> None:
    """Cutting a long text from its start first changes nothing (words and blank runs of
    every length, the start ending inside either)."""
    text = "".join(parts)
    line = " ".join(text.split())
    assert clip(text, width) == (line if len(line) <= width else line[: width - 1] + "…")


def test_a_v1_proposal_upcasts_with_the_text_of_its_arguments() -> None:
    """v1 kept only the object (keys sorted by the canonical bytes): its text says as much."""
    from journal.upcasting import upcast

    payload = {
        "type": "action_proposed",
        "calls": [
            {"call_id": "a", "tool": "t", "args": {"a": 1, "b": [1.5, "x"]}},
            {"call_id": "b", "tool": "t", "args": "{not json"},
        ],
    }
    lifted = ActionProposed.model_validate(upcast("action_proposed", 1, payload))
    assert [call.arguments for call in lifted.calls] == ['{"a": 1, "b": [1.5, "x"]}', "{not json"]
    assert (lifted.request, lifted.response) == (None, None)
    assert ActionProposed.VERSION == 2


def test_the_text_of_arguments_keeps_key_order_and_number_forms() -> None:
    call = ToolCall(call_id="c", tool="t", args={"a": 2, "b": 1}, arguments='{"b": 1.0, "a": 2}')
    assert list(call.as_given.items()) == [("b", 1.0), ("a", 2)]  # type: ignore[union-attr]
    assert type(call.as_given["b"]) is float  # type: ignore[index]
    bare = ToolCall(call_id="c", tool="t", args={"z": 1, "y": 2})
    assert bare.as_given == {"z": 1, "y": 2} and bare.with_text().arguments == '{"z": 1, "y": 2}'
    broken = ToolCall(call_id="c", tool="t", args="{oops", arguments="{oops")
    assert broken.as_given == "{oops"


@pytest.mark.parametrize(("event_type", "version"), [("action_failed", 2), ("agent_halted", 1)])
def test_records_before_error_records_upcast_without_one(event_type: str, version: int) -> None:
    from journal import EVENT_TYPES
    from journal.upcasting import upcast

    fields = {
        "action_failed": {"call_id": "c", "tool": "t", "kind": "business", "message": "m"},
        "agent_halted": {"rule": "error", "reason": "boom"},
    }[event_type]
    lifted = EVENT_TYPES[event_type].model_validate(
        upcast(event_type, version, {"type": event_type, **fields})
    )
    assert lifted.error is None  # type: ignore[attr-defined]
