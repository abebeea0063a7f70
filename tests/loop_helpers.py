"""Helpers for the agent-loop tests: a scripted model port, tiny agents, runs and event lists.

Nothing here asserts; tests compare the events these return with what they expect.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel

from agentloop import (
    Agent,
    AgentRuntime,
    ModelRequest,
    ModelResponse,
    Tool,
    TurnResult,
    counter_ids,
)
from journal import (
    ActionCommitted,
    ActionFailed,
    ActionProposed,
    AgentEvent,
    Guardrails,
    Journal,
    ToolCall,
)
from journal.events import EventModel

from .helpers import T0

Step = ModelResponse | BaseException | Callable[[ModelRequest], ModelResponse]


def tc(tool: str, args: dict[str, Any] | str | None = None, call_id: str = "c1") -> ToolCall:
    """A tool call as the model emits it."""
    return ToolCall(call_id=call_id, tool=tool, args={} if args is None else args)


def propose(
    *calls: ToolCall | tuple[str, Any], text: str | None = None, reasoning: str | None = None
) -> ModelResponse:
    """A response with tool calls; ``(tool, args)`` pairs get ids ``c1``, ``c2``..."""
    built = [
        c if isinstance(c, ToolCall) else tc(c[0], c[1], f"c{i}") for i, c in enumerate(calls, 1)
    ]
    return ModelResponse(calls=built, text=text, reasoning=reasoning)


def answer(text: str = "done") -> ModelResponse:
    """A final reply (no calls)."""
    return ModelResponse(text=text)


class Script:
    """A model port that plays ``steps`` in order, then answers "done" forever.

    A step is a response, an exception to raise, or a function of the request. Every
    request is kept in ``requests``.
    """

    def __init__(self, *steps: Step) -> None:
        self.steps = list(steps)
        self.requests: list[ModelRequest] = []

    async def complete(self, request: ModelRequest) -> ModelResponse:
        index = len(self.requests)
        self.requests.append(request)
        step: Step = self.steps[index] if index < len(self.steps) else answer()
        if isinstance(step, BaseException):
            raise step
        return step if isinstance(step, ModelResponse) else step(request)


class Forever:
    """A model port that makes the same response forever (until a rule stops it)."""

    def __init__(self, response: ModelResponse) -> None:
        self.response = response
        self.calls = 0

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.calls += 1
        return self.response


class Args(BaseModel):
    """Arguments of the test tools: one string."""

    q: str


class Amount(BaseModel):
    """Arguments of the test payment tool."""

    amount: int


def ok_tool(name: str = "echo", **options: Any) -> Tool:
    """A tool that echoes its argument ``q``."""
    return Tool(name, lambda a: {"echo": a.q}, f"{name} a string", Args, **options)


def failing_tool(name: str, error: BaseException, **options: Any) -> Tool:
    """A tool that always raises ``error``."""

    def fail(args: Args) -> Any:
        raise error

    return Tool(name, fail, f"{name} (always fails)", Args, **options)


def agent_of(*tools: Tool, rails: dict[str, Any] | None = None, **options: Any) -> Agent:
    """A test agent with these tools and guardrails (defaults otherwise)."""
    return Agent(
        name="test",
        system_prompt="You are a test agent.",
        tools=list(tools),
        guardrails=Guardrails(**(rails or {})),
        model="test-model",
        reference="tests.loop_helpers:agent_of",
        code_version="test",
        **options,
    )


def fixed_clock(seq: int) -> datetime:
    """A clock that stamps event ``seq`` at `T0` + seq ms."""
    return T0 + timedelta(milliseconds=seq)


def runtime_for(agent: Agent, journal: Journal, llm: Any = None, **ports: Any) -> AgentRuntime:
    """A runtime with the fixed clock and counter ids."""
    return AgentRuntime(agent, journal, llm=llm, clock=fixed_clock, ids=counter_ids("t"), **ports)


def run_turns(
    agent: Agent,
    journal: Journal,
    llm: Any,
    *inputs: str,
    session_id: str = "s",
    **ports: Any,
) -> tuple[AgentRuntime, list[TurnResult]]:
    """Run each input as one turn of session ``session_id`` (stops at a halted session)."""
    runtime = runtime_for(agent, journal, llm, **ports)

    async def go() -> list[TurnResult]:
        results = []
        for text in inputs:
            result = await runtime.run_turn(session_id, text)
            results.append(result)
            if result.status in ("halted", "failed"):
                break
        return results

    return runtime, asyncio.run(go())


def events_of(journal: Journal, session_id: str = "s") -> list[AgentEvent]:
    """A session's events, without their envelopes."""
    return [recorded.event for recorded in journal.events(session_id)]


