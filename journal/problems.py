"""What `Journal.verify` finds: a `Problem` per finding, of one `ProblemKind`, in a report.

The findings of every check live here, apart from the checks, so that each check imports
them and none imports another check for its types: the chain walk (`journal.verify`),
derived data compared with the events (`journal._derived`), the store's own findings (its
guard triggers, foreign triggers and rules, the erasure audit chain) and an anchor
(`journal.anchor`). Each kind, and who reports it:

* ``altered``: a row's hash does not match sha256(previous hash + its body), so this
  event (or, when its hash was recomputed too, the one before it) was changed (the chain);
* ``reordered``: a row's body names another seq or session than the row it sits in (the
  chain);
* ``removed``: a seq is missing inside the chain (the chain);
* ``truncated``: the chain ends before the projection's last seq (a cut-off tail), or the
  projection's head hash is not the chain's (the chain);
* ``projection``: events without a projection row, or a projection ahead of its events (the
  chain); the projection's columns or state disagree with the refold (derived data);
* ``undecodable``: a body that passes the chain but is not a valid event (the chain);
* ``missing_trigger``: an append-only trigger was dropped, replaced or disabled, or an
  erase authorisation was left behind (the store; erased sessions are no finding);
* ``foreign_trigger``: a trigger or rule on the journal's tables that is not the journal's
  own (one may drop or rewrite appends silently); a user's own is allowed by name (the
  store);
* ``summary``, ``snapshot``: the summary column of a row, or a stored snapshot, is not what
  the events say (derived data);
* ``erasure``: an erasure audit record that does not chain to the one before it (written
  or altered by hand; the store);
* ``search_index``: a row of the search index that its event does not make (changed or
  planted), or an event the index skips (hidden from every search) (derived data,
  `journal._search_check`);
* ``position``: global positions that are not what appends give: a session's out of seq
  order, positions past the last one handed out (SQLite: more than the events ever written;
  PostgreSQL: past its sequence), a row out of commit order or a position given twice
  (PostgreSQL), a floor that is no position (SQLite's ``meta.position_floor``) (the chain
  and the store);
* ``anchor`` and ``chain_kind``: against an anchor file (`journal.anchor`), a session whose
  history since the anchor was rewritten, cut, deleted or moved to other positions, or a
  chain of another kind.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Problem", "ProblemKind", "VerifyReport"]

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
    "position",
    "anchor",
    "chain_kind",
    "search_index",
]
"""What a finding is about (the module docstring says what each means)."""


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
