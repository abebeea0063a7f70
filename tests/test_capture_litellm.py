"""LiteLLM captured and replayed, against a local OpenAI-compatible server.

The real ``litellm`` package (model ``openai/fake-1`` with ``api_base=``) talks HTTP to
`tests.fake_openai`; the scratch shop (`tests.litellm_app`) and the upstream harness it
runs unedited (`tests.litellm_harness`) are the user's code. Every replay runs with the
server stopped.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ClassVar

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no cost map download

import litellm  # noqa: E402
import pytest  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from capture.clients import litellm as captured  # noqa: E402
from journal import ActionProposed, Journal, ModelCallFailed, SessionStarted  # noqa: E402
from journal.formats import export_session  # noqa: E402
from replay import ReplayOptions, ReplayResult, replay_entry  # noqa: E402

from . import litellm_app as app  # noqa: E402
from .client_replays import fixture_green_then_red
from .fake_openai import Faulty, Handler, serving  # noqa: E402

pytestmark = [
    # litellm's sync calls and fallbacks leave event loops (and their self-pipe sockets)
    # unclosed, and its logging worker's coroutine unawaited: collected in `_clean`,
    # under these filters, so that no later test meets them
    pytest.mark.filterwarnings(f"ignore:{message}:pytest.PytestUnraisableExceptionWarning")
    for message in (
        "Exception ignored in. <coroutine object LoggingWorker._worker_loop",
        "Exception ignored in. <function BaseEventLoop.__del__",
        "Exception ignored in. <socket.socket fd=[0-9]+, family=1,",
    )
] + [
    pytest.mark.filterwarnings(
        "ignore:coroutine 'LoggingWorker._worker_loop' was never awaited:RuntimeWarning"
    )
]

QUESTION = "Where is order 5?"
ORIGINAL = {name: getattr(litellm, name) for name in captured.FUNCTIONS}


@pytest.fixture(autouse=True)
def _clean() -> Iterator[None]:
    app.CHANGES.clear()
    app.OUTBOX.clear()
    Faulty.faults, Faulty.requests = [], []
    yield
    app.CHANGES.clear()
    gc.collect()  # what litellm left unclosed goes here (see `pytestmark`)
    # no session left the module patched
    assert {name: getattr(litellm, name) for name in captured.FUNCTIONS} == ORIGINAL


@contextmanager
def recorded(*faults: str | None, handler: type[Handler] = Faulty) -> Iterator[Journal]:
    """A journal of the app's sessions, the server up while the block runs."""
    journal = Journal.open(":memory:")
    with serving(handler) as url:
        Faulty.faults = list(faults)
        app.bind(journal, url)
        yield journal


def run(entry: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    result = entry(*args, **kwargs)
    return asyncio.run(result) if asyncio.iscoroutine(result) else result


def record(
    entry: Callable[..., Any], *faults: str | None, question: str = QUESTION
) -> tuple[Journal, str, Any]:
    with recorded(*faults) as journal:
        answered = run(entry, question)
    (summary,) = journal.sessions()
    return journal, summary.session_id, answered


def replayed(journal: Journal, session: str, entry: Any, **options: Any) -> ReplayResult:
    return replay_entry(journal, session, entry, ReplayOptions(**options))


def events(journal: Journal, session: str) -> list[Any]:
    return [item.event for item in journal.events(session)]


def divergence_seq(journal: Journal, session: str, entry: Any, **options: Any) -> int | None:
    found = replayed(journal, session, entry, **options).first_divergence
    return None if found is None else found.seq


LOOP = [
    "session_started",
    "user_input",
    "action_proposed",
    "action_committed",
    "action_proposed",
    "action_committed",
    "action_proposed",
    "action_committed",
    "action_proposed",
    "agent_completed",
]
ANSWER = "Order 5 is in stock; I e-mailed you."
ENTRIES = [app.solve, app.answer, app.answer_streamed, app.answer_async, app.answer_async_streamed]


def test_a_session_records_the_model_string_its_provider_and_no_connection_secret() -> None:
    journal, session, answered = record(app.solve)
    assert answered == ANSWER
    found = events(journal, session)
    assert [event.type for event in found] == LOOP
    started = found[0]
    assert isinstance(started, SessionStarted)
    assert (started.model, started.system_prompt) == ("openai/fake-1", app.prompt())
    assert [tool.name for tool in started.config.tools] == [
        "lookup_order",
        "check_stock",
        "send_email",
    ]
    assert started.client_settings == {
        "drop_params": litellm.drop_params,
        "num_retries": litellm.num_retries,
        "request_timeout": litellm.request_timeout,
    }
    first = found[2]
    assert isinstance(first, ActionProposed) and first.request is not None
    assert first.request["provider"] == "openai"
    assert first.request["params"] == {
        "max_retries": 0,
        "model": "openai/fake-1",
        "tools": app.TOOLS,
    }
    assert [(c.tool, c.args) for c in first.calls] == [("lookup_order", {"order_id": "5"})]
    assert first.usage.input_tokens == 20
    exported = export_session(journal, session).decode()
    assert "sk-local-secret" not in exported and "127.0.0.1" not in exported
    assert app.OUTBOX == ["customer@example.com: order 5"]


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda entry: entry.__name__)
def test_unchanged_code_replays_identical_with_the_server_down(entry: Any) -> None:
    journal, session, answered = record(entry)
    assert answered == ANSWER
    sent = len(app.OUTBOX)
    result = replayed(journal, session, entry)
    assert result.identical, result.first_divergence
    assert len(app.OUTBOX) == sent == 1  # the side-effect tool never ran in the replay
    assert (result.served.model_replies, result.served.tool_results) == (4, 2)


