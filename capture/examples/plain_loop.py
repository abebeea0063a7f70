"""A plain ``while tool_calls:`` loop, journaled by adding five recorder calls.

No agentloop runtime here: a hand-written loop with its own tiny tool dispatch and a
scripted stand-in for a chat model, the way many agents are written. The five lines
marked ``# 1`` to ``# 5`` are all it takes to journal it (`capture.Recorder`): the
session start, the user input, the model's whole output, each tool result (an exception
is recorded as a failure), and the final answer. An exception that escapes the loop is
recorded by the recorder's ``with`` block as a halt with rule ``error``.

Because `run` takes its ports (the model, the tools, the recorder, the user inputs), the
session it wrote replays with the recorded model outputs and tool results::

    from replay import replay_loop
    from capture.examples.plain_loop import record, run

    session_id = record(journal, ["What's the weather in Lisbon and Oslo, in °F?"])
    result = replay_loop(journal, session_id, run)  # identical
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from journal import ActionProposed, Journal, ToolCall, Usage

from ..recorder import ModelOutput, Recorder

__all__ = [
    "MODEL",
    "REFERENCE",
    "SYSTEM_PROMPT",
    "TOOL_SPECS",
    "dispatch",
    "record",
    "run",
    "scripted_model",
]

REFERENCE = "capture.examples.plain_loop:run"
"""What a replay re-runs (recorded as the session's agent)."""

MODEL = "scripted-weather-1"
SYSTEM_PROMPT = "You report the weather. Call get_weather per city; convert to °F if asked."

_CELSIUS = {"Lisbon": 21.5, "Oslo": 4.0, "Lima": 19.0, "Nairobi": 24.0}

Model = Callable[[list[dict[str, Any]]], ModelOutput]
"""The loop's model port: the chat messages in, the model's whole output back."""

Tools = Callable[[str, Any], Any]
"""The loop's tool port: ``tools(name, args) -> result``, raising on failure."""


def get_weather(city: str) -> dict[str, Any]:
    """The current temperature of a city."""
    if city not in _CELSIUS:
        raise LookupError(f"unknown city {city}; known cities: {', '.join(_CELSIUS)}")
    return {"city": city, "celsius": _CELSIUS[city]}


def to_fahrenheit(celsius: float) -> dict[str, Any]:
    """A Celsius temperature in Fahrenheit."""
    return {"fahrenheit": round(celsius * 9 / 5 + 32, 1)}


_TOOLS: dict[str, Callable[..., Any]] = {
    "get_weather": get_weather,
    "to_fahrenheit": to_fahrenheit,
}

TOOL_SPECS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The current temperature of a city, in °C.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "to_fahrenheit",
            "description": "Convert °C to °F.",
            "parameters": {
                "type": "object",
                "properties": {"celsius": {"type": "number"}},
                "required": ["celsius"],
            },
        },
    },
]
"""The tools as the model is shown them (OpenAI format)."""


def dispatch(name: str, args: Any) -> Any:
    """The loop's own tool dispatch: look the tool up and call it with the arguments."""
    tool = _TOOLS.get(name)
    if tool is None:
        raise LookupError(f"no tool named {name}")
    if not isinstance(args, dict):
        raise ValueError(f"the arguments of {name} are not a JSON object")
    return tool(**args)


def _turn(messages: list[dict[str, Any]]) -> tuple[str, int, list[Any]]:
    """The last user message, how many rounds of calls followed it, and their results."""
    start = max(i for i, message in enumerate(messages) if message["role"] == "user")
    turn = messages[start:]
    rounds = sum(1 for message in turn if message["role"] == "assistant" and message.get("calls"))
    results = [json.loads(message["content"]) for message in turn if message["role"] == "tool"]
    return messages[start]["content"], rounds, results


def _answer(results: list[dict[str, Any]]) -> str:
    parts = []
    for result in results:
        if "error" in result:
            parts.append(f"sorry: {result['error']}")
        elif "fahrenheit" in result:
            parts.append(f"{result['fahrenheit']} °F")
        else:
            parts.append(f"{result['city']}: {result['celsius']} °C")
    return "; ".join(parts) or "Which city?"


def scripted_model(messages: list[dict[str, Any]]) -> ActionProposed:
    """A deterministic stand-in for a chat model with tools.

    First it asks for the weather of each city the user names, then (if the user asked
    for °F) converts each temperature, then answers from the tool results.
    """
    user, rounds, results = _turn(messages)
    calls: list[ToolCall] = []
    if rounds == 0:
        cities = re.findall(r"\b(?:in|and) ([A-Z][a-z]+)", user)
        calls = [
            ToolCall(call_id=f"call-{i}", tool="get_weather", args={"city": city})
            for i, city in enumerate(cities)
        ]
    elif rounds == 1 and "°F" in user:
        calls = [
            ToolCall(call_id=f"call-f{i}", tool="to_fahrenheit", args={"celsius": r["celsius"]})
            for i, r in enumerate(results)
            if "celsius" in r
        ]
    text = None if calls else _answer(results)
    size = sum(len(str(message.get("content") or "")) for message in messages)
    return ActionProposed(
        calls=calls,
        text=text,
        model=MODEL,
        usage=Usage(input_tokens=size // 4, output_tokens=len(text or "") // 4 + 8 * len(calls)),
    )


def _content(result: Any) -> str:
    if isinstance(result, BaseException):
        return json.dumps({"error": str(result)})
    return json.dumps(result)


def run(llm: Model, tools: Tools, recorder: Recorder, inputs: Sequence[str]) -> list[str]:
    """The loop: answer each user input, calling tools while the model asks for them."""
    recorder.start(agent=REFERENCE, model=MODEL, system_prompt=SYSTEM_PROMPT, tools=TOOL_SPECS)  # 1
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM_PROMPT}]
    answers: list[str] = []
    for text in inputs:
        recorder.user_input(text)  # 2
        messages.append({"role": "user", "content": text})
        reply = recorder.model_output(llm(messages))  # 3 (the model's whole output)
        while reply.calls:
            messages.append({"role": "assistant", "content": reply.text, "calls": reply.calls})
            for call in reply.calls:
                try:
                    result = tools(call.tool, call.args)
                except Exception as error:
                    result = error
                recorder.tool_result(call.call_id, result)  # 4 (an exception: a failure)
                messages.append(
                    {"role": "tool", "tool_call_id": call.call_id, "content": _content(result)}
                )
            reply = recorder.model_output(llm(messages))  # 3 again
        recorder.final(reply.text or "")  # 5
        messages.append({"role": "assistant", "content": reply.text})
        answers.append(reply.text or "")
    return answers


def record(
    journal: Journal,
    inputs: Iterable[str],
    *,
    session_id: str | None = None,
    llm: Model = scripted_model,
    tools: Tools = dispatch,
) -> str:
    """Run the loop live (the scripted model, the real tools) and return its session id."""
    with Recorder(journal, session_id) as recorder:
        run(llm, tools, recorder, list(inputs))
    return recorder.session_id
