"""Import ATIF trajectories (Harbor's Agent Trajectory Interchange Format, v1.7 and v1.8).

Each trajectory of a file, read and validated by `journal.formats.atif_read`, becomes one
session:

* the root and its leading ``system`` steps → ``session_started``: the steps' text as the
  system prompt, ``agent.model_name`` as the model, ``agent.tool_definitions`` (OpenAI
  style) as tool specs, the root ``extra`` as metadata plus ``imported_from: "atif"`` and
  ``atif`` (the agent's name and version, the trajectory id, notes, final metrics, the
  subagent references);
* a ``user`` step → ``user_input``;
* an ``agent`` step → ``action_proposed`` (its message, reasoning, tool calls, model and
  metrics), then one outcome per observation result: ``action_committed`` with the content
  as result, or ``action_failed`` (kind ``business``) when the result's ``extra`` says
  ``is_error: true``; a step without tool calls then ``agent_completed``; an agent step
  with ``llm_call_count: 0`` and no calls (a deterministic reply) is ``agent_completed``
  alone;
* a later ``system`` step's observation results → outcomes of the calls they answer;
* an embedded subagent (``subagent_trajectories``) → a session of its own, id
  ``PARENT:TRAJECTORY_ID``; the reference stays on the parent (``atif.subagents``: the call,
  the step, the ids and path) and the child names its parent (``atif.parent``).

A step's ``extra.agent_journal.events`` (what `journal.formats.atif_export` writes for the
facts that have no ATIF field) corrects the events so mapped, so a round trip of this
project's own sessions gives the same events. Steps without times get synthetic ones (the
epoch plus one second per event); ids come from the trajectory (``session_id``, else
``trajectory_id``, else the file name), so importing again is a no-op. What has no event is
counted in the report, never guessed.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..canonical import check_json, format_ts, prefix_hash, valid_session_id
from ..errors import InvalidEventError, InvalidInputError
from ..events import (
    EVENT_ADAPTER,
    ActionCommitted,
    ActionFailed,
    ActionProposed,
    AgentCompleted,
    AgentConfig,
    AgentEvent,
    SessionStarted,
    ToolCall,
    Usage,
    UserInput,
)
from .atif_read import OURS, documents, validate_trajectory
from .openai_import import EPOCH, ConvertedFile, ConvertedSession, Findings, _slug
from .openai_messages import content_text, tool_specs_of

__all__ = [
    "StandardRecords",
    "StepReader",
    "child_id",
    "convert_atif",
    "convert_atif_file",
    "map_trajectory",
    "record_of",
    "standard_records",
]


def record_of(event: AgentEvent, moment: datetime) -> dict[str, Any]:
    """An event's fields with its ``ts``: what a correction is a difference from."""
    return {**event.model_dump(mode="json"), "ts": format_ts(moment)}


def _moment(text: Any, where: str) -> datetime | None:
    """A step's or a correction's time in UTC (None: none given).

    Raises:
        InvalidInputError: not an ISO 8601 time, or one that has no UTC form here.
    """
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
        moment = moment.astimezone(UTC) if moment.tzinfo else moment.replace(tzinfo=UTC)
        format_ts(moment)
    except (AttributeError, TypeError, ValueError, OverflowError, InvalidEventError):
        raise InvalidInputError(f"{where}: timestamp {text!r:.40} is not a time") from None
    return moment


def _is_error(extra: Mapping[str, Any] | None) -> bool:
    return extra is not None and extra.get("is_error") is True


def _corrections(extra: Mapping[str, Any] | None, where: str) -> list[dict[str, Any]] | None:
    ours = (extra or {}).get(OURS)
    if ours is None:
        return None
    events = ours.get("events") if isinstance(ours, dict) else None
    if not isinstance(events, list) or not all(isinstance(item, dict) for item in events):
        raise InvalidInputError(f"{where}: extra.{OURS}.events is not a list of objects")
    return events


