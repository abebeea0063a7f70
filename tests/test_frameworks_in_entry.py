"""A pydantic-ai or Agents SDK run inside an entry replays through the calling code.

Captured at the model's client and the tools (`tests.framework_entry_app`), the replay runs
the user's entry: a trimmed ``message_history``, per-run ``model_settings=`` and
``instructions=`` replay identical when unchanged, and a change to them diverges where it
shows. The model server is stopped for every replay.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from journal import Journal
from replay import replay_entry

from . import framework_entry_app as app
from .fake_openai import serving

QUESTION = "Where is order 5?"


@pytest.fixture(autouse=True)
def _clean() -> Iterator[None]:
    app.CHANGE.clear()
    app.OUTBOX.clear()
    yield
    app.CHANGE.clear()


def record(entry: object) -> tuple[Journal, str]:
    journal = Journal.open(":memory:")
    with serving() as url:
        app.bind(journal, url)
        asyncio.run(entry(QUESTION))  # type: ignore[operator]
    (summary,) = journal.sessions()
    return journal, summary.session_id


def test_pydantic_ai_calling_code_replays_identical_then_diverges_where_it_changed() -> None:
    journal, session = record(app.answer)
    sent = len(app.OUTBOX)
    same = replay_entry(journal, session, app.answer)
    assert same.identical, same.first_divergence
    assert len(app.OUTBOX) == sent  # the side-effect tool never ran
    assert same.served.ran == ("check_stock",)
    for change, field in (("trim", "messages[2].content"), ("instructions", "messages[1]")):
        app.CHANGE.clear()
        app.CHANGE.add(change)
        changed = replay_entry(journal, session, app.answer)
        divergence = changed.first_divergence
        assert divergence is not None and divergence.seq == 10, change  # the second run's call
        assert "the request at seq 10 differs from the recorded one: " + field in (
            divergence.reason
        ), divergence.reason


def test_a_fix_in_a_pure_tool_of_an_agent_shows_with_no_flag() -> None:
    journal, session = record(app.answer)
    app.CHANGE.add("stock")
    changed = replay_entry(journal, session, app.answer)
    assert changed.first_divergence is not None
    assert changed.first_divergence.reason == "action_committed differs in result"


def test_agents_sdk_calling_code_replays_identical_and_a_setting_is_a_configuration() -> None:
    journal, session = record(app.answer_sdk)
    same = replay_entry(journal, session, app.answer_sdk)
    assert same.identical, same.first_divergence
    assert not app.OUTBOX[1:]  # sent once, in the recording only
    app.CHANGE.add("temperature")
    changed = replay_entry(journal, session, app.answer_sdk)
    assert [change.path for change in changed.config_changes] == ["model_settings.temperature"]
