"""Capture of the user's own code: an entry function, its model client and its tools.

Three wrappers, and the code between them stays as it is::

    from openai import OpenAI
    from capture import Capture

    capture = Capture("agent-journal.db")
    client = capture.openai(OpenAI())          # chat.completions.create, responses.create
    claude = capture.anthropic(Anthropic())    # messages.create, messages.stream
    gemini = capture.genai(genai.Client())     # models.generate_content(_stream)
    # MCP tools: call_tool, list_tools; side effects unless declared pure or io
    async with capture.mcp_stdio(params, pure={"search"}) as shop: ...
    capture.litellm()                          # litellm.completion, litellm.acompletion

    @capture.tool
    def lookup_order(order_id: str) -> dict: ...

    @capture.tool(side_effects=True)           # never run by a replay unless allowed
    def send_email(to: str, body: str) -> str: ...

    @capture.tool(pure=True)                   # run by a replay and compared
    def order_total(items: list[dict]) -> float: ...

    @capture.entry                             # each call is one session
    def answer(question: str) -> str:
        ...  # the loop you already have: client.chat.completions.create, your tools

A call of ``answer(...)`` is one session, whose ``session_started`` names the entry
(``module:qualname``, what ``agent-journal replay`` calls again, under the trust list) and
keeps its arguments. Inside it, each model call is journaled as ``action_proposed`` with
the request beside the raw response (`capture.requests`), the user messages a
request brings as ``user_input``, each decorated tool's call with its arguments exactly as
received and its outcome (the value, or the exception with its type: `exception_record`),
in the order the model proposed the calls; the entry's return value ends the turn
(``agent_completed``) and an exception escaping it fails the session (``agent_halted``,
rule ``error``) before it propagates. Outside an entry the wrappers call straight through.
`Capture.session` is the same scope around any block (the entry decorator uses it), with
metadata and tags given at open.

Where the events go, and how (fail open to a spool, redaction, tail sampling), is the
capture's `Destination` (`capture.output`).

Inside `capture.replaying` (what a replay sets up), the same calls are journaled
the same way, but their outcomes come from the replay's `Player`.
"""

from __future__ import annotations

import functools
import inspect
import json
import sys
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import (
    AbstractAsyncContextManager,
    AbstractContextManager,
    ExitStack,
    contextmanager,
)
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast, overload

from journal import Journal, json_stand_in
from journal.formats import Redactor

from .output import Destination, Durability, Sampling
from .placement import current_session, opened, session_of_call
from .play import replay_target
from .recorder import Recorder
from .requests import jsonable
from .returns import return_type
from .session import CAPTURED_WITH, RUNNING_TOOL, CapturedSession, ToolInfo, inside_a_tool
from .spool import Spool
from .writer import DEFAULT_WINDOW

if TYPE_CHECKING:
    from .clients.litellm import LitellmScope

__all__ = [
    "CAPTURED_WITH",
    "Capture",
    "CapturedSession",
    "ToolInfo",
    "reference_of",
]

F = TypeVar("F", bound=Callable[..., Any])
M = TypeVar("M")
G = TypeVar("G")


def _is_langchain_tool(value: object) -> bool:
    """Whether ``value`` is a LangChain tool, told without importing LangChain."""
    return any(
        cls.__name__ == "BaseTool" and cls.__module__ == "langchain_core.tools.base"
        for cls in type(value).__mro__
    )


def _caller_module() -> str | None:
    """The module of the code that called the `Capture` method that calls this."""
    frame = sys._getframe(2)
    name = frame.f_globals.get("__name__")
    return name if isinstance(name, str) else None


def reference_of(function: Callable[..., Any]) -> str:
    """``module:qualname`` of a function, with ``__main__`` named as the file it runs from.

    A file run as a script inside a package (``python pkg/app.py``) is named as its package
    imports it (``pkg.app``): the folders up to the first without an ``__init__.py``.
    """
    module = function.__module__
    if module == "__main__":
        main = sys.modules.get("__main__")
        spec = getattr(main, "__spec__", None)
        if spec is not None and spec.name:
            module = spec.name
        elif getattr(main, "__file__", None):
            module = _module_of(Path(str(getattr(main, "__file__", ""))).resolve())
    return f"{module}:{function.__qualname__}"


