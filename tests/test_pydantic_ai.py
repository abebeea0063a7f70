"""pydantic-ai: capture with JournalCapability, replay with ReplayModel; offline, the original
sessions produced by pydantic-ai's own FunctionModel and TestModel."""

from __future__ import annotations

import asyncio
import importlib
import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, Field
from pydantic_ai import Agent, ModelRetry, RunContext
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

from capture import MissingExtraError, Recorder
from capture.frameworks.pydantic_ai import JournalCapability
from journal import ActionCommitted, Journal
from replay import Replayer, ReplayOptions, integrations, replay_fixture, write_fixture
from replay.integrations.pydantic_ai import replay_agent

from .helpers import one_error_line, run_cli

CELSIUS = {"Lisbon": 21.5, "Oslo": 4.0}
RAN: list[str] = []
"""Every city the real tool was called with (a replay with recorded tools adds none)."""

REFERENCE = "tests.test_pydantic_ai:weather_agent"


def build(*, strict: bool = False) -> Agent[None, str]:
    """The agent under test; ``strict`` adds an output validator that rejects one answer."""
    agent: Agent[None, str] = Agent(
        name="weather", instructions="Report the weather; call get_weather per city.", retries=3
    )

    @agent.tool_plain
    def get_weather(city: str) -> dict[str, Any]:
        """The current temperature of a city."""
        RAN.append(city)
        if city not in CELSIUS:
            raise ModelRetry(f"unknown city {city}; known: {', '.join(CELSIUS)}")
        return {"city": city, "celsius": CELSIUS[city]}

    if strict:

        @agent.output_validator
        def cite_units(ctx: RunContext[None], output: str) -> str:
            if "°F" not in output:
                raise ModelRetry("give the temperatures in °F too")
            return output

    return agent


weather_agent = build()

echo_agent: Agent[None, str] = Agent(name="echo", system_prompt="You shout.")


@echo_agent.tool_plain
def shout(text: str) -> str:
    """The text in capitals."""
    return text.upper()


def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """A FunctionModel script: two cities (one unknown), a bad call, a fix, an answer."""
    starts = [
        i
        for i, m in enumerate(messages)
        if isinstance(m, ModelRequest) and any(isinstance(p, UserPromptPart) for p in m.parts)
    ]
    step = sum(isinstance(m, ModelResponse) for m in messages[starts[-1] :])
    if len(starts) > 1:
        return ModelResponse(parts=[TextPart("Still 4.0 °C in Oslo.")])
    script: list[list[Any]] = [
        [
            ThinkingPart("Two cities: call the tool for each."),
            ToolCallPart("get_weather", {"city": "Lisbon"}, "c1"),
            ToolCallPart("get_weather", '{"city": "Atlantis"}', "c2"),
        ],
        [ToolCallPart("get_weather", {"town": "Oslo"}, "c3")],
        [ToolCallPart("get_weather", {"city": "Oslo"}, "c4")],
        [TextPart("Lisbon: 21.5 °C; Oslo: 4.0 °C.")],
    ]
    return ModelResponse(parts=script[min(step, 3)])


def capture(
    journal: Journal, agent: Agent[None, str], session_id: str = "pa", *, turns: int = 2
) -> str:
    """The original session: runs (turns) of ``agent`` on the scripted model."""
    model = FunctionModel(scripted, model_name="scripted-4")

    async def converse(recorder: Recorder) -> None:
        cap = JournalCapability(recorder, agent=REFERENCE, metadata={"tenant": "t1"})
        first = await agent.run("Weather in Lisbon and Atlantis?", model=model, capabilities=[cap])
        if turns == 1:
            return
        await agent.run(
            "And in Oslo again?",
            model=model,
            capabilities=[cap],
            message_history=first.all_messages(),
        )

    with Recorder(journal, session_id) as recorder:
        asyncio.run(converse(recorder))
    return session_id


@pytest.fixture
def session(journal: Journal) -> str:
    RAN.clear()
    return capture(journal, weather_agent)


