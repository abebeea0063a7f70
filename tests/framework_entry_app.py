"""pydantic-ai and Agents SDK agents inside a captured entry: the calling code is the user's.

The model's client is captured (`Capture.openai`) and the tools decorated, so a replay runs
`answer` itself: the history it trims, the settings and instructions it passes per run.
`CHANGE` plants an edit of that calling code.
"""

from __future__ import annotations

import json
from typing import Any

from agents import Agent as SdkAgent
from agents import ModelSettings, OpenAIChatCompletionsModel, RunConfig, Runner, function_tool
from openai import AsyncOpenAI
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from capture import Capture
from journal import Journal

capture = Capture(Journal.open(":memory:"))
CHANGE: set[str] = set()
OUTBOX: list[str] = []
agent: Any = None
sdk_agent: Any = None


@capture.tool
async def lookup_order(order_id: str) -> str:
    return json.dumps({"order_id": order_id, "sku": "SKU-2"})


@capture.tool(pure=True)
async def check_stock(sku: str, quantity: int) -> str:
    return json.dumps({"sku": sku, "in_stock": "stock" in CHANGE})


@capture.tool(side_effects=True)
async def send_email(to: str, body: str) -> str:
    OUTBOX.append(body)
    return "sent"


TOOLS = (lookup_order, check_stock, send_email)


def bind(journal: Journal, url: str) -> None:
    """Capture into ``journal``; both agents' models talk to ``url`` through one captured
    client."""
    global agent, sdk_agent
    capture.journal = journal
    client = capture.openai(AsyncOpenAI(base_url=url, api_key="local", max_retries=0))
    model = OpenAIChatModel("fake-1", provider=OpenAIProvider(openai_client=client))
    agent = Agent(model, instructions="You are the shop assistant.", tools=list(TOOLS))
    sdk_agent = SdkAgent(
        name="shop",
        instructions="You are the shop assistant.",
        model=OpenAIChatCompletionsModel("fake-1", openai_client=client),
        tools=[function_tool(tool) for tool in TOOLS],
    )


@capture.entry
async def answer(question: str) -> str:
    """Two runs: the second with a trimmed history, its own instructions and settings."""
    first = await agent.run(question, model_settings={"temperature": 0.2})
    keep = 4 if "trim" in CHANGE else 2
    brief = "Be very brief." if "instructions" in CHANGE else "Be brief."
    again = await agent.run(
        "And thanks.", message_history=first.all_messages()[-keep:], instructions=brief
    )
    return str(again.output)


@capture.entry
async def answer_sdk(question: str) -> str:
    """One Runner run with per-run settings."""
    settings = ModelSettings(temperature=0.7 if "temperature" in CHANGE else 0.2)
    config = RunConfig(tracing_disabled=True, model_settings=settings)
    result = await Runner.run(sdk_agent, question, run_config=config)
    return str(result.final_output)
