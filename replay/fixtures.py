"""Regression fixtures: one canonical, redacted JSONL file per session, replayed by pytest.

A fixture is an ordinary agent-journal JSONL file. Its header may carry ``expect`` for a
session that ended badly on purpose (an expected failure): ``{"status": "halted",
"halt_rule": "repeat", "at_seq": 8}``; replaying it then asserts that the agent still
halts there, by that rule.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from capture import REPLAY_STOPPED
from journal import Journal, SessionState
from journal.formats import Redactor, export_lines, read_jsonl, write_atomically

from ._session import known_tools
from ._verdict import ReplayResult
from .options import ReplayOptions
from .replayer import Replayer

__all__ = [
    "FixtureReplay",
    "expectation",
    "fixture_lines",
    "replay_fixture",
    "write_fixture",
]


def expectation(state: SessionState) -> dict[str, Any] | None:
    """The ``expect`` header of a session that halted or failed, else None."""
    if state.status not in ("halted", "failed"):
        return None
    return {"status": state.status, "halt_rule": state.halt_rule, "at_seq": state.last_seq}


def fixture_lines(
    journal: Journal,
    session_id: str,
    *,
    redactor: Redactor | None = None,
    rename: str | None = None,
) -> Iterator[bytes]:
    """Yield a fixture's lines: the session's export with ``expect`` in the header.

    ``expect`` is there when the session halted or failed; see `journal.formats.export_lines`
    for ``redactor`` and ``rename``.
    """
    expect = expectation(journal.state(session_id))
    yield from export_lines(
        journal,
        session_id,
        redactor=redactor,
        rename=rename,
        header_extra=None if expect is None else {"expect": expect},
    )


def write_fixture(
    journal: Journal,
    session_id: str,
    path: str | Path,
    *,
    redact: bool = True,
    redactor: Redactor | None = None,
) -> Path:
    """Write a session as a fixture file (redacted by default) and return its path.

    ``redactor`` replaces the default one (to add patterns or fix the key).
    """
    redactor = (redactor or Redactor()) if redact else None
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    write_atomically(fixture_lines(journal, session_id, redactor=redactor), path)
    return Path(path)


@dataclass(frozen=True)
class FixtureReplay:
    """A fixture replayed: the replay result, and a broken expectation if there is one."""

    path: str
    session_id: str
    result: ReplayResult
    expect: dict[str, Any] | None
    broken_expectation: str | None
    refused_update: str | None = None
    """Why ``update`` does not rewrite a fixture that moved, asked or not (it needs a live
    model, say)."""
    named_tools: frozenset[str] = frozenset()
    """With ``recorded_tools_only``: the tools named live or allowed that the recording has."""

    @property
    def passed(self) -> bool:
        """True when the replay is identical and the expectation holds."""
        return self.result.identical and self.broken_expectation is None


def _check_expectation(expect: dict[str, Any] | None, state: SessionState) -> str | None:
    if expect is None:
        return None
    now = {"status": state.status, "halt_rule": state.halt_rule, "at_seq": state.last_seq}
    if all(now.get(key) == value for key, value in expect.items()):
        return None
    return (
        f"expected the agent to still end {expect.get('status')} by rule "
        f"{expect.get('halt_rule')} at seq {expect.get('at_seq')}; the replay ended "
        f"{now['status']} by rule {now['halt_rule']} at seq {now['at_seq']}"
    )


def replay_fixture(
    path: str | Path,
    options: ReplayOptions | None = None,
    *,
    update: bool = False,
    recorded_tools_only: bool = False,
) -> FixtureReplay:
    """Replay a fixture file against the current code; with ``update``, rewrite it if it moved.

    ``options`` (`ReplayOptions`) say how: the fixture's recorded agent runs only when
    their trust list allows it, ``agent`` runs as given; ``rules`` say what the comparison
    leaves out; ``live_tools`` run for real (``True``: every tool but those declared with
    side effects), so a fix inside a tool shows at its result; a tool declared with side
    effects runs for real only when ``allow_side_effects`` names it too. With
    ``recorded_tools_only`` (the pytest plugin's project-wide settings, for fixtures of
    several agents) only the names among the recording's tools apply
    (`ReplayOptions.narrowed_to`, `FixtureReplay.named_tools`); otherwise a name the agent
    has no tool for is refused.

    A fixture is rewritten only with what the code did on replies recorded for its very
    context: when the replay stopped for want of one (it diverged before the recording's
    end) or ran with another configuration, ``update`` needs a ``live_model`` to
    re-record, and otherwise refuses (`FixtureReplay.refused_update`). A re-recording the
    replay itself stopped (``replay_stopped``: a call to a tool with side effects that the
    recording never ran) is refused too: that stop is not the code's. A rewritten fixture
    is redacted, as `write_fixture` writes one by default: what a live model or live tool
    said is new data.

    Raises:
        InvalidInputError: the file is malformed (names file:line).
        AgentLoadError: the fixture's agent (or the override) cannot be built.
        UntrustedReferenceError: the fixture's agent is not trusted (and none was given).
    """
    from journal import import_file

    parsed = read_jsonl(path)
    expect = parsed.header.get("expect")
    expected = expect if isinstance(expect, dict) else None
    refused = broken = state = None
    named: frozenset[str] = frozenset()
    with Journal.open(":memory:") as journal:
        imported = import_file(journal, path)
        options = options or ReplayOptions()
        if recorded_tools_only:
            options = options.narrowed_to(known_tools(record for _, record in parsed.records))
            named = options.named_live | options.allow_side_effects
        replayer = Replayer(options, save=True)
        result = replayer.replay(journal, imported.session_id, source=str(path))
        if result.saved:
            state = journal.state(result.replay_session_id)
            broken = _check_expectation(expected, state)
        if not result.identical or broken is not None:
            refused = _refusal(result, state)
            if update and refused is None:
                lines = fixture_lines(
                    journal,
                    result.replay_session_id,
                    redactor=Redactor(),
                    rename=imported.session_id,
                )
                write_atomically(lines, path)
    return FixtureReplay(
        path=str(path),
        session_id=imported.session_id,
        result=result,
        expect=expected,
        broken_expectation=broken,
        refused_update=refused,
        named_tools=named,
    )


def _refusal(result: ReplayResult, state: SessionState | None) -> str | None:
    """Why a replay cannot become the fixture (None: it can)."""
    how = (
        "re-record it with a live model: journal_live_model = agent (the agent's own model) "
        "or MODULE:FACTORY in the pytest ini, then pytest --journal-update"
    )
    if result.stopped_at is not None:
        return (
            f"the replay stopped at seq {result.stopped_at}, where no recorded "
            f"reply fits what the code now does; {how}"
        )
    if not result.saved:
        return f"the configuration changed; {how}"
    if state is not None and state.halt_rule == REPLAY_STOPPED:  # the replay's, not the code's
        return (
            f"{state.halt_reason}; that stop is the replay's, not the code's "
            "(in pytest, journal_allow_side_effects names the tools with side effects that "
            "may run for real, journal_live_tools the others)"
        )
    return None