def test_capture_journals_each_request_response_and_tool_call(
    journal: Journal, session: str
) -> None:
    events = [item.event for item in journal.events(session)]
    assert [e.type for e in events] == [
        "session_started",
        "user_input",
        "action_proposed",
        "action_committed",
        "action_failed",
        "action_proposed",
        "verification_failed",
        "action_proposed",
        "action_committed",
        "action_proposed",
        "agent_completed",
        "user_input",
        "action_proposed",
        "agent_completed",
    ]
    started = events[0]
    assert (started.agent, started.model) == (REFERENCE, "scripted-4")
    assert started.system_prompt == "Report the weather; call get_weather per city."
    assert [t.name for t in started.config.tools] == ["get_weather"]
    assert started.config.tools[0].parameters["required"] == ["city"]
    assert started.metadata == {"tenant": "t1", "captured_with": "pydantic-ai"}
    first = events[2]
    assert first.reasoning == "Two cities: call the tool for each."
    assert [(c.call_id, c.args) for c in first.calls] == [
        ("c1", {"city": "Lisbon"}),
        ("c2", {"city": "Atlantis"}),
    ]
    assert first.usage.input_tokens > 0 and first.latency_ms is not None
    assert events[3].result == {"city": "Lisbon", "celsius": 21.5}
    assert (events[4].kind, events[4].message) == (
        "business",
        "unknown city Atlantis; known: Lisbon, Oslo",
    )
    assert (events[6].call_id, events[6].stage) == ("c3", "schema")
    assert events[10].answer == "Lisbon: 21.5 °C; Oslo: 4.0 °C."
    state = journal.state(session)
    assert (state.status, state.turns, state.model_calls, state.failures) == ("completed", 2, 5, 2)
    assert journal.verify().ok


def test_replay_is_identical_and_runs_no_tool(journal: Journal, session: str) -> None:
    ran = len(RAN)
    result = replay_agent(journal, session, weather_agent)
    assert result.identical, result.first_divergence
    assert (result.recorded_events, result.replayed_events) == (14, 14)
    assert len(RAN) == ran  # every result came from the recording


