"""Peak memory of `agent-journal import` against a raw streaming import of the same file.

Writes a JSONL export of one session of N events (the realistic workload of `_common`),
then runs, each in a child process whose peak RSS is read with ``os.wait4``:

- ``agent-journal import`` of the file into a new SQLite journal;
- ``agent-journal copy`` of that journal's session into another new SQLite journal;
- the raw reference: a streaming orjson parse of each line, the sha256 chain and an
  ``executemany`` of the same rows into a bare table, in batches, one transaction.

The target (issue 21): peak RSS flat in session size, under 100 MB at 1M events and less
than 10 MB between 100k and 1M, for import and copy alike. ``--quick`` runs 20k and 100k events.

    python bench/import_bench.py [--quick]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson
from _common import GENESIS, TS, Report, Table, machine, report, session_events

from journal.canonical import dumps_canonical
from journal.fold import fold

RAW_IMPORT = r"""
import hashlib, sqlite3, sys, orjson
path, db = sys.argv[1], sys.argv[2]
conn = sqlite3.connect(db)
conn.execute("CREATE TABLE events (pos INTEGER PRIMARY KEY, session_id TEXT, seq INTEGER, "
             "ts TEXT, type TEXT, v INTEGER, body TEXT, hash TEXT, UNIQUE(session_id, seq))")
chain, batch = "0" * 64, []
insert = "INSERT INTO events(session_id, seq, ts, type, v, body, hash) VALUES (?,?,?,?,?,?,?)"
with conn, open(path, "rb") as lines:
    next(lines)
    for line in lines:
        record = orjson.loads(line)
        claimed = record.pop("hash")
        body = orjson.dumps(record, option=orjson.OPT_SORT_KEYS)
        digest = hashlib.sha256(chain.encode("ascii"))
        digest.update(body)
        chain = digest.hexdigest()
        assert chain == claimed
        batch.append((record["session_id"], record["seq"], record["ts"], record["type"],
                      record["v"], body.decode(), chain))
        if len(batch) == 1000:
            conn.executemany(insert, batch)
            batch.clear()
    conn.executemany(insert, batch)
"""


def write_export(path: Path, events: int) -> None:
    """Write a JSONL export of one session of ``events`` realistic events to ``path``."""
    session_id = "bench-import"
    status = fold(session_events(0, events)).status
    header = {"format": "agent-journal", "format_version": 1, "session_id": session_id}
    header["status"] = status
    chain = GENESIS
    with path.open("wb") as out:
        out.write(dumps_canonical(header) + b"\n")
        for seq, event in enumerate(session_events(0, events)):
            record = dict(event.model_dump(mode="json"), session_id=session_id, seq=seq)
            record.update(ts=TS, v=type(event).VERSION)
            body = orjson.dumps(record, option=orjson.OPT_SORT_KEYS)
            digest = hashlib.sha256(chain.encode("ascii"))
            digest.update(body)
            chain = digest.hexdigest()
            out.write(dumps_canonical({**record, "hash": chain}) + b"\n")


def peak_rss(command: list[str]) -> tuple[float, float]:
    """Run ``command``; return its peak RSS in MB and its wall time in seconds."""
    started = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    assert child.stderr is not None
    errors = child.stderr.read().decode(errors="replace")
    child.stderr.close()
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"{command[0]} failed ({child.returncode}): {errors[-2000:]}")
    return usage.ru_maxrss / 1024, wall


def measure(events: int, folder: Path) -> list[str]:
    """One row of the table: the file's size and both children's peak RSS and wall time."""
    export = folder / f"export-{events}.jsonl"
    write_export(export, events)
    cli = Path(sys.executable).with_name("agent-journal")
    ours, ours_wall = peak_rss(
        [str(cli), "import", str(export), "--db", str(folder / f"ours-{events}.db")]
    )
    copy = [str(cli), "copy", "--from", str(folder / f"ours-{events}.db")]
    copied, _ = peak_rss([*copy, "--to", str(folder / f"copy-{events}.db")])
    raw, raw_wall = peak_rss(
        [sys.executable, "-c", RAW_IMPORT, str(export), str(folder / f"raw-{events}.db")]
    )
    size = export.stat().st_size / 2**20
    return [
        f"{events:,}",
        f"{size:.0f}",
        f"{ours:.0f}",
        f"{raw:.0f}",
        f"{ours / raw:.1f}×",
        f"{copied:.0f}",
        f"{ours_wall:.1f} / {raw_wall:.1f}",
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20k and 100k events")
    sizes = (20_000, 100_000) if parser.parse_args().quick else (100_000, 1_000_000)
    with tempfile.TemporaryDirectory(prefix="import-bench-") as temp:
        rows = [measure(events, Path(temp)) for events in sizes]
    growth = (
        f"peak RSS growth {sizes[0]:,} -> {sizes[-1]:,} events: "
        f"import {float(rows[-1][2]) - float(rows[0][2]):.0f} MB, "
        f"copy {float(rows[-1][5]) - float(rows[0][5]):.0f} MB"
    )
    table = Table(
        [
            "events>",
            "file MB>",
            "import peak MB>",
            "raw peak MB>",
            "ratio>",
            "copy peak MB>",
            "import wall s (ours / raw)>",
        ],
        rows,
    )
    return report(Report([[machine()], [table], [growth]]))


if __name__ == "__main__":
    raise SystemExit(main())
