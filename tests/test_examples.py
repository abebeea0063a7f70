"""The example agents and the demo: every event type and gate stage, determinism, the CLI."""

from __future__ import annotations

from pathlib import Path
from typing import Any, get_args

import pytest

from agentloop.examples import SCENARIOS, demo_session_id, run_demo
from journal import EVENT_TYPES, Journal, fold
from journal.events import VerificationStage

from .helpers import run_cli
from .loop_helpers import steady

HALT_RULES = {"step_limit", "repeat", "storm", "circuit_open", "error"}


def demo_journal(path: Path, **options: Any) -> dict[str, list[tuple[int, str, Any]]]:
    """Run the demo into ``path``; return each session's events, volatile fields cleared."""
    with Journal.open(path) as journal:
        ran = run_demo(journal, **options)
        return {
            item.session_id: [
                (r.seq, r.type, steady(r.event)) for r in journal.events(item.session_id)
            ]
            for item in ran
        }


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[tuple[int, str, Any]]]:
    return demo_journal(tmp_path_factory.mktemp("demo") / "demo.db")


def test_the_demo_covers_every_event_type_and_gate_stage(
    demo: dict[str, list[tuple[int, str, Any]]],
) -> None:
    events = [event for session in demo.values() for _, _, event in session]
    assert {event.type for event in events} == set(EVENT_TYPES)
    stages = {event.stage for event in events if event.type == "verification_failed"}
    assert stages == set(get_args(VerificationStage))
    rules = {event.rule for event in events if event.type == "agent_halted"}
    assert rules >= HALT_RULES
    repairs = {event.level for event in events if event.type == "repair_applied"}
    assert repairs == {"flatten", "scavenge", "truncation", "storm"}
    kinds = {event.kind for event in events if event.type == "action_failed"}
    assert kinds == {"business", "infrastructure", "timeout"}


def test_each_scenario_ends_as_it_shows(demo: dict[str, list[tuple[int, str, Any]]]) -> None:
    ends = {
        name: (session[-1][2].type, getattr(session[-1][2], "rule", None))
        for name, session in demo.items()
    }
    assert ends == {
        "demo-refund-buggy-s0": ("agent_completed", None),
        "demo-refund-fixed-s0": ("agent_completed", None),
        "demo-incidents-s0": ("agent_completed", None),
        "demo-incidents-no-fallback-s0": ("agent_halted", "circuit_open"),
        "demo-ticket-poller-s0": ("agent_halted", "repeat"),
        "demo-crawler-s0": ("agent_halted", "step_limit"),
        "demo-inventory-storm-s0": ("agent_halted", "storm"),
        "demo-research-s0": ("agent_completed", None),
        "demo-shipping-sloppy-s0": ("agent_completed", None),
        "demo-discount-crash-s0": ("agent_halted", "error"),
        "demo-travel-chat-s0": ("agent_completed", None),
    }
    chat = [event for _, _, event in demo["demo-travel-chat-s0"]]
    assert sum(event.type == "user_input" for event in chat) == 4
    assert sum(event.type == "agent_completed" for event in chat) == 4


def test_the_research_reads_are_journaled_in_proposal_order(
    demo: dict[str, list[tuple[int, str, Any]]],
) -> None:
    events = [event for _, _, event in demo["demo-research-s0"]]
    proposal = next(e for e in events if e.type == "action_proposed" and e.calls)
    outcomes = [e for e in events if e.type in ("action_committed", "action_failed")]
    reads = [e.call_id for e in outcomes if e.tool == "fetch_source"]
    assert reads == [call.call_id for call in proposal.calls]
    assert [e.kind for e in outcomes if e.type == "action_failed"] == ["timeout"]


def test_the_same_seed_gives_the_same_journal(
    tmp_path: Path, demo: dict[str, list[tuple[int, str, Any]]]
) -> None:
    assert demo_journal(tmp_path / "again.db") == demo


def test_another_seed_gives_other_sessions(
    tmp_path: Path, demo: dict[str, list[tuple[int, str, Any]]]
) -> None:
    other = demo_journal(tmp_path / "other.db", seed=1)
    assert set(other) == {name.replace("-s0", "-s1") for name in demo}
    differing = [
        name
        for name in demo
        if [e for _, _, e in demo[name][1:]]
        != [e for _, _, e in other[name.replace("-s0", "-s1")][1:]]
    ]
    assert len(differing) >= len(demo) - 2


def test_demo_states_are_the_fold(tmp_path: Path) -> None:
    with Journal.open(tmp_path / "d.db") as journal:
        run_demo(journal, sessions=3)
        for summary in journal.sessions():
            assert journal.state(summary.session_id) == fold(journal.events(summary.session_id))
        assert journal.verify().ok


def test_more_sessions_than_scenarios_repeat_them_with_new_seeds(tmp_path: Path) -> None:
    with Journal.open(tmp_path / "d.db") as journal:
        ran = run_demo(journal, sessions=len(SCENARIOS) + 1)
    assert ran[-1].session_id == demo_session_id(SCENARIOS[0], 1)
    assert len({item.session_id for item in ran}) == len(SCENARIOS) + 1


# -- agent-journal demo ---------------------------------------------------------------


def test_cli_demo_prints_the_summary_and_is_idempotent(tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    first = run_cli("demo", "--db", db, "--no-tui")
    assert first.exit_code == 0, first.output
    for scenario in SCENARIOS:
        session_id = demo_session_id(scenario, 0)
        assert session_id in first.stdout
        assert f"{session_id}: {scenario.shows}" in first.stdout
    for status in ("completed", "halted", "failed"):
        assert status in first.stdout
    with Journal.open(db) as journal:
        before = {s.session_id: s.events for s in journal.sessions()}
    again = run_cli("demo", "--db", db, "--no-tui")
    assert again.exit_code == 0, again.output
    assert again.stdout.count("(already in the journal)") == len(SCENARIOS)
    with Journal.open(db) as journal:
        assert {s.session_id: s.events for s in journal.sessions()} == before


def test_cli_demo_sessions_and_seed(tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    result = run_cli("demo", "--db", db, "--no-tui", "--sessions", 2, "--seed", 5)
    assert result.exit_code == 0, result.output
    with Journal.open(db) as journal:
        assert sorted(s.session_id for s in journal.sessions()) == sorted(
            demo_session_id(scenario, 5) for scenario in SCENARIOS[:2]
        )


def test_cli_demo_refuses_zero_sessions(tmp_path: Path) -> None:
    result = run_cli("demo", "--db", tmp_path / "demo.db", "--no-tui", "--sessions", 0)
    assert result.exit_code == 2
    assert not (tmp_path / "demo.db").exists()


def test_cli_demo_in_memory_offers_no_next_command_on_a_journal_that_is_gone() -> None:
    result = run_cli("demo", "--db", ":memory:", "--no-tui", "--sessions", 1)
    assert result.exit_code == 0, result.output
    assert "Journal: :memory:, gone with this command (--db FILE keeps the sessions)" in (
        result.output
    )
    assert "Next:" not in result.output
