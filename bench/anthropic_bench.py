"""What capturing the ``anthropic`` client adds per model call, against the bare client.

    python bench/anthropic_bench.py [--calls N] [--repeat R]

The same ``messages.create`` (a tool call answered, the conversation of the scratch desk's
first turn) against the tests' Messages API server (``tests/fake_anthropic.py``) in a thread
of this process, bare and captured (`capture.Capture.anthropic` inside an entry session,
journaling into a SQLite file), rounds interleaved, process CPU time (the server's thread
counts in both, equally). Prints the µs per call of each and the ratio.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import anthropic  # noqa: E402

from capture import Capture  # noqa: E402
from tests.fake_anthropic import serving  # noqa: E402

TOOLS = [{"name": "lookup_order", "input_schema": {"type": "object"}}]
MESSAGES = [{"role": "user", "content": "Where is order 5?"}]


def calls(client: Any, count: int) -> None:
    for _ in range(count):
        client.messages.create(model="claude-fake-1", max_tokens=64, tools=TOOLS, messages=MESSAGES)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    bare: list[float] = []
    ours: list[float] = []
    with serving() as url, tempfile.TemporaryDirectory() as folder:
        capture = Capture(Path(folder) / "bench.db")
        raw = anthropic.Anthropic(base_url=url, api_key="local", max_retries=0)
        wrapped = capture.anthropic(raw)
        calls(raw, 10)  # warm both paths
        with capture.session():
            calls(wrapped, 10)
        for _ in range(args.repeat):
            started = time.process_time()
            calls(raw, args.calls)
            bare.append((time.process_time() - started) / args.calls * 1e6)
            started = time.process_time()
            with capture.session():  # one session, every call a model call of it
                calls(wrapped, args.calls)
            ours.append((time.process_time() - started) / args.calls * 1e6)
    b, o = statistics.median(bare), statistics.median(ours)
    print(f"anthropic messages.create, {args.calls} calls x {args.repeat} rounds (CPU, median)")
    print(f"  bare client      {b:9.1f} µs/call")
    print(f"  captured client  {o:9.1f} µs/call   ratio {o / b:.2f}x  (+{o - b:.1f} µs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
