"""agent-journal proxy: the official Python clients through it, recorded, then replayed.

The upstream is `tests.proxy_upstream` (OpenAI-compatible and Anthropic, faults on demand);
the replay runs the real command (``agent-journal proxy --replay``) with the upstream
stopped, and the agents run again against it.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anthropic
import openai
import orjson
import pytest

from capture import Destination
from capture.proxy import ProxyServer, Recording
from journal import Journal
from replay.proxy import replaying_proxy
from tests.proxy_agents import anthropic_agent, chat_agent, responses_agent
from tests.proxy_upstream import Upstream, root, upstream

SECRET = "sk-proj-SECRETSECRETSECRET0123456789"
ANTHROPIC_SECRET = "sk-ant-api03-SECRETSECRET0123456789"


def _clients(url: str, retries: int = 0) -> tuple[openai.OpenAI, anthropic.Anthropic]:
    return (
        openai.OpenAI(base_url=f"{url}/v1", api_key=SECRET, max_retries=retries),
        anthropic.Anthropic(base_url=url, api_key=ANTHROPIC_SECRET, max_retries=retries),
    )


Agent = Callable[[openai.OpenAI, anthropic.Anthropic], str]


def _agents(change: int | None = None) -> list[Agent]:
    """Ten agents over the three wire formats, streamed and not; ``change``: ask otherwise."""

    def q(n: int) -> str:
        return f"where is order {n}" + (" today" if n == change else "")

    return [
        lambda o, a: chat_agent(o, q(1)),
        lambda o, a: chat_agent(o, q(2), stream=True),
        lambda o, a: chat_agent(o, q(3)),
        lambda o, a: chat_agent(o, q(4), stream=True),
        lambda o, a: responses_agent(o, q(5)),
        lambda o, a: anthropic_agent(a, q(6)),
        lambda o, a: anthropic_agent(a, q(7), stream=True),
        lambda o, a: chat_agent(o, q(8)),
        lambda o, a: anthropic_agent(a, q(9)),
        lambda o, a: responses_agent(o, q(10)),
    ]


@contextmanager
def recording(db: Path | str, up: Any, **options: Any) -> Iterator[ProxyServer]:
    proxy = ProxyServer(
        Recording(Destination(str(db))),
        {"openai": f"{root(up)}/v1", "anthropic": root(up)},
        **options,
    )
    with proxy:
        yield proxy


@contextmanager
def replaying_cli(db: Path, *sessions: str) -> Iterator[dict[str, Any]]:
    """``agent-journal proxy --replay``; yields its URL, then its output and exit code."""
    command = [
        sys.executable,
        "-c",
        "from tui.console import main; main()",
        "proxy",
        "--replay",
        *sessions,
        "--db",
        str(db),
        "--listen",
        "127.0.0.1:0",
        "--json",
    ]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stderr is not None
    line = process.stderr.readline().decode()
    found = re.search(r"on (http://127\.0\.0\.1:\d+)", line)
    assert found, line
    outcome: dict[str, Any] = {"url": found.group(1)}
    try:
        yield outcome
    finally:
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
        outcome.update(code=process.returncode, verdicts=orjson.loads(out or b"null"), err=err)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Ten sessions recorded through the proxy, a 429 absorbed by a retry on the way."""
    db = tmp_path_factory.mktemp("proxy") / "agent-journal.db"
    with upstream() as up, recording(db, up) as proxy:
        o, a = _clients(proxy.url, retries=2)
        for index, agent in enumerate(_agents()):
            if index == 2:
                Upstream.faults = ["429"]
            assert "in stock" in agent(o, a)
    return db


def _sessions(db: Path) -> list[Any]:
    with Journal.open(str(db)) as journal:
        return [s for s in journal.sessions() if s.replay_of is None]


def test_ten_sessions_recorded_with_the_failed_call_and_no_credentials(recorded: Path) -> None:
    sessions = _sessions(recorded)
    assert len(sessions) == 10
    assert all(s.status == "completed" and s.steps == 3 for s in sessions), sessions
    with Journal.open(str(recorded)) as journal:
        kinds = {s.session_id: [e.type for e in journal.events(s.session_id)] for s in sessions}
        wires = {
            next(iter(journal.events(s.session_id))).event.metadata["proxy"]["wire"]  # type: ignore[union-attr]
            for s in sessions
        }
    assert wires == {"openai-chat", "openai-responses", "anthropic-messages"}
    failed = [k for k in kinds.values() if "model_call_failed" in k]
    assert len(failed) == 1 and failed[0][:4] == [
        "session_started",
        "user_input",
        "model_call_failed",
        "action_proposed",
    ]
    stored = b"".join(p.read_bytes() for p in recorded.parent.iterdir())
    assert SECRET.encode() not in stored and ANTHROPIC_SECRET.encode() not in stored
    assert b"SECRETSECRET" not in stored