def test_tools_run_live_on_request_and_are_compared(
    journal: Journal, session: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran = len(RAN)
    same = replay_agent(journal, session, weather_agent, ReplayOptions(live_tools=["get_weather"]))
    assert same.identical, same.first_divergence
    # the two calls of the first response run concurrently: in either order
    assert sorted(RAN[ran : ran + 2]) == ["Atlantis", "Lisbon"] and RAN[ran + 2 :] == ["Oslo"]
    assert not same.live_differences
    monkeypatch.setitem(CELSIUS, "Oslo", -3.0)
    moved = replay_agent(journal, session, weather_agent, ReplayOptions(live_tools=True))
    assert [(d.tool, d.recorded, d.live) for d in moved.live_differences] == [
        ("get_weather", {"city": "Oslo", "celsius": 4.0}, {"city": "Oslo", "celsius": -3.0})
    ]
    divergence = moved.first_divergence
    assert divergence is not None and divergence.seq == 8
    assert divergence.reason == "action_committed differs in result.celsius"


def test_a_response_never_recorded_is_a_divergence_naming_the_step(journal: Journal) -> None:
    one_turn = capture(journal, weather_agent, "one-turn", turns=1)
    result = replay_agent(journal, one_turn, build(strict=True))
    divergence = result.first_divergence
    assert divergence is not None and divergence.seq == 10
    assert divergence.reason == (
        "recording exhausted at seq 10: the code asked for model output #5, the recording has 4"
    )
    assert divergence.expected is not None and divergence.expected["type"] == "agent_completed"


def test_an_exception_that_ends_a_run_is_a_halt_and_replays(journal: Journal) -> None:
    broken: Agent[None, str] = Agent(name="broken")

    @broken.tool_plain
    def lookup(key: str) -> str:
        """Look a key up."""
        raise ConnectionError("directory service down")

    with pytest.raises(ConnectionError), Recorder(journal, "broken") as recorder:
        asyncio.run(
            broken.run("find k", model=TestModel(), capabilities=[JournalCapability(recorder)])
        )
    events = [item.event for item in journal.events("broken")]
    assert [e.type for e in events][-2:] == ["action_failed", "agent_halted"]
    assert (events[-2].kind, events[-2].message) == (
        "infrastructure",
        "ConnectionError: directory service down",
    )
    assert journal.state("broken").status == "failed"
    assert events[-1].reason == "ConnectionError: directory service down"
    result = replay_agent(journal, "broken", broken)
    assert result.identical, result.first_divergence


def test_outcomes_are_journaled_in_proposal_order_not_completion_order(journal: Journal) -> None:
    finished: list[int] = []
    waiter: Agent[None, str] = Agent(name="waiter")

    @waiter.tool_plain
    async def wait(ms: int) -> int:
        """Wait ``ms`` milliseconds."""
        await asyncio.sleep(ms / 1000)
        finished.append(ms)
        return ms

    def two_waits(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) > 1:
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(
            parts=[
                ToolCallPart("wait", {"ms": 60}, "slow"),
                ToolCallPart("wait", {"ms": 0}, "fast"),
            ]
        )

    with Recorder(journal, "waits") as recorder:
        cap = JournalCapability(recorder)
        asyncio.run(waiter.run("wait", model=FunctionModel(two_waits), capabilities=[cap]))
    assert finished == [0, 60]  # the fast call finished first
    committed = [e.event for e in journal.events("waits") if e.event.type == "action_committed"]
    assert [e.call_id for e in committed] == ["slow", "fast"]  # journaled as proposed
    assert replay_agent(journal, "waits", waiter).identical


odd_agent: Agent[None, str] = Agent(name="odd", system_prompt="You count.")


@odd_agent.tool_plain
def count(text: str) -> dict[str, Any]:
    """A count past 64 bits, a ratio that is not a number, and a set of tags."""
    return {"big": 2**70, "ratio": float("nan"), "tags": {"beta", "alpha", "gamma"}}


def test_a_result_json_cannot_hold_as_it_is_is_journaled_and_replays_identical(
    journal: Journal,
) -> None:
    """NaN and an integer past 64 bits are kept (they raised into the run before), a set
    is a sorted list (its own order changes with the hash seed: live replays flickered)."""
    with Recorder(journal, "odd") as recorder:
        cap = JournalCapability(recorder, agent="tests.test_pydantic_ai:odd_agent")
        asyncio.run(odd_agent.run("count", model=TestModel(), capabilities=[cap]))
    (committed,) = [
        item.event for item in journal.events("odd") if isinstance(item.event, ActionCommitted)
    ]
    assert committed.given_result["big"] == 2**70  # type: ignore[index]
    assert math.isnan(committed.given_result["ratio"])  # type: ignore[index]
    assert committed.result["tags"] == ["alpha", "beta", "gamma"]  # type: ignore[index]
    assert replay_agent(journal, "odd", odd_agent).identical
    assert replay_agent(journal, "odd", odd_agent, ReplayOptions(live_tools=True)).identical


def test_a_test_model_session_replays_identical(journal: Journal) -> None:
    with Recorder(journal, "echo") as recorder:
        cap = JournalCapability(recorder, agent="tests.test_pydantic_ai:echo_agent")
        output = asyncio.run(echo_agent.run("hello", model=TestModel(), capabilities=[cap])).output
    events = [item.event for item in journal.events("echo")]
    assert [e.type for e in events] == [
        "session_started",
        "user_input",
        "action_proposed",
        "action_committed",
        "action_proposed",
        "agent_completed",
    ]
    assert events[0].system_prompt == "You shout." and events[-1].answer == output
    assert replay_agent(journal, "echo", echo_agent).identical


def test_captured_sessions_replay_through_the_cli_and_as_fixtures(tmp_path: Path) -> None:
    db = tmp_path / "pa.db"
    with Journal.open(db) as journal:
        capture(journal, weather_agent, "weather")
        assert Replayer().replay(journal, "weather").identical
        fixture = write_fixture(journal, "weather", tmp_path / "fixtures" / "weather.jsonl")
    replayed = run_cli("replay", "weather", "--db", db, "--save")
    assert replayed.exit_code == 0, replayed.stdout + replayed.stderr
    diffed = run_cli("diff", "weather", "weather.replay-1", "--db", db)
    assert diffed.exit_code == 0 and "identical" in diffed.stdout
    assert replay_fixture(fixture).passed
    assert (
        run_cli(
            "replay", "weather", "--db", db, "--agent", "tests.test_pydantic_ai:CELSIUS"
        ).exit_code
        == 2
    )


def test_without_pydantic_ai_the_import_fails_with_one_clear_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    db = tmp_path / "pa.db"
    with Journal.open(db) as journal:
        capture(journal, weather_agent, "weather", turns=1)
    monkeypatch.delitem(sys.modules, "replay.integrations.pydantic_ai")
    monkeypatch.delattr(integrations, "pydantic_ai")
    monkeypatch.setitem(sys.modules, "pydantic_ai", None)
    with pytest.raises(MissingExtraError) as raised:
        importlib.import_module("replay.integrations.pydantic_ai")
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith("pydantic-ai is not installed")
    assert message.endswith("pip install 'agent-journal[pydantic-ai]'")
    line = one_error_line(run_cli("replay", "weather", "--db", db))
    assert line.endswith("pip install 'agent-journal[pydantic-ai]'")


class Bank:
    """The dependencies of `bank_agent`: a client it cannot work without."""

    def __init__(self, rate: float) -> None:
        self.rate = rate


bank_agent: Agent[Bank, str] = Agent(name="bank", deps_type=Bank)


@bank_agent.system_prompt
def bank_prompt(ctx: RunContext[Bank]) -> str:
    return f"Quote in euros; today's rate is {ctx.deps.rate}."


@bank_agent.tool
def convert(ctx: RunContext[Bank], dollars: float) -> float:
    """Dollars in euros at today's rate."""
    return round(dollars * ctx.deps.rate, 2)


def bank_deps() -> Bank:
    """The deps factory a replay calls (named at capture)."""
    return Bank(rate=0.9)


def broken_bank_deps() -> Bank:
    raise ConnectionError("bank API unreachable")


def capture_bank(journal: Journal, session_id: str, deps_factory: str | None) -> None:
    with Recorder(journal, session_id) as recorder:
        cap = JournalCapability(
            recorder, agent="tests.test_pydantic_ai:bank_agent", deps_factory=deps_factory
        )
        run = bank_agent.run(
            "100 dollars?", model=TestModel(), deps=bank_deps(), capabilities=[cap]
        )
        asyncio.run(run)


def test_an_agent_with_deps_replays_from_the_cli_and_as_a_fixture_through_its_factory(
    tmp_path: Path,
) -> None:
    db = tmp_path / "bank.db"
    with Journal.open(db) as journal:
        capture_bank(journal, "bank", "tests.test_pydantic_ai:bank_deps")
        started = next(iter(journal.events("bank"))).event
        assert started.metadata["deps_factory"] == "tests.test_pydantic_ai:bank_deps"
        assert "rate is 0.9" in started.system_prompt
        fixture = write_fixture(journal, "bank", tmp_path / "fixtures" / "bank.jsonl")
    replayed = run_cli("replay", "bank", "--db", db)
    assert replayed.exit_code == 0, replayed.stdout + replayed.stderr
    assert "identical" in replayed.stdout
    assert replay_fixture(fixture).passed
    # what the factory builds is what the agent runs with: a different rate shows
    with Journal.open(db) as journal, pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys.modules[__name__], "bank_deps", lambda: Bank(rate=0.8))
        changed = Replayer().replay(journal, "bank")
    assert not changed.identical
    assert [c.path for c in changed.config_changes] == ["system_prompt", "system_prompt_hash"]


