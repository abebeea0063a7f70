"""OpenAI Agents SDK: journal a ``Runner`` run through its run hooks, and replay it.

Capture: pass `JournalRunHooks` as the run's ``hooks`` (the SDK's documented lifecycle
callbacks, which see each model response whole); one hooks object is one session, each
run one turn, and the recorder's ``with`` block records an exception that ends a run::

    from agents import Runner
    from journal import Journal, Recorder
    from replay.integrations.openai_agents import JournalRunHooks

    with Journal.open("agent-journal.db") as journal, Recorder(journal) as recorder:
        hooks = JournalRunHooks(recorder, agent="app.bot:agent")
        result = await Runner.run(agent, "Weather in Lisbon?", hooks=hooks)

It journals ``session_started`` before the first model call (the instructions, the
function tools with their schemas, the model and its settings), the new user messages of
each run (``user_input``), every model response whole (``action_proposed``: function
calls, message text, reasoning summaries, usage, latency), each function tool's output
(``action_committed``, in the order the model proposed the calls; the SDK turns a tool's
exception into an error text the model sees, and that text is what is journaled), and the
final output (``agent_completed``). A run that raises journals the outcomes in order up to
the first call still running, then the recorder's halt.

Replay: `replay_agent` re-runs your agent with a `ReplayModel` serving the recorded
responses in order (set as the run's model, tracing off) and function tools served from
the recording (or run live, by name), then compares. A response the agent asks for that
was never recorded is a divergence naming the step. A streamed run (``Runner.run_streamed``)
is captured alike and replayed through ``Runner.run``: the replay model does not stream.
"""

from __future__ import annotations

import copy
import inspect
import time
from collections.abc import AsyncIterator, Iterable, Mapping
from functools import partial
from typing import Any

from pydantic import JsonValue

from agentloop import AgentLoadError
from journal import (
    CAPTURED_WITH_KEY,
    Journal,
    RecordedEvent,
    Recorder,
    ToolCall,
    Usage,
    describe_error,
)
from journal.capture import as_return_type, return_type
from journal.formats import content_text, parse_arguments

from .._run import ForkPoint
from .._session import recorded_start
from .._verdict import ReplayResult
from ..handwritten import RecordedModel, RecordedToolPort, replay_loop
from ..normalize import DEFAULT_RULES, NormalizationRules
from . import (
    InProposalOrder,
    ModelRequests,
    answer_text,
    captured_replay,
    checked_live,
    compared_requests,
    first_requests,
    jsonable,
    missing_extra,
)

try:
    from agents import (
        Agent,
        AgentOutputSchema,
        AgentOutputSchemaBase,
        FunctionTool,
        Handoff,
        RunConfig,
        RunContextWrapper,
        RunHooks,
        Runner,
        Tool,
        handoff,
    )
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

__all__ = [
    "CAPTURED_WITH",
    "REQUEST_FORM",
    "JournalRunHooks",
    "ReplayModel",
    "proposal_of",
    "replay_agent",
    "replay_captured",
]

CAPTURED_WITH = "openai-agents"
"""The ``captured_with`` metadata of the sessions this module journals."""

REQUEST_FORM = "openai-agents/2"
"""How this module journals the requests the model is sent (`ModelRequests`): change it
with `_seen` or `_agent_params`, so that sessions recorded before replay without comparing
them. (``/2``: each request names the calling agent's model, settings, tools and output
schema.)"""


def proposal_of(response: AgentsResponse) -> dict[str, Any]:
    """An SDK model response as `Recorder.model_output` fields."""
    calls: list[ToolCall] = []
    texts: list[str] = []
    reasoning: list[str] = []
    for item in response.output:
        if isinstance(item, ResponseFunctionToolCall):
            args, _ = parse_arguments(item.arguments)
            calls.append(
                ToolCall(call_id=item.call_id, tool=item.name, args=args, arguments=item.arguments)
            )
        elif isinstance(item, ResponseOutputMessage):
            texts.extend(part.text for part in item.content if isinstance(part, ResponseOutputText))
        elif isinstance(item, ResponseReasoningItem):
            reasoning.extend(summary.text for summary in item.summary)
    usage = response.usage
    return {
        "calls": calls,
        "text": "".join(texts) or None,
        "reasoning": "\n".join(reasoning) or None,
        "usage": Usage(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cached_tokens=usage.input_tokens_details.cached_tokens or 0,
        ),
    }


