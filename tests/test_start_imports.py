"""What a command that does not need them does not load: start time is every command's."""

from __future__ import annotations

import subprocess
import sys

import pytest

import journal


def _loaded_after(code: str) -> set[str]:
    """The modules loaded by a fresh interpreter after it runs ``code``."""
    script = f"{code}\nimport sys\nprint('\\n'.join(sys.modules))"
    found = subprocess.run([sys.executable, "-c", script], capture_output=True, check=True)
    return set(found.stdout.decode().split())


def test_the_cli_loads_neither_capture_nor_anchor_nor_asyncio() -> None:
    loaded = _loaded_after("import tui.cli")
    assert "journal" in loaded
    assert {"journal.capture", "journal.anchor", "asyncio"} & loaded == set()


def test_a_lazy_name_loads_its_module_and_is_the_same_object() -> None:
    loaded = _loaded_after("from journal import Recorder, take_anchor")
    assert {"journal.capture", "journal.anchor"} <= loaded
    from journal.capture import Recorder

    assert journal.Recorder is Recorder


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="Recordr"):
        journal.Recordr  # type: ignore[attr-defined]  # noqa: B018
