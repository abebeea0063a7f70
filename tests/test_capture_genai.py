"""The ``google-genai`` client captured and replayed, against a local Gemini REST server.

The real ``google-genai`` package talks HTTP to `tests.fake_genai`; the scratch desk
(`tests.genai_app`) is the user's code. Every replay runs with the server stopped.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pydantic
import pytest
from google.genai import errors, types
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from journal import ActionProposed, Journal, ModelCallFailed, SessionStarted

from . import genai_app as app
from .client_replays import LOOP, ROOT, Desk, events, fixture_green_then_red, replayed, run
from .fake_genai import Gemini, serving

QUESTION = "Where is order 5?"
ANSWER = "Order 5 is in stock; I e-mailed you."


DESK = Desk(app, serving, Gemini, QUESTION)
recorded, record = DESK.recorded, DESK.record


@pytest.fixture(autouse=True)
def _clean() -> Iterator[None]:
    yield from DESK.clean()


def test_generate_content_journals_instruction_tools_config_thoughts_and_usage() -> None:
    journal, session, answered = record(app.answer, think=True)
    assert answered == ANSWER
    found = events(journal, session)
    assert [event.type for event in found] == LOOP
    started = found[0]
    assert isinstance(started, SessionStarted)
    assert (started.model, started.system_prompt) == (app.MODEL, app.prompt())
    declared = app.TOOLS[0].function_declarations or []
    assert [tool.name for tool in started.config.tools] == [d.name for d in declared]
    assert started.config.tools[1].parameters == declared[1].parameters_json_schema
    assert started.model_settings == {
        "temperature": 0.0,
        "thinking_config": {"include_thoughts": True},
        "tool_config": {"function_calling_config": {"mode": "AUTO"}},
    }
    assert started.client_settings == {"timeout": None, "retry_options": None}
    first, second = found[2], found[4]
    assert isinstance(first, ActionProposed) and isinstance(second, ActionProposed)
    assert first.request is not None
    params = first.request["params"]
    assert params["system_instruction"] == app.prompt()
    assert params["tools"][0]["function_declarations"][0]["name"] == "lookup_order"
    assert params["tool_config"] == {"function_calling_config": {"mode": "AUTO"}}
    assert [(c.call_id, c.tool, c.args) for c in first.calls] == [
        ("lookup_order#0", "lookup_order", {"order_id": "5"})
    ]
    assert first.calls[0].arguments == '{"order_id":"5"}'
    assert first.reasoning is not None and first.reasoning.startswith("Plan ")
    # prompt tokens (the cached part in them), candidates and thoughts, the cached part
    assert (first.usage.input_tokens, first.usage.output_tokens) == (10, 12)
    assert (second.usage.input_tokens, second.usage.cached_tokens) == (30, 10)
    assert first.response is not None
    thought, call = first.response["candidates"][0]["content"]["parts"]
    assert thought["thought"] is True
    signature = base64.urlsafe_b64decode(call["thought_signature"])
    assert signature.startswith(b"\xff\xfe")  # bytes that are not UTF-8, kept verbatim
    # the next request sent it back (the server refuses anything else), and its
    # function_response answered the call (journaled by the decorated tool)
    assert second.request is not None
    model_turn, answer = second.request["messages"]
    assert model_turn["parts"][1]["thought_signature"] == call["thought_signature"]
    assert answer["parts"][0]["function_response"]["name"] == "lookup_order"
    assert app.OUTBOX == ["customer@example.com: order 5"]


@pytest.mark.parametrize(
    ("entry", "think"),
    [
        (app.answer, False),
        (app.answer, True),
        (app.answer_streamed, False),
        (app.answer_streamed, True),
        (app.answer_async, True),
        (app.answer_async_streamed, None),
        (app.answer_chat, None),
    ],
)
def test_unchanged_code_replays_identical_with_the_server_down(entry: Any, think: Any) -> None:
    kwargs = {} if think is None else {"think": think}
    journal, session, answered = record(entry, **kwargs)
    assert answered == ANSWER
    sent = len(app.OUTBOX)
    result = replayed(journal, session, entry)
    assert result.identical, result.first_divergence
    assert len(app.OUTBOX) == sent  # the side-effect tool never ran
    assert (result.served.model_replies, result.served.tool_results) == (4, 2)


def test_a_retried_rate_limit_is_a_failed_call_and_replays_identical() -> None:
    journal, session, answered = record(app.answer, None, "429")
    assert answered == ANSWER
    found = events(journal, session)
    assert [e.type for e in found] == [*LOOP[:4], "model_call_failed", *LOOP[4:]]
    failed = found[4]
    assert isinstance(failed, ModelCallFailed)
    assert failed.error is not None and failed.error["type"] == "google.genai.errors:ClientError"
    assert (failed.status_code, failed.kind) == (429, "infrastructure")
    result = replayed(journal, session, app.answer)
    assert result.identical, result.first_divergence
    assert result.served.failed_calls == 1
    app.CHANGES.add("no-retry")  # give up at once: the fallback, where the recording retried
    divergence = replayed(journal, session, app.answer).first_divergence
    assert divergence is not None and divergence.seq == 5


@app.capture.entry
def caught(question: str, streamed: bool = False) -> str:
    """One call; the class, code and status of what it raised."""
    contents = app._question(question)
    try:
        if streamed:  # (thinking: a thought chunk before the call's)
            stream = app.client.models.generate_content_stream(
                model=app.MODEL, contents=contents, config=app.config(think=True)
            )
            return "".join(app.text_of(c.candidates[0].content.parts or []) for c in stream)
        reply = app.client.models.generate_content(model=app.MODEL, contents=contents)
        return app.text_of(reply.candidates[0].content.parts or [])
    except errors.APIError as error:
        return f"{type(error).__module__}.{type(error).__qualname__} {error.code} {error.status}"


@pytest.mark.parametrize(
    ("fault", "streamed", "raised"),
    [
        ("429", False, "ClientError 429 RESOURCE_EXHAUSTED"),
        ("500", False, "ServerError 500 INTERNAL"),
        ("503", True, "ServerError 503 UNAVAILABLE"),
        ("break:1", True, "ServerError 503 UNAVAILABLE"),
    ],
)
def test_errors_are_raised_again_as_their_own_class(
    fault: str, streamed: bool, raised: str
) -> None:
    journal, session, answered = record(caught, fault, streamed=streamed)
    assert answered == f"google.genai.errors.{raised}"
    result = replayed(journal, session, caught)
    assert result.identical, result.first_divergence
    assert result.served.failed_calls == 1


@pytest.mark.parametrize("fault", ["500", "503"])
def test_a_caught_server_error_replays_identical_and_a_new_fallback_diverges(fault: str) -> None:
    journal, session, answered = record(app.answer, None, fault)
    assert answered == app.fallback()
    failed = events(journal, session)[4]
    assert isinstance(failed, ModelCallFailed) and failed.error is not None
    assert failed.error["type"] == "google.genai.errors:ServerError"
    assert "google.genai.errors:APIError" in failed.error["mro"]
    assert failed.status_code == int(fault)
    assert replayed(journal, session, app.answer).identical
    app.CHANGES.add("fallback")
    divergence = replayed(journal, session, app.answer).first_divergence
    assert divergence is not None and divergence.seq == 5
    assert divergence.expected is not None and divergence.expected["type"] == "agent_completed"


@pytest.mark.parametrize("entry", [app.answer_streamed, app.answer_async_streamed])
def test_a_broken_stream_keeps_its_chunks_and_replays_them_then_the_error(entry: Any) -> None:
    journal, session, answered = record(entry, None, "break:1", think=True)
    assert answered == app.fallback()
    failed = events(journal, session)[4]
    assert isinstance(failed, ModelCallFailed)
    assert failed.response is not None and len(failed.response) == 1  # the thought chunk
    assert failed.error is not None and failed.error["type"] == "google.genai.errors:ServerError"
    result = replayed(journal, session, entry)
    assert result.identical, result.first_divergence


def test_planted_changes_diverge_at_the_right_seq() -> None:
    journal, session, _ = record(app.answer)
    for change in ("prompt", "temperature"):  # the session's configuration differs
        app.CHANGES.add(change)
        divergence = replayed(journal, session, app.answer).first_divergence
        assert divergence is not None and divergence.seq == 0, change
        app.CHANGES.clear()
    app.CHANGES.add("quantity")  # the code passes the tool other arguments than asked
    divergence = replayed(journal, session, app.answer).first_divergence
    assert divergence is not None and divergence.seq == 5
    app.CHANGES.clear()
    app.CHANGES.add("stock")  # a fix in the pure tool: at its result, with no flag
    divergence = replayed(journal, session, app.answer).first_divergence
    assert divergence is not None and divergence.seq == 5
    assert divergence.expected is not None and divergence.expected["type"] == "action_committed"
    app.CHANGES.clear()
    app.CHANGES.add("lookup")  # a fix in the I/O tool: only when it runs live
    assert replayed(journal, session, app.answer).identical
    divergence = replayed(
        journal, session, app.answer, live_tools=["lookup_order"]
    ).first_divergence
    assert divergence is not None and divergence.seq == 3


SHAPE = ["text"]
"""How `one_call` passes its contents: a string, a list of parts, a list of dicts."""


@app.capture.entry
def one_call(question: str) -> str:
    """One call whose contents are given in the shape `SHAPE` names."""
    given: Any = {
        "text": question,
        "parts": [types.Part.from_text(text=question)],
        "dicts": [{"role": "user", "parts": [{"text": question}]}],
    }[SHAPE[0]]
    reply = app.client.models.generate_content(model=app.MODEL, contents=given)
    return app.text_of(reply.candidates[0].content.parts or [])


@pytest.mark.parametrize("shape", ["parts", "dicts"])
def test_contents_in_any_shape_the_sdk_sends_alike_are_the_same_request(shape: str) -> None:
    SHAPE[:] = ["text"]
    journal, session, _ = record(one_call)
    SHAPE[:] = [shape]
    try:
        result = replayed(journal, session, one_call)
    finally:
        SHAPE[:] = ["text"]
    assert result.identical, result.first_divergence


class Verdict(pydantic.BaseModel):
    question: str
    answer: str


class NotedVerdict(Verdict):
    note: str | None = None


SCHEMA: list[type[Verdict]] = [Verdict]
"""The response schema `structured` asks for (a test swaps in another)."""


@app.capture.entry
def structured(question: str) -> str:
    """One call for structured output: what ``parsed`` is, and what it holds."""
    config = types.GenerateContentConfig(
        response_mime_type="application/json", response_schema=SCHEMA[0]
    )
    reply = app.client.models.generate_content(model=app.MODEL, contents=question, config=config)
    return f"{type(reply.parsed).__name__} {reply.parsed!r}"


def test_parsed_is_made_again_from_the_schema_and_a_schema_change_diverges() -> None:
    journal, session, answered = record(structured)
    assert answered == f"Verdict {Verdict(question=QUESTION, answer='in stock')!r}"
    started = events(journal, session)[0]
    assert started.model_settings["response_schema"]["json_schema"] == Verdict.model_json_schema()
    result = replayed(journal, session, structured)  # (parsed as a Verdict again, not a dict)
    assert result.identical, result.first_divergence
    SCHEMA[:] = [NotedVerdict]
    try:
        divergence = replayed(journal, session, structured).first_divergence
    finally:
        SCHEMA[:] = [Verdict]
    assert divergence is not None and divergence.seq == 0


QUESTIONS = [f"Where is order {n}?" for n in range(20)]
ENTRIES: list[tuple[Any, dict[str, Any]]] = [
    (app.answer, {}),
    (app.answer, {"think": True}),
    (app.answer_streamed, {"think": True}),
    (app.answer_async, {}),
    (app.answer_async_streamed, {}),
]


def test_twenty_sessions_replay_identical_and_a_prompt_change_diverges_in_each() -> None:
    with recorded() as journal:
        for index, question in enumerate(QUESTIONS):
            entry, kwargs = ENTRIES[index % len(ENTRIES)]
            run(entry, question, **kwargs)
    sessions = {}
    for summary in journal.sessions():
        started = events(journal, summary.session_id)[0]
        assert isinstance(started, SessionStarted) and started.agent is not None
        sessions[summary.session_id] = getattr(app, started.agent.split(":")[1])
    assert len(sessions) == 20
    identical = [replayed(journal, s, entry).identical for s, entry in sessions.items()]
    assert identical == [True] * 20
    app.CHANGES.add("prompt")
    seqs = [replayed(journal, s, e).first_divergence for s, e in sessions.items()]
    assert [d.seq if d else None for d in seqs] == [0] * 20
    assert all(d is not None and "system_prompt" in d.reason for d in seqs)
    app.CHANGES.clear()
    app.CHANGES.add("stock")  # the fix changes the stock of SKU-3 only: orders 2, 5, 8, ...
    found = {}
    for session, entry in sessions.items():
        order = int(events(journal, session)[1].text.split()[3].rstrip("?"))
        divergence = replayed(journal, session, entry).first_divergence
        found[order] = divergence.seq if divergence else None
    assert found == {n: 5 if n % 3 == 2 else None for n in range(20)}


def test_a_fixture_of_a_genai_session_is_green_then_red(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal, session, _ = record(app.answer, think=True)
    fixture_green_then_red(pytester, monkeypatch, (journal, session), "tests.genai_app", "stock", 5)


_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)
_SIGNATURE = st.binary(min_size=1, max_size=8).map(lambda b: base64.b64encode(b).decode())


@st.composite
def _part(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["text", "thought", "call"]))
    if kind == "call":
        part: dict[str, Any] = {"functionCall": {"name": "t", "args": {"q": draw(_TEXT)}}}
    else:
        part = {"text": draw(_TEXT)}
        if kind == "thought":
            part["thought"] = True
    if draw(st.booleans()):
        part["thoughtSignature"] = draw(_SIGNATURE)
    return part


@st.composite
def streams(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Any stream of a response: chunks of text, thought and function call parts."""
    found = [
        {
            "candidates": [{"content": {"role": "model", "parts": parts}, "index": 0}],
            "modelVersion": "gemini-fake-1",
        }
        for parts in draw(st.lists(st.lists(_part(), min_size=1, max_size=2), max_size=4))
    ]
    last: dict[str, Any] = {"candidates": [{"content": {"role": "model", "parts": []},
                                            "finishReason": "STOP", "index": 0}]}  # fmt: skip
    last["usageMetadata"] = {
        "promptTokenCount": draw(st.integers(0, 99)),
        "candidatesTokenCount": draw(st.integers(0, 99)),
    }
    return [*found, last]