_VOLATILE = {"duration_ms": None, "latency_ms": None}


def steady(event: EventModel) -> EventModel:
    """The event with its volatile fields (durations, latency) cleared."""
    if isinstance(event, ActionCommitted | ActionFailed | ActionProposed):
        return event.model_copy(update={k: v for k, v in _VOLATILE.items() if hasattr(event, k)})
    return event


def after_start(journal: Journal, session_id: str = "s") -> list[EventModel]:
    """A session's events after ``session_started``, volatile fields cleared."""
    return [steady(event) for event in events_of(journal, session_id)[1:]]


def run_events(
    *tools: Tool,
    steps: Sequence[Step],
    journal: Journal,
    rails: dict[str, Any] | None = None,
    inputs: Sequence[str] = ("go",),
) -> list[EventModel]:
    """Run a scripted session of a test agent and return its events after the start."""
    run_turns(agent_of(*tools, rails=rails), journal, Script(*steps), *inputs)
    return after_start(journal)


@dataclass
class Gauge:
    """Measures how many tool bodies run at once (inside the tools, not by timing).

    ``log`` holds ``+name`` when a body starts and ``-name`` when it ends.
    """

    running: int = 0
    peak: int = 0
    log: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def enter(self, name: str) -> None:
        with self.lock:
            self.running += 1
            self.peak = max(self.peak, self.running)
            self.log.append(f"+{name}")

    def leave(self, name: str) -> None:
        with self.lock:
            self.running -= 1
            self.log.append(f"-{name}")

    @property
    def finished(self) -> list[str]:
        """Tool names in the order their bodies finished."""
        return [entry[1:] for entry in self.log if entry.startswith("-")]


def sleepy_tools(gauge: Gauge, delays: dict[str, float], **options: Any) -> list[Tool]:
    """Async tools ``name`` that sleep ``delays[name]`` seconds, measured by ``gauge``."""

    def make(name: str, delay: float) -> Tool:
        async def body(args: Args) -> dict[str, Any]:
            gauge.enter(name)
            try:
                await asyncio.sleep(delay)
            finally:
                gauge.leave(name)
            return {"tool": name, "q": args.q}

        return Tool(name, body, f"sleeps {delay}s", Args, **options)

    return [make(name, delay) for name, delay in delays.items()]


def sync_sleepy_tool(gauge: Gauge, name: str, delay: float, **options: Any) -> Tool:
    """A sync tool (run in a worker thread) that sleeps ``delay`` seconds."""

    def body(args: Args) -> dict[str, Any]:
        gauge.enter(name)
        try:
            time.sleep(delay)
        finally:
            gauge.leave(name)
        return {"tool": name, "q": args.q}

    return Tool(name, body, f"sleeps {delay}s", Args, **options)


def proposed(response: ModelResponse, model: str = "test-model") -> ActionProposed:
    """The ``action_proposed`` the loop records for ``response`` (volatile fields cleared).

    Each call keeps the text of its arguments (written from ``args`` when it came without).
    """
    return ActionProposed(
        calls=[call.with_text() for call in response.calls],
        text=response.text,
        reasoning=response.reasoning,
        model=response.model or model,
        usage=response.usage,
        cost=response.cost,
    )
