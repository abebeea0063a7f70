"""Captured code on a PostgreSQL URL without psycopg installed: the call goes on, spooled."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

from capture import Capture, Spool, drain
from journal import Journal


def test_a_missing_postgres_driver_spools_the_session_and_the_call_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if not installed: import fails
    monkeypatch.delitem(sys.modules, "journal.postgres", raising=False)
    spool = tmp_path / "app.spool"
    capture = Capture("postgresql://127.0.0.1:5432/test", spool=spool)

    @capture.tool
    def add(a: int, b: int) -> int:
        return a + b

    @capture.entry
    def total(a: int, b: int) -> int:
        return add(a, b)

    with caplog.at_level(logging.WARNING, logger="capture"):
        assert total(2, 3) == 5
    assert "pip install 'agent-journal[postgres]'" in caplog.text
    monkeypatch.undo()
    with Journal.open(tmp_path / "drained.db") as journal:
        drain(journal, Spool(spool))
        (summary,) = journal.sessions()
        assert [e.type for e in journal.events(summary.session_id)][-2:] == [
            "action_committed",
            "agent_completed",
        ]
