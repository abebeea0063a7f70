"""The replay commands of the CLI: replay, state, fork and diff, their JSON shapes (the public
contract in DESIGN.md) and exit codes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentloop import AgentRuntime, counter_ids
from journal import Journal

from . import replay_helpers as rh
from .helpers import one_error_line, run_cli
from .loop_helpers import fixed_clock

FIXED, BUGGY = rh.FIXED, rh.BUGGY


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A journal with every demo session (seed 0); tests that write use `db` instead."""
    return rh.demo_file(tmp_path_factory.mktemp("cli"))


@pytest.fixture
def db(demo_db: Path, tmp_path: Path) -> Path:
    """A private copy of the demo journal, for tests that write to it."""
    rh.copy_all(demo_db, Journal.open(tmp_path / "demo.db")).close()
    return tmp_path / "demo.db"


def as_json(*args: object) -> tuple[int, Any]:
    result = run_cli(*args, "--json")
    return result.exit_code, json.loads(result.stdout)


# -- replay ------------------------------------------------------------------------------------


def test_replay_identical_exits_0(demo_db: Path) -> None:
    result = run_cli("replay", "demo-research-s0", "--db", demo_db)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(
        "replay of demo-research-s0 with agentloop.examples.research:build: identical, 11 events"
    )


def test_replay_json_identical(demo_db: Path) -> None:
    code, document = as_json("replay", BUGGY, "--db", demo_db)
    assert code == 0
    assert document["verdict"] == "identical"
    assert document["first_divergence"] is None
    assert document["session_id"] == BUGGY and document["saved"] is False


def test_replay_of_the_fixed_twin_diverges_at_the_refund(demo_db: Path) -> None:
    result = run_cli("replay", BUGGY, "--db", demo_db, "--agent", FIXED)
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines[0] == f"replay of {BUGGY} with {FIXED}: diverged at seq 5"
    assert "expected action_committed, got verification_failed (guard: amount ($150)" in lines[1]
    assert lines[2].startswith("  expected: action_committed")
    assert lines[3].startswith("  actual:   verification_failed")
    assert any(line.strip().startswith('stage: (absent) -> "guard"') for line in lines)


def test_replay_json_shape_when_diverged(demo_db: Path) -> None:
    code, document = as_json("replay", BUGGY, "--db", demo_db, "--agent", FIXED)
    assert code == 1
    assert document["verdict"] == "diverged"
    first = document["first_divergence"]
    assert {"seq", "expected", "actual", "changes"} <= set(first)
    assert first["seq"] == 5
    assert (first["expected"]["type"], first["actual"]["type"]) == (
        "action_committed",
        "verification_failed",
    )
    assert first["expected"]["seq"] == first["actual"]["seq"] == 5
    assert {
        "path": "stage",
        "kind": "added",
        "expected": None,
        "actual": "guard",
    } in first["changes"]
    assert all(set(change) == {"path", "kind", "expected", "actual"} for change in first["changes"])


def test_replay_save_is_listed_with_replay_of(db: Path) -> None:
    code, document = as_json("replay", BUGGY, "--db", db, "--save")
    assert code == 0 and document["saved"] is True
    code, sessions = as_json("sessions", "--db", db)
    [saved] = [s for s in sessions if s["session_id"] == document["replay_session_id"]]
    assert saved["replay_of"] == BUGGY and saved["forked_from"] is None
    assert saved["events"] == document["replayed_events"]


