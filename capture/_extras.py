"""The error for an integration whose package is not installed, and the pip line it names.

Every client wrapper and framework integration imports its package only where it is used;
a missing one raises `MissingExtraError` (a `journal.JournalError` and an ``ImportError``)
naming the extra that installs it.
"""

from __future__ import annotations

from journal import JournalError


class MissingExtraError(JournalError, ImportError):
    """An integration's framework is not installed; the message says what to install."""


def missing_extra(package: str, extra: str, error: ImportError) -> MissingExtraError:
    """The one-line error for an integration whose ``package`` cannot be imported."""
    return MissingExtraError(
        f"{package} is not installed ({error.msg}): pip install 'agent-journal[{extra}]'"
    )
