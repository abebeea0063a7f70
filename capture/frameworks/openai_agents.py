"""OpenAI Agents SDK: journal a ``Runner`` run through its run hooks (the capture half).

Pass `JournalRunHooks` as the run's ``hooks`` (the SDK's documented lifecycle callbacks,
which see each model response whole); one hooks object is one session, each run one turn,
and the recorder's ``with`` block records an exception that ends a run::

    from agents import Runner
    from capture import Recorder
    from capture.frameworks.openai_agents import JournalRunHooks
    from journal import Journal

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
the first call still running, then the recorder's halt. A streamed run
(``Runner.run_streamed``) is captured alike.

Its replay is `replay.integrations.openai_agents.replay_agent`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from functools import partial
from typing import Any

from pydantic import JsonValue

from journal import ToolCall, Usage
from journal.formats import content_text, parse_arguments

from .._extras import missing_extra
from ..proposal_order import InProposalOrder
from ..recorder import Recorder
from . import ModelRequests, answer_text, jsonable

try:
    from agents import (
        Agent,
        AgentOutputSchema,
        AgentOutputSchemaBase,
        FunctionTool,
        Handoff,
        RunContextWrapper,
        RunHooks,
        Tool,
        handoff,
    )
    from agents import ModelResponse as AgentsResponse
    from agents.items import TResponseInputItem
    from agents.tool_context import ToolContext
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
        ResponseReasoningItem,
    )
except ImportError as error:  # pragma: no cover - exercised with the package hidden
    raise missing_extra("openai-agents", "openai-agents", error) from error

__all__ = ["CAPTURED_WITH", "REQUEST_FORM", "JournalRunHooks", "ServedText", "proposal_of"]

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
    """Journals an Agents SDK run through a `capture.Recorder` (one session).

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
            jsonable(result.recorded if isinstance(result, ServedText) else result),
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


class ServedText(str):
    """A tool result a replay serves as the text the model was sent of it.

    The SDK sends the model ``str()`` of a tool's output; a replay that cannot rebuild the
    value whose ``str()`` that was serves this text instead, its ``recorded`` result beside
    it, which `JournalRunHooks` journals.
    """

    recorded: Any = None