READ: list[Any] = []


@app.capture.entry
def read_reply(question: str) -> str:
    """What the code gets back: litellm's own types, live and in a replay."""
    response = litellm.completion(**app.request([{"role": "user", "content": question}]))
    READ.append((type(response), response.model_dump(mode="json")))
    stream = litellm.completion(**app.request([{"role": "user", "content": question}]), stream=True)
    READ.append([(type(chunk), chunk.model_dump(mode="json")) for chunk in stream])
    return "read"


def test_a_replay_serves_litellms_own_model_response_and_stream_chunks() -> None:
    READ.clear()
    journal, session, _ = record(read_reply)
    assert replayed(journal, session, read_reply).identical
    live_reply, live_chunks, again_reply, again_chunks = READ
    assert live_reply == again_reply and live_reply[0] is litellm.ModelResponse
    assert again_chunks == live_chunks
    assert {kind for kind, _ in again_chunks} == {litellm.ModelResponseStream}


def test_a_retried_rate_limit_is_a_failed_call_raised_again_as_litellms_own() -> None:
    journal, session, answered = record(app.answer, None, "429")
    assert answered == ANSWER
    found = events(journal, session)
    assert [e.type for e in found] == [*LOOP[:4], "model_call_failed", *LOOP[4:]]
    failed = found[4]
    assert isinstance(failed, ModelCallFailed) and failed.error is not None
    assert failed.error["type"] == "litellm.exceptions:RateLimitError"
    assert (failed.status_code, failed.kind) == (429, "infrastructure")
    assert failed.request is not None and failed.request["provider"] == "openai"
    result = replayed(journal, session, app.answer)
    assert result.identical, result.first_divergence
    assert result.served.failed_calls == 1
    app.CHANGES.add("no-retry")  # give up at once: the error escapes where it was retried
    assert divergence_seq(journal, session, app.answer) == 5


@pytest.mark.parametrize("entry", [app.solve, app.answer, app.answer_async])
def test_a_caught_500_replays_identical_and_a_new_fallback_diverges(entry: Any) -> None:
    journal, session, answered = record(entry, None, "500")
    assert answered == app.fallback()
    failed = events(journal, session)[4]
    assert isinstance(failed, ModelCallFailed) and failed.error is not None
    assert failed.error["type"] == "litellm.exceptions:InternalServerError"
    assert "openai:InternalServerError" in failed.error["mro"]
    assert replayed(journal, session, entry).identical
    app.CHANGES.add("fallback")
    divergence = replayed(journal, session, entry).first_divergence
    assert divergence is not None and divergence.seq == 5
    assert divergence.expected is not None and divergence.expected["type"] == "agent_completed"


@pytest.mark.parametrize("entry", [app.answer_streamed, app.answer_async_streamed])
def test_a_broken_stream_keeps_its_chunks_and_replays_them_then_the_error(entry: Any) -> None:
    journal, session, answered = record(entry, None, "break:2")
    assert answered == app.fallback()
    failed = events(journal, session)[4]
    assert isinstance(failed, ModelCallFailed) and failed.error is not None
    assert failed.error["type"] == "litellm.exceptions:MidStreamFallbackError"
    assert failed.response is not None and len(failed.response) == 2
    result = replayed(journal, session, entry)
    assert result.identical, result.first_divergence


