"""Whether records about to be imported are a session the journal erased.

Importing must not undo a retention or right-to-erasure request: a session erased from a
journal is not brought back by importing or copying it again. An erasure's audit record
keeps the erased session's last seq and head hash, so records whose chain reaches that
hash at that seq are the erased session (or a longer copy of it), whatever the file or
transcript they come from. Only a session not in the journal is looked at.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..canonical import GENESIS_HASH, dumps_canonical
from ..store import Journal

__all__ = ["erased_heads", "reaches_erased"]


def erased_heads(journal: Journal, session_id: str) -> dict[int, str]:
    """The head hash of each erasure of ``session_id``, by its last seq.

    Empty when the journal holds the session (an import then adds to it or conflicts) or
    never erased it.
    """
    if journal.summary(session_id) is not None:
        return {}
    return {erasure.events - 1: erasure.head_hash for erasure in journal.erasures(session_id)}


def reaches_erased(
    journal: Journal, heads: dict[int, str], records: Iterable[dict[str, Any]]
) -> bool:
    """Whether flat records without hashes (seq from 0) chain to one of ``heads``.

    Each record's hash is computed as the journal would store it: its canonical bytes
    chained to the previous hash with the journal's hasher.
    """
    if not heads:
        return False
    chain, last = GENESIS_HASH, max(heads)
    for record in records:
        chain = journal.hasher(chain, dumps_canonical(record))
        seq = record["seq"]
        if heads.get(seq) == chain:
            return True
        if seq >= last:
            return False
    return False
