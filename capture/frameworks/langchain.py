"""LangChain: a chat model and tools journaled where a chain or a graph calls them.

Two wrappers, each returning an object of the wrapped one's own class, so code that checks
``isinstance(model, ChatOpenAI)`` or hands the tools to a ``ToolNode`` cannot tell them from
the originals::

    capture = Capture("agent-journal.db")
    model = capture.langchain(ChatOpenAI(model="gpt-4.1"))  # any BaseChatModel

    @capture.tool            # above LangChain's @tool (or on a StructuredTool, a BaseTool)
    @tool
    def lookup_order(order_id: str) -> dict: ...

`journaled_model` makes a subclass of the model's class whose ``_generate`` (and
``_agenerate``, ``_stream``, ``_astream`` where the class implements them) journals each
call through the captured session the code runs in, as the openai client wrapper does:
``invoke``, ``ainvoke``, ``batch``, ``stream``, ``astream``, ``bind_tools`` and
``with_structured_output`` are the class's own and all reach one of them. A call records
its request (`model_request`: the messages as LangChain serialises them, the tools, the
model's invocation parameters, the graph node it came from) beside the ``ChatResult`` the
model class made (every generation's message with its ``tool_calls``, usage and response
metadata, or a stream's chunks), and a call that raised as ``model_call_failed``. In a
replay the `capture.Player` serves the recorded result instead, rebuilt as LangChain's own
types, and LangChain's code after ``_generate`` (callbacks, metadata, the graph) runs as it
did.

`journaled_tool` makes a subclass of a tool's class whose ``_run`` and ``_arun`` go through
the session: the arguments the model sent (the tool's own schema, not the values LangChain
injects: the config, the run manager, ``InjectedState``), the value, or the exception (a
``ToolException`` too: LangChain's ``handle_tool_error`` and a ``ToolNode`` turn it into a
message after it is journaled, and do so again in a replay that raises it again). A call
the model made that no journaled tool answered (a ``ToolNode``'s argument validation, an
undecorated tool) is journaled from the tool message the next request carries, an error
message as a failure.
"""

from __future__ import annotations

import functools
import json
import operator
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, cast

from journal import ToolCall, Usage, loads_exact

from .._extras import missing_extra
from ..clients.calls import _recorded_turn
from ..exceptions import raised_by_model_call, rebuilt
from ..placement import session_of_call
from ..play import FailedCall
from ..requests import jsonable
from ..returns import return_type
from ..session import CapturedSession, ToolInfo, inside_a_tool

try:
    from langchain_core.callbacks import BaseCallbackHandler
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import (
        AIMessage,
        AIMessageChunk,
        BaseMessage,
    )
    from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
    from langchain_core.runnables.config import var_child_runnable_config
    from langchain_core.tools import BaseTool, StructuredTool
    from langchain_core.utils.function_calling import convert_to_openai_tool
    from pydantic import BaseModel
except ImportError as error:  # pragma: no cover - exercised with the package hidden
    raise missing_extra("langchain-core", "langgraph", error) from error

__all__ = [
    "KIND",
    "NodeTracker",
    "journaled_model",
    "journaled_tool",
    "model_request",
    "proposal_of",
    "seen_message",
]

KIND = "langchain"
"""The response kind of a journaled LangChain model call (`CapturedSession.after_model`)."""

_SKIPPED_PARAMS = frozenset({"_type", "stream", "streaming"})
"""Invocation parameters that say how the call is made, not what the model is asked:
LangChain's class tag, and whether it streams (a ``stream()`` and an ``invoke()`` ask
the same)."""


def seen_message(message: BaseMessage) -> Any:
    """A message as LangChain serialises it (``model_dump``), without its ``id``.

    The id is not sent to the model, and LangGraph gives each message it stores a random
    one (``add_messages``), so it differs at every run.
    """
    return jsonable(message.model_dump(exclude={"id"}))


def _schema_of(value: Any) -> Any:
    """A structured-output schema as JSON: a pydantic class as its JSON Schema."""
    if isinstance(value, type) and issubclass(value, BaseModel):
        return {"title": value.__name__, "schema": value.model_json_schema()}
    if isinstance(value, Mapping):
        return {key: _schema_of(item) for key, item in value.items()}
    return value


