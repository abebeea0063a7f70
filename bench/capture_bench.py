"""What capturing the user's own code costs per model call and per tool call, beside the bare call.

    python bench/capture_bench.py [--sessions N] [--turns N] [--repeat R] [--quick]

One workload, run in turns (median of R rounds, wall time of the calls only): ``--sessions``
sessions of an agent loop over a stub openai client (``chat.completions.create`` returns a
prebuilt ``ChatCompletion`` at once, so the model costs nothing and what is left is ours)
and one tool, ``--turns`` model calls each proposing one tool call, then a final answer.
The conversation grows as a real one does (each request resends it whole).

per call (µs per model call, µs per tool call)
  (a) reference: the bare loop, no capture;
  (b) `Capture` into a SQLite file (fail open, the default);
  (c) (b) with redaction (`journal.formats.Redactor`, e-mails and keys in the messages);
  (d) (b) with tail sampling, share 0: every session buffered, none written;
  (e) (b) with tail sampling, share 1: every session buffered, written whole at its end;
  (f) (b) with the journal unreachable (a PostgreSQL URL where nothing listens): every
      session goes to the spool;
  (g) `Capture` fail closed (``fail_open=False``): what fail open costs when the journal
      is up, (b) against (g).
per event written
  (h) reference: `Journal.append` of one event (SQLite file, ``expected_seq``);
  (i) `Spool.append` of the same event's line (with `spool_line`, its encoding).
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from _common import Report, Table, machine, report, session_events
from openai.types.chat import ChatCompletion

from capture import Capture, Sampling, Spool, spool_line
from journal import Journal
from journal.formats import Redactor

UNREACHABLE = "postgresql://127.0.0.1:9/bench"
SECRET_TEXT = "customer alice@example.com, key sk-live0123456789abcdefXYZ"


def completion(call: bool, turn: int) -> ChatCompletion:
    """A chat completion: one ``lookup`` call, or the final answer."""
    message: dict[str, Any] = {"role": "assistant", "content": None if call else "done"}
    if call:
        message["tool_calls"] = [
            {
                "id": f"call_{turn}",
                "type": "function",
                "function": {"name": "lookup", "arguments": f'{{"order_id": "{turn}"}}'},
            }
        ]
    return ChatCompletion.model_validate(
        {
            "id": f"c-{turn}",
            "object": "chat.completion",
            "created": 1_795_000_000,
            "model": "stub-1",
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if call else "stop",
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }
    )


class StubClient:
    """``chat.completions.create`` answering from prebuilt completions, instantly."""

    def __init__(self, turns: int) -> None:
        self.replies = [completion(True, turn) for turn in range(turns)] + [
            completion(False, turns)
        ]
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self.create))
        self.responses = SimpleNamespace(create=self.create)

    def create(self, **request: Any) -> ChatCompletion:
        calls = sum(1 for m in request["messages"] if m.get("role") == "tool")
        return self.replies[calls]


TOOLS = [
    {
        "type": "function",
        "function": {"name": "lookup", "description": "lookup", "parameters": {}},
    }
]


class Loop:
    """The user's loop: times its model calls and its tool calls apart."""

    def __init__(self, client: Any, lookup: Callable[..., Any]) -> None:
        self.client, self.lookup = client, lookup
        self.model = self.tool = 0.0
        self.model_calls = self.tool_calls = 0

    def run(self, question: str) -> str:
        messages: list[Any] = [
            {"role": "system", "content": "You look orders up."},
            {"role": "user", "content": f"{question} ({SECRET_TEXT})"},
        ]
        while True:
            started = time.perf_counter()
            reply = self.client.chat.completions.create(
                model="stub-1", messages=messages, tools=TOOLS
            )
            self.model += time.perf_counter() - started
            self.model_calls += 1
            message = reply.choices[0].message
            if not message.tool_calls:
                return str(message.content)
            messages.append(message.model_dump(exclude_none=True))
            for call in message.tool_calls:
                started = time.perf_counter()
                result = self.lookup(**json.loads(call.function.arguments))
                self.tool += time.perf_counter() - started
                self.tool_calls += 1
                messages.append({"role": "tool", "tool_call_id": call.id, "content": result})


def lookup(order_id: str) -> str:
    return f'{{"order_id": "{order_id}", "status": "shipped", "email": "bob@example.com"}}'


def captured_case(
    directory: Path, turns: int, sessions: int, target: str | None = None, **options: Any
) -> Callable[[int], tuple[float, float]]:
    """A case: ``sessions`` entry calls of the loop captured with ``options``.

    Into ``target``, or a fresh SQLite file each round.
    """
    label = next(_CASES)

    def run(round_: int) -> tuple[float, float]:
        capture = Capture(target or str(directory / f"case-{label}-{round_}.db"), **options)
        loop = Loop(capture.openai(StubClient(turns)), capture.tool(lookup))
        entry = capture.entry(name="bench:loop")(loop.run)
        for index in range(sessions):
            entry(f"order {index}")
        return loop.model / loop.model_calls, loop.tool / loop.tool_calls

    return run


