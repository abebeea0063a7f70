"""LangGraph: each run of a compiled graph journaled as a session (the capture half).

Three lines, and the graph stays as it is::

    capture = Capture("agent-journal.db")
    model = capture.langchain(ChatOpenAI(model="gpt-4.1"))      # the nodes' chat model
    graph = capture.graph(builder.compile(checkpointer=saver))  # every run a session

with the tools decorated (``@capture.tool`` above ``@tool``: `capture.frameworks.langchain`).

A call of ``graph.invoke``, ``ainvoke``, ``stream`` or ``astream`` is one session
(``captured_with: "langgraph"``). Its ``session_started`` names the graph (the
module-level name `CapturedGraph` is bound to: what a replay loads), and keeps what the
run was given (``metadata.entry_inputs``: the method, the input or the ``Command``, the
config, the other arguments) and, under ``metadata.langgraph``, the graph's name, the
thread id and **the state the run loads**: the checkpoint the checkpointer holds for the
thread when the run starts (its channel values, versions and pending writes: the
``interrupt()`` waiting for its answer, in a run that resumes one with
``Command(resume=...)``). Each model call inside the run names the node it came from, the
step, and the nodes run before it (`capture.frameworks.langchain.NodeTracker`); the run's
output (or a stream's chunks) is the answer, its messages without their random ids.

In a replay the run gets the recorded state from an in-memory checkpointer seeded from
the record (`seeded_checkpointer`, set up by ``replay.integrations.langgraph`` through
`seeded`), so a turn of a thread, a resumed interrupt among them, replays alone: no
database, no human.

The recorded values are JSON: LangChain messages as LangChain serialises them, LangGraph's
``Interrupt``, ``Send`` and ``Command`` by their fields, tuples and dicts with other keys
tagged (`encode_value`). Nothing else is revived: a state holding another object is
recorded by its type and JSON form, and its replay is refused (`UnrestorableState`).
"""

from __future__ import annotations

import itertools
import json
import sys
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from journal import JournalError

from .._extras import missing_extra
from ..play import replay_target
from ..requests import jsonable
from .langchain import NodeTracker

try:
    from langchain_core.callbacks import BaseCallbackManager
    from langchain_core.messages import BaseMessage, messages_from_dict, messages_to_dict
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.types import Command, Interrupt, Send
except ImportError as error:  # pragma: no cover - exercised with the package hidden
    raise missing_extra("langgraph", "langgraph", error) from error

if TYPE_CHECKING:
    from collections.abc import Generator

    from ..scope import Capture
    from ..session import CapturedSession

__all__ = [
    "CAPTURED_WITH",
    "METADATA_KEY",
    "METHODS",
    "CapturedGraph",
    "Seed",
    "UnrestorableState",
    "decode_value",
    "encode_value",
    "seeded",
    "seeded_checkpointer",
]

CAPTURED_WITH = "langgraph"
"""The ``captured_with`` metadata of the sessions this module journals."""

METADATA_KEY = "langgraph"
"""The ``session_started`` metadata key of a graph run: graph, thread, loaded state."""

METHODS = ("invoke", "ainvoke", "stream", "astream")
"""The runs of a graph that are sessions (and what a replay calls again)."""

_TAG = "__lg__"


class UnrestorableState(JournalError):
    """A recorded value a replay cannot give the graph again (an object JSON cannot hold)."""


_NOT_ANSWERED = frozenset({"id", "response_metadata", "usage_metadata"})
"""What an answer leaves out of a message: its random id, and what the model call that made
it reported (journaled, and compared, with its response)."""

_RANDOM_KEYS = frozenset({"checkpoint_ns", "langgraph_checkpoint_ns", "checkpoint_id", "task_id"})
"""Keys whose values LangGraph makes up at each run (from its time-based checkpoint ids):
a stream's metadata names them."""


def _message(message: BaseMessage, answer: bool) -> dict[str, Any]:
    record = messages_to_dict([message])[0]
    data = jsonable(record["data"])
    if answer:
        data = {key: value for key, value in data.items() if key not in _NOT_ANSWERED}
    return {_TAG: "message", "type": record["type"], "data": data}


