"""The pytest plugin, run for real with pytester: pass, diverge, update, malformed, no agent."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from journal import Journal
from replay import write_fixture

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
REFUND = FIXTURES / "refund-overrefund-fixed.jsonl"
FIXED = "agentloop.examples.refund:build_fixed"
BUGGY = "agentloop.examples.refund:build_buggy"


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    (pytester.path / "fixtures").mkdir()
    return pytester


@pytest.fixture(autouse=True)
def _isolated_inner_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Inner pytest runs load only this project's plugin, not the SVG snapshot one."""
    monkeypatch.setenv("PYTEST_ADDOPTS", "-p no:textual-snapshot -p no:cacheprovider")


def _copy(project: pytest.Pytester, source: Path, name: str | None = None) -> Path:
    target = project.path / "fixtures" / (name or source.name)
    shutil.copy(source, target)
    return target


def test_a_matching_fixture_passes_as_one_item_named_after_the_file(
    project: pytest.Pytester,
) -> None:
    _copy(project, REFUND)
    (project.path / "fixtures" / "notes.jsonl").write_text('{"something": "else"}\n')
    result = project.runpytest_subprocess("-v")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["*fixtures/refund-overrefund-fixed.jsonl::refund-overrefund-fixed PASSED*"]
    )


def test_files_outside_the_fixtures_folder_are_left_alone(project: pytest.Pytester) -> None:
    shutil.copy(REFUND, project.path / "elsewhere.jsonl")
    result = project.runpytest_subprocess()
    result.assert_outcomes()
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED


def test_a_diverging_fixture_fails_with_a_readable_report(project: pytest.Pytester) -> None:
    path = _copy(project, REFUND)
    before = path.read_bytes()
    project.makeini(f"[pytest]\njournal_agent = {BUGGY}\n")
    result = project.runpytest_subprocess()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*refund-overrefund-fixed.jsonl*no longer replays identically*",
            "first divergence at seq 5: expected verification_failed, got action_failed*",
            "  expected: *verification_failed*",
            "  actual:   *replay: the recording never ran issue_refund*",
            "reproduce: agent-journal replay fixtures/refund-overrefund-fixed.jsonl "
            f"--agent {BUGGY}",
            "if the change is intended, pytest --journal-update will not rewrite it as it is: "
            "the replay stopped at seq 6, *; re-record it with a live model: "
            "journal_live_model = agent*",
        ]
    )
    assert "Traceback" not in result.stdout.str()
    assert path.read_bytes() == before  # nothing on disk changes without --journal-update


REWORDED = "tests.test_verdicts:build_reworded"


def test_a_configuration_change_fails_the_fixture_and_journal_ignore_accepts_it(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(FIXTURES.parent))  # where the reworded agent lives
    _copy(project, REFUND)
    project.makeini(f"[pytest]\njournal_agent = {REWORDED}\n")
    failed = project.runpytest_subprocess()
    failed.assert_outcomes(failed=1)
    failed.stdout.fnmatch_lines(
        [
            "*no longer replays identically*",
            "first divergence at seq 0: the configuration changed "
            "(the recorded replies were served anyway):",
            '    system_prompt: …* balance." -> …* balance. Be brief."',
            "    system_prompt_hash: *",
            "reproduce: agent-journal replay fixtures/refund-overrefund-fixed.jsonl "
            f"--agent {REWORDED}",
        ]
    )
    project.makeini(
        f"[pytest]\njournal_agent = {REWORDED}\n"
        "journal_ignore =\n    session_started.system_prompt\n"
        "    session_started.system_prompt_hash\n"
    )
    project.runpytest_subprocess().assert_outcomes(passed=1)


def test_journal_update_rewrites_the_fixture_only_with_a_live_model(
    project: pytest.Pytester,
) -> None:
    """The buggy agent diverges at seq 5; past it no recorded reply fits its context."""
    path = _copy(project, REFUND)
    before = path.read_bytes()
    project.makeini(f"[pytest]\njournal_agent = {BUGGY}\n")
    refused = project.runpytest_subprocess("--journal-update")
    refused.assert_outcomes(failed=1)
    refused.stdout.fnmatch_lines(
        [
            "first divergence at seq 5: expected verification_failed, got action_failed*",
            "reproduce: *",
            "not rewritten: the replay stopped at seq 6, where no recorded reply fits what the "
            "code now does; re-record it with a live model: journal_live_model = agent*",
        ]
    )
    assert path.read_bytes() == before
    project.makeini(f"[pytest]\njournal_agent = {BUGGY}\njournal_live_model = agent\n")
    result = project.runpytest_subprocess("--journal-update")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["*agent-journal fixtures updated*", "updated *refund-overrefund-fixed.jsonl"]
    )
    assert path.read_bytes() != before
    again = project.runpytest_subprocess()  # the re-recorded fixture matches the (buggy) code
    again.assert_outcomes(passed=1)
    with Journal.open(":memory:") as journal:
        from journal import import_file

        rewritten = import_file(journal, path).session_id
        assert [item.event.type for item in journal.events(rewritten)][-1] == "agent_completed"


def test_a_malformed_fixture_is_an_error_with_file_and_line(project: pytest.Pytester) -> None:
    path = _copy(project, REFUND, "broken.jsonl")
    lines = path.read_text().splitlines()
    lines[3] = lines[3][:40]
    path.write_text("\n".join(lines) + "\n")
    result = project.runpytest_subprocess()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*broken.jsonl:4: not valid JSON*"])
    assert "Traceback" not in result.stdout.str()


