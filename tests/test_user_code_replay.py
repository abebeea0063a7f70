"""Replay the code people already run: a plain loop over the openai client, captured at its
boundaries, replayed unchanged with the model server stopped.

The application (``tests/apps/shop``) is a user's project in a folder of its own: its own
``pyproject.toml`` with the trust table, five tools (one sends e-mail into a file, two raise
on bad input), 20 sessions of which 4 crash on a planted bug. Everything runs as a user
runs it: the installed console scripts, a real HTTP server (``tests/fake_openai.py``), a
real SQLite journal.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from journal import Journal

pytest.importorskip("openai")

HERE = Path(__file__).resolve().parent
APP = HERE / "apps" / "shop"
BIN = Path(sys.executable).parent
BUG_SESSIONS = 4


@dataclass
class Shop:
    """The scratch project, its journal and its outbox."""

    root: Path
    env: dict[str, str]

    @property
    def journal(self) -> Path:
        return self.root / "shop.db"

    @property
    def outbox(self) -> Path:
        return self.root / "outbox.txt"

    def run(self, *command: str | Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(c) for c in command],
            cwd=self.root,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    def cli(self, *args: str | Path) -> subprocess.CompletedProcess[str]:
        return self.run(BIN / "agent-journal", *args)

    def sessions(self) -> list[str]:
        return self.sessions_of(self.journal)

    def sessions_of(self, path: str | Path) -> list[str]:
        with Journal.open(self.root / path) as journal:
            return [summary.session_id for summary in journal.sessions()]

    def replay_all(self, *options: str) -> dict[str, str]:
        """Replay every session in one process (the Python API); the verdict of each."""
        script = (
            "import sys, json\n"
            "from journal import Journal\n"
            "from replay import Replayer, ReplayOptions\n"
            f"live = {list(options)!r}\n"
            "with Journal.open('shop.db') as journal:\n"
            "    replayer = Replayer(ReplayOptions(live_tools=live))\n"
            "    out = {}\n"
            "    for s in journal.sessions():\n"
            "        if s.replay_of: continue\n"
            "        r = replayer.replay(journal, s.session_id)\n"
            "        d = r.first_divergence\n"
            "        out[s.session_id] = r.verdict if d is None else f'diverged at {d.seq}'\n"
            "print(json.dumps(out))\n"
        )
        done = self.run(sys.executable, "-c", script)
        assert done.returncode == 0, done.stderr
        import json

        verdicts: dict[str, str] = json.loads(done.stdout.splitlines()[-1])
        return verdicts


def _server(env: dict[str, str]) -> subprocess.Popen[str]:
    server = subprocess.Popen(
        [sys.executable, str(HERE / "fake_openai.py")],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert server.stdout is not None
    env["SHOP_MODEL_URL"] = f"http://127.0.0.1:{server.stdout.readline().strip()}/v1"
    return server


@pytest.fixture(scope="module", params=["sync", "async", "stream"])
def shop(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Shop]:
    """The shop, its 20 sessions captured in ``mode``, and the model server stopped."""
    root = tmp_path_factory.mktemp(f"shop-{request.param}")
    for source in APP.glob("*.py"):
        shutil.copy(source, root / source.name)
    (root / "pyproject.toml").write_text(
        '[project]\nname = "shop"\nversion = "0"\n\n[tool.agent-journal]\nagents = ["shop:*"]\n'
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "AGENT_JOURNAL_TRUST")}
    env |= {"SHOP_JOURNAL": str(root / "shop.db"), "SHOP_OUTBOX": str(root / "outbox.txt")}
    server = _server(env)
    try:
        ran = subprocess.run(
            [sys.executable, "run_sessions.py", request.param],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert ran.returncode == 0, ran.stderr
    finally:
        server.terminate()
        server.wait(timeout=10)
        assert server.stdout is not None
        server.stdout.close()
    env["SHOP_MODEL_URL"] = "http://127.0.0.1:9/v1"  # nothing listens there
    yield Shop(root, env)


def test_the_capture_journals_every_session_and_the_planted_bug(shop: Shop) -> None:
    with Journal.open(shop.journal) as journal:
        summaries = journal.sessions()
        statuses = sorted(s.status for s in summaries)
        assert len(summaries) == 20
        assert statuses.count("failed") == BUG_SESSIONS
        failed = [s for s in summaries if s.status == "failed"]
        assert {journal.state(s.session_id).halt_reason.split(":")[0] for s in failed} == {
            "TypeError"
        }
        assert {s.agent for s in summaries} <= {
            "shop:answer",
            "shop:answer_async",
            "shop:answer_streamed",
        }
    assert len(shop.outbox.read_text().splitlines()) == 20 - BUG_SESSIONS - 2  # 2 unknown orders


def test_unchanged_code_replays_identical_with_no_server(shop: Shop) -> None:
    before = shop.outbox.read_bytes()
    verdicts = shop.replay_all()
    assert len(verdicts) == 20
    assert set(verdicts.values()) == {"identical"}
    assert shop.outbox.read_bytes() == before  # the e-mail tool never ran


def test_the_cli_replays_a_session_as_printed(shop: Shop) -> None:
    session = shop.sessions()[0]
    result = shop.cli("replay", session, "--db", "shop.db")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "identical" in result.stdout


def _fixed(shop: Shop, tmp_path: Path, old: str, new: str) -> Shop:
    """A copy of the shop, journal included, with ``old`` replaced by ``new`` in its code."""
    root = tmp_path / "fixed"
    shutil.copytree(shop.root, root)
    source = root / "shop.py"
    code = source.read_text()
    assert old in code
    source.write_text(code.replace(old, new))
    return Shop(
        root,
        {
            **shop.env,
            "SHOP_JOURNAL": str(root / "shop.db"),
            "SHOP_OUTBOX": str(root / "outbox.txt"),
        },
    )


def _loop_fixed(shop: Shop, tmp_path: Path) -> Shop:
    """The shop with the loop fixed: it coerces a quantity before dispatch."""
    return _fixed(
        shop,
        tmp_path,
        "    args = json.loads(arguments)\n",
        "    args = json.loads(arguments)\n"
        '    if "quantity" in args:\n'
        '        args["quantity"] = int(args["quantity"])\n',
    )


def _tool_fixed(shop: Shop, tmp_path: Path) -> Shop:
    """The shop with the tool fixed: check_stock coerces its quantity."""
    return _fixed(
        shop,
        tmp_path,
        '    return {"sku": sku, "in_stock": STOCK[sku] >= quantity, "units": STOCK[sku]}',
        "    quantity = int(quantity)\n"
        '    return {"sku": sku, "in_stock": STOCK[sku] >= quantity, "units": STOCK[sku]}',
    )


def _failed_and_rest(verdicts: dict[str, str], shop: Shop) -> tuple[set[str], set[str]]:
    with Journal.open(shop.journal) as journal:
        failed = {s.session_id for s in journal.sessions() if s.status == "failed"}
    return {verdicts[s] for s in failed}, {v for s, v in verdicts.items() if s not in failed}


@pytest.mark.parametrize("shop", ["sync"], indirect=True)
def test_a_fix_in_the_loop_diverges_at_the_call_it_changed(shop: Shop, tmp_path: Path) -> None:
    fixed = _loop_fixed(shop, tmp_path)
    failed, rest = _failed_and_rest(fixed.replay_all(), fixed)
    # seq 4 proposes check_stock(quantity="3"), seq 5 recorded its TypeError: the fixed loop
    # calls it with 3, which the recording never ran
    assert failed == {"diverged at 5"}
    assert rest == {"identical"}


@pytest.mark.parametrize("shop", ["sync"], indirect=True)
def test_a_fix_in_a_tool_run_live_diverges_at_its_result(shop: Shop, tmp_path: Path) -> None:
    fixed = _tool_fixed(shop, tmp_path)
    failed, rest = _failed_and_rest(fixed.replay_all("check_stock"), fixed)
    assert failed == {"diverged at 5"}  # action_failed (TypeError) -> action_committed
    assert rest == {"identical"}  # the live tool returns what was recorded
    assert _failed_and_rest(fixed.replay_all(), fixed) == ({"identical"}, {"identical"})


@pytest.mark.parametrize("shop", ["sync"], indirect=True)
def test_tools_with_side_effects_run_live_only_when_allowed(shop: Shop) -> None:
    session = next(s for s in shop.sessions() if _ends_completed(shop, s))
    before = shop.outbox.read_bytes()
    refused = shop.cli("replay", session, "--db", "shop.db", "--live-tool", "send_email")
    assert refused.returncode == 2
    assert refused.stderr.strip() == (
        "agent-journal: tool send_email has side effects: it runs for real in a replay only "
        "when allowed too (--allow-side-effects send_email)"
    )
    for option in ("--live-tool", "--allow-side-effects"):  # one message, as for the runtime
        unknown = shop.cli("replay", session, "--db", "shop.db", option, "lookup")
        assert unknown.returncode == 2
        assert unknown.stderr.startswith("agent-journal: no tool 'lookup' in this agent (tools: ")
    every = shop.cli("replay", session, "--db", "shop.db", "--live-tools")
    assert every.returncode == 0, every.stdout + every.stderr  # send_email stays recorded
    assert shop.outbox.read_bytes() == before
    allowed = shop.cli(
        "replay",
        session,
        "--db",
        "shop.db",
        "--live-tool",
        "send_email",
        "--allow-side-effects",
        "send_email",
    )
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr
    assert (
        shop.outbox.read_bytes()
        == before + b"customer@example.com: " + (shop.outbox.read_bytes()[len(before) + 22 :])
    )
    assert len(shop.outbox.read_bytes().splitlines()) == len(before.splitlines()) + 1


def _ends_completed(shop: Shop, session: str) -> bool:
    with Journal.open(shop.journal) as journal:
        return (
            journal.require(session).status == "completed" and journal.require(session).steps == 3
        )


@pytest.mark.parametrize("shop", ["sync"], indirect=True)
def test_the_sessions_become_fixtures_green_then_red(shop: Shop, tmp_path: Path) -> None:
    project = _fixed(shop, tmp_path, "OUTBOX = ", "OUTBOX = ")  # a copy to change
    sessions = project.sessions()[:3]
    for session in sessions:
        wrote = project.cli("fixture", session, "--db", "shop.db")
        assert wrote.returncode == 0, wrote.stderr
    green = project.run(BIN / "pytest", "-q", "-p", "no:cacheprovider", "fixtures")
    assert green.returncode == 0, green.stdout + green.stderr
    assert "3 passed" in green.stdout
    source = project.root / "shop.py"
    source.write_text(
        source.read_text().replace("Look orders up, check stock", "Look orders up first")
    )
    red = project.run(BIN / "pytest", "-q", "-p", "no:cacheprovider", "fixtures")
    assert red.returncode == 1, red.stdout + red.stderr
    assert "3 failed" in red.stdout
    assert "the request at seq 2 differs from the recorded one" in red.stdout


@pytest.mark.parametrize("shop", ["sync"], indirect=True)
def test_a_fixed_loop_forks_a_failed_session_and_runs_on_live(shop: Shop, tmp_path: Path) -> None:
    fixed = _loop_fixed(shop, tmp_path)
    with Journal.open(fixed.journal) as journal:
        failed = next(s.session_id for s in journal.sessions() if s.status == "failed")
        original = [item.event for item in journal.events(failed)]
    too_late = fixed.cli("fork", failed, "--at", "6", "--db", "shop.db")
    assert too_late.returncode == 2, too_late.stdout + too_late.stderr
    assert (
        f"session {failed}: cannot fork at seq 6: the code now diverges from the recording "
        "at seq 5" in too_late.stderr
    )
    assert "Traceback" not in too_late.stderr
    outbox = fixed.outbox.read_bytes()
    server = _server(fixed.env)  # the live model, from the divergence on
    try:
        held = fixed.cli("fork", failed, "--at", "4", "--db", "shop.db", "--json")
        allowed = ("--allow-side-effects", "send_email")
        forked = fixed.cli("fork", failed, "--at", "4", "--db", "shop.db", "--json", *allowed)
    finally:
        server.terminate()
        server.wait(timeout=10)
        assert server.stdout is not None
        server.stdout.close()
    import json

    # the fixed call runs for real, the live model answers, and asks to send an e-mail:
    # not without leave
    stopped = json.loads(held.stdout)
    assert stopped["status"] == "halted" and stopped["recorded_until"] == 4
    result = json.loads(forked.stdout)
    assert result["forked_from"] == failed and result["fork_seq"] == 4
    assert result["status"] == "completed" and result["recorded_until"] == 4
    # one e-mail in all: the allowed fork's
    assert len(fixed.outbox.read_bytes().splitlines()) == len(outbox.splitlines()) + 1
    with Journal.open(fixed.journal) as journal:
        halt = journal.state(stopped["session_id"]).halt_reason
        events = [item.event for item in journal.events(result["session_id"])]
    assert "send_email" in halt and "--allow-side-effects send_email" in halt
    assert events[0].forked_from == failed and events[0].replay_of is None
    assert [e.type for e in events[1:5]] == [e.type for e in original[1:5]]
    # the prefix is the recording's: served outcomes keep how long the recorded calls took
    recorded = [getattr(e, "duration_ms", None) for e in original[1:5]]
    assert any(duration is not None for duration in recorded)
    assert [getattr(e, "duration_ms", None) for e in events[1:5]] == recorded
    assert events[5].type == "action_committed" and events[5].tool == "check_stock"
    assert [e.type for e in events[6:]] == [
        "action_proposed",
        "action_committed",
        "action_proposed",
        "agent_completed",
    ]


@pytest.mark.parametrize("shop", ["sync"], indirect=True)
def test_a_fixture_shows_a_tool_fix_when_that_tool_runs_live(shop: Shop, tmp_path: Path) -> None:
    fixed = _tool_fixed(shop, tmp_path)
    with Journal.open(fixed.journal) as journal:
        failed = next(s.session_id for s in journal.sessions() if s.status == "failed")
    assert fixed.cli("fixture", failed, "--db", "shop.db").returncode == 0
    pytest_run = (BIN / "pytest", "-q", "-p", "no:cacheprovider", "fixtures")
    recorded = fixed.run(*pytest_run)  # the tools' outcomes come from the recording
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    pyproject = fixed.root / "pyproject.toml"
    pyproject.write_text(
        pyproject.read_text()
        + '\n[tool.pytest.ini_options]\njournal_live_tools = ["check_stock"]\n'
    )
    live = fixed.run(*pytest_run)
    assert live.returncode == 1, live.stdout + live.stderr
    assert "first divergence at seq 5: expected action_failed, got action_committed" in live.stdout
    # the command it prints replays as the plugin did: the same tool live
    assert f"agent-journal replay fixtures/{failed}.jsonl --live-tool check_stock" in live.stdout


def _reworded_with_live_model(shop: Shop, tmp_path: Path) -> Shop:
    """A copy of the shop with another prompt, whose fixtures re-record on the agent's model."""
    project = _fixed(shop, tmp_path, "Look orders up, check stock", "Look orders up first")
    pyproject = project.root / "pyproject.toml"
    pyproject.write_text(
        pyproject.read_text() + '\n[tool.pytest.ini_options]\njournal_live_model = "agent"\n'
    )
    return project