def encode_value(value: Any, *, answer: bool = False) -> Any:
    """A graph's value (state, input, output, a pending write) as JSON (see the module).

    ``answer`` encodes a run's output or stream chunks as the session's answer, which a
    replay compares: without what LangGraph makes up at random (message and interrupt ids,
    checkpoint namespaces and ids: `_RANDOM_KEYS`), nor what a message's model call
    reported (its response and usage metadata, journaled with that call's response).
    """
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, BaseMessage):
        return _message(value, answer)
    if isinstance(value, Interrupt):
        encoded = {_TAG: "interrupt", "value": encode_value(value.value, answer=answer)}
        return encoded if answer else {**encoded, "id": value.id}
    if isinstance(value, Send):
        return {_TAG: "send", "node": value.node, "arg": encode_value(value.arg, answer=answer)}
    if isinstance(value, Command):
        fields = ("graph", "update", "resume", "goto")
        return {
            _TAG: "command",
            **{f: encode_value(getattr(value, f), answer=answer) for f in fields},
        }
    if isinstance(value, list):
        return [encode_value(item, answer=answer) for item in value]
    if isinstance(value, tuple):
        return {_TAG: "tuple", "items": [encode_value(item, answer=answer) for item in value]}
    if isinstance(value, Mapping):
        if all(isinstance(key, str) for key in value) and _TAG not in value:
            return {
                key: encode_value(item, answer=answer)
                for key, item in value.items()
                if not (answer and key in _RANDOM_KEYS)
            }
        pairs = [
            [encode_value(k, answer=answer), encode_value(v, answer=answer)]
            for k, v in value.items()
        ]
        return {_TAG: "dict", "items": pairs}
    kind = type(value)
    return {
        _TAG: "object",
        "type": f"{kind.__module__}:{kind.__qualname__}",
        "value": jsonable(value),
    }


def decode_value(value: Any, where: str = "$") -> Any:
    """The value `encode_value` recorded, as the graph had it.

    Raises:
        UnrestorableState: it holds an object that was recorded only by its type.
    """
    if isinstance(value, list):
        return [decode_value(item, f"{where}[{i}]") for i, item in enumerate(value)]
    if not isinstance(value, dict):
        return value
    tag = value.get(_TAG)
    if tag is None:
        return {key: decode_value(item, f"{where}.{key}") for key, item in value.items()}
    if tag == "message":
        return messages_from_dict([{"type": value["type"], "data": value["data"]}])[0]
    if tag == "interrupt":
        return Interrupt(value=decode_value(value["value"], where), id=value.get("id", ""))
    if tag == "send":
        return Send(value["node"], decode_value(value["arg"], where))
    if tag == "command":
        fields = {
            key: decode_value(value.get(key), f"{where}.{key}")
            for key in ("update", "resume", "goto")
        }
        return Command(
            graph=value.get("graph"), **{k: v for k, v in fields.items() if v is not None}
        )
    if tag == "tuple":
        return tuple(decode_value(item, where) for item in value["items"])
    if tag == "dict":
        return {decode_value(k, where): decode_value(v, where) for k, v in value["items"]}
    raise UnrestorableState(
        f"{where} holds a {value.get('type')}, which agent-journal records as JSON but cannot "
        "give the graph again (a replay restores JSON values, LangChain messages and "
        "LangGraph's Interrupt, Send and Command)"
    )


# -- the state a run loads -----------------------------------------------------------------


def _loaded_state(checkpointer: Any, config: Mapping[str, Any]) -> dict[str, Any] | None:
    """The checkpoint a run of ``config``'s thread starts from, as recorded (None: none)."""
    if checkpointer is None or checkpointer is False or checkpointer is True:
        return None
    if not (config.get("configurable") or {}).get("thread_id"):
        return None
    saved = checkpointer.get_tuple(dict(config))
    if saved is None:
        return None
    return {
        "config": encode_value(dict(saved.config)),
        "parent_config": encode_value(dict(saved.parent_config) if saved.parent_config else None),
        "checkpoint": encode_value(dict(saved.checkpoint)),
        "metadata": encode_value(dict(saved.metadata or {})),
        "pending_writes": [
            [task, channel, encode_value(value)]
            for task, channel, value in saved.pending_writes or ()
        ],
    }


