"""The trust list: a journal never chooses the code that runs.

The attacks are run as a user would meet them: the installed ``agent-journal`` and
``pytest`` console scripts in a folder of their own (no ``PYTHONPATH``, and no ``-c`` or
``-m`` that would put the current folder on ``sys.path``), each payload leaving a marker
file if it ever runs.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from agentloop import (
    DEFAULT_TRUSTED,
    TRUST_ENV,
    AgentLoadError,
    TrustList,
    UntrustedReferenceError,
)
from journal import InvalidInputError, Journal, SessionStarted, UserInput, write_jsonl

BIN = Path(sys.executable).parent


def run(
    tool: str, *args: object, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run an installed console script in ``cwd`` with a clean ``PYTHONPATH``."""
    environ = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", TRUST_ENV)}
    return subprocess.run(
        [str(BIN / tool), *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**environ, **(env or {})},
        timeout=120,
        check=False,
    )


def error_line(result: subprocess.CompletedProcess[str]) -> str:
    """The one stderr line of an exit 2, checked to be alone and without a traceback."""
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def journal_file(path: Path, agent: str, *, session: str = "evil") -> Path:
    """A JSONL journal whose ``session_started`` names ``agent``."""
    with Journal.open(":memory:") as journal:
        journal.append(session, [SessionStarted(agent=agent), UserInput(text="hi")])
        write_jsonl(journal, session, path)
    return path


# -- the list itself ---------------------------------------------------------------------


def test_with_no_table_only_the_example_agents_are_trusted(tmp_path: Path) -> None:
    trust = TrustList.discover(tmp_path)
    assert trust == TrustList(patterns=DEFAULT_TRUSTED, pythonpath=(), config=None)
    assert trust.allows("agentloop.examples.refund:build_fixed")
    assert not trust.allows("agentloop.agent:load_agent")
    assert not trust.allows("myapp.agents:build")


def test_the_table_is_found_upwards_and_its_folders_are_relative_to_it(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n[tool.agent-journal]\n'
        'agents = ["myapp.agents:*", "myapp.loops:run", "other"]\npythonpath = ["src"]\n'
    )
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    (deep / "pyproject.toml").write_text('[project]\nname = "inner, no table"\n')
    trust = TrustList.discover(deep)
    assert trust == TrustList(
        patterns=(*DEFAULT_TRUSTED, "myapp.agents:*", "myapp.loops:run", "other"),
        pythonpath=((tmp_path / "src").resolve(),),
        config=(tmp_path / "pyproject.toml").resolve(),
    )
    allowed = ["myapp.agents:build", "myapp.agents:build_v2", "myapp.loops:run", "other:x"]
    refused = ["myapp.loops:main", "myapp.agents.sub:build", "other.sub:x", "myapp:build"]
    assert [trust.allows(r) for r in allowed] == [True] * len(allowed)
    assert [trust.allows(r) for r in refused] == [False] * len(refused)


def test_the_project_root_is_the_default_import_folder(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.agent-journal]\nagents = ["app:*"]\n')
    assert TrustList.discover(tmp_path).pythonpath == (tmp_path.resolve(),)


def test_the_environment_adds_patterns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TRUST_ENV, " app.agents:* , ops.*")
    trust = TrustList.discover(tmp_path)
    assert trust.patterns == (*DEFAULT_TRUSTED, "app.agents:*", "ops.*")
    assert trust.allows("ops.loops.nightly:run")


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('agents = "app:*"\nagent = ["x"]', "unknown key 'agent' (known: agents, pythonpath)"),
        ("agents = [1]", "agents must be a list of strings, not [1]"),
        ('agents = ["app:build; rm -rf /"]', "'app:build; rm -rf /' is not a reference pattern"),
        ('agents = ["app:*"', "not valid TOML"),
    ],
)
def test_a_malformed_table_is_one_clear_error(tmp_path: Path, table: str, message: str) -> None:
    (tmp_path / "pyproject.toml").write_text(f"[tool.agent-journal]\n{table}\n")
    with pytest.raises(InvalidInputError, match=re.escape(message)) as caught:
        TrustList.discover(tmp_path)
    assert str(caught.value).startswith(str(tmp_path / "pyproject.toml"))