def _update_with_the_model_up(project: Shop) -> subprocess.CompletedProcess[str]:
    server = _server(project.env)
    try:
        return project.run(
            BIN / "pytest", "-q", "-p", "no:cacheprovider", "fixtures", "--journal-update"
        )
    finally:
        server.terminate()
        server.wait(timeout=10)
        assert server.stdout is not None
        server.stdout.close()
        project.env["SHOP_MODEL_URL"] = "http://127.0.0.1:9/v1"


@pytest.mark.parametrize("shop", ["sync"], indirect=True)
def test_journal_update_refuses_a_rerun_that_called_what_the_recording_never_ran(
    shop: Shop, tmp_path: Path
) -> None:
    """The live model asks for an e-mail to the real address, the redacted fixture holds a
    placeholder: the side-effect tool is served nothing, and that stop is not behaviour."""
    project = _reworded_with_live_model(shop, tmp_path)
    session = next(s for s in project.sessions() if _ends_completed(project, s))
    assert project.cli("fixture", session, "--db", "shop.db").returncode == 0
    fixture = project.root / "fixtures" / f"{session}.jsonl"
    before = fixture.read_bytes()
    updated = _update_with_the_model_up(project)
    assert updated.returncode == 1, updated.stdout + updated.stderr
    assert "not rewritten: replay stopped: the code called send_email(" in updated.stdout
    assert "in pytest, journal_allow_side_effects names the tools" in updated.stdout
    assert fixture.read_bytes() == before
    # Allowed in the pytest settings, the e-mail goes out for real and the run is the fixture.
    pyproject = project.root / "pyproject.toml"
    pyproject.write_text(
        pyproject.read_text().replace(
            'journal_live_model = "agent"\n',
            'journal_live_model = "agent"\njournal_allow_side_effects = ["send_email"]\n',
        )
    )
    outbox = project.outbox.read_text() if project.outbox.exists() else ""
    updated = _update_with_the_model_up(project)
    assert updated.returncode == 0, updated.stdout + updated.stderr
    assert fixture.read_bytes() != before
    assert project.outbox.read_text().count("\n") == outbox.count("\n") + 1
    assert "send_email" in fixture.read_text()
    replayed = project.run(BIN / "pytest", "-q", "-p", "no:cacheprovider", "fixtures")
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr  # served, not sent
    assert project.outbox.read_text().count("\n") == outbox.count("\n") + 1


