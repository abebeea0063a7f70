"""ATIF in and out: round trips of this project's sessions, trajectories of another producer.

A round trip is ``export --format atif`` then ``import --format atif`` into another journal:
the same events, timestamps and hashes, on both stores, for the demo's sessions, captured
sessions with failed model calls (one retried, one that halts the session, replayed
identical after the trip), and generated sessions (a hypothesis property). The files under
``tests/data/atif/`` are Claude-Code-like runs in ATIF v1.7 and v1.8 written as another
producer writes them (tool failures, a subagent): they import with nothing unmapped, and
exported again they say what they said (the differences are the ones docs/formats.md
lists). Hostile input is one line naming the file (and line or step), exit 2, nothing
written; `tests/test_drill_hostile.py` fuzzes the importer.
"""

from __future__ import annotations

import copy
import json
import tempfile
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from journal import ActionFailed, AgentHalted, Journal, ModelCallFailed
from journal.events import EventModel
from journal.formats import atif_json, atif_trajectory, convert_atif, import_converted
from replay import ReplayOptions, replay_entry

from . import support_app as app
from .fake_openai import Faulty, serving
from .helpers import TickingClock, one_error_line, run_cli
from .replay_helpers import demo_file
from .strategies import sessions

DATA = Path(__file__).parent / "data" / "atif"
V17 = DATA / "claude-code-v1.7.json"
V18 = DATA / "claude-code-v1.8.json"


def _chain(journal: Journal, session_id: str) -> list[tuple[str, str, Any]]:
    return [(item.ts, item.hash, item.event) for item in journal.events(session_id)]


def _export(journal: Journal, session_ids: list[str], path: Path) -> Path:
    path.write_bytes(atif_json([atif_trajectory(journal, s) for s in session_ids]))
    return path


def _import(journal: Journal, *paths: Path) -> dict[str, Any]:
    report = import_converted(journal, convert_atif(paths))
    assert report.errors == []
    return report.as_json()


def _round_trip(source: Journal, target: Journal, session_ids: list[str], folder: Path) -> None:
    for session_id in session_ids:
        path = _export(source, [session_id], folder / f"{session_id}.json")
        report = _import(target, path)
        assert report["unmapped"]["total"] == 0, report["unmapped"]
        assert _chain(target, session_id) == _chain(source, session_id)


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return demo_file(tmp_path_factory.mktemp("demo"))


def test_the_demo_round_trips_to_the_same_chains_on_both_stores(
    demo: Path, any_journal: Journal, tmp_path: Path
) -> None:
    with Journal.open(demo) as source:
        session_ids = [summary.session_id for summary in source.sessions()]
        types = {item.event.type for s in session_ids for item in source.events(s)}
        assert {"model_call_failed", "agent_halted", "verification_failed"} <= types
        _round_trip(source, any_journal, session_ids, tmp_path)
        assert any_journal.verify().ok
        again = import_converted(
            any_journal, convert_atif([tmp_path / f"{s}.json" for s in session_ids])
        )
        assert again.total("new_events") == 0 and again.errors == []  # a no-op


def test_several_sessions_export_as_json_lines_and_import_back(demo: Path, tmp_path: Path) -> None:
    path = tmp_path / "two.jsonl"
    with Journal.open(demo) as source:
        first, second = [summary.session_id for summary in source.sessions()][:2]
    result = run_cli("export", first, second, "--db", demo, "--format", "atif", "-o", path)
    assert result.exit_code == 0, result.stderr
    lines = path.read_bytes().splitlines()
    assert [json.loads(line)["session_id"] for line in lines] == [first, second]
    db = tmp_path / "back.db"
    result = run_cli("import", "--format", "atif", path, "--db", db)
    assert result.exit_code == 0, result.stderr
    assert "2 sessions (2 new" in result.stdout and "every message was mapped" in result.stdout
    with Journal.open(demo) as source, Journal.open(db) as back:
        assert [_chain(back, s) for s in (first, second)] == [
            _chain(source, s) for s in (first, second)
        ]


@pytest.fixture
def captured() -> Iterator[Journal]:
    """The support desk's sessions: a retried 429, and a 500 nothing catches (a halt)."""
    app.CHANGES.clear()
    app.OUTBOX.clear()
    Faulty.requests = []
    journal = Journal.open(":memory:")
    with serving(Faulty) as url:
        Faulty.faults = [None, "429"]
        app.bind(journal, url)
        app.answer("Where is order 5?")
        Faulty.faults = ["500"]
        with pytest.raises(Exception, match="fault 500"):
            app.first_reply("Where is order 5?")
    Faulty.faults = []
    yield journal
    app.CHANGES.clear()
    journal.close()


