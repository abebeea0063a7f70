"""The order captured code runs its tool calls in is journaled, and a replay is judged on it.

Outcomes are journaled in the order the model proposed the calls; each keeps ``ran_after``,
the calls of its step that had finished before it started. A replay that runs two calls
the other way round, one after the other, diverges at the call that ran late, even where
the results reach the model in the same order; concurrent calls, whose timing is the
machine's, constrain nothing.
"""

from __future__ import annotations

import asyncio
import json
import math
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from http.server import ThreadingHTTPServer
from typing import Any

import openai
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentloop import ModelResponse
from capture import Capture, RecordedOrder, Recorder, placement
from journal import (
    ActionCommitted,
    ActionProposed,
    Journal,
    RecordedEvent,
    RecordingOrderError,
    ToolCall,
)
from replay import diff_records, replay_entry, replay_loop
from replay.normalize import record_of

from .verdict_app import VerdictModel

capture = Capture(Journal.open(":memory:"))
client: Any = None
MODE = "in order"
"""How the entry runs the calls of a response: in order, reversed, gather."""
PAUSE = {"Lisbon": 0.0, "Oslo": 0.0}


class TwoCalls(VerdictModel):
    """A model that asks for two weather reports at once, then answers."""

    PLAN = [[("get_weather", {"city": "Lisbon"}), ("get_weather", {"city": "Oslo"})]]


@capture.tool(side_effects=True)
async def get_weather(city: str) -> dict[str, Any]:
    await asyncio.sleep(PAUSE[city])
    return {"city": city}


@capture.entry
async def answer(question: str) -> str:
    messages: list[dict[str, Any]] = [{"role": "user", "content": question}]
    while True:
        reply = await client.chat.completions.create(model="gpt-4.1", messages=messages)
        message = reply.choices[0].message
        if not message.tool_calls:
            return str(message.content)
        messages.append(message.model_dump(exclude_none=True))
        calls = list(message.tool_calls)

        async def run(call: Any) -> Any:
            return await get_weather(**json.loads(call.function.arguments))

        if MODE == "gather":
            results = await asyncio.gather(*(run(call) for call in calls))
        elif MODE == "reversed":  # the results still go back in the model's order
            results = [await run(call) for call in reversed(calls)][::-1]
        else:
            results = [await run(call) for call in calls]
        for call, result in zip(calls, results, strict=True):
            content = json.dumps(result)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": content})


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), TwoCalls)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02})
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.fixture(autouse=True)
def as_written() -> Iterator[None]:
    yield
    global MODE
    MODE = "in order"
    PAUSE.update(Lisbon=0.0, Oslo=0.0)


def record(url: str, mode: str, **pause: float) -> tuple[Journal, str]:
    """Capture one session with the calls run as ``mode`` says."""
    global MODE, client
    MODE = mode
    PAUSE.update(pause)
    journal = Journal.open(":memory:")
    capture.journal = journal
    client = capture.openai(openai.AsyncOpenAI(base_url=url, api_key="local", max_retries=0))
    asyncio.run(answer("Weather in Lisbon and Oslo?"))
    (summary,) = journal.sessions()
    return journal, summary.session_id


def ran_after(journal: Journal, session: str) -> dict[str, list[int] | None]:
    return {
        item.event.args["city"]: item.event.ran_after
        for item in journal.events(session)
        if isinstance(item.event, ActionCommitted)
    }


def replayed(journal: Journal, session: str, mode: str) -> Any:
    global MODE
    MODE = mode
    PAUSE.update(Lisbon=0.0, Oslo=0.0)
    return replay_entry(journal, session, answer)


def test_each_outcome_keeps_the_calls_that_finished_before_it_started(url: str) -> None:
    journal, session = record(url, "in order")
    assert ran_after(journal, session) == {"Lisbon": None, "Oslo": [0]}
    journal, session = record(url, "reversed")
    assert ran_after(journal, session) == {"Lisbon": [1], "Oslo": None}
    journal, session = record(url, "gather", Lisbon=0.05, Oslo=0.01)
    assert ran_after(journal, session) == {"Lisbon": None, "Oslo": None}


