"""Grouped durability: the caller's thread queues, a background writer commits in groups.

What a user relies on, each checked from a second connection to the same SQLite file (so
"written" means committed, not cached): a tool declared with side effects runs only once
the events leading to it are durable; a session is whole in the journal once its entry
returns; queued events are written within the window with no barrier at all; a clean exit
writes what is queued; a write the journal refuses goes to the spool, said in a log line;
``durability="each"`` and failing closed commit every event before the call goes on. The
SIGKILL drill kills a capturing process at random and finds every side effect's call.
"""

from __future__ import annotations

import json
import logging
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from capture import Capture, Recorder
from capture.output import Destination
from capture.spool import Spool
from journal import Journal
from replay import replay_entry

from .fake_openai import serving

openai = pytest.importorskip("openai")

REPO = Path(__file__).resolve().parents[1]
TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
    for name in ("lookup_order", "check_stock", "send_email")
]


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with serving() as found:
        yield found


def types_seen(db: Path) -> list[str]:
    """Every committed event's type, read on a connection of its own."""
    with Journal.open(db) as other:
        return [item.event.type for s in other.sessions() for item in other.events(s.session_id)]


class App:
    """A support loop: an I/O lookup (served in a replay), a stock check, an e-mail sent."""

    def __init__(self, db: Path, url: str, **options: Any) -> None:
        self.db = db
        self.capture = Capture(db, spool=db.with_suffix(".spool"), **options)
        self.client = self.capture.openai(openai.OpenAI(base_url=url, api_key="k", max_retries=0))
        self.seen: dict[str, list[str]] = {}
        capture = self.capture

        @capture.tool
        def lookup_order(order_id: str) -> dict[str, Any]:
            self.seen["lookup_order"] = types_seen(db)
            return {"order_id": order_id, "sku": "SKU-1"}

        @capture.tool(pure=True)
        def check_stock(sku: str, quantity: int) -> dict[str, Any]:
            return {"sku": sku, "units": 5, "quantity": quantity}

        @capture.tool(side_effects=True)
        def send_email(to: str, body: str) -> str:
            self.seen["send_email"] = types_seen(db)
            return "sent"

        tools = {"lookup_order": lookup_order, "check_stock": check_stock}
        tools["send_email"] = send_email

        @capture.entry(name="tests.test_capture_grouped:answer")
        def answer(question: str) -> str:
            messages: list[Any] = [{"role": "user", "content": question}]
            while True:
                reply = self.client.chat.completions.create(
                    model="fake-1", messages=messages, tools=TOOLS
                )
                message = reply.choices[0].message
                if not message.tool_calls:
                    return str(message.content)
                messages.append(message.model_dump(exclude_none=True))
                for call in message.tool_calls:
                    result = tools[call.function.name](**json.loads(call.function.arguments))
                    messages.append(
                        {"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)}
                    )

        self.answer = answer


def test_a_side_effect_runs_only_once_its_call_is_durable_and_others_wait_for_company(
    tmp_path: Path, url: str
) -> None:
    app = App(tmp_path / "j.db", url, window=60.0)  # no write without a barrier
    assert app.capture.destination.durability == "grouped"
    assert app.answer("Is order 7 in stock?").startswith("Order 7 is in stock")
    # an I/O tool (served in a replay) needs no barrier: nothing was committed yet
    assert app.seen["lookup_order"] == []
    # before the e-mail went out, the session up to its proposal was committed
    before_email = app.seen["send_email"]
    assert before_email[0] == "session_started"
    assert before_email[-1] == "action_proposed"
    assert before_email.count("action_proposed") == 3
    # the entry returned: the session is whole, chained, and replays identical
    assert types_seen(app.db)[-1] == "agent_completed"
    with Journal.open(app.db) as journal:
        assert journal.verify().ok
        (summary,) = journal.sessions()
        result = replay_entry(journal, summary.session_id, app.answer)
    assert result.identical, result.first_divergence


def test_each_event_is_committed_before_the_call_goes_on(tmp_path: Path, url: str) -> None:
    app = App(tmp_path / "j.db", url, durability="each")
    assert app.capture.destination.durability == "each"
    app.answer("Is order 8 in stock?")
    assert app.seen["lookup_order"] == ["session_started", "user_input", "action_proposed"]


def test_failing_closed_is_always_synchronous(tmp_path: Path) -> None:
    destination = Destination(tmp_path / "j.db", fail_open=False, durability="grouped")
    assert destination.durability == "each"
    assert destination.writer is None
    with pytest.raises(ValueError, match="durability is 'each' or 'grouped'"):
        Destination(tmp_path / "j.db", durability="later")  # type: ignore[arg-type]


def test_queued_events_are_written_within_the_window_with_no_barrier(tmp_path: Path) -> None:
    db = tmp_path / "j.db"
    recorder = Recorder(Destination(db, durability="grouped", window=0.05))
    recorder.start(agent="a", model="m")
    recorder.user_input("hello")
    deadline = time.monotonic() + 30  # far past the window: a loaded machine is slow
    while types_seen(db) != ["session_started", "user_input"] and time.monotonic() < deadline:
        time.sleep(0.02)
    assert types_seen(db) == ["session_started", "user_input"]
    recorder.close()


def test_a_clean_exit_writes_what_is_queued(tmp_path: Path) -> None:
    db = tmp_path / "j.db"
    script = f"""
        import sys
        sys.path.insert(0, {str(REPO)!r})
        from capture import Recorder
        from capture.output import Destination
        recorder = Recorder(Destination({str(db)!r}, durability="grouped", window=600))
        recorder.start(agent="a", model="m")
        recorder.user_input("never closed")
    """
    subprocess.run([sys.executable, "-c", textwrap.dedent(script)], check=True, timeout=120)
    assert types_seen(db) == ["session_started", "user_input"]


def test_a_refused_grouped_write_goes_to_the_spool_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    spool = tmp_path / "j.spool"
    journal = Journal.open(tmp_path / "j.db", max_event_bytes=4096)
    recorder = Recorder(Destination(journal, durability="grouped", spool=spool, window=60))
    recorder.start(agent="a", model="m")
    recorder.user_input("x" * 10_000)  # over the journal's limit: it refuses the append
    with caplog.at_level(logging.WARNING, logger="capture"):
        recorder.close()
    assert types_seen(tmp_path / "j.db") == []
    assert Spool.at(spool).pending() == {recorder.session_id: 2}
    assert any(recorder.session_id in message for message in caplog.messages)


DRILL = """
import json, os, sys
sys.path.insert(0, os.environ["REPO"])
sys.path.insert(0, os.path.dirname(os.environ["REPO"]))
from tests.test_capture_grouped import App
app = App(__import__("pathlib").Path(sys.argv[1]), sys.argv[2], window=0.2)
sent = open(sys.argv[3], "a")
import capture.session as session_module
real = session_module.CapturedSession._before_running
def after_barrier(self, info):
    real(self, info)
    if info.side_effects:
        sent.write(self.recorder.session_id + "\\n"); sent.flush(); os.fsync(sent.fileno())
session_module.CapturedSession._before_running = after_barrier  # the side effect: a line
for i in range(10_000):
    app.answer(f"Is order {i} in stock?")
"""


@pytest.mark.parametrize(
    "kills", [pytest.param(4, id="bounded"), pytest.param(30, id="full", marks=pytest.mark.slow)]
)
def test_sigkill_never_loses_the_call_of_a_side_effect_that_ran(
    tmp_path: Path, url: str, kills: int
) -> None:
    rng = random.Random(46)
    db, sent = tmp_path / "j.db", tmp_path / "sent.txt"
    sent.touch()
    for _ in range(kills):
        child = subprocess.Popen(
            [sys.executable, "-c", DRILL, str(db), url, str(sent)],
            env={**os.environ, "REPO": str(REPO)},
        )
        lines = len(sent.read_text().splitlines())
        deadline = time.monotonic() + 120
        while len(sent.read_text().splitlines()) < lines + 2 and time.monotonic() < deadline:
            assert child.poll() is None, "the drill's child died on its own"
            time.sleep(0.01)
        time.sleep(rng.uniform(0, 0.3))
        child.send_signal(signal.SIGKILL)
        child.wait()
    with Journal.open(db) as journal:
        assert journal.verify().ok
        emails = {
            s.session_id
            for s in journal.sessions()
            if sum(i.event.type == "action_proposed" for i in journal.events(s.session_id)) >= 3
        }
    ran = set(sent.read_text().splitlines())
    assert len(ran) >= 2 * kills
    assert ran <= emails, f"side effects whose call is not in the journal: {ran - emails}"