READ: list[list[Any]] = []


@app.capture.entry
def read_stream(question: str) -> str:
    stream = app.client.models.generate_content_stream(model=app.MODEL, contents=question)
    READ.append(
        [
            chunk.model_dump(mode="json", exclude_unset=True, exclude={"sdk_http_response"})
            for chunk in stream
        ]
    )
    return "read"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams())
def test_any_recorded_stream_replays_as_the_same_chunks_in_the_same_order(
    script: list[dict[str, Any]],
) -> None:
    READ.clear()
    with recorded() as journal:
        Gemini.script = script
        read_stream("hi")
    (summary,) = journal.sessions()
    result = replayed(journal, summary.session_id, read_stream)
    assert result.identical, result.first_divergence
    live, again = READ
    assert again == live
    assert len(again) == len(script)


def test_outside_a_session_calls_pass_through_and_the_rest_of_the_client_too() -> None:
    from google import genai

    with serving() as url:
        options = types.HttpOptions(base_url=url)
        raw = genai.Client(api_key="local", http_options=options)
        wrapped = app.capture.genai(raw)
        reply = wrapped.models.generate_content(model=app.MODEL, contents="order 1")
        assert isinstance(reply, types.GenerateContentResponse)
        assert reply.candidates[0].content.parts[0].function_call.name == "lookup_order"
        chunks = list(wrapped.models.generate_content_stream(model=app.MODEL, contents="order 1"))
        assert all(isinstance(chunk, types.GenerateContentResponse) for chunk in chunks)
        assert wrapped.files is raw.files and wrapped.aio.caches is raw.aio.caches

        async def in_async_with() -> Any:
            async with app.capture.genai(
                genai.Client(api_key="local", http_options=options)
            ).aio as aio:
                return await aio.models.generate_content(model=app.MODEL, contents="order 1")

        with app.capture.genai(genai.Client(api_key="local", http_options=options)) as client:
            again = client.models.generate_content(model=app.MODEL, contents="order 1")
            assert again.candidates == reply.candidates
        assert asyncio.run(in_async_with()).candidates == reply.candidates


