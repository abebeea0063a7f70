"""An incident-search agent whose database is down: its breaker opens after three failures.

With a fallback the next search is routed to a cache and the session completes; without
one the session halts on the open circuit. The model API is busy too: the first request of
a session gets a 503, journaled as a failed model call and asked again (the guardrail
``model_retries``).
"""

from __future__ import annotations

import random
from typing import Any

from pydantic import BaseModel

from journal import Guardrails

from ..agent import Agent
from ..ports import ModelRequest, ModelResponse
from ..tools import Tool
from .scripted import ScriptedLLM, Turn, call, reply

__all__ = ["build", "build_no_fallback"]

PROMPT = "You help on-call engineers find past incidents similar to the one they describe."
OUTAGE_CALLS = 3


class SearchArgs(BaseModel):
    """Arguments of both searches."""

    query: str


def _tools(with_fallback: bool) -> list[Tool]:
    attempts = [0]

    def search_incidents(args: SearchArgs) -> list[dict[str, Any]]:
        attempts[0] += 1
        if attempts[0] <= OUTAGE_CALLS:
            raise ConnectionError("connection to incidents-db:5432 refused")
        return [{"id": "INC-7", "title": f"{args.query}: disk full on db-2"}]

    def search_cache(args: SearchArgs) -> list[dict[str, Any]]:
        return [
            {"id": "INC-7", "title": f"{args.query}: disk full on db-2", "stale": True},
            {"id": "INC-3", "title": f"{args.query}: expired TLS certificate", "stale": True},
        ]

    tools = [
        Tool(
            "search_incidents",
            search_incidents,
            "Search the incident database.",
            SearchArgs,
            parallel_safe=True,
            fallback="search_cache" if with_fallback else None,
        )
    ]
    if with_fallback:
        tools.append(
            Tool(
                "search_cache",
                search_cache,
                "Search yesterday's incident cache.",
                SearchArgs,
                parallel_safe=True,
            )
        )
    return tools


def _policy(turn: Turn, rng: random.Random) -> Any:
    topic = turn.user.rstrip("?.!")
    last = turn.last
    if last is None or '"id"' not in last:
        phrasing = rng.choice([topic, f"{topic} outage", f"incidents about {topic}"])
        return reply(None, call(turn, "search_incidents", {"query": phrasing}))
    found = last.count('"id"')
    return reply(f"I found {found} similar incident(s); the closest is INC-7 (disk full on db-2).")


class ModelUnavailable(Exception):
    """The model API's 503: overloaded for a moment."""

    status_code = 503


class _BusyAtFirst(ScriptedLLM):
    """The scripted model, answering a session's first request with a 503."""

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Refuse the first request after the user's (seq 2); answer the others."""
        if request.seq == 2:
            raise ModelUnavailable("503 Service Unavailable: the model is overloaded")
        return await super().complete(request)


def _build(seed: int, with_fallback: bool) -> Agent:
    """The agent; with the fallback, its model is busy at first and retried once."""
    return Agent(
        name="incidents" if with_fallback else "incidents (no fallback)",
        system_prompt=PROMPT,
        tools=_tools(with_fallback),
        llm=(_BusyAtFirst if with_fallback else ScriptedLLM)(_policy, seed=seed),
        model="scripted-1",
        guardrails=Guardrails(model_retries=1 if with_fallback else 0),
    )


def build(seed: int = 0) -> Agent:
    """The incident agent with a cache to fall back on (and a model busy at first)."""
    return _build(seed, True)


def build_no_fallback(seed: int = 0) -> Agent:
    """The incident agent without a fallback: an open breaker halts it."""
    return _build(seed, False)
