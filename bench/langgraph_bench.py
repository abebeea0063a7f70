"""A LangGraph run captured by the journal, against the same graph with a SqliteSaver alone.

    python bench/langgraph_bench.py [--runs R] [--steps N] [--repeat K] [--quick]

The graph: a model node (``agent``) and a ``ToolNode`` (``tools``) in a loop, the model
proposing one tool call per reply for N replies, then answering; a step is one tool call
(a model reply and its tool run: two graph node steps). The model is LangChain's fake list
model (an instant reply, so what remains is LangGraph's and ours), the tool a
``@tool`` that returns a small dict at once. R runs of it, each on its own thread, in each
case:

* (a) the reference: the graph with a ``SqliteSaver`` checkpointer (WAL,
  ``synchronous=NORMAL``, as this journal writes), nothing captured;
* (b) the same graph and checkpointer, captured: ``capture.langchain(model)``, the tool
  ``@capture.tool``, ``capture.graph(...)``, journaling into a SQLite journal file (what a
  LangGraph user adds to production);
* (c) the graph without a checkpointer, captured (the journal alone).

CPU time (``process_time``, the whole process: LangGraph's worker threads too) and bytes on
disk after the run (the checkpoint database and the journal, WAL checkpointed). The cases
take turns within each of K rounds; each figure is the median, each ratio is taken within a
round against (a), then the median.
"""

from __future__ import annotations

import argparse
import gc
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any, TypedDict

from _common import Report, Table, disk_bytes, machine, report
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, AnyMessage
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode

from capture import Capture
from journal import Journal


class Model(FakeMessagesListChatModel):
    """LangChain's fake list model, binding tools."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def _graph(steps: int, capture: Capture | None, checkpointer: Any) -> Any:
    replies: list[Any] = [
        AIMessage(
            content="",
            tool_calls=[{"name": "lookup", "args": {"order_id": str(n)}, "id": f"c{n}"}],
        )
        for n in range(steps)
    ]
    replies.append(AIMessage(content="done"))

    @tool
    def lookup(order_id: str) -> dict[str, Any]:
        """Look up an order."""
        return {"order_id": order_id, "status": "shipped", "items": 2}

    model: Any = Model(responses=replies)
    tools: list[Any] = [lookup]
    if capture is not None:
        model = capture.langchain(model)
        tools = [capture.tool(lookup)]
    bound = model.bind_tools(tools)

    def agent(state: State) -> dict[str, Any]:
        return {"messages": [bound.invoke(state["messages"])]}

    def route(state: State) -> str:
        return "tools" if getattr(state["messages"][-1], "tool_calls", None) else END

    builder = StateGraph(State)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode(tools))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, ["tools", END])
    builder.add_edge("tools", "agent")
    compiled = builder.compile(checkpointer=checkpointer, name="bench")
    return compiled if capture is None else capture.graph(compiled, name="bench:graph")


def _saver(path: Path) -> tuple[sqlite3.Connection, Any]:
    conn = sqlite3.connect(path, check_same_thread=False)
    saver = SqliteSaver(conn)
    saver.setup()
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn, saver


def _case(
    folder: Path, runs: int, steps: int, *, checkpointer: bool, captured: bool
) -> tuple[float, int]:
    """CPU seconds of ``runs`` graph runs, and the bytes they left on disk."""
    checkpoints, journal_path = folder / "checkpoints.db", folder / "journal.db"
    conn, saver = _saver(checkpoints) if checkpointer else (None, None)
    journal = Journal.open(journal_path) if captured else None
    spent = 0.0
    for run in range(runs):
        capture = Capture(journal) if journal is not None else None
        graph = _graph(steps, capture, saver)
        config = {"configurable": {"thread_id": f"t-{run}"}, "recursion_limit": 4 * steps + 10}
        gc.collect()
        start = time.process_time()
        graph.invoke({"messages": [("user", f"order run {run}")]}, config)
        spent += time.process_time() - start
    if journal is not None:
        journal.close()
    if conn is not None:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()
    written = (disk_bytes(checkpoints) if checkpointer else 0) + (
        disk_bytes(journal_path) if captured else 0
    )
    return spent, written


CASES: dict[str, tuple[str, bool, bool]] = {
    "a": ("(a) SqliteSaver alone, nothing captured", True, False),
    "b": ("(b) SqliteSaver + the journal's capture", True, True),
    "c": ("(c) the journal's capture alone, no checkpointer", False, True),
}


def bench(runs: int, steps: int, repeat: int) -> Report:
    cpu: dict[str, list[float]] = {key: [] for key in CASES}
    size: dict[str, list[int]] = {key: [] for key in CASES}
    for _ in range(repeat):
        for key, (_, checkpointer, captured) in CASES.items():
            with tempfile.TemporaryDirectory() as folder:
                spent, written = _case(
                    Path(folder), runs, steps, checkpointer=checkpointer, captured=captured
                )
            cpu[key].append(spent)
            size[key].append(written)
    total = runs * steps

    def ratio(series: dict[str, list[Any]], key: str) -> str:
        pairs = zip(series[key], series["a"], strict=True)
        return f"{statistics.median(x / y for x, y in pairs):.2f}×"

    rows = [
        [
            label,
            f"{statistics.median(cpu[key]) / total * 1e6:,.0f}",
            "" if key == "a" else ratio(cpu, key),
            f"{statistics.median(size[key]) / total:,.0f}",
            "" if key == "a" else ratio(size, key),
        ]
        for key, (label, _, _) in CASES.items()
    ]
    header = ["case", "CPU µs/step>", "vs (a)>", "bytes/step>", "vs (a)>"]
    intro = (
        f"LangGraph runs, captured or not: {runs} runs of {steps} steps (a model reply and "
        f"its tool call), median of {repeat} rounds, CPU time; {machine()}"
    )
    return Report([[intro], [Table(header, rows)]])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="2 runs of 3 steps, 1 round")
    args = parser.parse_args(argv)
    if args.quick:
        args.runs, args.steps, args.repeat = 2, 3, 1
    return report(bench(args.runs, args.steps, args.repeat))


if __name__ == "__main__":
    sys.exit(main())