def test_a_given_reference_wins_and_a_recorded_one_must_be_trusted() -> None:
    trust = TrustList()
    where = "session s1"
    assert trust.choose("evil:x", "mine:build", where=where) == "mine:build"
    assert trust.choose("agentloop.examples.chat:build", None, where=where) == (
        "agentloop.examples.chat:build"
    )
    with pytest.raises(UntrustedReferenceError, match="session s1 names 'evil:x'"):
        trust.choose("evil:x", None, where=where)
    with pytest.raises(AgentLoadError, match="session s1 records no agent reference"):
        trust.choose(None, None, where=where)


# -- attacks, through the installed command ----------------------------------------------

ATTACKS = [
    "click.termui:edit",  # launched $EDITOR
    "sqlite_utils.cli:cli",  # ran sqlite-utils on our command line, wrote a file "replay"
    "psycopg:connect",  # opened a database connection
    "tui.cli:main",  # re-entered the CLI until RecursionError
    "setuptools:setup",  # exited 1: read as "diverged"
    "pip._internal.cli.main:main",  # exited 1: read as "diverged"
    "evilmod:build",  # a module in the current folder, which writes a marker when imported
]


@pytest.mark.parametrize("reference", ATTACKS)
def test_a_journal_naming_code_off_the_list_is_refused_and_nothing_runs(
    tmp_path: Path, reference: str
) -> None:
    marker = tmp_path / "ran"
    (tmp_path / "evilmod.py").write_text(
        f"open({str(marker)!r}, 'w').close()\ndef build():\n    return None\n"
    )
    evil = journal_file(tmp_path / "evil.jsonl", reference)
    result = run("agent-journal", "replay", evil, cwd=tmp_path, env={"EDITOR": f"touch {marker}"})
    assert error_line(result) == (
        f"agent-journal: {evil}: session evil names {reference!r}, which is not on the trust "
        "list; to run it, add it to agents in a [tool.agent-journal] table of your "
        "pyproject.toml (or AGENT_JOURNAL_TRUST), or name it with --agent (journal_agent in "
        "the pytest ini)"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["evil.jsonl", "evilmod.py"]


@pytest.mark.parametrize(
    ("command", "metadata"),
    [
        (["replay", "evil"], {}),
        (["fork", "evil", "--at", "1"], {}),
        (["replay", "evil"], {"captured_with": "recorder"}),
        (["replay", "evil"], {"captured_with": "pydantic-ai"}),
        (["replay", "evil"], {"captured_with": "openai-agents"}),
    ],
)
def test_every_path_that_runs_a_recorded_reference_asks_the_trust_list(
    tmp_path: Path, command: list[str], metadata: dict[str, str]
) -> None:
    marker = tmp_path / "ran"
    (tmp_path / "evilmod.py").write_text(f"open({str(marker)!r}, 'w').close()\nrun = None\n")
    with Journal.open(tmp_path / "j.db") as journal:
        started = SessionStarted(agent="evilmod:run", metadata=metadata)
        journal.append("evil", [started, UserInput(text="hi")])
    line = error_line(run("agent-journal", *command, "--db", "j.db", cwd=tmp_path))
    assert "session evil names 'evilmod:run', which is not on the trust list" in line
    assert not marker.exists()


@pytest.mark.parametrize(
    ("module", "why"),
    [
        ("import sys\ndef build():\n    sys.exit(1)\n", "the factory raised SystemExit: 1"),
        ("def build():\n    raise KeyboardInterrupt\n", "the factory raised KeyboardInterrupt"),
        ("raise SystemExit(3)\n", "cannot import exiting: SystemExit: 3"),
    ],
)
def test_a_trusted_factory_that_exits_keeps_the_exit_code_contract(
    tmp_path: Path, module: str, why: str
) -> None:
    (tmp_path / "exiting.py").write_text(module)
    journal = journal_file(tmp_path / "s.jsonl", "exiting:build")
    result = run("agent-journal", "replay", journal, cwd=tmp_path, env={TRUST_ENV: "exiting:*"})
    assert why in error_line(result)


def test_a_given_agent_imports_from_the_current_folder(tmp_path: Path) -> None:
    """``--agent`` names the user's own module; no PYTHONPATH is needed to find it."""
    (tmp_path / "mine.py").write_text(
        "from agentloop.examples.refund import build_fixed\n"
        "def build(seed=0):\n    return build_fixed(seed=seed)\n"
    )
    journal = journal_file(tmp_path / "s.jsonl", "evilmod:build")
    result = run("agent-journal", "replay", journal, "--agent", "mine:build", cwd=tmp_path)
    assert result.returncode in (0, 1), result.stderr
    assert "replay of evil with mine:build" in result.stdout


# -- a user's project, end to end --------------------------------------------------------

AGENTS = """
from agentloop import Agent, ModelResponse, Tool
from journal import ToolCall
from pydantic import BaseModel


class Args(BaseModel):
    city: str


class Model:
    async def complete(self, request):
        if request.messages[-1]["role"] == "tool":
            return ModelResponse(text="It is " + request.messages[-1]["content"])
        return ModelResponse(calls=[ToolCall(call_id="c1", tool="weather", args={"city": "Oslo"})])


def weather(args: Args) -> str:
    return WEATHER


WEATHER = "sunny"


def build() -> Agent:
    return Agent(
        name="weather",
        system_prompt="Answer with the weather.",
        tools=[Tool("weather", weather, "The weather in a city.", Args)],
        llm=Model(),
        reference="myapp.agents:build",
    )
"""

RECORD = """
from agentloop import AgentRuntime
from journal import Journal

from myapp.agents import build

with Journal.open("agent-journal.db") as journal:
    AgentRuntime(build(), journal).run("weather in Oslo?", session_id="w1")
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A user's project: its own package, the table, one recorded session (no pytest ini)."""
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "myapp"\nversion = "0"\n\n'
        '[tool.agent-journal]\nagents = ["myapp.agents:*"]\n'
    )
    (tmp_path / "myapp").mkdir()
    (tmp_path / "myapp" / "__init__.py").write_text("")
    (tmp_path / "myapp" / "agents.py").write_text(AGENTS)
    (tmp_path / "record.py").write_text(RECORD)
    subprocess.run([sys.executable, "record.py"], cwd=tmp_path, check=True, timeout=60)
    return tmp_path


