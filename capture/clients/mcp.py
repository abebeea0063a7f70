"""An MCP ``ClientSession``, wrapped: ``call_tool`` and ``list_tools`` journaled as tool calls.

`CapturedMCP` (what ``Capture.mcp`` returns) stands for an ``mcp.ClientSession``: inside a
captured session each ``call_tool(name, arguments)`` is a call of the tool ``name`` with
``arguments`` exactly as given, journaled through `CapturedSession.acall_tool` as a decorated
tool's is (paired with the model's proposed call of that name and arguments, in the order
the model proposed them), its outcome the server's ``CallToolResult`` in its wire form
(content blocks, ``isError``, ``structuredContent``, ``_meta``); an ``MCPError`` the server
raised is the call's failure. ``list_tools`` is a call of `LIST_TOOLS` whose outcome is the
``ListToolsResult``. Outside a session both call straight through; every other method of
the session is the session's own.

An MCP tool is another process's code, so it has side effects unless declared otherwise by
name (`ToolModes`): ``pure`` tools are run by a replay and compared, ``io`` tools are served
from the recording (as an undecorated ``@capture.tool`` is), any other is never run by a
replay unless named live and allowed (``--live-tool NAME --allow-side-effects NAME``).
``list_tools`` is served (``io``) unless declared pure.

In a replay the recorded outcome is served as the SDK's own type (``CallToolResult``,
``ListToolsResult``, validated as the client validates a server's answer), a recorded
``MCPError`` raised again as itself. `connect_stdio` (``Capture.mcp_stdio``) is the connect
helper: in production it spawns the server and initializes the session; in a replay it
spawns nothing until a call must reach the server (a pure tool, one named live), so a
replay of served calls runs with no server at all.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, MutableMapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from journal import HaltSession, json_stand_in

from .._extras import missing_extra
from ..exceptions import restore_with
from ..placement import session_of_call
from ..play import REPLAY_STOPPED, replay_target
from ..requests import jsonable
from ..session import CapturedSession, ToolInfo, inside_a_tool
from .mcp_names import LIST_TOOLS

try:
    import anyio
    from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client
    from mcp.types import CallToolResult, ErrorData, ListToolsResult, PaginatedRequestParams
except ImportError as error:  # pragma: no cover - exercised with the package hidden
    raise missing_extra("mcp", "mcp", error) from error

__all__ = ["LIST_TOOLS", "CapturedMCP", "ToolModes", "connect_stdio"]


@dataclass(frozen=True)
class ToolModes:
    """How a replay treats an MCP server's tools, by name; any other has side effects.

    ``pure``: a function of its arguments alone, run by a replay and compared. ``io``: reads
    the world without changing it, served from the recording. `LIST_TOOLS` may be in either
    (it is ``io`` when in neither).

    Raises:
        ValueError: a name in both.
    """

    pure: frozenset[str] = frozenset()
    io: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        both = sorted(self.pure & self.io)
        if both:
            raise ValueError(f"MCP tool {both[0]} is declared both pure and io")

    def info(self, name: str) -> ToolInfo:
        """The tool ``name`` as a `ToolInfo`: its mode as declared, else side effects."""
        if name in self.pure:
            return ToolInfo(name, pure=True)
        if name in self.io or name == LIST_TOOLS:
            return ToolInfo(name)
        return ToolInfo(name, side_effects=True)


def _arguments(arguments: Any) -> dict[str, Any]:
    """A call's arguments as journaled (NaN or an integer past 64 bits as strings)."""
    given = dict(arguments or {})
    return {key: json_stand_in(jsonable(value)) for key, value in given.items()}


def _whole(error: BaseException) -> None:
    """A replayed ``MCPError`` made whole: its ``error`` an ``ErrorData`` again.

    A replay rebuilds an exception from its record without calling ``__init__``
    (`capture.exceptions.rebuilt`), so the attribute holds the recorded JSON object (or
    nothing); ``code``, ``message`` and ``data`` (and ``str()``) read it.
    """
    recorded = error.__dict__.get("error")
    if not isinstance(error, MCPError) or isinstance(recorded, ErrorData):
        return
    if isinstance(recorded, dict):
        error.error = ErrorData.model_validate(recorded)
        return
    code, message, data = (*error.args, 0, "", None)[:3]
    error.error = ErrorData(code=code, message=str(message), data=data)


restore_with("mcp.shared.exceptions:MCPError", _whole)


