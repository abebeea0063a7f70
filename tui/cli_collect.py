"""``agent-journal collect``: an OTLP/HTTP receiver that writes traced sessions to the journal.

An app's exporter is pointed at it (``OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318``):
``POST /v1/traces`` and ``POST /v1/logs`` take protobuf (``application/x-protobuf``) or JSON
(``application/json``) bodies, gzip-encoded or not. A bad body is answered 400 with the one
line naming what is wrong, and nothing of it is kept. Sessions are written as
`journal.formats.TraceCollector` says (the root span ended, then ``--quiet`` seconds of
nothing from the trace); on SIGTERM or Ctrl-C what is left is written before it exits.
"""

from __future__ import annotations

import gzip
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType
from typing import Any

import click

from .clikit import db_option, open_for_writing

__all__ = ["collect"]

MAX_BODY = 64 * 1024 * 1024
"""The largest request body taken (the Collector's default limit is smaller)."""


def _echo(text: str) -> None:
    from .text import safe_text

    click.echo(safe_text(text), err=True)


def _handler(collector: Any) -> type[BaseHTTPRequestHandler]:
    from journal import InvalidInputError
    from journal.formats import read_body

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the http.server API
            if self.path.split("?")[0] not in ("/v1/traces", "/v1/logs"):
                self._answer(404, b'{"message":"POST /v1/traces or /v1/logs"}')
                return
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:
                self._answer(413, b'{"message":"body too large"}')
                return
            data = self.rfile.read(length)
            try:
                if self.headers.get("Content-Encoding") == "gzip":
                    data = gzip.decompress(data)
                binary = "protobuf" in (self.headers.get("Content-Type") or "")
                kind = "logs" if self.path.startswith("/v1/logs") else "traces"
                batch = read_body(data, f"POST {self.path}", binary=binary, kind=kind)
            except (InvalidInputError, OSError, EOFError) as e:
                _echo(f"agent-journal collect: refused: {e}")
                message = str(e).replace('"', "'").encode()
                self._answer(400, b'{"message":"' + message + b'"}')
                return
            collector.add(batch)
            if binary:
                self._answer(200, b"", "application/x-protobuf")
            else:
                self._answer(200, b"{}")

        def _answer(self, status: int, body: bytes, kind: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


def _report(report: Any) -> None:
    if report is None:
        return
    for item in report.files:
        for session_id in item["session_ids"]:
            _echo(
                f"collected {session_id}: {item['new_events']} new events "
                f"({item['tool_calls']} tool calls, {item['failed_calls']} failed)"
            )
    for error in report.errors:
        _echo(f"agent-journal collect: {error}")


@click.command(short_help="Receive OTLP/HTTP traces and write their sessions to the journal.")
@click.option(
    "--listen",
    default="127.0.0.1:4318",
    show_default=True,
    metavar="HOST:PORT",
    help="Where to listen (port 0: a free one, printed on the first line).",
)
@click.option(
    "--quiet",
    type=float,
    default=2.0,
    show_default=True,
    help="Seconds with no span of a trace (after its root span ended) before it is written.",
)
@db_option
def collect(listen: str, quiet: float, db: str) -> None:
    """Receive OTLP/HTTP traces (POST /v1/traces, /v1/logs) and import their sessions.

    A session is written once its root span has ended and its trace has been quiet for
    --quiet seconds; a later trace of the same conversation (session.id,
    gen_ai.conversation.id) is appended when the stored session is its prefix, and
    reported as a conflict otherwise.
    """
    from journal.formats import TraceCollector

    host, _, port = listen.rpartition(":")
    if not host or not port.isdigit():
        raise click.UsageError(f"--listen {listen!r}: expected HOST:PORT")
    collector = TraceCollector(quiet=quiet)
    stop = threading.Event()
    with open_for_writing(db) as journal:
        server = ThreadingHTTPServer((host, int(port)), _handler(collector))
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
        thread.start()

        def stopped(signum: int, frame: FrameType | None) -> None:
            stop.set()

        previous = signal.signal(signal.SIGTERM, stopped)
        click.echo(f"collecting on http://{host}:{server.server_address[1]}", err=False)
        sys.stdout.flush()
        try:
            while not stop.wait(min(0.2, max(quiet / 4, 0.01))):
                _report(collector.flush(journal))
        except KeyboardInterrupt:
            pass
        finally:
            server.shutdown()
            server.server_close()
            thread.join()
            signal.signal(signal.SIGTERM, previous)
            _report(collector.flush(journal, force=True))
