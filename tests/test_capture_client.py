"""Capture at the client boundary, in process: the Responses API (plain and streamed), tool
calls no model proposed, typed tool results, the user's own exception types, and what a
request that changed looks like in the report.

The model is `tests/fake_openai.py`'s policy, served from a thread on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import ThreadingHTTPServer

import pytest

from capture import ReplayedException, exception_record, rebuilt
from capture.clients import calls
from capture.requests import jsonable
from journal import (
    ActionCommitted,
    ActionFailed,
    ActionProposed,
    AgentHalted,
    Journal,
    ModelCallFailed,
    UserInput,
)
from replay import ReplayOptions, replay_entry

from . import capture_app
from .fake_openai import Handler, serving

openai = pytest.importorskip("openai")


@pytest.fixture
def journal() -> Iterator[Journal]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02})
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    with Journal.open(":memory:") as opened:
        capture_app.bind(opened, openai.OpenAI(base_url=url, api_key="local", max_retries=0))
        capture_app.CAUGHT.clear()
        try:
            yield opened
        finally:
            server.shutdown()
            server.server_close()
            thread.join()


def only_session(journal: Journal) -> str:
    (summary,) = journal.sessions()
    return summary.session_id


@pytest.mark.parametrize("stream", [False, True])
def test_a_responses_api_loop_replays_identical_and_raises_the_users_own_type(
    journal: Journal, stream: bool
) -> None:
    answer = capture_app.answer("Is order 101 in stock? I want a unit.", stream=stream)
    assert answer.startswith("Sorry, I could not help with order 101")
    assert capture_app.CAUGHT == ["OutOfStock:SKU-2"]
    session = only_session(journal)
    failed = [i.event for i in journal.events(session) if isinstance(i.event, ActionFailed)]
    assert failed[0].error is not None
    assert failed[0].error["type"] == "tests.capture_app:OutOfStock"
    assert failed[0].error["attributes"] == {"sku": "SKU-2"}

    result = replay_entry(journal, session, capture_app.answer)
    assert result.identical, result.first_divergence
    # the replay raised the recorded exception as the user's own type: the loop caught it
    assert capture_app.CAUGHT == ["OutOfStock:SKU-2", "OutOfStock:SKU-2"]


def test_a_call_no_model_proposed_is_journaled_and_replayed(journal: Journal) -> None:
    capture_app.direct("100")
    session = only_session(journal)
    types = [item.event.type for item in journal.events(session)]
    assert types[:3] == ["session_started", "action_committed", "user_input"]
    committed = list(journal.events(session))[1].event
    assert committed.call_id == "direct-1"  # type: ignore[union-attr]
    assert replay_entry(journal, session, capture_app.direct).identical


def test_code_that_now_catches_the_recorded_crash_stops_where_the_entry_raised(
    journal: Journal, monkeypatch: pytest.MonkeyPatch
) -> None:
    @capture_app.capture.tool(name="check_stock")
    def warehouse_down(sku: str, quantity: int) -> capture_app.Stock:
        raise RuntimeError("warehouse down")

    monkeypatch.setitem(capture_app.DISPATCH, "check_stock", warehouse_down)
    with pytest.raises(RuntimeError):  # the loop catches OutOfStock only
        capture_app.answer("Is order 101 in stock? I want a unit.")
    session = only_session(journal)
    recorded = list(journal.events(session))
    assert recorded[-1].event.type == "agent_halted"

    def caught(sku: str, quantity: int) -> capture_app.Stock:  # the change: it is caught
        try:
            return warehouse_down(sku, quantity)
        except RuntimeError:
            return capture_app.Stock(sku=sku, units=0)

    monkeypatch.setitem(capture_app.DISPATCH, "check_stock", caught)
    result = replay_entry(journal, session, capture_app.answer, save=True)
    last = recorded[-1].seq
    divergence = result.first_divergence
    assert divergence is not None and divergence.seq == last  # the recorded agent_halted
    assert result.replay_session_id is not None
    halted = list(journal.events(result.replay_session_id))[-1].event
    assert isinstance(halted, AgentHalted) and halted.rule == "replay_stopped"
    assert halted.reason == (
        f"replay stopped at seq {last}: the code asked for model output at seq {last}, where "
        "the recorded entry raised RuntimeError: warehouse down; no live model to go on with "
        "(--live-model)"
    )


def test_a_tool_that_is_a_method_records_its_arguments_without_the_instance(
    journal: Journal,
) -> None:
    """``self`` is no argument of the call (its repr holds an address that no replay has)."""
    capture_app.described("100")
    session = only_session(journal)
    committed = list(journal.events(session))[1].event
    assert committed.args == {"order_id": "100"}  # type: ignore[union-attr]
    assert replay_entry(journal, session, capture_app.described).identical


def test_an_entry_that_returns_a_generator_hands_it_over_unread(journal: Journal) -> None:
    """Journaling the answer never iterates a one-shot iterator the caller is to read."""
    assert list(capture_app.streamed_words("order 100")) == ["function_call"]
    session = only_session(journal)
    answer = list(journal.events(session))[-1].event
    assert answer.answer == '"<generator>"'  # type: ignore[union-attr]
    assert replay_entry(journal, session, capture_app.streamed_words).identical


def test_a_call_still_running_when_the_entry_failed_replays_identical(journal: Journal) -> None:
    """asyncio.gather without return_exceptions: a sibling's failure ended the entry while
    the proposed lookup ran; the replay's lookup waits as that one did, unanswered."""
    with pytest.raises(capture_app.OutOfStock):
        asyncio.run(capture_app.gathered("Is order 104 in stock?"))
    session = only_session(journal)
    assert [item.event.type for item in journal.events(session)][-3:] == [
        "action_proposed",
        "action_failed",
        "agent_halted",
    ]
    result = replay_entry(journal, session, capture_app.gathered)
    assert result.identical, result.first_divergence
    # code that now waits on that call alone diverges there, and does not hang
    changed = replay_entry(journal, session, capture_app.gathered_in_turn)
    divergence = changed.first_divergence
    assert divergence is not None and divergence.seq == 3
    assert 'replay stopped: the code called lookup_order({"order_id":"104"})' in (divergence.reason)


