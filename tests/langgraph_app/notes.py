"""LangChain's fake chat models (no server): a graph streamed and retried after a failed
call; a plain chain (an entry) with structured output and a batch."""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

from langchain_core.language_models import GenericFakeChatModel
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, AnyMessage
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode
from pydantic import BaseModel

from .common import capture, check_stock

REPLIES: list[Any] = []
"""What the fake model answers next: a text, or an exception it raises (the tests fill it)."""


class _Script:
    def __iter__(self) -> _Script:
        return self

    def __next__(self) -> AIMessage:
        reply = REPLIES.pop(0)
        if isinstance(reply, BaseException):
            raise reply
        return AIMessage(content=reply)


model = capture.langchain(GenericFakeChatModel(messages=_Script()))


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def write(state: State) -> dict[str, Any]:
    """Ask the model, once more when it fails (a retry the journal keeps)."""
    try:
        reply = model.invoke(state["messages"])
    except ConnectionError:
        reply = model.invoke(state["messages"])
    return {"messages": [reply]}


def build() -> Any:
    builder = StateGraph(State)
    builder.add_node("write", write)
    builder.add_edge(START, "write")
    return capture.graph(builder.compile(name="notes"))


graph = build()


class ToolFake(FakeMessagesListChatModel):
    """LangChain's fake list model, able to bind tools (for ``with_structured_output``)."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self.bind(tools=[convert_to_openai_tool(tool) for tool in tools], **kwargs)


class Verdict(BaseModel):
    """Whether an order can ship."""

    order_id: str
    ships: bool


scripted = capture.langchain(
    ToolFake(
        responses=[
            AIMessage(
                content="",
                tool_calls=[
                    {"name": "Verdict", "args": {"order_id": "12", "ships": True}, "id": "v1"}
                ],
            ),
            AIMessage(content="first"),
            AIMessage(content="second"),
        ]
    )
)


@capture.entry
def judge(order_id: str) -> dict[str, Any]:
    """A plain LangChain chain (no graph): structured output, then a batch."""
    verdict = scripted.with_structured_output(Verdict).invoke(f"can order {order_id} ship?")
    replies = scripted.batch(["one", "two"], config={"max_concurrency": 1})
    return {"verdict": verdict.model_dump(), "replies": [reply.content for reply in replies]}


asking = capture.langchain(
    ToolFake(
        responses=[
            AIMessage(
                content="",
                tool_calls=[{"name": "check_stock", "args": {"sku": "SKU-12"}, "id": "k1"}],
            ),
            AIMessage(content="I could not check it."),
        ]
    )
)


def build_checker() -> Any:
    """A model whose call the ToolNode refuses (an argument missing): an error message."""
    bound = asking.bind_tools([check_stock])

    def agent(state: State) -> dict[str, Any]:
        return {"messages": [bound.invoke(state["messages"])]}

    def route(state: State) -> str:
        return "tools" if getattr(state["messages"][-1], "tool_calls", None) else END

    builder = StateGraph(State)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode([check_stock]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, ["tools", END])
    builder.add_edge("tools", "agent")
    return capture.graph(builder.compile(name="checker"))


checker = build_checker()
