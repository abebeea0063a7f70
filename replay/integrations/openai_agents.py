"""OpenAI Agents SDK: replay a captured ``Runner`` run from the journal (the replay half).

Its sessions are journaled by `capture.frameworks.openai_agents.JournalRunHooks`.
`replay_agent` re-runs your agent with a `ReplayModel` serving the recorded responses in
order (set as the run's model, tracing off) and function tools served from the recording
(or run live, by name), then compares. A response the agent asks for that was never
recorded is a divergence naming the step. A streamed run (``Runner.run_streamed``) is
replayed through ``Runner.run``: the replay model does not stream.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import replace
from typing import Any

from agentloop import AgentLoadError
from capture import Recorder, as_return_type, missing_extra, return_type
from capture.frameworks.openai_agents import REQUEST_FORM, JournalRunHooks, ServedText
from journal import CAPTURED_WITH_KEY, Journal, RecordedEvent, describe_error
from journal.formats import parse_arguments

from .._captured import CapturedRun
from .._run import ForkPoint
from .._session import recorded_start
from .._verdict import ReplayResult
from ..handwritten import RecordedModel, RecordedToolPort, replay_loop
from ..options import ReplayOptions
from . import checked_live, compared_requests, first_requests, framework_live_model

try:
    from agents import Agent, FunctionTool, RunConfig, Runner, Tool
    from agents import ModelResponse as AgentsResponse
    from agents import Usage as AgentsUsage
    from agents.items import TResponseInputItem, TResponseStreamEvent
    from agents.models.interface import Model, ModelTracing
    from agents.models.multi_provider import MultiProvider
    from agents.tool_context import ToolContext
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputItem,
        ResponseOutputMessage,
        ResponseOutputText,
        ResponseReasoningItem,
    )
    from openai.types.responses.response_reasoning_item import Summary
    from openai.types.responses.response_usage import InputTokensDetails
except ImportError as error:  # pragma: no cover - exercised with the package hidden
    raise missing_extra("openai-agents", "openai-agents", error) from error

__all__ = ["ReplayModel", "replay_agent", "replay_captured"]


class ReplayModel(Model):
    """An Agents SDK model that serves a journal's recorded responses, in order.

    Args:
        llm: the replay's recorded model port (`replay.RecordedModel`).
    """

    def __init__(self, llm: RecordedModel) -> None:
        self._llm = llm

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: Any,
        tools: list[Tool],
        output_schema: Any,
        handoffs: list[Any],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: Any,
    ) -> AgentsResponse:
        """The next recorded response, or the live model's off the record.

        Raises:
            HaltSession: off the record with no live model (the replay stops there).
        """
        served = self._llm(
            system_instructions,
            input,
            model_settings,
            tools,
            output_schema,
            handoffs,
            tracing,
            previous_response_id=previous_response_id,
            conversation_id=conversation_id,
            prompt=prompt,
        )
        if inspect.isawaitable(served):  # the live model answered
            live: AgentsResponse = await served
            return live
        output = served
        items: list[ResponseOutputItem] = []
        if output.reasoning:
            summary = [Summary(text=output.reasoning, type="summary_text")]
            items.append(ResponseReasoningItem(id="rs-replay", summary=summary, type="reasoning"))
        if output.text:
            text = ResponseOutputText(text=output.text, type="output_text", annotations=[])
            items.append(
                ResponseOutputMessage(
                    id="msg-replay",
                    content=[text],
                    role="assistant",
                    status="completed",
                    type="message",
                )
            )
        items.extend(
            ResponseFunctionToolCall(
                arguments=call.with_text().arguments or "",
                call_id=call.call_id,
                name=call.tool,
                type="function_call",
            )
            for call in output.calls
        )
        usage = output.usage
        return AgentsResponse(
            output=items,
            usage=AgentsUsage(
                requests=1,
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                total_tokens=usage.input_tokens + usage.output_tokens,
                input_tokens_details=InputTokensDetails(
                    cached_tokens=usage.cached_tokens, cache_write_tokens=0
                ),
            ),
            response_id=None,
        )

    async def stream_response(
        self, *args: Any, **kwargs: Any
    ) -> AsyncIterator[TResponseStreamEvent]:
        """Streamed runs are not replayed: use ``Runner.run``."""
        raise NotImplementedError("agent-journal replays Runner.run, not streamed runs")
        yield  # pragma: no cover


def _as_served(recorded: Any, returns: Any, sent: object) -> Any:
    """A recorded tool result as the replayed tool returns it.

    As the tool's declared return type (a pydantic model, a dataclass), as it returned it.
    The SDK sends the model ``str()`` of a tool's output: where that of the typed result is
    not the text the recording sent (``sent``; a tool that declares no type and returned a
    model), the result is served as that text, so the model is sent what it was.
    """
    typed = as_return_type(recorded, returns)
    if not isinstance(sent, str) or str(typed) == sent:
        return typed
    served = ServedText(sent)
    served.recorded = recorded
    return served


def _sent_outputs(recorded: Iterable[RecordedEvent]) -> dict[str, object]:
    """What the recorded model requests sent of each call's output, by call id."""
    sent: dict[str, object] = {}
    for item in recorded:
        request = getattr(item.event, "request", None)
        messages = request.get("messages") if isinstance(request, dict) else None
        for message in messages if isinstance(messages, list) else ():
            if isinstance(message, dict) and message.get("type") == "function_call_output":
                sent[str(message.get("call_id"))] = message.get("output")
    return sent