class CapturedMCP:
    """An ``mcp.ClientSession`` whose ``call_tool`` and ``list_tools`` are journaled.

    Every other attribute is the session's. Built by ``Capture.mcp`` (around a session the
    code opened) or `connect_stdio` (around one it opens, or none in a replay).

    Args:
        session: the client session (None: ``connect`` gives it when a call must reach the
            server, as `connect_stdio` does in a replay).
        modes: how a replay treats the server's tools.
        tools: the capture's tools by name: the declared ones and the listed ones are
            added (a replay checks the tools it is asked to run live against them).
        connect: a coroutine function giving the session.
    """

    def __init__(
        self,
        session: Any,
        modes: ToolModes,
        tools: MutableMapping[str, ToolInfo],
        *,
        connect: Callable[[], Any] | None = None,
    ) -> None:
        if (session is None) == (connect is None):
            raise TypeError("give either a session or a connect function")
        self._session = session
        self._connect = connect
        self._modes = modes
        self._tools = tools
        for name in (*modes.pure, *modes.io, LIST_TOOLS):
            tools[name] = modes.info(name)

    async def _live(self) -> Any:
        """The client session, connected first if it is not yet."""
        if self._session is None:
            assert self._connect is not None
            self._session = await self._connect()
        return self._session

    def __getattr__(self, name: str) -> Any:
        if self._connect is None:
            return getattr(self._session, name)
        return _Unserved(name, getattr(ClientSession, name))  # a replay's: served calls only

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        read_timeout_seconds: float | None = None,
        progress_callback: Any = None,
        **options: Any,
    ) -> Any:
        """``ClientSession.call_tool``, journaled as a call of the tool ``name``.

        ``read_timeout_seconds``, ``progress_callback`` and the keyword options (``meta``,
        ...) go to the session as they are when the call reaches the server; they are not
        journaled (a replay compares the name and the arguments).
        """

        async def run() -> Any:
            live = await self._live()
            return await live.call_tool(
                name, arguments, read_timeout_seconds, progress_callback, **options
            )

        return await self._journaled(self._modes.info(name), _arguments(arguments), run, _call)

    async def list_tools(self, *, params: PaginatedRequestParams | None = None) -> Any:
        """``ClientSession.list_tools``, journaled as a call of `LIST_TOOLS`.

        The tools it lists join the capture's tools (with their declared modes).
        """

        async def run() -> Any:
            live = await self._live()
            return await live.list_tools(params=params)

        args = {} if params is None else params.model_dump(mode="json", exclude_none=True)
        info = self._modes.info(LIST_TOOLS)
        listed = await self._journaled(info, args, run, _listing, early=True)
        for tool in getattr(listed, "tools", ()):
            self._tools[tool.name] = self._modes.info(tool.name)
        return listed

    async def _journaled(
        self,
        info: ToolInfo,
        args: dict[str, Any],
        run: Callable[[], Any],
        returns: Callable[[], Any],
        *,
        early: bool = False,
    ) -> Any:
        """Run (or replay) one call in the session it belongs to, if any.

        ``early`` as `CapturedSession.acall_tool` takes it.
        """
        if inside_a_tool(info.name, side_effects=info.side_effects):
            return await run()
        session: CapturedSession | None = session_of_call(
            f"MCP tool {info.name}", lambda: (info.name, args)
        )
        if session is None:
            return await run()
        return await session.acall_tool(info, args, run, returns, early=early)


def _call() -> type[CallToolResult]:
    return CallToolResult


def _listing() -> type[ListToolsResult]:
    return ListToolsResult


class _Unserved:
    """A method of a replay's session (`connect_stdio`): a stop, since nothing journaled it."""

    def __init__(self, name: str, method: Any) -> None:
        self._name = name
        self._method = method

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Stop the replay: the method's outcome is not in the recording."""
        raise HaltSession(
            REPLAY_STOPPED,
            f"replay stopped: the code called the MCP session's {self._name}(), which "
            "agent-journal does not journal (only call_tool and list_tools), so a replay "
            "cannot serve it and starts no server for it",
        )


@asynccontextmanager
async def connect_stdio(
    server: StdioServerParameters,
    modes: ToolModes,
    tools: MutableMapping[str, ToolInfo],
    **session_options: Any,
) -> AsyncIterator[CapturedMCP]:
    """Spawn the MCP server ``server`` over stdio and yield its initialized, captured session.

    ``session_options`` go to ``ClientSession`` (``read_timeout_seconds``, the callbacks,
    ``client_info``). In a replay (inside `capture.replaying`) nothing is spawned until a
    call must reach the server; the server is then started, its session initialized, and
    stopped when the block ends.
    """
    if replay_target() is None:
        async with stdio_client(server) as (read, write):
            async with ClientSession(read, write, **session_options) as session:
                await session.initialize()
                yield CapturedMCP(session, modes, tools)
        return
    raised: BaseException | None = None
    async with anyio.create_task_group() as group:
        done = anyio.Event()

        async def serve(*, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
            async with stdio_client(server) as (read, write):
                async with ClientSession(read, write, **session_options) as session:
                    await session.initialize()
                    task_status.started(session)
                    await done.wait()

        started: list[ClientSession] = []
        starting = anyio.Lock()

        async def connect() -> ClientSession:
            async with starting:  # concurrent calls start one server
                if not started:
                    started.append(await group.start(serve))
            return started[0]

        try:
            yield CapturedMCP(None, modes, tools, connect=connect)
        except BaseException as error:  # raised past the group, not inside an ExceptionGroup
            raised = error
        finally:
            done.set()
    if raised is not None:
        raise raised
