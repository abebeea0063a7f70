"""pydantic-ai and the Agents SDK on the real openai client over a local HTTP server: what
the agent sends the model is journaled beside each response, so a replay whose code sends
something else (a history processor, an input filter, instructions that change mid-run)
diverges at that response instead of being served the recording as if nothing changed.

The model is `tests/fake_openai.py`'s policy; the server is stopped before each replay.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from agents import Agent as SdkAgent
from agents import OpenAIResponsesModel, RunConfig, Runner, function_tool, set_tracing_disabled
from agents.run import CallModelData, ModelInputData
from openai import AsyncOpenAI
from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from agentloop import AgentLoopError
from capture import Recorder
from capture.frameworks import ModelRequests
from journal import ActionProposed, Journal
from replay import ReplayOptions
from replay.integrations import openai_agents, pydantic_ai

from .fake_openai import Handler, serving

set_tracing_disabled(True)

QUESTION = "Is order 7 in stock? I want a unit."
SENT: list[str] = []


def lookup_order(order_id: str) -> str:
    """An order's SKU."""
    return json.dumps({"order_id": order_id, "sku": f"SKU-{order_id}"})


def check_stock(sku: str, quantity: int) -> str:
    """Units of a SKU in stock."""
    return json.dumps({"sku": sku, "in_stock": quantity + 2})


def send_email(to: str, body: str) -> str:
    """Send an e-mail (a side effect)."""
    SENT.append(to)
    return "sent"


TOOLS = [lookup_order, check_stock, send_email]


def last_only(messages: list[ModelMessage]) -> list[ModelMessage]:
    """A history processor that sends the model the last message alone."""
    return messages[-1:]


def client(url: str) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=url, api_key="local", max_retries=0)


def pydantic_agent(url: str, *, processed: bool = False) -> Agent[None, str]:
    model = OpenAIChatModel("fake-1", provider=OpenAIProvider(openai_client=client(url)))
    capabilities = [ProcessHistory(last_only)] if processed else []
    return Agent(model, instructions="Shop assistant.", tools=TOOLS, capabilities=capabilities)


def sdk_agent(url: str) -> SdkAgent[Any]:
    return SdkAgent(
        name="shop",
        instructions="Shop assistant.",
        model=OpenAIResponsesModel("fake-1", client(url)),
        tools=[function_tool(tool) for tool in TOOLS],
    )


async def run_pydantic(agent: Agent[None, str], capture: pydantic_ai.JournalCapability) -> str:
    async with agent:  # closes the model's client
        return (await agent.run(QUESTION, capabilities=[capture])).output


async def run_sdk(agent: SdkAgent[Any], hooks: openai_agents.JournalRunHooks) -> str:
    answer = str((await Runner.run(agent, QUESTION, hooks=hooks)).final_output)
    model = agent.model
    assert isinstance(model, OpenAIResponsesModel)
    await model._client.close()
    return answer


def proposals(journal: Journal, session: str) -> list[ActionProposed]:
    return [i.event for i in journal.events(session) if isinstance(i.event, ActionProposed)]


def test_a_pydantic_ai_history_processor_diverges_where_it_changes_what_the_model_is_sent(
    journal: Journal,
) -> None:
    with serving() as url, Recorder(journal, "pa") as recorder:
        capture = pydantic_ai.JournalCapability(recorder)
        answer = asyncio.run(run_pydantic(pydantic_agent(url), capture))
    assert answer == "Order 7 is in stock; I e-mailed you."
    requests = [p.request for p in proposals(journal, "pa")]
    assert [r is not None for r in requests] == [True] * 4
    assert requests[1] is not None and requests[1]["from"] == 1  # the new messages only

    # the server is gone: the recording answers
    assert pydantic_ai.replay_agent(journal, "pa", pydantic_agent(url)).identical
    # a history processor that keeps the last message: the first request is the same, the
    # second is not (the model would have seen the tool result alone)
    result = pydantic_ai.replay_agent(journal, "pa", pydantic_agent(url, processed=True))
    assert result.first_divergence is not None
    assert result.first_divergence.seq == 4
    assert "request" in result.first_divergence.reason


