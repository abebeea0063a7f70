"""What the recording proxy adds to a model call: latency per request, time to first byte.

One run, the same fake upstream (`tests.proxy_upstream`, on 127.0.0.1) called directly and
through a recording `capture.proxy.ProxyServer` (journaling into a SQLite file), the two
taking turns request by request so that the machine's load falls on both alike:

* a chat completion (not streamed): the wall time of the whole request, p50 and p99;
* a streamed chat completion whose upstream waits ``GAP_S`` after its first event: the time
  to the first event's bytes, and to the end.

Each request is a conversation of its own (a session started, its user input, its
answer: three journal writes, the answer's before it is sent). Run ``python
bench/proxy_bench.py [--requests N]``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from capture import Destination  # noqa: E402
from capture.proxy import ProxyServer, Recording  # noqa: E402
from tests import proxy_upstream  # noqa: E402

GAP_S = 0.05
"""How long the streaming upstream waits after its first event."""


class _Slow(proxy_upstream.Upstream):
    """The fake upstream, its streams pausing after the first event."""

    def _events(self, payloads: list[str]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for index, payload in enumerate(payloads):
            self.wfile.write(f"data: {payload}\n\n".encode())
            self.wfile.flush()
            if index == 0:
                time.sleep(GAP_S)


def _request(port: int, n: int, stream: bool) -> tuple[float, float]:
    """One call on a fresh connection: (seconds to the first body bytes, to the end)."""
    body = json.dumps(
        {
            "model": "fake-1",
            "messages": [{"role": "user", "content": f"where is order {n}"}],
            "stream": stream,
        }
    ).encode()
    connection = http.client.HTTPConnection("127.0.0.1", port)
    started = time.perf_counter()
    connection.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
    response = connection.getresponse()
    first = response.read1(1)
    ttfb = time.perf_counter() - started
    assert first, "no body"
    response.read()
    total = time.perf_counter() - started
    connection.close()
    return ttfb, total


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=300)
    count = parser.parse_args().requests
    server = proxy_upstream._Server(("127.0.0.1", 0), _Slow)
    threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
    ).start()
    direct = server.server_address[1]
    with tempfile.TemporaryDirectory() as folder:
        proxy = ProxyServer(
            Recording(Destination(str(Path(folder) / "bench.db"))),
            {"openai": f"http://127.0.0.1:{direct}/v1"},
        )
        with proxy:
            through = proxy.address[1]
            rows = {}
            for stream in (False, True):
                times: dict[str, list[tuple[float, float]]] = {"direct": [], "proxy": []}
                for n in range(count if not stream else max(20, count // 5)):
                    times["direct"].append(_request(direct, n, stream))
                    times["proxy"].append(_request(through, n, stream))
                rows[stream] = times
    server.shutdown()
    print(f"proxy bench: {count} requests, python {sys.version.split()[0]}, one run\n")
    print("| what | direct | through the proxy | added |")
    print("|---|---:|---:|---:|")
    for label, stream, index in (
        ("chat completion, p50 (ms)", False, 1),
        ("chat completion, p99 (ms)", False, 1),
        (
            f"stream, time to first byte, p50 (ms; upstream pauses {GAP_S * 1000:.0f} ms after it)",
            True,
            0,
        ),
        ("stream, time to first byte, p99 (ms)", True, 0),
        ("stream, whole, p50 (ms)", True, 1),
    ):
        share = 0.99 if "p99" in label else 0.5
        a = _percentile([t[index] for t in rows[stream]["direct"]], share) * 1000
        b = _percentile([t[index] for t in rows[stream]["proxy"]], share) * 1000
        print(f"| {label} | {a:.2f} | {b:.2f} | {b - a:+.2f} |")
    whole = [p[1] - d[1] for d, p in zip(rows[False]["direct"], rows[False]["proxy"], strict=True)]
    print(f"\nadded per request (paired), median: {statistics.median(whole) * 1000:.2f} ms")


if __name__ == "__main__":
    main()
