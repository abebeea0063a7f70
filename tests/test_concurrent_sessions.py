"""Sessions captured at once on a server's threads each keep their own pool's calls.

A request runs its model's calls on a ``ThreadPoolExecutor`` whose threads do not inherit
the session's context; with several requests open at once, a tool call from such a thread
belongs to the one session whose model proposed that very call and is waiting for it.
"""

from __future__ import annotations

import inspect
import io
import json
import logging
import math
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from http.server import ThreadingHTTPServer
from typing import Any

import openai
import pytest

from capture import Capture, placement
from capture.returns import text_as_return_type
from capture.scope import reference_of
from journal import ActionCommitted, Journal
from replay import replay_entry

from .verdict_app import VerdictModel

capture = Capture(Journal.open(":memory:"))
client: Any = None
RAN: list[str] = []
MEET: list[threading.Barrier] = []
"""While set, every tool call waits here: all the sessions are open at once."""


class PerCity(VerdictModel):
    """Asks for the weather in the question's city and next to it, then answers."""

    def do_POST(self) -> None:  # noqa: N802 - the http.server API
        raw = self.rfile.read(int(self.headers["Content-Length"]))
        city = json.loads(raw)["messages"][0]["content"]
        self.PLAN = [[("get_weather", {"city": city}), ("get_weather", {"city": f"{city} North"})]]
        self.rfile = io.BytesIO(raw)
        self.headers.replace_header("Content-Length", str(len(raw)))
        super().do_POST()


@capture.tool(side_effects=True)
def get_weather(city: str) -> dict[str, Any]:
    RAN.append(city)
    if MEET:
        MEET[0].wait(10)
    return {"city": city}


CHANGED: list[str] = []
"""The code as edited: the cities whose call now asks with a "!" added."""


def city_asked(call: Any) -> str:
    city: str = json.loads(call.function.arguments)["city"]
    return city + "!" if city in CHANGED else city


def answer(city: str, pool: ThreadPoolExecutor) -> str:
    """Ask, run the model's calls on ``pool`` (no context copied), until it answers."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": city}]
    while True:
        reply = client.chat.completions.create(model="gpt-4.1", messages=messages)
        message = reply.choices[0].message
        if not message.tool_calls:
            return str(message.content)
        messages.append(message.model_dump(exclude_none=True))
        calls = list(message.tool_calls)
        futures = [pool.submit(get_weather, city=city_asked(call)) for call in calls]
        for call, future in zip(calls, futures, strict=True):
            content = json.dumps(future.result())
            messages.append({"role": "tool", "tool_call_id": call.id, "content": content})


@capture.entry
def request(city: str) -> str:
    """One request of a server: the model's calls run on a pool of its own."""
    with ThreadPoolExecutor(2) as pool:
        return answer(city, pool)


SERVER_POOL: list[ThreadPoolExecutor] = []


@capture.entry
def request_on_server_pool(city: str) -> str:
    """One request whose calls run on the pool the server runs its requests on."""
    return answer(city, SERVER_POOL[0])


request_reference = reference_of(request)


@pytest.fixture(scope="module")
def journal() -> Iterator[Journal]:
    global client
    server = ThreadingHTTPServer(("127.0.0.1", 0), PerCity)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02})
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    client = capture.openai(openai.OpenAI(base_url=url, api_key="local", max_retries=0))
    try:
        yield Journal.open(":memory:")
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def serve_at_once(journal: Journal, cities: list[str]) -> list[str]:
    """Each city's request on a thread of its own, all open at once; their new sessions."""
    capture.journal = journal
    before = {summary.session_id for summary in journal.sessions()}
    MEET[:] = [threading.Barrier(2 * len(cities))]  # every request's two calls meet
    RAN.clear()
    try:
        with ThreadPoolExecutor(len(cities)) as server:
            assert list(server.map(request, cities)) == ["70.7°F and 39.2°F."] * len(cities)
    finally:
        MEET.clear()
    return [s.session_id for s in journal.sessions() if s.session_id not in before]


def city_of(journal: Journal, session: str) -> str:
    """The city a request was for ("" for a session no entry opened)."""
    inputs = json.loads(next(iter(journal.events(session))).event.metadata["entry_inputs"])
    return str(inputs["args"][0]) if isinstance(inputs, dict) else ""


def outcomes(journal: Journal, session: str) -> list[ActionCommitted]:
    return [e.event for e in journal.events(session) if isinstance(e.event, ActionCommitted)]


def test_each_request_journals_the_calls_its_pool_ran_and_replays_identical(
    journal: Journal, caplog: pytest.LogCaptureFixture
) -> None:
    cities = ["Lisbon", "Oslo", "Lima", "Quito", "Accra", "Hanoi"]
    with caplog.at_level(logging.WARNING, logger="capture"):
        sessions = serve_at_once(journal, cities)
    assert caplog.records == []  # no call was left unjournaled
    assert sorted(city_of(journal, session) for session in sessions) == sorted(cities)
    for session in sessions:
        city, found = city_of(journal, session), outcomes(journal, session)
        assert [o.args["city"] for o in found] == [city, f"{city} North"]  # its own, no other's
        assert all(o.duration_ms is not None for o in found)  # by the decorated tool itself
    RAN.clear()
    for session in sessions:
        for _ in range(5):
            result = replay_entry(journal, session, request)
            assert result.identical, result.first_divergence
    assert RAN == []  # a side effect never runs in a replay


