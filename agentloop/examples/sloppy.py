"""A shipping agent whose model is sloppy in every way the loop can repair or reject.

In one turn its model: writes a call into its reasoning instead of ``tool_calls``
(scavenged) with a wrong argument type (schema rejection), sends arguments cut off by a
token limit (truncation repair), calls a tool that does not exist (unknown tool), fills a
deeply nested schema in its flattened form (flatten repair), sends the same call twice
in one response (storm, suppressed) and first replies with nothing at all (an empty reply,
sent back with what to change). The session still completes.
"""

from __future__ import annotations

import json
import random
from typing import Any

from pydantic import BaseModel

from ..agent import Agent
from ..tools import Tool
from .scripted import ScriptedLLM, Turn, call, reply

__all__ = ["SHIPMENT_SCHEMA", "build"]

SHIPMENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "recipient": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "address": {
                    "type": "object",
                    "properties": {
                        "street": {"type": "string"},
                        "city": {"type": "string"},
                        "zip": {"type": "string"},
                        "country": {"type": "string"},
                    },
                    "required": ["street", "city", "zip", "country"],
                },
            },
            "required": ["name", "address"],
        },
        "parcel": {
            "type": "object",
            "properties": {
                "weight_kg": {"type": "number"},
                "length_cm": {"type": "number"},
                "width_cm": {"type": "number"},
                "height_cm": {"type": "number"},
            },
            "required": ["weight_kg"],
        },
        "service": {"type": "string", "enum": ["standard", "express"]},
    },
    "required": ["recipient", "parcel", "service"],
}
"""Ten leaves, three levels deep: shown to the model flattened (deeper than 2)."""


class QuoteArgs(BaseModel):
    """Arguments of quote_price."""

    weight_kg: float
    zone: int


def _quote(args: QuoteArgs) -> dict[str, Any]:
    return {"price": round(4.5 + args.weight_kg * 1.2 * args.zone, 2), "currency": "EUR"}


def _create(args: dict[str, Any]) -> dict[str, Any]:
    return {
        "shipment": "SHP-1001",
        "service": args["service"],
        "to": args["recipient"]["address"]["city"],
    }


def _policy(turn: Turn, rng: random.Random) -> Any:
    step = len(turn.results)
    weight = rng.choice([1.5, 2.5, 4.0])
    if step == 0:
        written = {"name": "quote_price", "arguments": {"weight_kg": f"{weight} kg", "zone": 3}}
        hidden = f"<tool_call>{json.dumps(written)}</tool_call>"
        return reply(None, reasoning=f"I should get a quote first. {hidden}")
    if step == 1:
        return reply(None, call(turn, "quote_price", f'{{"weight_kg": {weight}, "zone": 3'))
    if step == 2:
        return reply(None, call(turn, "track_parcel", {"parcel": "SHP-0"}))
    if step == 3:
        flat = {
            "recipient__name": "Ada Lovelace",
            "recipient__address__street": "12 St James's Square",
            "recipient__address__city": "London",
            "recipient__address__zip": "SW1Y 4JH",
            "recipient__address__country": "GB",
            "parcel__weight_kg": weight,
            "service": rng.choice(["standard", "express"]),
        }
        return reply(
            None, call(turn, "create_shipment", flat, 0), call(turn, "create_shipment", flat, 1)
        )
    told = any(
        m["role"] == "system" and m["content"].startswith("rejected:")
        for m in turn.request.messages
    )
    return reply("Shipment SHP-1001 is booked." if told else "")


def build(seed: int = 0) -> Agent:
    """The sloppy shipping agent."""
    return Agent(
        name="shipping (sloppy model)",
        system_prompt="Quote and book shipments for the user.",
        tools=[
            Tool(
                "quote_price", _quote, "Price of a parcel to a zone.", QuoteArgs, parallel_safe=True
            ),
            Tool("create_shipment", _create, "Book a shipment.", SHIPMENT_SCHEMA),
        ],
        llm=ScriptedLLM(_policy, seed=seed),
        model="scripted-1",
    )
