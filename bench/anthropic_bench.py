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
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import anthropic  # noqa: E402
from _common import cpu_per_call, print_per_call  # noqa: E402

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
    with serving() as url, tempfile.TemporaryDirectory() as folder:
        capture = Capture(Path(folder) / "bench.db")
        raw = anthropic.Anthropic(base_url=url, api_key="local", max_retries=0)
        wrapped = capture.anthropic(raw)

        def captured(count: int) -> None:
            with capture.session():  # one session, every call a model call of it
                calls(wrapped, count)

        calls(raw, 10)  # warm both paths
        captured(10)
        found = cpu_per_call(
            {"bare client": lambda count: calls(raw, count), "captured client": captured},
            args.calls,
            args.repeat,
        )
    print_per_call(f"anthropic messages.create, {args.calls} calls x {args.repeat} rounds", found)
    return 0


if __name__ == "__main__":
    sys.exit(main())