def _apply(
    records: list[dict[str, Any]], corrections: list[dict[str, Any]], where: str
) -> list[dict[str, Any]]:
    """The step's records as corrected: item i changes record i's fields or replaces it."""
    out = []
    for index, fix in enumerate(corrections):
        base = records[index] if index < len(records) else None
        if base is not None and fix.get("type", base["type"]) == base["type"]:
            out.append({**base, **fix})
        elif "type" in fix and "ts" in fix:
            out.append(fix)
        else:
            raise InvalidInputError(f"{where}: extra.{OURS}.events[{index}] has no type and ts")
    return out


def _event_of(record: dict[str, Any], where: str) -> tuple[AgentEvent, datetime]:
    fields = {key: value for key, value in record.items() if key != "ts"}
    try:
        event = EVENT_ADAPTER.validate_python(fields)
        moment = _moment(record.get("ts"), f"{where}: extra.{OURS}")
    except (ValidationError, ValueError, TypeError) as e:
        detail = e.errors()[0]["msg"] if isinstance(e, ValidationError) else str(e)
        raise InvalidInputError(f"{where}: extra.{OURS}: {detail}") from None
    if moment is None:
        raise InvalidInputError(f"{where}: extra.{OURS}: an event without ts")
    return event, moment


def _text(content: Any) -> tuple[str, list[str]]:
    """A message's or a result's text (text parts joined by newlines), and its other parts."""
    return content_text(
        [part.model_dump() for part in content] if isinstance(content, list) else content
    )


@dataclass
class StepReader:
    """Maps a trajectory's steps to events in order; see the module docstring for the rules.

    `journal.formats.atif_export` runs the same reader over the steps it writes, so what it
    records as corrections is exactly what this mapping does not give back.
    """

    model: str | None
    where: str
    unmapped: Findings = field(default_factory=Findings)
    clock: datetime = EPOCH
    started: bool = False
    calls: dict[str, ToolCall] = field(default_factory=dict)
    subagents: list[dict[str, Any]] = field(default_factory=list)
    kept: list[dict[str, Any]] = field(default_factory=list)
    tool_calls: int = 0
    failed_calls: int = 0

    def time(self, step: Any) -> datetime:
        """The step's time (kept from going back), or the previous one plus a second."""
        moment = _moment(step.timestamp, f"{self.where} step {step.step_id}")
        if moment is None:
            moment = self.clock + timedelta(seconds=1) if self.started else self.clock
        self.clock = max(moment, self.clock)
        self.started = True
        return self.clock

    def records(self, step: Any) -> list[dict[str, Any]]:
        """The records one step maps to, before its corrections."""
        at = f"{self.where} step {step.step_id}"
        moment = self.time(step)
        self.kept.extend(unread(step))
        events: list[AgentEvent] = []
        text, parts = _text(step.message)
        for part in parts:
            self.unmapped.add(f"content_part:{part}", at, "a content part that is not text")
        if step.source == "user":
            events.append(UserInput(text=text))
        elif step.source == "agent":
            events.extend(self.agent(step, text))
        outcomes = list(self.outcomes(step, at)) if step.observation is not None else []
        if len(events) == 2:  # a proposal without calls, then its answer: results between
            events[1:1] = outcomes
        else:
            events.extend(outcomes)
        if step.source == "system" and step.observation is None:
            if _corrections(step.extra, at) is None:
                self.unmapped.add("system_step", at, f"a system step mid-trajectory ({text!r:.60})")
        return [record_of(event, moment) for event in events]

    def agent(self, step: Any, text: str) -> list[AgentEvent]:
        """An agent step's proposal (and answer, when it calls no tool)."""
        if step.llm_call_count == 0 and not step.tool_calls:
            return [AgentCompleted(answer=text)]
        metrics = step.metrics
        calls = [
            ToolCall(call_id=call.tool_call_id, tool=call.function_name, args=call.arguments)
            for call in step.tool_calls or []
        ]
        for call in calls:
            self.calls[call.call_id] = call
        self.tool_calls += len(calls)
        proposal = ActionProposed(
            calls=calls,
            text=text or None,
            reasoning=step.reasoning_content,
            model=step.model_name or self.model,
            usage=Usage(
                input_tokens=(metrics and metrics.prompt_tokens) or 0,
                output_tokens=(metrics and metrics.completion_tokens) or 0,
                cached_tokens=(metrics and metrics.cached_tokens) or 0,
            ),
            cost=metrics.cost_usd if metrics is not None else None,
        )
        return [proposal] if calls else [proposal, AgentCompleted(answer=text)]

    def outcomes(self, step: Any, at: str) -> Iterator[AgentEvent]:
        """One outcome per observation result that answers a call."""
        for index, result in enumerate(step.observation.results):
            where = f"{at} result {index}"
            for ref in result.subagent_trajectory_ref or []:
                self.subagents.append(
                    {
                        "step": step.step_id,
                        "call_id": result.source_call_id,
                        **ref.model_dump(mode="json", exclude_none=True),
                    }
                )
            call = self.calls.get(result.source_call_id or "")
            text, parts = _text(result.content)
            for part in parts:
                self.unmapped.add(f"content_part:{part}", where, "a content part that is not text")
            if call is None:
                if not result.subagent_trajectory_ref:
                    self.unmapped.add(
                        "result_without_call",
                        where,
                        f"a result that answers no call ({result.source_call_id!r})",
                    )
                continue
            args = call.args if isinstance(call.args, dict) else {}
            if _is_error(result.extra):
                self.failed_calls += 1
                yield ActionFailed(
                    call_id=call.call_id, tool=call.tool, kind="business", message=text, args=args
                )
            else:
                yield ActionCommitted(call_id=call.call_id, tool=call.tool, args=args, result=text)


