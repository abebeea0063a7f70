"""Captured code for the in-process capture tests: entries over the Responses API, direct
tool calls, typed results and exceptions of the user's own types.

The capture writes to whatever journal `bind` gives it (the tests bind a fresh one).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel

from capture import Capture
from journal import Journal

capture = Capture(Journal.open(":memory:"))
client: Any = None
"""The wrapped client the entries call; the tests set it."""


def bind(journal: Journal, raw_client: Any) -> None:
    """Capture into ``journal``, through ``raw_client``."""
    global client
    capture.journal = journal
    client = capture.openai(raw_client)


class Stock(BaseModel):
    sku: str
    units: int


class OutOfStock(LookupError):
    """The user's own exception type, with an attribute."""

    def __init__(self, sku: str) -> None:
        super().__init__(f"{sku} is out of stock")
        self.sku = sku


@capture.tool
def lookup_order(order_id: str) -> dict[str, Any]:
    return {"order_id": order_id, "sku": "SKU-2", "total": 10.0}


@capture.tool
def check_stock(sku: str, quantity: int) -> Stock:
    if sku == "SKU-2":
        raise OutOfStock(sku)
    return Stock(sku=sku, units=5)


@capture.tool
def send_email(to: str, body: str) -> str:
    return "sent"


TOOLS = [
    {
        "type": "function",
        "name": name,
        "description": name,
        "parameters": {"type": "object", "properties": {}},
    }
    for name in ("lookup_order", "check_stock", "send_email")
]
DISPATCH: dict[str, Any] = {
    "lookup_order": lookup_order,
    "check_stock": check_stock,
    "send_email": send_email,
}
CAUGHT: list[str] = []
"""What the entries' except clauses caught, in order."""


@capture.entry
def answer(question: str, stream: bool = False) -> str:
    """A loop over the Responses API (streamed or not)."""
    items: list[Any] = [{"role": "user", "content": question}]
    while True:
        if stream:  # as the openai docs write it: the stream is a context manager too
            with client.responses.create(
                model="fake-1", input=items, tools=TOOLS, stream=True
            ) as streamed:
                events = list(streamed)
            reply = next(e.response for e in reversed(events) if e.type == "response.completed")
        else:
            reply = client.responses.create(model="fake-1", input=items, tools=TOOLS)
        calls = [item for item in reply.output if item.type == "function_call"]
        if not calls:
            return reply.output_text
        for call in calls:
            items.append(call.model_dump(exclude_none=True))
            try:
                result = DISPATCH[call.name](**json.loads(call.arguments))
                output = (
                    result.model_dump_json()
                    if isinstance(result, BaseModel)
                    else json.dumps(result)
                )
            except OutOfStock as error:
                CAUGHT.append(f"{type(error).__name__}:{error.sku}")
                output = json.dumps({"error": str(error)})
            items.append(
                {"type": "function_call_output", "call_id": call.call_id, "output": output}
            )


@capture.tool(name="lookup_order")
def lookup_order_text(order_id: str) -> str:
    """`lookup_order`'s result as the JSON text the model reads."""
    return json.dumps({"order_id": order_id, "sku": "SKU-2", "total": 10.0})


@capture.tool(side_effects=True)
def reserve(sku: str) -> str:
    """A tool with side effects that another tool calls."""
    RESERVED.append(sku)
    return f"held-{sku}"


RESERVED: list[str] = []
"""What `reserve` held, in order."""


@capture.tool(name="lookup_order")
def lookup_and_reserve(order_id: str) -> str:
    """`lookup_order_text`, which reserves the order's item through another decorated tool
    (a part of its run)."""
    found = json.loads(lookup_order_text(order_id))
    return json.dumps({**found, "hold": reserve(found["sku"])})


@capture.entry
def first_call(question: str) -> str:
    """An agent of its own, used by a tool: one model call; the tool its model calls first."""
    reply = client.responses.create(model="fake-1", input=question, tools=TOOLS)
    return str(next(item.name for item in reply.output if item.type == "function_call"))


@capture.tool(name="lookup_order")
def lookup_by_agent(order_id: str) -> str:
    """`lookup_order_text`, after asking an agent of its own (an entry) what to call."""
    asked = first_call(f"order {order_id}")
    return json.dumps({**json.loads(lookup_order_text(order_id)), "asked": asked})


