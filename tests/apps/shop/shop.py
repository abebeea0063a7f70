"""A shop assistant: a plain loop over the official openai client, with five tools of its own.

This is a user's application, not part of agent-journal: the tests copy it into a folder
of its own, capture its sessions against a local OpenAI-compatible server, and replay them
with the server stopped. Three lines bring the capture: `Capture`, `capture.openai` and
the decorators.
"""

from __future__ import annotations

import json
import os

from openai import AsyncOpenAI, OpenAI

from capture import Capture

capture = Capture(os.environ.get("SHOP_JOURNAL", "agent-journal.db"), metadata={"app": "shop"})
BASE_URL = os.environ.get("SHOP_MODEL_URL", "http://127.0.0.1:9/v1")
client = capture.openai(OpenAI(base_url=BASE_URL, api_key="local", max_retries=0))
aclient = capture.openai(AsyncOpenAI(base_url=BASE_URL, api_key="local", max_retries=0))
OUTBOX = os.environ.get("SHOP_OUTBOX", "outbox.txt")

PROMPT = "You are the shop's assistant. Look orders up, check stock, and e-mail the customer."
STOCK = {"SKU-1": 5, "SKU-2": 0, "SKU-3": 12}


def spec(name: str, description: str, **properties: str) -> dict:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {key: {"type": kind} for key, kind in properties.items()},
                "required": list(properties),
            },
        },
    }


TOOLS = [
    spec("lookup_order", "Find an order.", order_id="string"),
    spec("check_stock", "Units of a SKU in stock.", sku="string", quantity="integer"),
    spec("send_email", "E-mail the customer.", to="string", body="string"),
    spec("refund", "Refund an order.", order_id="string", amount="number"),
    spec("track", "Where a parcel is.", order_id="string"),
]


@capture.tool
def lookup_order(order_id: str) -> dict:
    number = int(order_id)
    if number % 13 == 0:
        raise LookupError(f"order {order_id} not found")
    return {"order_id": order_id, "sku": f"SKU-{number % 3 + 1}", "total": 10.0 * (number % 9)}


@capture.tool
def check_stock(sku: str, quantity: int) -> dict:
    if sku not in STOCK:
        raise ValueError(f"unknown SKU {sku}")
    return {"sku": sku, "in_stock": STOCK[sku] >= quantity, "units": STOCK[sku]}


@capture.tool(side_effects=True)
def send_email(to: str, body: str) -> str:
    with open(OUTBOX, "a", encoding="utf-8") as outbox:
        outbox.write(f"{to}: {body}\n")
    return "sent"


@capture.tool(side_effects=True)
def refund(order_id: str, amount: float) -> str:
    return f"refunded {amount} on {order_id}"


@capture.tool
def track(order_id: str) -> str:
    return f"order {order_id} is on its way"


DISPATCH = {
    "lookup_order": lookup_order,
    "check_stock": check_stock,
    "send_email": send_email,
    "refund": refund,
    "track": track,
}


def dispatch(name: str, arguments: str) -> str:
    args = json.loads(arguments)
    try:
        result = DISPATCH[name](**args)
    except (ValueError, LookupError) as error:
        result = {"error": str(error)}
    return json.dumps(result)


@capture.entry
def answer(question: str) -> str:
    messages: list = [{"role": "system", "content": PROMPT}, {"role": "user", "content": question}]
    while True:
        reply = client.chat.completions.create(model="fake-1", messages=messages, tools=TOOLS)
        message = reply.choices[0].message
        if not message.tool_calls:
            return message.content or ""
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            content = dispatch(call.function.name, call.function.arguments)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": content})


@capture.entry
async def answer_async(question: str) -> str:
    messages: list = [{"role": "system", "content": PROMPT}, {"role": "user", "content": question}]
    while True:
        reply = await aclient.chat.completions.create(
            model="fake-1", messages=messages, tools=TOOLS
        )
        message = reply.choices[0].message
        if not message.tool_calls:
            return message.content or ""
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            content = dispatch(call.function.name, call.function.arguments)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": content})


@capture.entry
def answer_streamed(question: str) -> str:
    messages: list = [{"role": "system", "content": PROMPT}, {"role": "user", "content": question}]
    while True:
        stream = client.chat.completions.create(
            model="fake-1",
            messages=messages,
            tools=TOOLS,
            stream=True,
            stream_options={"include_usage": True},
        )
        text, calls = "", {}
        for chunk in stream:
            for choice in chunk.choices:
                text += choice.delta.content or ""
                for piece in choice.delta.tool_calls or []:
                    call = calls.setdefault(piece.index, {"id": "", "name": "", "arguments": ""})
                    call["id"] = piece.id or call["id"]
                    call["name"] += piece.function.name or ""
                    call["arguments"] += piece.function.arguments or ""
        if not calls:
            return text
        messages.append(
            {
                "role": "assistant",
                "content": text or None,
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
            content = dispatch(call["name"], call["arguments"])
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": content})