def _served(
    tool: FunctionTool, tools: RecordedToolPort, sent: Mapping[str, object]
) -> FunctionTool:
    """A copy of ``tool`` whose calls the replay's tool port serves (or runs and compares).

    A served result is handed back as `_as_served` makes it.
    """
    invoke = tool.on_invoke_tool
    wrapped = getattr(tool, "__wrapped__", None)  # the function of @function_tool
    returns = inspect.Signature.empty if wrapped is None else return_type(wrapped)

    async def served(context: ToolContext[Any], raw: str) -> Any:
        args, _ = parse_arguments(raw)
        ran = False

        async def live() -> Any:
            nonlocal ran
            ran = True
            return await invoke(context, raw)

        result = await tools.arun(tool.name, args if isinstance(args, dict) else {}, live)
        return result if ran else _as_served(result, returns, sent.get(context.tool_call_id))

    replaced = copy.copy(tool)
    replaced.on_invoke_tool = served
    return replaced


def _with_recorded_tools(
    agent: Agent[Any],
    tools: RecordedToolPort,
    sent: Mapping[str, object],
    done: dict[int, Agent[Any]],
) -> Agent[Any]:
    """A clone of ``agent`` (and of the agents it hands off to) with its tools served."""
    if id(agent) in done:
        return done[id(agent)]
    clone = agent.clone()
    done[id(agent)] = clone
    clone.tools = [
        _served(t, tools, sent) if isinstance(t, FunctionTool) else t for t in agent.tools
    ]
    clone.handoffs = [
        _with_recorded_tools(h, tools, sent, done) if isinstance(h, Agent) else h
        for h in agent.handoffs
    ]
    return clone


