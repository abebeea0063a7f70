"""The README's test command is what CI runs: the line in README.md and in .ci/run match.

CI then runs the slow drills, at the sizes `tests.drill_helpers.drill_size` gives it.

The command is the one line of each file that starts with ``python3 -m venv .venv`` and
runs pytest: it sets up the environment and runs the tests, lint and type checks in one go.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from .drill_helpers import DRILL_SIZE_VARIABLE, drill_size
from .helpers import REPO

START = "python3 -m venv .venv"


def command_in(path: Path) -> str:
    """The one line of ``path`` that is the test command."""
    lines = [line.strip() for line in path.read_text().splitlines()]
    commands = [line for line in lines if line.startswith(START) and "/pytest " in line]
    assert len(commands) == 1, f"{path.name}: {len(commands)} test commands, not one"
    return commands[0]


STOP = " || exit 1"
"""What ends the command's line in .ci/run: under ``set -e`` a failure inside an ``&&`` list
(the tests, say) does not stop the script, so without it CI would go on and pass."""


def test_ci_runs_exactly_the_readme_test_command_and_stops_when_it_fails() -> None:
    ci = command_in(REPO / ".ci" / "run")
    assert ci.endswith(STOP), f".ci/run: the test command does not end with {STOP!r}"
    assert ci.removesuffix(STOP) == command_in(REPO / "README.md")


def test_a_failure_inside_the_command_fails_the_ci_script(tmp_path: Path) -> None:
    script = tmp_path / "run"
    script.write_text(f"set -euo pipefail\nfalse && true{STOP}\necho went on\n")
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True, check=False)
    assert (done.returncode, done.stdout) == (1, "")
    script.write_text("set -euo pipefail\nfalse && true\necho went on\n")
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True, check=False)
    assert (done.returncode, done.stdout) == (0, "went on\n")  # why STOP is there


def test_the_test_command_installs_the_dev_extra_and_runs_all_checks_in_parallel() -> None:
    command = command_in(REPO / "README.md")
    for part in ("'.[dev]'", "pytest", "-n auto", "-m 'not slow'", "ruff check", "mypy"):
        assert part in command, f"the README's test command lacks {part}"


def test_ci_also_runs_the_slow_drills_after_the_readme_command() -> None:
    lines = [line.strip() for line in (REPO / ".ci" / "run").read_text().splitlines()]
    readme_at = lines.index(command_in(REPO / ".ci" / "run"))
    slow = [i for i, line in enumerate(lines) if "/pytest " in line and "-m slow" in line]
    assert slow and slow[0] > readme_at


def test_the_drills_run_at_ci_sizes_unless_asked_for_the_full_counts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(DRILL_SIZE_VARIABLE, raising=False)
    assert drill_size(3, 10) == 3
    monkeypatch.setenv(DRILL_SIZE_VARIABLE, "full")
    assert drill_size(3, 10) == 10
    monkeypatch.setenv(DRILL_SIZE_VARIABLE, "huge")
    with pytest.raises(ValueError, match="AGENT_JOURNAL_DRILLS='huge': expected 'ci' or 'full'"):
        drill_size(3, 10)
