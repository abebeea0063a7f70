"""OpenAI Agents SDK: capture with JournalRunHooks, replay with ReplayModel; offline, the
original sessions produced by a fake Model (the SDK's Model interface)."""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from agents import (
    Agent,
    FunctionTool,
    FunctionToolResult,
    GuardrailFunctionOutput,
    ModelResponse,
    ModelSettings,
    Runner,
    RunResult,
    Usage,
    function_tool,
    input_guardrail,
    set_tracing_disabled,
)
from agents import (
    ToolsToFinalOutputResult as ToolsToFinal,
)
from agents.exceptions import InputGuardrailTripwireTriggered, UserError
from agents.models.interface import Model, ModelTracing
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
)
from openai.types.responses.response_reasoning_item import Summary
from openai.types.responses.response_usage import InputTokensDetails
from pydantic import BaseModel, Field

from capture import MissingExtraError, Recorder, rebuilt
from capture.frameworks.openai_agents import JournalRunHooks
from journal import Journal
from replay import (
    Replayer,
    ReplayOptions,
    ReplayResult,
    integrations,
    replay_fixture,
    write_fixture,
)
from replay.integrations.openai_agents import replay_agent

from .helpers import run_cli

set_tracing_disabled(True)

CELSIUS = {"Lisbon": 21.5, "Oslo": 4.0}
RAN: list[str] = []
REFERENCE = "tests.test_openai_agents:weather_agent"


class ScriptedModel(Model):
    """A fake model: asks for the weather of each city the user names, then answers."""

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[Any],
        model_settings: Any,
        tools: list[Any],
        output_schema: Any,
        handoffs: list[Any],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None = None,
        conversation_id: str | None = None,
        prompt: Any = None,
    ) -> ModelResponse:
        items = [{"role": "user", "content": input}] if isinstance(input, str) else input
        last = items[-1]
        usage = Usage(
            requests=1,
            input_tokens=40 * len(items),
            output_tokens=12,
            input_tokens_details=InputTokensDetails(cached_tokens=8, cache_write_tokens=0),
        )
        if last.get("role") == "user":
            cities = [w.strip("?,.") for w in str(last["content"]).split() if w[:1].isupper()][1:]
            calls = [
                ResponseFunctionToolCall(
                    arguments=json.dumps({"city": city}),
                    call_id=f"call-{len(items)}-{i}",
                    name="get_weather",
                    type="function_call",
                )
                for i, city in enumerate(cities)
            ]
            thought = ResponseReasoningItem(
                id="rs-1",
                summary=[Summary(text="look them up", type="summary_text")],
                type="reasoning",
            )
            return ModelResponse(output=[thought, *calls], usage=usage, response_id=None)
        outputs = [i["output"] for i in items if i.get("type") == "function_call_output"]
        text = ResponseOutputText(text=" | ".join(outputs), type="output_text", annotations=[])
        message = ResponseOutputMessage(
            id="msg-1", content=[text], role="assistant", status="completed", type="message"
        )
        return ModelResponse(output=[message], usage=usage, response_id=None)

    async def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError
        yield  # pragma: no cover


@function_tool
def get_weather(city: str) -> dict[str, Any]:
    """The current temperature of a city."""
    RAN.append(city)
    if city not in CELSIUS:
        raise LookupError(f"unknown city {city}")
    return {"city": city, "celsius": CELSIUS[city]}


weather_agent: Agent[Any] = Agent(
    name="weather",
    instructions="Report the weather; call get_weather per city.",
    tools=[get_weather],
    model=ScriptedModel(),
)


def capture(journal: Journal, agent: Agent[Any], inputs: list[str], session_id: str = "sdk") -> str:
    """The original session: one ``Runner.run`` per input, the previous items as history."""

    async def converse(hooks: JournalRunHooks) -> None:
        history: list[Any] = []
        for text in inputs:
            result: RunResult = await Runner.run(
                agent, [*history, {"role": "user", "content": text}], hooks=hooks
            )
            history = result.to_input_list()

    with Recorder(journal, session_id) as recorder:
        asyncio.run(converse(JournalRunHooks(recorder, agent=REFERENCE, metadata={"team": "ops"})))
    return session_id


@pytest.fixture
def session(journal: Journal) -> str:
    RAN.clear()
    return capture(journal, weather_agent, ["Weather in Lisbon and Atlantis?", "And Oslo?"])


