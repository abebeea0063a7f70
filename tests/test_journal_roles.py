"""The `Journal` contract is its four roles over one base, and each store implements all."""

from __future__ import annotations

import inspect

import pytest

from journal import (
    Journal,
    JournalAdmin,
    JournalDerivedData,
    JournalReader,
    JournalWriter,
)
from journal.postgres import PostgresJournal
from journal.sqlite import SQLiteJournal
from journal.store import JournalBase

ROLES = (JournalReader, JournalWriter, JournalAdmin, JournalDerivedData)


def _api(members: dict[str, object]) -> set[str]:
    """The public methods and properties among ``members`` (constants left out)."""
    return {
        name
        for name, value in members.items()
        if not name.startswith("_") and (callable(value) or isinstance(value, property))
    }


def test_every_public_name_of_a_journal_is_in_one_role_or_the_base() -> None:
    homes = [_api(vars(cls)) for cls in (*ROLES, JournalBase)]
    assert _api(dict(inspect.getmembers(Journal))) == set().union(*homes, {"open"})
    assert sum(len(home) for home in homes) == len(set().union(*homes))  # none in two
    assert _api(vars(Journal)) == {"open"}


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("store", [SQLiteJournal, PostgresJournal])
def test_each_store_is_every_role(store: type[Journal], role: type) -> None:
    assert issubclass(store, role)
    assert not inspect.isabstract(store)
    assert inspect.isabstract(role)
