"""The installed LangGraph's prebuilt ReAct agent, captured; and one with another prompt."""

from __future__ import annotations

import warnings

from langgraph.prebuilt import create_react_agent

from .common import TOOLS, capture, chat_model

PROMPT = "You are the shop's assistant."

with warnings.catch_warnings():  # create_react_agent moves to langchain.agents in LangGraph 1.0
    warnings.simplefilter("ignore")
    agent = capture.graph(create_react_agent(chat_model(), TOOLS, prompt=PROMPT, name="react"))
    terse = capture.graph(create_react_agent(chat_model(), TOOLS, prompt="Be terse.", name="react"))