@pytest.mark.parametrize("entry", [app.answer_streamed, app.answer_async])
def test_sessions_on_either_store_replay_identical_and_read_like_any_other(
    any_journal: Journal, entry: Any
) -> None:
    from journal.formats import otlp_document

    with serving() as url:
        Gemini.faults = [None, "429"] if entry is app.answer_async else []
        app.bind(any_journal, url)
        for question in QUESTIONS[:3]:
            run(app.answer if entry is app.answer_async else entry, question)
        run(entry, QUESTION, think=True)
    summaries = list(any_journal.sessions())
    assert len(summaries) == 4 and {s.status for s in summaries} == {"completed"}
    for summary in summaries:
        started = events(any_journal, summary.session_id)[0]
        assert isinstance(started, SessionStarted) and started.agent is not None
        code = getattr(app, started.agent.split(":")[1])
        result = replayed(any_journal, summary.session_id, code)
        assert result.identical, result.first_divergence
        assert summary.tokens_in > 0 and summary.tokens_cached > 0
        assert otlp_document(any_journal, [summary.session_id])["resourceSpans"]


def test_sessions_and_show_read_a_genai_session(tmp_path: Path) -> None:
    from .helpers import run_cli

    db = tmp_path / "gemini.db"
    with Journal.open(db) as journal, serving() as url:
        app.bind(journal, url)
        run(app.answer_streamed, QUESTION, think=True)
    listed = run_cli("sessions", "--json", "--db", db)
    assert listed.exit_code == 0, listed.stderr
    (summary,) = json.loads(listed.stdout)
    assert (summary["status"], summary["steps"], summary["agent"]) == (
        "completed",
        3,
        "tests.genai_app:answer_streamed",
    )
    shown = run_cli("show", summary["session_id"], "--db", db)
    assert shown.exit_code == 0, shown.stderr
    assert "lookup_order" in shown.stdout and "send_email" in shown.stdout


