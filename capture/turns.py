"""What a model request says, whatever its wire format: the model it asks, the turn it brings.

Shared by the captured clients (`capture.session`) and the proxy (`capture.proxy.wire`): a
format's functions read a request into these, and one session journals them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["StartFields", "Turn"]


@dataclass(frozen=True)
class StartFields:
    """What a session's first request says of the model, for ``session_started``."""

    model: str | None
    system_prompt: str
    tools: list[dict[str, Any]]
    """OpenAI-format tool specs (``{"type": "function", "function": {...}}``)."""
    model_settings: dict[str, Any]


@dataclass(frozen=True)
class Turn:
    """What a request's messages bring since the model's last output.

    ``inputs`` are the texts of the user's messages; ``results`` the tool results, each
    ``(call_id, text, is_error)``.
    """

    inputs: list[str] = field(default_factory=list)
    results: list[tuple[str, str, bool]] = field(default_factory=list)
