"""Deterministic re-run of a recorded session with the current code, compared event by event.

The `Replayer` builds the agent (from the session's recorded ``agent`` reference, or the
one given), swaps its ports for recorded ones (`replay.recorded`), feeds the recorded user
inputs turn by turn, and compares what the current code writes with what was recorded,
after `replay.normalize` drops the volatile fields. The result is identical, or the first
divergence: the seq, the expected and the actual event, and the field-level difference.

* A recording without a terminal event (a crash, a cut transcript) is replayed up to its
  end and is identical if that prefix matches.
* Asking the model for more than was recorded is a divergence ("recording exhausted at
  seq N"), never a hang.
* An exception in the agent's code is journaled by the loop as a halt with rule
  ``error``; it shows as a divergence at that step, with the exception's message.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

from agentloop import Agent, AgentRuntime, TrustList, counter_ids, load_agent
from journal import (
    AgentCompleted,
    AgentHalted,
    InvalidInputError,
    Journal,
    JournalError,
    RecordedEvent,
    SessionNotFoundError,
    SessionStarted,
    StoreError,
    UserInput,
)

from .diff import Change, field_changes
from .normalize import DEFAULT_RULES, NormalizationRules, fingerprint, normalize, record_of
from .recorded import LiveDifference, RecordedClock, RecordedLLM, RecordedTools, UnrecordedCall

__all__ = [
    "CAPTURED",
    "IMPORTED_SESSION_FIELDS",
    "Divergence",
    "DivergenceError",
    "ReplayResult",
    "Replayer",
    "agent_for",
    "compare",
    "free_session_id",
    "judge",
    "load_recording",
    "replay_target",
]


CAPTURED = ("recorder", "pydantic-ai", "openai-agents")
"""``captured_with`` values of sessions journaled by `journal.Recorder` or an integration,
which `Replayer` hands to `replay.loop.replay_captured`."""

IMPORTED_SESSION_FIELDS = (
    "agent",
    "config",
    "model",
    "model_settings",
    "system_prompt",
    "system_prompt_hash",
)
"""Fields of ``session_started`` not compared when the recording has no agent reference
(an imported transcript): the replaying agent's configuration has nothing to match."""


@dataclass(frozen=True)
class Divergence:
    """Where a replay first differs from its recording."""

    seq: int
    reason: str
    expected: dict[str, Any] | None
    actual: dict[str, Any] | None
    changes: tuple[Change, ...] = ()

    def as_json(self) -> dict[str, Any]:
        """The divergence as a JSON object (the shape of ``replay --json``)."""
        return {
            "seq": self.seq,
            "reason": self.reason,
            "expected": self.expected,
            "actual": self.actual,
            "changes": [change.as_json() for change in self.changes],
        }


@dataclass(frozen=True)
class ReplayResult:
    """The outcome of one replay."""

    session_id: str
    replay_session_id: str
    saved: bool
    agent: str | None
    verdict: Literal["identical", "diverged"]
    first_divergence: Divergence | None
    recorded_events: int
    replayed_events: int
    recording_complete: bool
    unrecorded_calls: tuple[UnrecordedCall, ...] = ()
    live_differences: tuple[LiveDifference, ...] = ()

    @property
    def identical(self) -> bool:
        """True when the replay matched the recording."""
        return self.verdict == "identical"

    def as_json(self) -> dict[str, Any]:
        """The result as a JSON object (the shape of ``replay --json``)."""
        return {
            "verdict": self.verdict,
            "first_divergence": None
            if self.first_divergence is None
            else self.first_divergence.as_json(),
            "session_id": self.session_id,
            "replay_session_id": self.replay_session_id,
            "saved": self.saved,
            "agent": self.agent,
            "recorded_events": self.recorded_events,
            "replayed_events": self.replayed_events,
            "recording_complete": self.recording_complete,
            "unrecorded_calls": [{"tool": c.tool, "args": c.args} for c in self.unrecorded_calls],
            "live_differences": [
                {
                    "tool": d.tool,
                    "args": d.args,
                    "recorded": d.recorded,
                    "live": d.live,
                    "recorded_seq": d.recorded_seq,
                }
                for d in self.live_differences
            ],
        }


