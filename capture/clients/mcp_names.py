"""The journal's names for an MCP session's calls, readable without the ``mcp`` package.

`capture.clients.mcp` journals each ``call_tool`` under the tool's own name (the name the
model proposed it by) and each ``list_tools`` as a call of `LIST_TOOLS`, whose recorded
result is the server's ``ListToolsResult`` in its wire form. A replay reads the tool names
a recording listed (`mcp_tool_names`) to know, before the code runs, which names it may be
asked to run live.
"""

from __future__ import annotations

from collections.abc import Iterable

from journal import ActionCommitted, RecordedEvent

__all__ = ["LIST_TOOLS", "mcp_tool_names"]

LIST_TOOLS = "mcp:list_tools"
"""The tool name ``list_tools`` calls are journaled under: MCP tool names are letters,
digits, ``_``, ``-`` and ``.``, so none is this one."""


def mcp_tool_names(events: Iterable[RecordedEvent]) -> list[str]:
    """The MCP tool names a recording knows: `LIST_TOOLS`, then each name it listed.

    Empty when the recording holds no ``list_tools`` call.
    """
    names: list[str] = []
    for item in events:
        event = item.event
        if not isinstance(event, ActionCommitted) or event.tool != LIST_TOOLS:
            continue
        result = event.result
        tools = result.get("tools") if isinstance(result, dict) else None
        for tool in [{"name": LIST_TOOLS}, *(tools if isinstance(tools, list) else ())]:
            name = tool.get("name") if isinstance(tool, dict) else None
            if isinstance(name, str) and name not in names:
                names.append(name)
    return names
