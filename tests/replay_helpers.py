"""Helpers for the replay, timeline, fork and diff tests: agents with a buildable reference,
a random policy, recorded sessions, copies of sessions with edits, and a counting journal.

The agents here are built by ``tests.replay_helpers:FACTORY`` references, so a replay can
rebuild them from what ``session_started`` recorded. Nothing here asserts.
"""

from __future__ import annotations

import asyncio
import random
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel

from agentloop import Agent, AgentRuntime, Tool, ToolError, counter_ids
from agentloop.examples import SCENARIOS, ScriptedLLM, Turn, call, reply
from journal import (
    ActionProposed,
    AgentEvent,
    Journal,
    RecordedEvent,
    SessionState,
    ToolCall,
    export_session,
    import_file,
)
from journal.formats import FORMAT, FORMAT_VERSION
from replay import record_of

from .loop_helpers import fixed_clock

HERE = "tests.replay_helpers"
BUGGY = "demo-refund-buggy-s0"
FIXED = "agentloop.examples.refund:build_fixed"
LIMIT = 50
"""The most the strict ``pay`` guard allows."""


class Q(BaseModel):
    """Arguments of echo, lookup, flaky and stock."""

    q: str


class Pay(BaseModel):
    """Arguments of pay."""

    amount: int


STOCK: dict[str, int] = {}
"""What the ``stock`` tool answers (tests change it between recording and a live replay)."""


def _flaky(args: Q) -> dict[str, Any]:
    if args.q.startswith("x"):
        raise ToolError(f"no record for {args.q}")
    return {"flaky": args.q}


def _guard_none(args: Pay, state: SessionState) -> str | None:
    return None


def _guard_strict(args: Pay, state: SessionState) -> str | None:
    if args.amount > LIMIT:
        return f"amount ({args.amount}) exceeds {LIMIT}; propose at most {LIMIT}"
    return None


def _guard_raising(args: Pay, state: SessionState) -> str | None:
    if args.amount > LIMIT:
        raise KeyError(f"no limit configured for {args.amount}")
    return None


GUARDS: dict[str, Callable[[Pay, SessionState], str | None]] = {
    "none": _guard_none,
    "strict": _guard_strict,
    "raising": _guard_raising,
}


def tools(guard: str = "none") -> list[Tool]:
    """The small tool set: two parallel-safe reads, a guarded payment, a flaky and a stock."""
    return [
        Tool("echo", lambda a: {"echo": a.q}, "Echo a string.", Q, parallel_safe=True),
        Tool("lookup", lambda a: {"q": a.q, "n": len(a.q)}, "Look up.", Q, parallel_safe=True),
        Tool("pay", lambda a: {"paid": a.amount}, "Pay an amount.", Pay, guard=GUARDS[guard]),
        Tool("flaky", _flaky, "Fails for names starting with x.", Q),
        Tool("stock", lambda a: {"level": STOCK.get(a.q, 0)}, "Stock level.", Q),
    ]


_NAMES = ["a", "b", "c", "xa"]
_AMOUNTS = [10, 40, 60, 90]


def _random_call(turn: Turn, rng: random.Random, index: int) -> ToolCall:
    tool = rng.choice(["echo", "lookup", "pay", "pay", "flaky", "stock", "nope"])
    args: dict[str, Any] | str
    if tool == "pay":
        args = {"amount": rng.choice(_AMOUNTS)}
    else:
        args = {"q": rng.choice(_NAMES)}
    odd = rng.random()
    if odd < 0.05:
        args = {"wrong": 1}
    elif odd < 0.08:
        args = '{"q": "a"'
    return call(turn, tool, args, index)


def random_policy(turn: Turn, rng: random.Random) -> Any:
    """A random model over the small tool set: 1 to 3 calls a response, or an answer."""
    if len(turn.calls) >= 12 or rng.random() < 0.2:
        return reply(rng.choice(["done", "all set", "finished"]))
    count = rng.choice([1, 1, 2, 3])
    return reply(None, *(_random_call(turn, rng, i) for i in range(count)))


def pay_policy(turn: Turn, rng: random.Random) -> Any:
    """Pays the amount the user asks for (``pay N``) once, lowers it when told, then answers."""
    del rng
    asked = int(turn.user.split()[-1])
    if not turn.results:
        return reply(None, call(turn, "echo", {"q": "order"}))
    if turn.called("pay") == 0:
        return reply(None, call(turn, "pay", {"amount": asked}))
    last = turn.last or ""
    if last.startswith("rejected") and turn.called("pay") == 1:
        return reply(None, call(turn, "pay", {"amount": LIMIT}))
    return reply(f"paid, last answer: {last[:40]}")


def _agent(name: str, policy: Any, seed: int, guard: str, **options: Any) -> Agent:
    return Agent(
        name=name,
        system_prompt="You are a test agent with a small tool set.",
        tools=tools(guard),
        llm=ScriptedLLM(policy, seed=seed),
        model="scripted-1",
        code_version="tests",
        **options,
    )


def build_random(seed: int = 0) -> Agent:
    """The random agent; its pay guard allows everything."""
    return _agent("random", random_policy, seed, "none")


def build_random_strict(seed: int = 0) -> Agent:
    """The random agent whose pay guard rejects amounts above `LIMIT`."""
    return _agent("random (strict)", random_policy, seed, "strict")


def build_pay(seed: int = 0) -> Agent:
    """The paying agent; its guard allows everything."""
    return _agent("pay", pay_policy, seed, "none")


def build_pay_strict(seed: int = 0) -> Agent:
    """The paying agent whose guard rejects amounts above `LIMIT`."""
    return _agent("pay (strict)", pay_policy, seed, "strict")