def test_captured_sessions_with_failed_calls_round_trip_and_replay_identical(
    captured: Journal, tmp_path: Path
) -> None:
    session_ids = [s.session_id for s in captured.sessions()]
    by_type = {s: [item.event for item in captured.events(s)] for s in session_ids}
    retried, halted = sorted(session_ids, key=lambda s: len(by_type[s]), reverse=True)
    assert any(isinstance(e, ModelCallFailed) for e in by_type[retried])
    assert isinstance(by_type[halted][-2], ModelCallFailed)
    assert isinstance(by_type[halted][-1], AgentHalted)
    document = atif_trajectory(captured, halted)
    assert document["steps"][-2]["source"] == "system"
    assert document["steps"][-2]["message"].startswith("model call failed: ")
    with Journal.open(tmp_path / "back.db") as back:
        _round_trip(captured, back, session_ids, tmp_path)
        for session_id, entry in ((retried, app.answer), (halted, app.first_reply)):
            result = replay_entry(back, session_id, entry, ReplayOptions())  # type: ignore[arg-type]
            assert result.identical, result.first_divergence


ROUND_TRIP = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@ROUND_TRIP
@given(events=sessions())
def test_any_session_round_trips_to_the_same_chain(events: list[EventModel]) -> None:
    with (
        tempfile.TemporaryDirectory() as folder,
        Journal.open(":memory:", clock=TickingClock()) as source,
        Journal.open(":memory:") as target,
    ):
        source.append("generated", events)
        _round_trip(source, target, ["generated"], Path(folder))


# -- trajectories another producer wrote -------------------------------------------------------


def _types(journal: Journal, session_id: str) -> list[str]:
    return [item.event.type for item in journal.events(session_id)]


def test_a_v18_claude_code_run_imports_with_its_failures_and_subagent(journal: Journal) -> None:
    report = _import(journal, V18)
    assert report["unmapped"]["total"] == 0 and report["notes"]["total"] == 0
    parent = "9c1f7e52-3b0a-4d51-a8e2-6f04c2d9b1aa"
    child = f"{parent}:explore-toolu_01Fa9cRt4Uy2Wm6Kp8Ln3Qd7"
    assert sorted(s.session_id for s in journal.sessions()) == [parent, child]
    assert _types(journal, parent) == [
        "session_started",
        "user_input",
        "action_proposed",
        "action_failed",
        "action_proposed",
        "action_committed",
        "action_failed",
        "action_proposed",
        "action_committed",
        "action_proposed",
        "action_committed",
        "action_failed",
        "action_proposed",
        "action_committed",
        "action_committed",
        "action_proposed",
        "agent_completed",
    ]
    events = [item.event for item in journal.events(parent)]
    started = events[0]
    assert started.type == "session_started"
    assert started.model == "claude-sonnet-4-5-20250929"
    assert started.system_prompt.startswith("You are Claude Code")
    assert [tool.name for tool in started.config.tools] == ["Read", "Bash", "Edit", "Task"]
    atif = started.metadata["atif"]
    assert atif["agent"] == "claude-code" and atif["agent_version"] == "2.1.14"
    assert atif["subagents"] == [
        {
            "step": 5,
            "call_id": "toolu_01Fa9cRt4Uy2Wm6Kp8Ln3Qd7",
            "trajectory_id": "explore-toolu_01Fa9cRt4Uy2Wm6Kp8Ln3Qd7",
            "session_id": parent,
            "extra": {"subagent_type": "Explore"},
        }
    ]
    assert {
        "step": 3,
        "path": ["observation", "results", 0],
        "fields": {"extra": {"exit_code": 1}},
    } in atif["kept"]
    failed = [e for e in events if isinstance(e, ActionFailed)]
    assert [(e.tool, e.kind) for e in failed] == [("Bash", "business"), ("Read", "business")] + [
        ("Bash", "business")
    ]
    assert failed[1].message == "<tool_use_error>File does not exist.</tool_use_error>"
    proposal = events[2]
    assert proposal.type == "action_proposed"
    assert (proposal.usage.input_tokens, proposal.usage.output_tokens) == (14210, 96)
    assert (proposal.usage.cached_tokens, proposal.cost) == (13900, 0.00659)
    assert proposal.reasoning == "Start from the failing test, then read the code it exercises."
    assert proposal.calls[0].args == {
        "command": "python -m pytest tests/test_totals.py -q",
        "description": "Run the failing test",
    }
    sub = journal.require(child)
    assert sub.status == "completed"
    sub_started = next(journal.events(child)).event
    assert sub_started.metadata["atif"]["parent"] == {
        "session_id": parent,
        "call_id": "toolu_01Fa9cRt4Uy2Wm6Kp8Ln3Qd7",
    }
    assert sub_started.model == "claude-haiku-4-5-20251001"


