"""Example agents that exercise every path of the loop, and the scenarios the demo runs.

Each factory takes a ``seed``: the scripted model is deterministic for a seed and differs
across seeds. `SCENARIOS` pairs each agent with the user inputs of one session.
"""

from .demo import DemoSession, demo_session_id, run_demo
from .scenarios import SCENARIOS, Scenario
from .scripted import Policy, ScriptedLLM, Turn, call, reply

__all__ = [
    "SCENARIOS",
    "DemoSession",
    "Policy",
    "Scenario",
    "ScriptedLLM",
    "Turn",
    "call",
    "demo_session_id",
    "reply",
    "run_demo",
]
