"""Failed model calls are facts: journaled, raised again by a replay from the same call.

The support desk (`tests.support_app`) runs against a local OpenAI-compatible server that
answers 429 and 500 on demand and breaks a stream after N chunks (`Faulty`); every replay
runs with the server stopped. Unchanged code replays identical, the caught 500 and the
retried 429 included; removing the retry, retrying less, another fallback text and a fix in
the pure tool each diverge at the seq they change, with a reason that names it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import openai
import pytest

from journal import Journal, ModelCallFailed
from replay import ReplayOptions, ReplayResult, replay_entry, write_fixture

from . import support_app as app
from .fake_openai import Faulty, serving

QUESTION = "Where is order 5?"


@pytest.fixture(autouse=True)
def _clean() -> Iterator[None]:
    app.CHANGES.clear()
    app.OUTBOX.clear()
    Faulty.faults = []
    Faulty.requests = []
    yield
    app.CHANGES.clear()


@contextmanager
def recorded(*faults: str | None) -> Iterator[Journal]:
    """A journal of the app's sessions against a server with ``faults`` queued; the server
    is stopped when the block's body runs the replays."""
    journal = Journal.open(":memory:")
    with serving(Faulty) as url:
        Faulty.faults = list(faults)
        app.bind(journal, url)
        yield journal


def session_of(journal: Journal) -> str:
    (summary,) = [s for s in journal.sessions() if s.replay_of is None]
    return summary.session_id


def types(journal: Journal, session: str) -> list[str]:
    return [item.event.type for item in journal.events(session)]


def replayed(
    journal: Journal, session: str, entry: object = None, **options: object
) -> ReplayResult:
    return replay_entry(journal, session, entry or app.answer, ReplayOptions(**options))  # type: ignore[arg-type]


def record(*faults: str | None, question: str = QUESTION) -> tuple[Journal, str, str]:
    """Run ``answer`` once against ``faults``; the journal, the session and the answer."""
    with recorded(*faults) as journal:
        answered = app.answer(question)
    return journal, session_of(journal), answered


FULL_RUN = [
    "session_started",
    "user_input",
    "action_proposed",  # the triage (no tools)
    "user_input",  # the loop's own conversation
    "action_proposed",  # lookup_order
    "action_committed",
    "action_proposed",  # check_stock
    "action_committed",
    "action_proposed",  # send_email
    "action_committed",
    "action_proposed",  # the answer
    "agent_completed",
]


def test_a_retried_429_is_journaled_and_replays_identical_with_the_server_down() -> None:
    journal, session, answered = record(None, "429")
    assert answered.startswith("Order 5")
    assert types(journal, session) == [*FULL_RUN[:4], "model_call_failed", *FULL_RUN[4:]]
    failed = list(journal.events(session))[4].event
    assert isinstance(failed, ModelCallFailed)
    assert (failed.status_code, failed.kind) == (429, "infrastructure")
    assert failed.error is not None and failed.error["type"] == "openai:RateLimitError"
    assert failed.request is not None and failed.request["params"]["tools"] == app.TOOLS
    summary = journal.summary(session)
    assert summary is not None and summary.failures == 0  # a failed model call is no tool's
    assert journal.state(session).model_failures == 1
    sent = len(app.OUTBOX)
    result = replayed(journal, session)
    assert result.identical, result.first_divergence
    assert app.OUTBOX.__len__() == sent  # the side-effect tool never ran
    served = result.served
    assert (served.model_replies, served.failed_calls, served.tool_results) == (5, 1, 2)
    assert served.not_run == ("lookup_order", "send_email") and served.ran == ("check_stock",)
    assert result.summary == (
        "identical (13 events: 5 model replies and 2 tool results served from the recording "
        "(lookup_order and send_email not run: --live-tool NAME runs one); 1 failed model call "
        "raised again; check_stock ran for real and compared)"
    )


def test_removing_the_retry_diverges_where_the_recording_called_again() -> None:
    journal, session, _ = record(None, "429")
    app.CHANGES.add("no-retry")
    result = replayed(journal, session)
    divergence = result.first_divergence
    assert divergence is not None and divergence.seq == 5
    assert divergence.reason == (
        "the recording called the model again after RateLimitError (429); the code now "
        "answers (agent_completed)"
    )