def _tool_of(tool: Any) -> Any:
    """A bound tool as JSON: a spec as given, a tool object as its OpenAI function spec."""
    if isinstance(tool, Mapping):
        return dict(tool)
    try:
        return convert_to_openai_tool(tool)
    except Exception:  # a tool form LangChain itself cannot convert: named by its repr
        return jsonable(tool)


class NodeTracker(BaseCallbackHandler):
    """The graph nodes that start, for the requests that follow them (`model_request`).

    `capture.frameworks.langgraph` adds one to each captured graph run's callbacks; a model
    call journaled inside the run names the nodes that started since the previous one
    (``graph.ran``, ``[step, node]`` in step order, a step's nodes by name: those of one
    step run at once), so a node added before a model call or an edge that now routes
    elsewhere changes the request it reaches.
    """

    raise_error = False
    run_inline = True

    def __init__(self) -> None:
        self.root: Any = None
        self._started: list[tuple[int, str]] = []

    def on_chain_start(
        self,
        serialized: Any,
        inputs: Any,
        *,
        run_id: Any,
        parent_run_id: Any = None,
        metadata: dict[str, Any] | None = None,
        name: str | None = None,
        **kwargs: Any,
    ) -> None:
        """Note a node of the graph's own run starting (not a chain inside a node)."""
        if parent_run_id is None and self.root is None:
            self.root = run_id
            return
        node = (metadata or {}).get("langgraph_node")
        step = (metadata or {}).get("langgraph_step")
        if parent_run_id == self.root and node == name and isinstance(step, int):
            self._started.append((step, str(node)))

    def take(self) -> list[list[Any]]:
        """The nodes started since the last `take`, in step order."""
        started, self._started = self._started, []
        return [[step, node] for step, node in sorted(started)]


def _graph_context(run_manager: Any) -> dict[str, Any] | None:
    """Where in a graph a model call is made: its node and step, the nodes run before it."""
    metadata = getattr(run_manager, "metadata", None) or {}
    if "langgraph_node" not in metadata:
        config = var_child_runnable_config.get() or {}
        metadata = config.get("metadata") or {}
    if "langgraph_node" not in metadata:
        return None
    handlers = list(getattr(run_manager, "handlers", None) or ())
    if run_manager is None:  # (a stream's ``_stream`` is given none: the config's callbacks)
        callbacks: Any = (var_child_runnable_config.get() or {}).get("callbacks")
        handlers = list(getattr(callbacks, "handlers", None) or callbacks or ())
    tracker = next((h for h in handlers if isinstance(h, NodeTracker)), None)
    return {
        "node": metadata.get("langgraph_node"),
        "step": metadata.get("langgraph_step"),
        "ran": [] if tracker is None else tracker.take(),
    }


def model_request(
    model: BaseChatModel,
    messages: Sequence[BaseMessage],
    stop: list[str] | None,
    run_manager: Any,
    kwargs: Mapping[str, Any],
) -> dict[str, Any]:
    """What a model call asks, as the capture records it.

    The model's invocation parameters as LangChain reports them (what its cache keys on:
    the model's name and settings, the bound ``tools``, ``tool_choice``, a structured
    output's schema), the messages (`seen_message`), and ``graph`` when the call is made in
    a graph node (`NodeTracker`). ``model`` is the model's name (``ls_model_name``).
    """
    params = model._get_invocation_params(stop=stop, **kwargs)
    request: dict[str, Any] = {
        key: _schema_of(value) for key, value in params.items() if key not in _SKIPPED_PARAMS
    }
    if "tools" in request and isinstance(request["tools"], Sequence):
        request["tools"] = [_tool_of(tool) for tool in request["tools"]]
    name = model._get_ls_params(stop=stop, **kwargs).get("ls_model_name")
    request["model"] = name if isinstance(name, str) else request.get("model_name")
    request["messages"] = [seen_message(message) for message in messages]
    graph = _graph_context(run_manager)
    if graph is not None:
        request["graph"] = graph
    return request


def _arguments_text(args: Any) -> str:
    """A tool call's arguments as JSON text, keys in their order."""
    return json.dumps(jsonable(args), ensure_ascii=False)


def _generation(generation: ChatGeneration) -> dict[str, Any]:
    """A generation as the journal keeps it, with each tool call's arguments as text.

    The journal's JSON sorts an object's keys; the text keeps the order the model gave
    them in, which a replay gives the tools again (`_message`).
    """
    message = generation.message
    calls = message.tool_calls if isinstance(message, AIMessage) else []
    return {
        "message": jsonable(message.model_dump()),
        "generation_info": jsonable(generation.generation_info),
        "arguments": [_arguments_text(call["args"]) for call in calls],
    }


