"""The metadata keys a capture writes into ``session_started``: how to replay the session.

They sit beside the user's own metadata (given to `Capture`, a scope or the `Recorder`);
listings leave them out of a session's metadata words (`REPLAY_KEYS`), ``--json`` keeps
them.
"""

from __future__ import annotations

__all__ = ["CAPTURED_WITH_KEY", "DEPS_FACTORY_KEY", "ENTRY_INPUTS_KEY", "REPLAY_KEYS"]

CAPTURED_WITH_KEY = "captured_with"
"""What captured the session (``entry``, ``recorder``, ``pydantic-ai``...): which replay
path re-runs it (`replay._captured`)."""

ENTRY_INPUTS_KEY = "entry_inputs"
"""An entry session's arguments, as JSON text in their own order."""

DEPS_FACTORY_KEY = "deps_factory"
"""The ``module:function`` that builds a framework agent's dependencies for a replay."""

REPLAY_KEYS = frozenset({CAPTURED_WITH_KEY, ENTRY_INPUTS_KEY, DEPS_FACTORY_KEY})
"""The keys that are the capture's own, not the user's metadata."""