@contextmanager
def a_request_waiting(city: str) -> Iterator[None]:
    """Another request in flight meanwhile: its model proposed its calls, none started yet."""
    opened, done = threading.Event(), threading.Event()

    def hold() -> None:
        with capture.session():
            messages = [{"role": "user", "content": city}]
            client.chat.completions.create(model="gpt-4.1", messages=messages)
            opened.set()
            done.wait(10)

    other = threading.Thread(target=hold)
    other.start()
    assert opened.wait(10)
    try:
        yield
    finally:
        done.set()
        other.join()


def test_a_replay_beside_open_sessions_serves_the_calls_its_model_proposed(
    journal: Journal,
) -> None:
    session, _ = serve_at_once(journal, ["Oslo", "Lima"])
    RAN.clear()
    with a_request_waiting("Lisbon"):
        result = replay_entry(journal, session, request)
    assert result.identical, result.first_divergence
    assert RAN == []


def test_a_call_waiting_in_two_sessions_is_put_in_neither(
    journal: Journal, caplog: pytest.LogCaptureFixture
) -> None:
    capture.journal = journal
    placement._UNPLACED_LOGGED[0] = -math.inf  # the warning is at most one per 10 s
    RAN.clear()
    with caplog.at_level(logging.WARNING, logger="capture"):
        with a_request_waiting("Lisbon"):  # the same calls wait in both
            assert request("Lisbon") == "70.7°F and 39.2°F."
    assert "tool get_weather was called outside the context of its session" in caplog.text
    assert sorted(RAN) == ["Lisbon", "Lisbon North"]  # in production: run as is
    theirs, ours = sorted(
        (s.session_id for s in journal.sessions()[:2]),
        key=lambda s: next(iter(journal.events(s))).event.agent == request_reference,
    )
    found = outcomes(journal, ours)  # the results reached it only by the tool messages
    assert [(o.args["city"], o.duration_ms) for o in found] == [
        ("Lisbon", None),
        ("Lisbon North", None),
    ]
    assert outcomes(journal, theirs) == []  # nor the other's
    RAN.clear()  # replayed alone, the call is placed: it gets the value its message encodes
    result = replay_entry(journal, ours, request)
    assert result.identical, result.first_divergence
    assert RAN == []


@pytest.mark.parametrize(
    ("text", "returns", "value"),
    [
        ('{"city": "Lisbon"}', dict[str, Any], {"city": "Lisbon"}),  # json.dumps of a dict
        ('{"city": "Lisbon"}', str, '{"city": "Lisbon"}'),  # a tool of text: the text
        ('{"city": "Lisbon"}', inspect.Signature.empty, '{"city": "Lisbon"}'),  # no type
        ("sunny", dict[str, Any], "sunny"),  # not JSON: the text, as recorded
        ("[1, 2]", dict[str, Any], "[1, 2]"),  # JSON of another type: the text
    ],
)
def test_a_result_recorded_as_the_text_sent_is_decoded_as_the_declared_type(
    text: str, returns: Any, value: Any
) -> None:
    assert text_as_return_type(text, returns) == value


def test_a_pool_thread_that_ran_a_request_before_runs_a_call_for_its_session(
    journal: Journal, caplog: pytest.LogCaptureFixture
) -> None:
    capture.journal = journal
    with ThreadPoolExecutor(1) as pool:  # one pool runs the server's requests and calls
        assert pool.submit(request, "Oslo").result() == "70.7°F and 39.2°F."
        SERVER_POOL[:] = [pool]  # its thread opened a session of its own before
        try:
            with caplog.at_level(logging.WARNING, logger="capture"):
                assert request_on_server_pool("Nuuk") == "70.7°F and 39.2°F."
        finally:
            SERVER_POOL.clear()
    assert caplog.records == []
    (nuuk,) = (s.session_id for s in journal.sessions() if city_of(journal, s.session_id) == "Nuuk")
    found = outcomes(journal, nuuk)
    assert [(o.args["city"], o.duration_ms is not None) for o in found] == [
        ("Nuuk", True),
        ("Nuuk North", True),
    ]


def test_a_changed_call_on_a_pool_diverges_at_it_naming_it(journal: Journal) -> None:
    """Its sibling's outcome, queued behind it, does not take its place in the verdict."""
    (session,) = serve_at_once(journal, ["Hobart"])
    CHANGED[:] = ["Hobart"]
    try:
        result = replay_entry(journal, session, request)
    finally:
        CHANGED.clear()
    divergence = result.first_divergence
    assert divergence is not None
    assert (divergence.seq, (divergence.actual or {}).get("type")) == (3, "agent_halted")
    assert 'get_weather({"city":"Hobart!"})' in divergence.reason
