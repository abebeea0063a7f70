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
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from journal import Journal
from capture import Destination
from capture.proxy import ProxyServer, Recording
from tests.proxy_agents import CHAT_TOOLS, SYSTEM, chat_agent
from tests.proxy_upstream import Upstream, root, upstream
from tests.tcp_proxy import Proxy
from tests.test_proxy import _clients, recording, replaying_cli

QUESTION = "where is order 3"
BROKEN = (openai.APIConnectionError, httpx.TransportError)
"""What the openai client raises when its connection breaks (a stream's: httpx's own)."""


def _events(db: Path, session_id: str | None = None) -> tuple[str, list[Any]]:
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