def test_a_client_derived_with_options_is_captured_too(journal: Journal) -> None:
    capture_app.optioned("100")
    session = only_session(journal)
    assert [item.event.type for item in journal.events(session)] == [
        "session_started",
        "user_input",
        "action_proposed",
        "agent_completed",
    ]
    assert replay_entry(journal, session, capture_app.optioned).identical


@pytest.mark.parametrize(
    ("how", "named", "instead"),
    [
        ("raw", "responses.with_raw_response.create", "client.responses.create(...)"),
        ("stream", "chat.completions.stream", "client.chat.completions.create(stream=True)"),
    ],
)
def test_a_helper_that_is_not_journaled_is_named_at_capture_and_stops_its_replay(
    journal: Journal,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    how: str,
    named: str,
    instead: str,
) -> None:
    monkeypatch.setattr(calls, "_WARNED", set())  # as in a fresh process
    with caplog.at_level("WARNING", logger="capture"):
        assert capture_app.unjournaled("100", how) in ("function_call", "tool_calls")
        capture_app.unjournaled("101", how)  # named once per process, not at every call
    session = journal.sessions()[-1].session_id
    warned = [r.getMessage() for r in caplog.records if named in r.getMessage()]
    assert len(warned) == 1
    assert f"write it as {instead}" in warned[0]
    # the server still answers: a replay that reached it would be served by it, not stopped
    result = replay_entry(journal, session, capture_app.unjournaled)
    divergence = result.first_divergence
    assert divergence is not None and divergence.seq == 1
    assert (
        f"replay stopped: the code called client.{named}(), which agent-journal does not "
        f"journal, so a replay cannot serve it (write it as {instead})"
    ) in divergence.reason


