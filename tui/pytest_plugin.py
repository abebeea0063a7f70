"""A pytest plugin that replays journal fixtures against the current code.

Registered through the ``pytest11`` entry point, so it is active wherever agent-journal
is installed. With no configuration, every ``*.jsonl`` file under ``fixtures/`` in the
rootdir whose header says ``"format": "agent-journal"`` is one test item, named after the
file; other files are left alone. Settings (``pyproject.toml`` ``[tool.pytest.ini_options]``
or ``pytest.ini``):

* ``journal_fixtures``: the folder (default ``fixtures``);
* ``journal_agent``: a ``module:factory`` to replay every fixture with;
* ``journal_ignore``: fields left out of the comparison, one ``TYPE.dotted.path`` per line
  (what ``agent-journal replay --ignore`` takes);
* ``journal_live_model``: what answers where no recorded reply fits, so that
  ``--journal-update`` can re-record a fixture whose replay diverged before its end:
  ``agent`` (the agent's own model) or ``MODULE:FACTORY``. Without it such a fixture is
  not rewritten (a recorded reply is never paired with a context it was not recorded for);
* ``journal_live_tools``: tools that run for real in every replay (``*``: every tool not
  declared with side effects), so a fix inside a tool shows at its result;
* ``journal_allow_side_effects``: tools declared with side effects that may run for real
  too (what ``agent-journal replay --allow-side-effects`` takes), one name per line.

Each fixture takes the tool names of those two settings that its recording knows (any of
its requests declared, its model called or its code ran: fixtures of several agents share
one project's settings); a name no collected fixture knows (a typo) is a usage error before
anything runs. ``*`` means every tool, as ``--live-tool '*'`` and ``--live-tools`` do.

The agent a fixture records runs only when the trust list allows it (the ``agents`` of
``[tool.agent-journal]`` in ``pyproject.toml``, found from the rootdir upwards; see
`agentloop.trust`), and is imported from that table's ``pythonpath`` (default: the
project root), so no ``pythonpath`` ini setting is needed.

``--journal-update`` rewrites the fixtures whose replay changed and lists them; without
it nothing on disk changes. A malformed fixture or an agent that cannot be imported is an
error with a clear message, never a skip.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from replay import ReplayOptions

__all__ = ["JournalFixtureFile", "JournalFixtureItem"]


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add ``--journal-update`` and the ini settings."""
    group = parser.getgroup("agent-journal", "agent-journal fixtures")
    group.addoption(
        "--journal-update",
        action="store_true",
        default=False,
        help="Rewrite journal fixtures whose replay changed (an intended change).",
    )
    parser.addini(
        "journal_fixtures", "Folder of journal fixtures, from the rootdir.", default="fixtures"
    )
    parser.addini("journal_agent", "module:factory to replay every fixture with.", default="")
    parser.addini(
        "journal_live_model",
        "What answers where no recorded reply fits, to re-record with --journal-update: "
        "'agent' (the agent's own model) or MODULE:FACTORY.",
        default="",
    )
    parser.addini(
        "journal_live_tools",
        "Tools to run for real in every fixture's replay, one name per line ('*': every "
        "tool not declared with side effects); the others come from the recording.",
        type="linelist",
        default=[],
    )
    parser.addini(
        "journal_allow_side_effects",
        "Tools declared with side effects that may run for real in a replay (a live one, or "
        "one the recording never ran), one name per line (as replay --allow-side-effects).",
        type="linelist",
        default=[],
    )
    parser.addini(
        "journal_ignore",
        "Fields left out of every fixture's comparison, one TYPE.dotted.path per line "
        "(as replay --ignore).",
        type="linelist",
        default=[],
    )


