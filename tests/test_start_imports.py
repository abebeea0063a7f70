"""What a command that does not need them does not load: start time is every command's."""

from __future__ import annotations

import subprocess
import sys
import warnings

import pytest

import journal


def _loaded_after(code: str) -> set[str]:
    """The modules loaded by a fresh interpreter after it runs ``code``."""
    script = f"{code}\nimport sys\nprint('\\n'.join(sys.modules))"
    found = subprocess.run([sys.executable, "-c", script], capture_output=True, check=True)
    return set(found.stdout.decode().split())


def _capture_modules(loaded: set[str]) -> set[str]:
    return {name for name in loaded if name == "capture" or name.startswith("capture.")}


def test_the_cli_loads_neither_capture_nor_anchor_nor_asyncio() -> None:
    loaded = _loaded_after("import tui.cli")
    assert "journal" in loaded
    assert {"journal.capture", "journal.anchor", "asyncio"} & loaded == set()
    assert _capture_modules(loaded) == set()


@pytest.mark.parametrize("package", ["journal", "agentloop"])
def test_the_record_and_the_runtime_load_nothing_of_capture(package: str) -> None:
    loaded = _loaded_after(f"import {package}")
    assert package in loaded
    assert _capture_modules(loaded) == set()
    assert "journal.capture" not in loaded


def test_a_lazy_name_loads_its_module_and_is_the_same_object() -> None:
    loaded = _loaded_after("from journal import take_anchor")
    assert "journal.anchor" in loaded
    from journal.anchor import take_anchor

    assert journal.take_anchor is take_anchor


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="Recordr"):
        journal.Recordr  # type: ignore[attr-defined]  # noqa: B018


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("journal.Recorder", "from capture import Recorder"),
        ("journal.JournaledOpenAI", "from capture import JournaledOpenAI"),
        ("journal.capture.Capture", "from capture import Capture"),
        ("journal.capture.Recorder", "from capture import Recorder"),
        ("journal.capture.drain", "from capture import drain"),
        ("journal.capture.describe_error", "from journal import describe_error"),
    ],
)
def test_the_old_import_paths_work_with_a_warning_naming_the_new(old: str, new: str) -> None:
    import importlib

    import capture

    module_name, _, name = old.rpartition(".")
    module = importlib.import_module(module_name)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = getattr(module, name)
    assert [str(w.message) for w in caught if w.category is DeprecationWarning] == [
        f"{old} is deprecated and goes away in the next release: use '{new}' (see CHANGELOG.md)"
    ]
    home = journal if new.startswith("from journal") else capture
    assert value is getattr(home, name)


def test_an_old_path_with_no_such_name_is_an_attribute_error() -> None:
    import journal.capture as old

    with pytest.raises(AttributeError, match="Captur"):
        old.Captur  # noqa: B018
