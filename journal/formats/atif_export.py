"""Export sessions as ATIF trajectories (Harbor's Agent Trajectory Interchange Format, v1.8).

One trajectory per session, validated with the `atif` package's models before it is
written. The events become steps as `journal.formats.atif_import` reads them back:

* ``session_started`` → the root (``session_id``, ``trajectory_id``, ``agent``: the
  agent reference or ``agent-journal``, the code version, the model, the tools as OpenAI
  function definitions; ``extra``: the metadata; ``final_metrics``: the token and cost
  totals) and, when there is one, a ``system`` step with the system prompt;
* ``user_input`` → a ``user`` step;
* ``action_proposed`` → an ``agent`` step (message, reasoning, tool calls, model,
  ``metrics``), whose ``observation`` holds the outcomes that follow it for its calls:
  the result as text, or the failure's message with ``extra: {"is_error": true}``; the
  ``agent_completed`` right after a proposal without calls is that step's message;
* an ``agent_completed`` that follows no such proposal (a greeting) → an ``agent`` step
  with ``llm_call_count: 0`` (no model call);
* an outcome that follows something else → a ``system`` step whose observation answers
  the earlier call;
* what ATIF has no step for (``model_call_failed``, the gate's verdicts, repairs, breakers,
  fallbacks, compactions, ``agent_halted``) → a ``system`` step whose message says what
  happened.

What the steps cannot say (event times finer than a step, request and response bodies,
latencies, failure kinds and exceptions, and whole events of the kinds above) is kept in
each step's ``extra.agent_journal.events`` as the difference between the event and what
the import maps the step to; the import applies it, so a round trip gives the same events,
hashes and all. A consumer that knows nothing of it reads a plain, valid trajectory.
Sessions imported from ATIF keep their subagents: the references go back on the results
and the subagents' sessions are embedded again (``subagent_trajectories``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from ..events import (
    ActionCommitted,
    ActionFailed,
    ActionProposed,
    AgentCompleted,
    AgentHalted,
    CircuitOpened,
    ContextCompacted,
    FallbackInvoked,
    ModelCallFailed,
    RepairApplied,
    SessionStarted,
    UserInput,
    VerificationFailed,
)
from ..records import RecordedEvent
from ..store import Journal
from .atif_import import child_id, standard_records
from .atif_read import OURS, validate_trajectory
from .otlp import _package_version  # the one place that reads it

__all__ = ["SCHEMA_VERSION", "atif_json", "atif_trajectory"]

SCHEMA_VERSION = "ATIF-v1.8"
"""The version written."""


def _record(item: RecordedEvent) -> dict[str, Any]:
    return {**item.event.model_dump(mode="json"), "ts": item.ts}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else orjson.dumps(value).decode()


def _same(a: Any, b: Any) -> bool:
    return orjson.dumps(a, option=orjson.OPT_SORT_KEYS) == orjson.dumps(
        b, option=orjson.OPT_SORT_KEYS
    )


def _difference(
    original: list[dict[str, Any]], standard: list[dict[str, Any]]
) -> list[dict[str, Any]] | None:
    """The corrections that turn ``standard`` into ``original`` (None: none needed)."""
    if _same(original, standard):
        return None
    out = []
    for index, record in enumerate(original):
        base = standard[index] if index < len(standard) else None
        if base is not None and base["type"] == record["type"]:
            out.append({k: v for k, v in record.items() if not _same(base.get(k), v)})
        else:
            out.append(record)
    return out


def _summary(event: Any) -> str:
    """The message of a system step for an event ATIF has no step for."""
    match event:
        case ModelCallFailed():
            return f"model call failed: {event.message}"
        case AgentHalted():
            return f"agent halted ({event.rule}): {event.reason}"
        case VerificationFailed():
            return f"{event.tool} call {event.call_id} refused ({event.stage}): {event.message}"
        case RepairApplied():
            return f"repair ({event.level}): {event.detail}"
        case CircuitOpened():
            return f"circuit opened for {event.tool} after {event.failures} failures"
        case FallbackInvoked():
            return f"fallback {event.fallback} for {event.tool}"
        case ContextCompacted():
            return f"context compacted (seq {event.from_seq}..{event.to_seq}): {event.summary}"
        case _:
            return str(event.type)


class _Steps:
    """Groups a session's events (after ``session_started``) into ATIF steps."""

    def __init__(self, refs: Sequence[dict[str, Any]]) -> None:
        self.steps: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
        self.open: set[str] = set()  # the open agent step's unanswered call ids
        self.answerable = False  # the last step is a proposal without calls, unanswered
        self.refs = refs

    def new(self, step: dict[str, Any], record: dict[str, Any]) -> None:
        step = {"step_id": len(self.steps) + 1, "timestamp": record["ts"], **step}
        self.steps.append((step, [record]))
        self.open = set()
        self.answerable = False

    def result(self, event: ActionCommitted | ActionFailed) -> dict[str, Any]:
        result: dict[str, Any] = {"source_call_id": event.call_id}
        if isinstance(event, ActionFailed):
            result["content"] = event.message
            result["extra"] = {"is_error": True}
        else:
            result["content"] = _text(event.result)
        refs = [
            {k: v for k, v in ref.items() if k not in ("step", "call_id")}
            for ref in self.refs
            if ref.get("call_id") == event.call_id
        ]
        if refs:
            result["subagent_trajectory_ref"] = refs
        return result

    def add(self, item: RecordedEvent) -> None:
        event, record = item.event, _record(item)
        match event:
            case UserInput():
                self.new({"source": "user", "message": event.text}, record)
            case ActionProposed():
                self.new(_agent_step(event), record)
                self.open = {call.call_id for call in event.calls}
                self.answerable = not event.calls
            case ActionCommitted() | ActionFailed() if event.call_id in self.open:
                step, records = self.steps[-1]
                step.setdefault("observation", {"results": []})["results"].append(
                    self.result(event)
                )
                records.append(record)
                self.open.discard(event.call_id)
            case ActionCommitted() | ActionFailed():
                self.new(
                    {
                        "source": "system",
                        "message": f"result of {event.tool} call {event.call_id}",
                        "observation": {"results": [self.result(event)]},
                    },
                    record,
                )
            case AgentCompleted() if self.answerable:
                self.steps[-1][1].append(record)
                self.answerable = False
            case AgentCompleted():
                self.new({"source": "agent", "message": event.answer, "llm_call_count": 0}, record)
            case _:
                self.new({"source": "system", "message": _summary(event)}, record)


