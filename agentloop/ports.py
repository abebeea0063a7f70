"""The ports through which every non-deterministic input enters the loop.

The model (`LLMProvider`), the tools (`ToolExecutor`), the clock (`Clock`) and ids
(`IdSource`) are injected. Nothing in the loop reads wall time or random state directly,
so a replay swaps these four for recorded ones and gets the same decisions.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol, runtime_checkable

from journal import FailureKind, SessionState, ToolCall, Usage

from .tools import Tool, classify_error, clean_message

__all__ = [
    "Clock",
    "IdSource",
    "LLMProvider",
    "LiveToolExecutor",
    "ModelRequest",
    "ModelResponse",
    "ToolExecutor",
    "ToolOutcome",
    "counter_ids",
    "system_clock",
    "uuid_ids",
]

Clock = Callable[[int], datetime]
"""The time at which event ``seq`` is written. A live clock ignores ``seq``; a recorded
clock returns the recorded timestamp of that seq."""

IdSource = Callable[[str], str]
"""Returns a fresh id for a purpose (``"session"``, ``"call"``)."""


def system_clock(seq: int) -> datetime:
    """The live clock: the current UTC time."""
    return datetime.now(UTC)


def uuid_ids(purpose: str) -> str:
    """Random ids: ``session-<hex>`` or ``call-<hex>``."""
    return f"{purpose}-{uuid.uuid4().hex[:16]}"


def counter_ids(prefix: str) -> IdSource:
    """Deterministic ids ``<prefix>-<purpose>-<n>`` for tests and demos."""
    counter = itertools.count(1)
    return lambda purpose: f"{prefix}-{purpose}-{next(counter)}"


@dataclass(frozen=True)
class ModelRequest:
    """What the loop sends the model: the immutable prefix and the context log.

    ``messages`` is a fresh list, but its message dicts are shared with the runtime's
    context (rendered once, reused every step): read them, copy before changing one.
    """

    session_id: str
    seq: int
    system_prompt: str
    tools: list[dict[str, Any]]
    messages: list[dict[str, Any]]
    model: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ModelResponse:
    """The model's whole output as received (recorded before anything acts on it).

    ``calls`` keep their arguments as emitted: a dict, or the raw string when it was not
    valid JSON.
    """

    calls: list[ToolCall] = field(default_factory=list)
    text: str | None = None
    reasoning: str | None = None
    model: str | None = None
    usage: Usage = field(default_factory=Usage)
    latency_ms: float | None = None
    cost: float | None = None


@runtime_checkable
class LLMProvider(Protocol):
    """The model port: one call per Propose phase."""

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Return the model's next output for ``request``."""
        ...


@dataclass(frozen=True)
class ToolOutcome:
    """What running one tool call produced: a result, or a failure of some kind."""

    ok: bool
    result: Any = None
    kind: FailureKind | None = None
    message: str = ""
    duration_ms: float | None = None


class ToolExecutor(Protocol):
    """The tool port: runs one validated call and reports its outcome (never raises)."""

    async def execute(
        self, tool: Tool, call: ToolCall, args: Any, state: SessionState, timeout_s: float
    ) -> ToolOutcome:
        """Run ``tool`` with validated ``args``; classify any error into the outcome."""
        ...


class LiveToolExecutor:
    """Runs tools for real: async tools awaited, sync tools in a worker thread, with timeouts.

    ``timer`` measures durations (monotonic seconds); inject a fake one for tests.
    """

    def __init__(self, timer: Callable[[], float] = time.perf_counter) -> None:
        self._timer = timer

    async def execute(
        self, tool: Tool, call: ToolCall, args: Any, state: SessionState, timeout_s: float
    ) -> ToolOutcome:
        """Run the tool; see `ToolExecutor.execute`."""
        started = self._timer()
        try:
            # asyncio.timeout, not wait_for: no extra task per call (the hot path)
            async with asyncio.timeout(timeout_s):
                if inspect.iscoroutinefunction(tool.fn):
                    result = await tool.fn(args)
                else:
                    result = await asyncio.to_thread(tool.fn, args)
        except Exception as error:
            if isinstance(error, TimeoutError) and not str(error):
                error = TimeoutError(f"{tool.name} did not answer within {timeout_s:g} s")
            try:
                kind = tool.classify(error)
            except Exception:
                kind = classify_error(error)
            return ToolOutcome(
                ok=False,
                kind=kind,
                message=clean_message(error),
                duration_ms=(self._timer() - started) * 1000,
            )
        return ToolOutcome(ok=True, result=result, duration_ms=(self._timer() - started) * 1000)
