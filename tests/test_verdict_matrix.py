"""The replay verdict under single changes to captured code: a mutation matrix.

One session of `tests.verdict_app` (a plain loop over the openai client, four tools, a
model served from a thread) is recorded; each case edits the code in one way
(`verdict_app.CHANGE`) and replays it with the server still up but never asked. No change,
or one that leaves behaviour alone, must be *identical*; every other change must diverge
at the seq where it happens, naming what changed.

The recording (seq: event): 0 started, 1 user input, 2 proposed get_weather x2, 3-4 their
results, 5 proposed to_fahrenheit + station_info, 6-7 results, 8 proposed stats, 9 its
result, 10 the final text, 11 completed.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from random import Random
from typing import Any

import pytest
from pydantic import BaseModel

from agentloop import Agent, AgentRuntime, ModelResponse, Tool
from agentloop.examples.scripted import ScriptedLLM, Turn, call, reply
from journal import ActionCommitted, AgentCompleted, Journal
from journal.formats import Redactor
from replay import Replayer, ReplayOptions, replay_entry

from . import verdict_app

openai = pytest.importorskip("openai")


@pytest.fixture(scope="module")
def recorded() -> Iterator[tuple[Journal, str]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), verdict_app.VerdictModel)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02})
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    with Journal.open(":memory:") as journal:
        verdict_app.bind(journal, openai.OpenAI(base_url=url, api_key="local", max_retries=0))
        try:
            assert verdict_app.answer(verdict_app.QUESTION) == "70.7°F and 39.2°F."
        finally:
            server.shutdown()
            server.server_close()
            thread.join()
        (summary,) = journal.sessions()
        yield journal, summary.session_id


@pytest.fixture
def change() -> Iterator[None]:
    yield
    verdict_app.CHANGE = ""


SAME = [
    ("", False),
    ("", True),
    ("tool result refactored", True),
    ("default left out", True),
    ("tuple as list", True),
    ("a set built the other way", True),
    ("max_tokens: NOT_GIVEN", False),
    ("max_tokens: omit", False),
    ("a tool raises", False),  # served from the recording: its code does not run
]

DIVERGES = [
    ("system prompt", False, 2, 'messages[0].content: "You report the weather." ->'),
    ("tool description", False, 2, "tools[0].function.description"),
    ("tool schema", False, 2, "tools[0].function.parameters.properties.city.minLength"),
    ("model", False, 2, 'model: "gpt-4.1" -> "gpt-4.1-mini"'),
    ("temperature", False, 2, "temperature: 0.0 -> 0.2"),
    ("max_tokens", False, 2, "max_tokens: (absent) -> 100"),
    ("seed past 64 bits", False, 2, 'seed: (absent) -> "1180591620717411303424"'),
    ("tool result", True, 4, "result.celsius"),
    ("float noise", True, 3, "result.celsius"),
    ("NFD", True, 7, "result.name"),
    ("None left out", True, 9, "result.none"),
    ("a set member changed", True, 9, "result.ids[1]"),
    ("a zero's sign", True, 9, "result.delta"),
    ("int as float", True, 9, "result.count"),
    ("int as bool", True, 9, "result.count"),
    ("drop a call", False, 4, "asked for model output at seq 4"),
    ("add a call", False, 10, 'get_weather({"city":"Lisbon"}), which the recording ran only 1'),
    ("a call twice", False, 7, 'to_fahrenheit({"celsius":21.5}), which the recording ran only'),
    ("arguments", False, 6, 'to_fahrenheit({"celsius":21.0}), which the recording never ran'),
    # outcomes are journaled in the order the model proposed the calls (docs/capture.md),
    # each with the calls that had finished before it started: a swap shows at the first
    # call that ran late, whether or not the results reach the model in another order
    ("swap two calls", False, 3, "ran_after"),
    ("swap two calls, results as proposed", False, 3, "get_weather (call_0_0) started after"),
    ("history: drop a message", False, 8, "messages[1].content"),
    ("history: reorder", False, 8, "messages[2].content"),
    ("history: one char", False, 8, 'messages[1].content: "Weather in Lisbon and Oslo, in °F?" ->'),
    ("raise at step 1", False, 6, "RuntimeError: boom at step 1"),
    ("the answer", False, 11, "answer"),
    ("a tool raises", True, 4, "expected action_committed, got action_failed"),
]


@pytest.mark.parametrize(("name", "live"), SAME)
def test_a_change_that_keeps_behaviour_replays_identical(
    recorded: tuple[Journal, str], change: None, name: str, live: bool
) -> None:
    journal, session = recorded
    verdict_app.CHANGE = name
    result = replay_entry(journal, session, verdict_app.answer, ReplayOptions(live_tools=live))
    assert result.identical, result.first_divergence


@pytest.mark.parametrize(("name", "live", "seq", "named"), DIVERGES)
def test_a_change_diverges_where_it_happens_and_names_it(
    recorded: tuple[Journal, str], change: None, name: str, live: bool, seq: int, named: str
) -> None:
    journal, session = recorded
    verdict_app.CHANGE = name
    result = replay_entry(journal, session, verdict_app.answer, ReplayOptions(live_tools=live))
    assert result.verdict == "diverged"
    divergence = result.behaviour_divergence
    assert divergence is not None
    assert divergence.seq == seq, divergence.reason
    assert named in divergence.reason + "".join(c.path for c in divergence.changes)
    first = result.first_divergence  # a configuration recorded at seq 0 differs there
    assert first is not None
    if result.config_changes:
        assert first.seq == 0 and first.changes == result.config_changes
    else:
        assert first == divergence


CONFIGURED = {
    "system prompt": ["system_prompt", "system_prompt_hash"],
    "model": ["model"],
    "temperature": ["model_settings.temperature"],
}


@pytest.mark.parametrize(("name", "paths"), CONFIGURED.items())
def test_a_configuration_change_of_captured_code_diverges_at_its_session_started(
    recorded: tuple[Journal, str], change: None, name: str, paths: list[str]
) -> None:
    journal, session = recorded
    verdict_app.CHANGE = name
    result = replay_entry(journal, session, verdict_app.answer)
    first = result.first_divergence
    assert first is not None and first.seq == 0
    assert [change.path for change in first.changes] == paths
    assert first.expected is not None and first.expected["type"] == "session_started"


def test_a_change_a_reader_cannot_see_is_shown_escaped(
    recorded: tuple[Journal, str], change: None
) -> None:
    journal, session = recorded
    verdict_app.CHANGE = "NFD"  # the same letters, decomposed
    result = replay_entry(journal, session, verdict_app.answer, ReplayOptions(live_tools=True))
    assert result.first_divergence is not None
    (changed,) = result.first_divergence.changes
    assert changed.shown(60) == ('"Lisbo\\u00e3 Portela"', '"Lisboa\\u0303 Portela"')


@pytest.mark.parametrize("redacted", [False, True])
def test_a_tool_result_canonical_json_cannot_hold_is_journaled_and_given_back(
    change: None, redacted: bool
) -> None:
    destination = verdict_app.capture.destination
    destination.redactor = Redactor() if redacted else None
    with Journal.open(":memory:") as journal:
        verdict_app.bind(journal, None)
        try:
            # NaN and integers past 64 bits: the user's call goes on, as capture promises
            said = verdict_app.measured("Oslo")
        finally:
            destination.redactor = None
        assert said == f"nan {2**70} {-(2**64)}"
        (summary,) = journal.sessions()
        committed = list(journal.events(summary.session_id))[1].event
        assert isinstance(committed, ActionCommitted)
        assert committed.args == {"city": "Oslo", "ref": str(2**65)}
        assert committed.result == {
            "big": str(2**70),
            "city": "Oslo",
            "ratio": "NaN",
            "small": str(-(2**64)),
        }
        assert math.isnan(committed.given_result["ratio"])
        assert committed.given_result["big"] == 2**70

        for live in (False, True):  # the code gets the value back exactly, or makes it again
            result = replay_entry(
                journal, summary.session_id, verdict_app.measured, ReplayOptions(live_tools=live)
            )
            assert result.identical, result.first_divergence

        verdict_app.CHANGE = "NaN to Infinity"
        result = replay_entry(
            journal, summary.session_id, verdict_app.measured, ReplayOptions(live_tools=True)
        )
        assert result.first_divergence is not None
        assert result.first_divergence.seq == 1
        assert [(c.path, c.expected, c.actual) for c in result.first_divergence.changes] == [
            ("result.ratio", "NaN", "Infinity")
        ]


_ADDED = [8, 16]
"""The order the runtime agent's tool adds its set's members in (8 and 16 share a slot)."""


def test_an_answer_canonical_json_cannot_hold_is_journaled(change: None) -> None:
    with Journal.open(":memory:") as journal:
        verdict_app.bind(journal, None)
        assert math.isnan(verdict_app.measured_whole("Oslo")["ratio"])  # the call went on
        (summary,) = journal.sessions()
        completed = list(journal.events(summary.session_id))[-1].event
        assert isinstance(completed, AgentCompleted)
        assert '"ratio":"NaN"' in completed.answer
        assert replay_entry(journal, summary.session_id, verdict_app.measured_whole).identical


def _runtime_agent() -> Agent:
    def policy(turn: Turn, rng: Random) -> ModelResponse:
        del rng
        if not turn.results:
            return reply(None, call(turn, "ids", {"city": "Oslo"}))
        return reply("done")

    def ids(args: City) -> dict[str, Any]:
        return {"city": args.city, "ids": set(_ADDED)}

    return Agent(
        name="ids",
        system_prompt="List ids.",
        tools=[Tool("ids", ids, "Ids of a city.", City)],
        llm=ScriptedLLM(policy),
    )


class City(BaseModel):
    city: str


def test_a_set_in_a_runtime_tools_result_replays_identical_whatever_its_order(
    tmp_path: Path,
) -> None:
    with Journal.open(tmp_path / "runtime.db") as journal:
        session = AgentRuntime(_runtime_agent(), journal).run("ids of Oslo?").session_id
        _ADDED.reverse()  # the same set, iterated 16, 8
        try:
            result = Replayer(ReplayOptions(agent=_runtime_agent(), live_tools=True)).replay(
                journal, session
            )
        finally:
            _ADDED.reverse()
        assert result.identical, result.first_divergence
        assert result.live_differences == ()

        _ADDED.append(24)  # another member: the live difference is JSON, as journaled
        try:
            result = Replayer(ReplayOptions(agent=_runtime_agent(), live_tools=True)).replay(
                journal, session
            )
        finally:
            _ADDED.remove(24)
        assert result.first_divergence is not None and result.first_divergence.seq == 3
        (live,) = result.live_differences
        assert live.live == {"city": "Oslo", "ids": [8, 16, 24]}