def test_a_project_with_the_table_runs_its_fixture_flow_as_printed(project: Path) -> None:
    wrote = run("agent-journal", "fixture", "w1", cwd=project)
    assert wrote.returncode == 0, wrote.stderr
    assert (project / "fixtures" / "w1.jsonl").is_file()

    assert run("agent-journal", "replay", "fixtures/w1.jsonl", cwd=project).returncode == 0
    green = run("pytest", "-q", "-p", "no:cacheprovider", cwd=project)
    assert green.returncode == 0, green.stdout + green.stderr
    assert "1 passed" in green.stdout

    agents = project / "myapp" / "agents.py"
    guarded = AGENTS.replace(
        '"The weather in a city.", Args)',
        '"The weather in a city.", Args, guard=lambda args, state: "ask about Bergen")',
    )
    assert guarded != AGENTS
    agents.write_text(guarded)
    red = run("pytest", "-q", "-p", "no:cacheprovider", cwd=project)
    assert red.returncode == 1, red.stdout + red.stderr
    reproduce = next(
        line.strip() for line in red.stdout.splitlines() if "reproduce: " in line
    ).partition("reproduce: ")[2]
    assert reproduce == "agent-journal replay fixtures/w1.jsonl"
    again = run(*reproduce.split(), cwd=project)
    assert again.returncode == 1, again.stderr
    assert "diverged at seq" in again.stdout


def test_a_fixture_naming_a_module_of_the_project_off_the_list_fails_and_imports_nothing(
    project: Path,
) -> None:
    marker = project / "ran"
    (project / "evilmod.py").write_text(f"open({str(marker)!r}, 'w').close()\nbuild = None\n")
    (project / "fixtures").mkdir()
    journal_file(project / "fixtures" / "evil.jsonl", "evilmod:build")
    result = run("pytest", "-q", "-p", "no:cacheprovider", cwd=project)
    assert result.returncode == 1, result.stdout + result.stderr
    assert (
        "session evil names 'evilmod:build', which is not on the trust list; to run it, add it "
        f"to agents in [tool.agent-journal] of {project.resolve() / 'pyproject.toml'}"
    ) in " ".join(result.stdout.split())
    assert not marker.exists()


def test_the_demo_and_the_repository_fixtures_replay_with_no_configuration(
    tmp_path: Path,
) -> None:
    demo = run("agent-journal", "demo", "--no-tui", "--db", "demo.db", cwd=tmp_path)
    assert demo.returncode == 0, demo.stderr
    replayed = run(
        "agent-journal", "replay", "demo-refund-buggy-s0", "--db", "demo.db", cwd=tmp_path
    )
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    for fixture in sorted((Path(__file__).parent.parent / "fixtures").glob("*.jsonl")):
        result = run("agent-journal", "replay", fixture, cwd=tmp_path)
        assert result.returncode == 0, (fixture.name, result.stdout, result.stderr)
