"""Agents whose models misbehave in loops: each is stopped by one guardrail.

* ``build_repeat``: polls the same ticket with the same arguments (exact-repeat halt);
* ``build_crawler``: follows "next page" links one call at a time (step limit);
* ``build_stormy``: answers with bursts of duplicate calls (a storm, suppressed once with a
  reflection message, then a halt when it storms again).
"""

from __future__ import annotations

import random
from typing import Any

from pydantic import BaseModel

from ..agent import Agent
from ..tools import Tool
from .scripted import Policy, ScriptedLLM, Turn, call, reply

__all__ = ["build_crawler", "build_repeat", "build_stormy"]


class TicketArgs(BaseModel):
    """Arguments of get_ticket_status."""

    ticket_id: int


class PageArgs(BaseModel):
    """Arguments of fetch_page."""

    url: str


class SkuArgs(BaseModel):
    """Arguments of check_inventory."""

    sku: str


def _ticket_status(args: TicketArgs) -> dict[str, Any]:
    return {"ticket": args.ticket_id, "status": "pending"}


def _fetch_page(args: PageArgs) -> dict[str, Any]:
    number = int(args.url.rsplit("=", 1)[-1]) if "=" in args.url else 1
    return {
        "url": args.url,
        "items": [f"item-{number}-{i}" for i in range(3)],
        "next": f"/list?page={number + 1}",
    }


def _inventory(args: SkuArgs) -> dict[str, Any]:
    return {"sku": args.sku, "in_stock": len(args.sku) % 3}


def _repeat_policy(turn: Turn, rng: random.Random) -> Any:
    del rng
    return reply(
        None,
        call(turn, "get_ticket_status", {"ticket_id": 42}),
        reasoning="Still pending; check again.",
    )


def _crawler_policy(turn: Turn, rng: random.Random) -> Any:
    page = turn.called("fetch_page") + 1
    return reply(
        None,
        call(turn, "fetch_page", {"url": f"/list?page={page}"}),
        reasoning=rng.choice(["More pages.", "Keep going."]),
    )


def _stormy_policy(turn: Turn, rng: random.Random) -> Any:
    fresh = ["A-1", "B-22", "C-333", "D-4444", "E-5", "F-66"][
        2 * turn.called("check_inventory") // 4 :
    ]
    skus = rng.sample(fresh[:4], 2)
    burst = [skus[0], skus[0], skus[1], skus[0]]
    return reply(
        None, *(call(turn, "check_inventory", {"sku": sku}, i) for i, sku in enumerate(burst))
    )


def _build(name: str, prompt: str, tool: Tool, policy: Policy, seed: int) -> Agent:
    return Agent(
        name=name,
        system_prompt=prompt,
        tools=[tool],
        llm=ScriptedLLM(policy, seed=seed),
        model="scripted-1",
    )


def build_repeat(seed: int = 0) -> Agent:
    """An agent that polls a ticket with identical calls until the repeat guardrail halts it."""
    tool = Tool(
        "get_ticket_status", _ticket_status, "Status of a ticket.", TicketArgs, parallel_safe=True
    )
    return _build(
        "ticket poller", "Report the status of the user's ticket.", tool, _repeat_policy, seed
    )


def build_crawler(seed: int = 0) -> Agent:
    """An agent that pages through a listing until the step limit halts it."""
    tool = Tool(
        "fetch_page", _fetch_page, "Fetch one page of the listing.", PageArgs, parallel_safe=True
    )
    return _build("crawler", "Collect every item of the listing.", tool, _crawler_policy, seed)


def build_stormy(seed: int = 0) -> Agent:
    """An agent whose model sends bursts of duplicate calls."""
    tool = Tool("check_inventory", _inventory, "Stock of one product.", SkuArgs, parallel_safe=True)
    prompt = "Check stock for the products the user lists."
    return _build("inventory (storms)", prompt, tool, _stormy_policy, seed)
