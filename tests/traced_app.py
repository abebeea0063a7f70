"""An app traced with OpenTelemetry: a plain openai-client loop, its tools decorated for replay.

In production it runs with an instrumentation (openai-v2 or OpenInference) and an exporter;
the `Capture` here writes nothing outside a replay (the client and the tools call straight
through). `PLANTED` switches on the changes the tests plant: ``prompt`` (another system
prompt), ``args`` (the quantity sent as an integer), ``result`` (the lookup's result
handled differently: its total sent back rounded).
"""

from __future__ import annotations

import json
import os
from typing import Any

import openai

from capture import Capture
from journal import Journal

capture = Capture(Journal.open(":memory:"))
client: Any = capture.openai(
    openai.OpenAI(
        base_url=os.environ.get("SHOP_MODEL_URL", "http://127.0.0.1:9/v1"),
        api_key=os.environ.get("OPENAI_API_KEY", "unset"),
        max_retries=0,
    )
)
PLANTED: set[str] = set()
SENT: list[str] = []
"""Who was e-mailed (a replay must add no one)."""
PROMPT = "You are the shop's assistant."
TOOLS = [
    {
        "type": "function",
        "function": {"name": name, "parameters": {"type": "object", "properties": {}}},
    }
    for name in ("lookup_order", "check_stock", "send_email")
]


def bind(raw_client: Any) -> None:
    """Route the loop through ``raw_client`` (wrapped for replay)."""
    global client
    client = capture.openai(raw_client)


@capture.tool
def lookup_order(order_id: str) -> dict[str, Any]:
    return {"order_id": order_id, "sku": "SKU-2", "total": 10.5}


@capture.tool
def check_stock(sku: str, quantity: Any) -> dict[str, Any]:
    return {"sku": sku, "units": 5}


@capture.tool(side_effects=True)
def send_email(to: str, body: str) -> dict[str, str]:
    SENT.append(to)
    return {"status": "sent"}


DISPATCH = {"lookup_order": lookup_order, "check_stock": check_stock, "send_email": send_email}


def answer(question: str, history: list[dict[str, Any]] | None = None) -> str:
    """The agent loop: ask, run the tools the model calls, until it answers.

    ``history``: the conversation so far, continued (and extended) by this question.
    """
    prompt = "You are a terse assistant." if "prompt" in PLANTED else PROMPT
    messages: list[dict[str, Any]] = history if history is not None else []
    if not messages:
        messages.append({"role": "system", "content": prompt})
    messages.append({"role": "user", "content": question})
    while True:
        reply = client.chat.completions.create(model="fake-1", messages=messages, tools=TOOLS)
        message = reply.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            return message.content or ""
        for call in message.tool_calls:
            args = json.loads(call.function.arguments)
            if "args" in PLANTED and "quantity" in args:
                args["quantity"] = int(args["quantity"])
            result = DISPATCH[call.function.name](**args)
            if "result" in PLANTED and isinstance(result, dict) and "total" in result:
                result = {**result, "total": round(result["total"])}
            messages.append(
                {"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)}
            )
