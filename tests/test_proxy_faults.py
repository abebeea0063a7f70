"""The recording proxy when the upstream fails below HTTP: resets, refusals, idle, a stop.

Each fault is journaled as a failed call (``model_call_failed`` with the ``OSError``, and
the chunks a stream had passed on), the agent's client sees it as it would without the
proxy, and ``agent-journal proxy --replay`` serves the same failure with an identical
verdict. Then: a conversation nobody continues is closed after ``idle`` seconds, and a
SIGTERM lets a call under way finish within ``--grace`` or journals it as cut.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from capture import Destination
from capture.proxy import ProxyServer, Recording
from journal import Journal
from tests.proxy_agents import CHAT_TOOLS, SYSTEM, chat_agent
from tests.proxy_upstream import Upstream, root, upstream
from tests.stores import PgSchema
from tests.tcp_proxy import Proxy
from tests.test_proxy import _clients, recording, replaying_cli

QUESTION = "where is order 3"
BROKEN = (openai.APIConnectionError, httpx.TransportError)
"""What the openai client raises when its connection breaks (a stream's: httpx's own)."""


def _events(db: Path | str, session_id: str | None = None) -> tuple[str, list[Any]]:
    with Journal.open(str(db)) as journal:
        sessions = [s for s in journal.sessions() if s.replay_of is None]
        chosen = session_id or sessions[0].session_id
        return chosen, list(journal.events(chosen))


def _failures(events: list[Any]) -> list[Any]:
    return [e.event for e in events if e.type == "model_call_failed"]


def _streamed(client: openai.OpenAI, got: Callable[[int], None] | None = None) -> list[Any]:
    """One streamed chat request; the chunks it got (``got(n)`` after each)."""
    chunks: list[Any] = []
    for chunk in client.chat.completions.create(
        model="fake-1",
        messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}],
        tools=CHAT_TOOLS,
        stream=True,
    ):
        chunks.append(chunk)
        if got is not None:
            got(len(chunks))
    return chunks


def _replayed_identical(db: Path, agent: Callable[[openai.OpenAI], None]) -> None:
    """Run ``agent`` against ``proxy --replay`` of ``db``: its verdicts are identical."""
    with replaying_cli(db) as replay:
        client, _ = _clients(replay["url"])
        agent(client)
    assert replay["code"] == 0, replay["err"]
    assert [v["verdict"] for v in replay["verdicts"]] == ["identical"], replay["verdicts"]
    assert replay["verdicts"][0]["served"]["failed_calls"] == 1


def test_a_reset_before_any_byte_is_journaled_retried_and_replayed(tmp_path: Path) -> None:
    db = tmp_path / "rst.db"
    with upstream() as up, recording(db, up) as proxy:
        Upstream.faults = ["rst"]
        client, _ = _clients(proxy.url, retries=1)
        assert "in stock" in chat_agent(client, QUESTION)
    _, events = _events(db)
    [failed] = _failures(events)
    assert failed.error["type"] == "builtins:ConnectionResetError", failed.error
    assert failed.response is None
    assert [e.type for e in events][2:4] == ["model_call_failed", "action_proposed"]

    def agent(client: openai.OpenAI) -> None:
        retrying = openai.OpenAI(base_url=client.base_url, api_key="k", max_retries=1)
        assert "in stock" in chat_agent(retrying, QUESTION)

    _replayed_identical(db, agent)


def test_a_reset_mid_stream_keeps_the_chunks_the_agent_got(tmp_path: Path) -> None:
    db = tmp_path / "midstream.db"
    with upstream() as up, recording(db, up) as proxy:
        Upstream.faults = ["rst:3"]
        client, _ = _clients(proxy.url)
        got: list[Any] = []

        def arrived(n: int) -> None:
            if n == 3:
                Upstream.got.set()

        with pytest.raises(BROKEN):
            got.extend(_streamed(client, arrived))
    _, events = _events(db)
    [failed] = _failures(events)
    assert failed.error["type"] == "builtins:ConnectionResetError", failed.error
    assert failed.response is not None and len(failed.response) == 3  # how far it got
    assert [c["id"] for c in failed.response] == [failed.response[0]["id"]] * 3

    def agent(client: openai.OpenAI) -> None:
        seen: list[int] = []
        with pytest.raises(BROKEN):
            _streamed(client, seen.append)
        assert seen == [1, 2, 3]  # the same three chunks, then the same break

    _replayed_identical(db, agent)


def _ask(client: openai.OpenAI, *extra: dict[str, Any]) -> Any:
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
    return client.chat.completions.create(
        model="fake-1", messages=[*messages, *extra], tools=CHAT_TOOLS
    )


def test_an_upstream_that_went_down_refuses_and_the_replay_refuses_alike(tmp_path: Path) -> None:
    db = tmp_path / "down.db"
    with upstream() as up:
        relay = Proxy(("127.0.0.1", up.server_address[1]))  # the upstream as the proxy sees it
        proxy = ProxyServer(
            Recording(Destination(str(db))), {"openai": f"http://127.0.0.1:{relay.port}/v1"}
        )
        with proxy:
            client, _ = _clients(proxy.url)
            reply = _ask(client).choices[0].message.model_dump(exclude_none=True)
            relay.stop()  # the upstream goes down: new connections are refused
            with pytest.raises(openai.APIConnectionError):
                _ask(client, reply, _TOOL_RESULT)
    _, events = _events(db)
    [failed] = _failures(events)
    assert failed.error["type"] == "builtins:ConnectionRefusedError", failed.error
    assert [e.type for e in events][-2:] == ["action_proposed", "model_call_failed"]

    def agent(client: openai.OpenAI) -> None:
        again = _ask(client).choices[0].message.model_dump(exclude_none=True)
        assert again == reply
        with pytest.raises(openai.APIConnectionError):
            _ask(client, reply, _TOOL_RESULT)

    _replayed_identical(db, agent)


_TOOL_RESULT = {"role": "tool", "tool_call_id": "call_0", "content": '{"sku": "SKU-3"}'}


def _until(reached: Callable[[], bool], what: str, timeout: float = 15.0) -> None:
    """Poll until ``reached()`` (no wall-clock assertion: only a generous bound)."""
    deadline = time.monotonic() + timeout
    while not reached():
        assert time.monotonic() < deadline, f"never reached: {what}"
        time.sleep(0.02)


def _status(db: Path | str, session_id: str) -> str | None:
    with Journal.open(str(db)) as journal:
        summary = journal.summary(session_id)
    return None if summary is None else summary.status


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where the proxy journals: a SQLite file, then a fresh PostgreSQL schema."""
    if request.param == "sqlite":
        return str(tmp_path / "proxy.db")
    schema: PgSchema = request.getfixturevalue("pg_schema")
    return schema.url