def test_replay_with_the_upstream_down_is_identical(recorded: Path) -> None:
    with replaying_cli(recorded) as replay:
        o, a = _clients(replay["url"], retries=2)
        for agent in _agents():
            assert "in stock" in agent(o, a)
    assert replay["code"] == 0, replay["err"]
    assert [v["verdict"] for v in replay["verdicts"]] == ["identical"] * 10
    assert all(v["saved"] for v in replay["verdicts"])
    assert sum(v["served"]["failed_calls"] for v in replay["verdicts"]) == 1


def test_a_changed_prompt_is_refused_and_diverges_at_its_seq(recorded: Path) -> None:
    changed = 6  # an Anthropic session, and a chat one
    for number in (changed, 3):
        with replaying_cli(recorded) as replay:
            o, a = _clients(replay["url"], retries=2)
            for index, agent in enumerate(_agents(change=number)):
                if index + 1 != number:
                    assert "in stock" in agent(o, a)
                    continue
                with pytest.raises(
                    (openai.UnprocessableEntityError, anthropic.UnprocessableEntityError)
                ) as refused:
                    agent(o, a)
        body = refused.value.body
        assert isinstance(body, dict)
        error = body.get("error", body)
        assert error["seq"] == 2 and error["type"] == "agent_journal_replay"
        assert [d["path"] for d in error["differences"]] == [
            "messages[0].content" if number == changed else "messages[1].content"
        ]
        assert error["differences"][0]["actual"] == f"where is order {number} today"
        assert replay["code"] == 1
        verdicts = {v["session_id"]: v for v in replay["verdicts"]}
        diverged = [v for v in verdicts.values() if v["verdict"] != "identical"]
        assert len(diverged) == 1, verdicts
        assert diverged[0]["first_divergence"]["seq"] == 1
        assert diverged[0]["first_divergence"]["changes"][0]["path"] == "text"
        assert (
            diverged[0]["first_divergence"]["changes"][0]["actual"]
            == f"where is order {number} today"
        )
        assert error["session"] == diverged[0]["session_id"]


def test_a_named_session_and_a_500_the_agent_survives(tmp_path: Path) -> None:
    db = tmp_path / "named.db"
    with upstream() as up, recording(db, up) as proxy:
        o, a = _clients(proxy.url)
        Upstream.faults = ["500"]
        with pytest.raises(openai.InternalServerError):
            chat_agent(o, "where is order 5", **{"X-Agent-Journal-Session": "checkout-5"})
        assert "in stock" in chat_agent(
            o,
            "where is order 5",
            **{"X-Agent-Journal-Session": "checkout-5", "X-Agent-Journal-Meta-Team": "shop"},
        )
    with Journal.open(str(db)) as journal:
        events = list(journal.events("checkout-5"))
    assert [e.type for e in events][:4] == [
        "session_started",
        "user_input",
        "model_call_failed",
        "action_proposed",
    ]
    assert events[2].event.status_code == 500  # type: ignore[union-attr]
    with Journal.open(str(db)) as journal, replaying_proxy(journal, ["checkout-5"]) as replay:
        o, a = _clients(replay.url)
        with pytest.raises(openai.InternalServerError):
            chat_agent(o, "where is order 5", **{"X-Agent-Journal-Session": "checkout-5"})
        chat_agent(o, "where is order 5", **{"X-Agent-Journal-Session": "checkout-5"})
    assert replay.identical, replay.report


def test_twenty_agents_at_once_keep_their_sessions_apart(tmp_path: Path) -> None:
    db = tmp_path / "twenty.db"
    answers: list[str] = []
    with upstream() as up, recording(db, up) as proxy:
        o, a = _clients(proxy.url)
        barrier = threading.Barrier(20)

        def run(n: int) -> None:
            barrier.wait()
            agent = [chat_agent, anthropic_agent][n % 2]
            client = [o, a][n % 2]
            answers.append(agent(client, f"where is order {100 + n}", stream=n % 4 < 2))

        threads = [threading.Thread(target=run, args=(n,)) for n in range(20)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert len(answers) == 20
    sessions = _sessions(db)
    assert len(sessions) == 20 and all(s.status == "completed" and s.events == 10 for s in sessions)
    with Journal.open(str(db)) as journal:
        asked = sorted(
            next(e.event.text for e in journal.events(s.session_id) if e.type == "user_input")
            for s in sessions
        )  # type: ignore[union-attr]
    assert asked == sorted(f"where is order {100 + n}" for n in range(20))


def test_sigterm_stops_the_recording_proxy_cleanly(tmp_path: Path) -> None:
    db = tmp_path / "term.db"
    with upstream() as up:
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
        ]
        process = subprocess.Popen(command, stderr=subprocess.PIPE)
        assert process.stderr is not None
        url = re.search(r"on (http://127\.0\.0\.1:\d+)", process.stderr.readline().decode())
        assert url
        o, _ = _clients(url.group(1))
        chat_agent(o, "where is order 77", stream=True)
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=30)
        assert process.returncode == 0
    sessions = _sessions(db)
    assert [s.status for s in sessions] == ["completed"]  # the answer journaled at the stop
