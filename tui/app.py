"""`JournalApp`: the terminal UI over a journal (Textual).

Screens: Sessions (every session), Session (timeline, event, state), Diff (two runs
aligned). Keys follow less, vim and lazygit; every key has an id and a description, and
the command palette (ctrl+p) lists each as ``category: action``. A worker follows the
journal (`Journal.wait_for_events` / `read_after`, the same on SQLite and PostgreSQL) and
tells the screens what grew, so a session being written shows its new events live.

    JournalApp(db="agent-journal.db").run()
    JournalApp(db="agent-journal.db", session="s1").run()
    JournalApp(db="agent-journal.db", diff=("s1", "s1.replay-1")).run()
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from textual import work
from textual.app import App, SystemCommand
from textual.binding import BindingType
from textual.screen import Screen
from textual.worker import get_current_worker

from journal import InvalidInputError, Journal, SessionSummary
from replay import ReplayResult

from .keys import bind, command, commands_for, declared_bindings
from .screens.base import JournalScreen
from .screens.dialogs import ChoiceScreen, HelpScreen, PromptScreen, help_content, replay_label
from .screens.diff import DiffScreen
from .screens.session import STATE_DELAY, SessionScreen
from .screens.sessions import SessionsScreen
from .text import safe_text

__all__ = ["JournalApp"]

T = TypeVar("T")


class JournalApp(App[None]):
    """The agent-journal terminal UI.

    Args:
        db: the journal: a SQLite path, a ``postgresql://`` URL, or an open `Journal`
            (which the app then leaves open).
        session: open this session's timeline first.
        diff: open the diff of these two sessions first.
        follow: watch the journal and show new events and sessions as they are written.
        poll: seconds between checks for new events when the store cannot push them.
        state_delay: seconds the cursor rests on an event before the state after it is
            folded (tests use 0).
        read_only: write no session: ``r`` replays and shows the verdict without saving
            the replay (``agent-journal serve`` without ``--writable``).

    Raises:
        JournalError: the journal is missing or unreadable, or a session is unknown (before
            anything is drawn, so the CLI can say so in one line).
    """

    TITLE = "agent-journal"

    BINDINGS: ClassVar[list[BindingType]] = [
        bind(
            "q", "go_back", "back", "app.back", title="back (quit on the sessions list)", show=True
        ),
        bind("escape", "go_back(False)", "back", "app.escape", title="back to the last screen"),
        bind("Q", "quit", "quit", "app.quit"),
        bind("question_mark", "help", "keys", "app.help", title="show every key", show=True),
        bind("ctrl+p", "command_palette", "palette", "app.palette", title="command palette"),
    ]

    def __init__(
        self,
        db: str | Path | Journal,
        session: str | None = None,
        diff: Sequence[str] | None = None,
        *,
        follow: bool = True,
        poll: float = 0.25,
        state_delay: float = STATE_DELAY,
        read_only: bool = False,
    ) -> None:
        super().__init__()
        self._owns_journal = not isinstance(db, Journal)
        self.journal = db if isinstance(db, Journal) else Journal.open(db, create=False)
        try:
            if diff is not None and len(diff) != 2:
                raise InvalidInputError(f"--diff takes two sessions, not {len(diff)}")
            for session_id in (session, *(diff or ())):
                if session_id is not None:
                    self.journal.require(session_id)
        except BaseException:
            self._close_journal()
            raise
        self.start_session = session
        self.start_diff = tuple(diff) if diff is not None else None
        self.follow = follow
        self.poll = poll
        self.state_delay = state_delay
        self.read_only = read_only
        self.closing = threading.Event()
        self._followed = threading.Event()

    @property
    def journal_name(self) -> str:
        """The journal's file name, or its URL (without a password)."""
        target = self.journal.target
        return target if "://" in target else Path(target).name

    # -- lifecycle --------------------------------------------------------------------

    def get_default_screen(self) -> Screen[Any]:
        """The sessions list is the screen everything else goes back to."""
        return SessionsScreen()

    def on_mount(self) -> None:
        """Open what was asked for and start following the journal."""
        if self.start_session is not None:
            self.push_screen(SessionScreen(self.start_session))
        if self.start_diff is not None:
            self.push_screen(DiffScreen(*self.start_diff))
        if self.follow:
            self._follow()
        else:
            self._followed.set()

    def on_unmount(self) -> None:
        """Stop following, then close the journal if the app opened it."""
        self.closing.set()
        self._followed.wait(timeout=max(2.0, self.poll * 4))
        self._close_journal()

    def _close_journal(self) -> None:
        if self._owns_journal:
            self.journal.close()

    def from_thread(self, callback: Callable[..., Any], *args: Any) -> None:
        """Run ``callback(*args)`` on the UI thread from a worker (nothing once closing)."""
        if self.closing.is_set():
            return
        try:
            self.call_from_thread(callback, *args)
        except RuntimeError:  # the app stopped between the check and the call
            pass

    def hand_over(self, what: str, work: Callable[[], T], done: Callable[[T], object]) -> None:
        """In a worker: run ``work()``, then ``done(result)`` on the UI thread.

        An exception is shown as a notification naming ``what`` (never a crash).
        """
        try:
            result = work()
        except Exception as error:  # shown, never a crash
            self.from_thread(self.report, what, error)
            return
        self.from_thread(done, result)

    def report(self, what: str, error: BaseException) -> None:
        """Show an error of background work as a notification (never a crash)."""
        if not self.closing.is_set():
            message = f"{what}: {type(error).__name__}: {error}"
            self.notify(safe_text(message), severity="error", markup=False, timeout=8)

    def warn(self, message: str) -> None:
        """Show a one-line warning (plain text)."""
        self.notify(safe_text(message), severity="warning", markup=False)

    # -- follow mode ------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="follow", exit_on_error=False)
    def _follow(self) -> None:
        """Wait for new events and tell the screens which sessions grew (a worker)."""
        worker = get_current_worker()
        try:
            position = self.journal.head_position()
            while not worker.is_cancelled and not self.closing.is_set():
                if not self.journal.wait_for_events(position, self.poll):
                    continue
                grown: dict[str, int] = {}
                while True:
                    rows = self.journal.read_after(position, limit=1000)
                    for row in rows:
                        grown[row.session_id] = row.seq
                        position = row.position if row.position is not None else position
                    if len(rows) < 1000:
                        break
                if grown:
                    self.from_thread(self.journal_changed, grown)
        except Exception as error:  # a closed or broken store: say so unless closing
            if not self.closing.is_set():
                self.from_thread(self.report, "following the journal", error)
        finally:
            self._followed.set()

    def journal_changed(self, sessions: dict[str, int]) -> None:
        """Tell every screen which sessions grew."""
        for screen in self.screen_stack:
            if isinstance(screen, JournalScreen):
                screen.journal_changed(sessions)

    # -- replay and diff --------------------------------------------------------------

    def start_replay(self, session_id: str, agent: str | None = None) -> None:
        """Replay ``session_id`` with the current code in a worker, then offer the diff.

        The recorded agent runs only when the trust list allows it; otherwise, or when the
        session records none (an imported transcript), a prompt asks for the agent to run
        (``agent``, given by the user, runs as given).
        """
        self.notify(f"replaying {safe_text(session_id)}…", markup=False)
        self._replay(session_id, agent)

    @work(thread=True, exclusive=True, group="replay", exit_on_error=False)
    def _replay(self, session_id: str, agent: str | None) -> None:
        from agentloop import AgentLoadError, UntrustedReferenceError
        from replay import Replayer, ReplayOptions

        def run() -> ReplayResult | AgentLoadError:
            if agent is None and self.journal.require(session_id).agent is None:
                return AgentLoadError(
                    f"session {session_id} records no agent reference: name the agent to run"
                )
            try:
                return Replayer(ReplayOptions(agent=agent), save=not self.read_only).replay(
                    self.journal, session_id
                )
            except UntrustedReferenceError as refused:
                return refused

        self.hand_over(f"replay of {session_id}", run, partial(self._replayed, session_id))

    def _replayed(self, session_id: str, outcome: ReplayResult | Exception) -> None:
        if isinstance(outcome, Exception):
            self.warn(str(outcome))
            self.push_screen(
                PromptScreen("agent to run instead:", placeholder="module:factory"),
                lambda answer: self.start_replay(session_id, answer) if answer else None,
            )
            return
        result = outcome
        verdict = result.summary
        original, replayed = result.session_id, result.replay_session_id
        if not result.saved:  # nothing to diff with: say why
            self.push_screen(
                ChoiceScreen(
                    f"replay of {original}: {verdict}\n{result.unsaved or self._why_unsaved()}",
                    [("close", "close")],
                )
            )
            return
        self.push_screen(
            ChoiceScreen(
                f"replay of {original}: {verdict}\nsaved as {replayed}",
                [("diff", f"open the diff with {replayed}"), ("close", "close")],
            ),
            lambda answer: self._open_diff(original, replayed) if answer == "diff" else None,
        )

    def _why_unsaved(self) -> str:
        return "read-only: the replay is not saved" if self.read_only else "not saved"

    def _open_diff(self, a: str, b: str) -> None:
        self.push_screen(DiffScreen(a, b))

    def open_replays(self, session_id: str) -> None:
        """Diff ``session_id`` with a saved replay of it (or, for a replay, its original)."""
        self._find_replays(session_id)

    @work(thread=True, exclusive=True, group="lookup", exit_on_error=False)
    def _find_replays(self, session_id: str) -> None:
        def find() -> tuple[SessionSummary, list[SessionSummary]]:
            summary = self.journal.require(session_id)
            others = [s for s in self.journal.sessions() if s.replay_of == session_id]
            if summary.replay_of:
                others.insert(0, self.journal.require(summary.replay_of))
            return summary, others

        self.hand_over(f"replays of {session_id}", find, self._choose_replay)

    def _choose_replay(self, found: tuple[SessionSummary, list[SessionSummary]]) -> None:
        summary, others = found
        session_id = summary.session_id
        if not others:
            self.warn(f"no saved replay of {session_id}: press r to replay it now")
        elif len(others) == 1:
            self._open_diff(session_id, others[0].session_id)
        else:
            self.push_screen(
                ChoiceScreen(
                    f"diff {session_id} with:",
                    [(other.session_id, replay_label(summary, other)) for other in others],
                ),
                lambda answer: self._open_diff(session_id, answer) if answer else None,
            )

    # -- keys, help and the palette -----------------------------------------------------

    def action_go_back(self, quit: bool = True) -> None:
        """Go back to the previous screen; quit from the sessions list (if ``quit``)."""
        if len(self.screen_stack) > 1:
            self.pop_screen()
        elif quit:
            self.exit()

    def action_help(self) -> None:
        """Show every key of this screen and of the app."""
        screen = self.screen
        nodes = list(screen.palette_nodes()) if isinstance(screen, JournalScreen) else [screen]
        title = type(screen).__name__.removesuffix("Screen").lower() or "app"
        content = help_content(declared_bindings(self), nodes, self)
        self.push_screen(HelpScreen(content, title))

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        """Every key of the screen and the app as ``category: action``, then extras."""
        nodes = list(screen.palette_nodes()) if isinstance(screen, JournalScreen) else [screen]
        yield from commands_for(self, [*nodes, self])
        if isinstance(screen, JournalScreen):
            yield from screen.extra_commands()
        yield command("app: change theme", "pick a colour theme", self.action_change_theme)
