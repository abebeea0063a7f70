"""pydantic-ai: replay an ``Agent``'s captured runs from the journal (the replay half).

Its sessions are journaled by `capture.frameworks.pydantic_ai.JournalCapability`.
`replay_agent` re-runs your unchanged agent with a `ReplayModel` serving the recorded
responses in order (while what it journals matches; then a live model answers, when one
is given), tools served from the recording (or run live, by name), and compares what it
journals now with the recording. A response the agent asks for that was never recorded is
a divergence naming the step (``recording exhausted at seq N``).
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from agentloop import AgentLoadError
from capture import Recorder, missing_extra
from capture.frameworks.pydantic_ai import REQUEST_FORM, JournalCapability
from journal import CAPTURED_WITH_KEY, Journal, RecordedEvent, describe_error

from .._captured import CapturedRun
from .._run import ForkPoint
from .._session import recorded_start
from .._verdict import ReplayResult
from ..handwritten import RecordedModel, RecordedToolPort, replay_loop
from ..options import ReplayOptions
from . import (
    DEPS_FACTORY,
    checked_live,
    compared_requests,
    first_requests,
    framework_live_model,
    recorded_deps,
)

try:
    from pydantic_ai import Agent
    from pydantic_ai.messages import (
        ModelMessage,
        ModelResponse,
        ModelResponsePart,
        TextPart,
        ThinkingPart,
        ToolCallPart,
    )
    from pydantic_ai.models import Model, ModelRequestParameters, infer_model
    from pydantic_ai.settings import ModelSettings
    from pydantic_ai.usage import RequestUsage
except ImportError as error:  # pragma: no cover - exercised with the package hidden
    raise missing_extra("pydantic-ai", "pydantic-ai", error) from error

__all__ = ["ReplayModel", "replay_agent", "replay_captured"]


class ReplayModel(Model):
    """A pydantic-ai model that serves a journal's recorded responses, in order.

    Args:
        llm: the replay's recorded model port (`replay.RecordedModel`).
        model_name: the name of the model it stands in for (what the capture journals).
        settings: that model's own settings (pydantic-ai merges them into each request's).
    """

    def __init__(
        self,
        llm: RecordedModel,
        model_name: str | None = None,
        settings: ModelSettings | None = None,
    ) -> None:
        super().__init__(settings=settings)
        self._llm = llm
        self._name = model_name or "agent-journal-replay"

    @property
    def model_name(self) -> str:
        """The name of the model it stands in for."""
        return self._name

    @property
    def system(self) -> str:
        """The provider: agent-journal's recording."""
        return "agent-journal"

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        """The next recorded response, or the live model's off the record.

        Raises:
            HaltSession: off the record with no live model (the replay stops there).
        """
        served = self._llm(messages, model_settings, model_request_parameters)
        if inspect.isawaitable(served):  # the live model answered
            live: ModelResponse = await served
            return live
        output = served
        parts: list[ModelResponsePart] = []
        if output.reasoning:
            parts.append(ThinkingPart(content=output.reasoning))
        if output.text:
            parts.append(TextPart(content=output.text))
        parts.extend(
            ToolCallPart(
                tool_name=call.tool, args=call.with_text().arguments, tool_call_id=call.call_id
            )
            for call in output.calls
        )
        usage = output.usage
        return ModelResponse(
            parts=parts,
            usage=RequestUsage(
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                cache_read_tokens=usage.cached_tokens,
            ),
            model_name=output.model or self._name,
        )


def replay_agent(
    journal: Journal,
    session_id: str,
    agent: Agent[Any, Any],
    options: ReplayOptions | None = None,
    *,
    deps: Any = None,
    reference: str | None = None,
    save: bool | ForkPoint = False,
) -> ReplayResult:
    """Re-run ``agent`` on a captured session's user inputs and compare with the recording.

    Each recorded user input is one ``agent.run`` (with the previous runs' messages as
    history, unless the recorded run was sent none: `_fresh_runs`), on a `ReplayModel`,
    journaled by a `JournalCapability` into a scratch journal.

    Args:
        journal: the journal holding the session.
        session_id: the captured session.
        agent: your agent, unchanged (its model is replaced for the replay only).
        options: how the replay runs (`ReplayOptions`): the tools to run for real
            (``live_tools``; others come from the recording); what answers where no
            recorded response fits (``live_model``: the agent diverged, or asks past the
            recording; the tools then run for real too): a pydantic-ai model, a
            ``module:factory`` returning one, ``"agent"`` for the agent's own model, or
            True for it if it has one; without one the replay stops there; the
            comparison rules.
        deps: the agent's dependencies, if it takes any (the CLI and fixtures call the
            session's recorded ``deps_factory``).
        reference: the agent reference to journal (default: the recorded one).
        save: keep the replay in ``journal``; a `ForkPoint` keeps it as a fork instead.

    Raises:
        AgentLoopError: a tool named live that the agent does not have.
        AgentLoadError: ``agent`` is not a pydantic-ai Agent, or it raised before its first
            model request where the recording has one (a setup fault, such as missing
            ``deps``, is reported as such, not as a difference of the recording).
        SessionNotFoundError: no such session.
    """
    if not isinstance(agent, Agent):
        raise AgentLoadError(f"{type(agent).__name__} is not a pydantic-ai Agent")
    options = options or ReplayOptions()
    checked_live(options.live_tools, _tool_names(agent))
    started = recorded_start(journal, session_id)
    metadata = {k: v for k, v in started.metadata.items() if k != CAPTURED_WITH_KEY}
    answering = _live_model(agent, framework_live_model(options.live_model))
    requests, rules = compared_requests(journal, session_id, REQUEST_FORM, options.rules)
    fresh_runs = _fresh_runs(journal.events(session_id))

    async def run(
        llm: RecordedModel, tools: RecordedToolPort, recorder: Recorder, inputs: list[str]
    ) -> None:
        capture = JournalCapability(
            recorder, agent=reference or started.agent, metadata=metadata, tools=tools
        )
        capture.requests.enabled = requests
        model = _standing_in(agent, llm, started.model)
        history: list[ModelMessage] | None = None
        for text, fresh in zip(inputs, fresh_runs, strict=True):
            try:
                result = await agent.run(
                    text,
                    model=model,
                    deps=deps,
                    capabilities=[capture],
                    message_history=None if fresh else history,
                )
            except Exception as error:
                if capture.requested or llm.exhausted:
                    raise
                raise _setup_fault(session_id, started.metadata, deps, error) from error
            history = result.all_messages()

    return replay_loop(
        journal,
        session_id,
        run,
        replace(options, rules=rules, live_model=answering is not None),
        model_port=None if answering is None else answering.request,
        save=save,
    )


