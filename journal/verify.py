"""Integrity checks over stored records: the hash chain first, then decoding.

`check_session` walks one session's rows in seq order and checks the chain over the stored
bytes before decoding anything. It reports, as `Problem` findings:

* ``altered``: a row's hash does not match sha256(previous hash + its body), so this
  event (or, when its hash was recomputed too, the one before it) was changed;
* ``reordered``: a row's body names another seq or session than the row it sits in;
* ``removed``: a seq is missing inside the chain;
* ``truncated``: the chain ends before the projection's last seq (a cut-off tail), or the
  projection's head hash is not the chain's;
* ``projection``: events without a projection row, or a projection ahead of its events;
* ``undecodable``: a body that passes the chain but is not a valid event;
* ``missing_trigger``: an append-only trigger was dropped, replaced or disabled, or an
  erase authorisation was left behind (the store adds these; erased sessions are no finding);
* ``foreign_trigger``: a trigger or rule on the journal's tables that is not the journal's
  own (one may drop or rewrite appends silently); a user's own is allowed by name;
* ``summary``, ``snapshot``, and ``projection`` again: derived data that disagrees with the
  events (`journal._derived`: the summary column, a snapshot, the projection's columns or
  state compared with the refold);
* ``erasure``: an erasure audit record that does not chain to the one before it (written
  or altered by hand);
* ``anchor`` and ``chain_kind``: against an anchor file (`journal.anchor`), a session whose
  history since the anchor was rewritten, cut or deleted, or a chain of another kind.

The store reads each session in one consistent snapshot (a read transaction), so appends
running meanwhile cause no finding.

What it cannot see: someone with write access who rewrites a whole chain from the altered
event to the end *and* updates the projection's head hash produces a consistent journal.
Keep a copy of head hashes elsewhere (``sessions --json`` prints them), or open the journal
with an HMAC key so that rewriting a chain needs the key.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field

from ._planner import Hasher
from .canonical import GENESIS_HASH
from .errors import InvalidEventError
from .records import StoredEvent, decode

if TYPE_CHECKING:
    from ._derived import DerivedCheck

__all__ = ["Problem", "ProblemKind", "VerifyReport", "check_session"]

ProblemKind = Literal[
    "altered",
    "reordered",
    "removed",
    "truncated",
    "projection",
    "undecodable",
    "missing_trigger",
    "foreign_trigger",
    "summary",
    "snapshot",
    "erasure",
    "anchor",
    "chain_kind",
]


class Problem(BaseModel):
    """One finding of `verify`: where it is and what is wrong."""

    model_config = ConfigDict(frozen=True)

    session_id: str | None
    seq: int | None
    kind: ProblemKind
    message: str


class VerifyReport(BaseModel):
    """The result of `Journal.verify`: ``ok`` when no problem was found."""

    model_config = ConfigDict(frozen=True)

    ok: bool
    problems: list[Problem] = Field(default_factory=list)
    sessions: int = 0
    events: int = 0


def _misplaced(row: StoredEvent) -> bool:
    try:
        body = orjson.loads(row.body)
    except orjson.JSONDecodeError:
        return False
    return not isinstance(body, dict) or (
        body.get("seq") != row.seq or body.get("session_id") != row.session_id
    )


def check_session(
    session_id: str,
    rows: Iterable[StoredEvent],
    *,
    projected_last_seq: int | None,
    projected_head: str | None,
    hasher: Hasher,
    derived: DerivedCheck | None = None,
) -> tuple[list[Problem], int]:
    """Check one session's rows (in seq order) against its chain and projection.

    With ``derived``, each decoded event is also handed to it (summaries, the refold), and
    when the chain is intact its findings about the projection and snapshots are added.
    Returns the problems found and the number of rows read.
    """
    problems: list[Problem] = []

    def report(seq: int | None, kind: ProblemKind, message: str) -> None:
        problems.append(Problem(session_id=session_id, seq=seq, kind=kind, message=message))

    previous = GENESIS_HASH
    expected_seq = 0
    count = 0
    for row in rows:
        count += 1
        if row.seq != expected_seq:
            missing = (
                f"seq {expected_seq}"
                if row.seq == expected_seq + 1
                else f"seqs {expected_seq}..{row.seq - 1}"
            )
            report(expected_seq, "removed", f"{missing} missing before seq {row.seq}")
        elif hasher(previous, row.body.encode("utf-8")) != row.hash:
            if _misplaced(row):
                report(
                    row.seq, "reordered", f"seq {row.seq} holds an event recorded at another place"
                )
            else:
                report(
                    row.seq,
                    "altered",
                    f"hash mismatch at seq {row.seq}: this event or the one before it was altered",
                )
        else:
            try:
                event = decode(row)
            except InvalidEventError as e:
                report(row.seq, "undecodable", str(e))
            else:
                if derived is not None:
                    derived.see(row, event)
        previous = row.hash
        expected_seq = row.seq + 1
    last_seq = expected_seq - 1
    if projected_last_seq is None:
        if count:
            report(None, "projection", f"{count} events but no row in the sessions projection")
    elif last_seq < projected_last_seq:
        report(
            last_seq + 1,
            "truncated",
            f"events after seq {last_seq} are missing; the projection says the last seq is "
            f"{projected_last_seq}",
        )
    elif last_seq > projected_last_seq:
        report(
            projected_last_seq + 1,
            "projection",
            f"the projection stops at seq {projected_last_seq} but events go on to {last_seq}",
        )
    elif count and projected_head != previous:
        report(
            last_seq,
            "truncated",
            "the chain's head hash differs from the projection's: the tail was rewritten",
        )
    if derived is not None and not problems and count:
        derived.finish(previous)
        problems.extend(derived.problems)
    return problems, count
