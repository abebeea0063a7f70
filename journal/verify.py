"""Integrity checks over stored records: the hash chain first, then decoding.

`check_session` walks one session's rows in seq order and checks the chain over the stored
bytes before decoding anything: a row whose hash does not chain is ``altered`` (or
``reordered`` when its body names another place), a missing seq ``removed``, a row that
chains but sits at a global position not past the one before it ``position``, a chain that
ends before the projection's last seq or head hash ``truncated``, a projection behind or
without its events ``projection``, a body that chains but is no valid event
``undecodable`` (`journal.problems` has every kind). With a `journal._derived.DerivedCheck`
it also hands each decoded event to it (summaries, the refold), and adds its findings when
the chain holds.

The store reads each session in one consistent snapshot (a read transaction), so appends
running meanwhile cause no finding.

What it cannot see: someone with write access who rewrites a whole chain from the altered
event to the end *and* updates the projection's head hash produces a consistent journal.
Keep a copy of head hashes elsewhere (``sessions --json`` prints them), or open the journal
with an HMAC key so that rewriting a chain needs the key.
"""

from __future__ import annotations

from collections.abc import Iterable

import orjson

from ._derived import DerivedCheck
from ._planner import Hasher
from .canonical import GENESIS_HASH
from .errors import InvalidEventError
from .problems import Problem, ProblemKind
from .records import StoredEvent, decode

__all__ = ["check_session"]


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
    position = 0
    for row in rows:
        count += 1
        behind = position  # the position of the row before
        if row.position is not None:
            position = row.position
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
            if row.position is not None and row.position <= behind:  # a chained row moved
                report(
                    row.seq,
                    "position",
                    f"seq {row.seq} is at global position {row.position}, not past the "
                    f"position {behind} of the event before it",
                )
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
