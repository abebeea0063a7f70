"""A support desk on the ``anthropic`` client, as a team writes it, captured at its boundaries.

Not part of agent-journal: the code a user owns. A tool loop over ``messages.create`` that
sends the model's content blocks back as they came (thinking blocks included) and answers
``tool_use`` with ``tool_result`` blocks; a tenacity retry on ``RateLimitError``; ``except
anthropic.APIStatusError: return FALLBACK``; the ``messages.stream`` helper
(``text_stream``, ``get_final_message``); ``create(stream=True)`` read event by event; the
same loop on ``AsyncAnthropic``. A tool that does I/O (served in a replay), a pure one (run
and compared), one with side effects (never run). `CHANGES` plants the edits a team makes.
"""

from __future__ import annotations

import json
import os
from typing import Any

import anthropic
import tenacity

from capture import Capture
from journal import Journal

capture = Capture(os.environ.get("ANTHROPIC_APP_JOURNAL", "anthropic-app.db"))
client: Any = None
aclient: Any = None

CHANGES: set[str] = set(os.environ.get("ANTHROPIC_APP_CHANGES", "").split())
"""Planted edits: ``prompt`` (another system prompt), ``no-retry``, ``fallback`` (another
fallback text), ``stock`` (a fix in the pure tool), ``lookup`` (a fix in the I/O tool),
``quantity`` (the code passes another quantity to the tool than the model asked)."""
OUTBOX: list[str] = []
"""What `send_email` sent (it must never grow in a replay)."""

MODEL = "claude-fake-1"
STOCK = {"SKU-1": 5, "SKU-2": 0, "SKU-3": 12}
RESERVED = {"SKU-3": 12}


def prompt() -> str:
    if "prompt" in CHANGES:
        return "You are the support desk. Be brief."
    return "You are the support desk. Look orders up, check stock, e-mail the customer."


def fallback() -> str:
    if "fallback" in CHANGES:
        return "The assistant is down; please write to help@example.com."
    return "Sorry, our assistant is unavailable; a human will answer shortly."


def connect(url: str) -> None:
    """The clients talk to ``url`` (they never retry on their own: `ask` does)."""
    global client, aclient
    client = capture.anthropic(anthropic.Anthropic(base_url=url, api_key="local", max_retries=0))
    aclient = capture.anthropic(
        anthropic.AsyncAnthropic(base_url=url, api_key="local", max_retries=0)
    )


def bind(journal: Journal, url: str) -> None:
    """Capture into ``journal``, the clients talking to ``url``."""
    capture.journal = journal
    connect(url)


connect(os.environ.get("ANTHROPIC_APP_URL", "http://127.0.0.1:9"))


def _tool(name: str, **properties: str) -> dict[str, Any]:
    schema = {"type": "object", "properties": {k: {"type": v} for k, v in properties.items()}}
    return {"name": name, "description": f"The shop's {name}.", "input_schema": schema}


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
    return {"sku": sku, "in_stock": units >= quantity}


@capture.tool(side_effects=True)
def send_email(to: str, body: str) -> str:
    """E-mail the customer (side effects: never run in a replay)."""
    OUTBOX.append(f"{to}: {body}")
    return "sent"


DISPATCH: dict[str, Any] = {
    "lookup_order": lookup_order,
    "check_stock": check_stock,
    "send_email": send_email,
}


def request(messages: list[Any], think: bool) -> dict[str, Any]:
    """The request the loop sends: cached system prompt, tools, tool choice, thinking."""
    sent: dict[str, Any] = {
        "model": MODEL,
        "max_tokens": 1024,
        "system": [{"type": "text", "text": prompt(), "cache_control": {"type": "ephemeral"}}],
        "tools": TOOLS,
        "tool_choice": {"type": "auto"},
        "messages": messages,
    }
    if think:
        sent["thinking"] = {"type": "enabled", "budget_tokens": 512}
    return sent