def test_a_changed_request_stops_the_replay_and_names_what_changed(
    journal: Journal, monkeypatch: pytest.MonkeyPatch
) -> None:
    capture_app.answer("Is order 102 in stock? I want a unit.")
    session = only_session(journal)
    monkeypatch.setattr(capture_app, "TOOLS", capture_app.TOOLS[:2])  # a tool dropped
    result = replay_entry(journal, session, capture_app.answer)
    first = result.first_divergence  # the tools are configuration, recorded at seq 0
    assert first is not None and first.seq == 0
    assert [change.path for change in first.changes] == ["config.tools[2]", "system_prompt_hash"]
    divergence = result.behaviour_divergence
    assert divergence is not None and divergence.seq == 2
    assert divergence.reason.startswith(
        "expected action_proposed, got agent_halted (replay stopped at seq 2: "
        "the request at seq 2 differs from the recorded one: tools[2]: "
    )
    assert result.stopped_at == 2


def _looked_up(order_id: str) -> dict[str, object]:
    """What `capture_app.lookup_order` returns, built without calling it."""
    return {"order_id": order_id, "sku": "SKU-2", "total": 10}


def test_code_that_no_longer_calls_a_tool_diverges_saying_so(
    journal: Journal, monkeypatch: pytest.MonkeyPatch
) -> None:
    capture_app.answer("Is order 101 in stock? I want a unit.")
    session = only_session(journal)
    monkeypatch.setitem(capture_app.DISPATCH, "lookup_order", _looked_up)
    result = replay_entry(journal, session, capture_app.answer)
    divergence = result.first_divergence
    assert divergence is not None and divergence.seq == 3  # lookup_order's result
    assert divergence.expected is not None
    call = divergence.expected["call_id"]
    assert divergence.reason.startswith(
        f"the code answered {call} without calling lookup_order, which the recording ran "
        "here (the outcome is now what the code sent the model); action_committed differs "
        "in result"
    )