def test_a_replay_that_cannot_be_set_up_says_so_instead_of_blaming_a_field(
    tmp_path: Path,
) -> None:
    db = tmp_path / "bank.db"
    with Journal.open(db) as journal:
        capture_bank(journal, "no-factory", None)
        capture_bank(journal, "broken", "tests.test_pydantic_ai:broken_bank_deps")
        capture_bank(journal, "untrusted", "pydantic_ai.models.test:TestModel")
    line = one_error_line(run_cli("replay", "no-factory", "--db", db))
    assert "the agent raised before its first model request: AttributeError" in line
    assert "deps_factory=" in line
    line = one_error_line(run_cli("replay", "broken", "--db", db))
    assert "deps factory tests.test_pydantic_ai:broken_bank_deps: the factory raised" in line
    assert "ConnectionError: bank API unreachable" in line
    line = one_error_line(run_cli("replay", "untrusted", "--db", db))
    assert "'pydantic_ai.models.test:TestModel', which is not on the trust list" in line
    with Journal.open(db) as journal:
        assert replay_agent(journal, "no-factory", bank_agent, deps=bank_deps()).identical


strict_agent = build(strict=True)


def fahrenheit_model() -> FunctionModel:
    """A live model for forks: answers in both units."""

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart("Lisbon: 21.5 °C (70.7 °F).")])

    return FunctionModel(answer, model_name="live-f")


