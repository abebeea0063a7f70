"""Capture from the real openai client, against an OpenAI-compatible server on 127.0.0.1.

No mock of the client: the official ``openai`` package talks HTTP to a small server that
the tests start, which answers from a script and keeps the requests it got.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from agentloop import Agent, AgentRuntime, OpenAIProvider, Tool, counter_ids
from capture import JournaledOpenAI
from journal import (
    ActionCommitted,
    ActionFailed,
    ActionProposed,
    AgentCompleted,
    Journal,
    RecordingOrderError,
    SessionStarted,
    UserInput,
)
from replay import Replayer, ReplayOptions

openai = pytest.importorskip("openai")

WEATHER = {
    "type": "function",
    "function": {
        "name": "weather",
        "description": "Current temperature of a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


def completion(
    content: str | None = None,
    *calls: tuple[str, str, str],
    usage: tuple[int, int, int] = (10, 5, 0),
) -> dict[str, Any]:
    """A chat completion body: text, or tool calls given as (id, name, arguments text)."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": arguments}}
            for cid, name, arguments in calls
        ]
    prompt, answer, cached = usage
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1_795_946_405,
        "model": "test-model-1",
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
        ],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": answer,
            "total_tokens": prompt + answer,
            "prompt_tokens_details": {"cached_tokens": cached},
        },
    }