def test_calls_run_the_other_way_round_diverge_at_the_call_that_ran_late(url: str) -> None:
    journal, session = record(url, "in order")
    result = replayed(journal, session, "reversed")
    assert result.verdict == "diverged"
    assert result.first_divergence is not None
    assert result.first_divergence.seq == 3  # Lisbon's outcome: it ran after Oslo now
    assert result.first_divergence.reason.startswith(
        "the calls ran in another order: get_weather (call_0_0) started after call 1 "
        "(get_weather) of its model output had finished (counted from 0, as ran_after counts "
        "them); in the recording it ran before that call"
    )
    journal, session = record(url, "reversed")
    result = replayed(journal, session, "in order")
    assert result.first_divergence is not None
    assert result.first_divergence.seq == 4  # Oslo's: it ran after Lisbon now


@pytest.mark.parametrize("mode", ["in order", "gather"])
def test_an_order_the_recording_allows_replays_identical(url: str, mode: str) -> None:
    journal, session = record(url, "in order")
    result = replayed(journal, session, mode)  # gather: instant stand-ins run one by one
    assert result.identical, result.first_divergence


@pytest.mark.parametrize("mode", ["in order", "reversed", "gather"])
def test_calls_that_overlapped_in_the_recording_replay_identical_in_any_order(
    url: str, mode: str
) -> None:
    journal, session = record(url, "gather", Lisbon=0.05, Oslo=0.01)
    result = replayed(journal, session, mode)
    assert result.identical, result.first_divergence


# -- a hand-written loop that says the order it ran its calls in ---------------------


def loop(llm: Any, tools: Any, recorder: Recorder, inputs: list[str]) -> None:
    """Runs each response's calls as ``MODE`` says, telling the recorder the order."""
    recorder.start(agent="tests.test_call_order:loop")
    for text in inputs:
        recorder.user_input(text)
        reply = recorder.model_output(llm([]))
        while reply.calls:
            order = range(len(reply.calls))
            finished: list[int] = []
            outcomes: dict[int, tuple[Any, list[int]]] = {}
            for position in reversed(order) if MODE == "reversed" else order:
                call = reply.calls[position]
                outcomes[position] = (tools(call.tool, call.args), list(finished))
                finished.append(position)
            for position in order:  # journaled in the model's order, as the results go back
                result, after = outcomes[position]
                recorder.tool_result(reply.calls[position].call_id, result, ran_after=after)
            reply = recorder.model_output(llm([]))
        recorder.final(reply.text or "")


def test_a_hand_written_loop_is_judged_on_the_order_it_says() -> None:
    outputs = iter(
        [
            ModelResponse(
                calls=[
                    ToolCall(call_id="a", tool="send", args={"to": "ana"}),
                    ToolCall(call_id="b", tool="charge", args={"amount": 5}),
                ]
            ),
            ModelResponse(text="done"),
        ]
    )
    journal = Journal.open(":memory:")
    with Recorder(journal, "loop") as recorder:
        loop(lambda _: next(outputs), lambda name, args: {"ok": name}, recorder, ["go"])
    written = [i.event.ran_after for i in journal.events("loop") if i.type == "action_committed"]
    assert written == [None, [0]]
    assert replay_loop(journal, "loop", loop).identical
    global MODE
    MODE = "reversed"
    result = replay_loop(journal, "loop", loop)
    assert result.first_divergence is not None
    assert result.first_divergence.seq == 3  # send: it ran after charge now
    assert "send (a) started after call 1 (charge)" in result.first_divergence.reason


# -- RecordedOrder against interval orders ---------------------------------------------


def _ran_after(spans: list[tuple[int, int]]) -> list[tuple[int, ...]]:
    """For each call (start, end), the calls that ended before it started."""
    return [
        tuple(other for other, (_, end) in enumerate(spans) if end < start) for start, _ in spans
    ]