def test_retrying_less_diverges_at_the_call_it_no_longer_makes() -> None:
    journal, session, _ = record(None, "429", "429")
    assert types(journal, session)[4:7] == [
        "model_call_failed",
        "model_call_failed",
        "action_proposed",
    ]
    assert replayed(journal, session).identical
    app.CHANGES.add("two-tries")
    divergence = replayed(journal, session).first_divergence
    assert divergence is not None and divergence.seq == 6
    assert divergence.reason.startswith(
        "the recording called the model again after RateLimitError (429)"
    )


def test_retrying_more_diverges_where_the_recording_gave_up() -> None:
    journal, session, answered = record(None, "429", "429", "429")
    assert answered == app.fallback()
    assert types(journal, session)[4:] == ["model_call_failed"] * 3 + ["agent_completed"]
    assert replayed(journal, session).identical
    app.CHANGES.add("two-tries")  # gives up sooner: one failure fewer, then the fallback
    sooner = replayed(journal, session).first_divergence
    assert sooner is not None and sooner.seq == 6
    assert sooner.reason == (
        "the recording called the model again after RateLimitError (429); the code now "
        "answers (agent_completed)"
    )


def test_retrying_more_calls_the_model_where_the_recording_gave_up() -> None:
    app.CHANGES.add("two-tries")  # recorded with two tries: it gave up
    with recorded(None, "429", "429") as journal:
        app.answer(QUESTION)
    session = session_of(journal)
    assert types(journal, session)[4:] == ["model_call_failed"] * 2 + ["agent_completed"]
    app.CHANGES.clear()  # three tries now: it asks again where the recording answered
    more = replayed(journal, session).first_divergence
    assert more is not None and more.seq == 6
    assert more.reason.startswith(
        "the recording went on without the model after RateLimitError (429) (it wrote "
        "agent_completed); the code now calls it again: replay stopped at seq 6"
    )


def test_a_caught_500_with_a_fallback_replays_identical_and_a_new_fallback_diverges() -> None:
    journal, session, answered = record(None, "500")
    assert answered == app.fallback()
    assert types(journal, session) == [*FULL_RUN[:4], "model_call_failed", "agent_completed"]
    failed = list(journal.events(session))[4].event
    assert isinstance(failed, ModelCallFailed) and failed.status_code == 500
    result = replayed(journal, session)
    assert result.identical, result.first_divergence
    assert result.served.failed_calls == 1
    app.CHANGES.add("fallback")
    changed = replayed(journal, session).first_divergence
    assert changed is not None and changed.seq == 5
    assert changed.reason == "agent_completed differs in answer"


def test_a_fix_in_the_pure_tool_diverges_at_its_result_with_no_flag() -> None:
    journal, session, _ = record(None, None)
    app.CHANGES.add("stock")
    divergence = replayed(journal, session).first_divergence
    assert divergence is not None and divergence.seq == 7
    assert divergence.reason == "action_committed differs in result.in_stock"


def test_a_fix_in_the_io_tool_shows_only_when_it_runs_live() -> None:
    journal, session, _ = record(None, None)
    app.CHANGES.add("lookup")
    served = replayed(journal, session)
    assert served.identical and "lookup_order" in served.served.not_run
    live = replayed(journal, session, live_tools=["lookup_order"])
    assert live.first_divergence is not None and live.first_divergence.seq == 5
    assert "lookup_order" in live.served.ran


def test_a_stream_that_breaks_is_journaled_with_its_chunks_and_replays_them() -> None:
    with recorded("break:2") as journal:
        answered = asyncio.run(app.answer_streamed(QUESTION))
    assert answered == app.fallback()
    session = session_of(journal)
    assert types(journal, session) == [
        "session_started",
        "user_input",
        "model_call_failed",
        "agent_completed",
    ]
    failed = list(journal.events(session))[2].event
    assert isinstance(failed, ModelCallFailed) and isinstance(failed.response, list)
    assert len(failed.response) == 2 and failed.error is not None
    assert failed.error["type"] == "openai:APIError"
    result = replayed(journal, session, app.answer_streamed)
    assert result.identical, result.first_divergence
    app.CHANGES.add("fallback")
    assert replayed(journal, session, app.answer_streamed).first_divergence is not None


