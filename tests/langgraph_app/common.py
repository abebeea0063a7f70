"""What the scratch project's graphs share: the capture, the model, the tools."""

from __future__ import annotations

import os
from typing import Any

from langchain_core.tools import ToolException, tool
from langchain_openai import ChatOpenAI

from capture import Capture

capture = Capture(":memory:")
"""The tests point it at their journal (``capture.journal = ...``)."""

URL = os.environ.get("AGENT_JOURNAL_TEST_MODEL_URL", "http://127.0.0.1:9/v1")

STOCK = {"SKU-12": 1, "SKU-34": 5}
SENT: list[dict[str, Any]] = []
"""The e-mails `send_email` sent (a replay never adds to it)."""


def chat_model() -> Any:
    """The graphs' model: a ChatOpenAI on the test server, journaled."""
    return capture.langchain(
        ChatOpenAI(model="fake-1", base_url=URL, api_key="test-key", temperature=0, max_retries=0)
    )


@capture.tool
@tool
def lookup_order(order_id: str) -> dict[str, Any]:
    """Look up an order by its id."""
    if order_id == "404":
        raise ToolException(f"no order {order_id}")
    return {"order_id": order_id, "sku": f"SKU-{order_id}"}


@capture.tool
@tool
def check_stock(sku: str, quantity: int) -> dict[str, Any]:
    """Check whether a SKU is in stock."""
    return {"sku": sku, "in_stock": quantity < STOCK.get(sku, 3)}  # the bug: < for <=


@tool("check_stock")
def check_stock_fixed(sku: str, quantity: int) -> dict[str, Any]:
    """Check whether a SKU is in stock."""
    return {"sku": sku, "in_stock": quantity <= STOCK.get(sku, 3)}


check_stock_fixed = capture.tool(check_stock_fixed)


@capture.tool(side_effects=True)
@tool
def send_email(to: str, body: str) -> str:
    """Send the customer an e-mail."""
    SENT.append({"to": to, "body": body})
    return f"sent to {to}"


TOOLS = [lookup_order, check_stock, send_email]
FIXED_TOOLS = [lookup_order, check_stock_fixed, send_email]
