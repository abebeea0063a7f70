"""The runs a shared page shows, copied (redacted by default) into a journal of their own.

Everything a page holds comes from one scratch journal in memory, ``view``: the session,
the other run of a ``--diff`` and the replay of a ``--replay``. Each run is copied in as a
fixture is written: every record redacted (`journal.formats.Redactor`), the hash chain
made again, so the summaries, the states and the diff of the page are computed from the
redacted events only and nothing unredacted can reach the page. All runs are redacted
under the first session's id, so the same secret gets the same placeholder on both sides
of a diff and redaction alone never makes a difference.

A ``--replay`` runs the current code on the redacted copy (as a fixture is replayed):
recorded model outputs and tool results served, nothing live; the replay is saved into
``view``, never into the journal the session came from.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from journal import InvalidInputError, Journal, import_file
from journal.formats import Redactor, rechain

if TYPE_CHECKING:
    from replay import NormalizationRules, ReplayOptions, ReplayResult

__all__ = ["SharedRuns", "gather", "is_file"]


def is_file(run: str) -> bool:
    """Whether a run named on the command line is a JSONL file rather than a session id."""
    return run.endswith(".jsonl") or Path(run).is_file()


@dataclass
class SharedRuns:
    """The runs of one page, in ``view``: the session, and the run it is compared with."""

    view: Journal
    session_id: str
    other_id: str | None = None
    replay: ReplayResult | None = None
    redacted: bool = True
    names: dict[str, str] = field(default_factory=dict)
    """What each run was called on the command line (a session id or a file)."""
    rules: NormalizationRules | None = None
    """How the diff normalises (the replay's rules with ``--replay``; None: the default)."""

    def close(self) -> None:
        """Close the scratch journal."""
        self.view.close()


def _source_records(journal: Journal, session_id: str) -> Iterator[dict[str, Any]]:
    for row in journal.stored_events(session_id):
        yield row.record()


def _copy_in(
    view: Journal,
    source: Journal,
    session_id: str,
    *,
    as_id: str,
    redactor: Redactor | None,
    namespace: str,
) -> None:
    """Copy ``session_id`` of ``source`` into ``view`` as ``as_id``, redacted in ``namespace``."""
    copied: list[dict[str, Any]] = []
    for record in _source_records(source, session_id):
        if redactor is not None:
            record = {**redactor.redact_record({**record, "session_id": namespace})}
        copied.append({**record, "session_id": as_id})
    view.import_records(as_id, ((f"{as_id}:{r['seq']}", r) for r in rechain(copied, view.hasher)))


def _load(
    view: Journal,
    journal: Journal | None,
    run: str,
    *,
    taken: set[str],
    redactor: Redactor | None,
    namespace: str | None,
) -> str:
    """Copy one run (a session of ``journal`` or a JSONL file) into ``view``; its id there."""
    if is_file(run):
        with Journal.open(":memory:") as scratch:
            session_id = import_file(scratch, run).session_id
            as_id = session_id if session_id not in taken else f"{session_id[:120]}.other"
            _copy_in(
                view,
                scratch,
                session_id,
                as_id=as_id,
                redactor=redactor,
                namespace=namespace or session_id,
            )
            return as_id
    if journal is None:
        raise InvalidInputError(f"{run}: not a file, and no journal to find the session in")
    journal.require(run)
    as_id = run if run not in taken else f"{run[:120]}.other"
    _copy_in(view, journal, run, as_id=as_id, redactor=redactor, namespace=namespace or run)
    return as_id


def gather(
    journal: Journal | None,
    session: str,
    *,
    other: str | None = None,
    replay: ReplayOptions | None = None,
    redact: bool = True,
    redactor: Redactor | None = None,
    rules: NormalizationRules | None = None,
) -> SharedRuns:
    """Copy the runs of a page into a scratch journal (the caller closes `SharedRuns`).

    Args:
        journal: where sessions named by id are (None when every run is a file).
        session: the session shown: an id in ``journal`` or a JSONL file.
        other: the run it is diffed with (``--diff``): an id or a JSONL file.
        replay: replay the session with the current code and these options (``--replay``).
        redact: redact every run, as fixtures are (``--no-redact``: False).
        redactor: the redactor to use (default: a fresh one, random key).
        rules: how the diff normalises (default: the replay's, else `replay.DEFAULT_RULES`).

    Raises:
        JournalError: a run is missing or malformed, or the replay cannot run.
    """
    if other is not None and replay is not None:
        raise InvalidInputError("--diff and --replay exclude each other: give one")
    chosen = (redactor or Redactor()) if redact else None
    view = Journal.open(":memory:")
    try:
        session_id = _load(view, journal, session, taken=set(), redactor=chosen, namespace=None)
        runs = SharedRuns(
            view,
            session_id,
            redacted=redact,
            names={session_id: session},
            rules=replay.rules if replay is not None else rules,
        )
        if other is not None:
            runs.other_id = _load(
                view, journal, other, taken={session_id}, redactor=chosen, namespace=session_id
            )
            runs.names[runs.other_id] = other
        if replay is not None:
            from replay import Replayer

            result = Replayer(replay, save=True).replay(view, session_id)
            runs.replay = result
            if result.saved:
                runs.other_id = result.replay_session_id
                runs.names[runs.other_id] = f"replay of {session_id} with the current code"
        return runs
    except BaseException:
        view.close()
        raise