def _agent_step(event: ActionProposed) -> dict[str, Any]:
    step: dict[str, Any] = {"source": "agent", "message": event.text or ""}
    if event.model is not None:
        step["model_name"] = event.model
    if event.reasoning is not None:
        step["reasoning_content"] = event.reasoning
    if event.calls:
        step["tool_calls"] = [
            {
                "tool_call_id": call.call_id,
                "function_name": call.tool,
                "arguments": call.args if isinstance(call.args, dict) else {},
            }
            for call in event.calls
        ]
    usage = event.usage
    metrics = {
        "prompt_tokens": usage.input_tokens or None,
        "completion_tokens": usage.output_tokens or None,
        "cached_tokens": usage.cached_tokens or None,
        "cost_usd": event.cost,
    }
    if any(value is not None for value in metrics.values()):
        step["metrics"] = {k: v for k, v in metrics.items() if v is not None}
    return step


def _final_metrics(events: Sequence[RecordedEvent]) -> dict[str, Any]:
    proposals = [item.event for item in events if isinstance(item.event, ActionProposed)]
    costs = [p.cost for p in proposals if p.cost is not None]
    totals: dict[str, Any] = {
        "total_prompt_tokens": sum(p.usage.input_tokens for p in proposals),
        "total_completion_tokens": sum(p.usage.output_tokens for p in proposals),
        "total_cached_tokens": sum(p.usage.cached_tokens for p in proposals),
        "total_steps": 0,
    }
    if costs:
        totals["total_cost_usd"] = sum(costs)
    return totals


def _extra(metadata: dict[str, Any]) -> dict[str, Any]:
    """The root's ``extra``: the metadata, less what an ATIF import wrote (the root says it)."""
    if metadata.get("imported_from") != "atif":
        return dict(metadata)
    return {k: v for k, v in metadata.items() if k not in ("imported_from", "atif")}


def _root(
    started: SessionStarted, session_id: str, events: Sequence[RecordedEvent]
) -> dict[str, Any]:
    facts = started.metadata.get("atif")
    facts = facts if isinstance(facts, dict) else {}
    agent: dict[str, Any] = {
        "name": str(facts.get("agent") or started.agent or "agent-journal"),
        "version": str(facts.get("agent_version") or started.code_version or _package_version()),
    }
    if started.model is not None:
        agent["model_name"] = started.model
    if started.config.tools:
        agent["tool_definitions"] = [
            {
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                },
            }
            for tool in started.config.tools
        ]
    if isinstance(facts.get("agent_extra"), dict):
        agent["extra"] = facts["agent_extra"]
    # the trajectory's own session id when it came from ATIF (a subagent's is its run's)
    run = facts.get("session_id") if facts else session_id
    root: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        **({"session_id": run} if isinstance(run, str) else {}),
        "trajectory_id": str(facts.get("trajectory_id") or session_id),
        "agent": agent,
        "steps": [],
        "final_metrics": facts.get("final_metrics") or _final_metrics(events),
        "extra": _extra(started.metadata),
    }
    for key in ("notes", "continued_trajectory_ref"):
        if isinstance(facts.get(key), str):
            root[key] = facts[key]
    return root