def replay_agent(
    journal: Journal,
    session_id: str,
    agent: Agent[Any],
    options: ReplayOptions | None = None,
    *,
    run_config: RunConfig | None = None,
    reference: str | None = None,
    save: bool | ForkPoint = False,
) -> ReplayResult:
    """Re-run ``agent`` on a captured session's user inputs and compare with the recording.

    Each recorded user input is one ``Runner.run`` (the previous run's items as history),
    with a `ReplayModel` as the run's model, tracing off, and a `JournalRunHooks` writing
    to a scratch journal. A run starts with the agent that made the turn's first recorded
    request: ``agent``, or one it hands off to that the code went on with (such as
    ``result.last_agent``).

    Args:
        journal: the journal holding the session.
        session_id: the captured session.
        agent: your agent, unchanged (a clone with served tools runs the replay).
        options: how the replay runs (`ReplayOptions`): the tools to run for real
            (``live_tools``; others come from the recording); what answers where no
            recorded response fits (``live_model``: the agent diverged, or asks past the
            recording; the tools then run for real too): an Agents SDK model, a
            ``module:factory`` returning one, ``"agent"`` or True for the agent's own model
            (the SDK's default when it names none); without one the replay stops there;
            the comparison rules.
        run_config: your run configuration, if any (its model is replaced).
        reference: the agent reference to journal (default: the recorded one).
        save: keep the replay in ``journal``; a `ForkPoint` keeps it as a fork instead.

    Raises:
        AgentLoopError: a tool named live that the agent does not have.
        AgentLoadError: ``agent`` is not an Agents SDK Agent.
        SessionNotFoundError: no such session.
    """
    if not isinstance(agent, Agent):
        raise AgentLoadError(f"{type(agent).__name__} is not an Agents SDK Agent")
    options = options or ReplayOptions()
    checked_live(options.live_tools, _tool_names(agent, set()))
    started = recorded_start(journal, session_id)
    metadata = {k: v for k, v in started.metadata.items() if k != CAPTURED_WITH_KEY}
    answering = _live_model(agent, framework_live_model(options.live_model), run_config)
    requests, rules = compared_requests(journal, session_id, REQUEST_FORM, options.rules)
    recorded = list(journal.events(session_id))
    sent = _sent_outputs(recorded)
    starts = _turn_agents(recorded)

    async def run(
        llm: RecordedModel, tools: RecordedToolPort, recorder: Recorder, inputs: list[str]
    ) -> None:
        hooks = JournalRunHooks(recorder, agent=reference or started.agent, metadata=metadata)
        hooks.requests.enabled = requests
        config = copy.copy(run_config) if run_config is not None else RunConfig()
        config.model = ReplayModel(llm)
        config.tracing_disabled = True
        replayed = _with_recorded_tools(agent, tools, sent, {})
        history: list[TResponseInputItem] = []
        for text, starting in zip(inputs, starts, strict=True):
            turn: list[TResponseInputItem] = [*history, {"role": "user", "content": text}]
            first = _agent_named(replayed, starting, set()) or replayed
            result = await Runner.run(first, turn, hooks=hooks, run_config=config)
            history = result.to_input_list()

    return replay_loop(
        journal,
        session_id,
        run,
        replace(options, rules=rules, live_model=answering is not None),
        model_port=None if answering is None else answering.get_response,
        save=save,
    )


def _turn_agents(recorded: Iterable[RecordedEvent]) -> list[str | None]:
    """The agent that made each recorded turn's first model request, by its name.

    A turn starts where its code ran it: with the first agent, or with the one the previous
    turn ended with (``result.last_agent``). None where no request names one.
    """
    names = [None if first is None else first.get("agent") for first in first_requests(recorded)]
    return [name if isinstance(name, str) else None for name in names]


def _agent_named(agent: Agent[Any], name: str | None, seen: set[int]) -> Agent[Any] | None:
    """``agent`` or an agent it hands off to (at any depth) named ``name``."""
    if name is None or id(agent) in seen:
        return None
    if agent.name == name:
        return agent
    seen.add(id(agent))
    for item in agent.handoffs:
        found = _agent_named(item, name, seen) if isinstance(item, Agent) else None
        if found is not None:
            return found
    return None


def _tool_names(agent: Agent[Any], seen: set[int]) -> list[str] | None:
    """The function tools of ``agent`` and of the agents it hands off to.

    None when an MCP server's tools are known only at run time.
    """
    if id(agent) in seen:
        return []
    seen.add(id(agent))
    if agent.mcp_servers:
        return None
    names = [tool.name for tool in agent.tools if isinstance(tool, FunctionTool)]
    for handoff in agent.handoffs:
        if isinstance(handoff, Agent):
            more = _tool_names(handoff, seen)
            if more is None:
                return None
            names.extend(more)
    return names


def _live_model(agent: Agent[Any], spec: object, run_config: RunConfig | None) -> Model | None:
    """The model that answers off the record (see `replay_agent`'s ``live_model``).

    A name is resolved by the run configuration's model provider (the SDK's default one
    when there is none), as a run would.
    """
    if spec is None or spec is False:
        return None
    own = agent.model if spec is True or spec == "agent" else spec
    if isinstance(own, Model):
        return own
    if own is not None and not isinstance(own, str):
        raise AgentLoadError(f"live model {type(own).__name__}: not an Agents SDK model")
    provider = run_config.model_provider if run_config is not None else MultiProvider()
    try:
        return provider.get_model(own)
    except Exception as error:  # an unknown provider or model name, a missing key
        raise AgentLoadError(f"live model {own!r}: {describe_error(error)}") from error


def replay_captured(run: CapturedRun) -> ReplayResult:
    """How `replay.Replayer` replays this integration's sessions (`replay._captured`)."""
    return replay_agent(
        run.journal,
        run.session_id,
        run.target,  # type: ignore[arg-type]  # (checked: an error if not an Agent)
        run.options,
        reference=run.reference,
        save=run.save,
    )
