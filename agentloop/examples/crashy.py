"""An agent whose own code raises: its guard looks a key up in a table that lacks it.

The exception is agent code failing, not a tool failing, so the session ends as
``failed`` (rule ``error``) with the exception's message.
"""

from __future__ import annotations

import random
from typing import Any

from pydantic import BaseModel

from journal import SessionState

from ..agent import Agent
from ..tools import Tool
from .scripted import ScriptedLLM, Turn, call, reply

__all__ = ["build"]

_DISCOUNTS = {"SPRING10": 0.10, "VIP20": 0.20}


class DiscountArgs(BaseModel):
    """Arguments of apply_discount."""

    code: str


def _guard(args: DiscountArgs, state: SessionState) -> str | None:
    rate = _DISCOUNTS[args.code]  # the bug: an unknown code raises KeyError
    return None if rate < 0.5 else "discounts above 50% need a manager"


def _apply(args: DiscountArgs) -> dict[str, Any]:
    return {"code": args.code, "applied": True}


def _policy(turn: Turn, rng: random.Random) -> Any:
    if not turn.results:
        code = rng.choice(["WINTER15", "BLACKFRIDAY"])
        return reply(None, call(turn, "apply_discount", {"code": code}))
    return reply("Discount applied.")


def build(seed: int = 0) -> Agent:
    """The agent with the crashing guard."""
    return Agent(
        name="discounts (crashing guard)",
        system_prompt="Apply the discount code the user gives.",
        tools=[
            Tool("apply_discount", _apply, "Apply a discount code.", DiscountArgs, guard=_guard)
        ],
        llm=ScriptedLLM(_policy, seed=seed),
        model="scripted-1",
    )
