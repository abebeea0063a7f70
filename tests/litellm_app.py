"""A shop assistant on LiteLLM, as a team writes it, captured at its boundaries.

Not part of agent-journal: the code a user owns. `capture.litellm()` once; then each entry
is a session in which ``litellm.completion`` and ``litellm.acompletion`` are journaled,
wherever they are called from: `solve` hands the question to an upstream harness
(`tests.litellm_harness`) that calls ``litellm.completion`` itself; `answer` is the
team's own tool loop, a tenacity retry on ``litellm.RateLimitError`` and ``except
litellm.InternalServerError: return FALLBACK``; `answer_streamed` reads ``stream=True``
chunks and joins them with ``litellm.stream_chunk_builder``; `answer_async` and
`answer_async_streamed` do the same on ``litellm.acompletion``. The model is
``openai/fake-1`` at ``api_base`` (the tests' OpenAI-compatible server). A tool that does
I/O (served in a replay), a pure one (run and compared), one with side effects (never
run). `CHANGES` plants the edits a team makes.
"""

from __future__ import annotations

import json
import os
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no cost map download

import litellm  # noqa: E402
import tenacity  # noqa: E402

from capture import Capture  # noqa: E402
from journal import Journal  # noqa: E402

from . import litellm_harness  # noqa: E402

litellm.suppress_debug_info = True

capture = Capture(os.environ.get("LITELLM_APP_JOURNAL", "litellm-app.db"))
capture.litellm()

API_BASE = os.environ.get("LITELLM_APP_URL", "http://127.0.0.1:9/v1")
MODEL = "openai/fake-1"
CHANGES: set[str] = set(os.environ.get("LITELLM_APP_CHANGES", "").split())
"""Planted edits: ``prompt`` (another system prompt), ``no-retry``, ``fallback`` (another
fallback text), ``stock`` (a fix in the pure tool), ``lookup`` (a fix in the I/O tool),
``quantity`` (the loop passes another quantity than the model asked), ``format`` (the
loop sends tool results back in another format)."""
OUTBOX: list[str] = []
"""What `send_email` sent (it must never grow in a replay)."""

STOCK = {"SKU-1": 5, "SKU-2": 0, "SKU-3": 12}
RESERVED = {"SKU-3": 12}


def bind(journal: Journal, url: str) -> None:
    """Capture into ``journal``, the calls going to ``url``."""
    global API_BASE
    capture.journal = journal
    API_BASE = url


def prompt() -> str:
    if "prompt" in CHANGES:
        return "You are the shop's assistant. Be brief."
    return "You are the shop's assistant. Look orders up, check stock, e-mail the customer."


def fallback() -> str:
    if "fallback" in CHANGES:
        return "The assistant is down; please write to help@example.com."
    return "Sorry, our assistant is unavailable; a human will answer shortly."


def _tool(name: str, **properties: str) -> dict[str, Any]:
    schema = {"type": "object", "properties": {k: {"type": v} for k, v in properties.items()}}
    return {
        "type": "function",
        "function": {"name": name, "description": f"The shop's {name}.", "parameters": schema},
    }


