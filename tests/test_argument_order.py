"""Arguments exactly as given, through every path (issue 18): a tool replayed live
receives the model's arguments in the order, and with the number forms, the model wrote
them: the runtime, a hand-written loop on the Recorder, user code captured at the openai
client, and an imported transcript.

Each example writes one tool call whose arguments are a generated object in a generated
key order; the tool logs ``list(args.items())`` each time it runs. The original run and a
replay with the tool live must log the same list, equal to what the model wrote.
"""

from __future__ import annotations

import json
import string
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agentloop import Agent, ModelResponse, Tool
from capture import Capture, Recorder
from journal import Journal, ToolCall, import_openai
from replay import Replayer, ReplayOptions, replay_entry, replay_loop

from .loop_helpers import Script
from .openai_helpers import assistant, call, tool, user, write_json

SEEN: list[list[tuple[str, Any]]] = []
"""What the tool received, each time it ran."""

VALUES = (
    st.integers(-(10**6), 10**6)
    | st.floats(allow_nan=False, allow_infinity=False, width=32)
    | st.text(string.ascii_letters, max_size=4)
    | st.booleans()
)
ARGUMENTS = st.lists(
    st.tuples(st.text(string.ascii_lowercase, min_size=1, max_size=4), VALUES),
    min_size=1,
    max_size=5,
    unique_by=lambda pair: pair[0],
).map(dict)


def echo(args: dict[str, Any]) -> str:
    SEEN.append(list(args.items()))
    return "ok"


def _agent() -> Agent:
    spec = {"type": "function", "function": {"name": "echo", "parameters": {"type": "object"}}}
    return Agent(
        name="echo", system_prompt="Echo.", tools=[Tool.from_openai(spec, echo)], reference=None
    )


def _twice(record: Any, replay: Any, args: dict[str, Any]) -> None:
    """Run the original, then the live-tool replay; both saw ``args`` in its own order."""
    SEEN.clear()
    with TemporaryDirectory() as folder, Journal.open(Path(folder) / "j.db") as journal:
        session = record(journal, args)
        original = list(SEEN)
        SEEN.clear()
        result = replay(journal, session)
    assert result.identical, result.first_divergence
    assert original == [list(args.items())]
    assert SEEN == original


@settings(max_examples=25)
@given(ARGUMENTS)
def test_the_runtime(args: dict[str, Any]) -> None:
    def record(journal: Journal, args: dict[str, Any]) -> str:
        from .loop_helpers import run_turns

        proposal = ModelResponse(
            calls=[ToolCall(call_id="c1", tool="echo", args=args, arguments=json.dumps(args))]
        )
        run_turns(_agent(), journal, Script(proposal, ModelResponse(text="done")), "go")
        return "s"

    def replay(journal: Journal, session: str) -> Any:
        return Replayer(ReplayOptions(agent=_agent(), live_tools=True)).replay(journal, session)

    _twice(record, replay, args)


def loop(llm: Any, tools: Any, recorder: Recorder, inputs: list[str]) -> None:
    """A hand-written loop: one model call, its tool calls, one more model call."""
    recorder.start(agent=None, model="m", system_prompt="Echo.", tools=[])
    for text in inputs:
        recorder.user_input(text)
        reply = recorder.model_output(llm())
        for made in reply.calls:
            recorder.tool_result(made.call_id, tools(made.tool, made.args))
        recorder.final(recorder.model_output(llm()).text or "")


@settings(max_examples=25)
@given(ARGUMENTS)
def test_a_loop_on_the_recorder(args: dict[str, Any]) -> None:
    def record(journal: Journal, args: dict[str, Any]) -> str:
        outputs = iter(
            [
                ModelResponse(calls=[ToolCall(call_id="c1", tool="echo", args=args)]),
                ModelResponse(text="done"),
            ]
        )
        with Recorder(journal, "loop") as recorder:
            loop(lambda: next(outputs), lambda name, a: echo(a), recorder, ["go"])
        return "loop"

    def replay(journal: Journal, session: str) -> Any:
        return replay_loop(
            journal,
            session,
            loop,
            ReplayOptions(live_tools=["echo"]),
            tool_port=lambda name, a: echo(a),
        )

    _twice(record, replay, args)


class _Completions:
    """The ``chat.completions`` of a stub openai client: one tool call, then an answer."""

    def __init__(self, arguments: str) -> None:
        self.arguments = arguments

    def create(self, **request: Any) -> Any:
        from openai.types.chat import ChatCompletion

        answered = any(m.get("role") == "tool" for m in request["messages"])
        message: dict[str, Any] = {"role": "assistant", "content": "done" if answered else None}
        if not answered:
            message["tool_calls"] = [call("c1", "echo", self.arguments)]
        return ChatCompletion.model_validate(
            {
                "id": "x",
                "object": "chat.completion",
                "created": 0,
                "model": "m",
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            }
        )


class _Client:
    def __init__(self, arguments: str) -> None:
        self.chat = type("Chat", (), {"completions": _Completions(arguments)})()


@settings(max_examples=25)
@given(ARGUMENTS)
def test_user_code_captured_at_the_client(args: dict[str, Any]) -> None:
    captured: dict[str, Any] = {}

    def record(journal: Journal, args: dict[str, Any]) -> str:
        capture = Capture(journal)
        client = capture.openai(_Client(json.dumps(args)))
        echoed = capture.tool(lambda **kwargs: echo(kwargs), name="echo")

        @capture.entry
        def answer(question: str) -> str:
            messages: list[Any] = [{"role": "user", "content": question}]
            while True:
                reply = client.chat.completions.create(model="m", messages=messages)
                message = reply.choices[0].message
                if not message.tool_calls:
                    return str(message.content)
                messages.append(message.model_dump(exclude_none=True))
                for made in message.tool_calls:
                    result = echoed(**json.loads(made.function.arguments))
                    messages.append({"role": "tool", "tool_call_id": made.id, "content": result})

        captured["entry"] = answer
        answer("go")
        (summary,) = journal.sessions()
        return summary.session_id

    def replay(journal: Journal, session: str) -> Any:
        return replay_entry(journal, session, captured["entry"], ReplayOptions(live_tools=["echo"]))

    _twice(record, replay, args)


@settings(max_examples=25)
@given(ARGUMENTS)
def test_an_imported_transcript(args: dict[str, Any]) -> None:
    """An imported call never ran here: the replay's live tool gets what the model wrote."""
    transcript = [
        user("go"),
        assistant(None, call("c1", "echo", json.dumps(args))),
        tool("c1", "ok"),
        assistant("done"),
    ]
    SEEN.clear()
    with TemporaryDirectory() as folder, Journal.open(Path(folder) / "j.db") as journal:
        path = write_json(Path(folder) / "t.json", {"id": "imported", "messages": transcript})
        import_openai(journal, [path])
        (summary,) = journal.sessions()
        Replayer(ReplayOptions(agent=_agent(), live_tools=True)).replay(journal, summary.session_id)
    assert SEEN == [list(args.items())]
