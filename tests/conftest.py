"""Shared fixtures: journals on a real SQLite file and (for the contract suite) PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from journal import Journal


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """Path of a fresh SQLite journal file (not created yet)."""
    return tmp_path / "journal.db"


@pytest.fixture
def journal(db_path: Path) -> Iterator[Journal]:
    """A fresh SQLite journal on a real file."""
    with Journal.open(db_path) as j:
        yield j