_CASES = itertools.count()


def bare_case(turns: int, sessions: int) -> Callable[[int], tuple[float, float]]:
    def run(round_: int) -> tuple[float, float]:
        loop = Loop(StubClient(turns), lookup)
        for index in range(sessions):
            loop.run(f"order {index}")
        return loop.model / loop.model_calls, loop.tool / loop.tool_calls

    return run


def per_event(directory: Path, events: int, repeat: int) -> tuple[float, float]:
    """µs per event: `Journal.append` of one event, against `Spool.append` of its line."""
    work = list(session_events(0, events))
    moment = datetime(2026, 12, 1, tzinfo=UTC)
    appends: list[float] = []
    spooled: list[float] = []
    for round_ in range(repeat):
        with Journal.open(directory / f"append-{round_}.db") as journal:
            started = time.perf_counter()
            for seq, event in enumerate(work):
                journal.append("s", [event], expected_seq=seq, ts=moment)
            appends.append((time.perf_counter() - started) / events)
        spool = Spool.at(directory / f"events-{round_}.spool")
        started = time.perf_counter()
        for seq, event in enumerate(work):
            spool.append([spool_line("s", seq, moment, event)])
        spooled.append((time.perf_counter() - started) / events)
    return statistics.median(appends) * 1e6, statistics.median(spooled) * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sessions", type=int, default=40)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="small settings, one round")
    args = parser.parse_args(argv)
    logging.getLogger("capture").setLevel(logging.ERROR)  # (f) spools on purpose
    if args.quick:
        args.sessions, args.turns, args.events, args.repeat = 4, 3, 200, 1
    redactor = Redactor()
    with tempfile.TemporaryDirectory() as folder:
        directory = Path(folder)
        spool = Spool.at(directory / "down.spool")
        cases: dict[str, Callable[[int], tuple[float, float]]] = {
            "(a) bare loop, no capture": bare_case(args.turns, args.sessions),
            "(b) Capture, SQLite file, fail open": captured_case(
                directory, args.turns, args.sessions
            ),
            "(c) (b) + redaction": captured_case(
                directory, args.turns, args.sessions, redactor=redactor
            ),
            "(d) (b) + sampling, share 0 (none written)": captured_case(
                directory, args.turns, args.sessions, sampling=Sampling(share=0.0)
            ),
            "(e) (b) + sampling, share 1 (written at the end)": captured_case(
                directory, args.turns, args.sessions, sampling=Sampling(share=1.0)
            ),
            "(f) journal unreachable: all to the spool": captured_case(
                directory, args.turns, args.sessions, target=UNREACHABLE, spool=spool
            ),
            "(g) Capture, fail closed": captured_case(
                directory, args.turns, args.sessions, fail_open=False
            ),
        }
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in cases}
        for round_ in range(args.repeat):
            for name, case in cases.items():
                times[name].append(case(round_))
        model = {name: statistics.median(t[0] for t in runs) * 1e6 for name, runs in times.items()}
        tool = {name: statistics.median(t[1] for t in runs) * 1e6 for name, runs in times.items()}
        bare_model, bare_tool = (
            model["(a) bare loop, no capture"],
            tool["(a) bare loop, no capture"],
        )
        rows = [
            [
                name,
                f"{model[name]:.1f}",
                f"+{model[name] - bare_model:.1f}" if name[1] != "a" else "",
                f"{tool[name]:.1f}",
                f"+{tool[name] - bare_tool:.1f}" if name[1] != "a" else "",
            ]
            for name in cases
        ]
        append_us, spool_us = per_event(directory, args.events, args.repeat)
    events = [
        ["(h) Journal.append, 1 event (SQLite file)", f"{append_us:.1f}", ""],
        ["(i) Spool.append, 1 event line", f"{spool_us:.1f}", f"{spool_us / append_us:.2f}×"],
    ]
    return report(
        Report(
            [
                [
                    machine(),
                    f"{args.sessions} sessions × {args.turns} model calls with a tool call "
                    f"+ a final call; median of {args.repeat} rounds, wall time of the calls",
                ],
                [
                    Table(
                        ["case", "µs/model call>", "overhead>", "µs/tool call>", "overhead>"],
                        rows,
                    )
                ],
                [
                    f"per event written ({args.events} realistic events, median of "
                    f"{args.repeat} rounds)",
                    Table(["case", "µs/event>", "vs (h)>"], events),
                ],
            ]
        )
    )


if __name__ == "__main__":
    sys.exit(main())
