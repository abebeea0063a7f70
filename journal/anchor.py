"""Anchors: the heads of every session, kept outside the journal, checked against it later.

The hash chain proves a session's events were not changed *unless* whoever changed them
also recomputed the hashes after the change (and the projection): with write access to
the journal and no key, that is always possible. An anchor closes that gap: `take_anchor`
records, for every session, its last seq and head hash read from the event rows, the
journal's chain kind, and the head of the erasure audit chain. Kept elsewhere (another
machine, a ticket, a signed commit), `check_anchor` later reports any session whose
history up to the anchored seq was rewritten (the stored hash at that seq differs), cut
(it ends before that seq), deleted (it is gone with no audit record of its erasure that
chains) or moved to other global positions (the anchored head's position differs: what
followers of `read_after` rely on), erasure records rewritten before the anchored head, and
a chain kind that differs from the anchor's (an HMAC journal rewritten as plain sha256).

An anchor names the journal it was taken of: its target and, on PostgreSQL, its schema
(`Anchor.schema_name`). One of another schema of the same database is refused; one of another
target is checked only when one of its heads is there (a journal moved or copied).
Anchors of format 1 (before 0.2.0) are read as they are: they hold no positions (none is
checked) and no schema (one of another schema of the same database is then checked as of
this one, as before); take a new anchor to have both.

What an anchor cannot see: changes to events appended after it was taken (take anchors
regularly), a session created and removed between two anchors, and anything when the
attacker can also rewrite the anchor file. With an HMAC key (kept off the journal's host),
rewriting a chain needs the key, anchor or not.

Cost: `take_anchor` is one grouped query over the events; `check_anchor` one indexed read
per anchored session.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from .canonical import format_ts
from .clock import utc_now
from .errors import InvalidInputError
from .problems import Problem, ProblemKind
from .store import ChainKind, Journal

__all__ = [
    "ANCHOR_FORMAT",
    "Anchor",
    "AnchoredSession",
    "ForeignAnchorError",
    "check_anchor",
    "take_anchor",
]

ANCHOR_FORMAT = "agent-journal-anchor"


class AnchoredSession(BaseModel):
    """One session's head when the anchor was taken."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    session_id: str
    last_seq: int
    head_hash: str
    position: int | None = None
    """The head event's global position (None in anchors of format 1)."""


class Anchor(BaseModel):
    """The heads of a journal's sessions at one moment, with its chain kind."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    format: str = ANCHOR_FORMAT
    format_version: int = 2
    """2 added the heads' positions and the schema; 1 is read as it is."""
    target: str
    schema_name: str | None = None
    """The PostgreSQL schema that holds the journal (None: SQLite, or format 1)."""
    taken: str
    chain: ChainKind
    sessions: list[AnchoredSession] = Field(default_factory=list)
    erasures: int = 0
    """How many erasure audit records there were."""
    erasures_head: str = ""
    """The link of the last of them (empty: none, or not chained)."""


class ForeignAnchorError(InvalidInputError):
    """The anchor is not of the journal it is checked against.

    It names another schema of the same database, or another target and none of its heads
    is there.
    """


def take_anchor(journal: Journal) -> Anchor:
    """Return the anchor of ``journal`` now: every session's head, read from its events."""
    erasures = journal.erasures()
    return Anchor(
        target=journal.target,
        schema_name=journal.schema_name,
        taken=format_ts(utc_now()),
        chain=journal.chain_kind,
        sessions=[
            AnchoredSession(session_id=sid, last_seq=seq, head_hash=head, position=position)
            for sid, (seq, head, position) in journal.placed_heads().items()
        ],
        erasures=len(erasures),
        erasures_head=erasures[-1].hash if erasures else "",
    )


