"""pydantic-ai: journal an ``Agent``'s runs as sessions (the capture half of the integration).

Add a `JournalCapability` to each run (a pydantic-ai capability, its documented hooks);
one capability is one session, each run one turn::

    from capture import Recorder
    from capture.frameworks.pydantic_ai import JournalCapability
    from journal import Journal

    with Journal.open("agent-journal.db") as journal, Recorder(journal) as recorder:
        capture = JournalCapability(recorder, agent="app.bot:agent", deps_factory="app.bot:deps")
        result = agent.run_sync("Weather in Lisbon?", capabilities=[capture])
        again = agent.run_sync(
            "And Oslo?", capabilities=[capture], message_history=result.all_messages()
        )

It journals ``session_started`` on the first model request (the system prompt and
instructions, the function tools with their schemas, the model and its settings), the
run's prompt as ``user_input``, every model response whole (``action_proposed``: tool
calls, text, thinking, usage, latency), every tool call's return (``action_committed``)
or failure (a ``ModelRetry`` is a business failure the model sees, an exception an
infrastructure one) and argument validation failures (``verification_failed``, stage
``schema``), in the order the model proposed the calls, the run's output
(``agent_completed``), and an exception that ends a run (``agent_halted``, rule
``error``). Pass the capability per run, not to ``Agent(...)``, so that a replay of the
same agent does not journal into production too. An agent that takes ``deps`` names
the zero-argument function that builds them for a replay (``deps_factory``, trusted as
agent references are: `agentloop.TrustList`); the CLI, the TUI and fixtures call it.

Its replay (`replay.integrations.pydantic_ai.replay_agent`) re-runs the unchanged agent
with the same capability, which a replay gives an `AsyncToolPlayer` (``tools``) serving
each tool call from the recording.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from functools import partial
from typing import Any

from pydantic import JsonValue, ValidationError

from journal import DEPS_FACTORY_KEY, ReplayedFailure, ToolCall, Usage, describe_error
from journal.formats import parse_arguments

from .._extras import missing_extra
from ..play import AsyncToolPlayer
from ..proposal_order import InProposalOrder
from ..recorder import Recorder
from . import ModelRequests, answer_text, jsonable

try:
    from pydantic_ai import ModelRetry, RunContext
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.capabilities.abstract import (
        RawToolArgs,
        ValidatedToolArgs,
        WrapModelRequestHandler,
        WrapRunHandler,
        WrapToolExecuteHandler,
        WrapToolValidateHandler,
    )
    from pydantic_ai.exceptions import ToolRetryError
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ModelResponse,
        SystemPromptPart,
        TextPart,
        ThinkingPart,
        ToolCallPart,
    )
    from pydantic_ai.models import ModelRequestContext, ModelRequestParameters
    from pydantic_ai.run import AgentRunResult
    from pydantic_ai.tools import ToolDefinition
except ImportError as error:  # pragma: no cover - exercised with the package hidden
    raise missing_extra("pydantic-ai", "pydantic-ai", error) from error

__all__ = ["CAPTURED_WITH", "REQUEST_FORM", "JournalCapability", "proposal_of"]

CAPTURED_WITH = "pydantic-ai"
"""The ``captured_with`` metadata of the sessions this module journals."""

REQUEST_FORM = "pydantic-ai/2"
"""How this module journals the requests the model is sent (`ModelRequests`): change it
with `_seen` or `_request_params`, so that sessions recorded before replay without
comparing them. (``/2``: each request names its function tools and its output: mode, output
tools, output object.)"""


def proposal_of(response: ModelResponse) -> dict[str, Any]:
    """A pydantic-ai response as `Recorder.model_output` fields (calls, text, thinking, usage)."""
    calls = [
        ToolCall(
            call_id=part.tool_call_id,
            tool=part.tool_name,
            args=parse_arguments(part.args)[0],
            arguments=part.args if isinstance(part.args, str) else None,
        ).with_text()
        for part in response.parts
        if isinstance(part, ToolCallPart)
    ]
    text = "".join(part.content for part in response.parts if isinstance(part, TextPart))
    thinking = "\n".join(part.content for part in response.parts if isinstance(part, ThinkingPart))
    usage = response.usage
    return {
        "calls": calls,
        "text": text or None,
        "reasoning": thinking or None,
        "model": response.model_name,
        "usage": Usage(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cached_tokens=usage.cache_read_tokens,
        ),
    }


_SEEN_FIELDS = ("part_kind", "content", "tool_name", "tool_call_id", "args")
"""The fields of a request's part the model is sent (not its timestamps or ids)."""