def _result_body(result: ChatResult) -> dict[str, Any]:
    """A ``ChatResult`` as the journal keeps it (``action_proposed.response``)."""
    return {
        "generations": [_generation(generation) for generation in result.generations],
        "llm_output": jsonable(result.llm_output),
    }


_MESSAGE_TYPES: dict[str, type[BaseMessage]] = {"ai": AIMessage, "AIMessageChunk": AIMessageChunk}
"""The message classes a recorded response is rebuilt as: a model answers with these only."""


def _message(generation: Mapping[str, Any]) -> BaseMessage:
    """The message of a recorded generation, its tool calls' arguments in their order."""
    body = dict(generation["message"])
    texts = generation.get("arguments") or []
    calls = body.get("tool_calls") or []
    if body.get("type") == "ai" and len(texts) == len(calls):
        body["tool_calls"] = [
            {**call, "args": loads_exact(text)} for call, text in zip(calls, texts, strict=True)
        ]
    kind = _MESSAGE_TYPES.get(str(body.get("type")), AIMessage)
    return kind.model_validate(body)


def _served_result(body: Mapping[str, Any]) -> ChatResult:
    """The ``ChatResult`` a recorded response body was."""
    return ChatResult(
        generations=[
            ChatGeneration(message=_message(g), generation_info=g.get("generation_info"))
            for g in body.get("generations") or []
        ],
        llm_output=body.get("llm_output"),
    )


def _served_chunk(body: Mapping[str, Any]) -> ChatGenerationChunk:
    message = _message(body)
    assert isinstance(message, AIMessageChunk)
    return ChatGenerationChunk(message=message, generation_info=body.get("generation_info"))


def proposal_of(response: Any, *, stream: bool, latency_ms: float | None) -> dict[str, Any]:
    """A journaled response (or a stream's chunks) as `Recorder.model_output` fields.

    The first generation's tool calls (arguments as parsed; a call LangChain could not
    parse keeps its raw text), its text, reasoning, model and usage.
    """
    if stream:
        chunks = [_served_chunk(chunk) for chunk in response]
        message: BaseMessage = (
            functools.reduce(operator.add, chunks).message if chunks else AIMessage(content="")
        )
    else:
        generations = response.get("generations") or []
        message = _message(generations[0]) if generations else AIMessage(content="")
    assert isinstance(message, AIMessage)
    calls = [
        ToolCall(
            call_id=str(call.get("id") or f"call_{index}"),
            tool=call["name"],
            args=call["args"],
            arguments=_arguments_text(call["args"]),
        )
        for index, call in enumerate(message.tool_calls)
    ] + [
        ToolCall(
            call_id=str(call.get("id") or f"invalid_{index}"),
            tool=str(call.get("name") or ""),
            args=str(call.get("args") or ""),
        )
        for index, call in enumerate(message.invalid_tool_calls)
    ]
    reasoning = [
        str(block.get("reasoning", ""))
        for block in message.content_blocks
        if block.get("type") == "reasoning"
    ]
    usage: Mapping[str, Any] = message.usage_metadata or {}
    details = usage.get("input_token_details") or {}
    metadata = message.response_metadata or {}
    model = metadata.get("model_name") or metadata.get("model")
    return {
        "calls": [call.with_text() for call in calls],
        "text": message.text or None,
        "reasoning": "\n".join(reasoning) or None,
        "model": model if isinstance(model, str) else None,
        "usage": Usage(
            input_tokens=usage.get("input_tokens", 0),
            output_tokens=usage.get("output_tokens", 0),
            cached_tokens=details.get("cache_read", 0) or 0,
        ),
        "latency_ms": latency_ms,
    }


# -- the model ---------------------------------------------------------------------------

_CALLING: ContextVar[int | None] = ContextVar("agent_journal_langchain_call", default=None)
"""The model (by id) whose journaled call runs in this context: a method of its class that
calls another (``_generate`` reading ``_stream`` when ``streaming=True``, the default
``_agenerate`` running ``_generate`` in a thread) is part of that call."""


