"""What a command that does not need them does not load: start time is every command's."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

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


def test_the_cli_starts_without_other_packages_pydantic_plugins(tmp_path: Path) -> None:
    """A pydantic plugin installed beside (Logfire's, say) is not loaded to build the
    journal's models at start; a model built later (the user's, in a replay) gets it."""
    site = tmp_path / "site"
    (site / "noisy_plugin-1.0.dist-info").mkdir(parents=True)
    (site / "noisy_plugin-1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: noisy-plugin\nVersion: 1.0\n"
    )
    (site / "noisy_plugin-1.0.dist-info" / "entry_points.txt").write_text(
        "[pydantic]\nnoisy = noisy_plugin:plugin\n"
    )
    marker = tmp_path / "loaded"
    (site / "noisy_plugin.py").write_text(
        f"open({str(marker)!r}, 'a').write('loaded\\n')\n"
        "class _Plugin:\n"
        "    def new_schema_validator(self, *args, **kwargs):\n"
        "        return None, None, None\n"
        "plugin = _Plugin()\n"
    )
    env = {**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    env.pop("PYDANTIC_DISABLE_PLUGINS", None)
    script = (
        "import sys; from tui import console; sys.argv = ['agent-journal', '--help']\n"
        "try:\n    console.main()\nexcept SystemExit:\n    pass\n"
        "print('at start:', 'noisy_plugin' in sys.modules)\n"
        "import pydantic\nclass Later(pydantic.BaseModel):\n    x: int = 0\n"
        "print('later:', 'noisy_plugin' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().splitlines()[-2:] == ["at start: False", "later: True"]
    assert marker.read_text() == "loaded\n"
