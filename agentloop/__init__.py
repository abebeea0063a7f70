"""The deterministic agent runtime that writes the journal, and its example agents.

Build an `Agent` from a prompt, `Tool`s and a model port, then run it::

    from agentloop import Agent, AgentRuntime, Tool
    from journal import Journal

    with Journal.open("agent-journal.db") as journal:
        runtime = AgentRuntime(agent, journal)
        result = runtime.run("refund order 7")
"""

from .agent import Agent, call_factory, default_code_version, load_agent, load_object
from .context import Context, estimate_tokens, plan_compaction, prefix_hash
from .errors import (
    AgentDefinitionError,
    AgentLoadError,
    AgentLoopError,
    IllegalTransitionError,
    SessionEndedError,
    UntrustedReferenceError,
)
from .gate import Accepted, Plan, Rejected, verify_call
from .openai_provider import OpenAIProvider
from .ports import (
    Clock,
    IdSource,
    LiveToolExecutor,
    LLMProvider,
    ModelRequest,
    ModelResponse,
    ToolExecutor,
    ToolOutcome,
    counter_ids,
    system_clock,
    uuid_ids,
)
from .recovery import repair_truncated_json, scavenge_calls
from .runtime import TRANSITIONS, AgentRuntime, Phase, TurnResult
from .tools import ArgsInvalid, Tool, ToolError, classify_error
from .trust import DEFAULT_TRUSTED, TRUST_ENV, TrustList

__all__ = [
    "DEFAULT_TRUSTED",
    "TRANSITIONS",
    "TRUST_ENV",
    "Accepted",
    "Agent",
    "AgentDefinitionError",
    "AgentLoadError",
    "AgentLoopError",
    "AgentRuntime",
    "ArgsInvalid",
    "Clock",
    "Context",
    "IdSource",
    "IllegalTransitionError",
    "LLMProvider",
    "LiveToolExecutor",
    "ModelRequest",
    "ModelResponse",
    "OpenAIProvider",
    "Phase",
    "Plan",
    "Rejected",
    "SessionEndedError",
    "Tool",
    "ToolError",
    "ToolExecutor",
    "ToolOutcome",
    "TrustList",
    "TurnResult",
    "UntrustedReferenceError",
    "call_factory",
    "classify_error",
    "counter_ids",
    "default_code_version",
    "estimate_tokens",
    "load_agent",
    "load_object",
    "plan_compaction",
    "prefix_hash",
    "repair_truncated_json",
    "scavenge_calls",
    "system_clock",
    "uuid_ids",
    "verify_call",
]