def _recording(ran: list[tuple[int, ...]]) -> list[RecordedEvent]:
    calls = [ToolCall(call_id=f"c{i}", tool="t") for i in range(len(ran))]
    events: list[Any] = [ActionProposed(calls=calls)]
    events += [
        ActionCommitted(call_id=f"c{i}", tool="t", ran_after=list(after) or None)
        for i, after in enumerate(ran)
    ]
    return [RecordedEvent("s", seq, "", 1, "", event) for seq, event in enumerate(events)]


def _spans(n: int) -> st.SearchStrategy[list[tuple[int, int]]]:
    """``n`` intervals with distinct end points, as runs of calls on one clock."""
    return st.permutations(range(2 * n)).map(
        lambda ticks: [tuple(sorted(ticks[2 * i : 2 * i + 2])) for i in range(n)]
    )


@given(st.integers(1, 5).flatmap(lambda n: st.tuples(_spans(n), _spans(n))))
def test_a_replay_writes_the_recorded_order_exactly_when_no_two_calls_swapped(
    runs: tuple[list[tuple[int, int]], list[tuple[int, int]]],
) -> None:
    recorded_spans, replayed_spans = runs
    recorded, seen = _ran_after(recorded_spans), _ran_after(replayed_spans)
    order = RecordedOrder(_recording(recorded))
    for call, observed in enumerate(seen):
        swapped = any(call in recorded[other] for other in observed)
        written = order.ran_after(call + 1, f"c{call}", observed or None)
        assert written == (observed or None if swapped else recorded[call] or None)
    same = RecordedOrder(_recording(recorded))  # the recording's own order: written as is
    assert [same.ran_after(i + 1, f"c{i}", r or None) for i, r in enumerate(recorded)] == [
        r or None for r in recorded
    ]


# -- calls from threads that did not inherit the session's context -----------------------

RAN: list[str] = []


@capture.tool(side_effects=True, name="get_weather")
def charge(city: str) -> dict[str, Any]:
    RAN.append(f"charge {city}")
    return {"charged": city}