def atif_trajectory(
    journal: Journal,
    session_id: str,
    *,
    trajectory_id: str | None = None,
    parent: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One session (and the subagent sessions it references) as an ATIF document.

    The document is validated with the `atif` models; the corrections in its ``extra``
    make `journal.formats.atif_import` give back the session's events exactly.
    """
    events = list(journal.events(journal.require(session_id).session_id))
    started = events[0].event
    assert isinstance(started, SessionStarted)
    facts = started.metadata.get("atif")
    refs = facts.get("subagents") if isinstance(facts, dict) else None
    refs = [ref for ref in refs if isinstance(ref, dict)] if isinstance(refs, list) else []
    root = _root(started, session_id, events)
    if trajectory_id is not None:
        root["trajectory_id"] = trajectory_id
    steps = _Steps(refs)
    if started.system_prompt:
        steps.new({"source": "system", "message": started.system_prompt}, _record(events[0]))
        steps.steps[-1][1].clear()
    for item in events[1:]:
        steps.add(item)
    root["steps"] = [step for step, _ in steps.steps]
    kept = facts.get("kept") if isinstance(facts, dict) else None
    first = facts.get("system_steps") if isinstance(facts, dict) else None
    _put_back(
        root["steps"],
        kept if isinstance(kept, list) else [],
        first if isinstance(first, int) else 0,
        1 if started.system_prompt else 0,
    )
    root["final_metrics"]["total_steps"] = root["final_metrics"].get("total_steps") or len(
        root["steps"]
    )
    children = []
    for ref in refs:
        sub = ref.get("trajectory_id")
        if isinstance(sub, str) and journal.summary(child_id(session_id, sub)) is not None:
            children.append(
                atif_trajectory(
                    journal,
                    child_id(session_id, sub),
                    trajectory_id=sub,
                    parent={"session_id": session_id, "call_id": ref.get("call_id")},
                )
            )
    if children:
        root["subagent_trajectories"] = children
    _correct(root, steps, _record(events[0]), session_id, parent)
    validate_trajectory(root, f"session {session_id}")
    return root


def _put_back(steps: list[dict[str, Any]], kept: Sequence[Any], first: int, now: int) -> None:
    """Put the fields an import kept (`journal.formats.atif_import.unread`) back in place.

    The producer's ``first`` leading system steps are ``now`` here (one prompt step, or
    none): the steps after them move by the difference, and the kept fields of the prompt's
    steps go back only when it was one step.
    """
    by_id = {step["step_id"]: step for step in steps}
    for item in kept:
        if not isinstance(item, dict) or not isinstance(item.get("fields"), dict):
            continue
        step = item.get("step")
        if not isinstance(step, int) or (step <= first and (first, now) != (1, 1)):
            continue
        target: Any = by_id.get(step + now - first if step > first else step)
        for part in item.get("path") or []:
            try:
                target = target[part]
            except (KeyError, IndexError, TypeError):
                target = None
                break
        if not isinstance(target, dict):
            continue  # the step is not there as it was: its events hold what they hold
        for key, value in item["fields"].items():
            if key == "extra" and isinstance(value, dict):
                target["extra"] = {**value, **(target.get("extra") or {})}
            else:
                target[key] = value


def _correct(
    root: dict[str, Any],
    steps: _Steps,
    started: dict[str, Any],
    session_id: str,
    parent: dict[str, Any] | None,
) -> None:
    """Write into the document's extras what the import's mapping would not give back."""
    plain = validate_trajectory({**root, "subagent_trajectories": None}, f"session {session_id}")
    standard = standard_records(plain, f"session {session_id}", parent)
    first = len(root["steps"]) - len(standard.steps)
    for (step, original), (_, mapped) in zip(steps.steps[first:], standard.steps, strict=True):
        fix = _difference(original, mapped)
        if fix is not None:
            step["extra"] = {**(step.get("extra") or {}), OURS: {"events": fix}}
    fix = _difference([started], [standard.root])
    if fix is not None:
        root["extra"] = {**root["extra"], OURS: {"events": fix}}


def atif_json(documents: Sequence[dict[str, Any]]) -> bytes:
    """One trajectory as a JSON document, several as JSON Lines (one per line)."""
    if len(documents) == 1:
        return orjson.dumps(documents[0], option=orjson.OPT_INDENT_2)
    return b"\n".join(orjson.dumps(document) for document in documents)