def test_code_that_no_longer_calls_a_tool_diverges_even_with_the_same_value(
    journal: Journal, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tool returned text and the code now sends the very same text without calling it:
    the values agree, the code path does not."""
    capture_app.first_lookup("Where is order 7?")
    session = only_session(journal)
    assert replay_entry(journal, session, capture_app.first_lookup).identical
    same_text = capture_app.lookup_order_text.__wrapped__  # the undecorated function
    monkeypatch.setitem(capture_app.TEXT_TOOLS, "lookup_order", same_text)
    result = replay_entry(journal, session, capture_app.first_lookup)
    divergence = result.first_divergence
    assert divergence is not None and divergence.seq == 3
    assert divergence.changes == ()
    assert divergence.reason.endswith(
        "(the outcome is now what the code sent the model); the value is the same"
    )


def test_a_result_the_recording_took_from_a_message_is_not_said_to_be_uncalled(
    journal: Journal, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No decorated tool ran in the recording either: the reason is the values' alone."""
    monkeypatch.setitem(capture_app.DISPATCH, "lookup_order", _looked_up)
    capture_app.answer("Is order 101 in stock? I want a unit.")
    session = only_session(journal)
    monkeypatch.setitem(
        capture_app.DISPATCH, "lookup_order", lambda order_id: {**_looked_up(order_id), "total": 9}
    )
    divergence = replay_entry(journal, session, capture_app.answer).first_divergence
    assert divergence is not None and divergence.seq == 3
    assert divergence.reason.startswith("action_committed differs in result")


def test_a_tool_calling_tools_is_one_call_journaled_and_replayed(
    journal: Journal, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Decorated tools called by a decorated tool while it runs are part of its run: one
    outcome is journaled, a replay serves it (the inner tools never run), and when the
    outer tool runs for real, an inner one with side effects runs only when allowed."""
    monkeypatch.setitem(capture_app.TEXT_TOOLS, "lookup_order", capture_app.lookup_and_reserve)
    monkeypatch.setattr(capture_app, "RESERVED", [])
    capture_app.first_lookup("Where is order 7?")
    session = only_session(journal)
    outcomes = [i.event for i in journal.events(session) if isinstance(i.event, ActionCommitted)]
    assert [(o.tool, json.loads(o.result)["hold"]) for o in outcomes] == [
        ("lookup_order", "held-SKU-2")
    ]
    assert capture_app.RESERVED == ["SKU-2"]

    assert replay_entry(journal, session, capture_app.first_lookup).identical
    assert capture_app.RESERVED == ["SKU-2"]  # served: nothing ran

    live = replay_entry(
        journal, session, capture_app.first_lookup, ReplayOptions(live_tools=["lookup_order"])
    )
    assert live.first_divergence is not None and live.first_divergence.seq == 3
    assert (
        "replay stopped: lookup_order runs for real and calls reserve, which has side effects "
        "(--allow-side-effects reserve lets it run for real)"
    ) in live.first_divergence.reason
    assert capture_app.RESERVED == ["SKU-2"]
    allowed = replay_entry(
        journal,
        session,
        capture_app.first_lookup,
        ReplayOptions(live_tools=["lookup_order"], allow_side_effects=["reserve"]),
    )
    assert allowed.identical, allowed.first_divergence
    assert capture_app.RESERVED == ["SKU-2", "SKU-2"]


def test_a_model_call_inside_a_tool_is_part_of_its_run(
    journal: Journal, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Not journaled (a warning says so): the tool's outcome stands for it, and a replay
    serving that outcome is identical; run for real in a replay, it needs a live model."""
    monkeypatch.setitem(capture_app.TEXT_TOOLS, "lookup_order", capture_app.lookup_by_model)
    monkeypatch.setattr(calls, "_WARNED", set())  # as in a fresh process
    with caplog.at_level(logging.WARNING, logger="capture"):
        capture_app.first_lookup("Where is order 7?")
    assert "a model call made inside tool lookup_order is part of that tool's run" in caplog.text
    session = only_session(journal)
    types = [item.event.type for item in journal.events(session)]
    assert types.count("action_proposed") == 2 and types.count("action_committed") == 1
    assert replay_entry(journal, session, capture_app.first_lookup).identical
    live = replay_entry(
        journal, session, capture_app.first_lookup, ReplayOptions(live_tools=["lookup_order"])
    )
    assert live.first_divergence is not None and live.first_divergence.seq == 3
    assert "replay stopped: lookup_order runs for real and calls the model" in (
        live.first_divergence.reason
    )


def test_an_entry_called_inside_a_tool_is_a_session_of_its_own(
    journal: Journal, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent used as a tool: the outer session records the tool's outcome, the inner
    entry its own session; each replays identical on its own."""
    monkeypatch.setitem(capture_app.TEXT_TOOLS, "lookup_order", capture_app.lookup_by_agent)
    capture_app.first_lookup("Where is order 7?")
    by_entry = {summary.agent: summary.session_id for summary in journal.sessions()}
    assert set(by_entry) == {"tests.capture_app:first_lookup", "tests.capture_app:first_call"}
    outer = by_entry["tests.capture_app:first_lookup"]
    inner = by_entry["tests.capture_app:first_call"]
    outcomes = [i.event for i in journal.events(outer) if isinstance(i.event, ActionCommitted)]
    assert [json.loads(o.result)["asked"] for o in outcomes] == ["lookup_order"]
    inner_types = [item.event.type for item in journal.events(inner)]
    assert inner_types.count("action_proposed") == 1 and "action_committed" not in inner_types
    assert replay_entry(journal, outer, capture_app.first_lookup).identical
    assert replay_entry(journal, inner, capture_app.first_call).identical


class RefusesFirst(Handler):
    """The fake model, refusing its first request with a 429 (a rate limit)."""

    refused: list[bool] = []

    def do_POST(self) -> None:  # noqa: N802 - the http.server API
        if self.refused:
            return super().do_POST()
        self.refused.append(True)
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        body = b'{"error": {"message": "slow down", "type": "rate_limit_exceeded"}}'
        self.send_response(429)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        return None


@contextmanager
def refused_once() -> Iterator[Journal]:
    """A fresh journal the capture writes to, through a model that answers its first
    request with a 429 (`RefusesFirst`)."""
    RefusesFirst.refused.clear()
    with Journal.open(":memory:") as opened, serving(RefusesFirst) as url:
        capture_app.bind(opened, openai.OpenAI(base_url=url, api_key="local", max_retries=0))
        yield opened


def ended_by_error(journal: Journal, session: str) -> AgentHalted:
    """The halt that ends ``session``, which an exception's record must be in."""
    halt = list(journal.events(session))[-1].event
    assert isinstance(halt, AgentHalted) and halt.error is not None
    return halt


def test_a_model_call_made_again_after_an_api_error_replays_identical() -> None:
    """The refused call is journaled (``model_call_failed``, its request beside it); the call
    made again records its messages whole (as sent anew), and the replay raises the 429 from
    the first call and serves the second."""
    with refused_once() as opened:
        assert capture_app.retried("Where is order 7?") == "lookup_order"
        assert RefusesFirst.refused == [True]
        session = only_session(opened)
        events = [item.event for item in opened.events(session)]
        assert [event.type for event in events[2:]] == [
            "model_call_failed",
            "action_proposed",
            "agent_completed",
        ]
        failed, proposal = events[2], events[3]
        assert isinstance(failed, ModelCallFailed) and failed.status_code == 429
        assert isinstance(proposal, ActionProposed) and proposal.request is not None
        assert (proposal.request["from"], len(proposal.request["messages"])) == (0, 1)
        result = replay_entry(opened, session, capture_app.retried)
        assert result.identical, result.first_divergence
        assert (result.served.failed_calls, result.served.model_replies) == (1, 1)


def test_a_session_ended_by_an_api_error_replays_identical() -> None:
    """The model call's error ended the entry: the failed call, then the halt. The replay's
    model call raises it again (as the user's own type); code that now catches it and asks
    again diverges where it asks, naming the recorded failure."""
    with refused_once() as opened:
        with pytest.raises(openai.RateLimitError):
            capture_app.first_call("Where is order 7?")
        session = only_session(opened)
        halt = ended_by_error(opened, session)
        assert halt.error["type"] == "openai:RateLimitError"
        assert halt.error["raised_by"] == "model_call"
        assert [item.event.type for item in opened.events(session)][2] == "model_call_failed"
        result = replay_entry(opened, session, capture_app.first_call)
        assert result.identical, result.first_divergence
        catching = replay_entry(opened, session, capture_app.retried)
        assert catching.first_divergence is not None and catching.first_divergence.seq == 3
        assert catching.first_divergence.reason.startswith(
            "the recording went on without the model after RateLimitError (429) (it wrote "
            "agent_halted); the code now calls it again"
        )


def test_an_api_error_the_code_raised_as_its_own_replays_identical() -> None:
    """``raise ModelUnavailable(...) from error``: the halt's record is the user's error, and
    names the model call's (``model_error``), which the replay's model call raises again."""
    with refused_once() as opened:
        with pytest.raises(capture_app.ModelUnavailable):
            capture_app.wrapped_failure("Where is order 7?")
        session = only_session(opened)
        halt = ended_by_error(opened, session)
        assert halt.error["type"] == "tests.capture_app:ModelUnavailable"
        assert halt.error["raised_by"] == "model_call"
        assert halt.error["model_error"]["type"] == "openai:RateLimitError"  # type: ignore[index]
        result = replay_entry(opened, session, capture_app.wrapped_failure)
        assert result.identical, result.first_divergence


class Connection:
    """An object with no JSON form, whose default repr holds its memory address."""


def test_an_exception_record_holds_no_memory_address() -> None:
    """An attribute with no JSON form is its repr without the address, which changes at
    every run (a replay of unchanged code diverged on it)."""
    error = ConnectionError("down")
    error.connection = Connection()  # type: ignore[attr-defined]
    record = exception_record(error)
    assert record["attributes"]["connection"] == "<tests.test_capture_client.Connection object>"


def test_bytes_that_are_not_utf8_are_journaled_and_never_fail_the_call() -> None:
    """A failed ``subprocess.run(check=True)`` carries its output as bytes that need not be
    UTF-8: its record (and a tool's result of such bytes) keeps them as base64, where
    capturing raised UnicodeDecodeError into the code's own call."""
    error = subprocess.CalledProcessError(1, ["make"], output=b"\xff\xfe bad")
    record = exception_record(error)
    assert record["attributes"]["output"] == base64.urlsafe_b64encode(b"\xff\xfe bad").decode()
    assert rebuilt(record).returncode == 1  # type: ignore[attr-defined]
    assert jsonable({"raw": b"\xff", "text": b"ok"}) == {"raw": "_w==", "text": "b2s="}
    assert jsonable({"text": b"ok"}) == {"text": "ok"}  # UTF-8 bytes stay text


def test_the_request_is_kept_once_and_every_request_rebuilds(journal: Journal) -> None:
    from capture import full_requests

    capture_app.answer("Is order 103 in stock? I want a unit.")
    session = only_session(journal)
    records = [
        item.event.request
        for item in journal.events(session)
        if isinstance(item.event, ActionProposed) and item.event.request is not None
    ]
    # lookup, stock check (fails), answer: each record keeps only the input new since the last
    assert [record["from"] for record in records] == [0, 1, 3]
    wholes = full_requests(records)
    assert [len(whole["input"]) for whole in wholes] == [1, 3, 5]
    # the question is the one user input: the model's function calls end a turn's input
    inputs = [i.event for i in journal.events(session) if isinstance(i.event, UserInput)]
    assert [event.text for event in inputs] == ["Is order 103 in stock? I want a unit."]
    assert wholes[-1]["input"][0] == {
        "role": "user",
        "content": "Is order 103 in stock? I want a unit.",
    }


class Declined(ValueError):
    def __init__(self, code: int) -> None:
        super().__init__(f"declined {code}")
        self.code = code


def test_an_exception_whose_class_is_gone_comes_back_as_a_stand_in_of_its_bases() -> None:
    record = exception_record(Declined(51))
    assert record["mro"][:2] == ["tests.test_capture_client:Declined", "builtins:ValueError"]
    again = rebuilt(record)
    assert type(again) is Declined and again.code == 51 and str(again) == "declined 51"  # type: ignore[attr-defined]
    gone = {
        **record,
        "type": "nowhere.errors:Declined",
        "mro": ["nowhere.errors:Declined", *record["mro"][1:]],
    }
    stand_in = rebuilt(gone)
    assert isinstance(stand_in, ValueError) and isinstance(stand_in, ReplayedException)
    assert type(stand_in).__name__ == "Declined" and stand_in.code == 51  # type: ignore[attr-defined]
    assert json.loads(json.dumps(record)) == record  # the record is JSON


class Unavailable(Exception):
    """A public error class."""


class _HTTPUnavailable(LookupError):
    """An error of another lineage that calls itself `Unavailable` (as pydantic-ai's HTTP
    errors do): found by its recorded lineage, not taken for the public class."""


_HTTPUnavailable.__qualname__ = "Unavailable"


def test_an_exception_named_as_another_class_comes_back_as_its_own() -> None:
    record = exception_record(_HTTPUnavailable("503"))
    assert record["type"] == "tests.test_capture_client:Unavailable"
    again = rebuilt(record)
    assert type(again) is _HTTPUnavailable and isinstance(again, LookupError)
    assert type(rebuilt(exception_record(Unavailable("down")))) is Unavailable
