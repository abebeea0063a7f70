"""Writer processes for the concurrency and crash drills: ``python -m tests.workers MODE ...``.

* ``append TARGET SESSION WORKER COUNT [BARRIER]``: open the journal (creating it when
  nobody has yet) and start the session; with BARRIER, touch ``BARRIER.ready.WORKER`` and
  wait for ``BARRIER.go``; then append COUNT user inputs (texts ``WORKER-N``, in batches of
  one to three) with ``expected_seq=None``; exits 0.
* ``stream PATH SESSION``: append batches forever and print each append's returned last seq
  on its own line, flushed, so a parent that kills the process knows what was committed.
"""

from __future__ import annotations

import sys
import time
from itertools import count
from pathlib import Path

from journal import ConflictError, Journal, SessionStarted, UserInput


def _start(journal: Journal, session_id: str) -> None:
    try:
        journal.append(session_id, [SessionStarted(agent="tests.workers:main")], expected_seq=0)
    except ConflictError:
        pass  # another worker started it first


def _barrier(barrier: str, worker: str) -> None:
    """Say ``BARRIER.ready.WORKER``, then wait for ``BARRIER.go``: all workers write at once."""
    Path(f"{barrier}.ready.{worker}").touch()
    deadline = time.monotonic() + 30
    while not Path(f"{barrier}.go").exists():
        if time.monotonic() > deadline:
            raise SystemExit("no go signal")
        time.sleep(0.001)


def append(path: str, session_id: str, worker: str, total: int, barrier: str | None) -> None:
    """Append ``total`` user inputs in batches of one to three, never naming a seq."""
    with Journal.open(path) as journal:
        _start(journal, session_id)
        if barrier is not None:
            _barrier(barrier, worker)
        written = 0
        while written < total:
            size = min(1 + written % 3, total - written)
            batch = [UserInput(text=f"{worker}-{written + k}") for k in range(size)]
            journal.append(session_id, batch, expected_seq=None)
            written += size
            time.sleep(0.001)  # like an agent between steps; lets the others take the lock


def stream(path: str, session_id: str) -> None:
    """Append forever, printing the last seq each append returned."""
    with Journal.open(path) as journal:
        _start(journal, session_id)
        for n in count():
            batch = [UserInput(text=f"stream-{n}-{k}") for k in range(1 + n % 3)]
            print(journal.append(session_id, batch), flush=True)


def main(argv: list[str]) -> None:
    """Dispatch on the mode in ``argv[0]``."""
    mode, *args = argv
    if mode == "append":
        append(args[0], args[1], args[2], int(args[3]), args[4] if len(args) > 4 else None)
    elif mode == "stream":
        stream(args[0], args[1])
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
