"""A multi-turn travel assistant.

Several user turns in one session, a business error, and a tool result so large that the
context compacts it before the next model call.
"""

from __future__ import annotations

import random
import re
from typing import Any

from pydantic import BaseModel

from ..agent import Agent
from ..tools import Tool, ToolError
from .scripted import ScriptedLLM, Turn, call, reply

__all__ = ["build"]

_CITIES = {"Lisbon": 21, "Oslo": 4, "Nairobi": 24, "Lima": 19}


class CityArgs(BaseModel):
    """Arguments of the city tools."""

    city: str


def _weather(args: CityArgs) -> dict[str, Any]:
    if args.city not in _CITIES:
        raise ToolError(f"unknown city {args.city}; known cities: {', '.join(_CITIES)}")
    return {"city": args.city, "celsius": _CITIES[args.city]}


def _guide(args: CityArgs) -> dict[str, Any]:
    sights = [
        f"{args.city} sight {i}: " + "a long description of the place " * 6 for i in range(80)
    ]
    return {"city": args.city, "sights": sights}


def _city_in(text: str, rng: random.Random) -> str:
    named = re.search(r"\b(?:in|for|is) ([A-Z][a-z]+)", text)
    return named.group(1) if named else rng.choice(list(_CITIES))


def _policy(turn: Turn, rng: random.Random) -> Any:
    city = _city_in(turn.user, rng)
    wants_guide = "guide" in turn.user
    if not turn.results:
        tool = "city_guide" if wants_guide else "get_weather"
        return reply(None, call(turn, tool, {"city": city}))
    last = turn.last or ""
    if last.startswith("error"):
        return reply(f"I don't know {city}. I can tell you about {', '.join(_CITIES)}.")
    if wants_guide:
        return reply(f"{city} has many sights; I summarised the guide.")
    return reply(
        rng.choice([f"It is {last.split(':')[-1].rstrip('}')} °C in {city}.", f"{city}: {last}"])
    )


def build(seed: int = 0) -> Agent:
    """The travel assistant."""
    return Agent(
        name="travel chat",
        system_prompt="You are a friendly travel assistant.",
        tools=[
            Tool(
                "get_weather", _weather, "Current weather in a city.", CityArgs, parallel_safe=True
            ),
            Tool(
                "city_guide",
                _guide,
                "A long guide to a city's sights.",
                CityArgs,
                parallel_safe=True,
            ),
        ],
        llm=ScriptedLLM(_policy, seed=seed),
        model="scripted-1",
        model_settings={"temperature": 0.3, "context_window": 32000},
    )
