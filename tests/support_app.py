"""A support desk as a team writes it, captured at its boundaries: the paths real apps take.

Not part of agent-journal: the code a user owns. A triage call with no tools first, then
a tool loop with dict dispatch; a tenacity retry on ``RateLimitError``; ``except
openai.APIError: return FALLBACK``; a streamed ``AsyncOpenAI`` entry that answers the same
way when the stream breaks; a tool that does I/O (served in a replay), a pure one (run and
compared), one with side effects (never run). `CHANGES` plants the edits a team makes, so a
test can replay the same sessions through changed code.
"""

from __future__ import annotations

import json
import os
from typing import Any

import openai
import tenacity

from capture import Capture
from journal import Journal

capture = Capture(os.environ.get("SUPPORT_JOURNAL", "support.db"))
client: Any = None
aclient: Any = None

CHANGES: set[str] = set(os.environ.get("SUPPORT_CHANGES", "").split())
"""Planted edits (a test sets them; ``SUPPORT_CHANGES`` in another process): ``no-retry``
(give up at once), ``two-tries`` (one retry less), ``fallback`` (another fallback text),
``stock`` (a fix inside the pure tool), ``lookup`` (a fix inside the I/O tool)."""
OUTBOX: list[str] = []
"""What `send_email` sent (it must never grow in a replay); also appended to the file
``SUPPORT_OUTBOX`` names, when set."""

MODEL = "fake-1"
TRIAGE = "Say which team handles the request: orders, billing or other."
PROMPT = "You are the support desk. Look orders up, check stock, e-mail the customer."
STOCK = {"SKU-1": 5, "SKU-2": 0, "SKU-3": 12}
RESERVED = {"SKU-3": 12}


def fallback() -> str:
    """The answer when the model cannot be reached."""
    if "fallback" in CHANGES:
        return "The assistant is down; please write to help@example.com."
    return "Sorry, our assistant is unavailable; a human will answer shortly."


def connect(url: str) -> None:
    """The clients talk to ``url`` (each never retries on its own: `ask` does)."""
    global client, aclient
    client = capture.openai(openai.OpenAI(base_url=url, api_key="local", max_retries=0))
    aclient = capture.openai(openai.AsyncOpenAI(base_url=url, api_key="local", max_retries=0))


def bind(journal: Journal, url: str) -> None:
    """Capture into ``journal``, the clients talking to ``url``."""
    capture.journal = journal
    connect(url)


connect(os.environ.get("SUPPORT_MODEL_URL", "http://127.0.0.1:9/v1"))


def _spec(name: str, **properties: str) -> dict[str, Any]:
    parameters = {
        "type": "object",
        "properties": {key: {"type": kind} for key, kind in properties.items()},
    }
    return {"type": "function", "function": {"name": name, "parameters": parameters}}


TOOLS = [
    _spec("lookup_order", order_id="string"),
    _spec("check_stock", sku="string", quantity="integer"),
    _spec("send_email", to="string", body="string"),
]


@capture.tool
def lookup_order(order_id: str) -> dict[str, Any]:
    """The order, from the shop's database (I/O: served in a replay)."""
    sku = "SKU-1" if "lookup" in CHANGES else f"SKU-{int(order_id) % 3 + 1}"
    return {"order_id": order_id, "sku": sku}


@capture.tool(pure=True)
def check_stock(sku: str, quantity: int) -> dict[str, Any]:
    """Whether ``quantity`` units are in stock (pure: run and compared in a replay)."""
    units = STOCK.get(sku, 0)
    if "stock" in CHANGES:  # the fix: units held for other orders are not in stock
        units -= RESERVED.get(sku, 0)
    enough = units >= quantity
    return {"sku": sku, "in_stock": enough}


@capture.tool(side_effects=True)
def send_email(to: str, body: str) -> str:
    """E-mail the customer (side effects: never run in a replay)."""
    OUTBOX.append(f"{to}: {body}")
    if os.environ.get("SUPPORT_OUTBOX"):  # a test that replays in another process reads it
        with open(os.environ["SUPPORT_OUTBOX"], "a", encoding="utf-8") as outbox:
            outbox.write(f"{to}: {body}\n")
    return "sent"


DISPATCH = {"lookup_order": lookup_order, "check_stock": check_stock, "send_email": send_email}


def _attempts() -> int:
    if "no-retry" in CHANGES:
        return 1
    return 2 if "two-tries" in CHANGES else 3


def ask(messages: list[dict[str, Any]], **options: Any) -> Any:
    """One model call, retried on a rate limit as tenacity's users write it."""
    for attempt in tenacity.Retrying(
        retry=tenacity.retry_if_exception_type(openai.RateLimitError),
        stop=tenacity.stop_after_attempt(_attempts()),
        wait=tenacity.wait_none(),
        reraise=True,
    ):
        with attempt:
            return client.chat.completions.create(model=MODEL, messages=messages, **options)
    raise AssertionError("tenacity returns or raises")  # pragma: no cover


@capture.entry
def answer(question: str) -> str:
    """Triage, then the tool loop; the fallback when the model cannot be reached."""
    try:
        triage = ask([{"role": "system", "content": TRIAGE}, {"role": "user", "content": question}])
        team = "orders" if triage.choices[0].message.tool_calls else "other"
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": f"{PROMPT} (team: {team})"},
            {"role": "user", "content": question},
        ]
        while True:
            reply = ask(messages, tools=TOOLS).choices[0].message
            if not reply.tool_calls:
                return str(reply.content)
            messages.append(reply.model_dump(exclude_none=True))
            for call in reply.tool_calls:
                result = DISPATCH[call.function.name](**json.loads(call.function.arguments))
                messages.append(
                    {"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)}
                )
    except openai.APIError:
        return fallback()


@capture.tool
async def find_order(order_id: str) -> dict[str, Any]:
    """`lookup_order` under another name: the model never calls ``find_order``."""
    return {"order_id": order_id, "sku": "SKU-1"}


@capture.entry
async def answer_misnamed(question: str) -> str:
    """Dispatches the model's ``lookup_order`` to `find_order` (a name it never uses)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": question}]
    reply = await aclient.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS)
    call = reply.choices[0].message.tool_calls[0]
    found = await find_order(**json.loads(call.function.arguments))
    return json.dumps(found)


@capture.entry
def first_reply(question: str) -> str:
    """One call, its error left to the caller (a 500 fails the session)."""
    reply = ask([{"role": "user", "content": question}], tools=TOOLS)
    return str(reply.choices[0].message.tool_calls[0].function.name)


@capture.entry
async def answer_streamed(question: str) -> str:
    """One streamed answer on the async client; the fallback when the stream breaks."""
    text = []
    try:
        stream = await aclient.chat.completions.create(
            model=MODEL,
            messages=[{"role": "system", "content": PROMPT}, {"role": "user", "content": question}],
            stream=True,
        )
        async for chunk in stream:
            for choice in chunk.choices:
                text.append(choice.delta.content or "")
    except openai.APIError:
        return fallback()
    return "".join(text)