def seeded_checkpointer(state: Mapping[str, Any] | None) -> InMemorySaver:
    """An in-memory checkpointer holding the checkpoint a run loaded (`_loaded_state`).

    The checkpoint itself (its id, channel values and versions, its metadata and parent)
    and its pending writes, so the graph resumes as it did: an interrupt waiting for its
    answer, the step count going on.

    Raises:
        UnrestorableState: the state holds a value that cannot be given back.
    """
    saver = InMemorySaver()
    if not state:
        return saver
    checkpoint = decode_value(state["checkpoint"], "checkpoint")
    metadata = decode_value(state["metadata"], "checkpoint metadata")
    configurable = dict(decode_value(state["config"], "config").get("configurable") or {})
    parent = (decode_value(state.get("parent_config")) or {}).get("configurable") or {}
    at = {
        "thread_id": configurable.get("thread_id"),
        "checkpoint_ns": configurable.get("checkpoint_ns", ""),
    }
    if parent.get("checkpoint_id"):
        at["checkpoint_id"] = parent["checkpoint_id"]
    saved = saver.put(
        {"configurable": at}, checkpoint, metadata, dict(checkpoint.get("channel_versions") or {})
    )
    writes = state.get("pending_writes") or []
    for task, group in itertools.groupby(writes, key=lambda write: write[0]):
        pending = [
            (channel, decode_value(value, f"pending write {channel}"))
            for _, channel, value in group
        ]
        saver.put_writes(saved, pending, task)
    return saver


@dataclass(frozen=True)
class Seed:
    """What a replay gives a graph run: the recorded state, and what the run recorded.

    ``checkpointer`` holds the recorded state (None: the graph ran without one);
    ``recorded`` is the run's ``metadata.langgraph``, journaled again as it was (the state
    is the recording's by construction).
    """

    checkpointer: Any
    recorded: Mapping[str, Any]


_SEED: ContextVar[Seed | None] = ContextVar("agent_journal_langgraph_seed", default=None)


@contextmanager
def seeded(seed: Seed) -> Iterator[Seed]:
    """Inside the block, a captured graph runs on ``seed``'s checkpointer (a replay's)."""
    token = _SEED.set(seed)
    try:
        yield seed
    finally:
        _SEED.reset(token)


# -- the graph -------------------------------------------------------------------------------


def _with_tracker(config: Mapping[str, Any] | None, tracker: NodeTracker) -> dict[str, Any]:
    """``config`` with ``tracker`` among its callbacks (a list, a manager, or none)."""
    given = dict(config or {})
    callbacks = given.get("callbacks")
    if isinstance(callbacks, BaseCallbackManager):
        manager = callbacks.copy()
        manager.add_handler(tracker, inherit=True)
        given["callbacks"] = manager
    else:
        given["callbacks"] = [*(callbacks or []), tracker]
    return given


def _recorded_config(config: Mapping[str, Any] | None) -> Any:
    """The config a run was given, as recorded (its callbacks are the code's, not input)."""
    return encode_value({k: v for k, v in (config or {}).items() if k != "callbacks"})