def _seen(messages: list[ModelMessage]) -> list[JsonValue]:
    """The conversation as the model is sent it.

    A request as its parts and instructions; a response as the journal keeps it (its
    calls, text and thinking: `proposal_of`), which is what a replay serves it from.
    """
    seen: list[JsonValue] = []
    for message in messages:
        if isinstance(message, ModelResponse):
            output = proposal_of(message)
            seen.append(
                {
                    "kind": message.kind,
                    "text": output["text"],
                    "reasoning": output["reasoning"],
                    "calls": [
                        {"call_id": c.call_id, "tool": c.tool, "args": jsonable(c.args)}
                        for c in output["calls"]
                    ],
                }
            )
            continue
        parts: list[JsonValue] = []
        for part in message.parts:
            seen_part = {key: getattr(part, key) for key in _SEEN_FIELDS if hasattr(part, key)}
            parts.append(jsonable(seen_part))
        entry: dict[str, JsonValue] = {"kind": message.kind, "parts": parts}
        if message.instructions:
            entry["instructions"] = message.instructions
        seen.append(entry)
    return seen


def _system_prompt(messages: list[ModelMessage]) -> str:
    """The system prompt parts of the first request and the current instructions."""
    requests = [message for message in messages if isinstance(message, ModelRequest)]
    parts = [
        part.content
        for part in (requests[0].parts if requests else [])
        if isinstance(part, SystemPromptPart)
    ]
    instructions = requests[-1].instructions if requests else None
    return "\n\n".join([*parts, *([instructions] if instructions else [])])


def _tool_spec(tool: ToolDefinition) -> dict[str, Any]:
    return {
        "name": tool.name,
        "description": tool.description or "",
        "parameters": tool.parameters_json_schema,
    }


def _request_params(parameters: ModelRequestParameters) -> dict[str, JsonValue]:
    """What the model is sent besides the conversation.

    The function tools, and how it is to answer (the output mode, its output tools, the
    object schema, whether text may do): a changed ``output_type`` diverges at the first
    request that sends it.
    """
    shape = parameters.output_object
    return {
        "tools": [_tool_spec(tool) for tool in parameters.function_tools],
        "output": {
            "mode": parameters.output_mode,
            "tools": [_tool_spec(tool) for tool in parameters.output_tools],
            "object": None
            if shape is None
            else jsonable(
                {
                    "name": shape.name,
                    "description": shape.description,
                    "schema": shape.json_schema,
                    "strict": shape.strict,
                }
            ),
            "text": parameters.allow_text_output,
        },
    }


def _prompt_text(prompt: object) -> str | None:
    if prompt is None or isinstance(prompt, str):
        return prompt
    if isinstance(prompt, Iterable):
        return " ".join(
            item if isinstance(item, str) else f"[{type(item).__name__}]" for item in prompt
        )
    return str(prompt)