_READ = {
    "step": {
        "step_id",
        "timestamp",
        "source",
        "message",
        "model_name",
        "reasoning_content",
        "tool_calls",
        "observation",
        "metrics",
    },
    "tool_call": {"tool_call_id", "function_name", "arguments"},
    "result": {"source_call_id", "content", "subagent_trajectory_ref"},
    "metrics": {"prompt_tokens", "completion_tokens", "cached_tokens", "cost_usd"},
}
"""The fields of a step the events hold; `unread` keeps the others."""


def _rest(values: Mapping[str, Any], read: set[str]) -> dict[str, Any]:
    rest = {key: value for key, value in values.items() if key not in read}
    extra = rest.pop("extra", None)
    extra = {key: value for key, value in (extra or {}).items() if key != OURS}
    if extra:
        rest["extra"] = extra
    return rest


def unread(step: Any) -> list[dict[str, Any]]:
    """What the events of a step do not hold, by place: ``{"step", "path", "fields"}``.

    Kept in the session's ``atif.kept`` and put back in place by the export: the step's own
    ``extra`` and fields such as ``llm_call_count`` or ``reasoning_effort``, each tool
    call's and result's ``extra`` (a result's ``is_error`` is the outcome's type), metrics
    beyond the token counts and cost, and messages or contents given as parts.
    """
    data = step.model_dump(mode="json", exclude_none=True)
    found = []

    def keep(path: list[Any], fields: dict[str, Any]) -> None:
        if fields:
            found.append({"step": step.step_id, "path": path, "fields": fields})

    rest = _rest(data, _READ["step"])
    if step.llm_call_count == 0 and step.source == "agent" and not step.tool_calls:
        rest.pop("llm_call_count")
    if isinstance(data["message"], list):
        rest["message"] = data["message"]
    keep([], rest)
    for index, call in enumerate(data.get("tool_calls", [])):
        keep(["tool_calls", index], _rest(call, _READ["tool_call"]))
    for index, result in enumerate(data.get("observation", {}).get("results", [])):
        fields = _rest(result, _READ["result"])
        if isinstance(fields.get("extra"), dict) and fields["extra"].get("is_error") is True:
            fields["extra"] = {k: v for k, v in fields["extra"].items() if k != "is_error"}
            if not fields["extra"]:
                del fields["extra"]
        if isinstance(result.get("content"), list):
            fields["content"] = result["content"]
        keep(["observation", "results", index], fields)
    if "metrics" in data:
        keep(["metrics"], _rest(data["metrics"], _READ["metrics"]))
    return found


