"""The ``anthropic`` client captured and replayed, against a local Messages API server.

The real ``anthropic`` package talks HTTP to `tests.fake_anthropic`; the scratch desk
(`tests.anthropic_app`) is the user's code. Every replay runs with the server stopped.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from journal import ActionProposed, Journal, ModelCallFailed, SessionStarted

from . import anthropic_app as app
from .client_replays import LOOP, Desk, events, fixture_green_then_red, replayed, run
from .fake_anthropic import Anthropic, serving

QUESTION = "Where is order 5?"


DESK = Desk(app, serving, Anthropic, QUESTION)
recorded, record = DESK.recorded, DESK.record


@pytest.fixture(autouse=True)
def _clean() -> Iterator[None]:
    yield from DESK.clean()


def test_create_journals_system_tools_tool_choice_thinking_and_cache_usage() -> None:
    journal, session, answered = record(app.answer, think=True)
    assert answered == "Order 5 is in stock; I e-mailed you."
    found = events(journal, session)
    assert [event.type for event in found] == LOOP
    started = found[0]
    assert isinstance(started, SessionStarted)
    assert started.system_prompt == app.prompt()
    assert [tool.name for tool in started.config.tools] == [t["name"] for t in app.TOOLS]
    assert started.config.tools[1].parameters == app.TOOLS[1]["input_schema"]
    assert started.model_settings == {
        "max_tokens": 1024,
        "thinking": {"type": "enabled", "budget_tokens": 512},
        "tool_choice": {"type": "auto"},
    }
    first, second = found[2], found[4]
    assert isinstance(first, ActionProposed) and isinstance(second, ActionProposed)
    assert first.request is not None
    params = first.request["params"]
    assert (params["tools"], params["tool_choice"]) == (app.TOOLS, {"type": "auto"})
    assert params["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert [(c.tool, c.args) for c in first.calls] == [("lookup_order", {"order_id": "5"})]
    assert first.reasoning is not None and first.reasoning.startswith("Plan ")
    # cache writes on the first call, reads after: input counts both, cached the reads
    assert (first.usage.input_tokens, first.usage.cached_tokens) == (60, 0)
    assert (second.usage.input_tokens, second.usage.cached_tokens) == (80, 50)
    assert first.response["usage"]["cache_creation_input_tokens"] == 50
    thinking, redacted = first.response["content"][:2]
    assert thinking["type"] == "thinking" and thinking["signature"].startswith("sig")
    assert redacted == {"type": "redacted_thinking", "data": redacted["data"]}
    # the next request sent them back verbatim (the server refuses anything else), and
    # its tool_result answered the call (journaled by the decorated tool)
    assert second.request is not None
    sent = second.request["messages"]
    assert [block["type"] for block in sent[0]["content"]][:2] == [
        "thinking",
        "redacted_thinking",
    ]
    assert sent[1]["content"][0]["type"] == "tool_result"
    assert app.OUTBOX == ["customer@example.com: order 5"]


@pytest.mark.parametrize(
    ("entry", "think"),
    [
        (app.answer, False),
        (app.answer, True),
        (app.answer_streamed, False),
        (app.answer_streamed, True),
        (app.answer_events, None),
        (app.answer_async, True),
    ],
)
def test_unchanged_code_replays_identical_with_the_server_down(entry: Any, think: Any) -> None:
    kwargs = {} if think is None else {"think": think}
    journal, session, answered = record(entry, **kwargs)
    assert answered == "Order 5 is in stock; I e-mailed you."
    sent = len(app.OUTBOX)
    result = replayed(journal, session, entry)
    assert result.identical, result.first_divergence
    assert len(app.OUTBOX) == sent  # the side-effect tool never ran
    assert (result.served.model_replies, result.served.tool_results) == (4, 2)


def test_the_stream_helper_gives_its_events_and_final_message_again() -> None:
    journal, session, answered = record(app.answer_async_streamed)
    result = replayed(journal, session, app.answer_async_streamed)
    assert result.identical, result.first_divergence
    (proposal,) = [e for e in events(journal, session) if isinstance(e, ActionProposed)]
    assert json.loads(answered) == [
        {"id": proposal.calls[0].call_id, "input": {"order_id": "5"}, "name": "lookup_order",
         "type": "tool_use"}
    ]  # fmt: skip
    assert proposal.calls[0].arguments == '{"order_id": "5"}'  # the deltas' text, verbatim


def test_a_retried_rate_limit_is_a_failed_call_and_replays_identical() -> None:
    journal, session, answered = record(app.answer, None, "429")
    assert answered.startswith("Order 5")
    found = events(journal, session)
    assert [e.type for e in found] == [*LOOP[:4], "model_call_failed", *LOOP[4:]]
    failed = found[4]
    assert isinstance(failed, ModelCallFailed)
    assert failed.error is not None and failed.error["type"] == "anthropic:RateLimitError"
    assert (failed.status_code, failed.kind) == (429, "infrastructure")
    result = replayed(journal, session, app.answer)
    assert result.identical, result.first_divergence
    assert result.served.failed_calls == 1
    app.CHANGES.add("no-retry")  # give up at once: the fallback, where the recording retried
    divergence = replayed(journal, session, app.answer).first_divergence
    assert divergence is not None and divergence.seq == 5


@pytest.mark.parametrize("fault", ["529", "500"])
def test_a_caught_status_error_replays_identical_and_a_new_fallback_diverges(fault: str) -> None:
    journal, session, answered = record(app.answer, None, fault)
    assert answered == app.fallback()
    found = events(journal, session)
    failed = found[4]
    assert isinstance(failed, ModelCallFailed) and failed.error is not None
    expected = "OverloadedError" if fault == "529" else "InternalServerError"
    assert failed.error["type"] == f"anthropic:{expected}"
    assert "anthropic:APIStatusError" in failed.error["mro"]
    assert replayed(journal, session, app.answer).identical
    app.CHANGES.add("fallback")
    divergence = replayed(journal, session, app.answer).first_divergence
    assert divergence is not None and divergence.seq == 5
    assert divergence.expected is not None and divergence.expected["type"] == "agent_completed"


@pytest.mark.parametrize("entry", [app.answer_streamed, app.answer_events])
def test_a_broken_stream_keeps_its_events_and_replays_them_then_the_error(entry: Any) -> None:
    journal, session, answered = record(entry, None, "break:4")
    assert answered == app.fallback()
    failed = events(journal, session)[4]
    assert isinstance(failed, ModelCallFailed)
    assert failed.response is not None and len(failed.response) == 4
    assert failed.error is not None and failed.error["type"] == "anthropic:APIStatusError"
    result = replayed(journal, session, entry)
    assert result.identical, result.first_divergence


def test_planted_changes_diverge_at_the_right_seq() -> None:
    journal, session, _ = record(app.answer)
    app.CHANGES.add("prompt")  # the system prompt: the session's configuration differs
    divergence = replayed(journal, session, app.answer).first_divergence
    assert divergence is not None and divergence.seq == 0
    assert "system_prompt" in divergence.reason
    app.CHANGES.clear()
    app.CHANGES.add("quantity")  # the code passes the tool other arguments than asked
    divergence = replayed(journal, session, app.answer).first_divergence
    assert divergence is not None and divergence.seq == 5
    app.CHANGES.clear()
    app.CHANGES.add("stock")  # a fix in the pure tool: at its result, with no flag
    divergence = replayed(journal, session, app.answer).first_divergence
    assert divergence is not None and divergence.seq == 5
    app.CHANGES.clear()
    app.CHANGES.add("lookup")  # a fix in the I/O tool: only when it runs live
    assert replayed(journal, session, app.answer).identical
    divergence = replayed(
        journal, session, app.answer, live_tools=["lookup_order"]
    ).first_divergence
    assert divergence is not None and divergence.seq == 3


QUESTIONS = [f"Where is order {n}?" for n in range(20)]
ENTRIES: list[tuple[Any, dict[str, Any]]] = [
    (app.answer, {}),
    (app.answer, {"think": True}),
    (app.answer_streamed, {"think": True}),
    (app.answer_events, {}),
    (app.answer_async, {}),
]


def test_twenty_sessions_replay_identical_and_a_prompt_change_diverges_in_each() -> None:
    with recorded() as journal:
        for index, question in enumerate(QUESTIONS):
            entry, kwargs = ENTRIES[index % len(ENTRIES)]
            run(entry, question, **kwargs)
    sessions = {}
    for summary in journal.sessions():
        started = events(journal, summary.session_id)[0]
        assert isinstance(started, SessionStarted) and started.agent is not None
        sessions[summary.session_id] = getattr(app, started.agent.split(":")[1])
    assert len(sessions) == 20
    identical = [replayed(journal, s, entry).identical for s, entry in sessions.items()]
    assert identical == [True] * 20
    app.CHANGES.add("prompt")
    seqs = [replayed(journal, s, e).first_divergence for s, e in sessions.items()]
    assert [d.seq if d else None for d in seqs] == [0] * 20
    assert all(d is not None and "system_prompt" in d.reason for d in seqs)


def test_a_fixture_of_an_anthropic_session_is_green_then_red(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (not a streamed one: a fixture is redacted, and an address split across two
    # input_json_delta pieces matches no rule piece by piece)
    journal, session, _ = record(app.answer, think=True)
    fixture_green_then_red(
        pytester, monkeypatch, (journal, session), "tests.anthropic_app", "stock", 5
    )


_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)


@st.composite
def streams(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Any stream of a message: text, thinking and tool_use blocks in pieces."""
    found: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {"id": "msg_1", "type": "message", "role": "assistant",
                        "model": "claude-fake-1", "content": [], "stop_reason": None,
                        "usage": {"input_tokens": draw(st.integers(0, 99)), "output_tokens": 1}},
        }
    ]  # fmt: skip
    for index, kind in enumerate(draw(st.lists(st.sampled_from(["text", "thinking", "tool"]),
                                               max_size=4))):  # fmt: skip
        pieces = draw(st.lists(_TEXT, max_size=3))
        if kind == "text":
            start: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": piece} for piece in pieces]
        elif kind == "thinking":
            start = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": p} for p in pieces]
            deltas.append({"type": "signature_delta", "signature": draw(_TEXT)})
        else:
            start = {"type": "tool_use", "id": f"toolu_{index}", "name": "t", "input": {}}
            text = json.dumps({"q": "".join(pieces)})
            deltas = [{"type": "input_json_delta", "partial_json": p}
                      for p in (text[:3], text[3:])]  # fmt: skip
        found.append({"type": "content_block_start", "index": index, "content_block": start})
        found += [{"type": "content_block_delta", "index": index, "delta": d} for d in deltas]
        found.append({"type": "content_block_stop", "index": index})
    found.append({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                  "usage": {"output_tokens": draw(st.integers(0, 99))}})  # fmt: skip
    found.append({"type": "message_stop"})
    return found