@pytest.mark.parametrize("shop", ["sync"], indirect=True)
def test_journal_update_writes_the_fixture_redacted(shop: Shop, tmp_path: Path) -> None:
    """What the live model said (the customer's address) is redacted as a fixture is, and
    the rewritten fixture replays green with the model down."""
    project = _reworded_with_live_model(shop, tmp_path)
    session = next(s for s in project.sessions() if _ends_completed(project, s))
    wrote = project.cli("fixture", session, "--db", "shop.db", "--no-redact")
    assert wrote.returncode == 0, wrote.stderr
    fixture = project.root / "fixtures" / f"{session}.jsonl"
    assert b"customer@example.com" in fixture.read_bytes()
    updated = _update_with_the_model_up(project)
    assert updated.returncode == 0, updated.stdout + updated.stderr
    assert "updated " in updated.stdout
    assert b"customer@example.com" not in fixture.read_bytes()
    again = project.run(BIN / "pytest", "-q", "-p", "no:cacheprovider", "fixtures")
    assert again.returncode == 0, again.stdout + again.stderr


def _package_project(root: Path, app: str) -> Shop:
    """A project at ``root`` trusting its package ``pkg``, whose ``pkg/app.py`` is ``app``."""
    (root / "pyproject.toml").write_text('[tool.agent-journal]\nagents = ["pkg.*"]\n')
    (root / "pkg").mkdir()
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "app.py").write_text(app)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "AGENT_JOURNAL_TRUST")}
    return Shop(root, env)


