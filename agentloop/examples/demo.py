"""The demo: run every example scenario into a journal, deterministically for a seed."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import dataclass

from journal import Journal

from ..agent import load_agent
from ..ports import counter_ids
from ..runtime import AgentRuntime
from .scenarios import SCENARIOS, Scenario

__all__ = ["DemoSession", "demo_session_id", "run_demo"]


@dataclass(frozen=True)
class DemoSession:
    """One session the demo ran (or found already there)."""

    session_id: str
    scenario: Scenario
    seed: int
    status: str
    created: bool


def demo_session_id(scenario: Scenario, seed: int) -> str:
    """The deterministic id of a scenario's session for a seed."""
    return f"demo-{scenario.name}-s{seed}"


async def _run_one(journal: Journal, scenario: Scenario, seed: int) -> DemoSession:
    session_id = demo_session_id(scenario, seed)
    existing = journal.summary(session_id)
    if existing is not None:
        return DemoSession(session_id, scenario, seed, existing.status, created=False)
    agent = load_agent(scenario.reference, seed=seed)
    runtime = AgentRuntime(agent, journal, ids=counter_ids(session_id))
    runtime.start(session_id, metadata={"scenario": scenario.name, "seed": seed, "demo": True})
    status = "running"
    for text in scenario.inputs(random.Random(seed)):
        result = await runtime.run_turn(session_id, text)
        status = result.status
        if status in ("halted", "failed"):
            break
    return DemoSession(session_id, scenario, seed, status, created=True)


def run_demo(
    journal: Journal,
    *,
    seed: int = 0,
    sessions: int | None = None,
    progress: Callable[[DemoSession], None] | None = None,
) -> list[DemoSession]:
    """Run ``sessions`` demo sessions (default: one per scenario) into ``journal``.

    Scenario ``i`` runs with seed ``seed + i // len(SCENARIOS)``, so more sessions than
    scenarios repeat them with new seeds. Sessions already in the journal are left alone.
    """
    count = len(SCENARIOS) if sessions is None else sessions
    done: list[DemoSession] = []
    for index in range(count):
        scenario = SCENARIOS[index % len(SCENARIOS)]
        ran = asyncio.run(_run_one(journal, scenario, seed + index // len(SCENARIOS)))
        done.append(ran)
        if progress is not None:
            progress(ran)
    return done