def test_capture_journals_each_model_response_and_tool_output(
    journal: Journal, session: str
) -> None:
    events = [item.event for item in journal.events(session)]
    assert [e.type for e in events] == [
        "session_started",
        "user_input",
        "action_proposed",
        "action_committed",
        "action_committed",
        "action_proposed",
        "agent_completed",
        "user_input",
        "action_proposed",
        "action_committed",
        "action_proposed",
        "agent_completed",
    ]
    started = events[0]
    assert (started.agent, started.model, started.system_prompt) == (
        REFERENCE,
        "ScriptedModel",
        "Report the weather; call get_weather per city.",
    )
    assert [t.name for t in started.config.tools] == ["get_weather"]
    assert started.metadata == {"team": "ops", "captured_with": "openai-agents"}
    proposal = events[2]
    assert proposal.reasoning == "look them up"
    assert [(c.call_id, c.tool, c.args) for c in proposal.calls] == [
        ("call-1-0", "get_weather", {"city": "Lisbon"}),
        ("call-1-1", "get_weather", {"city": "Atlantis"}),
    ]
    assert proposal.usage.model_dump() == {
        "input_tokens": 40,
        "output_tokens": 12,
        "cached_tokens": 8,
    }
    assert events[3].result == {"city": "Lisbon", "celsius": 21.5}
    assert "error" in str(events[4].result).lower()  # the SDK hands the model an error text
    assert events[7].text == "And Oslo?"
    state = journal.state(session)
    assert (state.status, state.turns, state.model_calls, state.committed) == ("completed", 2, 4, 3)
    assert journal.verify().ok


def test_replay_is_identical_and_runs_no_tool(journal: Journal, session: str) -> None:
    ran = len(RAN)
    result = replay_agent(journal, session, weather_agent)
    assert result.identical, result.first_divergence
    assert (result.recorded_events, result.replayed_events) == (12, 12)
    assert len(RAN) == ran


def test_a_replay_called_from_async_code_runs_to_its_verdict(
    journal: Journal, session: str
) -> None:
    """As the capture docs show it: `replay_agent` inside the coroutine that ran the agent."""

    async def main() -> ReplayResult:
        return replay_agent(journal, session, weather_agent)

    result = asyncio.run(main())
    assert result.identical, result.first_divergence