def test_a_v17_run_imports_its_text_parts_subagent_and_notes(journal: Journal) -> None:
    report = _import(journal, V17)
    assert report["unmapped"]["total"] == 0
    parent = "4e8a2c1d-77f0-4b3e-9d15-0a6b3f5c8e21"
    events = [item.event for item in journal.events(parent)]
    assert events[1].type == "user_input"
    assert events[1].text == (
        "Which of our services still pin requests below 2.32?\n"
        "Check the advisory too, I think 2.31 has a CVE."
    )
    started = events[0]
    assert started.type == "session_started" and started.system_prompt == ""
    assert started.metadata["atif"]["schema_version"] == "ATIF-v1.7"
    assert started.metadata["atif"]["notes"].startswith("Converted from ~/.claude")
    assert [e.tool for e in events if isinstance(e, ActionFailed)] == ["WebFetch"]
    child = f"{parent}:agent-a3f9c2"
    assert [e.type for e in (item.event for item in journal.events(child))][-2:] == [
        "action_proposed",
        "agent_completed",
    ]
    assert journal.state(child).status == "completed"


def _moment(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _as_written(document: Any, original: Any) -> Any:
    """An exported document as the producer wrote ``original``: what docs/formats.md says
    differs is set back (our corrections dropped, version and times in the producer's
    spelling, the step model the trajectory's, zero counts, added totals and extras)."""
    if isinstance(document, list):
        return [_as_written(d, o) for d, o in zip(document, original, strict=False)]
    if not isinstance(document, dict) or not isinstance(original, dict):
        return document
    out = {}
    for key, value in document.items():
        if (
            key == "agent_journal"
            or key not in original
            and key
            in (
                "extra",
                "final_metrics",
                "model_name",
                "session_id",
            )
        ):
            continue
        if key in ("schema_version", "timestamp") and key in original:
            if key == "timestamp":
                assert _moment(value) == _moment(original[key])
            out[key] = original[key]
            continue
        out[key] = _as_written(value, original.get(key))
        if out[key] == {} and key == "extra":
            del out[key]
    for key, value in original.items():  # a zero count is written as none
        if key not in out and value == 0:
            out[key] = 0
    return out


@pytest.mark.parametrize("path", [V17, V18], ids=["v1.7", "v1.8"])
def test_another_producers_trajectory_comes_back_out_as_it_went_in(
    path: Path, journal: Journal, tmp_path: Path
) -> None:
    original = json.loads(path.read_bytes())
    _import(journal, path)
    exported = atif_trajectory(journal, original["session_id"])
    assert _as_written(exported, original) == original
    again = tmp_path / "again.json"
    again.write_bytes(atif_json([exported]))
    before = {s.session_id: _chain(journal, s.session_id) for s in journal.sessions()}
    assert import_converted(journal, convert_atif([again])).total("new_events") == 0
    assert {s.session_id: _chain(journal, s.session_id) for s in journal.sessions()} == before


# -- hostile input -----------------------------------------------------------------------------


def _v18() -> dict[str, Any]:
    return copy.deepcopy(json.loads(V18.read_bytes()))


def _nested(depth: int) -> dict[str, Any]:
    """The v1.8 run whose subagent delegates to a subagent, ``depth`` levels down."""
    document = _v18()
    template = document.pop("subagent_trajectories")[0]
    holder = document
    for level in range(depth):
        inner = {**copy.deepcopy(template), "trajectory_id": f"level-{level}"}
        holder["subagent_trajectories"] = [inner]
        holder = inner
    return document


def _without(path: list[Any]) -> dict[str, Any]:
    document = _v18()
    target: Any = document
    for part in path[:-1]:
        target = target[part]
    del target[path[-1]]
    return document


def _audio_in_v17() -> dict[str, Any]:
    document = json.loads(V17.read_bytes())
    document["steps"][0]["message"].append(
        {"type": "audio", "source": {"media_type": "audio/wav", "path": "a.wav"}}
    )
    return document


HOSTILE: dict[str, tuple[bytes, str]] = {
    "not JSON": (b'{"schema_version": "ATIF-v1.8",\n "steps": [\n}', ":3: not JSON"),
    "a bad line of JSON Lines": (
        V18.read_bytes().replace(b"\n", b"") + b"\n{oops\n",
        ":2: not JSON",
    ),
    "a version not read": (
        orjson.dumps({**_v18(), "schema_version": "ATIF-v1.5"}),
        "schema_version 'ATIF-v1.5' is not read (ATIF-v1.7, ATIF-v1.8)",
    ),
    "no version": (orjson.dumps([1, 2]), "a trajectory is a JSON object, not list"),
    "a step without its source": (
        orjson.dumps(_without(["steps", 2, "source"])),
        "steps[2].source: Field required",
    ),
    "a call without its id": (
        orjson.dumps(_without(["steps", 3, "tool_calls", 0, "tool_call_id"])),
        "steps[3].tool_calls[0].tool_call_id: Field required",
    ),
    "a result that answers another step's call": (
        orjson.dumps(_v18()).replace(
            b'"toolu_01Qm7bLx2VtYc9Ns4Rk8Hf1z","content"', b'"x","content"'
        ),
        "does not match any tool_call in step 4",
    ),
    "audio in v1.7": (orjson.dumps(_audio_in_v17()), "an audio content part in ATIF-v1.7"),
    "huge nesting": (b'{"schema_version": "ATIF-v1.8", "agent": ' + b"[" * 5000, "not JSON"),
    "deep subagents": (orjson.dumps(_nested(12)), "subagents nested deeper than 8"),
    "a bad correction": (
        orjson.dumps(
            {
                **_v18(),
                "extra": {"agent_journal": {"events": [{"type": "user_input"}]}},
            }
        ),
        "extra.agent_journal.events[0] has no type and ts",
    ),
    "no root correction": (
        orjson.dumps({**_v18(), "extra": {"agent_journal": {"events": []}}}),
        "extra.agent_journal.events of the root is not one event",
    ),
    "a correction's time that is none": (
        orjson.dumps(
            {
                **_v18(),
                "extra": {"agent_journal": {"events": [{"ts": 5}]}},
            }
        ),
        "timestamp 5 is not a time",
    ),
    "a time with no UTC form": (
        orjson.dumps(_v18()).replace(b"2026-11-03T09:14:02.540Z", b"0001-01-01T00:00:00+05:00"),
        "step 2: timestamp '0001-01-01T00:00:00+05:00' is not a time",
    ),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_input_is_one_line_exit_2_and_nothing_written(name: str, tmp_path: Path) -> None:
    data, expected = HOSTILE[name]
    path = tmp_path / "bad.json"
    path.write_bytes(data)
    db = tmp_path / "journal.db"
    line = one_error_line(run_cli("import", "--format", "atif", path, "--db", db))
    assert line.startswith(f"agent-journal: {path}") and expected in line, line
    assert not db.exists()


def test_a_trajectory_that_changed_is_a_conflict_and_leaves_the_journal_as_it_was(
    journal: Journal, tmp_path: Path
) -> None:
    _import(journal, V18)
    before = {s.session_id: _chain(journal, s.session_id) for s in journal.sessions()}
    changed = _v18()
    changed["steps"][7]["message"] = "Fixed, I think."
    path = tmp_path / "changed.json"
    path.write_bytes(orjson.dumps(changed))
    report = import_converted(journal, convert_atif([path]))
    assert len(report.errors) == 1 and "exists already with different content" in report.errors[0]
    assert {s.session_id: _chain(journal, s.session_id) for s in journal.sessions()} == before


def test_kept_fields_go_back_to_their_steps_when_the_prompt_was_two_steps(
    journal: Journal, tmp_path: Path
) -> None:
    document = _v18()
    document["steps"].insert(1, {"step_id": 0, "source": "system", "message": "Be brief."})
    for number, step in enumerate(document["steps"], start=1):
        step["step_id"] = number
    path = tmp_path / "two-prompts.json"
    path.write_bytes(orjson.dumps(document))
    _import(journal, path)
    started = next(journal.events(document["session_id"])).event
    assert started.type == "session_started"
    assert started.system_prompt.endswith("\n\nBe brief.")
    exported = atif_trajectory(journal, document["session_id"])
    bash = exported["steps"][2]  # the producer's step 4: after one prompt step, not two
    assert bash["tool_calls"][0]["function_name"] == "Bash"
    assert bash["observation"]["results"][0]["extra"] == {"is_error": True, "exit_code": 1}
    again = tmp_path / "again.json"
    again.write_bytes(atif_json([exported]))
    assert import_converted(journal, convert_atif([again])).total("new_events") == 0


def _nodes(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _nodes(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _nodes(item, (*path, index))


NODES = list(_nodes(json.loads(V18.read_bytes())))[1:]
ANY_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(where=st.sampled_from(NODES), value=ANY_JSON | st.sampled_from(["", "x", -1, 2**70]))
def test_any_value_anywhere_imports_or_is_one_line(where: tuple[Any, ...], value: Any) -> None:
    """A node of a real trajectory replaced by any JSON value: imported, or refused with one
    line naming the file, and then nothing written."""
    document = _v18()
    target: Any = document
    for part in where[:-1]:
        target = target[part]
    target[where[-1]] = value
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "run.json"
        path.write_bytes(json.dumps(document).encode())
        db = Path(folder) / "journal.db"
        result = run_cli("import", "--format", "atif", path, "--db", db)
        if result.exit_code == 2:
            line = one_error_line(result)
            assert line.startswith(f"agent-journal: {path}"), line
            assert not db.exists()
        else:
            assert result.exit_code == 0, result.stdout + result.stderr
            with Journal.open(db) as journal:
                assert journal.verify().ok