def _is_fixture(path: Path) -> bool:
    """Whether a ``.jsonl`` file in the fixtures folder is ours.

    A first line that is a JSON object says so with ``"format": "agent-journal"``; any
    other JSON object (another tool's JSONL, with its own header) is left alone. Anything
    else (a first line that is not a JSON object, an empty or unreadable file) is collected
    too, so that a damaged fixture fails loudly instead of silently dropping out of the run.
    The line is parsed with orjson, whose nesting limit (1,024) raises a ``ValueError``
    where the standard library would recurse into a ``RecursionError`` and end the run;
    a ``RecursionError`` is still taken as "collect it" should any parser raise one.
    """
    import orjson

    try:
        with path.open("rb") as handle:
            first = handle.readline(1 << 16)
    except OSError:
        return True
    try:
        header = orjson.loads(first)
    except (ValueError, RecursionError):
        return True
    return not isinstance(header, dict) or header.get("format") == "agent-journal"


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    """Collect journal fixtures under the fixtures folder."""
    if file_path.suffix != ".jsonl":
        return None
    folder = Path(str(parent.config.rootpath)) / str(parent.config.getini("journal_fixtures"))
    if folder not in file_path.parents or not _is_fixture(file_path):
        return None
    collector: pytest.Collector = JournalFixtureFile.from_parent(parent, path=file_path)
    return collector


class JournalFixtureFile(pytest.File):
    """One fixture file: one item."""

    def collect(self) -> Iterator[pytest.Item]:
        """Yield the file's single item, named after the file."""
        yield JournalFixtureItem.from_parent(self, name=self.path.stem)


class FixtureFailure(Exception):
    """A fixture's replay diverged or broke its expectation."""


class FixtureError(Exception):
    """A fixture could not be replayed at all (malformed file, agent not importable)."""


class JournalFixtureItem(pytest.Item):
    """Replays one fixture and fails with the first divergence."""

    def runtest(self) -> None:
        """Replay the fixture; update it with ``--journal-update``."""
        from journal import JournalError
        from replay import replay_fixture

        update = bool(self.config.getoption("journal_update"))
        try:
            outcome = replay_fixture(
                self.path, _options(self.config), update=update, recorded_tools_only=True
            )
        except JournalError as e:
            raise FixtureError(str(e)) from e
        if outcome.passed:
            self.config.stash.setdefault(_PASSED, []).append(outcome.result.served)
            return
        if update and outcome.refused_update:
            raise FixtureFailure(
                _report(
                    self._shown_path(),
                    outcome,
                    self._reproduce(outcome.named_tools),
                    f"not rewritten: {outcome.refused_update}",
                )
            )
        if update:
            self.config.stash.setdefault(_UPDATED, []).append(str(self.path))
            return
        refused = outcome.refused_update
        raise FixtureFailure(
            _report(
                self._shown_path(),
                outcome,
                self._reproduce(outcome.named_tools),
                None
                if refused is None
                else "if the change is intended, pytest --journal-update will not rewrite it as "
                f"it is: {refused}",
            )
        )

    def _reproduce(self, named: frozenset[str]) -> str:
        """The command that replays this fixture as the plugin did (``named``: its tools)."""
        import shlex

        words = ["agent-journal", "replay", str(self._shown_path())]
        agent = str(self.config.getini("journal_agent"))
        if agent:
            words += ["--agent", agent]
        live = self.config.getini("journal_live_tools")
        if live == ["*"]:
            words.append("--live-tools")
        else:
            words += [word for name in live if name in named for word in ("--live-tool", name)]
        for name in self.config.getini("journal_allow_side_effects"):
            if name in named:
                words += ["--allow-side-effects", name]
        for spec in self.config.getini("journal_ignore"):
            words += ["--ignore", spec]
        return shlex.join(words)

    def _shown_path(self) -> Path:
        """The fixture's path relative to the rootdir when it is under it."""
        root = Path(str(self.config.rootpath))
        return self.path.relative_to(root) if root in self.path.parents else self.path

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        """A readable report instead of a traceback."""
        if isinstance(excinfo.value, FixtureFailure | FixtureError):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        """Where the item comes from."""
        return self.path, None, f"journal fixture {self.name}"


def _options(config: pytest.Config) -> ReplayOptions:
    """The ini settings as `replay.ReplayOptions`, built once per run."""
    if _OPTIONS in config.stash:
        return config.stash[_OPTIONS]
    from agentloop import TrustList
    from replay import DEFAULT_RULES, ReplayOptions

    options = ReplayOptions(
        agent=str(config.getini("journal_agent")) or None,
        live_tools=config.getini("journal_live_tools"),
        allow_side_effects=config.getini("journal_allow_side_effects"),
        live_model=str(config.getini("journal_live_model")) or None,
        rules=DEFAULT_RULES.ignoring(config.getini("journal_ignore")),
        trust=TrustList.discover(config.rootpath),
    )
    config.stash[_OPTIONS] = options
    return options