def _model_name(model: object) -> str | None:
    """The name of an agent's model: the string, a model object's ``model``, or its class."""
    if model is None or isinstance(model, str):
        return model
    named = getattr(model, "model", None)
    return named if isinstance(named, str) else type(model).__name__


def _path(kind: type) -> str:
    return f"{kind.__module__}:{kind.__qualname__}"


def _user_inputs(items: list[TResponseInputItem]) -> list[str]:
    """The texts of the user messages after the last item that is not one."""
    texts: list[str] = []
    for item in reversed(items):
        if not isinstance(item, Mapping) or item.get("role") != "user":
            break
        text, _ = content_text(item.get("content"))
        texts.append(text)
    return texts[::-1]


_SEEN_KEYS = ("type", "role", "name", "arguments", "call_id", "output", "content")
"""The keys of an input item the model reads (not its ids or status); its ``content`` is
kept as its text."""


def _texts(parts: object) -> list[str]:
    """The texts of a content or summary list (or the text itself)."""
    if isinstance(parts, str):
        return [parts]
    if not isinstance(parts, list):
        return []
    return [str(p["text"]) for p in parts if isinstance(p, dict) and p.get("text") is not None]


def _model_item(item: dict[str, Any]) -> bool:
    kind = item.get("type")
    return kind in ("reasoning", "function_call") or (
        item.get("role") == "assistant" and kind in (None, "message")
    )


def _response(items: list[dict[str, Any]]) -> dict[str, JsonValue]:
    """The input items of one model response as the journal keeps it (`proposal_of`)."""
    texts: list[str] = []
    reasoning: list[str] = []
    calls: list[JsonValue] = []
    for item in items:
        if item.get("type") == "function_call":
            args, _ = parse_arguments(item.get("arguments"))
            calls.append({"call_id": item.get("call_id"), "tool": item.get("name"), "args": args})
        elif item.get("type") == "reasoning":
            reasoning.extend(_texts(item.get("summary")))
        else:
            texts.extend(_texts(item.get("content")))
    return {
        "kind": "response",
        "text": "".join(texts) or None,
        "reasoning": "\n".join(reasoning) or None,
        "calls": calls,
    }


def _seen(items: str | list[TResponseInputItem]) -> list[JsonValue]:
    """The input items as the model is sent them.

    The items of one model response (its messages, reasoning and function calls, in a run)
    are kept as the journal keeps that response (`_response`), which is what a replay
    serves it from; other items as the keys the model reads.
    """
    if isinstance(items, str):
        return [{"role": "user", "content": items}]
    seen: list[JsonValue] = []
    run: list[dict[str, Any]] = []
    for item in items:
        given = jsonable(item)
        if isinstance(given, dict) and _model_item(given):
            run.append(given)
            continue
        if run:
            seen.append(_response(run))
            run = []
        if not isinstance(given, dict):
            seen.append(given)
            continue
        entry = {k: given[k] for k in _SEEN_KEYS if k in given}
        if "content" in entry and not isinstance(entry["content"], str):
            entry["content"] = content_text(entry["content"])[0]
        seen.append(entry)
    if run:
        seen.append(_response(run))
    return seen


def _tool_specs(tools: Iterable[Tool]) -> list[dict[str, Any]]:
    return [
        {"name": t.name, "description": t.description, "parameters": t.params_json_schema}
        for t in tools
        if isinstance(t, FunctionTool)
    ]


def _handoff_specs(agent: Agent[Any]) -> list[dict[str, Any]]:
    """The handoffs of ``agent`` as the tools the model is offered for them."""
    offered = (item if isinstance(item, Handoff) else handoff(item) for item in agent.handoffs)
    return [
        {"name": h.tool_name, "description": h.tool_description, "parameters": h.input_json_schema}
        for h in offered
    ]