def _system_prompt(steps: Sequence[Any]) -> tuple[str, int]:
    """The leading system steps' text as one prompt, and how many steps that was."""
    texts = []
    first = 0
    while (
        first < len(steps)
        and steps[first].source == "system"
        and not steps[first].observation
        and OURS not in (steps[first].extra or {})  # an event of its own (atif_export)
    ):
        texts.append(_text(steps[first].message)[0])
        first += 1
    return "\n\n".join(texts), first


def _started(trajectory: Any, prompt: str, metadata: dict[str, Any]) -> SessionStarted:
    agent = trajectory.agent
    specs, _ = tool_specs_of(agent.tool_definitions)
    try:
        digest = prefix_hash(prompt, agent.tool_definitions or [])
    except InvalidEventError:
        digest = prefix_hash(prompt, [])
    return SessionStarted(
        config=AgentConfig(tools=specs),
        system_prompt=prompt,
        system_prompt_hash=digest,
        model=agent.model_name,
        metadata=metadata,
    )


def _atif_facts(
    trajectory: Any, reader: StepReader, parent: dict[str, Any] | None, first: int
) -> dict[str, Any]:
    agent = trajectory.agent
    facts: dict[str, Any] = {
        "schema_version": trajectory.schema_version,
        "agent": agent.name,
        "agent_version": agent.version,
        "system_steps": first,  # leading system steps (the prompt): where the kept fields go
    }
    optional = {
        "trajectory_id": trajectory.trajectory_id,
        "session_id": trajectory.session_id,
        "notes": trajectory.notes,
        "continued_trajectory_ref": trajectory.continued_trajectory_ref,
        "agent_extra": agent.extra,
        "final_metrics": trajectory.final_metrics.model_dump(mode="json", exclude_none=True)
        if trajectory.final_metrics is not None
        else None,
        "subagents": reader.subagents or None,
        "kept": reader.kept or None,
        "parent": parent,
    }
    facts.update({key: value for key, value in optional.items() if value is not None})
    return facts


@dataclass
class _Mapped:
    session_id: str
    events: list[tuple[AgentEvent, datetime]]
    reader: StepReader
    children: list[_Mapped]
    steps: int


@dataclass
class StandardRecords:
    """What a trajectory maps to before its corrections: the root's record, then each step's.

    ``steps`` pairs each step after the leading system steps with its records.
    """

    root: dict[str, Any]
    steps: list[tuple[Any, list[dict[str, Any]]]]
    reader: StepReader


def standard_records(
    trajectory: Any, where: str, parent: dict[str, Any] | None = None
) -> StandardRecords:
    """Map a validated trajectory's own steps (not its subagents) by the rules alone."""
    reader = StepReader(trajectory.agent.model_name, where)
    prompt, first = _system_prompt(trajectory.steps)
    start = _moment(trajectory.steps[0].timestamp, where) if trajectory.steps else None
    reader.clock = start or EPOCH
    for step in trajectory.steps[:first]:
        reader.kept.extend(unread(step))
    steps = [(step, reader.records(step)) for step in trajectory.steps[first:]]
    extra = {key: value for key, value in (trajectory.extra or {}).items() if key != OURS}
    metadata = {
        **extra,
        "imported_from": "atif",
        "atif": _atif_facts(trajectory, reader, parent, first),
    }
    root = record_of(_started(trajectory, prompt, metadata), start or EPOCH)
    return StandardRecords(root, steps, reader)


def _parent_of(reader: StepReader, session_id: str, trajectory_id: str | None) -> dict[str, Any]:
    call = next(
        (
            ref.get("call_id")
            for ref in reader.subagents
            if ref.get("trajectory_id") == trajectory_id
        ),
        None,
    )
    return {"session_id": session_id, "call_id": call}