class DivergenceError(JournalError):
    """Raised by `Replayer.replay_or_raise` when a replay diverges; carries the result."""

    def __init__(self, result: ReplayResult) -> None:
        divergence = result.first_divergence
        assert divergence is not None
        super().__init__(
            f"session {result.session_id} diverged at seq {divergence.seq}: {divergence.reason}"
        )
        self.result = result


def agent_for(
    started: SessionStarted,
    session_id: str,
    override: str | Agent | None,
    trust: TrustList | None = None,
    *,
    where: str | None = None,
) -> Agent:
    """The agent to replay a session with: the override, else the recorded reference.

    A recorded reference runs only when ``trust`` (default: `TrustList.discover`) allows
    it; an override runs as given. ``where`` names the session in messages (default
    ``session ID``).

    Raises:
        AgentLoadError: neither is there, or the reference cannot be built.
        UntrustedReferenceError: only the recorded reference is there, and it is not
            trusted.
    """
    if isinstance(override, Agent):
        return override
    trust = trust or TrustList.discover()
    reference = trust.choose(started.agent, override, where=where or f"session {session_id}")
    trust.activate()
    seed = started.metadata.get("seed")
    return load_agent(reference, **({"seed": seed} if isinstance(seed, int) else {}))


def load_recording(journal: Journal, session_id: str) -> tuple[list[RecordedEvent], SessionStarted]:
    """A session's events and its ``session_started``, checked to be a whole recording.

    Raises:
        SessionNotFoundError: no such session.
        InvalidInputError: seq 0 is not ``session_started``, or a seq is missing (a journal
            altered outside agent-journal: ``verify`` says more).
    """
    recorded = list(journal.events(session_id))
    if not recorded:
        raise SessionNotFoundError(f"session {session_id}: not in {journal.target}")
    for seq, item in enumerate(recorded):
        if item.seq != seq:
            raise InvalidInputError(
                f"session {session_id}: seq {seq} is missing in {journal.target}; run verify"
            )
    started = recorded[0].event
    if not isinstance(started, SessionStarted):
        raise InvalidInputError(
            f"session {session_id}: seq 0 is {started.type}, not session_started"
        )
    return recorded, started


def free_session_id(journal: Journal, base: str, suffix: str) -> str:
    """The first ``<base>.<suffix>-<n>`` not in ``journal`` (ids stay within 128 chars)."""
    stem = base[: 128 - len(suffix) - 8]
    n = 1
    while journal.summary(f"{stem}.{suffix}-{n}") is not None:
        n += 1
    return f"{stem}.{suffix}-{n}"


@contextmanager
def replay_target(journal: Journal, save: bool) -> Iterator[Journal]:
    """The journal a replay writes to: ``journal`` when the replay is saved, else a scratch one."""
    target = journal if save else Journal.open(":memory:")
    try:
        yield target
    finally:
        if target is not journal:
            target.close()


def _complete(events: Sequence[RecordedEvent]) -> bool:
    return bool(events) and isinstance(events[-1].event, (AgentCompleted, AgentHalted))


def judge(
    recorded: Sequence[RecordedEvent],
    replayed: Sequence[RecordedEvent],
    *,
    replay_id: str,
    saved: bool,
    agent: str | None,
    rules: NormalizationRules,
    error: str | None,
    exhausted: bool,
    tools: RecordedTools,
) -> ReplayResult:
    """Compare a replay with its recording and say how it went (shared by every replay).

    Besides `compare`, a complete recording whose replay called a tool the recording never
    ran diverges at the replay's last event.
    """
    divergence = compare(recorded, replayed, rules, error=error, exhausted=exhausted)
    if divergence is None and tools.unrecorded and _complete(recorded):
        # (past the end of a cut recording every call is unrecorded, and that is fine)
        call = tools.unrecorded[0]
        divergence = Divergence(
            seq=len(replayed) - 1,
            reason=f"the code called {call.tool}({call.args}), which the recording never ran",
            expected=None,
            actual=None,
        )
    return ReplayResult(
        session_id=recorded[0].session_id,
        replay_session_id=replay_id,
        saved=saved,
        agent=agent,
        verdict="identical" if divergence is None else "diverged",
        first_divergence=divergence,
        recorded_events=len(recorded),
        replayed_events=len(replayed),
        recording_complete=_complete(recorded),
        unrecorded_calls=tuple(tools.unrecorded),
        live_differences=tuple(tools.live_differences),
    )


