"""What capture adds to a model call, beside the tracers and recorders a team would pick instead.

    python bench/capture_peers.py [--calls N] [--rounds R] [--quick]

One loop (a model call that proposes a tool call, the tool, a model call that answers) on
the official ``openai`` client against an instant local server (``tests/fake_openai.py`` in
its own process, so only the client's process is measured). Each case runs in a fresh
process, the cases taking turns round after round (R rounds, medians): the bare client,
then the same loop with

* agent-journal ``Capture`` into a SQLite file (every byte, each event its own commit);
* the same with the spool forced (the journal unreachable: a line each, no fsync);
* OpenTelemetry's ``opentelemetry-instrumentation-openai-v2`` with a BatchSpanProcessor
  (spans to an in-memory exporter), message content capture off, then on;
* Pydantic Logfire's ``instrument_openai`` with no exporter (``send_to_logfire=False``);
* vcrpy recording a cassette.

Per model call it reports the process CPU added to the bare client's (the GIL makes CPU on
any thread the caller's cost), and the wall time of the call added at p50 and p99. A peer
that is not installed (``pip install -e '.[capture-peers]'``) is a line saying so.
``--callgrind`` adds instruction counts under valgrind (slow; the noise-free figure).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from _common import Report, Table, machine, report

REPO = Path(__file__).resolve().parents[1]
CASES = ("bare", "capture", "capture-spool", "otel", "otel-content", "logfire", "vcrpy")
LABELS = {
    "bare": "the bare client (reference)",
    "capture": "agent-journal Capture, SQLite",
    "capture-spool": "the same, spool forced",
    "otel": "OpenTelemetry openai-v2, content off",
    "otel-content": "OpenTelemetry openai-v2, content on",
    "logfire": "Logfire instrument_openai, no exporter",
    "vcrpy": "vcrpy recording",
}

RUNNER = r"""
import json, os, statistics, sys, time
case, url, calls, folder = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
sys.path.insert(0, os.environ["REPO"])
import openai
TOOLS = [{"type": "function", "function": {"name": "lookup_order",
          "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}}}}]

def lookup_order(order_id):
    return {"order_id": order_id, "sku": "SKU-2"}

def make_client():
    return openai.OpenAI(base_url=url, api_key="local", max_retries=0)

wrap = lambda f: f
context = None
if case.startswith("capture"):
    from capture import Capture
    target = os.path.join(folder, "j.db") if case == "capture" else "postgresql://127.0.0.1:9/x"
    spool = os.path.join(folder, "j.spool")
    capture = Capture(target, spool=spool)
    client = capture.openai(make_client())
    lookup_order = capture.tool(lookup_order)
    wrap = capture.entry
elif case.startswith("otel"):
    if case == "otel-content":
        os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "true"
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(InMemorySpanExporter()))
    trace.set_tracer_provider(provider)
    OpenAIInstrumentor().instrument(tracer_provider=provider)
    client = make_client()
elif case == "logfire":
    import logfire
    logfire.configure(send_to_logfire=False, console=False)
    client = make_client()
    logfire.instrument_openai(client)
elif case == "vcrpy":
    import vcr
    client = make_client()
    context = vcr.VCR(record_mode="all").use_cassette(os.path.join(folder, "c.yaml"))
else:
    client = make_client()

def session(question, walls):
    messages = [{"role": "user", "content": question}]
    started = time.perf_counter()
    reply = client.chat.completions.create(model="fake-1", messages=messages, tools=TOOLS)
    walls.append(time.perf_counter() - started)
    call = reply.choices[0].message.tool_calls[0]
    result = lookup_order(**json.loads(call.function.arguments))
    messages += [reply.choices[0].message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)}]
    started = time.perf_counter()
    client.chat.completions.create(model="fake-1", messages=messages, tools=TOOLS)
    walls.append(time.perf_counter() - started)
    return "done"

session = wrap(session)
if context is not None:
    context.__enter__()
walls = []
for i in range(5):
    session(f"order {i}", [])  # warm up: imports, first connections, the journal's schema
