"""Each package's public API is its sorted ``__all__``, and every name in it exists."""

from __future__ import annotations

import importlib

import pytest

PACKAGES = ["journal", "agentloop", "replay", "tui"]


def _isort_key(name: str) -> tuple[int, str]:
    """CONSTANTS, then Classes, then functions: the order ruff's RUF022 keeps."""
    return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)


@pytest.mark.parametrize("name", PACKAGES)
def test_all_is_sorted_and_resolves(name: str) -> None:
    module = importlib.import_module(name)
    exported = module.__all__
    assert exported == sorted(exported, key=_isort_key)
    for attribute in exported:
        assert hasattr(module, attribute), f"{name}.{attribute}"


def test_journal_exports_the_public_contract() -> None:
    import journal

    for required in ("Journal", "fold", "apply", "SessionState", "AgentEvent", "JournalError"):
        assert required in journal.__all__
