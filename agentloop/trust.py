"""The trust list: which code a journal may name and have run.

Journals and fixtures come from production and from other people; they are untrusted
input. A session records references to code (``module:attribute``): the agent factory, a
hand-written loop's entry point, a framework's agent object. A replay, a fork or a fixture
imports and calls what such a reference names, so a journal that could name any function
of any installed package could run an editor, a CLI, a network client or a module's
top-level code on the machine of whoever opens it. The rule:

* a reference **recorded in a journal** runs only when it matches the trust list;
* a reference **given by the user** (``--agent`` on the CLI, ``journal_agent`` in the
  pytest ini, the TUI's replay prompt, an argument in Python) runs as given: the user chose
  it, not the journal.

The trust list is the ``agents`` array of the ``[tool.agent-journal]`` table in the
project's ``pyproject.toml``, found from the current folder upwards (the first
``pyproject.toml`` that has the table), plus the patterns in ``AGENT_JOURNAL_TRUST``
(comma-separated), plus the project's own examples (``agentloop.examples.*`` and
``capture.examples.*``), so the demo and the repository's fixtures replay with no
configuration::

    [tool.agent-journal]
    agents = ["myapp.agents:*", "myapp.loops:run"]
    pythonpath = ["."]          # where they are imported from (default: the project root)

A pattern with a colon is matched against the whole reference, one without against its
module; ``*`` matches any run of characters, dots included (fnmatch rules, case
sensitive). ``pythonpath`` folders, relative to the table's ``pyproject.toml``, are put at
the front of ``sys.path`` before a reference is imported, so the project's own modules
import with no ``PYTHONPATH`` and no pytest ``pythonpath`` setting. A reference the user
gives is imported from the same folders (the current folder when no table is found).

Whatever passes the list still goes through `agentloop.load_object`'s checks (dotted
names, no dunders, nothing from the standard library, code defined where it is named).
"""

from __future__ import annotations

import os
import re
import sys
import tomllib
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from journal import InvalidInputError

from .errors import AgentLoadError, UntrustedReferenceError

__all__ = [
    "DEFAULT_TRUSTED",
    "TRUST_ENV",
    "TrustList",
]

TRUST_ENV = "AGENT_JOURNAL_TRUST"
"""Environment variable of extra trusted patterns, comma-separated."""

DEFAULT_TRUSTED = ("agentloop.examples.*", "capture.examples.*")
"""Trusted with no configuration: the project's own example agents and captured loops."""

_TABLE = "agent-journal"
_KEYS = frozenset({"agents", "pythonpath"})
_PATTERN = re.compile(r"[A-Za-z0-9_.*]+(?::[A-Za-z0-9_.*]+)?")