def test_replay_live_tool_reports_a_live_difference(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert run_cli("replay", BUGGY, "--db", db, "--live-tool", "lookup_order").exit_code == 0
    assert run_cli("replay", BUGGY, "--db", db, "--live-tools").exit_code == 0
    monkeypatch.setattr("agentloop.examples.refund.order_total", lambda order_id: 75.0)
    result = run_cli("replay", BUGGY, "--db", db, "--live-tool", "lookup_order")
    assert result.exit_code == 1
    assert "live lookup_order differs from seq 3:" in result.stdout
    assert '"total":100.0' in result.stdout and '"total":75.0' in result.stdout
    code, document = as_json("replay", BUGGY, "--db", db, "--live-tools")
    assert code == 1
    [live] = document["live_differences"]
    assert live["tool"] == "lookup_order" and live["recorded_seq"] == 3
    assert (live["recorded"]["total"], live["live"]["total"]) == (100.0, 75.0)
    # recorded tools do not see the change
    assert run_cli("replay", BUGGY, "--db", db).exit_code == 0


def test_replay_without_an_agent_reference_is_exit_2(db: Path) -> None:
    with Journal.open(db) as journal:
        runtime = AgentRuntime(rh.build_pay(), journal, clock=fixed_clock, ids=counter_ids("x"))
        runtime.run("pay 10", session_id=runtime.start("anonymous"))
    line = one_error_line(run_cli("replay", "anonymous", "--db", db))
    assert line == (
        "agent-journal: session anonymous records no agent reference; name one with "
        "--agent MODULE:FACTORY (journal_agent in the pytest ini)"
    )
    agent = "tests.replay_helpers:build_pay"
    assert run_cli("replay", "anonymous", "--db", db, "--agent", agent).exit_code == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["replay", "nope"], "session nope: not in"),
        (["replay", BUGGY, "--agent", "no.such.module:build"], "cannot import no.such.module"),
        (["replay", BUGGY, "--agent", "nocolon"], "is not of the form module:factory"),
        (["replay", BUGGY, "--live-tools", "--live-tool", "x"], "exclude each other"),
        (  # a typo would serve the tool from the recording, with a verdict saying nothing
            ["replay", BUGGY, "--live-tool", "issue_refnd"],
            "no tool 'issue_refnd' in this agent (tools: issue_refund, lookup_order)",
        ),
        (
            ["state", BUGGY, "--at", "99"],
            f"session {BUGGY}: --at 99: no such seq (it has seqs 0..7)",
        ),
        (
            ["state", BUGGY, "--at", "-1"],
            f"session {BUGGY}: --at -1: no such seq (it has seqs 0..7)",
        ),
        (["state", "nope"], "session nope: not in"),
        (["fork", BUGGY, "--at", "8"], "cannot fork at seq 8; it has seqs 0..7"),
        (["fork", BUGGY, "--at", "-1"], "cannot fork at seq -1"),
        (["fork", "nope", "--at", "1"], "session nope: not in"),
        (["diff", BUGGY, "nope"], "session nope: not in"),
    ],
)
def test_bad_input_is_exit_2_with_one_line(demo_db: Path, args: list[str], message: str) -> None:
    result = run_cli(*args, "--db", demo_db)
    if result.exit_code == 2 and "Usage:" in result.stderr:
        assert message in result.stderr  # click's own usage errors
        return
    assert message in one_error_line(result)


@pytest.mark.parametrize("command", ["replay", "diff"])
def test_a_file_that_is_not_a_jsonl_export_is_named_as_a_file(
    demo_db: Path, tmp_path: Path, command: str
) -> None:
    """A transcript (.json) or a mistyped export path is a file, not an unknown session."""
    transcript = tmp_path / "transcripts.json"
    transcript.write_text('[\n {"messages": []}\n]\n')
    missing = tmp_path / "missing.jsonl"
    for path, message in [
        (transcript, f"{transcript}:1: not an agent-journal file (it starts a JSON array; "),
        (missing, f"{missing}: no such file"),
    ]:
        args = [command, path, *([BUGGY] if command == "diff" else [])]
        line = one_error_line(run_cli(*args, "--db", demo_db))
        assert line.startswith(f"agent-journal: {message}"), line


def test_a_missing_journal_is_exit_2(tmp_path: Path) -> None:
    result = run_cli("replay", BUGGY, "--db", tmp_path / "none.db")
    one_error_line(result)
    assert not (tmp_path / "none.db").exists()


# -- state --------------------------------------------------------------------------------------