class _Run:
    """One run of a captured graph: what to run it on, and what its session records."""

    def __init__(
        self, owner: CapturedGraph, method: str, given: Any, config: Any, kwargs: dict[str, Any]
    ) -> None:
        graph = owner.graph
        seed = _SEED.get() if replay_target() is not None else None
        self.tracker = NodeTracker()
        self.config = _with_tracker(config, tracker=self.tracker)
        self.owner = owner
        configurable = (config or {}).get("configurable") or {}
        if seed is not None:
            if seed.checkpointer is not None:
                graph = graph.copy(update={"checkpointer": seed.checkpointer})
            state = dict(seed.recorded)
            state.update(graph=graph.name)
        else:
            checkpointer = getattr(graph, "checkpointer", None)
            state = {
                "graph": graph.name,
                "thread_id": jsonable(configurable.get("thread_id")),
                "checkpointer": None if checkpointer is None else type(checkpointer).__name__,
                "checkpoint": _loaded_state(checkpointer, config or {}),
            }
        self.graph = graph
        self.state = state
        self.inputs = json.dumps(
            {
                "method": method,
                "input": encode_value(given),
                "config": _recorded_config(config),
                "kwargs": encode_value(kwargs),
            },
            ensure_ascii=False,
        )

    @contextmanager
    def session(self) -> Iterator[CapturedSession]:
        with self.owner.__capture__.session(
            entry=self.owner.reference(),
            inputs=self.inputs,
            metadata={METADATA_KEY: self.state},
            captured_with=CAPTURED_WITH,
        ) as session:
            yield session


class CapturedGraph:
    """A compiled graph whose runs are sessions; anything else is the graph's (see the module).

    Args:
        capture: the `capture.Capture` the sessions go to (its tools are the graph's).
        graph: the compiled graph (``StateGraph(...).compile(...)``, ``create_react_agent``).
        name: the ``module:attribute`` a replay loads it from; by default the module-level
            name this object is bound to in ``caller``'s module.
        caller: the module ``Capture.graph`` was called from.
    """

    def __init__(
        self, capture: Capture, graph: Any, *, name: str | None, caller: str | None
    ) -> None:
        self.graph = graph
        self.__capture__ = capture
        self._name: str | None = name
        self._caller = caller

    def __getattr__(self, name: str) -> Any:
        return getattr(self.graph, name)

    def reference(self) -> str | None:
        """``module:attribute`` of this object (what a replay loads), when it can be found."""
        if self._name is not None:
            return self._name
        module = sys.modules.get(self._caller or "")
        for attribute, value in vars(module).items() if module is not None else ():
            if value is self:
                found = f"{self._caller}:{attribute}"
                self._name = found
                return found
        return None

    def invoke(self, input: Any, config: Any = None, **kwargs: Any) -> Any:
        """``graph.invoke``, as one session; its output is the answer."""
        run = _Run(self, "invoke", input, config, kwargs)
        with run.session() as session:
            output = run.graph.invoke(input, run.config, **kwargs)
            session.finish(encode_value(output, answer=True))
        return output

    async def ainvoke(self, input: Any, config: Any = None, **kwargs: Any) -> Any:
        """``graph.ainvoke``, as one session; its output is the answer."""
        run = _Run(self, "ainvoke", input, config, kwargs)
        with run.session() as session:
            output = await run.graph.ainvoke(input, run.config, **kwargs)
            session.finish(encode_value(output, answer=True))
        return output

    def stream(self, input: Any, config: Any = None, **kwargs: Any) -> Generator[Any, None, None]:
        """``graph.stream``, as one session; the chunks it yields are the answer.

        A stream left before its end is journaled with the chunks read.
        """
        run = _Run(self, "stream", input, config, kwargs)
        with run.session() as session:
            read: list[Any] = []
            try:
                for chunk in run.graph.stream(input, run.config, **kwargs):
                    read.append(encode_value(chunk, answer=True))
                    yield chunk
            except GeneratorExit:
                session.finish(read)
                raise
            session.finish(read)

    async def astream(self, input: Any, config: Any = None, **kwargs: Any) -> AsyncIterator[Any]:
        """``graph.astream``, as one session; the chunks it yields are the answer."""
        run = _Run(self, "astream", input, config, kwargs)
        with run.session() as session:
            read: list[Any] = []
            try:
                async for chunk in run.graph.astream(input, run.config, **kwargs):
                    read.append(encode_value(chunk, answer=True))
                    yield chunk
            except GeneratorExit:
                session.finish(read)
                raise
            session.finish(read)
