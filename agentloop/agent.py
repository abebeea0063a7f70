"""An agent: prompt, tools, model and guardrails, and where its factory lives for replay."""

from __future__ import annotations

import importlib
import inspect
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from journal import AgentConfig, Guardrails, describe_error

from .errors import AgentDefinitionError, AgentLoadError
from .ports import LLMProvider
from .tools import Tool

__all__ = ["Agent", "call_factory", "default_code_version", "load_agent", "load_object"]


def default_code_version() -> str:
    """The installed agent-journal version, recorded when an agent names none."""
    try:
        return f"agent-journal {version('agent-journal')}"
    except PackageNotFoundError:
        return "agent-journal (not installed)"


@dataclass
class Agent:
    """Everything the loop needs to run a session, besides the journal and the ports.

    Args:
        name: a human name.
        system_prompt: the immutable prefix's text (recorded whole in ``session_started``).
        tools: what the model may call.
        llm: the model port; a replay swaps it for the recorded model.
        model: the model's name, recorded.
        model_settings: temperature and the like, recorded; ``context_window`` (tokens) turns
            on compaction by window pressure.
        guardrails: the limits; recorded so a replay uses the same.
        reference: ``module:factory`` that builds this agent, recorded for replay.
        code_version: recorded; defaults to the agent-journal version.
    """

    name: str
    system_prompt: str
    tools: list[Tool]
    llm: LLMProvider | None = None
    model: str | None = None
    model_settings: dict[str, Any] = field(default_factory=dict)
    guardrails: Guardrails = field(default_factory=Guardrails)
    reference: str | None = None
    code_version: str | None = None

    def __post_init__(self) -> None:
        names = [tool.name for tool in self.tools]
        duplicated = sorted({n for n in names if names.count(n) > 1})
        if duplicated:
            raise AgentDefinitionError(f"agent {self.name}: tool names repeat: {duplicated}")
        for tool in self.tools:
            if tool.fallback is not None and tool.fallback not in names:
                raise AgentDefinitionError(
                    f"agent {self.name}: tool {tool.name} falls back to unknown tool "
                    f"{tool.fallback}"
                )

    @property
    def tool_map(self) -> dict[str, Tool]:
        """Tools by name."""
        return {tool.name: tool for tool in self.tools}

    def config(self) -> AgentConfig:
        """The configuration recorded in ``session_started``."""
        return AgentConfig(guardrails=self.guardrails, tools=[tool.spec() for tool in self.tools])

    @property
    def context_window(self) -> int | None:
        """The model's context window in tokens, when its settings give one."""
        window = self.model_settings.get("context_window")
        return window if isinstance(window, int) else None


_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")


def load_object(reference: str, *, what: str = "agent") -> Any:
    """Import what a ``module:attribute`` reference names (``attribute`` may be dotted).

    References come from journals, and journals are untrusted input, so only what an agent
    reference can legitimately be is accepted: dotted identifiers (no dunders), a module
    outside the standard library, and a function or class defined in that module's package
    (not a re-exported ``os.system`` or ``subprocess.run``); an instance defined there (an
    SDK agent object) is accepted as it is.

    ``what`` names the kind of reference in messages (``agent``, ``live model``).

    Raises:
        AgentLoadError: a malformed or refused reference, or a module or attribute that
            cannot be imported.
    """
    module_name, sep, attribute = reference.partition(":")
    if not sep or not _DOTTED.fullmatch(module_name) or not _DOTTED.fullmatch(attribute):
        raise AgentLoadError(f"{what} reference {reference!r} is not of the form module:factory")
    if "__" in reference:
        raise AgentLoadError(f"{what} reference {reference!r}: dunder names are not allowed")
    package = module_name.split(".")[0]
    if package in sys.stdlib_module_names or package == "builtins":
        raise AgentLoadError(
            f"{what} reference {reference!r}: {package} is part of the standard library, "
            f"not an {what}"
        )
    try:
        module = importlib.import_module(module_name)
    except BaseException as e:  # SystemExit and KeyboardInterrupt too: one line, exit 2
        raise AgentLoadError(
            f"{what} {reference}: cannot import {module_name}: {describe_error(e)}"
        ) from e
    found: Any = module
    for part in attribute.split("."):
        found = getattr(found, part, None)
        if found is None:
            raise AgentLoadError(f"{what} {reference}: {module_name} has no {attribute}")
    code = inspect.isroutine(found) or inspect.isclass(found) or inspect.ismodule(found)
    defined_in = str(getattr(found, "__name__" if inspect.ismodule(found) else "__module__", ""))
    if code and defined_in.split(".")[0] != package:
        raise AgentLoadError(
            f"{what} {reference}: {attribute} is defined in {defined_in or 'another package'}, "
            f"not in {package}; name it where it is defined"
        )
    return found


def call_factory(
    reference: str, kwargs: Mapping[str, Any] | None = None, *, what: str = "agent"
) -> Any:
    """Import the factory a ``module:factory`` reference names and call it.

    Those of ``kwargs`` the factory accepts are passed on; others are dropped. ``what``
    names the kind of reference in messages.

    Raises:
        AgentLoadError: a malformed reference, a module or factory that cannot be
            imported, a factory that is not callable, or one that raises (whatever it
            raises, ``SystemExit`` and ``KeyboardInterrupt`` included).
    """
    factory = load_object(reference, what=what)
    if not callable(factory):
        attribute = reference.partition(":")[2]
        raise AgentLoadError(f"{what} {reference}: {attribute} is not callable")
    try:
        accepted = inspect.signature(factory).parameters
        takes_any = any(p.kind is p.VAR_KEYWORD for p in accepted.values())
        passed = {k: v for k, v in (kwargs or {}).items() if takes_any or k in accepted}
        return factory(**passed)
    except BaseException as e:  # SystemExit and KeyboardInterrupt too: one line, exit 2
        raise AgentLoadError(f"{what} {reference}: the factory raised {describe_error(e)}") from e


def load_agent(reference: str, **kwargs: Any) -> Agent:
    """Build an agent from a ``module:factory`` reference (the factory returns an `Agent`).

    Keyword arguments the factory accepts are passed on; others are dropped.

    Raises:
        AgentLoadError: a malformed reference, a module or factory that cannot be
            imported, a factory that raises, or one that does not return an `Agent`.
    """
    agent = call_factory(reference, kwargs)
    if not isinstance(agent, Agent):
        raise AgentLoadError(
            f"agent {reference}: the factory returned {type(agent).__name__}, not an Agent"
        )
    if agent.reference is None:
        agent.reference = reference
    return agent