def test_a_failure_that_ends_the_session_is_journaled_before_the_halt() -> None:
    """The code does not catch it: the failed call, then the halt; the replay raises it
    again from the call, and the entry fails the same way."""
    with recorded("500") as journal, pytest.raises(Exception, match="fault 500"):
        app.first_reply(QUESTION)
    session = session_of(journal)
    assert types(journal, session) == [
        "session_started",
        "user_input",
        "model_call_failed",
        "agent_halted",
    ]
    assert journal.state(session).status == "failed"
    result = replayed(journal, session, app.first_reply)
    assert result.identical, result.first_divergence
    assert result.served.failed_calls == 1


def test_an_old_recording_keeps_its_verdict() -> None:
    """A session recorded before failed calls were journaled (session_started v2): its
    replay journals none, raises the failure from the halt as it did, compares no client
    settings, and is identical."""
    with recorded("500") as journal, pytest.raises(Exception, match="fault 500"):
        app.first_reply(QUESTION)
    session = session_of(journal)
    old = Journal.open(":memory:")
    rows = []
    for item in journal.events(session):
        if isinstance(item.event, ModelCallFailed):
            continue  # what the old capture wrote: no failed call, the halt right after
        rows.append(item)
    from .replay_helpers import copy_as_version_2

    copy_as_version_2(rows, old, session)
    assert [i.event.type for i in old.events(session)] == [
        "session_started",
        "user_input",
        "agent_halted",
    ]
    assert list(old.events(session))[0].v == 2
    result = replayed(old, session, app.first_reply)
    assert result.identical, result.first_divergence


ROOT = Path(__file__).resolve().parent.parent


def test_the_triage_first_fixture_is_green_then_red_at_the_fixed_tool(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its first request declares no tools (the triage); ``journal_live_tools`` still
    names a tool it called, so a fix inside it turns the fixture red at its result."""
    journal, session, _ = record(None, None)
    (pytester.path / "fixtures").mkdir()
    write_fixture(journal, session, pytester.path / "fixtures" / "support.jsonl")
    pytester.makefile(
        ".toml",
        pyproject=(
            "[tool.agent-journal]\n"
            'agents = ["tests.support_app"]\n'
            f"pythonpath = [{str(ROOT)!r}]\n"
            "[tool.pytest.ini_options]\n"
            'journal_live_tools = ["lookup_order"]\n'
        ),
    )
    monkeypatch.setenv("PYTEST_ADDOPTS", "-p no:textual-snapshot -p no:cacheprovider")
    monkeypatch.delenv("SUPPORT_CHANGES", raising=False)
    green = pytester.runpytest_subprocess()
    green.assert_outcomes(passed=1)
    green.stdout.fnmatch_lines(["*lookup_order ran for real and compared*"])
    monkeypatch.setenv("SUPPORT_CHANGES", "lookup")
    red = pytester.runpytest_subprocess()
    red.assert_outcomes(failed=1)
    red.stdout.fnmatch_lines(
        [
            "*support.jsonl* no longer replays identically",
            "first divergence at seq 5: action_committed differs in result.sku",
        ]
    )


def test_a_tool_under_a_name_the_model_never_uses_is_named_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from capture import session as captured

    captured._WARNED.discard("find_order")
    with recorded() as journal, caplog.at_level("WARNING", logger="capture"):
        asyncio.run(app.answer_misnamed(QUESTION))
        asyncio.run(app.answer_misnamed(QUESTION))
    warned = [r.getMessage() for r in caplog.records if "find_order" in r.getMessage()]
    assert warned == [
        "agent-journal: tool find_order ran while the model's calls of lookup_order wait for "
        "their results, and the model proposed no call named find_order: its outcome is "
        "journaled as a call of the code's own. If it is the tool the model calls "
        "lookup_order, register it under that name (@capture.tool(name='lookup_order'))"
    ]
    assert len(journal.sessions()) == 2


def test_the_clients_own_retry_settings_are_configuration() -> None:
    journal, session, _ = record(None, None)
    started = next(iter(journal.events(session))).event
    assert started.client_settings == {  # type: ignore[union-attr]
        "max_retries": 0,
        "timeout": {"connect": 5.0, "pool": 600, "read": 600, "write": 600},
    }
    app.client = app.capture.openai(
        openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="local", max_retries=2)
    )
    result = replayed(journal, session)
    assert [change.path for change in result.config_changes] == ["client_settings.max_retries"]
