"""Recovery: truncated JSON, scavenged calls, flattened schemas and storms, pure and journaled."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from agentloop import Tool, repair_truncated_json, scavenge_calls
from agentloop import recovery as recovery_module
from agentloop.examples.sloppy import SHIPMENT_SCHEMA
from agentloop.schemas import (
    flatten_schema,
    inline_refs,
    is_flattened,
    leaf_count,
    needs_flattening,
    nesting_depth,
    unflatten_args,
)
from journal import (
    ActionCommitted,
    AgentCompleted,
    Journal,
    RepairApplied,
    SessionStarted,
    ToolCall,
    UserInput,
    VerificationFailed,
)

from .loop_helpers import (
    Args,
    Script,
    after_start,
    agent_of,
    answer,
    events_of,
    ok_tool,
    propose,
    proposed,
    run_events,
    run_turns,
    tc,
)

ASK = UserInput(text="go")
DONE = AgentCompleted(answer="done")

# -- truncated JSON -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "repaired"),
    [
        ('{"q": "refund', {"q": "refund"}),
        ('{"a": 1, "b": [1, 2', {"a": 1, "b": [1, 2]}),
        ('{"a": [{"b": 1}, {"c": "d', {"a": [{"b": 1}, {"c": "d"}]}),
        ('{"a": 1,', {"a": 1}),
        ('{"a": 1, "b', {"a": 1}),
        ('{"a": 1, "b": ', {"a": 1}),
        ('{"a": {"b": true', {"a": {"b": True}}),
        ('{"a": {"b": tru', {"a": {}}),
        ('{"q": "say \\"hi', {"q": 'say "hi'}),
        ('{"w": "日本', {"w": "日本"}),
        ("{", {}),
        ('  {"a": null', {"a": None}),
    ],
)
def test_truncated_json_is_closed(raw: str, repaired: dict[str, Any]) -> None:
    assert repair_truncated_json(raw) == repaired


@pytest.mark.parametrize("raw", ["[1, 2", "nope", "", '"just a string', "{" * 30_000])
def test_what_cannot_be_an_object_is_not_repaired(raw: str) -> None:
    assert repair_truncated_json(raw) is None


def test_repair_gives_up_quickly_on_long_broken_text(monkeypatch: pytest.MonkeyPatch) -> None:
    """A long text that is broken everywhere costs a bounded number of parse attempts."""
    parses = 0
    real = recovery_module.loads_strict

    def counting(text: str) -> Any:
        nonlocal parses
        parses += 1
        return real(text)

    monkeypatch.setattr(recovery_module, "loads_strict", counting)
    assert repair_truncated_json('{"a": 1 ' + "1 " * 9000) is None
    assert parses <= 200


# -- scavenged calls ------------------------------------------------------------------

TOOLS = ["search", "pay"]


@pytest.mark.parametrize(
    ("texts", "found"),
    [
        (
            ['<tool_call>{"name": "search", "arguments": {"q": "x"}}</tool_call>'],
            [("search", {"q": "x"})],
        ),
        (
            ['I will call ```json\n{"tool": "pay", "args": {"amount": 5}}\n``` now'],
            [("pay", {"amount": 5})],
        ),
        (
            [
                '{"type": "function", "function": {"name": "search", '
                '"arguments": "{\\"q\\": \\"y\\"}"}}'
            ],
            [("search", {"q": "y"})],
        ),
        (
            [
                '{"name": "search", "parameters": {"q": 1}} '
                'then {"name": "pay", "input": {"amount": 2}}'
            ],
            [("search", {"q": 1}), ("pay", {"amount": 2})],
        ),
        (
            [
                '{"tool_calls": [{"id": "x", "type": "function", "function": {"name": "pay", '
                '"arguments": "{\\"amount\\": 3}"}}]}'
            ],
            [("pay", {"amount": 3})],
        ),
        (['{"name": "unknown", "arguments": {}} {"name": "search"}'], [("search", {})]),
        (['{"name": "search", "arguments": "{\\"q\\": \\"cut"}'], [("search", '{"q": "cut')]),
        (['{"name": "search", "arguments": [1]}', "plain words", 'search(q="x")'], []),
        ([None, 'text {"name": "pay", "arguments": {"amount": 1}}'], [("pay", {"amount": 1})]),
        (
            ['{"name": "pay", "arguments": {"amount": 1}}', '{"name": "search", "arguments": {}}'],
            [("pay", {"amount": 1})],
        ),
    ],
)
def test_scavenged_calls(texts: list[str | None], found: list[tuple[str, Any]]) -> None:
    assert scavenge_calls(texts, TOOLS, "p") == [
        ToolCall(call_id=f"p-{i}", tool=tool, args=args) for i, (tool, args) in enumerate(found, 1)
    ]


# -- flattened schemas ----------------------------------------------------------------


def test_deep_schemas_are_flattened_for_the_model() -> None:
    assert (leaf_count(SHIPMENT_SCHEMA), nesting_depth(SHIPMENT_SCHEMA)) == (10, 3)
    assert needs_flattening(SHIPMENT_SCHEMA, max_leaves=10, max_depth=2)
    assert not needs_flattening(SHIPMENT_SCHEMA, max_leaves=10, max_depth=3)
    assert needs_flattening(SHIPMENT_SCHEMA, max_leaves=9, max_depth=3)
    flat = flatten_schema(SHIPMENT_SCHEMA)
    assert flat["properties"]["recipient__address__city"] == {"type": "string"}
    assert flat["properties"]["service"] == SHIPMENT_SCHEMA["properties"]["service"]
    assert flat["required"] == [
        "recipient__name",
        "recipient__address__street",
        "recipient__address__city",
        "recipient__address__zip",
        "recipient__address__country",
        "parcel__weight_kg",
        "service",
    ]
    assert nesting_depth(flat) == 1


def test_unflatten_rebuilds_the_nesting() -> None:
    assert unflatten_args({"a__b__c": 1, "a__d": 2, "e": 3}) == {
        "a": {"b": {"c": 1}, "d": 2},
        "e": 3,
    }
    assert is_flattened({"a__b": 1}) and not is_flattened({"a": {"b": 1}})


FLAT_ARGS = {
    "recipient__name": "Ada",
    "recipient__address__street": "1 Sq",
    "recipient__address__city": "London",
    "recipient__address__zip": "SW1",
    "recipient__address__country": "GB",
    "parcel__weight_kg": 2,
    "service": "express",
}
NESTED_ARGS = {
    "recipient": {
        "name": "Ada",
        "address": {"street": "1 Sq", "city": "London", "zip": "SW1", "country": "GB"},
    },
    "parcel": {"weight_kg": 2},
    "service": "express",
}


def ship_tool() -> Tool:
    return Tool(
        "ship", lambda a: {"to": a["recipient"]["address"]["city"]}, "ship", SHIPMENT_SCHEMA
    )


def test_flattened_answers_are_nested_again(journal: Journal) -> None:
    call = propose(("ship", FLAT_ARGS))
    model = Script(call)
    run_turns(agent_of(ship_tool()), journal, model, "go")
    shown = model.requests[0].tools[0]["function"]["parameters"]
    assert shown == flatten_schema(SHIPMENT_SCHEMA)
    started = events_of(journal)[0]
    assert isinstance(started, SessionStarted)
    assert started.config.tools[0].parameters == SHIPMENT_SCHEMA
    assert after_start(journal) == [
        ASK,
        proposed(call),
        RepairApplied(
            level="flatten",
            call_id="c1",
            tool="ship",
            detail="nested 7 flattened arguments of ship",
            before=FLAT_ARGS,
            after=NESTED_ARGS,
        ),
        ActionCommitted(call_id="c1", tool="ship", args=NESTED_ARGS, result={"to": "London"}),
        proposed(answer()),
        DONE,
    ]


def test_flat_schemas_are_not_unflattened(journal: Journal) -> None:
    """A tool shown as is keeps a name with ``__`` as one argument."""
    call = propose(("echo", {"q__x": "a"}))
    events = run_events(ok_tool(), steps=[call], journal=journal)
    assert [e.type for e in events] == [
        "user_input",
        "action_proposed",
        "verification_failed",
        "action_proposed",
        "agent_completed",
    ]


# -- repairs as the loop journals them ------------------------------------------------


def test_truncated_args_are_repaired_and_run(journal: Journal) -> None:
    call = propose(tc("echo", '{"q": "refund'))
    assert run_events(ok_tool(), steps=[call], journal=journal) == [
        ASK,
        proposed(call),
        RepairApplied(
            level="truncation",
            call_id="c1",
            tool="echo",
            detail="closed the JSON arguments of echo, cut off mid-way",
            before='{"q": "refund',
            after={"q": "refund"},
        ),
        ActionCommitted(call_id="c1", tool="echo", args={"q": "refund"}, result={"echo": "refund"}),
        proposed(answer()),
        DONE,
    ]


def test_args_beyond_repair_are_a_schema_rejection(journal: Journal) -> None:
    call = propose(tc("echo", "q = refund"))
    assert run_events(ok_tool(), steps=[call], journal=journal) == [
        ASK,
        proposed(call),
        VerificationFailed(
            call_id="c1",
            tool="echo",
            stage="schema",
            message="the arguments of echo are not valid JSON; send one complete JSON object "
            "matching its schema: {q: string}",
        ),
        proposed(answer()),
        DONE,
    ]


@pytest.mark.parametrize("where", ["reasoning", "text"])
def test_calls_written_out_are_scavenged(journal: Journal, where: str) -> None:
    written = 'Let me look. <tool_call>{"name": "echo", "arguments": {"q": "hi"}}</tool_call>'
    response = propose(**{where: written})  # type: ignore[arg-type]
    scavenged = ToolCall(call_id="scavenged-2-1", tool="echo", args={"q": "hi"})
    assert run_events(ok_tool(parallel_safe=True), steps=[response], journal=journal) == [
        ASK,
        proposed(response),
        RepairApplied(
            level="scavenge",
            detail="1 tool call(s) written out in the response were taken as calls",
            after=[scavenged.model_dump(mode="json", exclude_none=True)],
        ),
        ActionCommitted(
            call_id="scavenged-2-1", tool="echo", args={"q": "hi"}, result={"echo": "hi"}
        ),
        proposed(answer()),
        DONE,
    ]


def test_a_write_only_written_down_is_never_run(journal: Journal) -> None:
    written = '<tool_call>{"name": "echo", "arguments": {"q": "refund everyone"}}</tool_call>'
    calls: list[str] = []
    write = Tool("echo", lambda a: calls.append(a.q), "a write", Args)  # not parallel-safe
    response = propose(text=written)
    assert run_events(write, steps=[response], journal=journal) == [
        ASK,
        proposed(response),
        AgentCompleted(answer=written),
    ]
    assert calls == []


def test_scavenged_truncated_args_get_both_repairs(journal: Journal) -> None:
    written = '{"name": "echo", "arguments": "{\\"q\\": \\"cut"}'
    events = run_events(ok_tool(scavenge=True), steps=[propose(reasoning=written)], journal=journal)
    repairs = [e for e in events if isinstance(e, RepairApplied)]
    assert [(r.level, r.after) for r in repairs] == [
        ("scavenge", [{"call_id": "scavenged-2-1", "tool": "echo", "args": '{"q": "cut'}]),
        ("truncation", {"q": "cut"}),
    ]
    assert events[-3] == ActionCommitted(
        call_id="scavenged-2-1", tool="echo", args={"q": "cut"}, result={"echo": "cut"}
    )


class City(BaseModel):
    city: str
    zip: str


class Address(BaseModel):
    address: City


class Order(BaseModel):
    to: Address
    weight: float


def test_nested_pydantic_models_are_flattened_too(journal: Journal) -> None:
    """``$defs`` references are inlined: the depth is seen and the flat schema is whole."""
    tool = Tool("ship", lambda a: {"city": a.to.address.city}, "ship", Order)
    assert nesting_depth(tool.parameters) == 3
    flat = tool.model_spec(max_leaves=10, max_depth=2)["function"]["parameters"]
    assert flat == {
        "type": "object",
        "properties": {
            "to__address__city": {"title": "City", "type": "string"},
            "to__address__zip": {"title": "Zip", "type": "string"},
            "weight": {"title": "Weight", "type": "number"},
        },
        "required": ["to__address__city", "to__address__zip", "weight"],
    }
    flat_args = {"to__address__city": "Oslo", "to__address__zip": "0150", "weight": 1.5}
    nested = {"to": {"address": {"city": "Oslo", "zip": "0150"}}, "weight": 1.5}
    events = run_events(tool, steps=[propose(("ship", flat_args))], journal=journal)
    assert events[2:4] == [
        RepairApplied(
            level="flatten",
            call_id="c1",
            tool="ship",
            detail="nested 3 flattened arguments of ship",
            before=flat_args,
            after=nested,
        ),
        ActionCommitted(call_id="c1", tool="ship", args=nested, result={"city": "Oslo"}),
    ]


class Tree(BaseModel):
    name: str
    kids: list[Tree] = []


def test_recursive_models_keep_their_references() -> None:
    tool = Tool("tree", lambda a: a.name, "tree", Tree)
    assert inline_refs(tool.parameters)["$defs"] == tool.parameters["$defs"]
    assert tool.model_spec(max_leaves=10, max_depth=2)["function"]["parameters"] == (
        tool.parameters
    )


def test_conflicting_flattened_names_are_not_silently_dropped() -> None:
    assert unflatten_args({"a": 1, "a__b": 2}) is None
    assert unflatten_args({"a__b": 2, "a": 1}) is None
    assert unflatten_args({"a__b": 2, "a__c": 3}) == {"a": {"b": 2, "c": 3}}