def test_an_entry_run_as_a_script_inside_a_package_replays_from_the_project_root(
    tmp_path: Path,
) -> None:
    """``python pkg/app.py`` runs ``pkg.app`` as ``__main__``: the reference names the module
    as the project root imports it (``pkg.app``), not the file's stem (``app``)."""
    project = _package_project(
        tmp_path,
        "from capture import Capture\n"
        "capture = Capture('app.db')\n\n\n"
        "@capture.tool\n"
        "def double(n: int) -> int:\n"
        "    return 2 * n\n\n\n"
        "@capture.entry\n"
        "def run(n: int) -> str:\n"
        "    return str(double(n))\n\n\n"
        "if __name__ == '__main__':\n"
        "    print(run(21))\n",
    )
    ran = project.run(sys.executable, "pkg/app.py")
    assert ran.returncode == 0 and ran.stdout == "42\n", ran.stderr
    (session,) = project.sessions_of("app.db")
    replayed = project.cli("replay", session, "--db", "app.db")
    assert replayed.stdout == (
        f"replay of {session} with pkg.app:run: identical, 3 events: 0 model replies and 1 "
        "tool result served from the recording (double not run: --live-tool double)\n"
    ), replayed.stderr


def test_an_entry_that_is_a_method_is_refused_in_one_line(tmp_path: Path) -> None:
    """A replay cannot rebuild the instance a method ran on: exit 2, never 'diverged'."""
    project = _package_project(
        tmp_path,
        "from capture import Capture\n"
        "capture = Capture('app.db')\n\n\n"
        "class Bot:\n"
        "    @capture.entry\n"
        "    def run(self, n: int) -> str:\n"
        "        return str(2 * n)\n\n\n"
        "if __name__ == '__main__':\n"
        "    print(Bot().run(21))\n",
    )
    ran = project.run(sys.executable, "-m", "pkg.app")
    assert ran.returncode == 0 and ran.stdout == "42\n", ran.stderr
    (session,) = project.sessions_of("app.db")
    replayed = project.cli("replay", session, "--db", "app.db")
    assert replayed.returncode == 2, replayed.stdout
    assert replayed.stderr == (
        "agent-journal: entry pkg.app:Bot.run is a method: a replay cannot rebuild the "
        "instance it ran on; capture a module-level function that builds it and calls the "
        "method\n"
    )