class Replayer:
    """Re-runs recorded sessions with the current code.

    Args:
        agent: the agent (or ``module:factory``) to run instead of the recorded reference.
        live_tools: ``True`` to run every tool for real, or the names of tools to run live;
            by default every tool result comes from the recording (no side effects).
        save: store the replay in the journal as a new session with ``replay_of``.
        rules: what counts as volatile; see `replay.normalize`.
        trust: which recorded references may run (default: `TrustList.discover` from the
            current folder when a replay starts); ``agent`` runs whatever it says.
    """

    def __init__(
        self,
        *,
        agent: str | Agent | None = None,
        live_tools: bool | Iterable[str] = False,
        save: bool = False,
        rules: NormalizationRules = DEFAULT_RULES,
        trust: TrustList | None = None,
    ) -> None:
        self.agent = agent
        self.trust = trust
        self.live: bool | frozenset[str] = (
            live_tools if isinstance(live_tools, bool) else frozenset(live_tools)
        )
        self.save = save
        self.rules = rules

    def replay(
        self, journal: Journal, session_id: str, *, source: str | None = None
    ) -> ReplayResult:
        """Replay one session of ``journal`` and compare it with its recording.

        ``source`` names where the session came from (a JSONL file) in error messages.
        """
        recorded, started = load_recording(journal, session_id)
        where = f"session {session_id}" if source is None else f"{source}: session {session_id}"
        if started.metadata.get("captured_with") in CAPTURED and not isinstance(self.agent, Agent):
            # journaled by journal.Recorder or an integration: re-run the loop or agent
            from .loop import replay_captured

            return replay_captured(
                journal,
                session_id,
                started,
                reference=self.agent,
                live=self.live,
                save=self.save,
                rules=self.rules,
                trust=self.trust,
                where=where,
            )
        agent = agent_for(started, session_id, self.agent, self.trust, where=where)
        rules = self.rules
        if started.agent is None:
            # An imported session records no agent, so its configuration is not compared.
            rules = rules.extended({"session_started": IMPORTED_SESSION_FIELDS})
        elif self.agent is not None and agent.reference != started.agent:
            rules = rules.extended({"session_started": ["agent"]})
        with replay_target(journal, self.save) as target:
            replay_id = free_session_id(target, session_id, "replay")
            llm = RecordedLLM(recorded)
            tools = RecordedTools(recorded, self.live)
            runtime = AgentRuntime(
                agent,
                target,
                llm=llm,
                tools=tools,
                clock=RecordedClock(recorded),
                ids=counter_ids(replay_id),
            )
            error = _run(runtime, replay_id, session_id, started, recorded)
            replayed = list(target.events(replay_id))
        return judge(
            recorded,
            replayed,
            replay_id=replay_id,
            saved=self.save,
            agent=agent.reference,
            rules=rules,
            error=error,
            exhausted=llm.exhausted,
            tools=tools,
        )

    def replay_or_raise(self, journal: Journal, session_id: str) -> ReplayResult:
        """Like `replay`, but raise `DivergenceError` when the replay diverges."""
        result = self.replay(journal, session_id)
        if not result.identical:
            raise DivergenceError(result)
        return result


def _is_greeting(recorded: Sequence[RecordedEvent], index: int) -> bool:
    """An ``agent_completed`` before any user input or model call: a greeting."""
    return all(
        isinstance(item.event, (SessionStarted, AgentCompleted)) for item in recorded[:index]
    )


