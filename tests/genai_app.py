"""A support desk on the ``google-genai`` client, as a team writes it, captured at its boundaries.

Not part of agent-journal: the code a user owns. A function-calling loop over
``client.models.generate_content`` with ``types.GenerateContentConfig`` (a system
instruction, function declarations, a ``tool_config``, thinking on request) that sends the
model's content back as it came (thought signatures included) and answers each
``function_call`` with a ``Part.from_function_response``; a tenacity retry on the 429
``errors.ClientError``; ``except errors.APIError: return FALLBACK``; the loop on
``generate_content_stream``, chunk by chunk; the same loop on ``client.aio.models``. A tool
that does I/O (served in a replay), a pure one (run and compared), one with side effects
(never run). `CHANGES` plants the edits a team makes.
"""

from __future__ import annotations

import os
from typing import Any

import tenacity
from google import genai
from google.genai import errors, types

from capture import Capture
from journal import Journal

capture = Capture(os.environ.get("GENAI_APP_JOURNAL", "genai-app.db"))
client: Any = None

CHANGES: set[str] = set(os.environ.get("GENAI_APP_CHANGES", "").split())
"""Planted edits: ``prompt`` (another system instruction), ``no-retry``, ``fallback``
(another fallback text), ``stock`` (a fix in the pure tool), ``lookup`` (a fix in the I/O
tool), ``quantity`` (the code passes another quantity to the tool than the model asked),
``temperature`` (another generation setting)."""
OUTBOX: list[str] = []
"""What `send_email` sent (it must never grow in a replay)."""

MODEL = "gemini-fake-1"
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
    """The client talks to ``url`` (it never retries on its own: `ask` does)."""
    global client
    client = capture.genai(
        genai.Client(api_key="local", http_options=types.HttpOptions(base_url=url))
    )


def bind(journal: Journal, url: str) -> None:
    """Capture into ``journal``, the client talking to ``url``."""
    capture.journal = journal
    connect(url)


connect(os.environ.get("GENAI_APP_URL", "http://127.0.0.1:9"))


def _declaration(name: str, **properties: str) -> types.FunctionDeclaration:
    schema = {"type": "object", "properties": {k: {"type": v} for k, v in properties.items()}}
    return types.FunctionDeclaration(
        name=name, description=f"The shop's {name}.", parameters_json_schema=schema
    )


TOOLS = [
    types.Tool(
        function_declarations=[
            _declaration("lookup_order", order_id="string"),
            _declaration("check_stock", sku="string", quantity="integer"),
            _declaration("send_email", to="string", body="string"),
        ]
    )
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


def config(think: bool) -> types.GenerateContentConfig:
    """The config the loop sends: system instruction, tools, tool config, thinking."""
    return types.GenerateContentConfig(
        system_instruction=prompt(),
        tools=TOOLS,
        tool_config=types.ToolConfig(
            function_calling_config=types.FunctionCallingConfig(
                mode=types.FunctionCallingConfigMode.AUTO
            )
        ),
        temperature=0.5 if "temperature" in CHANGES else 0.0,
        thinking_config=types.ThinkingConfig(include_thoughts=True) if think else None,
    )


def run_tools(parts: list[types.Part]) -> list[types.Part]:
    """The ``function_response`` parts answering a reply's ``function_call`` parts."""
    results = []
    for part in parts:
        call = part.function_call
        if call is None or call.name is None:
            continue
        args = dict(call.args or {})
        if "quantity" in CHANGES and "quantity" in args:
            args["quantity"] = 2
        result = DISPATCH[call.name](**args)
        results.append(
            types.Part.from_function_response(name=call.name, response={"result": result})
        )
    return results


def text_of(parts: list[types.Part]) -> str:
    return "".join(part.text or "" for part in parts if not part.thought)


def ask(contents: list[types.Content], think: bool) -> types.GenerateContentResponse:
    """One model call, retried on a rate limit as tenacity's users write it."""
    for attempt in tenacity.Retrying(
        retry=tenacity.retry_if_exception(
            lambda e: isinstance(e, errors.ClientError) and e.code == 429
        ),
        stop=tenacity.stop_after_attempt(1 if "no-retry" in CHANGES else 3),
        wait=tenacity.wait_none(),
        reraise=True,
    ):
        with attempt:
            return client.models.generate_content(
                model=MODEL, contents=contents, config=config(think)
            )
    raise AssertionError("tenacity returns or raises")  # pragma: no cover


def _question(question: str) -> list[types.Content]:
    return [types.Content(role="user", parts=[types.Part.from_text(text=question)])]


@capture.entry
def answer(question: str, think: bool = False) -> str:
    """The function-calling loop on ``generate_content``; the fallback when the API fails."""
    contents = _question(question)
    try:
        while True:
            reply = ask(contents, think)
            content = reply.candidates[0].content
            contents.append(content)
            results = run_tools(content.parts or [])
            if not results:
                return text_of(content.parts or [])
            contents.append(types.Content(role="user", parts=results))
    except errors.APIError:
        return fallback()


@capture.entry
def answer_streamed(question: str, think: bool = False) -> str:
    """The loop on ``generate_content_stream``: text as it comes, parts gathered."""
    contents = _question(question)
    shown: list[str] = []
    try:
        while True:
            parts: list[types.Part] = []
            for chunk in client.models.generate_content_stream(
                model=MODEL, contents=contents, config=config(think)
            ):
                pieces = chunk.candidates[0].content.parts or []
                shown.append(text_of(pieces))
                parts.extend(pieces)
            contents.append(types.Content(role="model", parts=parts))
            results = run_tools(parts)
            if not results:
                return "".join(shown)
            contents.append(types.Content(role="user", parts=results))
    except errors.APIError:
        return fallback()


@capture.entry
async def answer_async(question: str, think: bool = False) -> str:
    """The loop of `answer` on ``client.aio.models``."""
    contents = _question(question)
    try:
        while True:
            reply = await client.aio.models.generate_content(
                model=MODEL, contents=contents, config=config(think)
            )
            content = reply.candidates[0].content
            contents.append(content)
            results = run_tools(content.parts or [])
            if not results:
                return text_of(content.parts or [])
            contents.append(types.Content(role="user", parts=results))
    except errors.APIError:
        return fallback()


@capture.entry
async def answer_async_streamed(question: str, think: bool = False) -> str:
    """The loop of `answer_streamed` on ``client.aio.models``."""
    contents = _question(question)
    shown: list[str] = []
    try:
        while True:
            parts: list[types.Part] = []
            stream = await client.aio.models.generate_content_stream(
                model=MODEL, contents=contents, config=config(think)
            )
            async for chunk in stream:
                pieces = chunk.candidates[0].content.parts or []
                shown.append(text_of(pieces))
                parts.extend(pieces)
            contents.append(types.Content(role="model", parts=parts))
            results = run_tools(parts)
            if not results:
                return "".join(shown)
            contents.append(types.Content(role="user", parts=results))
    except errors.APIError:
        return fallback()


@capture.entry
def answer_chat(question: str) -> str:
    """The loop on a chat (``client.chats.create``: the SDK keeps the history)."""
    chat = client.chats.create(model=MODEL, config=config(False))
    try:
        reply = chat.send_message(question)
        while True:
            parts = reply.candidates[0].content.parts or []
            results = run_tools(parts)
            if not results:
                return text_of(parts)
            reply = chat.send_message(results)
    except errors.APIError:
        return fallback()
