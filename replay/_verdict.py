"""The verdict of a replay: the result types and the judging every replay path shares.

Every way of replaying a session (the agentloop runtime, a hand-written loop, a framework
integration) ends the same way: what the code journaled now is compared with the recording
by `judge`, event by event after normalisation (`replay.normalize`), and the outcome is a
`ReplayResult`, identical or with its first `Divergence`. This module knows nothing of how
a replay ran: the facts it needs (an exception the driver caught, where the recording ran
out, the calls the recording never ran, live results that differ) are handed to it as data.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from capture import REPLAY_STOPPED
from journal import (
    ActionProposed,
    AgentCompleted,
    AgentHalted,
    JournalError,
    ModelCallFailed,
    RecordedEvent,
    SessionStarted,
    predated_settings,
    predates,
)

from .diff import Change, behaviour_rules, config_changes, field_changes
from .normalize import DEFAULT_RULES, NormalizationRules, fingerprint, normalize, record_of

__all__ = [
    "Divergence",
    "DivergenceError",
    "Exhaustion",
    "LiveDifference",
    "ReplayResult",
    "Served",
    "UnrecordedCall",
    "compare",
    "configuration_divergence",
    "failure_named",
    "is_complete",
    "judge",
    "summary",
]


@dataclass(frozen=True)
class UnrecordedCall:
    """A tool call the replay made that the recording never ran."""

    tool: str
    args: dict[str, Any]

    @property
    def text(self) -> str:
        """The call as one line: its tool and its arguments as JSON (keys sorted)."""
        args = orjson.dumps(self.args, option=orjson.OPT_SORT_KEYS, default=repr).decode()
        return f"{self.tool}({args})"


@dataclass(frozen=True)
class LiveDifference:
    """A tool run live whose result differs from the recorded one."""

    tool: str
    args: dict[str, Any]
    recorded: Any
    live: Any
    recorded_seq: int


@dataclass(frozen=True)
class Exhaustion:
    """The code asked the model for more than the recording holds, at ``seq``."""

    seq: int
    reason: str


@dataclass(frozen=True)
class Served:
    """What a replay served from the recording, and what ran for real: what it proved.

    An "identical" verdict says the code took the same path on the same inputs; these say
    which inputs were the recording's. A tool whose outcomes were served did not run: a
    change inside it cannot show (``--live-tool`` runs it, or declare it ``pure``).
    """

    model_replies: int = 0
    """Recorded model outputs served to the code."""
    failed_calls: int = 0
    """Recorded failed model calls (a 429, a 500) raised again from the same call."""
    tool_results: int = 0
    """Recorded tool outcomes served."""
    not_run: tuple[str, ...] = ()
    """The tools whose outcomes were served (their code did not run), sorted."""
    ran: tuple[str, ...] = ()
    """The tools that ran for real and were compared (named live, or pure), sorted."""

    @property
    def line(self) -> str:
        """One line: ``2 model replies and 3 tool results served from the recording (...)``."""
        parts = [_count(self.model_replies, "model reply", "model replies")]
        if self.tool_results or not self.ran:
            parts.append(_count(self.tool_results, "tool result", "tool results"))
        line = " and ".join(parts) + " served from the recording"
        if self.not_run:
            names = _names(self.not_run)
            how = (
                f"--live-tool {self.not_run[0]}"
                if len(self.not_run) == 1
                else "--live-tool NAME runs one"
            )
            line += f" ({names} not run: {how})"
        if self.failed_calls:
            line += "; " + _count(self.failed_calls, "failed model call", "failed model calls")
            line += " raised again"
        if self.ran:
            line += f"; {_names(self.ran)} ran for real and compared"
        return line

    def as_json(self) -> dict[str, Any]:
        """The counts as a JSON object (``served`` in ``replay --json``)."""
        return {
            "model_replies": self.model_replies,
            "failed_calls": self.failed_calls,
            "tool_results": self.tool_results,
            "not_run": list(self.not_run),
            "ran": list(self.ran),
        }


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _names(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + f" and {names[-1]}"


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
    """The first event that differs: with another configuration, the ``session_started``
    at seq 0 (its ``changes`` are the configuration's); None only when identical."""
    behaviour_divergence: Divergence | None
    """The first event whose behaviour differs, the recorded replies served as recorded:
    the same as ``first_divergence`` when the configuration is the same."""
    recorded_events: int
    replayed_events: int
    recording_complete: bool
    unrecorded_calls: tuple[UnrecordedCall, ...] = ()
    live_differences: tuple[LiveDifference, ...] = ()
    config_changes: tuple[Change, ...] = ()
    """How the replay's configuration (prompt, tools, guardrails, model) differs from the
    recording's (the configuration part of ``first_divergence``)."""
    stopped_at: int | None = None
    """The seq where the replay stopped: it needed a model output, none recorded fitted
    its context, and no live model was there to answer (halt rule ``replay_stopped``)."""
    live_from: int | None = None
    """The seq from which a live model answered (the replay re-recorded from there)."""
    unsaved: str | None = None
    """Why a replay asked to be saved was not."""
    served: Served = Served()
    """What the replay served from the recording and what ran for real."""

    @property
    def identical(self) -> bool:
        """True when the replay matched the recording, configuration and behaviour."""
        return self.verdict == "identical"

    @property
    def summary(self) -> str:
        """One line: ``identical (N events)``, else the configuration change and the first
        divergence."""
        if self.identical:
            return f"identical ({self.recorded_events} events: {self.served.line})"
        return summary(self)

    def as_json(self) -> dict[str, Any]:
        """The result as a JSON object (the shape of ``replay --json``)."""
        return {
            "verdict": self.verdict,
            "first_divergence": None
            if self.first_divergence is None
            else self.first_divergence.as_json(),
            "behaviour_divergence": None
            if self.behaviour_divergence is None
            else self.behaviour_divergence.as_json(),
            "config_changes": [change.as_json() for change in self.config_changes],
            "session_id": self.session_id,
            "replay_session_id": self.replay_session_id,
            "saved": self.saved,
            "agent": self.agent,
            "recorded_events": self.recorded_events,
            "replayed_events": self.replayed_events,
            "recording_complete": self.recording_complete,
            "stopped_at": self.stopped_at,
            "live_from": self.live_from,
            "unsaved": self.unsaved,
            "served": self.served.as_json(),
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
        super().__init__(f"session {result.session_id} {summary(result)}")
        self.result = result


def summary(result: ReplayResult) -> str:
    """One line for a replay that diverged: the first divergence, then the behaviour's."""
    first, behaviour = result.first_divergence, result.behaviour_divergence
    if first is None:
        return "replayed identically"
    line = f"diverged at seq {first.seq}: {first.reason}"
    if behaviour is not None and behaviour != first:
        line += (
            f"; with the recorded replies, the behaviour diverged at seq {behaviour.seq}: "
            f"{behaviour.reason}"
        )
    return line


def configuration_divergence(
    expected: dict[str, Any],
    actual: dict[str, Any],
    changes: Sequence[Change],
    behaviour: Divergence | None = None,
) -> Divergence:
    """The divergence at seq 0 of two runs whose ``session_started`` configurations differ.

    ``changes`` are the configuration's (`replay.diff.config_changes`); ``behaviour`` is
    the behavioural divergence, whose changes join them when it is at seq 0 too.
    """
    paths = ", ".join(change.path for change in changes[:5])
    more = f" and {len(changes) - 5} more" if len(changes) > 5 else ""
    also: tuple[Change, ...] = ()
    if behaviour is not None and behaviour.seq == 0:
        also = behaviour.changes
    return Divergence(
        seq=0,
        reason=f"session_started: the configuration changed ({paths}{more})",
        expected=expected,
        actual=actual,
        changes=tuple(sorted((*changes, *also), key=lambda change: change.path)),
    )


def is_complete(events: Sequence[RecordedEvent]) -> bool:
    """Whether a recording ends with a terminal event (not cut off by a crash)."""
    return bool(events) and isinstance(events[-1].event, (AgentCompleted, AgentHalted))


def judge(
    recorded: Sequence[RecordedEvent],
    replayed: Sequence[RecordedEvent],
    *,
    replay_id: str,
    saved: bool,
    agent: str | None,
    rules: NormalizationRules,
    error: str | None = None,
    exhaustion: Exhaustion | None = None,
    unrecorded: Sequence[UnrecordedCall] = (),
    live_differences: Sequence[LiveDifference] = (),
    uncalled: Collection[int] = (),
    stopped_at: int | None = None,
    live_from: int | None = None,
    served: Served = Served(),
) -> ReplayResult:
    """Compare a replay with its recording and say how it went (shared by every replay).

    The configurations are compared by `replay.diff.config_changes`, the behaviour by
    `compare`: the first divergence is the ``session_started`` at seq 0 when the
    configurations differ (`configuration_divergence`), else the behaviour's. Besides, a
    complete recording whose replay called a tool the recording never ran diverges at the
    replay's last event. The guardrails a recording's
    ``session_started`` predates (`journal.predated_settings`) are not compared: a replay
    through the runtime runs with their recorded values, but a loop the runtime does not
    run (a recorder's, a framework's) records what it records today; nor are the client
    settings of a recording that predates them (`journal.predates`).

    Args:
        recorded: the recording.
        replayed: what the code journaled now.
        replay_id: the replay's session id.
        saved: whether the replay was kept in the journal.
        agent: the reference of what was replayed.
        rules: what counts as volatile.
        error: the one-line text of an exception that escaped the code, if any.
        exhaustion: where the code asked the model for more than was recorded, if it did.
        unrecorded: tool calls the recording never ran.
        live_differences: tools run live whose results differ from the recording.
        uncalled: the seqs of recorded outcomes of decorated tools (which only the
            capture's wrappers run) that no call of the replay asked for.
        stopped_at: where the replay stopped for want of a fitting recorded output.
        live_from: where a live model took over.
        served: what the replay served from the recording and what ran for real.
    """
    version = recorded[0].v if recorded else SessionStarted.VERSION
    predated = predated_settings(version)
    if predated:  # settings a recording predates: it cannot disagree about them
        paths = [f"config.guardrails.{name}" for name in predated]
        rules = rules.extended({"session_started": paths})
    if predates(version, "client_settings"):  # nor about the client's, before they were kept
        rules = rules.extended({"session_started": ["client_settings"]})
    changed_config = config_changes(
        record_of(recorded[0]), record_of(replayed[0]) if replayed else None, rules
    )
    divergence = compare(
        recorded,
        replayed,
        behaviour_rules(rules),
        error=error,
        exhaustion=exhaustion,
        uncalled=uncalled,
    )
    if divergence is None and unrecorded and is_complete(recorded):
        # (past the end of a cut recording every call is unrecorded, and that is fine)
        call = unrecorded[0]
        divergence = Divergence(
            seq=len(replayed) - 1,
            reason=f"the code called {call.text}, which the recording never ran",
            expected=None,
            actual=None,
        )
    first = divergence
    if changed_config:
        first = configuration_divergence(
            record_of(recorded[0]), record_of(replayed[0]), changed_config, divergence
        )
    return ReplayResult(
        session_id=recorded[0].session_id,
        replay_session_id=replay_id,
        saved=saved,
        agent=agent,
        verdict="identical" if first is None else "diverged",
        first_divergence=first,
        behaviour_divergence=divergence,
        recorded_events=len(recorded),
        replayed_events=len(replayed),
        recording_complete=is_complete(recorded),
        unrecorded_calls=tuple(unrecorded),
        live_differences=tuple(live_differences),
        config_changes=changed_config,
        stopped_at=stopped_at,
        live_from=live_from,
        served=served,
    )


def compare(
    recorded: Sequence[RecordedEvent],
    replayed: Sequence[RecordedEvent],
    rules: NormalizationRules = DEFAULT_RULES,
    *,
    error: str | None = None,
    exhaustion: Exhaustion | None = None,
    uncalled: Collection[int] = (),
) -> Divergence | None:
    """Return the first divergence between a recording and a replay, or None.

    ``uncalled`` are the seqs of recorded outcomes of decorated tools the replay's code
    never called: an outcome there that answers the same call without the tool diverges,
    even with the same value (another code path gave it).
    """
    complete = is_complete(recorded)
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
        uncalled_here = seq in uncalled and _answered_without_running(expected, actual)
        if fingerprint(expected, rules) == fingerprint(actual, rules) and not uncalled_here:
            continue
        changes = field_changes(normalize(expected, rules), normalize(actual, rules))
        ran_out = exhaustion if exhaustion is not None and exhaustion.seq == seq else None
        reason = _reason(expected, actual, changes, ran_out, _step_tools(replayed, seq))
        after = _after_a_failed_call(recorded, seq, expected, actual)
        if after is not None:
            reason = after
        if uncalled_here:
            reason = (
                f"the code answered {actual.get('call_id')} without calling "
                f"{expected.get('tool')}, which the recording ran here (the outcome is now "
                "what the code sent the model)"
                + (f"; {reason}" if changes else "; the value is the same")
            )
        return Divergence(seq, reason, expected, actual, changes)
    return None


def failure_named(event: ModelCallFailed) -> str:
    """A failed call as a verdict names it: its exception's class, and its status."""
    kind = str((event.error or {}).get("type", "")).rpartition(":")[2] or event.kind
    return f"{kind} ({event.status_code})" if event.status_code else kind


_MODEL_EVENTS = ("action_proposed", "model_call_failed")


def _what_it_does(record: dict[str, Any]) -> str:
    """What an event the code wrote does, in a few words (for a reason)."""
    kind = record.get("type")
    if kind == "agent_completed":
        return "answers (agent_completed)"
    if kind == "agent_halted":
        return f"halts ({record.get('rule')}: {record.get('reason')})"
    if kind in ("action_committed", "action_failed"):
        return f"calls {record.get('tool')} ({kind})"
    return f"writes {kind}"


def _after_a_failed_call(
    recorded: Sequence[RecordedEvent], seq: int, expected: dict[str, Any], actual: dict[str, Any]
) -> str | None:
    """The reason for a divergence right after a recorded failed model call, naming it.

    The recording called the model again (a retry) where the code now does something else,
    or went on without calling it (gave up, a fallback) where the code now calls it: the
    code's own handling of the failure changed. None when neither.
    """
    previous = recorded[seq - 1].event if seq > 0 else None
    if not isinstance(previous, ModelCallFailed):
        return None
    failure = failure_named(previous)
    if expected.get("type") in _MODEL_EVENTS and actual.get("type") not in _MODEL_EVENTS:
        return (
            f"the recording called the model again after {failure}; "
            f"the code now {_what_it_does(actual)}"
        )
    went_on = (
        f"the recording went on without the model after {failure} "
        f"(it wrote {expected.get('type')}); the code now calls it again"
    )
    if expected.get("type") not in _MODEL_EVENTS and actual.get("type") in _MODEL_EVENTS:
        return went_on
    if actual.get("type") == "agent_halted" and actual.get("rule") == REPLAY_STOPPED:
        return f"{went_on}: {actual.get('reason')}"
    return None


def _answered_without_running(expected: dict[str, Any], actual: dict[str, Any]) -> bool:
    """Whether ``actual`` answers the call ``expected`` did, where ``expected`` was a run of
    the tool (timed) that no call of the replay asked for.

    A result the recording took from a message (no tool of its own ran: no duration) does
    not count, nor one a tool ran for (a pure tool given other arguments: timed too).
    """
    outcomes = ("action_committed", "action_failed")
    return (
        expected.get("type") in outcomes
        and expected.get("duration_ms") is not None
        and actual.get("type") in outcomes
        and actual.get("duration_ms") is None
        and actual.get("call_id") == expected.get("call_id")
    )


def _step_tools(events: Sequence[RecordedEvent], seq: int) -> list[str]:
    """The tools of the model output before ``seq``, by position."""
    for item in reversed(events[:seq]):
        if isinstance(item.event, ActionProposed):
            return [call.tool for call in item.event.calls]
    return []


def _reason(
    expected: dict[str, Any],
    actual: dict[str, Any],
    changes: tuple[Change, ...],
    ran_out: Exhaustion | None,
    tools: Sequence[str] = (),
) -> str:
    kind = actual.get("type")
    if kind == "agent_halted" and ran_out is not None:
        if expected.get("type") == "agent_halted":
            # The recorded run was stopped from outside (a harness, a rule of its own).
            return (
                f"the recording stops here ({expected.get('rule')}), the code goes on: "
                f"{ran_out.reason}"
            )
        return ran_out.reason
    if kind == "agent_halted" and actual.get("rule") == "error":
        return f"the agent's code raised: {actual.get('reason', '')}"
    if kind == expected.get("type") == "agent_halted" and actual.get("rule") == REPLAY_STOPPED:
        return str(actual.get("reason", ""))  # why it stopped where the recording halted
    if kind != expected.get("type"):
        detail = ""
        if kind == "verification_failed":
            detail = f" ({actual.get('stage')}: {actual.get('message')})"
        elif kind == "agent_halted":
            rule, why = str(actual.get("rule")), str(actual.get("reason"))
            # a reason that starts with its rule's words ("replay stopped ...") names it already
            said = why.startswith(rule.replace("_", " "))
            detail = f" ({why})" if said else f" ({rule}: {why})"
        return f"expected {expected.get('type')}, got {kind}{detail}"
    if [change.path for change in changes] == ["ran_after"]:
        return _reordered(actual, tools)
    paths = ", ".join(change.path for change in changes[:5])
    return f"{kind} differs in {paths}"


def _reordered(actual: dict[str, Any], tools: Sequence[str]) -> str:
    """The reason for an outcome whose call ran after calls the recording ran it before.

    ``tools`` are those of the model output's calls, by position. Positions are counted
    from 0, as ``ran_after`` (shown beside the reason) counts them.
    """
    positions = actual.get("ran_after") or ()
    before = " and ".join(
        f"{position}" + (f" ({tools[position]})" if position < len(tools) else "")
        for position in positions
    )
    which, them = ("calls", "one of them") if len(positions) > 1 else ("call", "that call")
    return (
        f"the calls ran in another order: {actual.get('tool')} ({actual.get('call_id')}) "
        f"started after {which} {before} of its model output had finished (counted from 0, "
        f"as ran_after counts them); in the recording it ran before {them}"
    )
