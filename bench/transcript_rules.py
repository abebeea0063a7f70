"""Where the loop's failure and reply rules fire on real transcripts replayed through an agent.

    python bench/transcript_rules.py [FILE ...] [--agent MODULE:FACTORY] [--legacy]

Imports the OpenAI-format transcripts (default: the 50 real airline sessions of
``tests/data/transcripts`` and the three of ``fixtures/openai``) into a scratch journal,
replays every session through the agent (default: the airline example) and prints, per
rule, in how many sessions and how many times it fires:

* in the recordings themselves (their fold, no gate involved): a call failing the same
  way three times or more across turns, and empty model replies;
* in the replays: a rule that fires writes what the recording does not hold, so it is
  where the replay first diverges (the README's verdict table), and nothing recorded is
  served past that point: later occasions of a session are not reached.

``--legacy`` replays with the values that reproduce sessions recorded before the rules
existed (`journal.predated_settings`): the old verdicts. Prints counts, never timings.
"""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from agentloop import COMPACTED_RESULT, load_agent
from journal import (
    DEFAULT_MAX_EVENT_BYTES,
    ActionCommitted,
    ActionFailed,
    ActionProposed,
    AgentEvent,
    AgentHalted,
    Journal,
    SessionState,
    VerificationFailed,
    apply,
    import_openai,
    predated_settings,
)
from replay import Replayer, ReplayOptions

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_FILES = (
    ROOT / "tests" / "data" / "transcripts" / "airline-qwen2.5-7b.json",
    ROOT / "fixtures" / "openai" / "airline-sample.json",
)


def rules_in(events: Iterable[AgentEvent]) -> list[str]:
    """The new rules' firings among replayed events, one name per firing."""
    found = []
    for event in events:
        if isinstance(event, VerificationFailed) and event.stage == "empty_reply":
            found.append("empty reply sent back")
        elif isinstance(event, AgentHalted) and event.rule in ("empty_reply", "identical_failures"):
            found.append(f"halt: {event.rule}")
        elif isinstance(event, ActionFailed) and event.abandoned:
            found.append("call abandoned at its timeout")
        elif isinstance(event, ActionCommitted) and isinstance(event.result, dict):
            if COMPACTED_RESULT in event.result:
                found.append("result recorded compacted")
    return found


def in_recording(journal: Journal, session_id: str) -> list[str]:
    """What the recording itself holds: identical-failure streaks of 3+ and empty replies."""
    state, peak, found = SessionState(), 0, []
    for item in journal.events(session_id):
        state = apply(state, item)
        peak = max([peak, *(count for _, count in state.identical_failures.values())])
        event = item.event
        if isinstance(event, ActionProposed) and not event.calls and not (event.text or "").strip():
            found.append("empty reply")
    return found + (["a call failing the same way 3+ times"] if peak >= 3 else [])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", type=Path, default=list(DEFAULT_FILES))
    parser.add_argument("--agent", default="agentloop.examples.airline:build")
    parser.add_argument("--legacy", action="store_true", help="the settings before the rules")
    options = parser.parse_args()
    agent = load_agent(options.agent)
    if options.legacy:
        old = agent.guardrails.model_copy(update=predated_settings(1))
        agent = replace(agent, guardrails=old)
    recorded: Counter[str] = Counter()
    fired: Counter[str] = Counter()
    sessions: dict[str, set[str]] = {}
    with Journal.open(":memory:") as journal:
        import_openai(journal, [str(path) for path in options.files], error_prefix="Error:")
        ids = [summary.session_id for summary in journal.sessions()]
        largest = max(len(row.body.encode()) for s in ids for row in journal.stored_events(s))
        for session_id in ids:
            held = in_recording(journal, session_id)
            recorded.update(held)
            result = Replayer(ReplayOptions(agent=agent), save=True).replay(journal, session_id)
            replayed = [item.event for item in journal.events(result.replay_session_id)]
            found = rules_in(replayed)
            fired.update(found)
            for name in {*held, *found}:
                sessions.setdefault(name, set()).add(session_id)
    print(f"{len(ids)} sessions from {', '.join(path.name for path in options.files)}")
    print(f"agent {options.agent}{' (legacy settings)' if options.legacy else ''}")
    print(f"largest event: {largest:,} bytes (the journal's limit: {DEFAULT_MAX_EVENT_BYTES:,})")
    print(f"\n{'in the recordings':<40} {'times':>6} {'sessions':>9}")
    for name, count in sorted(recorded.items()):
        print(f"{name:<40} {count:>6} {len(sessions[name]):>9}")
    print(f"\n{'in the replays':<40} {'times':>6} {'sessions':>9}")
    for name, count in sorted(fired.items()):
        print(f"{name:<40} {count:>6} {len(sessions[name]):>9}")
    if not fired:
        print("(no rule fired)")


if __name__ == "__main__":
    main()
