"""What capturing your own code costs, and how long its replay takes, beside the references.

    python bench/user_code_bench.py [--sessions N] [--steps N] [--repeat R] [--quick]

The application is a plain loop over the ``openai`` client with three tools, the loop a
team already has; it talks to an OpenAI-compatible server on 127.0.0.1 (the tests' policy
server, ``tests/fake_openai.py``, in a thread): four model calls and three tool calls per
session. Each round takes its turn at every case (medians of R rounds):

sessions, wall time of ``--sessions`` sessions
  (a) reference: the loop with the bare client and plain tools;
  (b) ours: the same loop captured (`capture.Capture`: the client, the tools, the
      entry) into a SQLite file;
  (c) ours: `replay.replay_entry` of every captured session with the server stopped (each
      request compared, the recorded responses served, the tools recorded);
per step, CPU time of ``--steps`` steps (a model call that proposes one tool call, and the
  call) in sessions of 10 steps, the conversation growing as a loop's does, the model an
  in-process stub returning the SDK's own objects (no HTTP, so only our work is measured)
  (d) reference: the bare step;
  (e) ours: the captured step (two appends: the proposal with its request, the result; a
      session adds its start, the question and its end);
  (f) reference: LangGraph's ``SqliteSaver.put`` of one checkpoint per step (the step's
      messages as its state), WAL with ``synchronous=NORMAL`` as ours; skipped with a line
      when ``langgraph-checkpoint-sqlite`` is not installed (``pip install -e '.[bench]'``).

The ratio that matters for (e) is its overhead, (e) - (d), against (f): what a checkpoint
store costs per step. ``quick_ratios()`` gives bench/run_all.py that ratio from a small run.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

from _common import Ratio, Report, Table, machine, report

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from capture import Capture  # noqa: E402
from journal import Journal  # noqa: E402
from replay import replay_entry  # noqa: E402
from tests.fake_openai import Handler, chat_completion  # noqa: E402

TOOL_SPECS = [
    {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
    for name in ("lookup_order", "check_stock", "send_email")
]


def lookup_order(order_id: str) -> dict[str, Any]:
    return {"order_id": order_id, "sku": "SKU-1", "total": 10.0}


def check_stock(sku: str, quantity: int) -> dict[str, Any]:
    return {"sku": sku, "in_stock": True, "units": 5}


def send_email(to: str, body: str) -> str:
    return "sent"


TOOLS: dict[str, Callable[..., Any]] = {
    "lookup_order": lookup_order,
    "check_stock": check_stock,
    "send_email": send_email,
}


def loop(client: Any, tools: dict[str, Callable[..., Any]]) -> Callable[[str], str]:
    """The team's loop: call the model until it answers, running the tools it asks for."""

    def answer(question: str) -> str:
        messages: list[Any] = [{"role": "user", "content": question}]
        while True:
            reply = client.chat.completions.create(
                model="fake-1", messages=messages, tools=TOOL_SPECS
            )
            message = reply.choices[0].message
            if not message.tool_calls:
                return str(message.content)
            messages.append(message.model_dump(exclude_none=True))
            for call in message.tool_calls:
                result = tools[call.function.name](**json.loads(call.function.arguments))
                messages.append(
                    {"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)}
                )

    return answer


def captured(journal: Journal, client: Any) -> tuple[Capture, Callable[[str], str]]:
    """The loop with its client, tools and entry captured into ``journal``."""
    capture = Capture(journal)
    tools = {name: capture.tool(fn, name=name) for name, fn in TOOLS.items()}
    return capture, capture.entry(loop(capture.openai(client), tools))


# -- sessions over HTTP --------------------------------------------------------------------


def questions(count: int) -> list[str]:
    return [f"Is order {100 + n} in stock? I want a unit, e-mail me." for n in range(count)]


def sessions_round(url: str, folder: Path, count: int, index: int) -> dict[str, float]:
    """Wall seconds of (a), (b) and (c) in one round."""
    from openai import OpenAI

    asked = questions(count)
    raw = OpenAI(base_url=url, api_key="local", max_retries=0)
    times: dict[str, float] = {}
    bare = loop(raw, TOOLS)
    started = time.perf_counter()
    for question in asked:
        bare(question)
    times["a"] = time.perf_counter() - started
    with Journal.open(folder / f"captured-{index}.db") as journal:
        _capture, entry = captured(journal, raw)
        started = time.perf_counter()
        for question in asked:
            entry(question)
        times["b"] = time.perf_counter() - started
        offline = OpenAI(base_url="http://127.0.0.1:9/v1", api_key="local", max_retries=0)
        _again, replayed = captured(journal, offline)  # the same code, no server behind it
        sessions = [summary.session_id for summary in journal.sessions()]
        started = time.perf_counter()
        verdicts = [replay_entry(journal, s, replayed).verdict for s in sessions]
        times["c"] = time.perf_counter() - started
    if set(verdicts) != {"identical"}:
        raise SystemExit(f"a replay diverged: {verdicts}")
    return times


def measure_sessions(count: int, repeat: int) -> dict[str, float]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02})
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    rounds: list[dict[str, float]] = []
    try:
        with tempfile.TemporaryDirectory(prefix="user-code-bench-") as folder:
            for index in range(repeat):
                rounds.append(sessions_round(url, Path(folder), count, index))
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    return {key: statistics.median(r[key] for r in rounds) for key in ("a", "b", "c")}