def test_a_fixture_whose_agent_cannot_be_imported_is_an_error(project: pytest.Pytester) -> None:
    _copy(project, REFUND)
    project.makeini("[pytest]\njournal_agent = no_such_module:build\n")
    result = project.runpytest_subprocess()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*agent no_such_module:build: cannot import no_such_module*"])


def test_an_expected_failure_asserts_the_agent_still_halts_there(project: pytest.Pytester) -> None:
    halted = _copy(project, FIXTURES / "ticket-poller-repeat-halt.jsonl")
    assert '"expect":{"at_seq":8,"halt_rule":"repeat","status":"halted"}' in halted.read_text()
    result = project.runpytest_subprocess()
    result.assert_outcomes(passed=1)


def test_the_folder_is_configurable(pytester: pytest.Pytester) -> None:
    (pytester.path / "golden").mkdir()
    shutil.copy(REFUND, pytester.path / "golden" / REFUND.name)
    pytester.makeini("[pytest]\njournal_fixtures = golden\n")
    pytester.runpytest_subprocess().assert_outcomes(passed=1)


def test_the_repository_fixtures_cover_the_promised_kinds() -> None:
    names = {path.stem for path in FIXTURES.glob("*.jsonl")}
    assert {
        "refund-overrefund-fixed",
        "research-parallel-reads",
        "ticket-poller-repeat-halt",
        "incidents-breaker-fallback",
        "shipping-sloppy-repairs",
    } <= names


def test_fixture_command_writes_a_redacted_fixture(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from agentloop.examples import run_demo
    from tui.cli import cli

    db = tmp_path / "j.db"
    with Journal.open(db) as journal:
        run_demo(journal, sessions=1)
    out = tmp_path / "f.jsonl"
    result = CliRunner().invoke(
        cli, ["fixture", "demo-refund-buggy-s0", "--db", str(db), "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert "jane.doe@gmail.com" not in out.read_text()
    assert result.output.strip() == f"wrote {out}: 8 events, completed, redacted"
    with Journal.open(db) as journal:
        plain = write_fixture(
            journal, "demo-refund-buggy-s0", tmp_path / "plain.jsonl", redact=False
        )
    assert "jane.doe@gmail.com" in plain.read_text()


def test_a_fixture_with_a_damaged_header_fails_instead_of_dropping_out(
    project: pytest.Pytester,
) -> None:
    path = _copy(project, REFUND, "damaged.jsonl")
    path.write_bytes(path.read_bytes()[25:])  # the header line no longer parses
    result = project.runpytest_subprocess()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*damaged.jsonl:1: not valid JSON*"])


def test_live_tools_apply_to_the_fixtures_whose_recording_has_them(
    project: pytest.Pytester,
) -> None:
    """Project-wide settings over fixtures of two agents: each takes the names it has."""
    _copy(project, REFUND)
    _copy(project, FIXTURES / "research-parallel-reads.jsonl")
    project.makeini("[pytest]\njournal_live_tools = lookup_order\n")
    result = project.runpytest_subprocess()
    # the refund agent's lookup_order ran live: its real data is not the redacted recording's
    # (so it ran); the research agent has no lookup_order, and its fixture is not refused
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*refund-overrefund-fixed.jsonl*no longer replays identically*",
            "*result.customer_email: *",
            "reproduce: agent-journal replay fixtures/refund-overrefund-fixed.jsonl "
            "--live-tool lookup_order",
        ]
    )
    assert "research-parallel-reads.jsonl::research-parallel-reads PASSED" in (
        project.runpytest_subprocess("-v").stdout.str()
    )


def test_a_live_tool_no_fixture_has_fails_the_run_naming_it(project: pytest.Pytester) -> None:
    """Before anything runs, and nothing says "passed"."""
    _copy(project, REFUND)
    project.makeini("[pytest]\njournal_live_tools = lookup_ordr\n")
    result = project.runpytest_subprocess()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*journal_live_tools / journal_allow_side_effects name lookup_ordr: no fixture's "
            "recording has such a tool (a typo?); nothing was replayed"
        ]
    )
    assert "passed" not in result.stdout.str()


def test_the_identical_fixtures_say_what_they_served(project: pytest.Pytester) -> None:
    _copy(project, REFUND)
    result = project.runpytest_subprocess()
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*agent-journal fixtures*",
            "1 replayed identical: * model replies and * tool results served from the "
            "recording (* not run: journal_live_tools = *",
        ]
    )


def test_a_fixture_header_nested_past_the_parsers_depth_is_one_failed_item(
    project: pytest.Pytester,
) -> None:
    """A header nested 30,000 deep fails its own item in one line; the other fixture runs."""
    _copy(project, REFUND)
    hostile = project.path / "fixtures" / "deep.jsonl"
    hostile.write_text('{"format": "agent-journal", "x": ' + "[" * 30_000 + "]" * 30_000 + "}\n")
    result = project.runpytest_subprocess("-v")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*refund-overrefund-fixed.jsonl::refund-overrefund-fixed PASSED*",
            "*deep.jsonl:1: *",
        ]
    )
    out = result.stdout.str() + result.stderr.str()
    assert "RecursionError" not in out
    assert "Traceback" not in out