TOOLS = [
    _tool("lookup_order", order_id="string"),
    _tool("check_stock", sku="string", quantity="integer"),
    _tool("send_email", to="string", body="string"),
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
    if "stock" in CHANGES:
        units -= RESERVED.get(sku, 0)
    return {"sku": sku, "in_stock": units >= int(quantity)}


@capture.tool(side_effects=True)
def send_email(to: str, body: str) -> str:
    """E-mail the customer (side effects: never run in a replay)."""
    OUTBOX.append(f"{to}: {body}")
    return "sent"


FUNCTIONS: dict[str, Any] = {
    "lookup_order": lookup_order,
    "check_stock": check_stock,
    "send_email": send_email,
}

USAGE = {"include_usage": True}
"""The streams' ``stream_options``: the usage comes in a last chunk."""

UNAVAILABLE = (litellm.InternalServerError, litellm.ServiceUnavailableError)
"""What the loops catch and answer with the fallback (a 500; a stream cut mid-way)."""


def request(messages: list[Any]) -> dict[str, Any]:
    """The arguments of every call: the model, the tools, where the server is."""
    return {
        "model": MODEL,
        "messages": messages,
        "tools": TOOLS,
        "temperature": 0,
        "api_base": API_BASE,
        "api_key": "sk-local-secret",
        "max_retries": 0,
    }


def start(question: str) -> list[Any]:
    return [{"role": "system", "content": prompt()}, {"role": "user", "content": question}]


def run_tools(message: Any, messages: list[Any]) -> bool:
    """Append the assistant message and its tools' results; False when it called none."""
    messages.append(message.model_dump(exclude_none=True))
    for call in message.tool_calls or []:
        args = json.loads(call.function.arguments)
        if "quantity" in CHANGES and "quantity" in args:
            args["quantity"] = 2
        result = FUNCTIONS[call.function.name](**args)
        content = json.dumps(result, indent=1 if "format" in CHANGES else None)
        messages.append({"role": "tool", "tool_call_id": call.id, "content": content})
    return bool(message.tool_calls)


def ask(messages: list[Any]) -> Any:
    """One call, retried on a rate limit as tenacity's users write it."""
    for attempt in tenacity.Retrying(
        retry=tenacity.retry_if_exception_type(litellm.RateLimitError),
        stop=tenacity.stop_after_attempt(1 if "no-retry" in CHANGES else 3),
        wait=tenacity.wait_none(),
        reraise=True,
    ):
        with attempt:
            return litellm.completion(**request(messages))
    raise AssertionError("tenacity returns or raises")  # pragma: no cover


@capture.entry
def solve(question: str) -> str:
    """The upstream harness, unedited, on the shop's tools; the fallback when the API fails."""
    try:
        return litellm_harness.run(
            question,
            model=MODEL,
            system=prompt(),
            tools=TOOLS,
            functions=FUNCTIONS,
            api_base=API_BASE,
            api_key="sk-local-secret",
            max_retries=0,
        )
    except UNAVAILABLE:
        return fallback()


@capture.entry
def answer(question: str) -> str:
    """The team's own loop on ``litellm.completion``."""
    messages = start(question)
    try:
        while True:
            message = ask(messages).choices[0].message
            if not run_tools(message, messages):
                return str(message.content)
    except UNAVAILABLE:
        return fallback()


@capture.entry
def answer_streamed(question: str) -> str:
    """The loop on ``stream=True``: the chunks as they come, joined by litellm."""
    messages = start(question)
    try:
        while True:
            chunks = list(
                litellm.completion(**request(messages), stream=True, stream_options=USAGE)
            )
            joined = litellm.stream_chunk_builder(chunks, messages=messages)
            message = joined.choices[0].message
            if not run_tools(message, messages):
                return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    except UNAVAILABLE:
        return fallback()


@capture.entry
async def answer_async(question: str) -> str:
    """The loop of `answer` on ``litellm.acompletion``."""
    messages = start(question)
    try:
        while True:
            response = await litellm.acompletion(**request(messages))
            message = response.choices[0].message
            if not run_tools(message, messages):
                return str(message.content)
    except UNAVAILABLE:
        return fallback()


@capture.entry
async def answer_async_streamed(question: str) -> str:
    """The loop on ``acompletion(stream=True)``, read with ``async for``."""
    messages = start(question)
    try:
        while True:
            stream = await litellm.acompletion(
                **request(messages), stream=True, stream_options=USAGE
            )
            chunks = [chunk async for chunk in stream]
            message = litellm.stream_chunk_builder(chunks, messages=messages).choices[0].message
            if not run_tools(message, messages):
                return str(message.content)
    except UNAVAILABLE:
        return fallback()