def _output_schema(agent: Agent[Any]) -> JsonValue:
    """The JSON schema of ``agent``'s structured output (None: plain text)."""
    kind = agent.output_type
    if kind is None or kind is str:
        return None
    schema = kind if isinstance(kind, AgentOutputSchemaBase) else AgentOutputSchema(kind)
    if schema.is_plain_text():
        return None
    return jsonable({"schema": schema.json_schema(), "strict": schema.is_strict_json_schema()})


def _agent_params(agent: Agent[Any]) -> dict[str, JsonValue]:
    """What the model is sent besides the conversation, of the agent that asks.

    Its model (a model object's class too: the Responses and the Chat Completions models
    send one model name differently) and model settings (every one set, 0 and False too),
    its tools and handoffs, and its output schema: a change to an agent handed off to shows
    at its first request.
    """
    return {
        "model": _model_name(agent.model),
        "model_class": None if isinstance(agent.model, str | None) else _path(type(agent.model)),
        "model_settings": {
            k: jsonable(v) for k, v in agent.model_settings.to_json_dict().items() if v is not None
        },
        "tools": [*_tool_specs(agent.tools), *_handoff_specs(agent)],
        "output_schema": _output_schema(agent),
    }


class JournalRunHooks(RunHooks[Any]):
    """Journals an Agents SDK run through a `journal.Recorder` (one session).

    Args:
        recorder: where the session goes.
        agent: ``module:attribute`` of the agent, recorded for the CLI and fixtures.
        metadata: kept in ``session_started``.
    """

    def __init__(
        self,
        recorder: Recorder,
        *,
        agent: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        self.recorder = recorder
        self.agent = agent
        self.metadata = dict(metadata or {})
        self._started_at = 0.0
        self._request: dict[str, Any] | None = None
        self.requests = ModelRequests(REQUEST_FORM)
        """The requests journaled beside the responses (a replay of an older session: none)."""
        self._outcomes = InProposalOrder(recorder)

    async def on_agent_start(self, context: RunContextWrapper[Any], agent: Agent[Any]) -> None:
        """Start the session as the run's first agent starts; journal a run's user messages.

        Before its first model call, so that a run its input guardrail ends (the model is
        never called) is a session that halts there.
        """
        items = getattr(context, "turn_input", None)  # the SDK's AgentHookContext has it
        if not isinstance(items, list):
            return  # an SDK without it: the first model call starts the session
        prompt = None if self.recorder.started else await agent.get_system_prompt(context)
        self._open(agent, prompt, items)

    async def on_llm_start(
        self,
        context: RunContextWrapper[Any],
        agent: Agent[Any],
        system_prompt: str | None,
        input_items: list[TResponseInputItem],
    ) -> None:
        """Journal the request (with the response, `on_llm_end`).

        The request is the instructions and the input items as the model is sent them,
        after the run's ``call_model_input_filter``. The outcomes of the previous
        response's calls are journaled first (and the session started, if the agent's
        start did not).
        """
        self._outcomes.flush()
        self._open(agent, system_prompt, input_items)
        self._request = self.requests.record(
            _seen(input_items), instructions=system_prompt, agent=agent.name, **_agent_params(agent)
        )
        self._started_at = time.perf_counter()

    def _open(
        self, agent: Agent[Any], system_prompt: str | None, items: list[TResponseInputItem]
    ) -> None:
        """Start the session, once; journal the user messages of a run that begins."""
        recorder = self.recorder
        if not recorder.started:
            recorder.start(
                agent=self.agent,
                model=_model_name(agent.model),
                system_prompt=system_prompt or "",
                tools=_tool_specs(agent.tools),
                # falsy values left out, as sessions recorded before have them (a replay
                # compares these); each request names every one set (`_agent_params`)
                model_settings={
                    k: jsonable(v) for k, v in agent.model_settings.to_json_dict().items() if v
                },
                metadata=self.metadata,
                captured_with=CAPTURED_WITH,
            )
        if recorder.state.turns == 0 or recorder.state.status == "completed":
            for text in _user_inputs(items):
                recorder.user_input(text)

    async def on_llm_end(
        self, context: RunContextWrapper[Any], agent: Agent[Any], response: AgentsResponse
    ) -> None:
        """Journal the model's whole response (``action_proposed``)."""
        latency = (time.perf_counter() - self._started_at) * 1000
        self.recorder.model_output(
            **proposal_of(response),
            model=_model_name(agent.model),
            latency_ms=latency,
            request=self._request,
        )

    async def on_tool_end(
        self, context: RunContextWrapper[Any], agent: Agent[Any], tool: Tool, result: object
    ) -> None:
        """Journal a function tool's output (``action_committed``)."""
        if not isinstance(context, ToolContext):
            return
        args, _ = parse_arguments(context.tool_arguments)
        write = partial(
            self.recorder.tool_result,
            context.tool_call_id,
            jsonable(result.recorded if isinstance(result, _SentText) else result),
            args=args if isinstance(args, dict) else None,
            exact=True,  # NaN and huge integers kept, as a tool may return them
        )
        self._outcomes.add(context.tool_call_id, write)

    async def on_agent_end(
        self, context: RunContextWrapper[Any], agent: Agent[Any], output: Any
    ) -> None:
        """Journal the run's final output (``agent_completed``)."""
        self._outcomes.flush()
        self.recorder.final(answer_text(output))


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


class _SentText(str):
    """A served tool result as the text the model was sent of it (`_as_served`).

    Its ``recorded`` result beside it, which the replay's hooks journal.
    """

    recorded: Any = None


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
    served = _SentText(sent)
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
    *,
    live: bool | Iterable[str] = False,
    live_model: Model | str | bool | None = None,
    run_config: RunConfig | None = None,
    reference: str | None = None,
    save: bool | ForkPoint = False,
    rules: NormalizationRules = DEFAULT_RULES,
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
        live: tools to run for real (``True``: all); others come from the recording.
        live_model: what answers where no recorded response fits (the agent diverged, or
            asks past the recording), the tools then running for real too: an Agents SDK
            model or model name, ``"agent"`` or True for the agent's own model (the SDK's
            default when it names none). Without one the replay stops there.
        run_config: your run configuration, if any (its model is replaced).
        reference: the agent reference to journal (default: the recorded one).
        save: keep the replay in ``journal``; a `ForkPoint` keeps it as a fork instead.
        rules: what counts as volatile; see `replay.normalize`.

    Raises:
        AgentLoopError: a tool named live that the agent does not have.
        AgentLoadError: ``agent`` is not an Agents SDK Agent.
        SessionNotFoundError: no such session.
    """
    if not isinstance(agent, Agent):
        raise AgentLoadError(f"{type(agent).__name__} is not an Agents SDK Agent")
    live = checked_live(live, _tool_names(agent, set()))
    started = recorded_start(journal, session_id)
    metadata = {k: v for k, v in started.metadata.items() if k != CAPTURED_WITH_KEY}
    answering = _live_model(agent, live_model, run_config)
    requests, rules = compared_requests(journal, session_id, REQUEST_FORM, rules)
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
        live=live,
        live_model=None if answering is None else answering.get_response,
        save=save,
        rules=rules,
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


def _live_model(
    agent: Agent[Any], spec: Model | str | bool | None, run_config: RunConfig | None
) -> Model | None:
    """The model that answers off the record (see `replay_agent`'s ``live_model``).

    A name is resolved by the run configuration's model provider (the SDK's default one
    when there is none), as a run would.
    """
    if spec is None or spec is False:
        return None
    own = agent.model if spec is True or spec == "agent" else spec
    if isinstance(own, Model):
        return own
    provider = run_config.model_provider if run_config is not None else MultiProvider()
    try:
        return provider.get_model(own)
    except Exception as error:  # an unknown provider or model name, a missing key
        raise AgentLoadError(f"live model {own!r}: {describe_error(error)}") from error


replay_captured = captured_replay(replay_agent)
"""How `replay.Replayer` replays this integration's sessions (see `replay._captured`)."""
