"""The PostgreSQL and peers benches still run (tiny sizes, in a subprocess); no timing asserted."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from .helpers import REPO
from .stores import require_server

BENCH = REPO / "bench"
PEER_MODULES = ("eventsourcing", "langgraph", "langgraph.checkpoint.sqlite", "matplotlib")
HIDE_PEERS = (
    "import runpy, sys; sys.path.insert(0, {bench!r}); "
    "sys.modules.update(dict.fromkeys(['eventsourcing', 'langgraph', 'matplotlib'])); "
    "sys.argv = ['peers.py', *sys.argv[1:]]; runpy.run_path({script!r}, run_name='__main__')"
)


def _installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def _run(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, *args], cwd=REPO, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_pg_bench_runs_and_prints_every_row() -> None:
    out = _run(
        str(BENCH / "pg_bench.py"),
        *("--url", require_server(), "--quick", "--events", "40", "--sessions", "2"),
        *("--per-event", "4", "--repeat", "1"),
    )
    for row in (
        "(a) raw executemany, one transaction",
        "(b) raw COPY, one transaction",
        "(c) Journal.append, 20 events/call",
        "(d) raw commit per event",
        "(e) Journal.append, 1 event/call",
        "(f) raw SELECT + orjson.loads",
        "(g) Journal.events (validated)",
        "(h) fold(Journal.events)",
        "synchronous_commit=",
    ):
        assert row in out, out


def test_pg_bench_writers_runs_and_prints_every_row() -> None:
    out = _run(
        str(BENCH / "pg_bench.py"),
        *("--url", require_server(), "--writers", "2", "--appends", "3", "--repeat", "1"),
    )
    for row in (
        "(a) raw INSERT+COMMIT, position from a sequence",
        "(b) raw INSERT+COMMIT with a single counter row",
        "(c) this journal, 1 event per append",
        "(d) this journal, 100 events per append (events/s)",
        "(e) positions alone: our critical section, rolled back",
        "(c) at 2 writers against (a) at 2 writers: ",
        "(c) at 2 writers against (c) at 1 writer: ",
        "synchronous_commit=",
    ):
        assert row in out, out


TINY = ("--quick", "--events", "60", "--sessions", "3", "--repeat", "1", "--steps", "1", "3")


@pytest.mark.skipif(
    not all(_installed(name) for name in PEER_MODULES),
    reason="the peers come from the optional extra 'bench' (eventsourcing, langgraph, "
    "langgraph-checkpoint-sqlite, matplotlib), not installed here: pip install -e '.[bench]'",
)
def test_peers_bench_quick_runs_with_every_peer(tmp_path: Path) -> None:
    plot = tmp_path / "growth.png"
    out = _run(str(BENCH / "peers.py"), *TINY, "--plot", str(plot))
    for row in (
        "eventsourcing: save per event",
        "LangGraph: SqliteSaver.put, checkpoint per step",
        "LangGraph: list (every checkpoint)",
        "LangGraph: graph.invoke, node per step",
        "this journal: agent loop, instant model + tool",
        "eventsourcing: wal + synchronous=NORMAL",
        "LangGraph: wal + synchronous=NORMAL",
        "batched append vs eventsourcing's fastest",
        "append per event vs the fastest peer per step",
        "this journal (events): linear in steps",
    ):
        assert row in out, out
    assert plot.read_bytes().startswith(b"\x89PNG")


def test_peers_bench_without_the_peers_says_so_and_runs_the_rest(tmp_path: Path) -> None:
    plot = tmp_path / "growth.png"
    code = HIDE_PEERS.format(bench=str(BENCH), script=str(BENCH / "peers.py"))
    out = _run("-c", code, *TINY, "--plot", str(plot))
    for peer in ("eventsourcing", "langgraph", "matplotlib"):
        assert f"{peer}: not installed (pip install -e '.[bench]'); skipped" in out, out
    assert "this journal: append, 1 event/call" in out and "eventsourcing: save" not in out
    assert "no peer installed: no targets to check" in out
    assert "no plot: matplotlib is not installed" in out and not plot.exists()