def test_state_at_a_seq(demo_db: Path) -> None:
    code, document = as_json("state", BUGGY, "--db", demo_db, "--at", "5")
    assert code == 0
    assert (document["session_id"], document["seq"]) == (BUGGY, 5)
    assert document["state"]["last_seq"] == 5 and document["state"]["committed"] == 2
    changed = {c["path"]: (c["before"], c["after"]) for c in document["changed"]}
    assert changed["committed"] == (1, 2)
    assert changed["last_seq"] == (4, 5)
    with Journal.open(demo_db) as journal:
        from journal import fold

        assert document["state"] == fold(journal.events(BUGGY, stop=6)).model_dump(mode="json")
    text = run_cli("state", BUGGY, "--db", demo_db, "--at", "5")
    assert text.exit_code == 0
    assert text.stdout.startswith(f"{BUGGY} after seq 5")
    assert "committed: 1 -> 2" in text.stdout


def test_state_defaults_to_the_last_seq(demo_db: Path) -> None:
    code, document = as_json("state", BUGGY, "--db", demo_db)
    assert code == 0 and document["seq"] == 7
    assert document["state"]["status"] == "completed"


# -- fork ---------------------------------------------------------------------------------------


def test_fork_copies_the_prefix_and_shows_lineage(db: Path) -> None:
    code, document = as_json("fork", BUGGY, "--db", db, "--at", "3", "--agent", FIXED)
    assert code == 0
    assert document["forked_from"] == BUGGY and document["fork_seq"] == 3
    assert document["status"] == "completed"
    fork_id = document["session_id"]
    _, sessions = as_json("sessions", "--db", db)
    [row] = [s for s in sessions if s["session_id"] == fork_id]
    assert (row["forked_from"], row["fork_seq"], row["replay_of"]) == (BUGGY, 3, None)
    assert row["agent"] == FIXED
    listing = run_cli("sessions", "--db", db)
    assert f"fork of {BUGGY}@3" in listing.stdout
    text = run_cli("fork", BUGGY, "--db", db, "--at", "7")
    assert text.exit_code == 0
    assert text.stdout.startswith(f"forked {BUGGY}@7 into {BUGGY}.fork-2: completed, 8 events")


# -- diff -----------------------------------------------------------------------------------------


def test_diff_of_a_session_with_itself_and_its_export_is_identical(
    demo_db: Path, tmp_path: Path
) -> None:
    assert run_cli("diff", BUGGY, BUGGY, "--db", demo_db).exit_code == 0
    path = tmp_path / "buggy.jsonl"
    with Journal.open(demo_db) as journal:
        rh.write_export(journal, BUGGY, path)
    code, document = as_json("diff", BUGGY, path, "--db", demo_db)
    assert code == 0
    assert document["verdict"] == "identical" and document["first_divergence"] is None
    assert document["rows"] == []
    # two files need no journal
    assert run_cli("diff", path, path, "--db", tmp_path / "none.db").exit_code == 0
    assert not (tmp_path / "none.db").exists()


def test_diff_json_shape(demo_db: Path) -> None:
    code, document = as_json("diff", BUGGY, "demo-refund-fixed-s0", "--db", demo_db)
    assert code == 1
    assert document["verdict"] == "diverged"
    first = document["first_divergence"]
    assert {"seq", "expected", "actual", "changes"} <= set(first)
    assert first["seq"] == 0  # the scenario differs in session_started (agent: an address)
    assert {c["path"] for c in first["changes"]} == {"metadata.scenario"}
    assert document["config_changes"] == []  # the twins have the same prompt, tools and rails
    kinds = [(row["kind"], row["a"], row["b"]) for row in document["rows"]]
    assert kinds[0] == ("changed", 0, 0)
    assert ("changed", 5, 5) in kinds
    assert kinds[-2:] == [("inserted", None, 8), ("inserted", None, 9)]
    assert (document["a_events"], document["b_events"]) == (8, 10)


def test_diff_text_output(demo_db: Path) -> None:
    result = run_cli("diff", BUGGY, "demo-refund-fixed-s0", "--db", demo_db)
    assert result.exit_code == 1
    assert result.stdout.splitlines()[0] == f"--- {BUGGY} (8 events)"
    assert "difference(s)" in result.stdout.splitlines()[-1]


def test_diff_of_a_replay_and_its_recording_ignores_volatile_fields(db: Path) -> None:
    _, document = as_json("replay", BUGGY, "--db", db, "--save")
    replay_id = document["replay_session_id"]
    assert run_cli("diff", BUGGY, replay_id, "--db", db).exit_code == 0
