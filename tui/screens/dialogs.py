"""Small modal screens: the command line at the bottom, the key help, a choice.

Each shows text from the journal only as `Content` built from plain strings.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.dom import DOMNode
from textual.screen import ModalScreen
from textual.suggester import SuggestFromList
from textual.widgets import Input, Label, OptionList, Static
from textual.widgets.option_list import Option

from journal import SessionSummary

from ..keys import bind, declared_bindings
from ..text import cut, cut_middle
from ..widgets.panes import safe_lines

__all__ = ["ChoiceScreen", "HelpScreen", "PromptScreen", "help_content", "replay_label"]


class PromptScreen(ModalScreen[str | None]):
    """A one-line prompt at the bottom, like less and vim: enter answers, escape cancels."""

    DEFAULT_CSS = """
    PromptScreen { align: left bottom; background: transparent; }
    PromptScreen > Horizontal { height: 1; width: 1fr; background: $panel; }
    PromptScreen Label { width: auto; padding: 0 1 0 0; color: $text-accent; }
    PromptScreen Input, PromptScreen Input:focus {
        border: none; height: 1; padding: 0; width: 1fr; background: $panel;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        bind("escape", "cancel", "cancel", "prompt.cancel"),
    ]

    def __init__(
        self,
        prompt: str,
        *,
        placeholder: str = "",
        value: str = "",
        suggestions: Sequence[str] = (),
    ) -> None:
        super().__init__()
        self.prompt = prompt
        self.placeholder = placeholder
        self.value = value
        self.suggestions = list(suggestions)

    def compose(self) -> ComposeResult:
        """The prompt and its input."""
        with Horizontal():
            yield Label(Content(self.prompt))
            yield Input(
                self.value,
                placeholder=self.placeholder,
                suggester=SuggestFromList(self.suggestions, case_sensitive=False)
                if self.suggestions
                else None,
                select_on_focus=False,
            )

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Answer with what was typed."""
        event.stop()
        self.dismiss(event.value.strip())

    def action_cancel(self) -> None:
        """Answer nothing."""
        self.dismiss(None)


def help_content(app_bindings: Iterable[Binding], nodes: Iterable[DOMNode], app: Any) -> Content:
    """Every key of ``nodes`` (then the app's), grouped by category, as one `Content`."""
    groups: dict[str, list[tuple[str, str]]] = {}
    seen: set[str] = set()
    bindings = [binding for node in nodes for binding in declared_bindings(node)]
    for binding in [*bindings, *app_bindings]:
        if not binding.id or binding.id in seen:
            continue
        seen.add(binding.id)
        keys = ", ".join(
            app.get_key_display(Binding(key.strip(), "")) for key in binding.key.split(",")
        )
        what = binding.tooltip or binding.description
        groups.setdefault(binding.id.split(".", 1)[0], []).append((keys, what))
    parts: list[str | tuple[str, str]] = []
    for category, rows in groups.items():
        parts.append((f"{category}\n", "bold $text-accent"))
        for keys, description in rows:
            parts.append((f"  {keys:<22}", "bold"))
            parts.append(f"{description}\n")
    parts.append(("\nEvery key is also in the command palette (ctrl+p).", "italic $text-muted"))
    return Content.assemble(*parts)


class HelpScreen(ModalScreen[None]):
    """The keys of the screen underneath and of the app; any of q, escape or ? closes it."""

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll {
        width: 72; height: 80%; border: round $accent; background: $surface; padding: 0 1;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        bind("escape,q,question_mark", "close", "close the help", "help.close"),
    ]

    def __init__(self, content: Content, title: str) -> None:
        super().__init__()
        self.content = content
        self.heading = title

    def compose(self) -> ComposeResult:
        """The key list in a scrolling box."""
        with VerticalScroll() as box:
            box.border_title = Content(f"keys: {self.heading}")
            yield Static(self.content)

    def action_close(self) -> None:
        """Close the help."""
        self.dismiss(None)


def _ending(summary: SessionSummary) -> str:
    rule = f" ({summary.halt_rule})" if summary.halt_rule else ""
    return f"{summary.status}{rule}, {summary.events} events"


def replay_label(session: SessionSummary, other: SessionSummary, width: int = 68) -> str:
    """Three lines naming ``other`` for a diff with ``session``.

    Its id, its agent, and how it ended beside how ``session`` ended (status, halt rule and
    length; the diff itself says what differs).
    """
    same = (other.status, other.halt_rule, other.events) == (
        session.status,
        session.halt_rule,
        session.events,
    )
    ending = f"{_ending(other)}{', as this one' if same else f'; this one {_ending(session)}'}"
    return "\n".join(
        [
            cut_middle(other.session_id, width),
            f"  {cut_middle(other.agent or '-', width - 2)}",
            f"  {cut(ending, width - 2)}",
        ]
    )


class ChoiceScreen(ModalScreen[str | None]):
    """A question with a few answers (ids with labels); enter picks, escape cancels."""

    DEFAULT_CSS = """
    ChoiceScreen { align: center middle; }
    ChoiceScreen > Vertical {
        width: 80; height: auto; max-height: 80%; border: round $accent;
        background: $surface; padding: 0 1;
    }
    ChoiceScreen Static { margin: 0 0 1 0; }
    ChoiceScreen OptionList { height: auto; max-height: 20; border: none; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        bind("escape,q", "cancel", "cancel", "choice.cancel"),
        bind("j", "move(1)", "next answer", "choice.next"),
        bind("k", "move(-1)", "previous answer", "choice.previous"),
    ]

    def __init__(self, question: str, answers: Sequence[tuple[str, str]]) -> None:
        super().__init__()
        self.question = question
        self.answers = list(answers)

    def compose(self) -> ComposeResult:
        """The question and the list of answers."""
        with Vertical():
            yield Static(Content(safe_lines(self.question)))
            yield OptionList(
                *(Option(Content(safe_lines(label)), id=key) for key, label in self.answers)
            )

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        """Answer with the chosen id."""
        event.stop()
        self.dismiss(event.option.id)

    def action_move(self, step: int) -> None:
        """Highlight the next (1) or previous (-1) answer, as the arrows do."""
        answers = self.query_one(OptionList)
        if step > 0:
            answers.action_cursor_down()
        else:
            answers.action_cursor_up()

    def action_cancel(self) -> None:
        """Answer nothing."""
        self.dismiss(None)
