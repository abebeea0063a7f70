"""What capturing the ``google-genai`` client adds per model call, against the bare client.

    python bench/genai_bench.py [--calls N] [--repeat R]

The same ``models.generate_content`` (a function call answered: the scratch desk's first
call, with its system instruction, function declarations and tool config) against the
tests' Gemini REST server (``tests/fake_genai.py``) in a thread of this process, bare and
captured (`capture.Capture.genai` inside a session, journaling into a SQLite file), rounds
interleaved, process CPU time (the server's thread counts in both, equally). Prints the µs
per call of each and the ratio; ``quick_ratios()`` gives the ratio to ``bench/run_all.py``.
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

from _common import Ratio  # noqa: E402
from google import genai  # noqa: E402
from google.genai import types  # noqa: E402

from capture import Capture  # noqa: E402
from tests.fake_genai import serving  # noqa: E402

CONFIG = types.GenerateContentConfig(
    system_instruction="You are the support desk.",
    tools=[
        types.Tool(
            function_declarations=[
                types.FunctionDeclaration(
                    name="lookup_order",
                    description="The shop's order lookup.",
                    parameters_json_schema={
                        "type": "object",
                        "properties": {"order_id": {"type": "string"}},
                    },
                )
            ]
        )
    ],
    tool_config=types.ToolConfig(
        function_calling_config=types.FunctionCallingConfig(
            mode=types.FunctionCallingConfigMode.AUTO
        )
    ),
)


def calls(client: Any, count: int) -> None:
    for _ in range(count):
        client.models.generate_content(
            model="gemini-fake-1", contents="Where is order 5?", config=CONFIG
        )


def measure(count: int, repeat: int) -> tuple[list[float], list[float]]:
    """µs per call of each round: the bare client's, the captured one's."""
    bare: list[float] = []
    ours: list[float] = []
    with serving() as url, tempfile.TemporaryDirectory() as folder:
        capture = Capture(Path(folder) / "bench.db")
        options = types.HttpOptions(base_url=url)
        raw = genai.Client(api_key="local", http_options=options)
        wrapped = capture.genai(genai.Client(api_key="local", http_options=options))
        calls(raw, 10)  # warm both paths
        with capture.session():
            calls(wrapped, 10)
        for _ in range(repeat):
            started = time.process_time()
            calls(raw, count)
            bare.append((time.process_time() - started) / count * 1e6)
            started = time.process_time()
            with capture.session():  # one session, every call a model call of it
                calls(wrapped, count)
            ours.append((time.process_time() - started) / count * 1e6)
    return bare, ours


def quick_ratios() -> list[Ratio]:
    """Captured over bare ``generate_content`` (100 calls, 3 rounds): for context, no target."""
    bare, ours = measure(100, 3)
    ratio = statistics.median(o / b for o, b in zip(ours, bare, strict=True))
    return [
        Ratio(
            "google-genai generate_content, captured (SQLite)",
            "the same call, bare client, same local server",
            "cpu",
            ratio,
            "",
        )
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    bare, ours = measure(args.calls, args.repeat)
    b, o = statistics.median(bare), statistics.median(ours)
    print(f"google-genai generate_content, {args.calls} calls x {args.repeat} rounds (CPU, median)")
    print(f"  bare client      {b:9.1f} µs/call")
    print(f"  captured client  {o:9.1f} µs/call   ratio {o / b:.2f}x  (+{o - b:.1f} µs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