READ: list[list[Any]] = []


@app.capture.entry
def read_stream(question: str) -> str:
    stream = app.client.messages.create(
        model=app.MODEL, max_tokens=64, messages=[{"role": "user", "content": question}],
        stream=True,
    )  # fmt: skip
    READ.append([event.model_dump(mode="json", exclude_unset=True) for event in stream])
    return "read"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams())
def test_any_recorded_stream_replays_as_the_same_events_in_the_same_order(
    script: list[dict[str, Any]],
) -> None:
    READ.clear()
    with recorded() as journal:
        Anthropic.script = script
        read_stream("hi")
    (summary,) = journal.sessions()
    result = replayed(journal, summary.session_id, read_stream)
    assert result.identical, result.first_divergence
    live, again = READ
    assert again == live
    assert [event["type"] for event in again] == [event["type"] for event in script]


def test_calls_it_does_not_journal_stop_a_replay_and_outside_a_session_pass_through() -> None:
    with serving() as url:
        raw = anthropic.Anthropic(base_url=url, api_key="local", max_retries=0)
        wrapped = app.capture.anthropic(raw)
        reply = wrapped.messages.create(
            model=app.MODEL, max_tokens=8, messages=[{"role": "user", "content": "order 1"}]
        )
        assert isinstance(reply, anthropic.types.Message)
        with wrapped.messages.stream(
            model=app.MODEL, max_tokens=8, messages=[{"role": "user", "content": "order 1"}]
        ) as stream:
            assert stream.get_final_message().content == reply.content
    assert "count_tokens" in __import__("capture.clients.anthropic").clients.anthropic.UNJOURNALED


@pytest.mark.parametrize("entry", [app.answer_streamed, app.answer_async])
def test_sessions_on_either_store_replay_identical_and_read_like_any_other(
    any_journal: Journal, entry: Any
) -> None:
    from journal.formats import otlp_document

    with serving() as url:
        Anthropic.faults = [None, "429"] if entry is app.answer_async else []
        app.bind(any_journal, url)
        for question in QUESTIONS[:3]:
            run(app.answer if entry is app.answer_async else entry, question)
        run(entry, QUESTION, think=True)
    summaries = list(any_journal.sessions())
    assert len(summaries) == 4 and {s.status for s in summaries} == {"completed"}
    for summary in summaries:
        started = events(any_journal, summary.session_id)[0]
        assert isinstance(started, SessionStarted) and started.agent is not None
        code = getattr(app, started.agent.split(":")[1])
        result = replayed(any_journal, summary.session_id, code)
        assert result.identical, result.first_divergence
        assert summary.tokens_in > 0 and summary.tokens_cached > 0
        assert otlp_document(any_journal, [summary.session_id])["resourceSpans"]
