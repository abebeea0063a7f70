"""Deprecated: the capture SDK is the top-level package `capture` now.

``from journal.capture import Capture`` (and every other name this package exported) keeps
working for this release, with a `DeprecationWarning` naming the new import; the names
``journal.Recorder``, ``journal.JournaledOpenAI`` and ``journal.ModelOutput`` alike. The
failure helpers (``describe_error``, ``failure_kind``, ``failure_message``, ``failure_of``,
``HaltSession``, ``ReplayedFailure``) are part of the record and stay in `journal`.
CHANGELOG.md lists what moved where.

This module is the one place `journal` reaches into `capture`, and only when a moved name
is asked for: ``import journal`` loads nothing of it.
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

__all__ = ["moved"]

_STAYED = frozenset(
    {
        "HaltSession",
        "ReplayedFailure",
        "describe_error",
        "failure_kind",
        "failure_message",
        "failure_of",
    }
)


def moved(old: str, name: str) -> Any:
    """The value of ``name`` in `capture`, with a warning that ``old`` is deprecated."""
    warnings.warn(
        f"{old} is deprecated and goes away in the next release: "
        f"use 'from capture import {name}' (see CHANGELOG.md)",
        DeprecationWarning,
        stacklevel=3,
    )
    return getattr(importlib.import_module("capture"), name)


def __getattr__(name: str) -> Any:
    """A name `journal.capture` exported, from where it is now (with a warning)."""
    if name.startswith("__"):
        raise AttributeError(name)
    if name in _STAYED:
        warnings.warn(
            f"journal.capture.{name} is deprecated and goes away in the next release: "
            f"use 'from journal import {name}' (see CHANGELOG.md)",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module("journal"), name)
    capture = importlib.import_module("capture")
    if name not in capture.__all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return moved(f"journal.capture.{name}", name)
