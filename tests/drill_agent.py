"""The agent of the fault drills, and the loop writer the crash drill kills.

``build`` (``tests.drill_agent:build``, recorded in every session it writes, so the
`Replayer` rebuilds it) is a scripted agent that looks things up in parallel, writes notes
of random sizes (so appends span pages of the file), now and then makes a call the gate
rejects, and answers after a few steps. ``write_sessions`` runs it forever, several turns
per session, and reports every append the journal returned.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Sequence
from datetime import datetime
from itertools import count
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from agentloop import Agent, AgentRuntime, ModelResponse, Tool, counter_ids
from agentloop.examples.scripted import ScriptedLLM, Turn, call, reply
from journal import AgentEvent, Journal
from journal.sqlite import SQLiteJournal

REFERENCE = "tests.drill_agent:build"


class Query(BaseModel):
    """Arguments of ``lookup``."""

    q: str


class Note(BaseModel):
    """Arguments of ``note``."""

    text: str


def _lookup(args: Query) -> dict[str, Any]:
    return {"q": args.q, "hits": [f"{args.q}/{i}" for i in range(len(args.q) % 4)]}


def _note(args: Note) -> dict[str, Any]:
    return {"stored": len(args.text)}


def _policy(turn: Turn, rng: random.Random) -> ModelResponse:
    if len(turn.results) >= 2 + len(turn.user) % 4:
        return reply(f"done with {turn.user} after {len(turn.results)} results")
    seq = turn.request.seq
    roll = rng.random()
    if roll < 0.4:
        return reply(
            None, *(call(turn, "lookup", {"q": f"{turn.user}/{seq}/{i}"}, i) for i in range(2))
        )
    if roll < 0.9:
        text = "".join(rng.choices("abcdefghij \n", k=rng.randint(10, 6000)))
        return reply(None, call(turn, "note", {"text": text}))
    return reply(None, call(turn, "note", {"words": seq}))  # the schema rejects it


def build(seed: int = 0) -> Agent:
    """The drill agent (tools ``lookup``, parallel-safe, and ``note``)."""
    return Agent(
        name="drill",
        system_prompt="You are the fault drills' agent.",
        tools=[
            Tool("lookup", _lookup, "Look a word up.", Query, parallel_safe=True),
            Tool("note", _note, "Write a note down.", Note),
        ],
        llm=ScriptedLLM(_policy, seed=seed),
        model="scripted-1",
        reference=REFERENCE,
        code_version="drill",
    )


class ReportingJournal(SQLiteJournal):
    """A SQLite journal that reports ``SESSION LAST_SEQ`` after every append that returned."""

    def __init__(self, path: str, report: Callable[[str], None]) -> None:
        super().__init__(path)
        self._report = report

    def append(
        self,
        session_id: str,
        events: Sequence[AgentEvent],
        *,
        expected_seq: int | None = None,
        ts: datetime | str | None = None,
    ) -> int:
        """Append, then report what was appended."""
        last = super().append(session_id, events, expected_seq=expected_seq, ts=ts)
        self._report(f"{session_id} {last}")
        return last


def run_session(runtime: AgentRuntime, session_id: str, turns: int, seed: int) -> None:
    """Start a drill session and run ``turns`` turns (fewer when a rule halts it)."""
    runtime.start(session_id, metadata={"seed": seed})
    for turn in range(turns):
        result = asyncio.run(runtime.run_turn(session_id, f"task {turn} of {session_id}"))
        if result.status in ("halted", "failed"):
            return


def write_sessions(path: str, prefix: str, seed: int, report: Callable[[str], None]) -> None:
    """Run drill sessions ``PREFIX-0``, ``PREFIX-1``... into ``path`` until killed."""
    with ReportingJournal(path, report) as journal:
        runtime = AgentRuntime(build(seed), journal, ids=counter_ids(prefix))
        for n in count():
            run_session(runtime, f"{prefix}-{n}", 1 + n % 3, seed)


def drill_journal(path: Path, sessions: int, turns: int, seed: int = 0) -> list[str]:
    """Write ``sessions`` drill sessions of ``turns`` turns each into ``path``; return their ids."""
    ids = [f"drill-{seed}-{n}" for n in range(sessions)]
    with Journal.open(path) as journal:
        runtime = AgentRuntime(build(seed), journal, ids=counter_ids(f"drill-{seed}"))
        for session_id in ids:
            run_session(runtime, session_id, turns, seed)
    return ids