class _Call:
    """One journaled call of a model: its session, its request, when it started."""

    def __init__(
        self,
        session: CapturedSession,
        model: BaseChatModel,
        messages: Sequence[BaseMessage],
        stop: list[str] | None,
        run_manager: Any,
        kwargs: Mapping[str, Any],
    ) -> None:
        self.session = session
        self.model = model
        request = model_request(model, messages, stop, run_manager, kwargs)
        self.record, self.whole, self.seq = self.session.before_model(request)
        self.started = self.session.timer()
        self.chunks: list[Any] = []
        """A live stream's chunks, as read."""

    def served(self) -> Any:
        """The recorded response to serve (None: call the model), in a replay."""
        player = self.session.player
        return None if player is None else player.model(self.seq, self.record, self.whole)

    async def aserved(self) -> Any:
        """`served` for an async call, once the code reaches the seq its reply was recorded at."""
        player = self.session.player
        if player is None:
            return None
        self.seq = await _recorded_turn(self.session, player, self.seq, self.record, self.whole)
        return player.model(self.seq, self.record, self.whole)

    def result(self, served: Any) -> ChatResult | None:
        """A served response as the model's ``ChatResult``; a failed call raised again."""
        if isinstance(served, FailedCall):
            raise self.raise_again(served)
        if served is None:
            return None
        self.answered(served, stream=False, live=False)
        return _served_result(served)

    @contextmanager
    def live(self, *, stream: bool = False) -> Iterator[None]:
        """The model called for real in the block: a call it makes is part of this one.

        An exception is journaled as the call's failure (with a stream's chunks read); a
        stream the code stops reading is journaled with what it read; a stream read to its
        end is journaled whole.
        """
        token = _CALLING.set(id(self.model))
        try:
            yield
        except GeneratorExit:
            self.answered(self.chunks, stream=True, live=True)
            raise
        except BaseException as error:
            raised_by_model_call(error)
            chunks = self.chunks if stream else None
            self.session.model_failed(self.record, error, latency_ms=self._latency(), chunks=chunks)
            raise
        finally:
            _CALLING.reset(token)
        if stream:
            self.answered(self.chunks, stream=True, live=True)

    def read(self, chunk: ChatGenerationChunk) -> ChatGenerationChunk:
        """Keep a live stream's chunk, and hand it on."""
        self.chunks.append(_generation(chunk))
        return chunk

    def _latency(self) -> float:
        return round((self.session.timer() - self.started) * 1000, 3)

    def answered(self, response: Any, *, stream: bool, live: bool) -> None:
        latency = self._latency() if live else None
        proposal = proposal_of(response, stream=stream, latency_ms=latency)
        self.session.after_model(
            KIND, self.record, response, stream=stream, latency_ms=None, proposal=proposal
        )

    def raise_again(self, failed: FailedCall) -> BaseException:
        error = raised_by_model_call(rebuilt(failed.error))
        self.session.model_failed(self.record, error, chunks=failed.chunks, recorded=failed.error)
        return error

    def served_stream(self, served: Any) -> Iterator[ChatGenerationChunk]:
        """A recorded stream, chunk by chunk; one that broke raises its error after them."""
        failed = served if isinstance(served, FailedCall) else None
        bodies = (failed.chunks or []) if failed is not None else served
        chunks = [_served_chunk(body) for body in bodies]
        if failed is None:
            self.answered(bodies, stream=True, live=False)
        yield from chunks
        if failed is not None:
            raise self.raise_again(failed)


def _session_of(model: BaseChatModel) -> CapturedSession | None:
    """The session a call of ``model`` journals into, if any.

    None when the call is part of a journaled call (of the model, or of a decorated tool's
    run), or made outside any session.
    """
    if _CALLING.get() == id(model) or inside_a_tool(None) is not None:
        return None
    return session_of_call("a LangChain model call")


def _generate(
    self: Any, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
) -> ChatResult:
    real = super(_JournaledModel, self)._generate
    session = _session_of(self)
    if session is None:
        return cast(ChatResult, real(messages, stop=stop, run_manager=run_manager, **kwargs))
    call = _Call(session, self, messages, stop, run_manager, kwargs)
    served = call.result(call.served())
    if served is not None:
        return served
    with call.live():
        result = real(messages, stop=stop, run_manager=run_manager, **kwargs)
    call.answered(_result_body(result), stream=False, live=True)
    return cast(ChatResult, result)