@pytest.mark.parametrize("entry", [app.answer, app.answer_async_streamed])
def test_planted_changes_in_the_loop_diverge_at_the_right_seq(entry: Any) -> None:
    journal, session, _ = record(entry)
    planted = {
        "prompt": 0,  # the system prompt: the session's configuration differs
        "format": 4,  # the loop sends a result back otherwise: the next request differs
        "quantity": 5,  # the loop gives the tool other arguments than the model asked
        "stock": 5,  # a fix in the pure tool: at its result, with no flag
    }
    found = {}
    for change in planted:
        app.CHANGES.clear()
        app.CHANGES.add(change)
        found[change] = divergence_seq(journal, session, entry)
    assert found == planted


def test_a_tool_fix_in_an_unedited_harness_diverges_at_its_result_when_run_live() -> None:
    journal, session, _ = record(app.solve)
    app.CHANGES.add("lookup")  # a fix in the I/O tool: served, so unseen, unless run live
    assert replayed(journal, session, app.solve).identical
    assert divergence_seq(journal, session, app.solve, live_tools=["lookup_order"]) == 3
    app.CHANGES.clear()
    app.CHANGES.add("prompt")
    assert divergence_seq(journal, session, app.solve) == 0
    assert app.OUTBOX == ["customer@example.com: order 5"]  # recorded once, never replayed


QUESTIONS = [f"Where is order {n}?" for n in range(20)]


def test_twenty_sessions_replay_identical_and_planted_changes_diverge_where_they_change() -> None:
    with recorded() as journal:
        for index, question in enumerate(QUESTIONS):
            run(ENTRIES[index % len(ENTRIES)], question)
    sessions: dict[str, tuple[Any, int]] = {}
    for summary in journal.sessions():
        found = events(journal, summary.session_id)
        assert isinstance(found[0], SessionStarted) and found[0].agent is not None
        order = int(found[1].text.split()[-1].rstrip("?"))
        sessions[summary.session_id] = (getattr(app, found[0].agent.split(":")[1]), order)
    assert len(sessions) == 20 and len(app.OUTBOX) == 20
    identical = [replayed(journal, s, entry).identical for s, (entry, _) in sessions.items()]
    assert identical == [True] * 20
    app.CHANGES.add("prompt")
    assert [divergence_seq(journal, s, e) for s, (e, _) in sessions.items()] == [0] * 20
    app.CHANGES.clear()
    app.CHANGES.add("stock")  # the fix changes the answer for SKU-3 only (orders 2, 5, 8, ...)
    seqs = [divergence_seq(journal, s, e) for s, (e, _) in sessions.items()]
    assert seqs == [5 if order % 3 == 2 else None for _, order in sessions.values()]
    assert len(app.OUTBOX) == 20  # no replay sent an e-mail


def test_a_fixture_of_a_litellm_session_is_green_then_red(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal, session, _ = record(app.solve)
    fixture_green_then_red(
        pytester, monkeypatch, (journal, session), "tests.litellm_app", "stock", 5
    )


def test_the_functions_are_patched_only_while_a_scope_is_open_and_calls_outside_pass() -> None:
    assert not captured.patched()
    seen: list[bool] = []

    @app.capture.entry
    def inside(question: str) -> str:
        seen.append(litellm.completion is not ORIGINAL["completion"])
        with app.capture.session():  # a nested session: the same patch, counted
            pass
        seen.append(captured.patched())
        reply = litellm.completion("openai/fake-1", [{"role": "user", "content": question}],
                                   api_base=app.API_BASE, api_key="k", max_retries=0)  # fmt: skip
        return str(reply.choices[0].message.tool_calls[0].function.name)

    with recorded() as journal:
        assert inside("order 7") == "lookup_order"
        with app.capture.litellm():  # a block of its own: patched, but no session to journal
            assert captured.patched()
            reply = litellm.completion(**app.request([{"role": "user", "content": "order 1"}]))
            assert isinstance(reply, litellm.ModelResponse)
    assert seen == [True, True] and not captured.patched()
    (summary,) = journal.sessions()  # the call outside a session was not journaled
    proposed = [e for e in events(journal, summary.session_id) if isinstance(e, ActionProposed)]
    assert proposed[0].request is not None
    assert proposed[0].request["params"]["model"] == "openai/fake-1"  # given positionally
    assert replayed(journal, summary.session_id, inside).identical


class Scripted(Handler):
    """`Handler`, streaming `script`'s chunks for any streamed chat completion."""

    script: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:  # noqa: N802 - the http.server API
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self._events([json.dumps(chunk) for chunk in self.script] + ["[DONE]"])


_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)


