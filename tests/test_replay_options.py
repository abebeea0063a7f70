"""ReplayOptions: one frozen object, one name per option from the command line to the code."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from agentloop import AgentDefinitionError, AgentLoopError, AgentRuntime, counter_ids
from journal import ActionCommitted, Journal
from replay import DEFAULT_RULES, EVERY_TOOL, Replayer, ReplayOptions, fork, replay_fixture

from . import replay_helpers as rh
from .helpers import run_cli
from .loop_helpers import Script, fixed_clock, propose


def test_tool_names_are_a_frozen_set_and_star_means_every_tool() -> None:
    assert ReplayOptions(live_tools=["b", "a", "b"]).live_tools == frozenset({"a", "b"})
    assert ReplayOptions(live_tools=[EVERY_TOOL]).live_tools is True
    assert ReplayOptions(live_tools=["lookup", "*"]).live_tools is True
    assert ReplayOptions(live_tools=True).named_live == frozenset()
    assert ReplayOptions(live_tools=("a",)).named_live == frozenset({"a"})
    assert ReplayOptions(allow_side_effects=["x"]).allow_side_effects == frozenset({"x"})
    assert ReplayOptions(live_model=False).live_model is None
    options = ReplayOptions()
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.live_tools = True  # type: ignore[misc]


def test_narrowed_to_keeps_the_names_a_recording_has() -> None:
    options = ReplayOptions(
        live_tools=["stock", "other"], allow_side_effects=["send", "missing"], rules=DEFAULT_RULES
    )
    narrowed = options.narrowed_to(["stock", "send", "echo"])
    assert narrowed == dataclasses.replace(
        options, live_tools=frozenset({"stock"}), allow_side_effects=frozenset({"send"})
    )
    assert ReplayOptions(live_tools=True).narrowed_to([]).live_tools is True


def test_a_replayer_takes_options_only() -> None:
    with pytest.raises(TypeError, match="Replayer takes ReplayOptions, not str"):
        Replayer("agentloop.examples.refund:build_fixed")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Replayer(agent="x")  # type: ignore[call-arg]


def test_every_replay_path_takes_the_one_options_object() -> None:
    """The paths of a replay share one signature shape: (journal, session, target, options)."""
    from replay import replay_agent_session, replay_entry, replay_loop
    from replay.integrations import openai_agents, pydantic_ai

    for path in (
        replay_agent_session,
        replay_entry,
        replay_loop,
        pydantic_ai.replay_agent,
        openai_agents.replay_agent,
    ):
        parameters = list(inspect.signature(path).parameters)
        assert parameters[3] == "options", path
        assert "save" in parameters, path
        for renamed in ("live", "allowed_side_effects", "rules", "live_model", "live_tools"):
            assert renamed not in parameters, (path, renamed)
    for path in (fork, replay_fixture):
        assert "options" in inspect.signature(path).parameters


@pytest.fixture
def stock_db(tmp_path: Path) -> Iterator[Path]:
    rh.STOCK.clear()
    rh.STOCK.update(a=5, b=7)
    db = tmp_path / "stock.db"
    agent = rh.build_pay()
    agent.reference = "tests.replay_helpers:build_pay"
    script = Script(
        propose(("stock", {"q": "a"}), ("echo", {"q": "b"})),
        propose(("stock", {"q": "b"})),
        propose(text="done"),
    )
    with Journal.open(db) as journal:
        runtime = AgentRuntime(agent, journal, llm=script, clock=fixed_clock, ids=counter_ids("k"))
        runtime.start("stock")
        asyncio.run(runtime.run_turn("stock", "pay 1"))
    yield db
    rh.STOCK.clear()


@pytest.mark.parametrize("how", [["--live-tool", "stock"], ["--live-tool", "*"], ["--live-tools"]])
def test_fork_runs_a_named_tool_live_so_a_fix_inside_it_can_be_forked_on(
    stock_db: Path, how: list[str]
) -> None:
    agent = ["--agent", "tests.replay_helpers:build_plain"]
    unchanged = run_cli("fork", "stock", "--at", "1", *agent, *how, "--db", stock_db, "--json")
    assert unchanged.exit_code == 0, unchanged.stderr
    assert json.loads(unchanged.stdout)["recorded_until"] == 8  # the live tool agrees: all
    rh.STOCK["a"] = 6  # the tool's fix: another level
    forked = run_cli("fork", "stock", "--at", "1", *agent, *how, "--db", stock_db, "--json")
    assert forked.exit_code == 0, forked.stderr
    result = json.loads(forked.stdout)
    assert result["recorded_until"] == 2  # the live result at seq 3 left the recording
    with Journal.open(stock_db) as journal:
        events = [item.event for item in journal.events(result["session_id"])]
    assert isinstance(events[3], ActionCommitted) and events[3].result == {"level": 6}


def test_fork_without_a_live_tool_keeps_the_recorded_result(stock_db: Path) -> None:
    rh.STOCK["a"] = 6
    agent = ["--agent", "tests.replay_helpers:build_plain"]
    forked = run_cli("fork", "stock", "--at", "1", *agent, "--db", stock_db, "--json")
    session = json.loads(forked.stdout)["session_id"]
    with Journal.open(stock_db) as journal:
        events = [item.event for item in journal.events(session)]
    assert isinstance(events[3], ActionCommitted) and events[3].result == {"level": 5}


def test_replay_star_is_every_tool(stock_db: Path) -> None:
    rh.STOCK["a"] = 6
    star = run_cli("replay", "stock", "--live-tool", "*", "--db", stock_db, "--json")
    every = run_cli("replay", "stock", "--live-tools", "--db", stock_db, "--json")
    assert star.exit_code == every.exit_code == 1
    assert (
        json.loads(star.stdout)["first_divergence"]["changes"]
        == json.loads(every.stdout)["first_divergence"]["changes"]
        == [{"path": "result.level", "kind": "changed", "expected": 5, "actual": 6}]
    )
    both = run_cli("replay", "stock", "--live-tools", "--live-tool", "stock", "--db", stock_db)
    assert both.exit_code == 2 and "exclude each other" in both.stderr


def _declared(agent: Any, **modes: dict[str, bool]) -> Any:
    """``agent`` with its tools re-declared (``stock={"pure": True}``)."""
    agent.tools = [replace(tool, **modes.get(tool.name, {})) for tool in agent.tools]
    return agent


def test_an_agentloop_tool_declared_pure_runs_and_is_compared_with_no_flag(
    stock_db: Path,
) -> None:
    pure = _declared(rh.build_plain(), stock={"pure": True})
    with Journal.open(stock_db) as journal:
        assert Replayer(ReplayOptions(agent=pure)).replay(journal, "stock").identical
        rh.STOCK["a"] = 6
        result = Replayer(ReplayOptions(agent=pure)).replay(journal, "stock")
    assert result.first_divergence is not None and result.first_divergence.seq == 3
    assert result.served.ran == ("stock",) and result.served.not_run == ("echo",)


def test_an_agentloop_tool_with_side_effects_never_runs_unless_allowed(stock_db: Path) -> None:
    risky = _declared(rh.build_plain(), stock={"side_effects": True})
    rh.STOCK["a"] = 6  # it would diverge, had it run
    with Journal.open(stock_db) as journal:
        every = Replayer(ReplayOptions(agent=risky, live_tools=True)).replay(journal, "stock")
        assert every.identical and "stock" in every.served.not_run
        with pytest.raises(AgentLoopError, match="--allow-side-effects stock"):
            Replayer(ReplayOptions(agent=risky, live_tools=["stock"])).replay(journal, "stock")
        allowed = ReplayOptions(agent=risky, live_tools=["stock"], allow_side_effects=["stock"])
        assert Replayer(allowed).replay(journal, "stock").first_divergence is not None
    with pytest.raises(AgentDefinitionError, match="pure or has side effects"):
        _declared(rh.build_plain(), stock={"pure": True, "side_effects": True})