async def _agenerate(
    self: Any, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
) -> ChatResult:
    real = super(_JournaledModel, self)._agenerate
    session = _session_of(self)
    if session is None:
        return cast(ChatResult, await real(messages, stop=stop, run_manager=run_manager, **kwargs))
    call = _Call(session, self, messages, stop, run_manager, kwargs)
    served = call.result(await call.aserved())
    if served is not None:
        return served
    with call.live():
        result = await real(messages, stop=stop, run_manager=run_manager, **kwargs)
    call.answered(_result_body(result), stream=False, live=True)
    return cast(ChatResult, result)


def _stream(
    self: Any, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
) -> Iterator[ChatGenerationChunk]:
    real = super(_JournaledModel, self)._stream
    session = _session_of(self)
    if session is None:
        yield from real(messages, stop=stop, run_manager=run_manager, **kwargs)
        return
    call = _Call(session, self, messages, stop, run_manager, kwargs)
    served = call.served()
    if served is not None:
        for chunk in call.served_stream(served):
            if run_manager is not None:
                run_manager.on_llm_new_token(chunk.text, chunk=chunk)
            yield chunk
        return
    with call.live(stream=True):
        for chunk in real(messages, stop=stop, run_manager=run_manager, **kwargs):
            yield call.read(chunk)


async def _astream(
    self: Any, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
) -> AsyncIterator[ChatGenerationChunk]:
    real = super(_JournaledModel, self)._astream
    session = _session_of(self)
    if session is None:
        async for chunk in real(messages, stop=stop, run_manager=run_manager, **kwargs):
            yield chunk
        return
    call = _Call(session, self, messages, stop, run_manager, kwargs)
    served = await call.aserved()
    if served is not None:
        for chunk in call.served_stream(served):
            if run_manager is not None:
                await run_manager.on_llm_new_token(chunk.text, chunk=chunk)
            yield chunk
        return
    with call.live(stream=True):
        async for chunk in real(messages, stop=stop, run_manager=run_manager, **kwargs):
            yield call.read(chunk)


class _JournaledModel(BaseChatModel):
    """Marks a journaled model's class; its methods are set per class (`_journaled_class`)."""


_MODEL_CLASSES: dict[type, type] = {}


def _overrides(cls: type, name: str, base: type) -> bool:
    return getattr(cls, name) is not getattr(base, name)


def _journaled_class(cls: type[BaseChatModel]) -> type[BaseChatModel]:
    """The journaled subclass of a chat model class (one per class).

    It overrides ``_generate``, and ``_agenerate``, ``_stream`` and ``_astream`` only where
    ``cls`` implements them: LangChain decides whether a model streams from whether its
    class overrides ``_stream``. A native event stream (``_stream_chat_model_events``) is
    turned off, so LangChain's v2 streaming goes through the journaled ``_stream``.
    """
    if issubclass(cls, _JournaledModel):
        return cls
    found = _MODEL_CLASSES.get(cls)
    if found is not None:
        return found
    namespace: dict[str, Any] = {
        "__module__": cls.__module__,
        "__qualname__": cls.__qualname__,
        "_generate": _generate,
    }
    for name, method in (("_agenerate", _agenerate), ("_stream", _stream), ("_astream", _astream)):
        if _overrides(cls, name, BaseChatModel):
            namespace[name] = method
    made = cast(type[BaseChatModel], type(cls.__name__, (_JournaledModel, cls), namespace))
    for native in ("_stream_chat_model_events", "_astream_chat_model_events"):
        if getattr(cls, native, None) is not None:
            type.__setattr__(made, native, None)
    _MODEL_CLASSES[cls] = made
    return made


def journaled_model(model: BaseChatModel) -> BaseChatModel:
    """``model``, as an instance of its class that journals its calls (see the module).

    The copy shares the original's settings and clients; the original is left as it was.

    Raises:
        TypeError: ``model`` is no LangChain ``BaseChatModel``.
    """
    if not isinstance(model, BaseChatModel):
        raise TypeError(
            f"capture.langchain() takes a LangChain chat model (a BaseChatModel), not "
            f"{type(model).__name__}"
        )
    copied = model.model_copy()
    object.__setattr__(copied, "__class__", _journaled_class(type(model)))
    return copied


# -- tools -------------------------------------------------------------------------------