def build_pay_raising(seed: int = 0) -> Agent:
    """The paying agent whose guard raises (agent code failing) above `LIMIT`."""
    return _agent("pay (raising)", pay_policy, seed, "raising")


def build_plain() -> Agent:
    """The paying agent without a model of its own (only a replay can drive it)."""
    return Agent(
        name="plain",
        system_prompt="You are a test agent with a small tool set.",
        tools=tools(),
        model="scripted-1",
        code_version="tests",
    )


def record(
    journal: Journal,
    factory: str,
    inputs: Sequence[str],
    *,
    session_id: str = "rec",
    seed: int = 0,
    **build: Any,
) -> str:
    """Run ``tests.replay_helpers:FACTORY`` (seed recorded in metadata) through ``inputs``."""
    from agentloop import load_agent

    agent = load_agent(f"{HERE}:{factory}", seed=seed, **build)
    runtime = AgentRuntime(agent, journal, clock=fixed_clock, ids=counter_ids(session_id))

    async def go() -> None:
        runtime.start(session_id, metadata={"seed": seed})
        for text in inputs:
            result = await runtime.run_turn(session_id, text)
            if result.status in ("halted", "failed"):
                return

    asyncio.run(go())
    return session_id


def record_demo(journal: Journal, seed: int = 0) -> list[str]:
    """Run every demo scenario into ``journal``; return the session ids in scenario order."""
    from agentloop.examples import run_demo

    return [item.session_id for item in run_demo(journal, seed=seed, sessions=len(SCENARIOS))]


def demo_file(folder: Path) -> Path:
    """A journal file ``folder/demo.db`` holding every demo session (seed 0)."""
    path = folder / "demo.db"
    with Journal.open(path) as journal:
        record_demo(journal)
    return path


def copy_all(source: Path, target: Journal) -> Journal:
    """Copy every session of the journal at ``source`` into ``target``; return ``target``."""
    with Journal.open(source) as journal:
        for summary in journal.sessions():
            copy_session(journal, summary.session_id, target)
    return target


Edit = Callable[[RecordedEvent], AgentEvent | None]
"""Returns the event to write instead (None drops the event)."""


def copy_session(
    source: Journal,
    session_id: str,
    target: Journal,
    *,
    new_id: str | None = None,
    stop: int | None = None,
    edit: Edit | None = None,
) -> str:
    """Copy a session's events (seq < ``stop``) into ``target``, each through ``edit``.

    Each event keeps its recorded ``ts``; seqs are dense again after dropped events.
    """
    new_id = new_id or session_id
    seq = 0
    for item in source.events(session_id, stop=stop):
        event = item.event if edit is None else edit(item)
        if event is None:
            continue
        target.append(new_id, [event], expected_seq=seq, ts=item.ts)
        seq += 1
    return new_id


def with_call(index: int, seq: int, **changes: Any) -> Edit:
    """An edit that changes call ``index`` of the proposal at ``seq``."""

    def edit(item: RecordedEvent) -> AgentEvent:
        event = item.event
        if item.seq != seq:
            return event
        assert isinstance(event, ActionProposed)
        calls = list(event.calls)
        calls[index] = calls[index].model_copy(update=changes)
        return event.model_copy(update={"calls": calls})

    return edit


def write_export(journal: Journal, session_id: str, path: Path, *, keep: int | None = None) -> Path:
    """Export a session as JSONL (only the header and the first ``keep`` events when given)."""
    lines = export_session(journal, session_id).splitlines(keepends=True)
    path.write_bytes(b"".join(lines if keep is None else lines[: keep + 1]))
    return path


def proposals(journal: Journal, session_id: str) -> Iterator[tuple[int, ToolCall]]:
    """Every proposed call of a session, with the seq of its proposal."""
    for item in journal.events(session_id):
        if isinstance(item.event, ActionProposed):
            for proposed in item.event.calls:
                yield item.seq, proposed


class CountingJournal:
    """Wraps a journal and counts the events read through ``events`` (everything else passes)."""

    def __init__(self, journal: Journal) -> None:
        self._journal = journal
        self.read = 0

    def events(self, session_id: str, **bounds: Any) -> Iterator[RecordedEvent]:
        for item in self._journal.events(session_id, **bounds):
            self.read += 1
            yield item

    def __getattr__(self, name: str) -> Any:
        return getattr(self._journal, name)


AIRLINE_CALLS: list[tuple[str, list[tuple[str, Any]]]] = []
"""What each tool of `build_airline_spy` received: its name and its arguments in order."""


def build_airline_spy(seed: int = 0) -> Agent:
    """The airline example, its tools logging what they receive into `AIRLINE_CALLS`."""
    from dataclasses import replace

    from agentloop.examples.airline import build

    agent = build(seed)

    def spied(tool: Tool) -> Tool:
        def run(args: dict[str, Any]) -> Any:
            AIRLINE_CALLS.append((tool.name, list(args.items())))
            return tool.fn(args)

        return replace(tool, fn=run)

    return replace(agent, tools=[spied(tool) for tool in agent.tools])


def copy_as_version_2(items: Iterable[RecordedEvent], target: Journal, session_id: str) -> None:
    """Import ``items`` into ``target`` as a session recorded before ``session_started`` v3:
    its ``session_started`` at v2 (no ``client_settings``), seqs dense, times kept."""
    header = {"format": FORMAT, "format_version": FORMAT_VERSION, "session_id": session_id}
    lines = [orjson.dumps(header)]
    for seq, item in enumerate(items):
        record = {**record_of(item), "seq": seq}
        record.pop("hash")
        if record["type"] == "session_started":
            record.pop("client_settings")
            record["v"] = 2
        lines.append(orjson.dumps(record))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "old.jsonl"
        path.write_bytes(b"\n".join(lines) + b"\n")
        import_file(target, path)
