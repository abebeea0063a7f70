"""The front page and the docs say what the code does: the README's story runs as printed,
its Python example runs, and every link between the pages leads somewhere."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from agentloop.examples import run_demo
from journal import Journal

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
BIN = Path(sys.executable).parent


def _block(after: str, language: str) -> str:
    """The first fenced block of ``language`` after the heading ``after``."""
    section = README.split(after, 1)[1]
    return section.split(f"```{language}\n", 1)[1].split("```", 1)[0]


QUICKSTART_BIN = ".venv/bin"
"""Where the quickstart puts ``agent-journal`` (and the story's activation, its pip and pytest)."""


def _clone(into: Path) -> Path:
    """The repository's files as a fresh clone has them (with this work tree's changes)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = REPO / name
        if source.is_file():  # a file deleted in the work tree is still listed
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, into / name)
    return into


def _outside_env() -> dict[str, str]:
    """This process's environment without the test suite's venv: a newcomer's shell."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = os.pathsep.join(
        part for part in env["PATH"].split(os.pathsep) if Path(part).resolve() != BIN.resolve()
    )
    return env | {"COLUMNS": "80"}


FAILED = "story: exit "
"""What the script's ERR trap prints on stderr for a command that exited non-zero."""


# a fresh venv, its install and the story: 27 s on 2 cores at load 0.4 and at 2.5 (not `slow`)
def test_the_story_runs_as_one_script_in_a_fresh_clone_after_the_quickstart(
    tmp_path: Path,
) -> None:
    clone = _clone(tmp_path / "clone")
    env = _outside_env()
    quickstart = subprocess.run(
        ["sh", "-c", _block("## Quickstart", "sh")],
        cwd=clone,
        env=env,
        stdin=subprocess.DEVNULL,  # no terminal: the demo prints and opens no TUI
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert quickstart.returncode == 0, quickstart.stderr
    assert (clone / QUICKSTART_BIN / "agent-journal").exists()
    script = _block("## From a production failure to a regression fixture", "sh")
    trap = f"trap 'echo \"{FAILED}$? from: $BASH_COMMAND\" >&2' ERR\n"
    ran = subprocess.run(
        ["bash", "-c", trap + script],
        cwd=clone,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    failed = [line for line in ran.stderr.splitlines() if line.startswith(FAILED)]
    # the one command that exits 1 is the replay of the fix: it diverges, as the story says
    assert failed == [
        f"{FAILED}1 from: agent-journal replay demo-refund-buggy-s0 --db laptop.db"
        " --agent agentloop.examples.refund:build_fixed"
    ], ran.stderr
    flowing = " ".join(ran.stdout.split())  # lines wrap at the terminal's width
    identical = (
        "replay of demo-refund-buggy-s0 with agentloop.examples.refund:build_buggy: identical"
    )
    assert identical in flowing
    expected = " ".join(
        line.removeprefix("#").strip() for line in script.splitlines() if line.startswith("#   ")
    )
    assert expected in flowing  # the divergence, as the README prints it
    assert "fixtures/refund-overrefund.jsonl ." in ran.stdout  # the new fixture, under pytest
    assert " failed" not in ran.stdout
    changed = [
        f.name
        for f in (REPO / "fixtures").glob("*.jsonl")
        if (clone / "fixtures" / f.name).read_bytes() != f.read_bytes()
    ]
    assert changed == []  # the story adds its fixture and rewrites none of the clone's


def test_the_python_example_runs(tmp_path: Path) -> None:
    with Journal.open(tmp_path / "agent-journal.db") as journal:
        run_demo(journal, seed=0)
    code = _block("## From Python", "python")
    ran = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines()[-1] == "identical None"


def test_every_link_between_the_pages_leads_to_a_file() -> None:
    pages = [REPO / "README.md", *(REPO / "docs").glob("*.md"), REPO / "bench" / "README.md"]
    broken = []
    for page in pages:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text(encoding="utf-8")):
            if "://" in target:
                continue
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(REPO)} -> {target}")
    assert broken == []


def test_the_readme_fits_a_screenful_of_screens() -> None:
    assert len(README.splitlines()) <= 220


REPLAY_DOC = (REPO / "docs" / "replay.md").read_text(encoding="utf-8")


def _doc_block(page: str, after: str, language: str) -> str:
    """The first fenced block of ``language`` after the text ``after`` in ``page``."""
    return page.split(after, 1)[1].split(f"```{language}\n", 1)[1].split("```", 1)[0]


def test_the_replay_commands_print_what_docs_replay_shows(tmp_path: Path) -> None:
    with Journal.open(tmp_path / "demo.db") as journal:
        run_demo(journal, seed=0)
    console = _doc_block(REPLAY_DOC, "**The commands**", "console")
    printed: list[str] = []
    shown: list[str] = []
    for line in console.splitlines():
        if line.startswith("$ "):
            command = shlex.split(line[2:].split("   #", 1)[0])
            ran = subprocess.run(
                [str(BIN / command[0]), *command[1:]],
                cwd=tmp_path,
                env=os.environ | {"COLUMNS": "400"},  # no wrapping: lines as the page has them
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
            )
            assert ran.returncode in (0, 1), (line, ran.stderr)
            printed += ran.stdout.splitlines()
        elif "..." not in line:  # the page shortens the long event lines with "..."
            shown.append(line)
    missing = [line for line in shown if line not in printed]
    assert missing == []


def test_replay_json_has_the_keys_docs_replay_shows(tmp_path: Path) -> None:
    with Journal.open(tmp_path / "demo.db") as journal:
        run_demo(journal, seed=0)
    documented = json.loads(_doc_block(REPLAY_DOC, "**JSON.**", "json"))
    ran = subprocess.run(
        [str(BIN / "agent-journal"), "replay", "demo-refund-buggy-s0", "--db", "demo.db"]
        + ["--agent", "agentloop.examples.refund:build_fixed", "--json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    printed = json.loads(ran.stdout)
    assert sorted(documented) == sorted(printed)
    scalars = {key: value for key, value in documented.items() if not isinstance(value, dict)}
    assert scalars == {key: printed[key] for key in scalars}
    assert documented["first_divergence"]["seq"] == printed["first_divergence"]["seq"]
    assert sorted(documented["first_divergence"]) == sorted(printed["first_divergence"])


def test_docs_replay_names_every_field_the_default_rules_drop() -> None:
    from replay import DEFAULT_RULES

    section = " ".join(REPLAY_DOC.split("**Normalisation.**", 1)[1].split("```", 1)[0].split())
    for event_type, paths in DEFAULT_RULES.ignore.items():
        assert event_type == "*" or f"`{event_type}`" in section
        for path in paths:
            assert f"`{path}`" in section, (event_type, path)
