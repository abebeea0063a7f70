"""Captured code for the production capture tests: a plain chat-completions loop whose
user messages, tool arguments and tool results carry personal data and secrets.

`configure` gives it a `Capture` (fail open or closed, redaction, sampling) and a client;
the tests run `answer` from many threads, and replay it with `replay.replay_entry`.
"""

from __future__ import annotations

import json
from typing import Any

from capture import Capture

CARD = "4111 1111 1111 1111"
EMAIL = "alice@example.com"
API_KEY = "sk-live0123456789abcdefXYZ"
ACCOUNT = "ACCT-774411"
"""The user's own pattern (``ACCT-[0-9]{6}``)."""
PLANTED = (CARD, EMAIL, API_KEY, ACCOUNT, "customer@example.com")
"""Every secret a session holds in clear before redaction (the model adds the last)."""

capture = Capture(":memory:")
client: Any = None


def configure(raw_client: Any, journal: Any, **options: Any) -> Capture:
    """Capture into ``journal`` with ``options`` (those of `Capture`), through ``raw_client``."""
    global client
    fresh = Capture(journal, **options)
    capture.destination, capture.metadata = fresh.destination, fresh.metadata
    client = capture.openai(raw_client)
    return capture


@capture.tool
def lookup_order(order_id: str) -> dict[str, Any]:
    if order_id == "0":
        raise KeyError("no order number in the question")
    return {"order_id": order_id, "sku": "SKU-1", "customer": EMAIL, "paid_with": CARD}


@capture.tool
def check_stock(sku: str, quantity: int) -> dict[str, Any]:
    return {"sku": sku, "units": 5, "note": f"billing {ACCOUNT} via {API_KEY}"}


@capture.tool
def send_email(to: str, body: str) -> str:
    return f"sent to {to}"


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": name,
            "parameters": {"type": "object", "properties": {}},
        },
    }
    for name in ("lookup_order", "check_stock", "send_email")
]
DISPATCH = {"lookup_order": lookup_order, "check_stock": check_stock, "send_email": send_email}


@capture.entry
def answer(question: str) -> str:
    """A plain loop over ``chat.completions.create`` and the tools."""
    messages: list[Any] = [
        {"role": "system", "content": "You help with orders."},
        {"role": "user", "content": question},
    ]
    while True:
        reply = client.chat.completions.create(model="fake-1", messages=messages, tools=TOOLS)
        message = reply.choices[0].message
        if not message.tool_calls:
            return str(message.content)
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            result = DISPATCH[call.function.name](**json.loads(call.function.arguments))
            messages.append(
                {"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)}
            )
