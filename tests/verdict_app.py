"""A plain loop over the openai client with four captured tools, for the verdict matrix.

`CHANGE` names one change to the code (empty: the code as recorded); the tests set it
before a replay, as if the code had been edited. The model is `VerdictModel`, served by
the tests from a thread on 127.0.0.1.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any

import openai
from pydantic import BaseModel

from capture import Capture
from journal import Journal

capture = Capture(Journal.open(":memory:"))
client: Any = None
CHANGE = ""
"""The change to the code under replay; see the module."""

QUESTION = "Weather in Lisbon and Oslo, in °F?"
_CELSIUS = {"Lisbon": 21.5, "Oslo": 4.0}


def bind(journal: Journal, raw_client: Any) -> None:
    """Capture into ``journal``, through ``raw_client``."""
    global client
    capture.journal = journal
    client = capture.openai(raw_client)


class Station(BaseModel):
    name: str
    elevation: float
    tags: list[str]
    note: str | None = None


@capture.tool
def get_weather(city: str) -> dict[str, Any]:
    if CHANGE == "a tool raises" and city == "Oslo":
        raise LookupError("no station in Oslo")
    celsius = _CELSIUS[city]
    if CHANGE == "tool result" and city == "Oslo":
        celsius = 5.0
    if CHANGE == "tool result refactored":
        celsius = float(str(celsius))
    if CHANGE == "float noise" and city == "Lisbon":
        celsius = 21.500000000000004
    return {"city": city, "celsius": celsius}


@capture.tool
def to_fahrenheit(celsius: float) -> dict[str, Any]:
    return {"fahrenheit": round(celsius * 9 / 5 + 32, 1)}


@capture.tool
def station_info(city: str) -> Station:
    name = "Lisboã Portela"
    if CHANGE == "NFD":
        name = unicodedata.normalize("NFD", name)
    if CHANGE == "default left out":
        return Station(name=name, elevation=114.0, tags=["airport"])
    return Station(name=name, elevation=114.0, tags=["airport"], note=None)


class Handle:
    """A plain object: journaled as its repr."""


@capture.tool
def stats(city: str) -> dict[str, Any]:
    pair: Any = (1, 2) if CHANGE != "tuple as list" else [1, 2]
    found = {"city": city, "big": 2**62, "ratio": 0.1 + 0.2, "pair": pair, "none": None}
    if CHANGE == "None left out":
        del found["none"]
    found["delta"] = -0.0 if CHANGE == "a zero's sign" else 0.0
    found["handle"] = Handle()  # a new object, at a new address, at every run
    found["count"] = {"int as float": 1.0, "int as bool": True}.get(CHANGE, 1)
    found["flags"] = {flag: True for flag in {"x", "y", "z"}}  # a set's order: the hash seed's
    # 8 and 16 share a slot: the set iterates them in the order they were added
    found["ids"] = set([16, 8] if CHANGE == "a set built the other way" else [8, 16])
    if CHANGE == "a set member changed":
        found["ids"] = {8, 24}
    return found


@capture.tool
def reading(city: str, ref: int = 0) -> dict[str, Any]:
    ratio = float("inf") if CHANGE == "NaN to Infinity" else float("nan")
    return {"city": city, "ratio": ratio, "big": 2**70, "small": -(2**64)}


@capture.entry
def measured(city: str) -> str:
    """One tool call, no model: its result is what canonical JSON cannot hold."""
    found = reading(city, ref=2**65)  # an argument past 64 bits, as a model may send
    return f"{found['ratio']!r} {found['big']!r} {found['small']!r}"


@capture.entry
def measured_whole(city: str) -> dict[str, Any]:
    """The tool's result is the entry's answer."""
    return reading(city)


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"The {name.replace('_', ' ')}.",
            "parameters": {
                "type": "object",
                "properties": {key: {"type": kind}},
                "required": [key],
            },
        },
    }
    for name, key, kind in [
        ("get_weather", "city", "string"),
        ("to_fahrenheit", "celsius", "number"),
        ("station_info", "city", "string"),
        ("stats", "city", "string"),
    ]
]
_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "get_weather": get_weather,
    "to_fahrenheit": to_fahrenheit,
    "station_info": station_info,
    "stats": stats,
}


def _tools() -> list[dict[str, Any]]:
    tools: list[dict[str, Any]] = json.loads(json.dumps(TOOLS))
    if CHANGE == "tool description":
        tools[0]["function"]["description"] += " Now."
    if CHANGE == "tool schema":
        tools[0]["function"]["parameters"]["properties"]["city"]["minLength"] = 1
    return tools


def _text(result: Any) -> str:
    if isinstance(result, BaseModel):
        return result.model_dump_json()
    sent = {key: value for key, value in result.items() if key != "handle"}
    return json.dumps(sent, sort_keys=True, default=sorted)


def _sent(messages: list[dict[str, Any]], step: int) -> list[dict[str, Any]]:
    sent = list(messages)
    if step == 2 and CHANGE == "history: drop a message":
        del sent[1]
    if step == 2 and CHANGE == "history: reorder":
        sent[2], sent[3] = sent[3], sent[2]
    if step == 2 and CHANGE == "history: one char":
        sent[1] = dict(sent[1], content=sent[1]["content"] + "!")
    return sent


def _calls(calls: list[Any], step: int) -> list[Any]:
    if step == 0 and CHANGE == "drop a call":
        return calls[:1]
    if step == 0 and CHANGE in ("swap two calls", "swap two calls, results as proposed"):
        return calls[::-1]
    return calls


@capture.entry
def answer(question: str) -> str:
    """Ask, run the calls, send the results back, until the model answers."""
    prompt = "You report the weather." + (" Be brief." if CHANGE == "system prompt" else "")
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": prompt},
        {"role": "user", "content": question},
    ]
    params: dict[str, Any] = {"model": "gpt-4.1" if CHANGE != "model" else "gpt-4.1-mini"}
    params["temperature"] = 0.2 if CHANGE == "temperature" else 0.0
    if CHANGE == "max_tokens":
        params["max_tokens"] = 100
    if CHANGE == "max_tokens: NOT_GIVEN":  # the client leaves it out: the same request
        params["max_tokens"] = openai.NOT_GIVEN
    if CHANGE == "max_tokens: omit":
        params["max_tokens"] = openai.omit
    if CHANGE == "seed past 64 bits":
        params["seed"] = 2**70
    step = 0
    while True:
        reply = client.chat.completions.create(
            messages=_sent(messages, step), tools=_tools(), **params
        )
        message = reply.choices[0].message
        if step == 1 and CHANGE == "raise at step 1":
            raise RuntimeError("boom at step 1")
        if not message.tool_calls:
            return str(message.content) + ("!" if CHANGE == "the answer" else "")
        messages.append(message.model_dump(exclude_none=True))
        results = []
        for call in _calls(list(message.tool_calls), step):
            args = json.loads(call.function.arguments)
            if CHANGE == "arguments" and call.function.name == "to_fahrenheit":
                args["celsius"] = 21.0
            result = _FUNCTIONS[call.function.name](**args)
            if CHANGE == "a call twice" and call.function.name == "to_fahrenheit":
                result = to_fahrenheit(**args)
            results.append((call, result))
        if step == 2 and CHANGE == "add a call":
            results.append((message.tool_calls[0], get_weather("Lisbon")))
        if CHANGE == "swap two calls, results as proposed":
            results.reverse()
        for call, result in results:
            messages.append({"role": "tool", "tool_call_id": call.id, "content": _text(result)})
        step += 1


class VerdictModel(BaseHTTPRequestHandler):
    """A chat model that asks for the same calls whatever it is told, step by step."""

    PLAN: list[list[tuple[str, dict[str, Any]]]] = [
        [("get_weather", {"city": "Lisbon"}), ("get_weather", {"city": "Oslo"})],
        [("to_fahrenheit", {"celsius": 21.5}), ("station_info", {"city": "Lisbon"})],
        [("stats", {"city": "Oslo"})],
    ]

    def do_POST(self) -> None:  # noqa: N802 - the http.server API
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        step = sum(1 for m in body["messages"] if m.get("role") == "assistant")
        message: dict[str, Any] = {"role": "assistant", "content": "70.7°F and 39.2°F."}
        if step < len(self.PLAN):
            message["content"] = None
            message["tool_calls"] = [
                {
                    "id": f"call_{step}_{i}",
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(args)},
                }
                for i, (name, args) in enumerate(self.PLAN[step])
            ]
        data = json.dumps(
            {
                "id": f"chatcmpl-{step}",
                "object": "chat.completion",
                "created": 1700000000,
                "model": body["model"],
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        del format, args