def test_a_changed_agent_forks_a_captured_run_and_goes_on_with_a_live_model(
    tmp_path: Path,
) -> None:
    db = tmp_path / "pa.db"
    with Journal.open(db) as journal:
        capture(journal, weather_agent, "weather")
        recorded = [item.event for item in journal.events("weather")]
    strict = ("--agent", "tests.test_pydantic_ai:strict_agent")
    live = ("--live-model", "tests.test_pydantic_ai:fahrenheit_model")
    forked = run_cli("fork", "weather", "--at", "3", "--db", db, *strict, *live, "--json")
    assert forked.exit_code == 0, forked.stdout + forked.stderr
    result = json.loads(forked.stdout)
    assert result["forked_from"] == "weather" and result["status"] == "completed"
    with Journal.open(db) as journal:
        events = [item.event for item in journal.events(result["session_id"])]
    diverged = result["recorded_until"] + 1
    assert events[0].forked_from == "weather" and events[0].fork_seq == 3
    assert [(e.type, getattr(e, "calls", None)) for e in events[1:diverged]] == [
        (e.type, getattr(e, "calls", None)) for e in recorded[1:diverged]
    ]
    answers = [e.answer for e in events if e.type == "agent_completed"]
    assert answers == ["Lisbon: 21.5 °C (70.7 °F).", "Lisbon: 21.5 °C (70.7 °F)."]
    # without a live model the fork stops where the recording no longer fits
    stopped = run_cli("fork", "weather", "--at", "3", "--db", db, *strict, "--json")
    assert stopped.exit_code == 0, stopped.stdout + stopped.stderr
    assert json.loads(stopped.stdout)["status"] == "halted"


def quoting_model() -> FunctionModel:
    """A model for the bank: converts the dollars asked for, then quotes the result."""

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        asked = next(
            part.content
            for m in messages
            if isinstance(m, ModelRequest)
            for part in m.parts
            if isinstance(part, UserPromptPart)
        )
        returns = [
            part.content
            for m in messages
            if isinstance(m, ModelRequest)
            for part in m.parts
            if getattr(part, "part_kind", "") == "tool-return"
        ]
        if not returns:
            dollars = float(str(asked).split()[0])
            return ModelResponse(parts=[ToolCallPart("convert", {"dollars": dollars}, "c1")])
        return ModelResponse(parts=[TextPart(f"That is {returns[-1]} euros.")])

    return FunctionModel(answer, model_name="quoting")


def test_twenty_bank_sessions_replay_identical_and_their_fixtures_turn_red_on_a_change(
    tmp_path: Path,
) -> None:
    """The journey of the issue on replaying users' code, for pydantic-ai with deps."""
    db = tmp_path / "bank.db"
    with Journal.open(db) as journal:
        for n in range(20):
            with Recorder(journal, f"bank-{n}") as recorder:
                cap = JournalCapability(
                    recorder,
                    agent="tests.test_pydantic_ai:bank_agent",
                    deps_factory="tests.test_pydantic_ai:bank_deps",
                )
                run = bank_agent.run(
                    f"{10 * n + 5} dollars?",
                    model=quoting_model(),
                    deps=bank_deps(),
                    capabilities=[cap],
                )
                asyncio.run(run)
        verdicts = {
            s.session_id: Replayer().replay(journal, s.session_id).verdict
            for s in journal.sessions()
        }
        fixtures = [
            write_fixture(journal, f"bank-{n}", tmp_path / "fixtures" / f"bank-{n}.jsonl")
            for n in range(3)
        ]
    assert len(verdicts) == 20 and set(verdicts.values()) == {"identical"}
    assert all(replay_fixture(path).passed for path in fixtures)
    with pytest.MonkeyPatch.context() as patch:  # the bank's rate moved
        patch.setattr(sys.modules[__name__], "bank_deps", lambda: Bank(rate=0.8))
        assert not any(replay_fixture(path).passed for path in fixtures)


