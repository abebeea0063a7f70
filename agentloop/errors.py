"""Errors of the agent runtime, all `journal.JournalError` subclasses so the CLI reports them.

Hierarchy::

    JournalError (journal.errors)
    └── AgentLoopError            base of the runtime's errors
        ├── AgentLoadError        a ``module:factory`` reference cannot be imported or built
        │   └── UntrustedReferenceError  a journal names code the trust list does not allow
        ├── AgentDefinitionError  an agent is inconsistent (duplicate tools, unknown fallback)
        ├── SessionEndedError     a turn was asked of a session that is halted or failed
        └── IllegalTransitionError the loop tried a phase change its state diagram forbids (a bug)
"""

from __future__ import annotations

from journal import JournalError

__all__ = [
    "AgentDefinitionError",
    "AgentLoadError",
    "AgentLoopError",
    "IllegalTransitionError",
    "SessionEndedError",
    "UntrustedReferenceError",
]


class AgentLoopError(JournalError):
    """Base class of the runtime's errors."""


class AgentLoadError(AgentLoopError):
    """An agent reference cannot be imported or its factory fails."""


class UntrustedReferenceError(AgentLoadError):
    """A journal names code that the trust list does not allow; nothing was imported."""


class AgentDefinitionError(AgentLoopError):
    """An agent's definition is inconsistent."""


class SessionEndedError(AgentLoopError):
    """The session is halted or failed; it takes no further turns."""


class IllegalTransitionError(AgentLoopError):
    """The loop attempted a phase change that its state diagram forbids (a bug)."""
