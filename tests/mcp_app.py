"""A support desk whose tools are an MCP server's, as a team writes it, captured at its boundaries.

Not part of agent-journal: the code a user owns. The model is the ``openai`` client
(``AsyncOpenAI``) on `tests.fake_openai`; the tools are those of `tests.mcp_tools_server`,
reached over stdio through an ``mcp.ClientSession``: listed once (``list_tools``, their
specs shown to the model), called as the model proposes them (``call_tool``). An ``isError``
result and an ``MCPError`` are sent back to the model as errors. `answer` opens the
session with ``capture.mcp_stdio``; `answer_own_session` opens it itself and wraps it with
``capture.mcp``. `CHANGES` plants the edits a team makes.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import openai
from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client
from mcp.types import CallToolResult

from capture import Capture
from journal import Journal

capture = Capture(os.environ.get("MCP_APP_JOURNAL", "mcp-app.db"))
client: Any = None

CHANGES: set[str] = set(os.environ.get("MCP_APP_CHANGES", "").split())
"""Planted edits: ``prompt`` (another system prompt), ``fix`` (the loop turns a quantity
the model wrote as a string into a number before it calls the tool)."""

SERVER = Path(__file__).with_name("mcp_tools_server.py")
COMMAND = [sys.executable, str(SERVER)]
"""How the server starts (a test points it at nothing to show a replay needs none)."""
PASSED = ("MCP_OUTBOX", "MCP_STARTS", "MCP_SERVER_CHANGES")
"""The variables the server is given (an stdio server gets a bare environment)."""

PURE = {"check_stock"}
IO = {"lookup_order"}
MODEL = "fake-1"


def connect(url: str) -> None:
    """The model client talks to ``url`` (it never retries on its own)."""
    global client
    client = capture.openai(openai.AsyncOpenAI(base_url=url, api_key="local", max_retries=0))


def bind(journal: Journal, url: str) -> None:
    """Capture into ``journal``, the model client talking to ``url``."""
    capture.journal = journal
    connect(url)


connect(os.environ.get("MCP_APP_URL", "http://127.0.0.1:9/v1"))


def server() -> StdioServerParameters:
    """The shop's server, as the app starts it."""
    env = {name: os.environ[name] for name in PASSED if name in os.environ}
    return StdioServerParameters(command=COMMAND[0], args=COMMAND[1:], env=env)


def prompt() -> str:
    if "prompt" in CHANGES:
        return "You are the support desk. Be brief."
    return "You are the support desk. Look orders up, check stock, e-mail the customer."


def specs(listed: Any) -> list[dict[str, Any]]:
    """The server's tools as the model is shown them."""
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description or "",
                "parameters": tool.input_schema,
            },
        }
        for tool in listed.tools
    ]


def as_text(result: CallToolResult) -> str:
    """A tool's result as the tool message's content: its structured content, else its text."""
    text = " ".join(block.text for block in result.content if block.type == "text")
    if result.is_error:
        return json.dumps({"error": text})
    if result.structured_content is not None:
        found = result.structured_content
        return json.dumps(found.get("result", found) if isinstance(found, dict) else found)
    return text


async def run_loop(shop: Any, question: str) -> str:
    """The tool loop: the model proposes, the MCP server's tools answer."""
    tools = specs(await shop.list_tools())
    messages: list[Any] = [
        {"role": "system", "content": prompt()},
        {"role": "user", "content": question},
    ]
    while True:
        reply = await client.chat.completions.create(model=MODEL, messages=messages, tools=tools)
        message = reply.choices[0].message
        if not message.tool_calls:
            return str(message.content or "")
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            args = json.loads(call.function.arguments)
            if "fix" in CHANGES and isinstance(args.get("quantity"), str):
                args["quantity"] = int(args["quantity"])
            try:
                text = as_text(await shop.call_tool(call.function.name, args))
            except MCPError as error:  # the server refused the call
                text = json.dumps({"error": error.message, "code": error.code})
            messages.append({"role": "tool", "tool_call_id": call.id, "content": text})


@capture.entry
async def answer(question: str) -> str:
    """Answer one question with the shop's MCP tools (the session opened by the capture)."""
    async with capture.mcp_stdio(server(), pure=PURE, io=IO) as shop:
        return await run_loop(shop, question)


@capture.entry
async def answer_own_session(question: str) -> str:
    """The same, on a session the code opens itself and hands to ``capture.mcp``."""
    async with stdio_client(server()) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            return await run_loop(capture.mcp(session, pure=PURE, io=IO), question)
