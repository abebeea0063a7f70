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
import types
import uuid
from collections.abc import Callable, Coroutine, Generator
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from journal import (
    ActionProposed,
    Clock,
    FailureKind,
    SessionState,
    ToolCall,
    Usage,
    failure_message,
    system_clock,
)

from .tools import Tool, classify_error

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

IdSource = Callable[[str], str]
"""Returns a fresh id for a purpose (``"session"``, ``"call"``)."""


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

    @classmethod
    def of(cls, proposal: ActionProposed) -> ModelResponse:
        """The output an ``action_proposed`` holds, each call's ``args`` as given.

        Arguments come back as the model gave them (`journal.ToolCall.as_given`: the text's
        key order and number forms). The one mapping from a proposal to a model output:
        the runtime's live model, a replay's recorded one and the loops' ports use it.
        """
        return cls(
            calls=[call.model_copy(update={"args": call.as_given}) for call in proposal.calls],
            text=proposal.text,
            reasoning=proposal.reasoning,
            model=proposal.model,
            usage=proposal.usage,
            latency_ms=proposal.latency_ms,
            cost=proposal.cost,
        )

    def as_proposal(self, model: str | None = None) -> ActionProposed:
        """This output as the ``action_proposed`` it is recorded as.

        ``model`` when the output names none; each call keeps its argument text
        (`journal.ToolCall.with_text`).
        """
        return ActionProposed(
            calls=[call.with_text() for call in self.calls],
            text=self.text,
            reasoning=self.reasoning,
            model=self.model or model,
            usage=self.usage,
            latency_ms=self.latency_ms,
            cost=self.cost,
        )


@runtime_checkable
class LLMProvider(Protocol):
    """The model port: one call per Propose phase."""

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Return the model's next output for ``request``."""
        ...


@dataclass(frozen=True)
class ToolOutcome:
    """What running one tool call produced: a result, or a failure of some kind.

    ``abandoned``: the executor stopped waiting for the call at its timeout and never took
    its outcome (recorded on ``action_failed``); see `LiveToolExecutor`.
    """

    ok: bool
    result: Any = None
    kind: FailureKind | None = None
    message: str = ""
    duration_ms: float | None = None
    abandoned: bool = False


class ToolExecutor(Protocol):
    """The tool port: runs one validated call and reports its outcome (never raises)."""

    async def execute(
        self, tool: Tool, call: ToolCall, args: Any, state: SessionState, timeout_s: float
    ) -> ToolOutcome:
        """Run ``tool`` with validated ``args``; classify any error into the outcome."""
        ...


class LiveToolExecutor:
    """Runs tools for real: async tools awaited, sync tools in a worker thread, with timeouts.

    A sync call that returns an awaitable (an object whose ``__call__`` is async, a lambda
    around an async function) has it awaited, under the same timeout.

    At the timeout the call is abandoned: the outcome is a ``timeout`` failure with
    ``abandoned`` set, and whatever the call does afterwards is never journaled. An async
    tool is cancelled there (``CancelledError`` at its next ``await``). A sync tool cannot
    be stopped: Python has no way to kill a thread, so its worker thread runs on until the
    function returns, holding one thread of the loop's default executor (which
    ``asyncio.run`` waits for when it closes the loop), and its late result (or error) is
    dropped. A ``TimeoutError`` the tool raises itself is an ordinary failure of
    kind ``timeout``: the tool finished, so it is not abandoned.

    ``timer`` measures durations (monotonic seconds); inject a fake one for tests.
    """

    def __init__(self, timer: Callable[[], float] = time.perf_counter) -> None:
        self._timer = timer

    async def execute(
        self, tool: Tool, call: ToolCall, args: Any, state: SessionState, timeout_s: float
    ) -> ToolOutcome:
        """Run the tool; see `ToolExecutor.execute`."""
        started = self._timer()
        # asyncio.timeout, not wait_for: no extra task per call (the hot path); its deadline
        # counts from here, whenever it is entered
        deadline = asyncio.timeout(timeout_s)
        try:
            if tool.is_async:
                running = tool.fn(args)
                try:
                    waits_on = running.send(None)
                except StopIteration as done:  # it never waited: no timer to set
                    result = done.value
                else:
                    async with deadline:
                        result = await _resumed(running, waits_on)
            else:
                async with deadline:
                    result = await asyncio.to_thread(tool.fn, args)
                    if inspect.isawaitable(result):  # an object with an async __call__, ...
                        result = await result
        except Exception as raised:
            abandoned = deadline.expired()
            error = (
                TimeoutError(f"{tool.name} did not answer within {timeout_s:g} s")
                if abandoned
                else raised
            )
            try:
                kind = tool.classify(error)
            except Exception:
                kind = classify_error(error)
            return ToolOutcome(
                ok=False,
                kind=kind,
                message=failure_message(error),
                duration_ms=(self._timer() - started) * 1000,
                abandoned=abandoned,
            )
        return ToolOutcome(ok=True, result=result, duration_ms=(self._timer() - started) * 1000)


@types.coroutine
def _resumed(running: Coroutine[Any, Any, Any], waits_on: Any) -> Generator[Any, Any, Any]:
    """Go on with a coroutine that ran up to its first wait (it yielded ``waits_on``).

    What ``await`` does, from the second step on: each value the coroutine yields goes
    to the task, each answer (or exception: a cancellation, the timeout's) back into it.
    A coroutine that finishes without waiting never gets here, so it costs no timer: a
    timeout can only cancel a coroutine at a wait anyway.
    """
    while True:
        try:
            answer = yield waits_on
        except GeneratorExit:
            running.close()
            raise
        except BaseException as error:  # given to the coroutine, as await does
            try:
                waits_on = running.throw(error)
            except StopIteration as done:
                return done.value
        else:
            try:
                waits_on = running.send(answer)
            except StopIteration as done:
                return done.value