@capture.tool(name="lookup_order")
def lookup_by_model(order_id: str) -> str:
    """`lookup_order_text`, after asking the model itself (no entry of its own)."""
    reply = client.responses.create(model="fake-1", input=f"order {order_id}", tools=TOOLS)
    asked = next(item.name for item in reply.output if item.type == "function_call")
    return json.dumps({**json.loads(lookup_order_text(order_id)), "asked": asked})


TEXT_TOOLS: dict[str, Any] = {"lookup_order": lookup_order_text}


@capture.entry
def first_lookup(question: str) -> str:
    """Two model calls over the Responses API; the first one's call answered by a tool that
    returns text, which goes to the model as it is."""
    items: list[Any] = [{"role": "user", "content": question}]
    reply = client.responses.create(model="fake-1", input=items, tools=TOOLS)
    call = next(item for item in reply.output if item.type == "function_call")
    items.append(call.model_dump(exclude_none=True))
    output = TEXT_TOOLS[call.name](**json.loads(call.arguments))
    items.append({"type": "function_call_output", "call_id": call.call_id, "output": output})
    return str(client.responses.create(model="fake-1", input=items, tools=TOOLS).output_text)


class ModelUnavailable(RuntimeError):
    """The user's own error for a model call that failed."""


@capture.entry
def wrapped_failure(question: str) -> str:
    """One model call; an API error is raised again as the user's own error, from it."""
    try:
        reply = client.responses.create(model="fake-1", input=question, tools=TOOLS)
    except Exception as error:
        raise ModelUnavailable(f"the model is unavailable: {type(error).__name__}") from error
    return str(reply.output_text)


@capture.entry
def retried(question: str) -> str:
    """One model call, made again once when the API refuses it (a rate limit)."""
    try:
        reply = client.responses.create(model="fake-1", input=question, tools=TOOLS)
    except Exception:  # as code that handles its API's errors writes it
        reply = client.responses.create(model="fake-1", input=question, tools=TOOLS)
    return str(next(item.name for item in reply.output if item.type == "function_call"))


@capture.entry
def direct(order_id: str) -> str:
    """Calls a tool no model proposed, then asks the model."""
    found = lookup_order(order_id)
    reply = client.responses.create(model="fake-1", input=f"order {found['order_id']}")
    return reply.output_text


class Orders:
    """Tools as methods of an object that holds their state."""

    def __init__(self) -> None:
        self.prefix = "order"

    @capture.tool
    def describe(self, order_id: str) -> str:
        return f"{self.prefix} {order_id}"


@capture.entry
def described(order_id: str) -> str:
    """Calls a tool that is a method, then asks the model."""
    text = Orders().describe(order_id)
    reply = client.responses.create(model="fake-1", input=text)
    return reply.output_text


@capture.entry
def streamed_words(question: str) -> Iterator[str]:
    """A streaming endpoint: a generator of what the model's reply holds, item by item."""
    reply = client.responses.create(model="fake-1", input=question)
    yield from (item.type for item in reply.output)


@capture.tool(name="lookup_order")
async def lookup_order_slowly(order_id: str) -> dict[str, Any]:
    await asyncio.sleep(30)  # still running when its sibling's failure ends the entry
    return {"order_id": order_id}


@capture.tool(name="check_stock")
async def check_stock_now(sku: str, quantity: int) -> Stock:
    raise OutOfStock(sku)


@capture.entry
async def gathered(question: str) -> list[Any]:
    """Runs the proposed call and a stock check at once, without return_exceptions: the
    check's failure ends the entry while the lookup still runs."""
    reply = client.responses.create(model="fake-1", input=question, tools=TOOLS)
    (call,) = [item for item in reply.output if item.type == "function_call"]
    return list(
        await asyncio.gather(
            lookup_order_slowly(**json.loads(call.arguments)), check_stock_now("SKU-2", 1)
        )
    )


@capture.entry(name="tests.capture_app:gathered")
async def gathered_in_turn(question: str) -> list[Any]:
    """`gathered` changed: the lookup is awaited first, alone."""
    reply = client.responses.create(model="fake-1", input=question, tools=TOOLS)
    (call,) = [item for item in reply.output if item.type == "function_call"]
    found = await lookup_order_slowly(**json.loads(call.arguments))
    return [found, await check_stock_now("SKU-2", 1)]


@capture.entry
def optioned(order_id: str) -> str:
    """Asks through a client derived with `with_options`, as the openai docs show."""
    reply = client.with_options(timeout=30).responses.create(
        model="fake-1", input=f"order {order_id}"
    )
    return str(reply.output[0].type)