_TOOL_RUNNING: ContextVar[int | None] = ContextVar("agent_journal_langchain_tool", default=None)
"""The journaled tool (by id) whose call runs in this context: its ``_arun`` running its
``_run`` in a thread (a sync tool called by ``ainvoke``) is part of that call."""

_NOT_ARGUMENTS = frozenset({"run_manager", "callbacks", "config"})


def _model_arguments(
    tool: BaseTool, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> dict[str, Any]:
    """The arguments of a call as the model sent them (the tool's schema for the model).

    Not what LangChain injects (the run manager, the config, ``InjectedState``,
    ``InjectedToolCallId``). A single-input tool's text is ``__arg1``, as LangChain names
    it to the model.
    """
    if args:
        return {"__arg1": jsonable(args[0])} if len(args) == 1 else {"__args": jsonable(list(args))}
    schema = tool.tool_call_schema
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        names: set[str] | None = set(schema.model_fields)
    elif isinstance(schema, Mapping):
        names = set((schema.get("properties") or {}).keys())
    else:
        names = None
    return {
        key: jsonable(value)
        for key, value in kwargs.items()
        if key not in _NOT_ARGUMENTS and (names is None or key in names)
    }


def _response(tool: BaseTool, result: Any) -> Any:
    """A served result as the tool's ``_run`` gave it: a content-and-artifact pair as a tuple."""
    if (
        tool.response_format == "content_and_artifact"
        and isinstance(result, list)
        and len(result) == 2
    ):
        return tuple(result)
    return result


def _returns(tool: BaseTool) -> Any:
    function = getattr(tool, "func", None) or getattr(tool, "coroutine", None)
    if isinstance(tool, StructuredTool) and function is not None:
        return return_type(function)
    return return_type(type(tool)._run)


def _journaled_run(original: Callable[..., Any], info: ToolInfo) -> Callable[..., Any]:
    @functools.wraps(original)
    def _run(self: BaseTool, *args: Any, **kwargs: Any) -> Any:
        if _TOOL_RUNNING.get() == id(self) or inside_a_tool(
            info.name, side_effects=info.side_effects
        ):
            return original(self, *args, **kwargs)
        arguments = _model_arguments(self, args, kwargs)
        session = session_of_call(f"tool {info.name}", lambda: (info.name, arguments))
        if session is None:
            return original(self, *args, **kwargs)

        def run() -> Any:
            token = _TOOL_RUNNING.set(id(self))
            try:
                return original(self, *args, **kwargs)
            finally:
                _TOOL_RUNNING.reset(token)

        return _response(self, session.call_tool(info, arguments, run, lambda: _returns(self)))

    return _run


def _journaled_arun(original: Callable[..., Any], info: ToolInfo) -> Callable[..., Any]:
    @functools.wraps(original)
    async def _arun(self: BaseTool, *args: Any, **kwargs: Any) -> Any:
        if _TOOL_RUNNING.get() == id(self) or inside_a_tool(
            info.name, side_effects=info.side_effects
        ):
            return await original(self, *args, **kwargs)
        arguments = _model_arguments(self, args, kwargs)
        session = session_of_call(f"tool {info.name}", lambda: (info.name, arguments))
        if session is None:
            return await original(self, *args, **kwargs)

        async def run() -> Any:
            token = _TOOL_RUNNING.set(id(self))
            try:
                return await original(self, *args, **kwargs)
            finally:
                _TOOL_RUNNING.reset(token)

        result = await session.acall_tool(info, arguments, run, lambda: _returns(self))
        return _response(self, result)

    return _arun


def journaled_tool(tool: BaseTool, info: ToolInfo) -> BaseTool:
    """``tool``, as an instance of a subclass of its class that journals its calls.

    Its name, description and schema are the original's, so the model is shown the same
    tool; ``info`` names it in the journal and says how a replay treats it.

    Raises:
        TypeError: ``tool`` is no LangChain ``BaseTool``.
    """
    if not isinstance(tool, BaseTool):
        raise TypeError(f"not a LangChain tool: {type(tool).__name__}")
    cls = type(tool)
    namespace = {
        "__module__": cls.__module__,
        "__qualname__": cls.__qualname__,
        "_run": _journaled_run(cls._run, info),
        "_arun": _journaled_arun(cls._arun, info),
    }
    made = type(cls.__name__, (cls,), namespace)
    copied = tool.model_copy()
    object.__setattr__(copied, "__class__", made)
    return copied