# -- per step, in process --------------------------------------------------------------------


class StubCompletions:
    """A model in process: every request gets one ``lookup_order`` call, as the SDK's type."""

    def __init__(self) -> None:
        self.calls = 0

    def create(self, **request: Any) -> Any:
        from openai.types.chat import ChatCompletion

        self.calls += 1
        body = chat_completion({"messages": [{"role": "user", "content": "order 7"}]})
        body["choices"][0]["message"]["tool_calls"][0]["id"] = f"call-{self.calls}"
        return ChatCompletion.model_validate(body)


class StubClient:
    def __init__(self) -> None:
        self.chat = type("Chat", (), {"completions": StubCompletions()})()


STEPS_PER_SESSION = 10


def session(client: Any, tools: dict[str, Callable[..., Any]]) -> None:
    """`STEPS_PER_SESSION` steps of the loop, the conversation growing as the loop's does:
    each step a model call, then the tool call it proposes."""
    messages: list[Any] = [{"role": "user", "content": "order 7"}]
    for _ in range(STEPS_PER_SESSION):
        reply = client.chat.completions.create(model="fake-1", messages=messages, tools=TOOL_SPECS)
        message = reply.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        call = message.tool_calls[0]
        result = tools[call.function.name](**json.loads(call.function.arguments))
        messages.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)})