class JournalCapability(AbstractCapability[Any]):
    """Journals a pydantic-ai agent's runs through a `capture.Recorder` (one session).

    Args:
        recorder: where the session goes.
        agent: ``module:attribute`` of the agent, recorded so the CLI and fixtures can
            replay the session.
        deps_factory: ``module:function`` building the agent's ``deps`` for a replay
            (called with no arguments), recorded in the metadata; None when the agent
            takes no deps.
        metadata: kept in ``session_started``.
        tools: in a replay, what serves (or runs and compares) each tool call; None in
            production.
    """

    def __init__(
        self,
        recorder: Recorder,
        *,
        agent: str | None = None,
        deps_factory: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        tools: AsyncToolPlayer | None = None,
    ) -> None:
        super().__init__()
        self.requests = ModelRequests(REQUEST_FORM)
        """The requests journaled beside the responses (a replay of an older session: none)."""
        self.recorder = recorder
        self.agent = agent
        self.metadata = dict(metadata or {})
        if deps_factory is not None:
            self.metadata[DEPS_FACTORY_KEY] = deps_factory
        self.tools = tools
        self.requested = False
        """Whether a model request was made (a run may fail before its first one)."""
        self._prompt: str | None = None
        self._sent: list[ModelMessage] | None = None
        self._outcomes = InProposalOrder(recorder)

    def _begin(self, request: ModelRequestContext | None) -> None:
        """Start the session at its first request, then record the run's prompt once.

        The outcomes of the previous response's calls are journaled first.
        """
        self._outcomes.flush()
        recorder = self.recorder
        if not recorder.started:
            parameters = request.model_request_parameters if request is not None else None
            recorder.start(
                agent=self.agent,
                model=request.model.model_name if request is not None else None,
                system_prompt=_system_prompt(request.messages) if request is not None else "",
                tools=[_tool_spec(tool) for tool in parameters.function_tools]
                if parameters is not None
                else [],
                model_settings={
                    key: jsonable(value)
                    for key, value in (request.model_settings or {} if request else {}).items()
                },
                metadata=self.metadata,
                captured_with=CAPTURED_WITH,
            )
        if self._prompt is not None:
            prompt, self._prompt = self._prompt, None
            recorder.user_input(prompt)

    async def wrap_run(
        self, ctx: RunContext[Any], *, handler: WrapRunHandler
    ) -> AgentRunResult[Any]:
        """Journal the run: its prompt, its output, or the exception that ended it."""
        self._prompt = _prompt_text(ctx.prompt)
        try:
            result = await handler()
        except Exception as error:
            if not self.recorder.ended:
                self._begin(None)
                self.recorder.fail(error)
            raise
        self._begin(None)
        self.recorder.final(answer_text(result.output))
        return result

    async def wrap_model_request(
        self,
        ctx: RunContext[Any],
        *,
        request_context: ModelRequestContext,
        handler: WrapModelRequestHandler,
    ) -> ModelResponse:
        """Journal the model's whole response (``action_proposed``) beside its request.

        The request is the conversation as the model is sent it (`ModelRequests`), as the
        `prepare_model_request` hooks (ours after the history processors) leave it. A call
        that raises (``ModelHTTPError``, a timeout) is journaled as ``model_call_failed``
        with its request, then raised on.
        """
        self._begin(request_context)
        self.requested = True
        self._sent = None
        started = time.perf_counter()
        try:
            response = await handler(request_context)
        except Exception as error:  # an HTTP error, a timeout: a failed call, then raised
            self.recorder.model_failure(
                error,
                request=self._request(request_context),
                latency_ms=(time.perf_counter() - started) * 1000,
            )
            raise
        latency = (time.perf_counter() - started) * 1000
        request = self._request(request_context)
        self.recorder.model_output(**proposal_of(response), latency_ms=latency, request=request)
        return response

    def _request(self, request_context: ModelRequestContext) -> dict[str, Any] | None:
        """The request record of the call just made (`ModelRequests`)."""
        sent = self._sent if self._sent is not None else request_context.messages
        return self.requests.record(
            _seen(sent), **_request_params(request_context.model_request_parameters)
        )

    async def prepare_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """Note the messages the model is sent: after every history processor has run."""
        self._sent = list(request_context.messages)
        return request_context

    async def wrap_tool_validate(
        self,
        ctx: RunContext[Any],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: RawToolArgs,
        handler: WrapToolValidateHandler,
    ) -> ValidatedToolArgs:
        """Journal arguments the tool's schema rejected (``verification_failed``)."""
        try:
            return await handler(args)
        except ValidationError as invalid:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}"
                for e in invalid.errors()
            )
            self._outcomes.add(
                call.tool_call_id, partial(self.recorder.tool_rejected, call.tool_call_id, problems)
            )
            raise
        except (ModelRetry, ToolRetryError) as retry:  # a validator asked the model to retry
            message = describe_error(retry, typed=False)
            self._outcomes.add(
                call.tool_call_id, partial(self.recorder.tool_rejected, call.tool_call_id, message)
            )
            raise

    async def wrap_tool_execute(
        self,
        ctx: RunContext[Any],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: ValidatedToolArgs,
        handler: WrapToolExecuteHandler,
    ) -> Any:
        """Journal the tool's return or failure; in a replay, serve it from the recording."""

        async def live() -> Any:
            try:
                return await handler(args)
            except ToolRetryError as retry:  # a ModelRetry: a business failure the model sees
                raise ReplayedFailure(describe_error(retry, typed=False)) from retry

        started = time.perf_counter()
        try:
            if self.tools is None:
                result = await live()
            else:
                result = await self.tools.arun(call.tool_name, args, live)
        except Exception as error:
            duration = (time.perf_counter() - started) * 1000
            self._outcomes.add(
                call.tool_call_id,
                partial(
                    self.recorder.tool_failure,
                    call.tool_call_id,
                    error,
                    args=args,
                    duration_ms=duration,
                ),
            )
            if isinstance(error, ReplayedFailure) and error.kind == "business":
                cause = error.__cause__
                raise (
                    cause if isinstance(cause, ToolRetryError) else ModelRetry(error.message)
                ) from None
            raise
        duration = (time.perf_counter() - started) * 1000
        self._outcomes.add(
            call.tool_call_id,
            partial(
                self.recorder.tool_result,
                call.tool_call_id,
                jsonable(result),
                args=args,
                duration_ms=duration,
                exact=True,  # NaN and huge integers kept, as a tool may return them
            ),
        )
        return result