@capture.entry
def unjournaled(order_id: str, how: str) -> str:
    """Asks through a helper the capture does not journal: a raw response, or ``stream()``."""
    if how == "raw":
        raw = client.responses.with_raw_response.create(model="fake-1", input=f"order {order_id}")
        return str(raw.parse().output[0].type)
    messages = [{"role": "user", "content": f"order {order_id}"}]
    with client.chat.completions.stream(model="fake-1", messages=messages) as stream:
        for _ in stream:
            pass
        return str(stream.get_final_completion().choices[0].finish_reason)


aclient: Any = None
"""The wrapped async client `until_finished_async` calls; the tests set it."""


def _gathered(chunks: list[Any], calls: dict[int, dict[str, str]]) -> str:
    """The text of chat chunks; their tool calls' pieces joined into ``calls``."""
    text = ""
    for chunk in chunks:
        for choice in chunk.choices:
            text += choice.delta.content or ""
            for piece in choice.delta.tool_calls or []:
                call = calls.setdefault(piece.index, {"id": "", "name": "", "arguments": ""})
                call["id"] = piece.id or call["id"]
                call["name"] += piece.function.name or ""
                call["arguments"] += piece.function.arguments or ""
    return text


def _answered(messages: list[Any], calls: dict[int, dict[str, str]]) -> None:
    """Run the calls, append the assistant message and the tool messages."""
    messages.append(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": c["id"],
                    "type": "function",
                    "function": {"name": c["name"], "arguments": c["arguments"]},
                }
                for c in calls.values()
            ],
        }
    )
    for call in calls.values():
        try:
            result = DISPATCH[call["name"]](**json.loads(call["arguments"]))
            output = (
                result.model_dump_json() if isinstance(result, BaseModel) else json.dumps(result)
            )
        except OutOfStock as error:
            output = json.dumps({"error": str(error)})
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": output})


def _finished(chunk: Any) -> bool:
    return bool(chunk.choices and chunk.choices[0].finish_reason)


def _next_turn(messages: list[Any], read: list[Any]) -> str | None:
    """The answer of the chunks read, or None after running their calls."""
    calls: dict[int, dict[str, str]] = {}
    text = _gathered(read, calls)
    if not calls:
        return text
    _answered(messages, calls)
    return None


@capture.entry
def until_finished(question: str) -> str:
    """A chat stream read up to its ``finish_reason``, then left unread and unclosed."""
    messages: list[Any] = [{"role": "user", "content": question}]
    while True:
        read: list[Any] = []
        for chunk in client.chat.completions.create(model="fake-1", messages=messages, stream=True):
            read.append(chunk)
            if _finished(chunk):
                break
        if (answer := _next_turn(messages, read)) is not None:
            return answer


@capture.entry
async def until_finished_async(question: str) -> str:
    """`until_finished` on the async client."""
    messages: list[Any] = [{"role": "user", "content": question}]
    while True:
        read: list[Any] = []
        stream = await aclient.chat.completions.create(
            model="fake-1", messages=messages, stream=True
        )
        async for chunk in stream:
            read.append(chunk)
            if _finished(chunk):
                break
        if (answer := _next_turn(messages, read)) is not None:
            return answer


@capture.entry
def abandoned(question: str) -> str:
    """A stream left after its first chunk, then the same question asked without one."""
    messages = [{"role": "user", "content": question}]
    stream = client.chat.completions.create(model="fake-1", messages=messages, stream=True)
    next(iter(stream))
    reply = client.chat.completions.create(model="fake-1", messages=messages)
    return str(reply.choices[0].message.tool_calls[0].function.name)


@capture.entry
def abandoned_last(question: str) -> str:
    """The session's last model call: a stream left after its first chunk, never closed."""
    messages = [{"role": "user", "content": question}]
    stream = client.chat.completions.create(model="fake-1", messages=messages, stream=True)
    return str(next(iter(stream)).choices[0].delta.role)


@capture.entry
async def fanned(first: str, second: str) -> list[str]:
    """Two model calls at once; the first is answered last (the server delays it)."""
    replies = await asyncio.gather(
        *(
            aclient.chat.completions.create(
                model="fake-1",
                messages=[{"role": "user", "content": question}],
                extra_headers={"x-delay": delay},
            )
            for question, delay in ((first, "0.3"), (second, "0"))
        )
    )
    return [reply.choices[0].message.tool_calls[0].function.arguments for reply in replies]
