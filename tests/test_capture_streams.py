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

from capture import JournaledOpenAI
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


def captured(journal: Journal, entry: Any, question: str) -> tuple[Any, str, list[Any]]:
    """Run a sync entry against the fake model: its answer, session and model outputs."""
    with serving() as url:
        raw = openai.OpenAI(base_url=url, api_key="local", max_retries=0)
        capture_app.bind(journal, raw)
        answer = entry(question)
        raw.close()
    (summary,) = journal.sessions()
    events = [item.event for item in journal.events(summary.session_id)]
    return answer, summary.session_id, [e for e in events if isinstance(e, ActionProposed)]


def test_a_stream_left_unread_is_journaled_at_the_next_model_call(journal: Journal) -> None:
    answer, session, proposed = captured(journal, capture_app.abandoned, "order 7")
    assert answer == "lookup_order"
    assert len(proposed) == 2
    assert proposed[0].response is not None and len(proposed[0].response) == 1  # what was read
    assert [c.tool for c in proposed[1].calls] == ["lookup_order"]
    assert replay_entry(journal, session, capture_app.abandoned).identical


def test_a_stream_left_unclosed_by_the_last_model_call_is_journaled_at_the_end(
    journal: Journal,
) -> None:
    answer, session, (proposed,) = captured(journal, capture_app.abandoned_last, "order 7")
    assert answer == "assistant"
    types = [i.type for i in journal.events(session)]
    assert types == ["session_started", "user_input", "action_proposed", "agent_completed"]
    assert proposed.response is not None and len(proposed.response) == 1  # what was read
    assert replay_entry(journal, session, capture_app.abandoned_last).identical


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


async def journaled_loop(client: JournaledOpenAI, *, stream: bool, is_async: bool) -> str:
    """A hand-written loop on a `JournaledOpenAI`, streamed or not, sync or async."""
    messages: list[Any] = [{"role": "user", "content": "Is order 100 in stock? I want a unit."}]
    while True:
        reply = client.chat.completions.create(model="fake-1", messages=messages, stream=stream)
        if is_async:
            reply = await reply
        calls: dict[int, dict[str, str]] = {}
        if stream:
            chunks = [chunk async for chunk in reply] if is_async else list(reply)
            text = capture_app._gathered(chunks, calls)
        else:
            message = reply.choices[0].message
            text = message.content or ""
            for index, call in enumerate(message.tool_calls or []):
                calls[index] = {
                    "id": call.id,
                    "name": call.function.name,
                    "arguments": call.function.arguments,
                }
        if not calls:
            return text
        capture_app._answered(messages, calls)


def test_journaled_openai_takes_an_async_client_and_streams(journal: Journal) -> None:
    """Once `stream=True` raised and an async client failed with a TypeError."""
    shapes = [(False, False), (True, False), (False, True), (True, True)]
    with serving() as url:
        for stream, is_async in shapes:
            raw: Any = (openai.AsyncOpenAI if is_async else openai.OpenAI)(
                base_url=url, api_key="local", max_retries=0
            )
            client = JournaledOpenAI(raw, journal, f"jo-{stream}-{is_async}")
            answer = asyncio.run(journaled_loop(client, stream=stream, is_async=is_async))
            assert answer.startswith("Sorry, I could not help with order 100")
            if is_async:
                asyncio.run(raw.close())
            else:
                raw.close()

    def journaled(session: str) -> list[tuple[str, object]]:
        return [
            (i.event.type, [c.tool for c in i.event.calls])
            if isinstance(i.event, ActionProposed)
            else (i.event.type, None)
            for i in journal.events(session)
        ]

    plain = journaled("jo-False-False")
    assert [kind for kind, _ in plain].count("action_proposed") == 3
    for stream, is_async in shapes[1:]:
        assert journaled(f"jo-{stream}-{is_async}") == plain, (stream, is_async)