def bare_steps(steps: int, folder: Path) -> float:
    client = StubClient()
    started = time.process_time()
    for _ in range(steps // STEPS_PER_SESSION):
        session(client, TOOLS)
    return time.process_time() - started


def captured_steps(steps: int, folder: Path) -> float:
    with Journal.open(folder / "steps.db") as journal:
        capture = Capture(journal)
        client = capture.openai(StubClient())
        tools = {name: capture.tool(fn, name=name) for name, fn in TOOLS.items()}
        run = capture.entry(session)
        started = time.process_time()
        for _ in range(steps // STEPS_PER_SESSION):
            run(client, tools)
        spent = time.process_time() - started
    for leftover in folder.glob("steps.db*"):
        leftover.unlink()
    return spent


def langgraph_steps(steps: int, folder: Path) -> float | None:
    try:
        from langgraph.checkpoint.base import create_checkpoint, empty_checkpoint
        from langgraph.checkpoint.sqlite import SqliteSaver
    except ImportError:
        return None
    conn = sqlite3.connect(folder / "lg.db", check_same_thread=False)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    saver = SqliteSaver(conn)
    saver.setup()
    body = chat_completion({"messages": [{"role": "user", "content": "order 7"}]})
    state = {"messages": [body["choices"][0]["message"], {"role": "tool", "content": "{}"}]}
    checkpoints = []
    latest = empty_checkpoint()
    for index in range(steps):
        latest = create_checkpoint(latest, None, index)
        latest["channel_values"] = state
        latest["channel_versions"] = {"messages": index + 1}
        checkpoints.append(latest)
    config: Any = {"configurable": {"thread_id": "bench", "checkpoint_ns": ""}}
    started = time.process_time()
    for index, checkpoint in enumerate(checkpoints):
        config = saver.put(config, checkpoint, {"step": index}, {"messages": index + 1})
    spent = time.process_time() - started
    conn.close()
    return spent


def step_rounds(steps: int, repeat: int) -> tuple[dict[str, list[float]], bool]:
    """Seconds of (d), (e) and (f) in each round, and whether LangGraph is missing."""
    rounds: dict[str, list[float]] = {"d": [], "e": [], "f": []}
    lg_missing = False
    with tempfile.TemporaryDirectory(prefix="user-code-bench-") as name:
        folder = Path(name)
        for _ in range(repeat):
            rounds["d"].append(bare_steps(steps, folder))
            rounds["e"].append(captured_steps(steps, folder))
            put = langgraph_steps(steps, folder)
            if put is None:
                lg_missing = True
            else:
                rounds["f"].append(put)
    return rounds, lg_missing


def quick_ratios() -> list[Ratio]:
    """Capture's own cost per step against a LangGraph checkpoint ``put`` (300 steps, 3 rounds).

    For context (no target); nothing when LangGraph is not installed.
    """
    rounds, lg_missing = step_rounds(300, 3)
    if lg_missing:
        return []
    overheads = (e - d for d, e in zip(rounds["d"], rounds["e"], strict=True))
    ratio = statistics.median(o / f for o, f in zip(overheads, rounds["f"], strict=True))
    return [
        Ratio(
            "capture's own work per step (openai client and tool captured, stub model)",
            "LangGraph SqliteSaver.put, a checkpoint per step",
            "cpu",
            ratio,
            "",
        )
    ]


def measure_steps(steps: int, repeat: int) -> dict[str, float | None]:
    rounds, lg_missing = step_rounds(steps, repeat)
    found: dict[str, float | None] = {
        key: statistics.median(values) * 1e6 / steps for key, values in rounds.items() if values
    }
    if lg_missing:
        found["f"] = None
    return found


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=20, help="sessions per round (20)")
    parser.add_argument("--steps", type=int, default=2000, help="steps per round (2000)")
    parser.add_argument("--repeat", type=int, default=5, help="rounds; medians shown (5)")
    parser.add_argument("--quick", action="store_true", help="3 rounds, 300 steps")
    args = parser.parse_args(argv)
    if args.quick:
        args.steps, args.repeat = min(args.steps, 300), min(args.repeat, 3)
    return args


def user_code_report(args: argparse.Namespace) -> Report:
    sessions = measure_sessions(args.sessions, args.repeat)
    per_step = measure_steps(args.steps, args.repeat)
    first = Table(
        ["", "what", "ms>", "ratio>"],
        [
            ["(a)", "the loop, bare client and tools", f"{sessions['a'] * 1e3:.1f}", ""],
            [
                "(b)",
                "the same loop captured, into a SQLite file",
                f"{sessions['b'] * 1e3:.1f}",
                f"{sessions['b'] / sessions['a']:.2f}× (a)",
            ],
            [
                "(c)",
                "replay of every session, server stopped",
                f"{sessions['c'] * 1e3:.1f}",
                f"{sessions['c'] / sessions['b']:.2f}× (b)",
            ],
        ],
    )
    bare, ours, put = per_step["d"], per_step["e"], per_step.get("f")
    assert bare is not None and ours is not None
    overhead = ours - bare
    rows = [
        ["(d)", "bare step: a model call (stub) and its tool call", f"{bare:.1f}", ""],
        ["(e)", "the same step captured", f"{ours:.1f}", f"{ours / bare:.2f}× (d)"],
        ["", "capture's own cost per step, (e) - (d)", f"{overhead:.1f}", ""],
    ]
    if put is None:
        rows.append(["(f)", "LangGraph SqliteSaver.put: not installed (the bench extra)", "", ""])
    else:
        rows.append(
            [
                "(f)",
                "LangGraph SqliteSaver.put, a checkpoint per step",
                f"{put:.1f}",
                f"(e) - (d) = {overhead / put:.2f}× (f)",
            ]
        )
    second = Table(["", "what", "µs per step>", "ratio>"], rows)
    return Report(
        [
            [
                f"{args.sessions} sessions of a plain openai loop (4 model calls, 3 tool calls "
                f"each) against a local OpenAI-compatible server; wall time, median of "
                f"{args.repeat} rounds; {machine()}"
            ],
            [first],
            [f"{args.steps} steps per round, CPU time, median of {args.repeat} rounds"],
            [second],
        ]
    )


def main(argv: Sequence[str] | None = None) -> int:
    return report(user_code_report(parse(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
