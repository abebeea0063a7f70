"""Streams as code reads them: a chat stream read up to its ``finish_reason`` and left there
(no close, the usage chunk unread) is journaled whole, sync and async, and replays identical;
concurrent model calls answered out of order replay in the recorded order.

The model is `tests/fake_openai.py`'s policy (its streams end with a usage chunk after the
``finish_reason``), served from a thread on 127.0.0.1 and stopped before the replay.
"""

from __future__ import annotations

import asyncio
from typing import Any

import openai
import pytest

from journal import ActionProposed, Journal
from replay import replay_entry

from . import capture_app
from .fake_openai import Delaying, serving


def run(entry: Any, url: str, *args: str) -> Any:
    if not asyncio.iscoroutinefunction(entry):
        return entry(*args)

    async def main() -> Any:
        raw = openai.AsyncOpenAI(base_url=url, api_key="local", max_retries=0)
        capture_app.aclient = capture_app.capture.openai(raw)
        try:
            return await entry(*args)
        finally:
            await raw.close()

    return asyncio.run(main())


@pytest.mark.parametrize("name", ["until_finished", "until_finished_async"])
def test_a_stream_read_up_to_its_finish_reason_is_journaled_whole(
    journal: Journal, name: str
) -> None:
    entry = getattr(capture_app, name)
    with serving() as url:
        raw = openai.OpenAI(base_url=url, api_key="local", max_retries=0)
        capture_app.bind(journal, raw)
        answer = run(entry, url, "Is order 101 in stock? I want a unit.")
        raw.close()
    assert answer.startswith("Sorry, I could not help with order 101")
    (summary,) = journal.sessions()
    proposed = [
        i.event for i in journal.events(summary.session_id) if isinstance(i.event, ActionProposed)
    ]
    assert [[c.tool for c in p.calls] for p in proposed] == [["lookup_order"], ["check_stock"], []]
    # the usage chunk after the finish_reason was read for the journal, not by the code
    assert [p.usage.input_tokens for p in proposed] == [10, 30, 50]
    assert proposed[-1].text == answer

    result = replay_entry(journal, summary.session_id, entry)
    assert result.identical, result.first_divergence


def test_a_stream_left_unread_is_journaled_at_the_next_model_call(journal: Journal) -> None:
    with serving() as url:
        raw = openai.OpenAI(base_url=url, api_key="local", max_retries=0)
        capture_app.bind(journal, raw)
        assert capture_app.abandoned("order 7") == "lookup_order"
        raw.close()
    (summary,) = journal.sessions()
    proposed = [
        i.event for i in journal.events(summary.session_id) if isinstance(i.event, ActionProposed)
    ]
    assert len(proposed) == 2
    assert proposed[0].response is not None and len(proposed[0].response) == 1  # what was read
    assert [c.tool for c in proposed[1].calls] == ["lookup_order"]
    assert replay_entry(journal, summary.session_id, capture_app.abandoned).identical


def test_concurrent_model_calls_answered_out_of_order_replay_identical(journal: Journal) -> None:
    with serving(Delaying) as url:
        capture_app.bind(journal, openai.OpenAI(base_url=url, api_key="local"))
        answers = run(capture_app.fanned, url, "order 1", "order 2")
    assert answers == ['{"order_id": "1"}', '{"order_id": "2"}']
    (summary,) = journal.sessions()
    events = [i.event for i in journal.events(summary.session_id)]
    # asked 1 then 2; 2 was answered first, and is journaled first
    assert [e.type for e in events[1:5]] == ["user_input"] * 2 + ["action_proposed"] * 2
    assert [e.calls[0].args for e in events[3:5]] == [{"order_id": "2"}, {"order_id": "1"}]  # type: ignore[union-attr]

    result = replay_entry(journal, summary.session_id, capture_app.fanned)
    assert result.identical, result.first_divergence