def test_an_agents_sdk_input_filter_diverges_where_it_changes_what_the_model_is_sent(
    journal: Journal,
) -> None:
    with serving() as url, Recorder(journal, "sdk") as recorder:
        answer = asyncio.run(run_sdk(sdk_agent(url), openai_agents.JournalRunHooks(recorder)))
    assert answer == "Order 7 is in stock; I e-mailed you."
    assert all(p.request is not None for p in proposals(journal, "sdk"))

    assert openai_agents.replay_agent(journal, "sdk", sdk_agent(url)).identical

    def drop_history(data: CallModelData[Any]) -> ModelInputData:
        given = data.model_data
        return ModelInputData(input=given.input[-1:], instructions=given.instructions)

    config = RunConfig(call_model_input_filter=drop_history)
    result = openai_agents.replay_agent(journal, "sdk", sdk_agent(url), run_config=config)
    assert result.first_divergence is not None
    assert result.first_divergence.seq == 4
    assert "request" in result.first_divergence.reason


@pytest.mark.parametrize("integration", ["pydantic-ai", "openai-agents"])
@pytest.mark.parametrize("form", [None, "an older form"])
def test_a_session_captured_without_requests_or_in_another_form_replays_identical(
    journal: Journal, integration: str, form: str | None
) -> None:
    """Sessions journaled before requests were (or in another form, by another version):
    their replay journals none, so that nothing is compared that was never comparable."""
    requests: ModelRequests
    with serving() as url, Recorder(journal, "old") as recorder:
        if integration == "pydantic-ai":
            capture = pydantic_ai.JournalCapability(recorder)
            requests = capture.requests
            run: Any = run_pydantic(pydantic_agent(url), capture)
        else:
            hooks = openai_agents.JournalRunHooks(recorder)
            requests = hooks.requests
            run = run_sdk(sdk_agent(url), hooks)
        requests.enabled = form is not None
        requests.form = form or ""
        asyncio.run(run)
    recorded = [p.request for p in proposals(journal, "old")]
    assert all((r is None) == (form is None) for r in recorded)
    if integration == "pydantic-ai":
        result = pydantic_ai.replay_agent(journal, "old", pydantic_agent(url), save=True)
    else:
        result = openai_agents.replay_agent(journal, "old", sdk_agent(url), save=True)
    assert result.identical, result.first_divergence
    assert all(p.request is None for p in proposals(journal, result.replay_session_id))


@pytest.mark.parametrize("integration", ["pydantic-ai", "openai-agents"])
def test_a_live_tool_the_agent_does_not_have_is_refused_by_name(
    journal: Journal, integration: str
) -> None:
    """A typo in --live-tool would replay the tool from the recording, the user none the wiser."""
    url = "http://127.0.0.1:9/v1"  # nothing is asked: the name is refused first
    with pytest.raises(AgentLoopError) as refused:
        if integration == "pydantic-ai":
            pydantic_ai.replay_agent(
                journal, "none", pydantic_agent(url), ReplayOptions(live_tools=["lookup_ordr"])
            )
        else:
            openai_agents.replay_agent(
                journal, "none", sdk_agent(url), ReplayOptions(live_tools=["lookup_ordr"])
            )
    assert str(refused.value) == (
        "no tool 'lookup_ordr' in this agent (tools: check_stock, lookup_order, send_email)"
    )


class Chatty(Handler):
    """Responses API answers whose calls come between two messages, as some models send."""

    def _json(self, value: dict[str, Any]) -> None:
        output = value.get("output")
        if value.get("object") == "response" and isinstance(output, list):
            if any(item.get("type") == "function_call" for item in output):

                def said(text: str, n: int) -> dict[str, Any]:
                    content = [{"type": "output_text", "text": text, "annotations": []}]
                    return {
                        "type": "message",
                        "id": f"msg_{n}",
                        "role": "assistant",
                        "status": "completed",
                        "content": content,
                    }

                value["output"] = [said("Let me check", 1), *output, said(", one moment.", 2)]
        super()._json(value)


def test_a_response_of_several_messages_replays_identical(journal: Journal) -> None:
    """A replay serves a response as the journal keeps it (one text, then the calls); the
    history the agent then sends holds it so, and is compared in that form."""
    with serving(Chatty) as url, Recorder(journal, "chatty") as recorder:
        answer = asyncio.run(run_sdk(sdk_agent(url), openai_agents.JournalRunHooks(recorder)))
    assert answer == "Order 7 is in stock; I e-mailed you."
    first = proposals(journal, "chatty")[0]
    assert first.text == "Let me check, one moment."
    result = openai_agents.replay_agent(journal, "chatty", sdk_agent(url))
    assert result.identical, result.first_divergence
