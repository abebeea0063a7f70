"""A research agent: parallel-safe reads in one response, then a serial write.

Sources answer after different delays, so they finish out of order; the journal still
records their results in the order the model proposed them. One source is too slow and
times out.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

from pydantic import BaseModel

from ..agent import Agent
from ..tools import Tool
from .scripted import ScriptedLLM, Turn, call, reply

__all__ = ["SOURCES", "build"]

SOURCES = {
    "https://docs.example/wal": 0.06,
    "https://blog.example/fsync": 0.01,
    "https://paper.example/aries": 0.03,
    "https://forum.example/slow-thread": 1.0,
}
"""Source URL → seconds it takes to answer; the last one exceeds the tool's timeout."""


class SourceArgs(BaseModel):
    """Arguments of fetch_source."""

    url: str


class NotesArgs(BaseModel):
    """Arguments of save_notes."""

    title: str
    text: str


async def _fetch_source(args: SourceArgs) -> dict[str, Any]:
    await asyncio.sleep(SOURCES.get(args.url, 0.0))
    return {"url": args.url, "summary": f"notes from {args.url.split('/')[2]}"}


def _tools() -> list[Tool]:
    saved: list[str] = []

    def save_notes(args: NotesArgs) -> dict[str, Any]:
        saved.append(args.title)
        return {"saved": args.title, "notes": len(saved)}

    return [
        Tool(
            "fetch_source",
            _fetch_source,
            "Read one source.",
            SourceArgs,
            parallel_safe=True,
            timeout_s=0.3,
        ),
        Tool("save_notes", save_notes, "Save research notes (a write).", NotesArgs),
    ]


def _policy(turn: Turn, rng: random.Random) -> Any:
    if turn.called("fetch_source") == 0:
        urls = list(SOURCES)
        rng.shuffle(urls)
        return reply(
            "Reading the sources in parallel.",
            *(call(turn, "fetch_source", {"url": url}, i) for i, url in enumerate(urls)),
        )
    if turn.called("save_notes") == 0:
        read = sum(1 for r in turn.answers("fetch_source") if not r.startswith("error"))
        text = f"{read} sources read on {turn.user}"
        return reply(None, call(turn, "save_notes", {"title": turn.user[:40], "text": text}))
    return reply(rng.choice(["Notes saved.", "Research done; notes saved."]))


def build(seed: int = 0) -> Agent:
    """The research agent."""
    return Agent(
        name="research",
        system_prompt="Research the user's question from several sources and save notes.",
        tools=_tools(),
        llm=ScriptedLLM(_policy, seed=seed),
        model="scripted-1",
    )