@capture.entry
def pooled(question: str) -> str:
    """Runs a response's calls on a thread pool, without copying the context."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": question}]
    while True:
        reply = sync_client.chat.completions.create(model="gpt-4.1", messages=messages)
        message = reply.choices[0].message
        if not message.tool_calls:
            return str(message.content)
        messages.append(message.model_dump(exclude_none=True))
        calls = list(message.tool_calls)
        with ThreadPoolExecutor(2) as pool:
            results = list(pool.map(lambda c: charge(**json.loads(c.function.arguments)), calls))
        for call, result in zip(calls, results, strict=True):
            content = json.dumps(result)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": content})


sync_client: Any = None


def test_tools_run_on_a_thread_pool_are_journaled_and_served_by_a_replay(url: str) -> None:
    global sync_client
    journal = Journal.open(":memory:")
    capture.journal = journal
    sync_client = capture.openai(openai.OpenAI(base_url=url, api_key="local", max_retries=0))
    assert pooled("charge twice") == "70.7°F and 39.2°F."
    (summary,) = journal.sessions()
    outcomes = [e.event for e in journal.events(summary.session_id) if e.type == "action_committed"]
    assert [o.result for o in outcomes] == [{"charged": "Lisbon"}, {"charged": "Oslo"}]
    assert all(o.duration_ms is not None for o in outcomes)  # the decorated tool's own record
    RAN.clear()
    for _ in range(20):  # whichever worker runs which call, whichever runs first
        result = replay_entry(journal, summary.session_id, pooled)
        assert result.identical, result.first_divergence
    assert RAN == []  # served from the recording: a side effect never runs in a replay


@contextmanager
def another_session_open(proposed: bool = False) -> Iterator[None]:
    """A session open on another thread meanwhile, as a server's concurrent requests are.

    ``proposed``: its model has asked for the same calls, which wait there too.
    """
    opened, done = threading.Event(), threading.Event()

    def hold() -> None:
        with capture.session():
            if proposed:
                messages = [{"role": "user", "content": "charge twice"}]
                sync_client.chat.completions.create(model="gpt-4.1", messages=messages)
            opened.set()
            done.wait(10)

    thread = threading.Thread(target=hold)
    thread.start()
    opened.wait(10)
    try:
        yield
    finally:
        done.set()
        thread.join()


def test_a_call_no_session_can_be_found_for_is_refused_by_a_replay_and_logged_in_production(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    global sync_client
    journal = Journal.open(":memory:")
    capture.journal = journal
    sync_client = capture.openai(openai.OpenAI(base_url=url, api_key="local", max_retries=0))
    pooled("charge twice")
    (summary,) = journal.sessions()
    RAN.clear()
    placement._UNPLACED_LOGGED[0] = -math.inf  # the warning is at most one per 10 s
    with another_session_open(proposed=True), caplog.at_level("WARNING", logger="capture"):
        assert pooled("charge twice") == "70.7°F and 39.2°F."
        assert sorted(RAN) == ["charge Lisbon", "charge Oslo"]  # in production: run as is
        assert "tool get_weather was called outside the context of its session" in caplog.text
        assert len(caplog.records) == 1  # at most one warning per 10 s
        RAN.clear()
        result = replay_entry(journal, summary.session_id, pooled)
    assert RAN == []
    assert result.verdict == "diverged" and result.first_divergence is not None
    assert "a replay does not run it" in result.first_divergence.reason


def test_a_thread_that_opened_a_session_calls_outside_one_when_it_has_none(url: str) -> None:
    """A thread's own call after its session ended never lands in another thread's session."""
    with Journal.open(":memory:") as journal:
        capture.journal = journal
        with capture.session():  # this thread opens a session of its own...
            pass
        RAN.clear()
        with another_session_open():  # ...so while another one is open elsewhere
            assert charge("Lima") == {"charged": "Lima"}  # its call is its own, unjournaled
        assert RAN == ["charge Lima"]
        written = [e.type for s in journal.sessions() for e in journal.events(s.session_id)]
        assert len(journal.sessions()) == 2 and "action_committed" not in written


def test_diff_of_two_runs_shows_only_calls_run_the_other_way_round() -> None:
    def run(*ran: tuple[int, ...]) -> list[dict[str, Any]]:
        return [record_of(item) for item in _recording(list(ran))]

    in_order = run((), (0,))  # B after A on one thread
    split = run((), ())  # the same code, each call on a worker of its own this time
    swapped = run((1,), ())  # A after B on one thread: the code changed
    assert diff_records(in_order, split).identical
    assert diff_records(split, in_order).identical
    result = diff_records(in_order, swapped)
    assert [row.kind for row in result.rows] == ["equal", "changed", "equal"]  # A ran late
    assert [c.path for row in result.rows for c in row.changes] == ["ran_after"]


def test_off_the_record_an_outcome_keeps_what_it_saw() -> None:
    """A replay gone off the record (re-recording with a live model) writes its own order."""
    order = RecordedOrder(_recording([(), (0,)]))
    assert order.ran_after(2, "c1", None) == (0,)  # the recording's call there: its order
    assert order.ran_after(2, "another", None) is None  # another call at that seq: its own
    assert order.ran_after(9, "c1", (0,)) == (0,)  # past the recording


@pytest.mark.parametrize("ran_after", [[2], [-1], ["0"], [0.0]])
def test_a_hand_written_loop_gets_one_line_for_a_position_no_call_has(ran_after: Any) -> None:
    journal = Journal.open(":memory:")
    with Recorder(journal, "loop") as recorder:
        recorder.start(agent="app:run")
        recorder.user_input("go")
        recorder.model_output(
            ModelResponse(calls=[ToolCall(call_id=c, tool="t") for c in ("a", "b")])
        )
        with pytest.raises(RecordingOrderError) as raised:
            recorder.tool_result("b", "ok", ran_after=ran_after)
        assert str(raised.value) == (
            "session loop: cannot record the outcome of b: ran_after holds "
            f"{ran_after[0]!r}, which is no position of the model output's 2 calls"
        )
        recorder.tool_result("b", "ok", ran_after=[0])  # nothing was written before
        assert [e.type for e in journal.events("loop")][-1] == "action_committed"