def test_without_the_package_capture_genai_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from capture import MissingExtraError

    monkeypatch.delitem(sys.modules, "capture.clients.genai")
    monkeypatch.setitem(sys.modules, "google.genai", None)
    with pytest.raises(MissingExtraError) as raised:
        app.capture.genai(object())
    message = str(raised.value)
    assert "\n" not in message and message.startswith("google-genai is not installed")
    assert message.endswith("pip install 'agent-journal[genai]'")


AFC_RAN: list[str] = []
"""Every call the SDK's automatic function calling made of the functions below."""


def afc_lookup_order(order_id: str) -> dict[str, Any]:
    """Look an order up."""
    AFC_RAN.append(f"lookup_order({order_id})")
    return {"order_id": order_id, "sku": "SKU-1"}


def afc_check_stock(sku: str, quantity: int) -> dict[str, Any]:
    """Whether the units are in stock."""
    AFC_RAN.append(f"check_stock({sku})")
    return {"sku": sku, "in_stock": True}


def afc_send_email(to: str, body: str) -> str:
    """E-mail the customer."""
    AFC_RAN.append(f"send_email({to})")
    return "sent"


for _function in (afc_lookup_order, afc_check_stock, afc_send_email):  # the policy's names
    _function.__name__ = _function.__qualname__ = _function.__name__.removeprefix("afc_")


