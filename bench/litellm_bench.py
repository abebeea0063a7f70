"""What capturing ``litellm.completion`` adds per model call, against bare litellm.

    python bench/litellm_bench.py [--calls N] [--repeat R]

The same ``litellm.completion`` (model ``openai/fake-1``, a tool call answered: the first
turn of the tests' scratch shop) against the tests' OpenAI-compatible server
(``tests/fake_openai.py``) in a thread of this process, bare and captured
(`capture.Capture.litellm` inside a session, journaling into a SQLite file: the module
function patched while the session is open), rounds interleaved, process CPU time (the
server's thread counts in both, equally). Prints the µs per call of each and the ratio.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no cost map download

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import litellm  # noqa: E402
from _common import cpu_per_call, print_per_call  # noqa: E402

from capture import Capture  # noqa: E402
from tests.fake_openai import serving  # noqa: E402

TOOLS = [
    {"type": "function", "function": {"name": "lookup_order", "parameters": {"type": "object"}}}
]
MESSAGES = [{"role": "user", "content": "Where is order 5?"}]


def calls(url: str, count: int) -> None:
    for _ in range(count):
        litellm.completion(
            model="openai/fake-1",
            messages=MESSAGES,
            tools=TOOLS,
            api_base=url,
            api_key="local",
            max_retries=0,
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    litellm.suppress_debug_info = True
    with serving() as url, tempfile.TemporaryDirectory() as folder:
        capture = Capture(Path(folder) / "bench.db")
        capture.litellm()

        def captured(count: int) -> None:
            with capture.session():  # one session, every call a model call of it
                calls(url, count)

        calls(url, 10)  # warm both paths
        captured(10)
        found = cpu_per_call(
            {"bare litellm": lambda count: calls(url, count), "captured litellm": captured},
            args.calls,
            args.repeat,
        )
    print_per_call(f"litellm.completion, {args.calls} calls x {args.repeat} rounds", found)
    return 0


if __name__ == "__main__":
    sys.exit(main())
