"""The tools a replay is asked to run for real, checked against the agent's own.

A name the agent has no tool for is refused before anything runs: a typo would serve that
tool from the recording while the user believes it ran, and the verdict would say nothing.
"""

from __future__ import annotations

from collections.abc import Iterable

from agentloop import AgentLoopError

__all__ = ["checked_live"]


def checked_live(live: bool | Iterable[str], known: Iterable[str] | None) -> bool | frozenset[str]:
    """The tools named live, each one the agent has (``known``; None: known only at run time).

    Raises:
        AgentLoopError: a name the agent has no tool for (a typo would replay the tool from
            the recording while the user believes it ran).
    """
    if isinstance(live, bool):
        return live
    named = frozenset(live)
    if known is not None:
        tools = sorted(set(known))
        unknown = sorted(named - set(tools))
        if unknown:
            raise AgentLoopError(
                f"no tool {unknown[0]!r} in this agent (tools: {', '.join(tools) or 'none'})"
            )
    return named
