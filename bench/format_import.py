"""`agent-journal import --format F` per format, against the raw parse of the same file.

One realistic session of N events (`_common.session_events`) is written once in each format
the import reads: ``jsonl`` (this project's export), ``openai`` (a chat transcript of the
same conversation), ``otlp`` (`export --format otlp --content`: OTLP/JSON) and ``atif``
(`export --format atif`). Each file is imported into a new SQLite journal by
``agent-journal import --format F`` in a child process, and parsed by a child that does
nothing but ``orjson.loads`` of the file (line by line for JSON Lines); the row gives both
wall times (the whole process: start, read, map, write, commit) and both peak RSS
(``os.wait4``), so what the mapping costs over reading the bytes shows per format.
`bench/import_bench.py` prints the table (``--formats-only`` alone).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from _common import Table, session_events

from journal import Journal
from journal.events import ActionCommitted, ActionFailed, ActionProposed, UserInput
from journal.formats import (
    atif_json,
    atif_trajectory,
    export_lines,
    otlp_document,
    otlp_json,
    write_atomically,
)

RAW_PARSE = """
import sys, orjson
data = open(sys.argv[1], "rb").read()
try:
    orjson.loads(data)
except orjson.JSONDecodeError:
    for line in data.splitlines():
        if line.strip():
            orjson.loads(line)
"""
"""The raw reference: orjson.loads of the file (of each line, for JSON Lines)."""
SESSION = "bench-formats"
FORMATS = ("jsonl", "openai", "otlp", "atif")


def _transcript(journal: Journal) -> bytes:
    """The session as an OpenAI chat transcript (its messages and the session id)."""
    messages: list[dict[str, Any]] = []
    for item in journal.events(SESSION):
        event = item.event
        if isinstance(event, UserInput):
            messages.append({"role": "user", "content": event.text})
        elif isinstance(event, ActionProposed):
            message: dict[str, Any] = {"role": "assistant", "content": event.text}
            if event.calls:
                message["tool_calls"] = [
                    {
                        "id": call.call_id,
                        "type": "function",
                        "function": {
                            "name": call.tool,
                            "arguments": orjson.dumps(call.args).decode(),
                        },
                    }
                    for call in event.calls
                ]
            messages.append(message)
        elif isinstance(event, ActionCommitted | ActionFailed):
            failed = isinstance(event, ActionFailed)
            content = event.message if isinstance(event, ActionFailed) else event.result
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": event.call_id,
                    "content": content
                    if isinstance(content, str)
                    else orjson.dumps(content).decode(),
                    **({"error": True} if failed else {}),
                }
            )
    return orjson.dumps({"messages": messages, "metadata": {"session_id": SESSION}})


_WRITERS: dict[str, Callable[[Journal], bytes]] = {
    "jsonl": lambda journal: b"\n".join(export_lines(journal, SESSION)),
    "openai": _transcript,
    "otlp": lambda journal: otlp_json(otlp_document(journal, [SESSION], content=True)),
    "atif": lambda journal: atif_json([atif_trajectory(journal, SESSION)]),
}


def write_files(folder: Path, events: int) -> dict[str, Path]:
    """The session of ``events`` events in each format, in ``folder``."""
    with Journal.open(folder / "formats-source.db") as journal:
        if journal.summary(SESSION) is None:
            journal.append(SESSION, list(session_events(0, events)))
        paths = {}
        for fmt in FORMATS:
            path = folder / f"formats-{events}.{fmt}"
            write_atomically([_WRITERS[fmt](journal)], path)
            paths[fmt] = path
    return paths


def format_rows(
    folder: Path, events: int, peak_rss: Callable[[list[str]], tuple[float, float]], cli: Path
) -> Table:
    """The per-format table: our import and the raw parse of each file, wall and peak RSS."""
    # written by a child: a parent that held the session would pass its peak RSS on to every
    # child it forks (Linux counts the pages a child had before its exec in ru_maxrss)
    subprocess.run(
        [sys.executable, __file__, str(folder), str(events)], check=True, cwd=Path(__file__).parent
    )
    rows = []
    for fmt in FORMATS:
        path = folder / f"formats-{events}.{fmt}"
        db = folder / f"formats-{events}-{fmt}.db"
        mine, mine_wall = peak_rss(
            [str(cli), "import", "--format", fmt, str(path), "--db", str(db)]
        )
        theirs, theirs_wall = peak_rss([sys.executable, "-c", RAW_PARSE, str(path)])
        with Journal.open(db) as journal:
            written = sum(summary.events for summary in journal.sessions())
        rows.append(
            [
                fmt,
                f"{path.stat().st_size / 2**20:.1f}",
                f"{written:,}",
                f"{mine_wall:.2f} / {theirs_wall:.2f}",
                f"{mine_wall / theirs_wall:.1f}×",
                f"{mine:.0f} / {theirs:.0f}",
            ]
        )
    return Table(
        [
            f"format ({events:,} events)",
            "file MB>",
            "events written>",
            "wall s: import / orjson.loads>",
            "ratio>",
            "peak MB: import / orjson.loads>",
        ],
        rows,
    )


if __name__ == "__main__":
    write_files(Path(sys.argv[1]), int(sys.argv[2]))
