"""A hand-built StateGraph: a conditional edge, a ToolNode, parallel calls, a checkpointer,
an interrupt() before any e-mail is sent; and its variants.

* `graph`: as built; `skips_approval`: the edge condition changed (an e-mail goes straight
  to the tools); `audited`: a node added between the tools and the model; `fixed`: the
  fixed ``check_stock``.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Sequence
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AnyMessage, SystemMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode
from langgraph.types import interrupt

from .common import FIXED_TOOLS, TOOLS, capture, chat_model

SYSTEM = "You answer questions about orders."

connection = sqlite3.connect(
    os.environ.get("AGENT_JOURNAL_TEST_CHECKPOINTS", ":memory:"), check_same_thread=False
)
checkpointer = SqliteSaver(connection)


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    approved: str | None


def route(state: State) -> str:
    """To the tools, to the approval when an e-mail is asked for, or to the end."""
    calls = getattr(state["messages"][-1], "tool_calls", None) or []
    if not calls:
        return END
    return "approve" if any(call["name"] == "send_email" for call in calls) else "tools"


def route_without_approval(state: State) -> str:
    calls = getattr(state["messages"][-1], "tool_calls", None) or []
    return "tools" if calls else END


def approve(state: State) -> dict[str, Any]:
    """Ask the human before an e-mail goes out (``Command(resume=...)`` answers)."""
    answer = interrupt({"question": "Send the e-mail?"})
    return {"approved": answer}


def after_approval(state: State) -> str:
    return "tools" if state.get("approved") == "yes" else END


def audit(state: State) -> dict[str, Any]:
    return {}


def build(
    *,
    tools: Sequence[Any] = TOOLS,
    router: Callable[[State], str] = route,
    audited: bool = False,
) -> Any:
    model = chat_model().bind_tools(tools)

    def agent(state: State) -> dict[str, Any]:
        return {"messages": [model.invoke([SystemMessage(SYSTEM), *state["messages"]])]}

    builder = StateGraph(State)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode(tools, handle_tool_errors=True))
    builder.add_node("approve", approve)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", router, ["tools", "approve", END])
    builder.add_conditional_edges("approve", after_approval, ["tools", END])
    if audited:
        builder.add_node("audit", audit)
        builder.add_edge("tools", "audit")
        builder.add_edge("audit", "agent")
    else:
        builder.add_edge("tools", "agent")
    return capture.graph(builder.compile(checkpointer=checkpointer, name="shop"))


graph = build()
skips_approval = build(router=route_without_approval)
audited = build(audited=True)
fixed = build(tools=FIXED_TOOLS)