def check_anchor(journal: Journal, anchor: Anchor) -> list[Problem]:
    """Return what changed in ``journal`` since ``anchor`` that an append cannot explain.

    A session erased since the anchor is no finding when an audit record of its erasure
    covers the anchored seq (`Journal.verify` checks that record's chain).

    Raises:
        ForeignAnchorError: the anchor names another schema of the same database (two
            journals side by side), or another target (a path, a URL) and not one session
            head it holds is in ``journal`` (nor erased from it): it was taken of another
            journal, and reporting each of its sessions as deleted or rewritten here would
            be wrong. An anchor of this journal is always checked: everything it saw may
            have been rewritten. (An anchor of format 1 names no schema: one of another
            schema of the same database is checked as this one's.)
    """
    problems: list[Problem] = []

    def report(session_id: str | None, seq: int | None, kind: ProblemKind, message: str) -> None:
        problems.append(Problem(session_id=session_id, seq=seq, kind=kind, message=message))

    if anchor.chain != journal.chain_kind:
        report(
            None,
            None,
            "chain_kind",
            f"the anchor was taken of a {anchor.chain} chain; the journal is read as "
            f"{journal.chain_kind} (its chains were rewritten, or the key is not the one used)",
        )
    erasures = journal.erasures()
    erased = {erasure.session_id: erasure for erasure in erasures}
    if len(erasures) < anchor.erasures or (
        anchor.erasures and erasures[anchor.erasures - 1].hash != anchor.erasures_head
    ):
        report(
            None,
            None,
            "anchor",
            f"the first {anchor.erasures} erasure audit records, which the anchor saw, changed",
        )
    _refuse_other_schema(journal, anchor)
    heads = journal.heads()
    placed = {
        item.session_id: journal.placed_hash_at(item.session_id, item.last_seq)
        for item in anchor.sessions
    }
    stored = {sid: None if found is None else found[0] for sid, found in placed.items()}
    foreign = bool(anchor.sessions) and anchor.target != journal.target
    if foreign and not any(
        stored[item.session_id] == item.head_hash
        or (item.session_id in erased and erased[item.session_id].events > item.last_seq)
        for item in anchor.sessions
    ):
        raise ForeignAnchorError(
            f"the anchor is not of this journal: it was taken of {_named_anchor(anchor)} at "
            f"{anchor.taken}, and none of the {len(anchor.sessions)} session head(s) it holds "
            f"is in {_named_journal(journal)} (were it this journal's, all of them were "
            "rewritten or deleted)"
        )
    for anchored in anchor.sessions:
        sid, seq = anchored.session_id, anchored.last_seq
        if stored[sid] == anchored.head_hash:
            found = placed[sid]
            if anchored.position is not None and found is not None:
                if found[1] != anchored.position:
                    report(
                        sid,
                        seq,
                        "anchor",
                        f"seq {seq} moved from global position {anchored.position}, where "
                        f"the anchor saw it, to {found[1]}",
                    )
            continue
        if stored[sid] is not None:
            report(sid, seq, "anchor", f"history up to seq {seq} was rewritten since the anchor")
        elif sid in heads or journal.summary(sid) is not None:
            report(sid, seq, "anchor", f"cut: seq {seq}, which the anchor saw, is gone")
        elif sid not in erased or erased[sid].events <= seq:
            report(sid, None, "anchor", f"deleted since the anchor, which saw seq 0..{seq}")
    return problems


def _named(target: str, schema: str | None) -> str:
    """A journal as an anchor names it: its target, and its schema if it has one."""
    return target if schema is None else f"{target} (schema {schema})"


def _named_anchor(anchor: Anchor) -> str:
    return _named(anchor.target, anchor.schema_name)


def _named_journal(journal: Journal) -> str:
    return _named(journal.target, journal.schema_name)


def _refuse_other_schema(journal: Journal, anchor: Anchor) -> None:
    """Raise `ForeignAnchorError` for an anchor of another schema of the same database."""
    if anchor.schema_name is None or anchor.target != journal.target:
        return
    if anchor.schema_name != journal.schema_name:
        raise ForeignAnchorError(
            f"the anchor is not of this journal: it was taken of {_named_anchor(anchor)} at "
            f"{anchor.taken}, and this is {_named_journal(journal)}: two schemas of one "
            "database are two journals"
        )