def _ends_from_outside(recorded: Sequence[RecordedEvent], index: int) -> bool:
    """An ``agent_halted`` right after a turn's answer: the session was ended from outside."""
    return index > 0 and isinstance(recorded[index - 1].event, AgentCompleted)


def _run(
    runtime: AgentRuntime,
    replay_id: str,
    session_id: str,
    started: SessionStarted,
    recorded: Sequence[RecordedEvent],
) -> str | None:
    """Drive the replay; return the text of an exception the loop itself raised, if any."""

    async def drive() -> None:
        runtime.start(replay_id, metadata=started.metadata, replay_of=session_id)
        for index, item in enumerate(recorded):
            event = item.event
            after = recorded[index + 1].event if index + 1 < len(recorded) else None
            if isinstance(event, UserInput):
                if isinstance(after, AgentHalted) and after.rule != "error":
                    # The session was ended from outside before the agent answered.
                    runtime.stop(replay_id, after.rule, after.reason, last_input=event.text)
                    return
                result = await runtime.run_turn(replay_id, event.text)
                if result.status in ("halted", "failed"):
                    return
            elif isinstance(event, AgentCompleted) and _is_greeting(recorded, index):
                runtime.greet(replay_id, event.answer)
            elif isinstance(event, AgentHalted) and _ends_from_outside(recorded, index):
                runtime.stop(replay_id, event.rule, event.reason)

    try:
        asyncio.run(drive())
    except StoreError:
        raise  # the journal refused the replay's write: a fault of the store, not a divergence
    except Exception as error:  # the replay must report, never crash
        return f"{type(error).__name__}: {error}"
    return None


def compare(
    recorded: Sequence[RecordedEvent],
    replayed: Sequence[RecordedEvent],
    rules: NormalizationRules = DEFAULT_RULES,
    *,
    error: str | None = None,
    exhausted: bool = False,
) -> Divergence | None:
    """Return the first divergence between a recording and a replay, or None."""
    complete = _complete(recorded)
    for seq in range(max(len(recorded), len(replayed))):
        if seq >= len(recorded):
            if not complete:
                return None
            return Divergence(
                seq,
                "the replay went on past the end of the recording",
                None,
                record_of(replayed[seq]),
            )
        expected = record_of(recorded[seq])
        if seq >= len(replayed):
            reason = "the replay stopped before the recording's end"
            if error:
                reason += f": the loop raised {error}"
            return Divergence(seq, reason, expected, None)
        actual = record_of(replayed[seq])
        if fingerprint(expected, rules) == fingerprint(actual, rules):
            continue
        changes = field_changes(normalize(expected, rules), normalize(actual, rules))
        return Divergence(
            seq, _reason(expected, actual, changes, exhausted), expected, actual, changes
        )
    return None


def _reason(
    expected: dict[str, Any], actual: dict[str, Any], changes: tuple[Change, ...], exhausted: bool
) -> str:
    kind = actual.get("type")
    if kind == "agent_halted" and actual.get("rule") == "error":
        message = str(actual.get("reason", ""))
        if exhausted and "recording exhausted" in message:
            detail = message[message.index("recording exhausted") :]
            if expected.get("type") == "agent_halted":
                # The recorded run was stopped from outside (a harness, a rule of its own).
                return (
                    f"the recording stops here ({expected.get('rule')}), the code goes on: {detail}"
                )
            return detail
        return f"the agent's code raised: {message}"
    if kind != expected.get("type"):
        detail = ""
        if kind == "verification_failed":
            detail = f" ({actual.get('stage')}: {actual.get('message')})"
        elif kind == "agent_halted":
            detail = f" ({actual.get('rule')}: {actual.get('reason')})"
        return f"expected {expected.get('type')}, got {kind}{detail}"
    paths = ", ".join(change.path for change in changes[:5])
    return f"{kind} differs in {paths}"