def _standing_in(agent: Agent[Any, Any], llm: RecordedModel, recorded: str | None) -> ReplayModel:
    """The replay's model, standing in for the one the agent's run would use.

    The agent's own model, so that a replay of an agent whose model or model settings
    changed journals them, and the change shows (a model name such as ``openai:gpt-4.1``
    named as pydantic-ai names its model: ``gpt-4.1``). An agent with no model of its own
    is given one per run by its code, which the replay does not run: the recorded one.
    """
    own = agent.model
    if own is None:
        return ReplayModel(llm, recorded)
    if isinstance(own, Model):
        return ReplayModel(llm, own.model_name, own.settings)
    return ReplayModel(llm, own.partition(":")[2] or own)


def _fresh_runs(recorded: Iterable[RecordedEvent]) -> list[bool]:
    """For each recorded run (a user input), whether the code ran it with no history.

    It did when the run's first recorded request holds no model response: code that runs
    each prompt on its own (no ``message_history``). A run with no recorded request, or
    the first, counts as one given the previous runs' messages.
    """
    return [
        index > 0
        and first is not None
        and not any(_is_response(message) for message in first.get("messages") or [])
        for index, first in enumerate(first_requests(recorded))
    ]


def _is_response(message: object) -> bool:
    """Whether a journaled request message (`_seen`) is a model response."""
    return isinstance(message, dict) and message.get("kind") == "response"


def _tool_names(agent: Agent[Any, Any]) -> list[str] | None:
    """The agent's tools, when its toolsets list them before a run (MCP servers do not)."""
    names: list[str] = []
    for toolset in agent.toolsets:
        tools = getattr(toolset, "tools", None)
        if not isinstance(tools, Mapping):
            return None
        names.extend(str(name) for name in tools)
    return names


def _live_model(agent: Agent[Any, Any], spec: object) -> Model | None:
    """The model that answers off the record (see `replay_agent`'s ``live_model``)."""
    if spec is None or spec is False or (spec is True and agent.model is None):
        return None
    own = agent.model if spec is True or spec == "agent" else spec
    if own is None:
        raise AgentLoadError(
            "the agent has no model of its own to go on with: name one "
            "(--live-model MODULE:FACTORY returning a pydantic-ai model)"
        )
    try:
        return infer_model(own)  # type: ignore[arg-type]  # (checked: an error if not one)
    except Exception as error:  # an unknown provider or model name, a missing key
        raise AgentLoadError(f"live model {own!r}: {describe_error(error)}") from error


def _setup_fault(
    session_id: str, metadata: Mapping[str, Any], deps: Any, error: Exception
) -> AgentLoadError:
    """The error for an agent that failed before the model request its recording starts with."""
    hint = ""
    if deps is None and DEPS_FACTORY not in metadata:
        hint = (
            "; if the agent takes deps, name their factory when capturing "
            "(JournalCapability(deps_factory=...)) or pass deps= to replay_agent"
        )
    return AgentLoadError(
        f"replay of session {session_id}: the agent raised before its first model request: "
        f"{describe_error(error)}{hint}"
    )


def replay_captured(run: CapturedRun) -> ReplayResult:
    """How `replay.Replayer` replays this integration's sessions (`replay._captured`)."""
    return replay_agent(
        run.journal,
        run.session_id,
        run.target,  # type: ignore[arg-type]  # (checked: an error if not an Agent)
        run.options,
        deps=recorded_deps(run),
        reference=run.reference,
        save=run.save,
    )
