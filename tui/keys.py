"""Key bindings with ids, and the command palette built from them.

Every binding of the app has an id ``category.name`` and a description; the command
palette lists each one as ``category: description``, so whatever a key does can also be
found by name (and a keymap can rebind it by id). Screens add commands that have no key
(sort by a column, filter by one status) through ``JournalScreen.extra_commands``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from functools import partial
from typing import TYPE_CHECKING, Any

from textual.app import SystemCommand
from textual.binding import Binding
from textual.markup import escape

from .text import safe_text

if TYPE_CHECKING:
    from textual.app import App
    from textual.dom import DOMNode

__all__ = [
    "MOTIONS",
    "bind",
    "command",
    "commands_for",
    "declared_bindings",
    "motion_bindings",
    "title_of",
]

MOTIONS: tuple[tuple[str, str, str], ...] = (
    ("j,down", "cursor_down", "line down"),
    ("k,up", "cursor_up", "line up"),
    ("g,home", "first", "to the top"),
    ("G,end", "last", "to the bottom"),
    ("ctrl+d", "half_page_down", "half a page down"),
    ("ctrl+u", "half_page_up", "half a page up"),
    ("pagedown,ctrl+f,space", "page_down", "page down"),
    ("pageup,ctrl+b", "page_up", "page up"),
)
"""The keys of less and vim that move through a list or a pane: keys, action, description.

Lists move their cursor, panes scroll; both implement these actions."""


def bind(
    keys: str,
    action: str,
    description: str,
    id: str,
    *,
    title: str | None = None,
    show: bool = False,
    key_display: str | None = None,
    priority: bool = False,
) -> Binding:
    """A binding with its id (``category.name``), as every binding of the app has.

    Args:
        keys: comma-separated keys (``"j,down"``).
        action: the action it runs.
        description: what it does, in a word or two (the footer's label).
        id: ``category.name``; the category titles the palette entry.
        title: what it does, in a few words (the help and the palette; default:
            ``description``).
        show: show it in the footer.
        key_display: how the footer shows the key.
        priority: check it before the focused widget sees the key.
    """
    return Binding(
        keys,
        action,
        description,
        show=show,
        key_display=key_display,
        priority=priority,
        tooltip=title or "",
        id=id,
    )


def motion_bindings(category: str) -> list[Binding]:
    """The `MOTIONS` as bindings with ids ``category.action``."""
    return [
        bind(keys, action, description, f"{category}.{action.replace('_', '-')}")
        for keys, action, description in MOTIONS
    ]


def title_of(binding: Binding) -> str:
    """The palette title of a binding: ``category: description``."""
    category = (binding.id or "app").split(".", 1)[0]
    return f"{category}: {binding.tooltip or binding.description}"


def declared_bindings(node: DOMNode) -> Iterator[Binding]:
    """The bindings with ids that ``node``'s classes declare (subclasses first)."""
    for cls in type(node).__mro__:
        for binding in cls.__dict__.get("BINDINGS", ()):
            if isinstance(binding, Binding) and binding.id:
                yield binding


def command(title: str, help: str, callback: Callable[[], Any]) -> SystemCommand:
    """A palette command; the palette reads titles and help as markup, so both are escaped."""
    return SystemCommand(escape(safe_text(title)), escape(safe_text(help)), callback)


def commands_for(app: App[Any], nodes: Iterable[DOMNode]) -> Iterator[SystemCommand]:
    """One palette command per binding id of ``nodes`` (first declaration wins)."""
    seen: set[str] = set()
    for node in nodes:
        for binding in declared_bindings(node):
            assert binding.id is not None
            if binding.id in seen:
                continue
            seen.add(binding.id)
            keys = ", ".join(app.get_key_display(Binding(key, "")) for key in _keys(binding))
            yield command(
                title_of(binding), f"key: {keys}", partial(app.run_action, binding.action, node)
            )


def _keys(binding: Binding) -> list[str]:
    return [key.strip() for key in binding.key.split(",") if key.strip()]
