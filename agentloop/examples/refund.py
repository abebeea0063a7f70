"""A refund agent, in two versions: one whose guard has a bug, and its fixed twin.

The buggy guard only checks that the amount is positive, so a customer who asks for more
than the order's refundable balance gets it. The fixed guard refuses with a message that
tells the model the most it may refund, and the model proposes that instead. Replaying a
recorded buggy session with the fixed agent diverges exactly at the refund.
"""

from __future__ import annotations

import random
import re
from typing import Any

from pydantic import BaseModel, Field

from journal import SessionState

from ..agent import Agent
from ..tools import Tool, ToolError
from .scripted import ScriptedLLM, Turn, call, reply

__all__ = ["RefundArgs", "build_buggy", "build_fixed", "order_total"]

PROMPT = (
    "You are a support agent for an online shop. Look an order up before refunding it, and "
    "never refund more than the order's refundable balance."
)


class LookupArgs(BaseModel):
    """Arguments of lookup_order."""

    order_id: str = Field(description="the order number, e.g. 1042")


class RefundArgs(BaseModel):
    """Arguments of issue_refund."""

    order_id: str
    amount: float = Field(gt=0, description="dollars to refund")


def order_total(order_id: str) -> float:
    """The total of a (fictional) order: a fixed function of its number."""
    digits = int(re.sub(r"\D", "", order_id) or "0")
    return float(50 + (digits % 9) * 10)


def _refundable(args: RefundArgs, state: SessionState) -> float:
    del state  # the balance comes from the order itself; nothing was refunded before
    return order_total(args.order_id)


def _buggy_guard(args: RefundArgs, state: SessionState) -> str | None:
    # The bug: only the sign is checked; the balance is forgotten.
    return None if args.amount > 0 else "the refund amount must be positive"


def _fixed_guard(args: RefundArgs, state: SessionState) -> str | None:
    limit = _refundable(args, state)
    if args.amount > limit:
        return (
            f"amount (${args.amount:g}) exceeds the order's refundable balance (${limit:g}); "
            f"propose a refund of at most ${limit:g}"
        )
    return None


def _tools(guard: Any) -> list[Tool]:
    refunds: list[str] = []

    def lookup_order(args: LookupArgs) -> dict[str, Any]:
        if not args.order_id.isdigit() or len(args.order_id) != 4:
            raise ToolError(f"order {args.order_id} not found")
        return {
            "order_id": args.order_id,
            "total": order_total(args.order_id),
            "refunded": 0.0,
            "customer_email": "jane.doe@gmail.com",
            "paid_with": "4111 1111 1111 1111",
        }

    def issue_refund(args: RefundArgs) -> dict[str, Any]:
        refunds.append(args.order_id)
        return {"refund_id": f"rf-{args.order_id}-{len(refunds)}", "amount": args.amount}

    return [
        Tool(
            "lookup_order",
            lookup_order,
            "Look up an order's total and what was refunded.",
            LookupArgs,
            parallel_safe=True,
        ),
        Tool(
            "issue_refund", issue_refund, "Refund part or all of an order.", RefundArgs, guard=guard
        ),
    ]


def _policy(turn: Turn, rng: random.Random) -> Any:
    order = re.search(r"order (\w+)", turn.user)
    asked = re.search(r"\$(\d+(?:\.\d+)?)", turn.user)
    order_id = order.group(1) if order else "0000"
    if not turn.results:
        return reply(None, call(turn, "lookup_order", {"order_id": order_id}))
    last = turn.last or ""
    if last.startswith("error"):
        return reply(f"I could not find order {order_id}. Could you check the number?")
    if turn.called("issue_refund") == 0:
        amount = float(asked.group(1)) if asked else float(rng.choice([20, 35, 50]))
        thinking = rng.choice(["The customer asked for", "Refunding as requested:"])
        return reply(
            None,
            call(turn, "issue_refund", {"order_id": order_id, "amount": amount}),
            reasoning=f"{thinking} ${amount:g}.",
        )
    most = re.search(r"at most \$(\d+(?:\.\d+)?)", last)
    if most and last.startswith("rejected"):
        return reply(
            None, call(turn, "issue_refund", {"order_id": order_id, "amount": float(most.group(1))})
        )
    refunded = re.search(r'"amount":(\d+(?:\.\d+)?)', last)
    value = refunded.group(1) if refunded else "?"
    return reply(
        rng.choice(
            [f"Done: refunded ${value} for order {order_id}.", f"Refund of ${value} issued."]
        )
    )


def _build(name: str, guard: Any, seed: int) -> Agent:
    return Agent(
        name=name,
        system_prompt=PROMPT,
        tools=_tools(guard),
        llm=ScriptedLLM(_policy, seed=seed),
        model="scripted-1",
        model_settings={"temperature": 0.7},
    )


def build_buggy(seed: int = 0) -> Agent:
    """The refund agent whose guard lets a refund exceed the order's balance."""
    return _build("refund (buggy guard)", _buggy_guard, seed)


def build_fixed(seed: int = 0) -> Agent:
    """The same agent with the guard fixed."""
    return _build("refund", _fixed_guard, seed)
