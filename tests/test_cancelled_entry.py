"""An entry cancelled mid-session (a timeout, a client gone) ends its session as halted."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from capture import Capture
from journal import AgentHalted, Journal

capture = Capture(Journal.open(":memory:"))
STARTED: list[str] = []


@capture.tool
async def slow_lookup(order_id: int) -> dict[str, Any]:
    STARTED.append(f"lookup {order_id}")
    await asyncio.sleep(10)
    return {"order_id": order_id}


@capture.entry
async def handle(order_id: int) -> str:
    return str(await slow_lookup(order_id))


@pytest.mark.parametrize("cancel", ["timeout", "task.cancel"])
def test_a_cancelled_entry_halts_its_session_and_the_cancellation_goes_on(cancel: str) -> None:
    journal = Journal.open(":memory:")
    capture.journal = journal

    async def serve() -> None:
        if cancel == "timeout":
            await asyncio.wait_for(handle(7), timeout=0.05)
        task = asyncio.ensure_future(handle(7))
        while not STARTED:
            await asyncio.sleep(0.001)
        task.cancel()
        await task

    STARTED.clear()
    with pytest.raises((asyncio.CancelledError, TimeoutError)):
        asyncio.run(serve())
    (summary,) = journal.sessions()
    assert summary.status == "failed"
    last = list(journal.events(summary.session_id))[-1].event
    assert isinstance(last, AgentHalted) and last.rule == "error"
    assert last.reason.startswith("CancelledError")