@app.capture.entry
def automatic(question: str) -> str:
    """One ``generate_content`` with Python functions as tools: the SDK calls them."""
    config = types.GenerateContentConfig(tools=[afc_lookup_order, afc_check_stock, afc_send_email])
    reply = app.client.models.generate_content(model=app.MODEL, contents=question, config=config)
    return app.text_of(reply.candidates[0].content.parts or [])


def test_automatic_function_calling_is_one_model_call_whose_functions_a_replay_does_not_run() -> (
    None
):
    AFC_RAN.clear()
    journal, session, answered = record(automatic)
    assert answered == ANSWER and len(AFC_RAN) == 3  # the SDK ran each function, live
    found = events(journal, session)
    assert [e.type for e in found] == ["session_started", "user_input", "action_proposed",
                                       "agent_completed"]  # fmt: skip
    assert found[2].request["params"]["tools"] == [
        "<function lookup_order>",
        "<function check_stock>",
        "<function send_email>",
    ]
    AFC_RAN.clear()
    result = replayed(journal, session, automatic)
    assert result.identical, result.first_divergence
    assert AFC_RAN == []  # the final response served: no function ran


OLDEST = "3.0.0"
"""The oldest google-genai of the extra's range (``genai = ["google-genai>=3,<4"]``)."""


@pytest.mark.slow
def test_the_oldest_google_genai_of_the_range_captures_and_replays_too(tmp_path: Path) -> None:
    target = tmp_path / "oldest"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target),
         f"google-genai=={OLDEST}"],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    env = {**os.environ, "PYTHONPATH": f"{target}:{ROOT}"}
    found = subprocess.run(
        [sys.executable, "-c", "import google.genai.version as v; print(v.__version__)"],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert found.stdout.strip() == OLDEST
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not slow",
         str(Path(__file__)), "-k", "unchanged_code or retried or broken or planted or twenty"],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:]
    assert " passed" in done.stdout and "failed" not in done.stdout