@st.composite
def streams(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Any stream of a chat completion: text in pieces, tool calls in pieces, a finish."""
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    deltas += [{"content": piece} for piece in draw(st.lists(_TEXT, max_size=4))]
    for index in range(draw(st.integers(0, 2))):
        text = json.dumps({"q": draw(_TEXT)})
        cut = draw(st.integers(0, len(text)))
        first = {"index": index, "id": f"call_{index}", "type": "function",
                 "function": {"name": "lookup_order", "arguments": text[:cut]}}  # fmt: skip
        deltas.append({"tool_calls": [first]})
        deltas.append({"tool_calls": [{"index": index, "function": {"arguments": text[cut:]}}]})
    chunks = [base | {"choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas]
    finish = draw(st.sampled_from(["stop", "tool_calls", "length"]))
    chunks.append(base | {"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    return chunks


STREAMED: list[list[Any]] = []


@app.capture.entry
def read_stream(question: str) -> str:
    stream = litellm.completion(**app.request([{"role": "user", "content": question}]), stream=True)
    STREAMED.append([chunk.model_dump(mode="json") for chunk in stream])
    return "read"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams())
def test_any_recorded_stream_replays_as_the_same_chunks_in_the_same_order(
    script: list[dict[str, Any]],
) -> None:
    STREAMED.clear()
    Scripted.script = script
    with recorded(handler=Scripted) as journal:
        read_stream("hi")
    (summary,) = journal.sessions()
    result = replayed(journal, summary.session_id, read_stream)
    assert result.identical, result.first_divergence
    live, again = STREAMED
    assert again == live and live


@pytest.mark.parametrize("entry", [app.answer_streamed, app.answer_async])
def test_sessions_on_either_store_replay_identical_and_read_like_any_other(
    any_journal: Journal, entry: Any
) -> None:
    from journal.formats import otlp_document

    with serving(Faulty) as url:
        Faulty.faults = [None, "429"] if entry is app.answer_async else []
        app.bind(any_journal, url)
        for question in QUESTIONS[:3]:
            run(app.answer if entry is app.answer_async else entry, question)
        run(entry, QUESTION)
    summaries = list(any_journal.sessions())
    assert len(summaries) == 4 and {s.status for s in summaries} == {"completed"}
    for summary in summaries:
        started = events(any_journal, summary.session_id)[0]
        assert isinstance(started, SessionStarted) and started.agent is not None
        code = getattr(app, started.agent.split(":")[1])
        result = replayed(any_journal, summary.session_id, code)
        assert result.identical, result.first_divergence
        assert summary.tokens_in > 0
        assert otlp_document(any_journal, [summary.session_id])["resourceSpans"]


@app.capture.entry
def with_fallback(question: str) -> str:
    reply = litellm.completion(
        **app.request([{"role": "user", "content": question}]), fallbacks=["openai/fake-2"]
    )
    return str(reply.model)


def test_litellms_own_fallback_is_part_of_the_one_journaled_call() -> None:
    journal, session, answered = record(with_fallback, "500")
    assert answered == "fake-2" and len(Faulty.requests) == 2  # the 500, then the fallback
    found = events(journal, session)
    assert [e.type for e in found] == ["session_started", "user_input", "action_proposed",
                                       "agent_completed"]  # fmt: skip
    assert isinstance(found[2], ActionProposed) and found[2].model == "fake-2"
    assert replayed(journal, session, with_fallback).identical


def test_concurrent_async_sessions_share_the_patch_and_each_replays_identical() -> None:
    async def three() -> list[str]:
        return list(
            await asyncio.gather(
                app.answer_async(QUESTIONS[4]),
                app.answer_async_streamed(QUESTION),
                app.answer_async(QUESTIONS[2]),
            )
        )

    with recorded() as journal:
        assert asyncio.run(three())[1] == ANSWER
    assert not captured.patched()
    summaries = list(journal.sessions())
    assert len(summaries) == 3 and {s.events for s in summaries} == {len(LOOP)}
    for summary in summaries:
        started = events(journal, summary.session_id)[0]
        assert isinstance(started, SessionStarted) and started.agent is not None
        entry = getattr(app, started.agent.split(":")[1])
        assert replayed(journal, summary.session_id, entry).identical
