"""The shared page and serve in a real browser: Debian's Chromium driven by Playwright.

No browser is downloaded: Playwright launches /usr/bin/chromium. Without it these tests
fail with the line that installs it (never a skip).
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from journal import ActionCommitted, ActionProposed, Journal, SessionStarted, ToolCall
from replay import Timeline

CHROMIUM = "/usr/bin/chromium"
INSTALL = "apt-get install -y chromium chromium-driver"
AJ = [sys.executable, "-c", "from tui.console import main; main()"]
HOSTILE = '</script><script>window.pwned=1</script><img src=x onerror="window.pwned=2">'


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"no browser at {CHROMIUM}: install it with `{INSTALL}`")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        found = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield found
        found.close()


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("share") / "demo.db"
    # in a process of its own: Playwright's sync API holds an event loop in this thread
    subprocess.run([*AJ, "demo", "--db", str(path), "--no-tui"], check=True, capture_output=True)
    with Journal.open(path) as journal:
        journal.append(
            "hostile",
            [
                SessionStarted(agent=None),
                ActionProposed(calls=[ToolCall(call_id="c1", tool="t", args={"q": HOSTILE})]),
                ActionCommitted(call_id="c1", tool="t", args={"q": HOSTILE}, result=HOSTILE),
            ],
        )
    return path


def share(db: Path, out: Path, *args: str) -> Path:
    found = subprocess.run(
        [*AJ, "share", *args, "--db", str(db), "-o", str(out)], capture_output=True, text=True
    )
    assert found.returncode == 0, found.stderr
    return out


def open_page(browser: Any, path: Path) -> tuple[Any, list[str], list[str]]:
    page = browser.new_page(viewport={"width": 1300, "height": 800})
    errors: list[str] = []
    requests: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: requests.append(r.url))
    page.goto(path.as_uri())
    page.wait_for_selector("html[data-ready='1']")
    return page, errors, requests


def test_the_page_loads_offline_and_keys_and_clicks_move(
    browser: Any, demo_db: Path, tmp_path: Path
) -> None:
    out = share(demo_db, tmp_path / "p.html", "demo-ticket-poller-s0")
    page, errors, requests = open_page(browser, out)
    assert requests == [out.as_uri()]
    assert page.evaluate("agentJournal.selected()") == 0
    page.keyboard.press("j")
    page.keyboard.press("j")
    assert page.evaluate("agentJournal.selected()") == 2
    assert "seq 2" in page.inner_text("#detail h2")
    page.keyboard.press("G")
    last = page.evaluate("agentJournal.selected()")
    assert "agent_halted" in page.inner_text("#detail")
    assert "halted by repeat" in page.inner_text("#head")
    page.click(".row[data-index='1']")
    assert page.evaluate("agentJournal.selected()") == 1
    assert "user_input" in page.inner_text("#detail h2")
    page.keyboard.press("e")
    assert page.evaluate("agentJournal.selected()") > 1
    with Journal.open(demo_db) as journal:
        timeline = Timeline(journal, "demo-ticket-poller-s0")
        expected = [timeline.state_at(seq).model_dump(mode="json") for seq in range(last + 1)]
    shown = page.evaluate(f"[...Array({last + 1}).keys()].map((s) => agentJournal.stateAt(0, s))")
    assert shown == expected
    assert errors == []


def test_a_diff_page_shows_the_divergence(browser: Any, demo_db: Path, tmp_path: Path) -> None:
    out = share(
        demo_db,
        tmp_path / "d.html",
        "demo-refund-buggy-s0",
        "--replay",
        "--agent",
        "agentloop.examples.refund:build_fixed",
    )
    page, errors, _ = open_page(browser, out)
    assert page.evaluate("agentJournal.view()") == "diff"
    assert "diverged at seq 5" in page.inner_text("#verdict")
    row = page.locator(".row.sel")
    assert row.is_visible()
    assert "verification_failed" in row.inner_text()
    page.keyboard.press("]")
    assert page.evaluate("agentJournal.selected()") > 5
    assert errors == []


def test_a_diff_page_of_two_files_needs_no_journal(
    browser: Any, demo_db: Path, tmp_path: Path
) -> None:
    exported = []
    for session in ("demo-refund-buggy-s0", "demo-refund-fixed-s0"):
        path = tmp_path / f"{session}.jsonl"
        done = subprocess.run(
            [*AJ, "export", session, "--db", str(demo_db), "-o", str(path)],
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
        exported.append(path)
    out = share(
        tmp_path / "absent.db", tmp_path / "f.html", str(exported[0]), "--diff", str(exported[1])
    )
    assert not (tmp_path / "absent.db").exists()  # two files: no journal opened or made
    page, errors, requests = open_page(browser, out)
    assert page.evaluate("agentJournal.view()") == "diff"
    verdict = page.inner_text("#verdict")
    assert verdict.startswith(f"diff with {exported[1]}: ") and verdict.endswith(" rows differ")
    assert requests == [out.as_uri()]
    assert errors == []


def test_a_hostile_payload_stays_text(browser: Any, demo_db: Path, tmp_path: Path) -> None:
    out = share(demo_db, tmp_path / "h.html", "hostile")
    page, errors, requests = open_page(browser, out)
    page.keyboard.press("G")
    assert page.evaluate("window.pwned") is None
    assert page.locator("#detail img").count() == 0
    assert "</script><script>window.pwned=1</script>" in page.inner_text("#detail")
    assert requests == [out.as_uri()]
    assert errors == []


def test_redacted_by_default(demo_db: Path, tmp_path: Path) -> None:
    redacted = share(demo_db, tmp_path / "r.html", "demo-refund-buggy-s0").read_text()
    assert "jane.doe@gmail.com" not in redacted
    assert "4111 1111 1111 1111" not in redacted
    plain = share(demo_db, tmp_path / "n.html", "demo-refund-buggy-s0", "--no-redact")
    assert "jane.doe@gmail.com" in plain.read_text()


def test_bad_input_is_one_line(demo_db: Path, tmp_path: Path) -> None:
    out = tmp_path / "x.html"
    result = subprocess.run(
        [*AJ, "share", "nope", "--db", str(demo_db), "-o", str(out)], capture_output=True, text=True
    )
    assert result.returncode == 2
    assert len(result.stderr.splitlines()) == 1 and "nope" in result.stderr
    assert not out.exists()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_serve_runs_the_app_read_only_unless_writable(tmp_path: Path) -> None:
    from tui.serve import served_command

    db = str(tmp_path / "j.db")
    read_only = served_command(db, session="s1", writable=False)
    writable = served_command(db, session="s1", writable=True)
    assert read_only.endswith(f"-m tui.served --db {db} --session s1")
    assert writable == read_only + " --writable"


def test_serve_renders_the_app_in_the_browser(browser: Any, demo_db: Path) -> None:
    port = _free_port()
    server = subprocess.Popen(
        [*AJ, "serve", "--db", str(demo_db), "--listen", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        page = browser.new_page(viewport={"width": 1200, "height": 700})
        requests: list[str] = []
        frames: list[str] = []
        page.on("request", lambda r: requests.append(r.url))

        def on_socket(ws: Any) -> None:
            ws.on("framereceived", lambda f: frames.append(f if isinstance(f, str) else repr(f)))

        page.on("websocket", on_socket)
        page.goto(f"http://127.0.0.1:{port}/")
        page.wait_for_selector("body.-first-byte", timeout=30_000)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not any("demo-refund" in f for f in frames):
            page.wait_for_timeout(200)
        assert any("demo-refund" in f for f in frames)
        assert all(url.startswith(f"http://127.0.0.1:{port}/") for url in requests), requests
    finally:
        server.terminate()
        try:
            server.wait(timeout=5)
        except subprocess.TimeoutExpired:  # an app process of a connection still closing
            server.kill()
            server.wait(timeout=5)
