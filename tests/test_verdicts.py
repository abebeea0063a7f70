"""One meaning of "different": replay, diff and the saved replay judge a pair of runs alike.

A change of configuration (prompt, tools, guardrails, model) is reported apart from the
first behavioural divergence; the agent reference is an address, not configuration; a
session imported from a transcript configured nothing, so nothing of its configuration is
compared; ``--ignore`` leaves the same fields out of every comparison.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentloop import Agent, AgentRuntime
from agentloop.examples import SCENARIOS, run_demo
from agentloop.examples.refund import build_buggy, build_fixed, order_total
from journal import Journal, import_openai
from replay import (
    DEFAULT_RULES,
    Replayer,
    ReplayOptions,
    diff_records,
    replay_fixture,
    session_records,
)

from .helpers import run_cli
from .openai_helpers import real_transcripts

BUGGY = "demo-refund-buggy-s0"
FIXED = "demo-refund-fixed-s0"
HERE = "tests.test_verdicts"


def build_reworded(seed: int = 0) -> Agent:
    """The fixed refund agent with another system prompt."""
    agent = build_fixed(seed=seed)
    agent.system_prompt += " Be brief."
    return agent


def build_buggy_reworded(seed: int = 0) -> Agent:
    """The buggy refund agent with another system prompt."""
    agent = build_buggy(seed=seed)
    agent.system_prompt += " Be brief."
    return agent


def build_stricter(seed: int = 0) -> Agent:
    """The fixed refund agent with a tighter repeat limit (a guardrail: configuration)."""
    agent = build_fixed(seed=seed)
    agent.guardrails = agent.guardrails.model_copy(update={"max_repeats": 1})
    return agent


def build_redescribed(seed: int = 0) -> Agent:
    """The fixed refund agent whose refund tool says something else about itself."""
    agent = build_fixed(seed=seed)
    agent.tools = [
        replace(tool, description="Refund an order.") if tool.name == "issue_refund" else tool
        for tool in agent.tools
    ]
    return agent


def build_tighter_margin(seed: int = 0) -> Agent:
    """The fixed refund agent whose guard keeps $10 of the balance back (a behaviour change)."""
    agent = build_fixed(seed=seed)
    refund = agent.tool_map["issue_refund"]

    def at_most_the_balance_less_ten(args: Any, state: Any) -> str | None:
        limit = order_total(args.order_id) - 10
        if args.amount > limit:
            return (
                f"amount (${args.amount:g}) exceeds the order's refundable balance "
                f"(${limit:g}); propose a refund of at most ${limit:g}"
            )
        return None

    agent.tools = [
        replace(tool, guard=at_most_the_balance_less_ten) if tool is refund else tool
        for tool in agent.tools
    ]
    return agent


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("verdicts") / "demo.db"
    with Journal.open(path) as journal:
        run_demo(journal, seed=0)
    return path


def test_a_prompt_change_is_a_configuration_change_and_the_behaviour_is_still_judged(
    demo: Path,
) -> None:
    with Journal.open(demo) as journal:
        result = Replayer(ReplayOptions(agent=f"{HERE}:build_reworded")).replay(journal, FIXED)
    assert result.verdict == "diverged"
    assert result.behaviour_divergence is None  # with the recorded replies, it behaves the same
    assert [change.path for change in result.config_changes] == [
        "system_prompt",
        "system_prompt_hash",
    ]
    assert result.config_changes[0].actual.endswith(" Be brief.")
    first = result.first_divergence  # the first event that differs: the session_started
    assert first is not None and first.seq == 0
    assert first.changes == result.config_changes
    assert first.reason == (
        "session_started: the configuration changed (system_prompt, system_prompt_hash)"
    )
    assert first.expected is not None and first.actual is not None
    assert (first.expected["type"], first.actual["type"]) == ("session_started",) * 2
    assert first.actual["system_prompt"].endswith(" Be brief.")


def test_a_configuration_change_does_not_hide_the_behavioural_divergence(demo: Path) -> None:
    with Journal.open(demo) as journal:
        result = Replayer(ReplayOptions(agent=f"{HERE}:build_reworded")).replay(journal, BUGGY)
    assert [change.path for change in result.config_changes] == [
        "system_prompt",
        "system_prompt_hash",
    ]
    first = result.first_divergence
    assert first is not None and first.seq == 0 and first.changes == result.config_changes
    divergence = result.behaviour_divergence
    assert divergence is not None and divergence.seq == 5
    assert divergence.reason.startswith("expected action_committed, got verification_failed")
    assert "behaviour diverged at seq 5: expected action_committed" in result.summary


@pytest.mark.parametrize(
    ("factory", "paths"),
    [
        ("build_stricter", ["config.guardrails.max_repeats"]),
        # (the prompt hash covers the immutable prefix: the prompt and the tool specs)
        ("build_redescribed", ["config.tools[1].description", "system_prompt_hash"]),
    ],
)
def test_guardrails_and_tool_specs_are_configuration(
    demo: Path, factory: str, paths: list[str]
) -> None:
    with Journal.open(demo) as journal:
        result = Replayer(ReplayOptions(agent=f"{HERE}:{factory}")).replay(journal, FIXED)
    assert (result.verdict, result.behaviour_divergence) == ("diverged", None)
    assert [change.path for change in result.config_changes] == paths
    first = result.first_divergence
    assert first is not None and first.seq == 0
    assert [change.path for change in first.changes] == paths


def test_the_agent_reference_is_an_address_not_a_difference(demo: Path) -> None:
    with Journal.open(demo) as journal:
        result = Replayer(ReplayOptions(agent=f"{HERE}:build_buggy_reworded")).replay(
            journal, BUGGY
        )
        same = Replayer(ReplayOptions(agent="agentloop.examples.refund:build_buggy")).replay(
            journal, BUGGY
        )
    assert same.identical and same.config_changes == ()
    assert [change.path for change in result.config_changes] == [
        "system_prompt",
        "system_prompt_hash",
    ]
    assert result.behaviour_divergence is None
    assert result.first_divergence is not None and result.first_divergence.seq == 0


def test_a_run_whose_agent_names_no_reference_still_has_its_configuration_compared(
    tmp_path: Path,
) -> None:
    """An agent built by hand (no `reference`) records none; its prompt is still configuration."""
    with Journal.open(tmp_path / "j.db") as journal:
        session = AgentRuntime(build_fixed(), journal).run("refund $30 for order 7").session_id
        summary = journal.summary(session)
        assert summary is not None and summary.agent is None
        same = Replayer(ReplayOptions(agent="agentloop.examples.refund:build_fixed")).replay(
            journal, session
        )
        reworded = Replayer(ReplayOptions(agent=f"{HERE}:build_reworded")).replay(journal, session)
    assert same.identical
    assert reworded.verdict == "diverged"
    assert [change.path for change in reworded.config_changes] == [
        "system_prompt",
        "system_prompt_hash",
    ]


def test_the_cli_reports_the_configuration_change_and_exits_1(demo: Path) -> None:
    result = run_cli("replay", FIXED, "--db", demo, "--agent", f"{HERE}:build_reworded")
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines[0] == (
        f"replay of {FIXED} with {HERE}:build_reworded: diverged at seq 0: "
        "the configuration changed"
    )
    assert lines[1] == "  configuration changed (the recorded replies were served anyway):"
    assert lines[2] == (
        '    system_prompt: … refundable balance." -> … refundable balance. Be brief."'
    )
    assert lines[-2] == "  the behaviour, with the recorded replies, is identical"
    assert lines[-1] == (
        "  up to there, 4 model replies and 2 tool results served from the recording "
        "(issue_refund and lookup_order not run: --live-tool NAME runs one)"
    )


@pytest.mark.parametrize(("session", "behaviour"), [(FIXED, None), (BUGGY, 5)])
def test_replay_text_and_json_name_the_same_first_divergence(
    demo: Path, session: str, behaviour: int | None
) -> None:
    """A diverged verdict never has a null first divergence: text and --json say seq 0."""
    agent = ["--agent", f"{HERE}:build_reworded"]
    text = run_cli("replay", session, "--db", demo, *agent)
    document = json.loads(run_cli("replay", session, "--db", demo, *agent, "--json").stdout)
    assert document["verdict"] == "diverged"
    first = document["first_divergence"]
    assert first["seq"] == 0 and first["expected"]["type"] == "session_started"
    assert [change["path"] for change in first["changes"]] == [
        "system_prompt",
        "system_prompt_hash",
    ]
    assert first["changes"] == document["config_changes"]
    assert text.stdout.splitlines()[0].endswith(": diverged at seq 0: the configuration changed")
    if behaviour is None:
        assert document["behaviour_divergence"] is None
    else:
        assert document["behaviour_divergence"]["seq"] == behaviour
        assert f"  with the recorded replies, the behaviour diverged at seq {behaviour}:" in (
            text.stdout.splitlines()
        )


def test_diff_json_names_the_same_first_divergence_as_replay(demo: Path) -> None:
    agent = f"{HERE}:build_reworded"
    ignore = ["--ignore", "session_started.system_prompt"]
    ignore += ["--ignore", "session_started.system_prompt_hash"]
    saved = run_cli("replay", BUGGY, "--db", demo, "--agent", agent, "--save", *ignore)
    replay_id = saved.stdout.split("(saved as ")[1].split(")")[0]
    replayed = json.loads(run_cli("replay", BUGGY, "--db", demo, "--agent", agent, "--json").stdout)
    diffed = json.loads(run_cli("diff", BUGGY, replay_id, "--db", demo, "--json").stdout)
    assert diffed["first_divergence"]["seq"] == replayed["first_divergence"]["seq"] == 0
    assert diffed["first_divergence"]["changes"] == replayed["first_divergence"]["changes"]
    assert diffed["behaviour_divergence"]["seq"] == replayed["behaviour_divergence"]["seq"] == 5


def test_ignore_leaves_the_same_fields_out_of_replay_diff_and_fork(demo: Path) -> None:
    agent = f"{HERE}:build_reworded"
    ignore = ["--ignore", "session_started.system_prompt"]
    ignore += ["--ignore", "session_started.system_prompt_hash"]
    assert run_cli("replay", FIXED, "--db", demo, "--agent", agent).exit_code == 1
    assert run_cli("replay", FIXED, "--db", demo, "--agent", agent, *ignore).exit_code == 0
    saved = run_cli("replay", FIXED, "--db", demo, "--agent", agent, "--save", *ignore)
    assert saved.exit_code == 0, saved.stdout
    replay_id = saved.stdout.split("(saved as ")[1].split(")")[0]
    assert run_cli("diff", FIXED, replay_id, "--db", demo).exit_code == 1
    assert run_cli("diff", FIXED, replay_id, "--db", demo, *ignore).exit_code == 0


def test_diff_reports_a_configuration_change_without_claiming_replies_were_served(
    demo: Path,
) -> None:
    """A diff compares two runs as they are: nothing was served to either."""
    agent = f"{HERE}:build_reworded"
    ignore = ["--ignore", "session_started.system_prompt"]
    ignore += ["--ignore", "session_started.system_prompt_hash"]
    saved = run_cli("replay", FIXED, "--db", demo, "--agent", agent, "--save", *ignore)
    replay_id = saved.stdout.split("(saved as ")[1].split(")")[0]
    diffed = run_cli("diff", FIXED, replay_id, "--db", demo)
    assert diffed.exit_code == 1
    assert diffed.stdout.splitlines()[2] == "  configuration changed:"
    assert "served" not in diffed.stdout


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        ("result", "expected EVENT_TYPE.dotted.path or *.dotted.path"),
        ("action_done.result", "expected EVENT_TYPE.dotted.path or *.dotted.path"),
    ],
)
def test_a_malformed_ignore_is_one_line_and_exit_2(demo: Path, spec: str, why: str) -> None:
    for command in (["replay", FIXED], ["diff", FIXED, BUGGY], ["fork", FIXED, "--at", "1"]):
        result = run_cli(*command, "--db", demo, "--ignore", spec)
        assert result.exit_code == 2, result.stdout
        (line,) = result.stderr.splitlines()
        assert line.startswith(f"agent-journal: --ignore {spec!r}: {why} (event types: ")


# -- replay's verdict on a saved replay equals diff's verdict -----------------------------

VARIANTS = [None, "build_reworded", "build_stricter", "build_redescribed"]
"""The agent each generated replay runs with: the recorded one, or a changed one."""


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    scenario=st.sampled_from([0, 1]),  # the buggy and the fixed refund scenarios
    seed=st.integers(0, 5),
    variant=st.sampled_from(VARIANTS),
    ignore=st.sampled_from([(), ("session_started.system_prompt",), ("*.usage",)]),
    live=st.booleans(),
)
def test_replay_and_diff_of_the_saved_replay_agree(
    scenario: int, seed: int, variant: str | None, ignore: tuple[str, ...], live: bool
) -> None:
    assert "refund" in SCENARIOS[scenario].name
    rules = DEFAULT_RULES.ignoring(ignore)
    with Journal.open(":memory:") as journal:
        ran = run_demo(journal, seed=seed, sessions=scenario + 1)[-1]
        agent = None if variant is None else f"{HERE}:{variant}"
        replayer = Replayer(
            ReplayOptions(agent=agent, rules=rules, live_model="agent" if live else None), save=True
        )
        result = replayer.replay(journal, ran.session_id)
        if not result.saved:  # another configuration, and no live model to re-record with
            assert result.config_changes and not live and result.unsaved is not None
            return
        diffed = diff_records(
            session_records(journal, ran.session_id),
            session_records(journal, result.replay_session_id),
            rules,
        )
    assert diffed.identical == result.identical
    assert diffed.config_changes == result.config_changes
    first = diffed.first_difference()
    divergence = result.behaviour_divergence
    assert (first is None) == (divergence is None)
    if first is not None and divergence is not None:
        assert first.a == divergence.seq
    assert (result.first_divergence is None) == result.identical
    if result.config_changes:
        assert result.first_divergence is not None and result.first_divergence.seq == 0


def test_imported_transcripts_get_one_verdict_from_replay_and_diff(tmp_path: Path) -> None:
    """The real transcripts, replayed by the airline example and saved, then diffed."""
    with Journal.open(tmp_path / "t.db") as journal:
        import_openai(journal, [real_transcripts()], error_prefix="Error:")
        replayer = Replayer(ReplayOptions(agent="agentloop.examples.airline:build"), save=True)
        verdicts = []
        for summary in journal.sessions():
            result = replayer.replay(journal, summary.session_id)
            diffed = diff_records(
                session_records(journal, summary.session_id),
                session_records(journal, result.replay_session_id),
            )
            verdicts.append((summary.session_id, result.verdict, diffed.identical))
    assert len(verdicts) == 50
    assert [v for v in verdicts if (v[1] == "identical") != v[2]] == []
    assert {v[1] for v in verdicts} == {"identical", "diverged"}


# -- nothing recorded is served past a divergence -----------------------------------------

REFUND_FIXTURE = (
    Path(__file__).resolve().parent.parent / "fixtures" / "refund-overrefund-fixed.jsonl"
)


def _answers(path: Path) -> list[str]:
    from journal import AgentCompleted, VerificationFailed, import_file

    with Journal.open(":memory:") as journal:
        session = import_file(journal, path).session_id
        return [
            item.event.answer if isinstance(item.event, AgentCompleted) else item.event.message
            for item in journal.events(session)
            if isinstance(item.event, (AgentCompleted, VerificationFailed))
        ]


def test_a_guard_change_cannot_produce_a_contradictory_fixture(tmp_path: Path) -> None:
    """Issue 18's case: after the margin moves to $90, the recorded "$100 issued" is never
    served to the conversation in which $100 was refused."""
    fixture = tmp_path / "refund.jsonl"
    fixture.write_bytes(REFUND_FIXTURE.read_bytes())
    agent = f"{HERE}:build_tighter_margin"
    refused = replay_fixture(fixture, ReplayOptions(agent=agent), update=True)
    divergence = refused.result.first_divergence
    assert divergence is not None and divergence.seq == 5  # the guard's message changed
    assert refused.result.stopped_at == 6  # the model is not asked with a recorded reply
    assert refused.refused_update is not None
    assert fixture.read_bytes() == REFUND_FIXTURE.read_bytes()

    rerecorded = replay_fixture(
        fixture, ReplayOptions(agent=agent, live_model="agent"), update=True
    )
    assert rerecorded.refused_update is None and rerecorded.result.live_from == 6
    answers = _answers(fixture)
    assert answers[0].startswith("amount ($150) exceeds the order's refundable balance ($90)")
    assert answers[-1] in ("Refund of $90.0 issued.", "Done: refunded $90.0 for order 2210.")
    assert not any("$100" in answer for answer in answers)
    assert replay_fixture(fixture, ReplayOptions(agent=agent)).passed


def test_a_saved_replay_that_diverged_ends_with_a_halt_that_says_why(demo: Path) -> None:
    with Journal.open(demo) as journal:
        result = Replayer(ReplayOptions(agent=f"{HERE}:build_tighter_margin"), save=True).replay(
            journal, FIXED
        )
        assert result.saved and result.stopped_at == 6
        last = list(journal.events(result.replay_session_id))[-1]
        assert last.seq == 6 and last.event.type == "agent_halted"
        assert (last.event.rule, last.event.reason.split(":")[0]) == (
            "replay_stopped",
            "replay stopped at seq 6",
        )
        assert journal.state(result.replay_session_id).status == "halted"