_OPTIONS = pytest.StashKey["ReplayOptions"]()
_PASSED = pytest.StashKey[list[Any]]()
"""What each fixture that replayed identical served (`replay.Served`)."""
_UPDATED = pytest.StashKey[list[str]]()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    """Refuse settings that name a tool no collected fixture knows (a typo, say).

    Before any fixture runs: a run that names a tool no recording has would serve it from
    the recording while its author believes it runs, and say "passed". The tools a
    fixture knows are those any of its requests declared, its model called or its code
    ran (`replay.known_tools`), not only its first request's.
    """
    live = config.getini("journal_live_tools")
    named = set(() if live == ["*"] else live) | set(config.getini("journal_allow_side_effects"))
    fixtures = [item for item in items if isinstance(item, JournalFixtureItem)]
    if not named or not fixtures:
        return
    from journal import JournalError
    from journal.formats import read_jsonl
    from replay import known_tools

    known: set[str] = set()
    for item in fixtures:
        try:
            known |= known_tools(record for _, record in read_jsonl(item.path).records)
        except JournalError:  # the item itself reports a damaged file
            continue
    unknown = sorted(named - known)
    if unknown:
        raise pytest.UsageError(
            f"journal_live_tools / journal_allow_side_effects name {', '.join(unknown)}: no "
            "fixture's recording has such a tool (a typo?); nothing was replayed"
        )


def _served_line(served: list[Any]) -> str:
    """What the fixtures that replayed identical proved, in one line."""
    from replay import Served

    not_run = sorted({name for each in served for name in each.not_run})
    ran = sorted({name for each in served for name in each.ran})
    total = Served(
        model_replies=sum(each.model_replies for each in served),
        failed_calls=sum(each.failed_calls for each in served),
        tool_results=sum(each.tool_results for each in served),
        not_run=tuple(name for name in not_run if name not in ran),
        ran=tuple(ran),
    )
    line = total.line.replace("--live-tool", "journal_live_tools =")
    return f"{len(served)} replayed identical: {line}"


def _short(value: object, width: int = 200) -> str:
    import orjson

    from journal import clip

    return clip(orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode(), width)


def _report(path: Path, outcome: Any, reproduce: str, refused: str | None = None) -> str:
    from journal import clip
    from replay import describe

    from .render import SERVED_ANYWAY

    lines = [f"journal fixture {path.name} ({outcome.session_id}) no longer replays identically"]
    config = outcome.result.config_changes
    divergence = outcome.result.behaviour_divergence
    if config:
        served = SERVED_ANYWAY if divergence is None else ""
        lines.append(f"first divergence at seq 0: the configuration changed{served}:")
        lines += [_change(change) for change in config]
    if divergence is not None:
        where = "with the recorded replies, behaviour diverged" if config else "first divergence"
        lines += [
            f"{where} at seq {divergence.seq}: {divergence.reason}",
            f"  expected: {clip(describe(divergence.expected), 240)}",
            f"  actual:   {clip(describe(divergence.actual), 240)}",
        ]
        lines += [_change(change) for change in divergence.changes]
    if outcome.broken_expectation:
        lines.append(outcome.broken_expectation)
    lines += [
        f"up to there, {outcome.result.served.line}",
        f"reproduce: {reproduce}",
        refused or "if the change is intended: pytest --journal-update",
    ]
    return "\n".join(lines)


def _change(change: Any) -> str:
    expected, actual = change.shown(80)
    return f"    {change.path}: {expected} -> {actual}"


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """Say what the identical fixtures served; list the fixtures ``--journal-update`` rewrote."""
    passed = config.stash.get(_PASSED, [])
    if passed:
        terminalreporter.section("agent-journal fixtures")
        terminalreporter.write_line(_served_line(passed))
    updated = config.stash.get(_UPDATED, [])
    if updated:
        terminalreporter.section("agent-journal fixtures updated")
        for path in updated:
            terminalreporter.write_line(f"updated {path}")