def own_model_session(journal: Journal, model: FunctionModel, session_id: str) -> Agent[None, str]:
    """A session of an agent with a model of its own, captured with no agent reference."""
    agent = build()
    agent.model = model
    with Recorder(journal, session_id) as recorder:
        capability = JournalCapability(recorder)
        asyncio.run(agent.run("Weather in Lisbon and Atlantis?", capabilities=[capability]))
    return agent


def test_an_agent_whose_own_model_changed_replays_with_the_change(journal: Journal) -> None:
    """The replay's model stands in for the agent's own: its name and settings are journaled."""
    recorded = FunctionModel(scripted, model_name="scripted-4", settings={"temperature": 0.2})
    agent = own_model_session(journal, recorded, "own")
    assert replay_agent(journal, "own", agent).identical
    renamed = build()
    renamed.model = FunctionModel(scripted, model_name="scripted-5", settings={"temperature": 0.2})
    hotter = build()
    hotter.model = FunctionModel(scripted, model_name="scripted-4", settings={"temperature": 0.9})
    by_name = build()
    by_name.model = "test"
    changes = [
        [(c.path, c.expected, c.actual) for c in replay_agent(journal, "own", a).config_changes]
        for a in (renamed, hotter, by_name)
    ]
    assert changes == [
        [("model", "scripted-4", "scripted-5")],
        [("model_settings.temperature", 0.2, 0.9)],
        [("model", "scripted-4", "test"), ("model_settings.temperature", 0.2, None)],
    ]


class Booking(BaseModel):
    """A structured output."""

    city: str


class DescribedBooking(BaseModel):
    """The structured output with a field described."""

    city: str = Field(description="where to")


def books(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """A FunctionModel script: answers with its output tool."""
    return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, {"city": "Lisbon"}, "o1")])


def test_a_changed_output_type_diverges_at_the_first_request(journal: Journal) -> None:
    """The output tools' schema goes with each request: a changed one differs there."""

    def agent(output: type[BaseModel]) -> Agent[None, BaseModel]:
        return Agent(FunctionModel(books, model_name="books-1"), output_type=output)

    with Recorder(journal, "booked") as recorder:
        capability = JournalCapability(recorder)
        asyncio.run(agent(Booking).run("Book Lisbon", capabilities=[capability]))
    assert replay_agent(journal, "booked", agent(Booking)).identical
    divergence = replay_agent(journal, "booked", agent(DescribedBooking)).first_divergence
    assert divergence is not None and divergence.seq == 2
    changed = {change.path for change in divergence.changes}
    assert "request.params.output.tools[0].parameters.properties.city.description" in changed


def test_a_model_error_that_ends_a_run_replays_identical(journal: Journal) -> None:
    """The replay's model raises the recorded error again: it came out of the model call."""

    def refuses(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise ConnectionError("model API down")

    agent: Agent[None, str] = Agent(FunctionModel(refuses, model_name="down-1"))
    with pytest.raises(ConnectionError), Recorder(journal, "down") as recorder:
        asyncio.run(agent.run("hello", capabilities=[JournalCapability(recorder)]))
    assert journal.state("down").halt_reason == "ConnectionError: model API down"
    result = replay_agent(journal, "down", agent)
    assert result.identical, result.first_divergence


def test_runs_the_code_made_without_history_replay_without_it(journal: Journal) -> None:
    """Code that runs each prompt on its own (no message_history) replays identical."""
    model = FunctionModel(scripted, model_name="scripted-4")

    async def each_alone(recorder: Recorder) -> None:
        capability = JournalCapability(recorder)
        for prompt in ("Weather in Lisbon and Atlantis?", "And in Oslo again?"):
            await weather_agent.run(prompt, model=model, capabilities=[capability])

    with Recorder(journal, "alone") as recorder:
        asyncio.run(each_alone(recorder))
    result = replay_agent(journal, "alone", weather_agent)
    assert result.identical, result.first_divergence
