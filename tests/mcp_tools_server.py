"""A shop's MCP server over stdio, on the ``mcp`` package's own server API (``MCPServer``).

Run as a process by `tests.mcp_app` (``python tests/mcp_tools_server.py``). Its tools:

* ``lookup_order(order_id)``: the order's SKU as structured content (reads: I/O); order 13
  does not exist, a ``ToolError``, which the server answers as an ``isError`` result;
* ``check_stock(sku, quantity)``: whether that many are in stock (pure); an unknown SKU
  raises ``MCPError`` (a JSON-RPC error the client raises again);
* ``send_email(to, body)``: appends a line to the file ``MCP_OUTBOX`` names (side effects).

``MCP_STARTS`` names a file the server appends a line to when it starts (a test counts the
servers a replay spawned); ``MCP_SERVER_CHANGES=stock`` plants a change of the server's
code (reserved units no longer count as in stock).
"""

from __future__ import annotations

import os
from typing import Any

from mcp import MCPError
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

STOCK = {"SKU-1": 5, "SKU-2": 0, "SKU-3": 12}
RESERVED = {"SKU-3": 12}
UNKNOWN_SKU = -32602

server = MCPServer("shop", instructions="The shop's orders, stock and mail.")


@server.tool()
def lookup_order(order_id: str) -> dict[str, Any]:
    """The order's SKU, from the shop's database."""
    if order_id == "13":
        raise ToolError(f"no order {order_id}")
    number = int(order_id) if order_id.isdigit() else 0
    sku = "SKU-9" if number % 10 == 9 else f"SKU-{number % 3 + 1}"
    return {"order_id": order_id, "sku": sku}


@server.tool()
def check_stock(sku: str, quantity: int) -> dict[str, Any]:
    """Whether ``quantity`` units of ``sku`` are in stock."""
    if sku not in STOCK:
        raise MCPError(UNKNOWN_SKU, f"unknown sku {sku}", {"sku": sku})
    units = STOCK[sku]
    if "stock" in os.environ.get("MCP_SERVER_CHANGES", "").split():
        units -= RESERVED.get(sku, 0)
    return {"sku": sku, "in_stock": units >= quantity}


@server.tool()
def send_email(to: str, body: str) -> str:
    """E-mail the customer."""
    with open(os.environ["MCP_OUTBOX"], "a", encoding="utf-8") as outbox:
        outbox.write(f"{to}: {body}\n")
    return "sent"


def main() -> None:
    """Note the start, then serve over stdio until the client closes it."""
    starts = os.environ.get("MCP_STARTS")
    if starts:
        with open(starts, "a", encoding="utf-8") as log:
            log.write(f"{os.getpid()}\n")
    server.run()


if __name__ == "__main__":
    main()
