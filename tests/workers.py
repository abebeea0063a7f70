"""Writer processes for the concurrency and crash drills: ``python -m tests.workers MODE ...``.

* ``append TARGET SESSION WORKER COUNT [BARRIER]``: open the journal (creating it when
  nobody has yet) and start the session; with BARRIER, touch ``BARRIER.ready.WORKER`` and
  wait for ``BARRIER.go``; then append COUNT user inputs (texts ``WORKER-N``, in batches of
  one to three) with ``expected_seq=None``; exits 0.
* ``stream PATH SESSION``: append batches forever and print each append's returned last seq
  on its own line, flushed, so a parent that kills the process knows what was committed.
* ``read PATH SECONDS``: follow the journal from position 0 for SECONDS, checking that every
  session's seqs arrive dense and in order; print ``ROWS LONGEST_WAIT_MS`` and exit 0.
* ``zygote``: the crash drills' fork server; see `zygote`.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
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


def read(path: str, seconds: float) -> None:
    """Follow the journal for ``seconds``; every session's seqs must come dense and in order."""
    next_seq: dict[str, int] = {}
    rows = longest = 0
    with Journal.open(path, create=False) as journal:
        deadline = time.monotonic() + seconds
        position = 0
        while time.monotonic() < deadline:
            asked = time.monotonic()
            page = journal.read_after(position, limit=200)
            longest = max(longest, int((time.monotonic() - asked) * 1000))
            for row in page:
                if row.seq != next_seq.get(row.session_id, 0):
                    raise SystemExit(f"{row.session_id}: seq {row.seq} out of order")
                next_seq[row.session_id] = row.seq + 1
                position = row.position or position
            rows += len(page)
            if not page:
                journal.wait_for_events(position, 0.05)
    print(rows, longest, flush=True)


def zygote() -> None:
    """Fork one child per command read from stdin, so the crash drills can kill hundreds.

    Everything is imported once, here, so a child starts in a millisecond instead of the
    half second a new interpreter takes. A command is a JSON array: ``["sessions", PATH,
    PREFIX, SEED, LOG]`` runs `tests.drill_agent.write_sessions`; ``["grouped", PATH,
    PREFIX, THREADS, LOG]`` runs `tests.drill_grouped.write_grouped` (``"grouped-async"``:
    `tests.drill_grouped.write_grouped_async`, THREADS coroutines); ``["cli", LOG, ARG...]``
    runs ``agent-journal ARG...``. For each: fork, print ``pid PID``; the child sends its
    reports as ``r TEXT`` lines on this process's stdout (the CLI says ``r ready`` before it
    starts) and writes its own output to LOG; then wait for any line on stdin (the parent
    has killed the child, or lets it end), reap the child and print ``exit CODE`` (a
    negative code is the signal that ended it). The child stays unreaped until then, so the
    parent never signals a pid the system has handed to someone else.
    """
    import rich.console  # noqa: F401
    import rich.table  # noqa: F401

    import journal.formats.openai_import  # noqa: F401  (imported here once, for every child)
    import replay  # noqa: F401
    import tests.drill_agent  # noqa: F401
    import tests.drill_grouped  # noqa: F401
    import tui.cli  # noqa: F401
    import tui.cli_formats  # noqa: F401
    import tui.render  # noqa: F401

    for line in iter(sys.stdin.readline, ""):
        command = json.loads(line)
        pid = os.fork()
        if pid == 0:
            os._exit(_child(command))
        os.write(1, f"pid {pid}\n".encode())  # one write: the child writes here too
        sys.stdin.readline()
        _, status = os.waitpid(pid, 0)
        os.write(1, f"exit {os.waitstatus_to_exitcode(status)}\n".encode())


def _child(command: list[str]) -> int:
    """Run one zygote command in the forked child; return its exit code."""
    reports = os.dup(1)
    log = command[4] if command[0] in ("sessions", "grouped", "grouped-async") else command[1]
    handle = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(handle, 1)
    os.dup2(handle, 2)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)

    def report(text: str) -> None:
        os.write(reports, f"r {text}\n".encode())

    try:
        if command[0] == "sessions":
            from tests.drill_agent import write_sessions

            write_sessions(command[1], command[2], int(command[3]), report)
        elif command[0] == "grouped":
            from tests.drill_grouped import write_grouped

            write_grouped(command[1], command[2], int(command[3]), report)
        elif command[0] == "grouped-async":
            from tests.drill_grouped import write_grouped_async

            write_grouped_async(command[1], command[2], int(command[3]), report)
        else:
            from tui.cli import main

            sys.argv = ["agent-journal", *command[2:]]
            report("ready")
            main()
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else int(e.code is not None)
    except BaseException:
        traceback.print_exc()
        return 70
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    return 0


def main(argv: list[str]) -> None:
    """Dispatch on the mode in ``argv[0]``."""
    mode, *args = argv
    if mode == "append":
        append(args[0], args[1], args[2], int(args[3]), args[4] if len(args) > 4 else None)
    elif mode == "stream":
        stream(args[0], args[1])
    elif mode == "read":
        read(args[0], float(args[1]))
    elif mode == "zygote":
        zygote()
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
