"""A scratch LangGraph project captured by agent-journal (tests/test_langgraph.py).

`react` is the installed LangGraph's prebuilt ReAct agent; `shop` a hand-built
``StateGraph`` with a conditional edge, a ``ToolNode`` running parallel calls, a SQLite
checkpointer and one ``interrupt()``; `notes` a graph on LangChain's fake chat model
(streamed, and failing once). Each has variants a replay is pointed at (``--agent``): a
changed prompt, edge, tool or an added node. The model is a ``ChatOpenAI`` on the
OpenAI-compatible server of `server`, at ``AGENT_JOURNAL_TEST_MODEL_URL``.
"""