@dataclass(frozen=True)
class TrustList:
    """The references a journal may name, and where they are imported from.

    Build it with `TrustList.discover`; the constructor is for tests and embedding.

    Args:
        patterns: trusted references or patterns (see the module docstring).
        pythonpath: folders put at the front of ``sys.path`` before an import.
        config: the ``pyproject.toml`` the table came from, or None.
    """

    patterns: tuple[str, ...] = DEFAULT_TRUSTED
    pythonpath: tuple[Path, ...] = ()
    config: Path | None = None

    @classmethod
    def discover(cls, start: str | Path | None = None) -> TrustList:
        """The trust list in force from ``start`` (default: the current folder).

        Raises:
            InvalidInputError: the ``[tool.agent-journal]`` table is malformed (names the
                file and the key), or ``AGENT_JOURNAL_TRUST`` holds a malformed pattern.
        """
        here = Path(start if start is not None else Path.cwd()).resolve()
        extra = tuple(p.strip() for p in os.environ.get(TRUST_ENV, "").split(",") if p.strip())
        for pattern in extra:
            _check_pattern(pattern, TRUST_ENV)
        found = _find_table(here)
        if found is None:
            return cls(patterns=(*DEFAULT_TRUSTED, *extra), pythonpath=(), config=None)
        path, table = found
        agents = _strings(table, "agents", path, default=[])
        for pattern in agents:
            _check_pattern(pattern, f"{path} [tool.{_TABLE}] agents")
        folders = _strings(table, "pythonpath", path, default=["."])
        return cls(
            patterns=(*DEFAULT_TRUSTED, *agents, *extra),
            pythonpath=tuple((path.parent / folder).resolve() for folder in folders),
            config=path,
        )

    def allows(self, reference: str) -> bool:
        """Whether a reference recorded in a journal may run."""
        module = reference.partition(":")[0]
        return any(
            fnmatchcase(reference if ":" in pattern else module, pattern)
            for pattern in self.patterns
        )

    def choose(self, recorded: str | None, given: str | None, *, where: str) -> str:
        """The reference to run: the one given by the user, else the recorded one if trusted.

        Args:
            recorded: the reference the journal names (None when it names none).
            given: the reference the user named (``--agent`` and the like), or None.
            where: what recorded it, for messages (``session s1``, ``fixtures/x.jsonl``).

        Raises:
            AgentLoadError: neither is there.
            UntrustedReferenceError: only the recorded one is there, and it is not trusted.
        """
        if given:
            return given
        if not recorded:
            raise AgentLoadError(
                f"{where} records no agent reference; name one with --agent MODULE:FACTORY "
                "(journal_agent in the pytest ini)"
            )
        if not self.allows(recorded):
            raise UntrustedReferenceError(
                f"{where} names {recorded!r}, which is not on the trust list; "
                f"to run it, add it to agents in {self.where_configured()} "
                f"(or {TRUST_ENV}), or name it with --agent (journal_agent in the pytest ini)"
            )
        return recorded

    def require(self, reference: str, *, what: str, where: str) -> str:
        """A reference the journal records beside its agent (a ``deps`` factory), if trusted.

        Raises:
            UntrustedReferenceError: ``reference`` is not on the trust list.
        """
        if not self.allows(reference):
            raise UntrustedReferenceError(
                f"{where} names the {what} {reference!r}, which is not on the trust list; "
                f"to run it, add it to agents in {self.where_configured()} (or {TRUST_ENV})"
            )
        return reference

    def where_configured(self) -> str:
        """Where the trust list is set, for messages."""
        if self.config is not None:
            return f"[tool.{_TABLE}] of {self.config}"
        return f"a [tool.{_TABLE}] table of your pyproject.toml"

    def activate(self) -> None:
        """Put the import folders at the front of ``sys.path`` (the current folder when none)."""
        folders = self.pythonpath or (Path.cwd(),)
        for folder in reversed(folders):
            entry = str(folder)
            if entry not in sys.path:
                sys.path.insert(0, entry)


def _find_table(start: Path) -> tuple[Path, dict[str, Any]] | None:
    """The first ``pyproject.toml`` from ``start`` upwards with a ``[tool.agent-journal]``."""
    for folder in (start, *start.parents):
        path = folder / "pyproject.toml"
        if not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise InvalidInputError(f"{path}: cannot read it: {e}") from e
        if f"tool.{_TABLE}" not in text and f'tool."{_TABLE}"' not in text:
            continue
        try:
            document = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise InvalidInputError(f"{path}: not valid TOML: {e}") from e
        table = document.get("tool", {}).get(_TABLE)
        if table is None:
            continue
        if not isinstance(table, dict):
            raise InvalidInputError(f"{path}: [tool.{_TABLE}] must be a table")
        unknown = sorted(set(table) - _KEYS)
        if unknown:
            raise InvalidInputError(
                f"{path}: [tool.{_TABLE}] has unknown key {unknown[0]!r} "
                f"(known: {', '.join(sorted(_KEYS))})"
            )
        return path, table
    return None


def _strings(table: dict[str, Any], key: str, path: Path, *, default: list[str]) -> list[str]:
    value = table.get(key, default)
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise InvalidInputError(
            f"{path}: [tool.{_TABLE}] {key} must be a list of strings, not {value!r}"
        )
    return value


def _check_pattern(pattern: str, where: str) -> None:
    if not _PATTERN.fullmatch(pattern):
        raise InvalidInputError(
            f"{where}: {pattern!r} is not a reference pattern (module.path:attribute, "
            "with * for any run of characters)"
        )
