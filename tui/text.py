"""Text shown in a terminal, made safe and fitted: the CLI's and the terminal UI's helpers.

Payload text comes from models, tools and users: `safe_text` shows control characters
(terminal escape sequences included) as visible escapes, never as what they do; `cut` and
`cut_middle` fit text to terminal cells (a wide character takes two).
"""

from __future__ import annotations

import re
from typing import Any

import orjson

__all__ = [
    "FAILURE_TYPES",
    "STATUS_STYLE",
    "cut",
    "cut_middle",
    "event_style",
    "format_cost",
    "format_time",
    "safe_text",
    "short_json",
    "tidy_floats",
]

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")  # tabs and newlines too

FAILURE_TYPES = frozenset(
    {"verification_failed", "action_failed", "agent_halted", "circuit_opened", "model_call_failed"}
)
"""Event types marked as failures in timelines."""

STATUS_STYLE = {"completed": "green", "halted": "yellow", "failed": "red", "running": "cyan"}
"""How each session status is coloured (the CLI and the TUI)."""


def safe_text(text: str) -> str:
    """Replace control characters (escape sequences, bell, newlines) with visible escapes."""
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def cut(text: str, width: int) -> str:
    """``text`` cut to ``width`` terminal cells, the last one an ellipsis when anything was cut.

    Cells, not characters: a wide character (CJK, most emoji) takes two.
    """
    from rich.cells import cell_len, set_cell_size

    if cell_len(text) <= width:
        return text
    return set_cell_size(text, max(width - 1, 0)) + "…" if width > 0 else ""


def cut_middle(text: str, width: int) -> str:
    """``text`` cut to ``width`` cells in the middle (both ends kept: ids differ there)."""
    from rich.cells import cell_len, set_cell_size

    if cell_len(text) <= width:
        return text
    if width < 3:
        return cut(text, width)
    head = (width - 1) // 2
    tail = set_cell_size(text[::-1], width - 1 - head)[::-1]
    return set_cell_size(text, head) + "…" + tail


def short_json(value: Any, width: int = 100) -> str:
    """``value`` as one line of JSON (keys sorted), cut to ``width`` characters, safe to show."""
    return safe_text(cut(orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode(), width))


SIGNIFICANT = 12
"""Digits of a float a state view shows: sums of costs carry noise past the 15th digit
(``0.00028 + 0.000168`` is ``0.00044799999999999994``), which reads as a change that is not."""


def tidy_floats(value: Any) -> Any:
    """``value`` with every float rounded to `SIGNIFICANT` digits, for a person to read.

    Only for showing a state (the TUI's state pane, ``agent-journal state``): a diff and
    ``--json`` show the exact numbers.
    """
    if isinstance(value, float):
        return float(f"{value:.{SIGNIFICANT}g}")
    if isinstance(value, dict):
        return {key: tidy_floats(item) for key, item in value.items()}
    if isinstance(value, list):
        return [tidy_floats(item) for item in value]
    return value


def format_time(ts: str | None) -> str:
    """Show a canonical timestamp as ``YYYY-MM-DD HH:MM:SS``; ``-`` for none."""
    return "-" if not ts else f"{ts[:10]} {ts[11:19]}"


def format_cost(cost: float) -> str:
    """Show a cost in dollars with four decimals."""
    return f"${cost:.4f}"


def event_style(event_type: str) -> str:
    """Return the rich style that marks an event type in timelines."""
    if event_type in FAILURE_TYPES:
        return "red"
    if event_type in ("repair_applied", "fallback_invoked", "context_compacted"):
        return "yellow"
    if event_type == "agent_completed":
        return "green"
    if event_type in ("user_input", "session_started"):
        return "cyan"
    return ""