cpu = time.process_time()
for i in range(calls // 2):
    session(f"order {i}", walls)
cpu = time.process_time() - cpu
if context is not None:
    context.__exit__(None, None, None)
print(json.dumps({"cpu_per_call": cpu / len(walls), "walls": walls}))
"""


def _available(case: str) -> bool:
    modules = {
        "otel": "opentelemetry.instrumentation.openai_v2",
        "otel-content": "opentelemetry.instrumentation.openai_v2",
        "logfire": "logfire",
        "vcrpy": "vcr",
    }
    name = modules.get(case)
    if name is None:
        return True
    found = subprocess.run([sys.executable, "-c", f"import {name}"], capture_output=True)
    return found.returncode == 0


def _server() -> tuple[subprocess.Popen[str], str]:
    server = subprocess.Popen(
        [sys.executable, str(REPO / "tests" / "fake_openai.py")], stdout=subprocess.PIPE, text=True
    )
    assert server.stdout is not None
    port = server.stdout.readline().strip()
    return server, f"http://127.0.0.1:{port}/v1"


def _run(case: str, url: str, calls: int, prefix: Sequence[str] = ()) -> dict[str, object]:
    folder = tempfile.mkdtemp(prefix="capture-peers-")
    try:
        done = subprocess.run(
            [*prefix, sys.executable, "-c", RUNNER, case, url, str(calls), folder],
            capture_output=True,
            text=True,
            env={**os.environ, "REPO": str(REPO)},
            check=False,
        )
        if done.returncode != 0:
            raise SystemExit(f"{case}: {done.stderr.strip().splitlines()[-1:]}")
        found: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
        return found
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _percentile(values: Sequence[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def _instructions(case: str, url: str, calls: int) -> float | None:
    """Instructions per model call under callgrind (whole process, minus the warm-up's)."""
    if shutil.which("valgrind") is None:
        return None
    counts = []
    for n in (calls, 2 * calls):
        out = tempfile.mktemp(prefix="callgrind-")
        _run(case, url, n, ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"])
        summary = next(
            line for line in Path(out).read_text().splitlines() if line.startswith("summary:")
        )
        counts.append(int(summary.split()[1]))
        Path(out).unlink()
    return (counts[1] - counts[0]) / calls


def measure(calls: int, rounds: int, callgrind: bool) -> Report:
    cases = [case for case in CASES if _available(case)]
    missing = [case for case in CASES if case not in cases]
    server, url = _server()
    try:
        cpu: dict[str, list[float]] = {case: [] for case in cases}
        walls: dict[str, list[float]] = {case: [] for case in cases}
        for _ in range(rounds):
            for case in cases:
                found = _run(case, url, calls)
                cpu[case].append(float(found["cpu_per_call"]))  # type: ignore[arg-type]
                walls[case].extend(found["walls"])  # type: ignore[arg-type]
        instructions = {case: _instructions(case, url, 40) for case in cases} if callgrind else {}
    finally:
        server.terminate()
        server.wait()
    base_cpu = statistics.median(cpu["bare"])
    p50, p99 = _percentile(walls["bare"], 0.5), _percentile(walls["bare"], 0.99)
    rows = []
    for case in cases:
        added = statistics.median(cpu[case]) - base_cpu
        row = [
            LABELS[case],
            f"{statistics.median(cpu[case]) * 1e6:.0f}",
            "-" if case == "bare" else f"{added * 1e6:+.0f}",
            f"{(_percentile(walls[case], 0.5) - p50) * 1e3:+.2f}",
            f"{(_percentile(walls[case], 0.99) - p99) * 1e3:+.2f}",
        ]
        if callgrind:
            count = instructions.get(case)
            row.append("-" if count is None else f"{count / 1e6:.2f} M")
        rows.append(row)
    header = ["case", "CPU µs/call>", "added CPU µs>", "added p50 ms>", "added p99 ms>"]
    if callgrind:
        header.append("instructions/call>")
    lines: list[str | Table] = [
        f"capture_peers: {calls} model calls per case and round, {rounds} rounds ({machine()})",
        Table(header, rows),
    ]
    if missing:
        lines.append(f"not installed (pip install -e '.[capture-peers]'): {', '.join(missing)}")
    otel = "otel-content" in cases
    if otel:
        ours = statistics.median(cpu["capture"]) - base_cpu
        theirs = statistics.median(cpu["otel-content"]) - base_cpu
        lines.append(
            f"capture's added CPU / OpenTelemetry's with content: {ours / theirs:.2f}x "
            "(target <= 1x)"
        )
    return Report([lines])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300, help="model calls per case and round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (medians)")
    parser.add_argument("--callgrind", action="store_true", help="instruction counts (slow)")
    parser.add_argument("--quick", action="store_true", help="a small run")
    args = parser.parse_args(argv)
    if args.quick:
        args.calls, args.rounds = 60, 1
    return report(measure(args.calls, args.rounds, args.callgrind))


if __name__ == "__main__":
    sys.exit(main())