def test_an_idle_conversation_is_closed_and_a_later_request_begins_another(db: str) -> None:
    named = {"X-Agent-Journal-Session": "idle-1"}
    with upstream() as up, recording(db, up, idle=0.2) as proxy:
        client, _ = _clients(proxy.url)
        assert "in stock" in chat_agent(client, QUESTION, **named)
        _until(lambda: _status(db, "idle-1") == "completed", "the idle session closed")
        _, events = _events(db, "idle-1")
        assert events[-1].type == "agent_completed"  # its last answer, journaled at the close
        assert "in stock" in chat_agent(client, QUESTION, **named)
        _until(lambda: _status(db, "idle-1.2") == "completed", "the second session closed")
    assert len(_events(db, "idle-1.2")[1]) == len(events)


def test_a_stream_longer_than_idle_keeps_its_conversation_open(tmp_path: Path) -> None:
    db = tmp_path / "long.db"
    with upstream() as up, recording(db, up, idle=0.05) as proxy:
        Upstream.faults = ["slow:0.1"]  # the stream lasts many idle periods
        client, _ = _clients(proxy.url)
        chunks = _streamed(client)
    _, events = _events(db)
    [proposed] = [e.event for e in events if e.type == "action_proposed"]
    assert len(proposed.response) == len(chunks)  # journaled whole: not closed under it


@contextmanager
def recording_cli(db: Path | str, up: Any, *options: str) -> Iterator[dict[str, Any]]:
    """``agent-journal proxy`` (recording) in a subprocess; yields its URL, then its exit."""
    command = [
        sys.executable,
        "-c",
        "from tui.console import main; main()",
        "proxy",
        "--db",
        str(db),
        "--listen",
        "127.0.0.1:0",
        "--upstream",
        f"{root(up)}/v1",
        *options,
    ]
    process = subprocess.Popen(command, stderr=subprocess.PIPE)
    assert process.stderr is not None
    found = re.search(r"on (http://127\.0\.0\.1:\d+)", process.stderr.readline().decode())
    assert found
    outcome: dict[str, Any] = {"url": found.group(1), "process": process}
    try:
        yield outcome
    finally:
        if process.poll() is None and not outcome.get("terminated"):
            process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=60)
        outcome.update(code=process.returncode, err=err.decode())


def _terminate_at_first_chunk(outcome: dict[str, Any]) -> Callable[[int], None]:
    def got(n: int) -> None:
        if n == 1:
            outcome["process"].send_signal(signal.SIGTERM)
            outcome["terminated"] = True

    return got


def test_sigterm_waits_for_a_slow_stream_within_grace(tmp_path: Path) -> None:
    db = tmp_path / "grace.db"
    with upstream() as up:
        Upstream.faults = ["slow:0.15"]
        with recording_cli(db, up, "--grace", "30") as proxy:
            client, _ = _clients(proxy["url"])
            chunks = _streamed(client, _terminate_at_first_chunk(proxy))
    assert proxy["code"] == 0, proxy["err"]
    assert "Traceback" not in proxy["err"]
    _, events = _events(db)
    assert not _failures(events)
    [proposed] = [e.event for e in events if e.type == "action_proposed"]
    assert len(proposed.response) == len(chunks) > 3  # the whole stream, journaled


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_sigterm_cuts_a_call_longer_than_grace_and_journals_it(db: str, stream: bool) -> None:
    with upstream() as up:
        Upstream.faults = ["hold" if stream else "stall"]
        with recording_cli(db, up, "--grace", "0.3") as proxy:
            client, _ = _clients(proxy["url"])
            seen: list[int] = []
            terminate = _terminate_at_first_chunk(proxy)
            with pytest.raises(BROKEN):
                if stream:
                    _streamed(client, lambda n: (seen.append(n), terminate(n)))
                else:

                    def once_asked() -> None:
                        _until(lambda: bool(Upstream.requests), "the call reached the upstream")
                        terminate(1)

                    threading.Thread(target=once_asked, daemon=True).start()
                    _ask(client)
            proxy["process"].wait(timeout=30)
        Upstream.go.set()  # (the upstream's handler may finish now)
    assert proxy["code"] == 0, proxy["err"]
    assert "Traceback" not in proxy["err"]
    session_id, events = _events(db)
    [failed] = _failures(events)
    assert failed.error["type"] == "builtins:TimeoutError", failed.error
    assert "grace of 0.3 s" in failed.message
    assert "1 call still under way after the grace of 0.3 s: cut" in proxy["err"]
    if stream:
        assert failed.response is not None and len(failed.response) == len(seen) == 1
    else:
        assert failed.response is None
    assert [e.type for e in events] == ["session_started", "user_input", "model_call_failed"]
    assert _status(db, session_id) is not None