class Server:
    """An OpenAI-compatible ``/v1/chat/completions`` on 127.0.0.1 that answers from a script."""

    def __init__(self) -> None:
        self.script: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the http.server API
                length = int(self.headers.get("Content-Length", "0"))
                owner.requests.append(json.loads(self.rfile.read(length)))
                if self.path != "/v1/chat/completions" or not owner.script:
                    self.send_response(500)
                    self.end_headers()
                    return
                body = json.dumps(owner.script.pop(0)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                del format, args

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def client(self) -> Any:
        return openai.OpenAI(base_url=self.url, api_key="test-key", max_retries=0)


@pytest.fixture
def server() -> Iterator[Server]:
    running = Server()
    running.thread.start()
    try:
        yield running
    finally:
        running.httpd.shutdown()
        running.httpd.server_close()


def weather(city: str) -> str:
    if city == "Atlantis":
        raise LookupError(f"no station in {city}")
    return json.dumps({"city": city, "temp": len(city)})


def weather_agent() -> Agent:
    """The agent a captured session replays with: the same tool, from its OpenAI spec."""
    return Agent(
        name="weather",
        system_prompt="You answer weather questions.",
        tools=[Tool.from_openai(WEATHER, lambda args: weather(args["city"]))],
        model="test-model-1",
        reference="tests.test_capture_openai:weather_agent",
    )


def hand_written_loop(client: Any, messages: list[dict[str, Any]]) -> str:
    """The loop people write: call, run the tools, append the results, call again."""
    while True:
        response = client.chat.completions.create(
            model="test-model-1", messages=messages, tools=[WEATHER], temperature=0.2
        )
        message = response.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            return str(message.content)
        for tool_call in message.tool_calls:
            try:
                content = weather(json.loads(tool_call.function.arguments)["city"])
            except LookupError as error:
                content = f"Error: {error}"
            messages.append({"role": "tool", "tool_call_id": tool_call.id, "content": content})


def test_a_hand_written_loop_is_captured_and_replays(server: Server, tmp_path: Path) -> None:
    server.script = [
        completion(None, ("call_1", "weather", '{"city": "Oslo"}'), usage=(30, 8, 12)),
        completion("It is 4 degrees in Oslo."),
        completion(None, ("call_2", "weather", '{"city": "Atlantis"}')),
        completion("Atlantis has no weather station."),
    ]
    with Journal.open(tmp_path / "j.db") as journal:
        client = JournaledOpenAI(
            server.client(), journal, "cap-1", metadata={"team": "travel"}, error_prefix="Error:"
        )
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": "You answer weather questions."},
            {"role": "user", "content": "Weather in Oslo?"},
        ]
        assert hand_written_loop(client, messages) == "It is 4 degrees in Oslo."
        messages.append({"role": "user", "content": "And Atlantis?"})
        assert hand_written_loop(client, messages) == "Atlantis has no weather station."

        events = [item.event for item in journal.events("cap-1")]
        assert [e.type for e in events] == [
            "session_started",
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
        started = events[0]
        assert isinstance(started, SessionStarted)
        assert (started.model, started.system_prompt) == (
            "test-model-1",
            "You answer weather questions.",
        )
        assert started.model_settings == {"temperature": 0.2}
        assert started.metadata == {"team": "travel", "captured_with": "openai"}
        assert [tool.name for tool in started.config.tools] == ["weather"]
        assert events[1] == UserInput(text="Weather in Oslo?")
        proposal = events[2]
        assert isinstance(proposal, ActionProposed)
        assert proposal.calls[0].args == {"city": "Oslo"}
        assert (
            proposal.usage.input_tokens,
            proposal.usage.output_tokens,
            proposal.usage.cached_tokens,
        ) == (
            30,
            8,
            12,
        )
        assert proposal.model == "test-model-1"
        assert proposal.latency_ms is not None and proposal.latency_ms > 0
        assert events[3] == ActionCommitted(
            call_id="call_1",
            tool="weather",
            args={"city": "Oslo"},
            result='{"city": "Oslo", "temp": 4}',
        )
        assert isinstance(events[8], ActionFailed) and events[8].message.startswith(
            "Error: no station"
        )
        assert journal.state("cap-1").status == "completed"
        # what the server got is what the loop sent
        assert server.requests[1]["messages"][-1]["role"] == "tool"

        # the captured session replays through an agent with the same OpenAI tool spec
        result = Replayer(ReplayOptions(agent=weather_agent())).replay(journal, "cap-1")
        assert result.identical, result.first_divergence
        assert result.replayed_events == 11
        # and with the tool run live, the failure's message is the runtime's own
        live = Replayer(ReplayOptions(agent=weather_agent(), live_tools=True)).replay(
            journal, "cap-1"
        )
        assert live.first_divergence is not None and live.first_divergence.seq == 8
        assert live.first_divergence.reason == "action_failed differs in message"


def test_recorded_results_and_the_helpers(server: Server, tmp_path: Path) -> None:
    server.script = [
        completion(
            None, ("a", "weather", '{"city": "Rome"}'), ("b", "weather", '{"city": "Bern"}')
        ),
        completion("Rome 4, Bern unknown."),
    ]
    with Journal.open(tmp_path / "j.db") as journal:
        client = JournaledOpenAI(server.client(), journal, "cap-2")
        messages: list[dict[str, Any]] = [{"role": "user", "content": "Rome and Bern?"}]
        first = client.chat.completions.create(
            model="test-model-1", messages=messages, tools=[WEATHER]
        )
        messages.append(first.choices[0].message.model_dump(exclude_none=True))
        client.record_result("a", {"temp": 4}, duration_ms=12.5)
        client.record_error("b", "station offline", kind="infrastructure")
        with pytest.raises(RecordingOrderError, match="no model output proposed call 'zzz'"):
            client.record_result("zzz", 1)
        messages += [
            {"role": "tool", "tool_call_id": "a", "content": '{"temp": 4}'},
            {"role": "tool", "tool_call_id": "b", "content": "offline"},
        ]
        client.chat.completions.create(model="test-model-1", messages=messages)
        events = [item.event for item in journal.events("cap-2")]
        committed, failed = events[3], events[4]
        assert isinstance(committed, ActionCommitted) and committed.duration_ms == 12.5
        assert committed.result == {"temp": 4}  # recorded by the helper, not again from messages
        assert isinstance(failed, ActionFailed) and failed.kind == "infrastructure"
        assert [e.type for e in events[5:]] == ["action_proposed", "agent_completed"]
        client.halt("user_left", "closed the tab")
        assert journal.state("cap-2").status == "halted"
        assert client.models is client.client.models  # everything else passes through


def test_a_retried_call_journals_its_input_once(server: Server, tmp_path: Path) -> None:
    with Journal.open(tmp_path / "j.db") as journal:
        client = JournaledOpenAI(server.client(), journal, "cap-3")
        messages = [{"role": "user", "content": "hello"}]
        with pytest.raises(openai.InternalServerError):  # the server has no answer yet
            client.chat.completions.create(model="test-model-1", messages=messages)
        server.script = [completion("hi there")]
        client.chat.completions.create(model="test-model-1", messages=messages)  # the retry
        assert [item.event.type for item in journal.events("cap-3")] == [
            "session_started",
            "user_input",
            "action_proposed",
            "agent_completed",
        ]


def test_the_provider_runs_an_agent_on_the_openai_client(server: Server, tmp_path: Path) -> None:
    server.script = [
        completion(None, ("c1", "weather", '{"city": "Lima"}'), usage=(40, 6, 32)),
        completion("Lima: 4 degrees."),
    ]
    agent = weather_agent()
    agent.llm = OpenAIProvider(server.client())
    agent.model_settings = {"temperature": 0.0, "context_window": 8000}
    with Journal.open(tmp_path / "j.db") as journal:
        runtime = AgentRuntime(agent, journal, ids=counter_ids("t"))
        result = asyncio.run(runtime.run_turn("live-1", "How warm is Lima?"))
        assert (result.status, result.answer) == ("completed", "Lima: 4 degrees.")
        request = server.requests[0]
        assert request["messages"][0] == {
            "role": "system",
            "content": "You answer weather questions.",
        }
        assert request["messages"][1] == {"role": "user", "content": "How warm is Lima?"}
        assert request["tools"][0]["function"]["name"] == "weather"
        assert (request["model"], request["temperature"]) == ("test-model-1", 0.0)
        assert "context_window" not in request
        assert server.requests[1]["messages"][-1]["role"] == "tool"
        proposal = next(
            item.event
            for item in journal.events("live-1")
            if isinstance(item.event, ActionProposed)
        )
        assert proposal.usage.cached_tokens == 32 and proposal.latency_ms is not None
        replayed = Replayer(ReplayOptions(agent=agent)).replay(journal, "live-1")
        assert replayed.identical, replayed.first_divergence


def test_the_provider_awaits_an_async_client(server: Server, tmp_path: Path) -> None:
    server.script = [completion("async hello")]
    agent = weather_agent()
    agent.llm = OpenAIProvider(openai.AsyncOpenAI(base_url=server.url, api_key="k", max_retries=0))
    with Journal.open(tmp_path / "j.db") as journal:
        result = asyncio.run(AgentRuntime(agent, journal).run_turn("a-1", "hi"))
        assert result.answer == "async hello"
        last = list(journal.events("a-1"))[-1].event
        assert last == AgentCompleted(answer="async hello")