def map_trajectory(
    trajectory: Any, session_id: str, where: str, parent: dict[str, Any] | None = None
) -> _Mapped:
    """Map one validated trajectory and its embedded subagents to events (nothing written)."""
    standard = standard_records(trajectory, where, parent)
    events: list[tuple[AgentEvent, datetime]] = []
    root = standard.root
    corrections = _corrections(trajectory.extra, where)
    if corrections is not None:
        if len(corrections) != 1:
            raise InvalidInputError(f"{where}: extra.{OURS}.events of the root is not one event")
        root = _apply([root], corrections, where)[0]
    events.append(_event_of(root, where))
    for step, records in standard.steps:
        at = f"{where} step {step.step_id}"
        corrections = _corrections(step.extra, at)
        if corrections is not None:
            records = _apply(records, corrections, at)
        events.extend(_event_of(record, at) for record in records)
    children = [
        map_trajectory(
            sub,
            child_id(session_id, sub.trajectory_id),
            f"{where} subagent {sub.trajectory_id}",
            _parent_of(standard.reader, session_id, sub.trajectory_id),
        )
        for sub in trajectory.subagent_trajectories or []
    ]
    return _Mapped(session_id, events, standard.reader, children, len(trajectory.steps))


def child_id(parent: str, trajectory_id: str) -> str:
    """The session id of an embedded subagent: ``PARENT:TRAJECTORY_ID`` (made valid)."""
    child = f"{parent}:{re.sub(r'[^A-Za-z0-9_.:-]', '_', trajectory_id)}"
    if valid_session_id(child):
        return child
    digest = hashlib.sha256(trajectory_id.encode()).hexdigest()[:16]
    return f"{parent[:100]}:{digest}"


def _session_id(trajectory: Any, fallback: str, notes: Findings, where: str) -> str:
    for key in ("session_id", "trajectory_id"):
        value = getattr(trajectory, key)
        if value is None:
            continue
        if valid_session_id(value):
            return str(value)
        notes.add("invalid_session_id", where, f"{key}={value!r:.60} is not a session id")
    return fallback


def _flatten(mapped: _Mapped) -> Iterator[_Mapped]:
    yield mapped
    for child in mapped.children:
        yield from _flatten(child)


def convert_atif_file(path: str | Path) -> ConvertedFile:
    """Read, validate and map one ATIF file (nothing written).

    Raises:
        InvalidInputError: malformed input: bad JSON, a version not read, a trajectory the
            `atif` models refuse, an event that cannot be stored (one line: file[:line],
            the step and the field).
    """
    converted = ConvertedFile(str(path), [], Findings(), Findings())
    seen: dict[str, str] = {}
    found = list(documents(path))
    for index, (where, document) in enumerate(found):
        trajectory = validate_trajectory(document, where)
        fallback = _slug(str(path)) + (f"-{index}" if len(found) > 1 else "")
        session_id = _session_id(trajectory, fallback, converted.notes, where)
        for mapped in _flatten(map_trajectory(trajectory, session_id, where)):
            if mapped.session_id in seen:
                other = seen[mapped.session_id]
                raise InvalidInputError(
                    f"{where}: session id {mapped.session_id!r} is used by {other} too"
                )
            seen[mapped.session_id] = where
            session = ConvertedSession(mapped.session_id, where, mapped.events)
            for at, record in session.records():
                try:
                    check_json(record)
                except InvalidEventError as e:
                    raise InvalidInputError(f"{at}: {e}") from e
            converted.sessions.append(session)
            converted.unmapped.merge(mapped.reader.unmapped)
            converted.messages += mapped.steps
            converted.tool_calls += mapped.reader.tool_calls
            converted.failed_calls += mapped.reader.failed_calls
    return converted


def convert_atif(paths: Sequence[str | Path]) -> list[ConvertedFile]:
    """Read and map every ATIF file before anything is written (see `convert_atif_file`)."""
    return [convert_atif_file(path) for path in paths]