def test_tools_run_live_on_request_and_are_compared(
    journal: Journal, session: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran = len(RAN)
    same = replay_agent(journal, session, weather_agent, ReplayOptions(live_tools=["get_weather"]))
    assert same.identical, same.first_divergence
    # the two calls of the first response run concurrently: in either order
    assert sorted(RAN[ran : ran + 2]) == ["Atlantis", "Lisbon"] and RAN[ran + 2 :] == ["Oslo"]
    monkeypatch.setitem(CELSIUS, "Lisbon", 30.0)
    moved = replay_agent(journal, session, weather_agent, ReplayOptions(live_tools=True))
    assert [(d.tool, d.recorded_seq) for d in moved.live_differences] == [("get_weather", 3)]
    assert moved.first_divergence is not None and moved.first_divergence.seq == 3


def test_outcomes_are_journaled_in_proposal_order_not_completion_order(journal: Journal) -> None:
    finished: list[str] = []

    @function_tool
    async def get_weather(city: str) -> str:
        """The current temperature of a city, slower for Lisbon."""
        await asyncio.sleep(0.06 if city == "Lisbon" else 0)
        finished.append(city)
        return f"{city}: mild"

    waiting = weather_agent.clone(tools=[get_weather])
    session = capture(journal, waiting, ["Weather in Lisbon and Oslo?"], "waits")
    assert finished == ["Oslo", "Lisbon"]
    committed = [e.event for e in journal.events(session) if e.event.type == "action_committed"]
    assert [e.args["city"] for e in committed] == ["Lisbon", "Oslo"]
    assert replay_agent(journal, session, waiting).identical


def test_a_response_never_recorded_is_a_divergence_naming_the_step(journal: Journal) -> None:
    stopping = weather_agent.clone(tool_use_behavior="stop_on_first_tool")
    one = capture(journal, stopping, ["Weather in Oslo?"], "stops")
    assert [item.event.type for item in journal.events(one)][-1] == "agent_completed"
    result = replay_agent(journal, one, weather_agent)  # the changed code asks the model again
    divergence = result.first_divergence
    assert divergence is not None and divergence.seq == 4
    assert divergence.reason == (
        "recording exhausted at seq 4: the code asked for model output #2, the recording has 1"
    )


def test_an_exception_that_ends_a_run_is_a_halt(journal: Journal) -> None:
    with pytest.raises(Exception, match="service down"), Recorder(journal, "broken") as recorder:

        async def broken_model(*args: Any, **kwargs: Any) -> ModelResponse:
            raise ConnectionError("model service down")

        model = ScriptedModel()
        model.get_response = broken_model  # type: ignore[method-assign]
        agent = weather_agent.clone(model=model)
        asyncio.run(Runner.run(agent, "Weather in Oslo?", hooks=JournalRunHooks(recorder)))
    state = journal.state("broken")
    assert (state.status, state.halt_rule) == ("failed", "error")
    assert state.halt_reason == "ConnectionError: model service down"
    result = replay_agent(journal, "broken", weather_agent)
    assert result.identical, result.first_divergence


def test_captured_sessions_replay_through_the_cli_and_as_fixtures(tmp_path: Path) -> None:
    db = tmp_path / "sdk.db"
    with Journal.open(db) as journal:
        capture(journal, weather_agent, ["Weather in Lisbon?"], "weather")
        assert Replayer().replay(journal, "weather").identical
        fixture = write_fixture(journal, "weather", tmp_path / "fixtures" / "weather.jsonl")
    replayed = run_cli("replay", "weather", "--db", db, "--json")
    assert replayed.exit_code == 0, replayed.stdout + replayed.stderr
    assert json.loads(replayed.stdout)["verdict"] == "identical"
    assert replay_fixture(fixture).passed


def test_without_the_sdk_the_import_fails_with_one_clear_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delitem(sys.modules, "replay.integrations.openai_agents")
    monkeypatch.delattr(integrations, "openai_agents")
    monkeypatch.setitem(sys.modules, "agents", None)
    with pytest.raises(MissingExtraError) as raised:
        importlib.import_module("replay.integrations.openai_agents")
    assert str(raised.value).startswith("openai-agents is not installed")
    assert str(raised.value).endswith("pip install 'agent-journal[openai-agents]'")


first_tool_agent: Agent[Any] = weather_agent.clone(tool_use_behavior="stop_on_first_tool")
"""The changed agent: a turn ends with its first tool's output."""


def test_a_changed_agent_forks_a_captured_run_and_goes_on_with_its_own_model(
    tmp_path: Path,
) -> None:
    db = tmp_path / "sdk.db"
    with Journal.open(db) as journal:
        capture(journal, weather_agent, ["Weather in Lisbon and Atlantis?", "And Oslo?"])
    RAN.clear()
    changed = ("--agent", "tests.test_openai_agents:first_tool_agent")
    forked = run_cli("fork", "sdk", "--at", "4", "--db", db, *changed, "--json")
    assert forked.exit_code == 0, forked.stdout + forked.stderr
    result = json.loads(forked.stdout)
    assert (result["forked_from"], result["fork_seq"]) == ("sdk", 4)
    assert result["status"] == "completed" and result["recorded_until"] == 4
    with Journal.open(db) as journal:
        events = [item.event for item in journal.events(result["session_id"])]
    assert events[0].forked_from == "sdk" and events[0].replay_of is None
    assert [e.type for e in events[5:]] == [
        "agent_completed",  # the first tool's output: where the recording asked the model
        "user_input",
        "action_proposed",  # the agent's own model, live
        "action_committed",  # and the tool, for real
        "agent_completed",
    ]
    assert RAN == ["Oslo"]
    assert run_cli("fork", "sdk", "--at", "5", "--db", db, *changed).exit_code == 2


class Reading(BaseModel):
    """A typed tool result."""

    city: str
    celsius: float


@dataclasses.dataclass
class ReadingRow:
    """A typed tool result as a dataclass."""

    city: str
    celsius: float


@function_tool(name_override="get_weather")
def get_reading(city: str) -> Reading:
    """The current temperature of a city, as a model."""
    RAN.append(city)
    return Reading(city=city, celsius=CELSIUS.get(city, 0.0))


@function_tool(name_override="get_weather")
def get_row(city: str) -> ReadingRow:
    """The current temperature of a city, as a dataclass."""
    RAN.append(city)
    return ReadingRow(city=city, celsius=CELSIUS.get(city, 0.0))


@function_tool(name_override="get_weather")
def get_untyped(city: str):  # type: ignore[no-untyped-def]  # declares no return type
    """The current temperature of a city, as a model it does not declare."""
    RAN.append(city)
    return Reading(city=city, celsius=CELSIUS.get(city, 0.0))


@pytest.mark.parametrize(
    "tool", [get_reading, get_row, get_untyped], ids=["model", "dataclass", "undeclared"]
)
def test_a_tool_that_returns_an_object_replays_identical(
    journal: Journal, tool: FunctionTool
) -> None:
    """The model is sent ``str()`` of the tool's output: the replay sends the same text."""
    agent = weather_agent.clone(tools=[tool])
    session = capture(journal, agent, ["Weather in Lisbon and Oslo?"], "typed")
    answer = [e.event for e in journal.events(session)][-1]
    assert answer.answer == " | ".join(str(tool.__wrapped__(c)) for c in ("Lisbon", "Oslo"))
    ran = len(RAN)
    result = replay_agent(journal, session, agent)
    assert result.identical, result.first_divergence
    assert len(RAN) == ran
    assert replay_agent(journal, session, agent, ReplayOptions(live_tools=True)).identical


def test_a_tool_declared_to_return_a_model_is_handed_one_in_a_replay(journal: Journal) -> None:
    """Code that reads the tool's output (here the run's tool_use_behavior) reads a model."""

    def celsius_answers(context: Any, results: list[FunctionToolResult]) -> ToolsToFinal:
        return ToolsToFinal(is_final_output=True, final_output=f"{results[0].output.celsius} °C")

    agent = weather_agent.clone(tools=[get_reading], tool_use_behavior=celsius_answers)
    session = capture(journal, agent, ["Weather in Lisbon?"], "first")
    assert [e.event for e in journal.events(session)][-1].answer == "21.5 °C"
    result = replay_agent(journal, session, agent)
    assert result.identical, result.first_divergence


def test_a_tool_exception_that_ends_the_run_replays_identical(journal: Journal) -> None:
    """With ``failure_error_function=None`` the SDK raises the tool's error out of the run;
    its record leaves out the SDK's run state (the whole agent, the input as passed)."""

    @function_tool(failure_error_function=None)
    def get_weather(city: str) -> dict[str, Any]:
        """The current temperature of a city; raises for every city."""
        raise LookupError(f"unknown city {city}")

    agent = weather_agent.clone(tools=[get_weather])
    with pytest.raises(UserError), Recorder(journal, "raises") as recorder:
        asyncio.run(Runner.run(agent, "Weather in Oslo?", hooks=JournalRunHooks(recorder)))
    halted = [e.event for e in journal.events("raises")][-1]
    assert halted.type == "agent_halted" and "run_data" not in halted.error["attributes"]
    assert halted.reason == "UserError: Error running tool get_weather: unknown city Oslo"
    assert rebuilt(halted.error).run_data is None  # type: ignore[attr-defined]
    result = replay_agent(journal, "raises", agent)
    assert result.identical, result.first_divergence


class HandingOffModel(ScriptedModel):
    """Hands the first turn over to the specialist; the specialist answers every request."""

    async def get_response(
        self, system_instructions: str | None, input: Any, *a: Any, **k: Any
    ) -> ModelResponse:
        usage = Usage(requests=1, input_tokens=10, output_tokens=2)
        items = [{"role": "user", "content": input}] if isinstance(input, str) else input
        if system_instructions == "Route." and not any(
            i.get("type") == "function_call" for i in items
        ):
            call = ResponseFunctionToolCall(
                arguments="{}",
                call_id=f"hand-{len(items)}",
                name="transfer_to_specialist",
                type="function_call",
            )
            return ModelResponse(output=[call], usage=usage, response_id=None)
        text = ResponseOutputText(text=f"booked ({len(items)})", type="output_text", annotations=[])
        message = ResponseOutputMessage(
            id="msg-1", content=[text], role="assistant", status="completed", type="message"
        )
        return ModelResponse(output=[message], usage=usage, response_id=None)


def desk(
    *, temperature: float | None = 0.0, tool_doc: str = "The current temperature of a city."
) -> Agent[Any]:
    """A triage agent handing off to a specialist with a tool and settings of its own."""
    tool = function_tool(get_weather.__wrapped__, description_override=tool_doc)
    specialist: Agent[Any] = Agent(
        name="specialist",
        instructions="Book.",
        tools=[tool],
        model=HandingOffModel(),
        model_settings=ModelSettings(temperature=temperature),
    )
    return Agent(
        name="triage", instructions="Route.", handoffs=[specialist], model=HandingOffModel()
    )


def test_a_change_to_an_agent_handed_off_to_diverges_at_its_first_request(
    journal: Journal,
) -> None:
    """Its settings (0.0 too) and tools are sent with each of its requests, and compared."""
    session = capture(journal, desk(), ["Book Lisbon"], "desk")
    assert replay_agent(journal, session, desk()).identical
    for changed, path in [
        (desk(temperature=None), "request.params.model_settings.temperature"),
        (desk(tool_doc="Degrees in a city."), "request.params.tools[0].description"),
    ]:
        divergence = replay_agent(journal, session, changed).first_divergence
        assert divergence is not None and divergence.seq == 3  # the specialist's request
        assert divergence.reason == f"action_proposed differs in {path}"


def test_a_turn_the_code_starts_with_the_last_agent_replays_identical(journal: Journal) -> None:
    """The second turn runs ``result.last_agent`` (the specialist), as the code did."""
    triage = desk()

    async def converse(hooks: JournalRunHooks) -> None:
        first = await Runner.run(triage, "Book Lisbon", hooks=hooks)
        await Runner.run(
            first.last_agent,
            [*first.to_input_list(), {"role": "user", "content": "And Oslo"}],
            hooks=hooks,
        )

    with Recorder(journal, "last") as recorder:
        asyncio.run(converse(JournalRunHooks(recorder)))
    result = replay_agent(journal, "last", triage)
    assert result.identical, result.first_divergence


class Booking(BaseModel):
    """A structured output."""

    city: str


class DescribedBooking(BaseModel):
    """The structured output with a field described."""

    city: str = Field(description="where to")


def test_a_changed_output_schema_diverges_at_the_first_request(journal: Journal) -> None:
    def agent(output: type[BaseModel]) -> Agent[Any]:
        return Agent(name="booker", instructions="Book.", model=JsonAnswers(), output_type=output)

    session = capture(journal, agent(Booking), ["Book Lisbon"], "booked")
    assert replay_agent(journal, session, agent(Booking)).identical
    divergence = replay_agent(journal, session, agent(DescribedBooking)).first_divergence
    assert divergence is not None and divergence.seq == 2
    assert "request.params.output_schema.schema.properties.city" in divergence.reason


class JsonAnswers(ScriptedModel):
    """Answers every request with a booking as JSON."""

    async def get_response(self, *a: Any, **k: Any) -> ModelResponse:
        text = ResponseOutputText(text='{"city": "Lisbon"}', type="output_text", annotations=[])
        message = ResponseOutputMessage(
            id="msg-1", content=[text], role="assistant", status="completed", type="message"
        )
        return ModelResponse(output=[message], usage=Usage(requests=1), response_id=None)


class ChatModel(ScriptedModel):
    """A model object named as OpenAI's are (``model``), as one API would serve it."""

    model = "gpt-4.1"


class ResponsesModel(ChatModel):
    """The same model name, as another API would serve it."""


def test_the_same_model_name_on_another_model_class_diverges(journal: Journal) -> None:
    """The Responses and Chat Completions models send one name differently: not identical."""
    session = capture(journal, weather_agent.clone(model=ChatModel()), ["Weather in Oslo?"], "api")
    assert journal.state(session).model == "gpt-4.1"
    result = replay_agent(journal, session, weather_agent.clone(model=ResponsesModel()))
    assert result.first_divergence is not None and result.first_divergence.seq == 2
    assert result.first_divergence.reason == "action_proposed differs in request.params.model_class"


@input_guardrail
def no_weapons(context: Any, agent: Agent[Any], given: Any) -> GuardrailFunctionOutput:
    """Trips on a request that names a weapon."""
    return GuardrailFunctionOutput(output_info=None, tripwire_triggered="weapon" in str(given))


def test_a_run_its_input_guardrail_ends_before_the_model_is_called_is_a_halted_session(
    journal: Journal,
) -> None:
    guarded = weather_agent.clone(input_guardrails=[no_weapons])
    with pytest.raises(InputGuardrailTripwireTriggered), Recorder(journal, "tripped") as recorder:
        asyncio.run(Runner.run(guarded, "A weapon in Oslo?", hooks=JournalRunHooks(recorder)))
    events = [item.event for item in journal.events("tripped")]
    assert [e.type for e in events] == ["session_started", "user_input", "agent_halted"]
    assert events[1].text == "A weapon in Oslo?"
    assert events[2].reason.startswith("InputGuardrailTripwireTriggered")
    assert replay_agent(journal, "tripped", guarded).identical
    relaxed = replay_agent(journal, "tripped", weather_agent)  # no guardrail now: asks the model
    assert relaxed.first_divergence is not None and relaxed.first_divergence.seq == 2
