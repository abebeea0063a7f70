"""A scripted, stochastic stand-in for a model: deterministic for a seed, different across seeds.

A *policy* reads the request (the context the loop built from the journal) and a seeded
random generator, and returns the next response. `ScriptedLLM` adds what a real provider
reports: usage from the size of the request and the reply, a latency and a cost.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import orjson

from journal import ToolCall, Usage

from ..context import estimate_tokens
from ..ports import ModelRequest, ModelResponse

__all__ = ["Policy", "ScriptedLLM", "Turn", "call", "reply"]

Policy = Callable[["Turn", random.Random], ModelResponse]
"""Decides the next response from the current turn's view of the context."""


@dataclass(frozen=True)
class Turn:
    """The current turn as a policy sees it: the user's text and the tool answers so far."""

    request: ModelRequest
    user: str
    results: list[dict[str, Any]] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)
    turn_number: int = 0

    def answers(self, tool: str) -> list[str]:
        """The contents of tool messages answering calls to ``tool`` in this turn."""
        ids = {c["id"] for c in self.calls if c["function"]["name"] == tool}
        return [r["content"] for r in self.results if r.get("tool_call_id") in ids]

    def called(self, tool: str) -> int:
        """How many calls to ``tool`` this turn proposed."""
        return sum(1 for c in self.calls if c["function"]["name"] == tool)

    @property
    def last(self) -> str | None:
        """The content of the most recent tool answer, if any."""
        return self.results[-1]["content"] if self.results else None

    def next_id(self, index: int = 0) -> str:
        """A deterministic call id for this response."""
        return f"call_{self.request.seq}_{index}"


def _turn_of(request: ModelRequest) -> Turn:
    messages = request.messages
    starts = [i for i, m in enumerate(messages) if m["role"] == "user"]
    start = starts[-1] if starts else 0
    here = messages[start:]
    return Turn(
        request=request,
        user=here[0]["content"] if here and here[0]["role"] == "user" else "",
        results=[m for m in here if m["role"] == "tool"],
        calls=[c for m in here for c in m.get("tool_calls", [])],
        turn_number=len(starts),
    )


def call(turn: Turn, tool: str, args: dict[str, Any] | str, index: int = 0) -> ToolCall:
    """Build a tool call with a deterministic id."""
    return ToolCall(call_id=turn.next_id(index), tool=tool, args=args)


def reply(text: str | None = None, *calls: ToolCall, reasoning: str | None = None) -> ModelResponse:
    """Build a response (usage, latency and cost are filled in by `ScriptedLLM`)."""
    return ModelResponse(calls=list(calls), text=text, reasoning=reasoning)


class ScriptedLLM:
    """A model port that answers with a policy, seeded per session and position.

    Args:
        policy: decides each response.
        seed: the seed; the same seed gives the same session.
        model: the model name reported.
        price_in: dollars per million input tokens.
        price_out: dollars per million output tokens.
    """

    def __init__(
        self,
        policy: Policy,
        *,
        seed: int = 0,
        model: str = "scripted-1",
        price_in: float = 0.5,
        price_out: float = 1.5,
    ) -> None:
        self.policy = policy
        self.seed = seed
        self.model = model
        self.price_in = price_in
        self.price_out = price_out

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Answer with the policy; see `LLMProvider.complete`."""
        rng = random.Random(f"{self.seed}/{request.session_id}/{request.seq}")
        response = self.policy(_turn_of(request), rng)
        prompt = request.system_prompt + orjson.dumps(request.messages).decode()
        produced = (
            (response.text or "")
            + (response.reasoning or "")
            + "".join(
                c.args if isinstance(c.args, str) else orjson.dumps(c.args).decode()
                for c in response.calls
            )
        )
        usage = Usage(
            input_tokens=estimate_tokens(prompt) + 40 * len(request.tools),
            output_tokens=estimate_tokens(produced) + 5,
            cached_tokens=estimate_tokens(request.system_prompt) if request.seq > 2 else 0,
        )
        cost = (usage.input_tokens * self.price_in + usage.output_tokens * self.price_out) / 1e6
        return replace(
            response,
            model=response.model or self.model,
            usage=usage,
            latency_ms=round(rng.uniform(120, 900), 1),
            cost=round(cost, 8),
        )