def run_tools(content: list[Any]) -> list[dict[str, Any]]:
    """The ``tool_result`` blocks answering a reply's ``tool_use`` blocks."""
    results = []
    for block in content:
        if block.type != "tool_use":
            continue
        args = dict(block.input)
        if "quantity" in CHANGES and "quantity" in args:
            args["quantity"] = 2
        result = DISPATCH[block.name](**args)
        results.append(
            {"type": "tool_result", "tool_use_id": block.id, "content": json.dumps(result)}
        )
    return results


def text_of(content: list[Any]) -> str:
    return "".join(block.text for block in content if block.type == "text")


def ask(messages: list[Any], think: bool) -> Any:
    """One model call, retried on a rate limit as tenacity's users write it."""
    for attempt in tenacity.Retrying(
        retry=tenacity.retry_if_exception_type(anthropic.RateLimitError),
        stop=tenacity.stop_after_attempt(1 if "no-retry" in CHANGES else 3),
        wait=tenacity.wait_none(),
        reraise=True,
    ):
        with attempt:
            return client.messages.create(**request(messages, think))
    raise AssertionError("tenacity returns or raises")  # pragma: no cover


@capture.entry
def answer(question: str, think: bool = False) -> str:
    """The tool loop on ``messages.create``; the fallback when the API fails."""
    messages: list[Any] = [{"role": "user", "content": question}]
    try:
        while True:
            reply = ask(messages, think)
            messages.append({"role": "assistant", "content": reply.content})
            results = run_tools(reply.content)
            if not results:
                return text_of(reply.content)
            messages.append({"role": "user", "content": results})
    except anthropic.APIStatusError:
        return fallback()


@capture.entry
def answer_streamed(question: str, think: bool = False) -> str:
    """The loop on the ``messages.stream`` helper: text as it comes, then the final message."""
    messages: list[Any] = [{"role": "user", "content": question}]
    shown: list[str] = []
    try:
        while True:
            with client.messages.stream(**request(messages, think)) as stream:
                shown.extend(stream.text_stream)
                final = stream.get_final_message()
            messages.append({"role": "assistant", "content": final.content})
            results = run_tools(final.content)
            if not results:
                return "".join(shown)
            messages.append({"role": "user", "content": results})
    except anthropic.APIStatusError:
        return fallback()


@capture.entry
def answer_events(question: str) -> str:
    """The loop on ``create(stream=True)``, its events read one by one."""
    messages: list[Any] = [{"role": "user", "content": question}]
    try:
        while True:
            content: list[dict[str, Any]] = []
            for event in client.messages.create(**request(messages, False), stream=True):
                if event.type == "content_block_start":
                    content.append(event.content_block.model_dump(exclude_none=True))
                elif event.type == "content_block_delta" and event.delta.type == "text_delta":
                    content[event.index]["text"] += event.delta.text
                elif event.type == "content_block_delta" and event.delta.type == "input_json_delta":
                    block = content[event.index]
                    block["json"] = block.get("json", "") + event.delta.partial_json
            for block in content:
                if "json" in block:
                    block["input"] = json.loads(block.pop("json"))
            messages.append({"role": "assistant", "content": content})
            blocks = [anthropic.types.ToolUseBlock(**b) for b in content if b["type"] == "tool_use"]
            results = run_tools(blocks)
            if not results:
                return "".join(b.get("text", "") for b in content)
            messages.append({"role": "user", "content": results})
    except anthropic.APIStatusError:
        return fallback()


@capture.entry
async def answer_async(question: str, think: bool = False) -> str:
    """The loop of `answer` on ``AsyncAnthropic``."""
    messages: list[Any] = [{"role": "user", "content": question}]
    try:
        while True:
            reply = await aclient.messages.create(**request(messages, think))
            messages.append({"role": "assistant", "content": reply.content})
            results = run_tools(reply.content)
            if not results:
                return text_of(reply.content)
            messages.append({"role": "user", "content": results})
    except anthropic.APIStatusError:
        return fallback()


@capture.entry
async def answer_async_streamed(question: str) -> str:
    """The ``messages.stream`` helper on ``AsyncAnthropic``, one call."""
    async with aclient.messages.stream(
        **request([{"role": "user", "content": question}], False)
    ) as stream:
        async for _ in stream:
            pass
        final = await stream.get_final_message()
    return json.dumps([block.model_dump(exclude_none=True) for block in final.content])
