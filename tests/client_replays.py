"""What the tests of each captured model client share: its local server, its replays.

`threaded_server` serves a fake API (`tests.fake_anthropic`, `tests.fake_genai`) on a free
port of 127.0.0.1 in a thread; a `Desk` records a scratch app's sessions against it; `run`,
`events` and `replayed` drive an entry and its replay; `LOOP` is the event types of the
scratch desks' one turn (a lookup, a stock check, an e-mail, the answer).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from journal import Journal
from replay import ReplayOptions, ReplayResult, replay_entry, write_fixture

ROOT = Path(__file__).resolve().parent.parent

LOOP = [
    "session_started",
    "user_input",
    "action_proposed",
    "action_committed",
    "action_proposed",
    "action_committed",
    "action_proposed",
    "action_committed",
    "action_proposed",
    "agent_completed",
]


@contextmanager
def threaded_server(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """``handler`` served on a free port while the block runs; yields its root URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02})
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def run(entry: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call an entry, sync or async, and return what it returned."""
    result = entry(*args, **kwargs)
    return asyncio.run(result) if asyncio.iscoroutine(result) else result


def replayed(journal: Journal, session: str, entry: Any, **options: Any) -> ReplayResult:
    """The replay of ``session`` through ``entry`` with `ReplayOptions` of ``options``."""
    return replay_entry(journal, session, entry, ReplayOptions(**options))


def events(journal: Journal, session: str) -> list[Any]:
    """The typed events of ``session``."""
    return [item.event for item in journal.events(session)]


@dataclass(frozen=True)
class Desk:
    """A scratch app (``CHANGES``, ``OUTBOX``, ``bind``) and the fake server it talks to.

    ``serving`` starts the server (its handler class holds the ``faults`` queue).
    """

    app: ModuleType
    serving: Callable[[], AbstractContextManager[str]]
    handler: Any
    question: str = "Where is order 5?"

    def clean(self) -> Iterator[None]:
        """No planted change and an empty outbox around a test (an autouse fixture's body)."""
        self.app.CHANGES.clear()
        self.app.OUTBOX.clear()
        yield
        self.app.CHANGES.clear()

    @contextmanager
    def recorded(self, *faults: str | None) -> Iterator[Journal]:
        """A journal of the app's sessions, the server up (faults queued) while the block runs."""
        journal = Journal.open(":memory:")
        with self.serving() as url:
            self.handler.faults = list(faults)
            self.app.bind(journal, url)
            yield journal

    def record(
        self,
        entry: Callable[..., Any],
        *faults: str | None,
        question: str | None = None,
        **kwargs: Any,
    ) -> tuple[Journal, str, Any]:
        """One session of ``entry``: its journal, its id and what the entry returned."""
        with self.recorded(*faults) as journal:
            answered = run(entry, question or self.question, **kwargs)
        (summary,) = journal.sessions()
        return journal, summary.session_id, answered


def fixture_green_then_red(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    recorded: tuple[Journal, str],
    app: str,
    change: str,
    seq: int,
) -> None:
    """A fixture of the session ``recorded`` in a pytest project trusting scratch app ``app``
    (``tests.X_app``): green as it is, red at ``seq`` once ``X_APP_CHANGES=change``."""
    journal, session = recorded
    (pytester.path / "fixtures").mkdir()
    write_fixture(journal, session, pytester.path / "fixtures" / "session.jsonl")
    pytester.makefile(
        ".toml",
        pyproject=f'[tool.agent-journal]\nagents = ["{app}"]\npythonpath = [{str(ROOT)!r}]\n',
    )
    variable = f"{app.rsplit('.', 1)[1].upper()}_CHANGES"
    monkeypatch.setenv("PYTEST_ADDOPTS", "-p no:textual-snapshot -p no:cacheprovider")
    monkeypatch.delenv(variable, raising=False)
    green = pytester.runpytest_subprocess()
    green.assert_outcomes(passed=1)
    monkeypatch.setenv(variable, change)
    red = pytester.runpytest_subprocess()
    red.assert_outcomes(failed=1)
    red.stdout.fnmatch_lines([f"*first divergence at seq {seq}: action_committed differs*"])