def is_method(function: Callable[..., Any]) -> bool:
    """Whether ``function`` is a method: defined in a class, taking ``self`` or ``cls`` first.

    Its receiver is no JSON value: a tool's is left out of its recorded arguments, and a
    method entry cannot be replayed.
    """
    owner = getattr(function, "__qualname__", "").rpartition(".")[0]
    if not owner or owner.endswith("<locals>"):
        return False
    try:
        first = next(iter(inspect.signature(function).parameters), None)
    except (TypeError, ValueError):
        return False
    return first in ("self", "cls")


def _module_of(path: Path) -> str:
    names = [path.stem]
    folder = path.parent
    while (folder / "__init__.py").is_file() and folder.parent != folder:
        names.append(folder.name)
        folder = folder.parent
    return ".".join(reversed(names))


def _joins_a_session() -> bool:
    """Whether an entry or session block starting here is part of the current session.

    It is when there is one, and no decorated tool runs for real here outside a replay
    (`Capture.session`).
    """
    return current_session() is not None and (
        RUNNING_TOOL.get() is None or replay_target() is not None
    )


class Capture:
    """Captures entry functions, a model client and tools into a journal.

    Args:
        journal: a `Journal`, or where to open one (a path or a ``postgresql://`` URL),
            opened at the first write.
        metadata: kept in every session's ``session_started``.
        fail_open: when the journal cannot take a write, spool the session and let the
            call go on (default); False raises the journal's error instead.
        spool: where spooled sessions go (default: beside the journal; see
            `capture.output.Destination`).
        redactor: redact every event before it is written (`journal.formats.Redactor`).
        sampling: tail sampling (`Sampling`); its share and rule go into each session's
            metadata (``sampling``).
        durability: ``"grouped"`` (default): the caller's thread queues each event and a
            background writer commits them in groups, durable before a tool declared with
            ``side_effects=True`` runs, at the end of each session and at a clean exit;
            ``"each"``: every event in its own commit before the call goes on (always so
            with ``fail_open=False``). See `capture.output` and docs/capture.md.
        window: with grouped durability, the seconds a queued event waits for others
            before the writer commits them: the most a SIGKILL can take.
    """

    def __init__(
        self,
        journal: Journal | str | Path,
        *,
        metadata: Mapping[str, Any] | None = None,
        fail_open: bool = True,
        spool: Spool | str | Path | None = None,
        redactor: Redactor | None = None,
        sampling: Sampling | None = None,
        durability: Durability = "grouped",
        window: float = DEFAULT_WINDOW,
    ) -> None:
        self.destination = Destination(
            journal,
            fail_open=fail_open,
            spool=spool,
            redactor=redactor,
            sampling=sampling,
            durability=durability,
            window=window,
        )
        """Where sessions go, and how (redaction, sampling, the spool)."""
        self.metadata = dict(metadata or {})
        if sampling is not None:  # given to a replay too, so its metadata matches
            self.metadata["sampling"] = sampling.record()
        self.tools: dict[str, ToolInfo] = {}
        """The decorated tools by name (a replay checks its live tools against them)."""
        self._scopes: list[AbstractContextManager[Any]] = []
        """What each session holds open while it runs (`litellm`'s patch)."""

    @property
    def journal(self) -> Journal:
        """The journal sessions go to (opened on first use)."""
        return self.destination.journal

    @journal.setter
    def journal(self, journal: Journal) -> None:
        self.destination.journal = journal

    def openai(self, client: F) -> F:
        """The openai client (``OpenAI`` or ``AsyncOpenAI``), journaling inside sessions."""
        from .clients.openai import captured_client

        wrapped: F = captured_client(client)
        return wrapped

    def anthropic(self, client: F) -> F:
        """The anthropic client (``Anthropic`` or ``AsyncAnthropic``), journaling inside sessions.

        ``messages.create`` (streamed or not) and the ``messages.stream`` helper
        (`capture.clients.anthropic`); needs ``pip install 'agent-journal[anthropic]'``.
        """
        from .clients.anthropic import captured_anthropic

        wrapped: F = captured_anthropic(client)
        return wrapped

    def genai(self, client: F) -> F:
        """The google-genai client (``genai.Client``), journaling inside sessions.

        ``models.generate_content`` and ``models.generate_content_stream``, of
        ``client.aio.models`` too, and the chats that call them (`capture.clients.genai`);
        needs ``pip install 'agent-journal[genai]'``.
        """
        from .clients.genai import captured_genai

        wrapped: F = captured_genai(client)
        return wrapped

    def mcp(self, session: M, *, pure: Collection[str] = (), io: Collection[str] = ()) -> M:
        """An ``mcp.ClientSession`` whose ``call_tool`` and ``list_tools`` are journaled.

        An MCP tool has side effects unless named here: ``pure`` ones are run by a replay
        and compared, ``io`` ones served from the recording (`capture.clients.mcp`). The
        code keeps the session it opened, so a replay spawns its server as it does; open it
        with `mcp_stdio` instead to spawn none in a replay. Needs
        ``pip install 'agent-journal[mcp]'``.
        """
        from .clients.mcp import CapturedMCP, ToolModes

        modes = ToolModes(frozenset(pure), frozenset(io))
        wrapped: Any = CapturedMCP(session, modes, self.tools)
        return cast(M, wrapped)

    def mcp_stdio(
        self,
        server: Any,
        *,
        pure: Collection[str] = (),
        io: Collection[str] = (),
        **session_options: Any,
    ) -> AbstractAsyncContextManager[Any]:
        """Spawn the MCP server ``server`` (``mcp.StdioServerParameters``) and capture its session.

        ``async with capture.mcp_stdio(params) as session:`` gives the initialized session,
        wrapped as `mcp` wraps one (``pure``, ``io`` as there; ``session_options`` go to
        ``ClientSession``). In a replay no server is spawned until a call must reach it (a
        pure tool, one named live), so served calls need no server at all.
        """
        from .clients.mcp import ToolModes, connect_stdio

        modes = ToolModes(frozenset(pure), frozenset(io))
        return connect_stdio(server, modes, self.tools, **session_options)

    def litellm(self) -> LitellmScope:
        """Journal ``litellm.completion`` and ``litellm.acompletion`` in this capture's sessions.

        No wrapper to hold: while a session of this capture is open (an entry call, a
        `session` block, a replay of either), the ``litellm`` module's two functions are
        journaled ones, so code that calls ``litellm.completion`` (an upstream harness the
        user does not edit) is captured as it is; litellm's own come back when no session
        is open. The returned `capture.clients.litellm.LitellmScope` holds the patch for a
        ``with`` block of its own too. Needs ``pip install 'agent-journal[litellm]'``.
        """
        from .clients.litellm import LitellmScope

        scope = next((s for s in self._scopes if isinstance(s, LitellmScope)), None)
        if scope is None:
            scope = LitellmScope()
            self._scopes.append(scope)
        return scope

    def langchain(self, model: M) -> M:
        """A LangChain chat model (``ChatOpenAI(...)``, any ``BaseChatModel``), journaling.

        It is an instance of the model's own class (`capture.frameworks.langchain`):
        ``invoke``, ``stream``, ``bind_tools``, ``with_structured_output`` and the rest are
        the model's, and each call is journaled inside a session.
        """
        from .frameworks.langchain import journaled_model

        return journaled_model(model)  # type: ignore[arg-type,return-value]

    def graph(self, graph: G, *, name: str | None = None) -> G:
        """A compiled LangGraph graph whose every run is a session (`capture.frameworks.langgraph`).

        ``name`` is the ``module:attribute`` a replay loads the graph from (by default the
        module-level name the returned object is bound to where ``graph`` was called).
        """
        from .frameworks.langgraph import CapturedGraph

        return CapturedGraph(self, graph, name=name, caller=_caller_module())  # type: ignore[return-value]

    # -- tools -------------------------------------------------------------------------

    @overload
    def tool(self, function: F, /) -> F: ...

    @overload
    def tool(
        self,
        function: None = None,
        /,
        *,
        name: str | None = None,
        side_effects: bool = False,
        pure: bool = False,
    ) -> Callable[[F], F]: ...

    def tool(
        self,
        function: Any = None,
        /,
        *,
        name: str | None = None,
        side_effects: bool = False,
        pure: bool = False,
    ) -> Any:
        """Decorate a tool: journal its calls inside sessions, replay them from the record.

        How a replay treats it is declared here. By default its recorded outcomes are
        served (a tool that does I/O: a lookup, a fetch). ``pure=True`` marks a function of
        its arguments alone: a replay runs it and compares its outcome with the recorded
        one, so a fix inside it diverges at its result with no flag. ``side_effects=True``
        marks a tool that changes the world (sends, writes, pays): a replay never runs it
        for real unless allowed by name. ``--live-tool`` and ``--live-tools`` override the
        first two.

        Raises:
            ValueError: both ``pure`` and ``side_effects``.
        """
        if pure and side_effects:
            raise ValueError("a tool is pure or has side effects, not both")

        def decorate(function: F) -> F:
            if _is_langchain_tool(function):  # @tool, a StructuredTool, any BaseTool
                from .frameworks.langchain import journaled_tool

                info = ToolInfo(
                    name or str(getattr(function, "name", "")),
                    side_effects=side_effects,
                    pure=pure,
                )
                self.tools[info.name] = info
                return journaled_tool(function, info)  # type: ignore[arg-type,return-value]
            info = ToolInfo(name or function.__name__, side_effects=side_effects, pure=pure)
            self.tools[info.name] = info
            signature = inspect.signature(function)
            # resolved at the first served result: a later class may be named before it exists
            returns = functools.cache(functools.partial(return_type, function))
            receiver = next(iter(signature.parameters)) if is_method(function) else None

            def arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
                bound = signature.bind(*args, **kwargs)
                # (NaN or an integer past 64 bits, as a model may send, as strings: the
                # call goes on, and pairs with its recorded outcome in a replay)
                return {
                    key: json_stand_in(jsonable(value))
                    for key, value in bound.arguments.items()
                    if key != receiver
                }

            if inspect.iscoroutinefunction(function):

                @functools.wraps(function)
                async def arun(*args: Any, **kwargs: Any) -> Any:
                    if inside_a_tool(info.name, side_effects=info.side_effects):
                        return await function(*args, **kwargs)
                    session = session_of_call(
                        f"tool {info.name}", lambda: (info.name, arguments(args, kwargs))
                    )
                    if session is None:
                        return await function(*args, **kwargs)
                    return await session.acall_tool(
                        info, arguments(args, kwargs), lambda: function(*args, **kwargs), returns
                    )

                return arun  # type: ignore[return-value]

            @functools.wraps(function)
            def run(*args: Any, **kwargs: Any) -> Any:
                if inside_a_tool(info.name, side_effects=info.side_effects):
                    return function(*args, **kwargs)
                session = session_of_call(
                    f"tool {info.name}", lambda: (info.name, arguments(args, kwargs))
                )
                if session is None:
                    return function(*args, **kwargs)
                return session.call_tool(
                    info, arguments(args, kwargs), lambda: function(*args, **kwargs), returns
                )

            return run  # type: ignore[return-value]

        return decorate if function is None else decorate(function)

    # -- entries -----------------------------------------------------------------------

    @overload
    def entry(self, function: F, /) -> F: ...

    @overload
    def entry(self, function: None = None, /, *, name: str | None = None) -> Callable[[F], F]: ...

    def entry(self, function: Any = None, /, *, name: str | None = None) -> Any:
        """Decorate the function that runs one session (one call, one session).

        ``name`` overrides the recorded reference (``module:qualname``); a replay calls
        what it names, with the recorded arguments (so they should be JSON values).
        """

        def decorate(function: F) -> F:
            reference = name or reference_of(function)

            def inputs(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
                # as text: a replay passes dicts back with their keys in their own order
                given = {"args": jsonable(list(args)), "kwargs": jsonable(kwargs)}
                return json.dumps(given, ensure_ascii=False)

            if inspect.iscoroutinefunction(function):

                @functools.wraps(function)
                async def arun(*args: Any, **kwargs: Any) -> Any:
                    if _joins_a_session():
                        return await function(*args, **kwargs)
                    with self.session(entry=reference, inputs=inputs(args, kwargs)) as session:
                        result = await function(*args, **kwargs)
                        session.finish(result)
                        return result

                arun.__capture__ = self  # type: ignore[attr-defined]
                return arun  # type: ignore[return-value]

            @functools.wraps(function)
            def run(*args: Any, **kwargs: Any) -> Any:
                if _joins_a_session():
                    return function(*args, **kwargs)
                with self.session(entry=reference, inputs=inputs(args, kwargs)) as session:
                    result = function(*args, **kwargs)
                    session.finish(result)
                    return result

            run.__capture__ = self  # type: ignore[attr-defined]
            return run  # type: ignore[return-value]

        return decorate if function is None else decorate(function)

    @contextmanager
    def session(
        self,
        *,
        entry: str | None = None,
        inputs: Any = None,
        metadata: Mapping[str, Any] | None = None,
        tags: Sequence[str] = (),
        captured_with: str = CAPTURED_WITH,
    ) -> Iterator[CapturedSession]:
        """One session around a block: the wrapped client and tools journal into it.

        What `entry` does for a function, for any block of code::

            with capture.session(metadata={"customer": "c-42"}, tags=["beta"]) as session:
                ...  # client.chat.completions.create, decorated tools
                session.finish(answer)  # optional: else the model's last text ends the turn

        An exception escaping the block (a cancellation too) ends the session as failed
        (``agent_halted``, rule ``error``, with the exception's record) and propagates.
        ``metadata`` and ``tags`` (as ``metadata.tags``) join the capture's metadata in
        ``session_started``; ``entry`` is the ``module:qualname`` a replay calls with
        ``inputs``, which are recorded as ``metadata.entry_inputs`` (JSON text; a string is
        kept as it is). In a replay (inside `replaying`) the session is the replay's. Inside
        a session already, the block is part of that one; but inside a decorated tool that
        runs for real (an agent used as a tool), outside a replay, it is a session of its
        own, replayable on its own: the outer session records the tool's outcome.
        ``captured_with`` names the replay path of the session (a framework's wrapper sets
        it: `capture.frameworks.langgraph`).
        """
        outer = current_session()
        target = replay_target()
        if outer is not None and _joins_a_session():
            yield outer  # inside a session already: the block is part of it
            return
        if target is None:
            recorder = Recorder(self.destination)
            player = None
        else:
            recorder = Recorder(
                target.journal,
                target.session_id,
                clock=target.clock,
                replay_of=target.replay_of,
                order=target.order,
                model_failures=target.model_failures,
            )
            player = target.player
        given = {**self.metadata, **dict(metadata or {})}
        if tags:
            given["tags"] = list(tags)
        session = CapturedSession(
            recorder,
            entry=entry,
            inputs=inputs if isinstance(inputs, str) else json.dumps(jsonable(inputs)),
            metadata=given,
            player=player,
            captured_with=captured_with,
        )
        running = RUNNING_TOOL.set(None)  # its tools are its own, not part of an outer tool
        try:
            with ExitStack() as scopes, opened(session):
                for scope in self._scopes:
                    scopes.enter_context(scope)
                yield session
                session.finish(None, given=False)
        except GeneratorExit:
            raise
        except BaseException as error:  # a cancellation, a Ctrl-C end it as failed too
            session.fail(error)
            raise
        finally:
            RUNNING_TOOL.reset(running)
            recorder.close()
