"""A recorder for any agent loop: a few typed calls that journal the loop you already have.

Add five calls at the loop's natural points and its sessions are ordinary journals: they
show in ``sessions``, verify, export, diff, and replay (`replay.replay_loop`)::

    from journal import Journal, Recorder

    with Journal.open("agent-journal.db") as journal, Recorder(journal) as recorder:
        recorder.start(agent="app.bot:run", model="gpt-4.1", system_prompt=PROMPT, tools=SPECS)
        recorder.user_input(question)
        reply = recorder.model_output(call_model(messages))  # the whole output, with usage
        while reply.calls:
            for call in reply.calls:
                recorder.tool_result(call.call_id, run_tool(call.tool, call.args))
            reply = recorder.model_output(call_model(messages))
        recorder.final(reply.text or "")

What it guarantees:

* Order is checked before anything is written, and a call out of order raises
  `RecordingOrderError`: nothing before `start`, nothing after a halt, no model output
  after a turn's final answer until the next user input, and every tool result or failure
  must answer a call of a model output that is still waiting (a call id never proposed,
  or one answered already, is an error). Calls a loop leaves unanswered are allowed.
* Each call is exactly one ``Journal.append`` with ``expected_seq``: another writer on the
  same session is a `ConflictError` and nothing is lost or overwritten. The writes go
  through a `capture.output.Destination`: given a journal alone, the recorder
  fails open (a journal that cannot take a write sends the session to the spool beside it,
  and the loop goes on), unless it records a replay (``replay_of``), which fails closed.
  Give a `Destination` for redaction, tail sampling or a fail-closed recorder.
* As a context manager, an uncaught exception (an ``Exception``, not a
  ``KeyboardInterrupt``) is recorded as ``agent_halted`` with rule ``error`` and its
  one-line message, then re-raised; a session that ended already is left alone.

The state after each call is the fold of what was written (`journal.apply`, one event at
a time), so the recorder and every reader of the journal agree: the journal's own when it
folded the event as written (one fold, not two), else the recorder's.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, Protocol, Self, TypeGuard

from pydantic import JsonValue
from pydantic_core import PydanticSerializationError, to_jsonable_python

from journal import (
    CAPTURED_WITH_KEY,
    ActionCommitted,
    ActionFailed,
    ActionProposed,
    AgentCompleted,
    AgentConfig,
    AgentEvent,
    AgentHalted,
    Clock,
    FailureKind,
    Guardrails,
    HaltSession,
    InvalidEventError,
    Journal,
    JournalError,
    ModelCallFailed,
    RecordedEvent,
    RecordingOrderError,
    ReplayedFailure,
    SessionNotFoundError,
    SessionStarted,
    SessionState,
    ToolCall,
    ToolSpec,
    Usage,
    UserInput,
    VerificationFailed,
    VerificationStage,
    apply,
    check_json,
    describe_error,
    failure_kind,
    failure_of,
    format_ts,
    one_line,
    ordered_text,
    prefix_hash,
    result_record,
    status_code_of,
)
from journal.formats import tool_specs_of

from .exceptions import exception_record, raised_at
from .order import RecordedOrder
from .output import Destination

__all__ = ["ModelOutput", "Recorder"]


_NO_CALLS: tuple[ToolCall, ...] = ()


class ModelOutput(Protocol):
    """Anything holding a model's whole output, as `Recorder.model_output` takes it.

    An ``agentloop.ModelResponse``, an ``ActionProposed``, or your own object with these
    attributes.
    """

    @property
    def calls(self) -> Sequence[ToolCall]:
        """The tool calls, arguments as emitted."""
        ...

    @property
    def text(self) -> str | None:
        """The text of the reply."""
        ...

    @property
    def reasoning(self) -> str | None:
        """The reasoning the model showed, if any."""
        ...

    @property
    def model(self) -> str | None:
        """The model that answered."""
        ...

    @property
    def usage(self) -> Usage:
        """Token counts."""
        ...

    @property
    def latency_ms(self) -> float | None:
        """How long the call took."""
        ...

    @property
    def cost(self) -> float | None:
        """What the call cost."""
        ...


def _recordable(error: BaseException | str) -> TypeGuard[BaseException]:
    """Whether a failure is an exception to keep the record of.

    A `ReplayedFailure` stands in for a failure recorded without one: it gets none either.
    """
    return isinstance(error, BaseException) and not isinstance(error, ReplayedFailure)


def _described(error: BaseException, record: Mapping[str, Any] | None) -> str:
    """`describe_error`'s line for ``error``; for one rebuilt from ``record``, its original's.

    A rebuilt exception's ``str()`` need not be its original's: one that writes an
    attribute into its message (litellm's ``MidStreamFallbackError``, its original
    exception) holds that attribute as the recorded text.
    """
    message = None if record is None else record.get("message")
    path = None if record is None else record.get("type")
    if isinstance(error, ReplayedFailure) or not (
        isinstance(message, str) and isinstance(path, str)
    ):
        return describe_error(error)
    name = path.rpartition(":")[2].rpartition(".")[2]
    return one_line(f"{name}: {one_line(message) or name}")


def _json(value: object, what: str) -> JsonValue:
    """``value`` as canonical JSON (pydantic models, dataclasses, dates converted)."""
    try:
        converted: JsonValue = to_jsonable_python(value)
        check_json(converted)
    except (PydanticSerializationError, InvalidEventError, ValueError, TypeError) as error:
        raise InvalidEventError(f"{what} is not JSON: {one_line(str(error))}") from error
    return converted


def _exact_json(value: object, what: str) -> tuple[JsonValue, str | None]:
    """A tool's result as `ActionCommitted`'s ``result`` and ``result_text``.

    NaN, Infinity and integers past 64 bits are kept (`journal.events.result_record`).
    """
    try:
        converted = to_jsonable_python(value)
    except (PydanticSerializationError, ValueError, TypeError) as error:
        raise InvalidEventError(f"{what} is not JSON: {one_line(str(error))}") from error
    result, text = result_record(converted)
    return _json(result, what), text


def _json_object(values: Mapping[str, Any] | None, what: str) -> dict[str, JsonValue]:
    converted = _json(dict(values or {}), what)
    assert isinstance(converted, dict)
    return converted


def _tool_specs(tools: Iterable[ToolSpec | Mapping[str, Any]]) -> list[ToolSpec]:
    specs: list[ToolSpec] = []
    for tool in tools:
        if isinstance(tool, ToolSpec):
            specs.append(tool)
            continue
        found, problems = tool_specs_of([dict(tool)])
        if problems:
            raise InvalidEventError(f"tool spec {dict(tool)!r}: {problems[0]}")
        specs.extend(found)
    return specs


def _shown(specs: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """The tools as the model is shown them (OpenAI format), for the prefix hash."""
    return [
        {
            "type": "function",
            "function": {"name": s.name, "description": s.description, "parameters": s.parameters},
        }
        for s in specs
    ]


class Recorder:
    """Journals one session of a hand-written loop; see the module docstring.

    Args:
        journal: where the events go.
        session_id: the session to write (default: a new ``session-<hex>`` id).
        clock: the time of each event by seq (default: the journal's clock).
        replay_of: recorded in ``session_started`` (a replay sets it).
        order: in a replay, the recording's order of the calls: an outcome's ``ran_after``
            is journaled as `RecordedOrder.ran_after` says.
        model_failures: journal failed model calls (`model_failure`); a replay of a session
            recorded before they were journaled turns it off (`journal.predates`).
    """

    def __init__(
        self,
        journal: Journal | Destination,
        session_id: str | None = None,
        *,
        clock: Clock | None = None,
        replay_of: str | None = None,
        order: RecordedOrder | None = None,
        model_failures: bool = True,
    ) -> None:
        self.order = order
        self.model_failures = model_failures
        self.destination = (
            journal
            if isinstance(journal, Destination)
            else Destination(journal, fail_open=replay_of is None)
        )
        self.session_id = session_id or f"session-{uuid.uuid4().hex[:16]}"
        self.clock = clock
        self.replay_of = replay_of
        self._state = SessionState()
        self._proposal: tuple[ToolCall, ...] = ()
        self.output = self.destination.session(self.session_id)
        """The session's way out (`capture.output.SessionOutput`): ``output.flush()`` returns
        once every event recorded so far is written (grouped durability)."""

    @property
    def journal(self) -> Journal:
        """The journal the session goes to (opened on first use)."""
        return self.destination.journal

    @property
    def spooling(self) -> bool:
        """True once the journal failed this session and its events go to the spool."""
        return self.output.spooling

    @classmethod
    def resume(cls, journal: Journal, session_id: str, *, clock: Clock | None = None) -> Self:
        """Continue a session written earlier (by this or another process).

        Raises:
            SessionNotFoundError: no such session.
        """
        recorder = cls(journal, session_id, clock=clock)
        for item in journal.events(session_id):
            recorder._state = apply(recorder._state, item)
            if isinstance(item.event, ActionProposed):
                recorder._proposal = tuple(item.event.calls)
        if recorder._state.events == 0:
            raise SessionNotFoundError(f"session {session_id}: not in {journal.target}")
        return recorder

    # -- what was recorded -----------------------------------------------------------

    @property
    def state(self) -> SessionState:
        """The fold of everything this session holds so far."""
        return self._state

    @property
    def next_seq(self) -> int:
        """The seq the next event will take."""
        return self._state.last_seq + 1

    @property
    def proposal(self) -> tuple[ToolCall, ...]:
        """The calls of the last model output, in the order the model proposed them."""
        return self._proposal

    @property
    def pending(self) -> tuple[ToolCall, ...]:
        """Calls of the last model output that no result or failure answered yet."""
        return tuple(self._state.pending_calls)

    @property
    def started(self) -> bool:
        """True once ``session_started`` is written."""
        return self._state.events > 0

    @property
    def ended(self) -> bool:
        """True once the session halted (or failed): it takes nothing more."""
        return self._state.ended_session

    # -- writing ---------------------------------------------------------------------

    def _write(self, event: AgentEvent) -> None:
        seq = self.next_seq
        when = self.clock(seq) if self.clock is not None else self.destination.now()
        state = self.output.write(seq, when, event)
        if state is None:  # redacted, held back or spooled: the journal did not fold it
            stamp = format_ts(when)
            state = apply(
                self._state, RecordedEvent(self.session_id, seq, stamp, event.VERSION, "", event)
            )
        self._state = state

    def _refuse(self, what: str, why: str) -> RecordingOrderError:
        return RecordingOrderError(f"session {self.session_id}: cannot record {what}: {why}")

    def _open(self, what: str) -> None:
        if not self.started:
            raise self._refuse(what, "the session is not started (call start first)")
        if self.ended:
            state = self._state
            raise self._refuse(what, f"the session {state.status} by rule {state.halt_rule}")

    def start(
        self,
        *,
        agent: str | None = None,
        model: str | None = None,
        system_prompt: str = "",
        tools: Iterable[ToolSpec | Mapping[str, Any]] = (),
        guardrails: Guardrails | None = None,
        model_settings: Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
        code_version: str | None = None,
        captured_with: str = "recorder",
        client_settings: Mapping[str, Any] | None = None,
    ) -> str:
        """Record ``session_started`` and return the session id.

        Args:
            agent: ``module:attribute`` of what runs the loop (what a replay re-runs).
            model: the model's name.
            system_prompt: the system prompt text (its hash is recorded beside it).
            tools: the tools shown to the model: `ToolSpec`s, or OpenAI-format specs
                (``{"type": "function", "function": {...}}`` or the inner object).
            guardrails: limits your loop enforces, if any (recorded for the fold).
            model_settings: temperature and the like.
            metadata: anything JSON you want kept with the session.
            code_version: your code's version.
            captured_with: kept in the metadata as ``captured_with`` (integrations set it).
            client_settings: the model client's own settings that shape a call beyond its
                request (``max_retries``, ``timeout``), when the loop knows its client.
        """
        if self.started:
            raise self._refuse("session_started", "the session is started already")
        specs = _tool_specs(tools)
        event = SessionStarted(
            agent=agent,
            config=AgentConfig(guardrails=guardrails or Guardrails(), tools=specs),
            system_prompt=system_prompt,
            system_prompt_hash=prefix_hash(system_prompt, _shown(specs)),
            model=model,
            model_settings=_json_object(model_settings, "the model settings"),
            client_settings=None
            if client_settings is None
            else _json_object(client_settings, "the client settings"),
            code_version=code_version,
            metadata={
                **self._sampling_metadata(),
                **_json_object(metadata, "the metadata"),
                CAPTURED_WITH_KEY: captured_with,
            },
            replay_of=self.replay_of,
        )
        self._write(event)
        return self.session_id

    def user_input(self, text: str) -> UserInput:
        """Record a user's message: it begins a turn."""
        self._open("user_input")
        event = UserInput(text=text)
        self._write(event)
        return event

    def model_output(
        self,
        output: ModelOutput | None = None,
        *,
        text: str | None = None,
        calls: Iterable[ToolCall | Mapping[str, Any]] = _NO_CALLS,
        reasoning: str | None = None,
        model: str | None = None,
        usage: Usage | Mapping[str, int] | None = None,
        latency_ms: float | None = None,
        cost: float | None = None,
        request: Mapping[str, Any] | None = None,
        response: object = None,
    ) -> ActionProposed:
        """Record the model's whole output as received (``action_proposed``) and return it.

        Pass an object with the `ModelOutput` attributes, or the fields one by one (calls
        as `ToolCall`s or ``{"call_id", "tool", "args"}`` mappings, arguments as emitted;
        a call without its ``arguments`` text gets the text of its ``args``, keys in their
        order). The model defaults to the session's. ``request`` and ``response`` are the
        request record and the raw response of a captured client
        (`capture.requests`).
        """
        self._open("a model output")
        if self._state.status == "completed":
            raise self._refuse(
                "a model output", "the turn ended with a final answer; record the next user input"
            )
        if output is not None:
            if text is not None or calls is not _NO_CALLS or reasoning is not None or usage:
                raise TypeError("pass either a model output object or its fields, not both")
            event = ActionProposed(
                calls=[call.with_text() for call in output.calls],
                text=output.text,
                reasoning=output.reasoning,
                model=output.model or model or self._state.model,
                usage=output.usage,
                latency_ms=output.latency_ms if latency_ms is None else latency_ms,
                cost=output.cost if cost is None else cost,
            )
        else:
            event = ActionProposed(
                calls=[
                    (c if isinstance(c, ToolCall) else ToolCall.model_validate(c)).with_text()
                    for c in calls
                ],
                text=text,
                reasoning=reasoning,
                model=model or self._state.model,
                usage=usage if isinstance(usage, Usage) else Usage.model_validate(usage or {}),
                latency_ms=latency_ms,
                cost=cost,
            )
        if request is not None or response is not None:
            event = event.model_copy(
                update={
                    "request": _json_object(request, "the request"),
                    "response": _json(response, "the response"),
                }
            )
        self._write(event)
        self._proposal = tuple(event.calls)
        return event

    def model_failure(
        self,
        error: BaseException,
        *,
        request: Mapping[str, Any] | None = None,
        response: Sequence[Any] | None = None,
        model: str | None = None,
        latency_ms: float | None = None,
        record: Mapping[str, Any] | None = None,
    ) -> ModelCallFailed | None:
        """Record that a call of the model raised ``error`` instead of answering.

        For the calls your loop survives (a retry, a fallback): one that ends the session
        is its halt too (`fail`). The exception is kept as its `exception_record`
        (``record`` gives one already made) with its one line, its kind and its HTTP
        status, so a replay raises it again from the same call as its own type.
        ``request`` is the request record of a captured client; ``response`` the chunks a
        stream had sent before it broke. Returns None, writing nothing, when the recorder
        journals no failed calls (``model_failures`` False).
        """
        if not self.model_failures:
            return None
        self._open("a failed model call")
        if self._state.status == "completed":
            raise self._refuse(
                "a failed model call",
                "the turn ended with a final answer; record the next user input",
            )
        if record is None and _recordable(error):
            record = exception_record(error)
        event = ModelCallFailed(
            message=_described(error, record),
            kind=failure_kind(error),
            status_code=status_code_of(error),
            model=model or self._state.model,
            latency_ms=latency_ms,
            request=None if request is None else _json_object(request, "the request"),
            error=None if record is None else _json_object(record, "the error"),
            response=None if response is None else _json(list(response), "the stream's chunks"),
        )
        self._write(event)
        return event

    def _answered(self, what: str, call_id: str | None, tool: str | None) -> ToolCall:
        """The waiting call ``call_id`` answers, or the reason it cannot.

        ``call_id`` None is a call the code made on its own (no model output proposed
        it): it is given the id ``direct-<seq>``.
        """
        self._open(what)
        if call_id is None:
            if tool is None:
                raise self._refuse(what, "a call of the code's own needs its tool's name")
            return ToolCall(call_id=f"direct-{self.next_seq}", tool=tool)
        for call in self._state.pending_calls:
            if call.call_id == call_id and (tool is None or call.tool == tool):
                return call
        proposed = any(c.call_id == call_id for c in self._proposal)
        if proposed and all(c.call_id != call_id for c in self.pending):
            raise self._refuse(what, f"call {call_id!r} was answered already")
        waiting = ", ".join(f"{c.call_id} ({c.tool})" for c in self.pending) or "none"
        named = "" if tool is None else f" of tool {tool!r}"
        raise self._refuse(
            what, f"no model output proposed call {call_id!r}{named}; waiting: {waiting}"
        )

    def _ran_after(self, call_id: str, observed: Collection[int] | None) -> list[int] | None:
        """The ``ran_after`` to journal: sorted, None for none; the recording's in a replay.

        Raises:
            RecordingOrderError: a position that is none of the model output's calls.
        """
        size = len(self._proposal)
        for position in observed or ():
            if type(position) is not int or not 0 <= position < size:
                raise self._refuse(
                    f"the outcome of {call_id}",
                    f"ran_after holds {position!r}, which is no position of the model "
                    f"output's {size} call{'s' * (size != 1)}",
                )
        positions = tuple(sorted(observed)) if observed else None
        if self.order is not None:
            positions = self.order.ran_after(self.next_seq, call_id, positions)
        return list(positions) if positions else None

    @staticmethod
    def _args(call: ToolCall, args: Mapping[str, Any] | None) -> dict[str, JsonValue]:
        if args is not None:
            return _json_object(args, f"the arguments of {call.tool}")
        return dict(call.args) if isinstance(call.args, dict) else {}

    def tool_result(
        self,
        call_id: str | None,
        result: object,
        *,
        tool: str | None = None,
        args: Mapping[str, Any] | None = None,
        duration_ms: float | None = None,
        exact: bool = False,
        ran_after: Collection[int] | None = None,
    ) -> ActionCommitted | ActionFailed:
        """Record a tool's result (``action_committed``) for a waiting call.

        ``result`` is any JSON value (pydantic models, dataclasses and dates are converted);
        an exception is recorded as a failure, as `tool_failure` would. ``args`` default to
        the arguments the model proposed. ``call_id`` None records a call the code made on
        its own (``tool`` names it). ``exact`` keeps NaN, Infinity and integers past 64 bits
        instead of refusing them (`journal.events.result_record`), as captured code's tools
        get: the call that returned them must go on. ``ran_after`` gives the positions, in
        the model output, of the calls that had finished before this one started (the
        order the code ran them in; see `ActionCommitted`).

        Raises:
            RecordingOrderError: no waiting call has this id (never proposed, or answered),
                or ``ran_after`` names no call of the model output.
            InvalidEventError: the result is not JSON (NaN, an object); nothing written.
        """
        if isinstance(result, BaseException):
            return self.tool_failure(
                call_id, result, tool=tool, args=args, duration_ms=duration_ms, ran_after=ran_after
            )
        call = self._answered("a tool result", call_id, tool)
        what = f"the result of {call.tool}"
        if exact:
            value, text = _exact_json(result, what)
        else:
            value = _json(result, what)
            text = ordered_text(value)
        event = ActionCommitted(
            call_id=call.call_id,
            tool=call.tool,
            args=self._args(call, args),
            result=value,
            duration_ms=duration_ms,
            result_text=text,
            ran_after=self._ran_after(call.call_id, ran_after),
        )
        self._write(event)
        return event

    def tool_failure(
        self,
        call_id: str | None,
        error: BaseException | str,
        *,
        kind: FailureKind | None = None,
        tool: str | None = None,
        args: Mapping[str, Any] | None = None,
        duration_ms: float | None = None,
        record: Mapping[str, Any] | None = None,
        ran_after: Collection[int] | None = None,
    ) -> ActionFailed:
        """Record that a waiting call's tool failed (``action_failed``).

        The kind and the one-line message are those of `failure_of`. An exception is kept
        as its `exception_record` (``record`` gives one already made), so a replay can
        raise it again as its own type. ``ran_after`` as for `tool_result`.
        """
        call = self._answered("a tool failure", call_id, tool)
        kind, message = failure_of(error, kind)
        if record is None and _recordable(error):
            record = exception_record(error)
        event = ActionFailed(
            call_id=call.call_id,
            tool=call.tool,
            kind=kind,
            message=message,
            args=self._args(call, args),
            duration_ms=duration_ms,
            error=None if record is None else _json_object(record, "the error"),
            ran_after=self._ran_after(call.call_id, ran_after),
        )
        self._write(event)
        return event

    def tool_rejected(
        self,
        call_id: str,
        message: str,
        *,
        stage: VerificationStage = "schema",
        tool: str | None = None,
    ) -> VerificationFailed:
        """Record that a waiting call was refused before it ran (``verification_failed``).

        For loops and frameworks that check a call's arguments (``stage`` ``schema``) or
        its tool (``unknown_tool``) and tell the model what to change.
        """
        call = self._answered("a rejection", call_id, tool)
        event = VerificationFailed(
            call_id=call_id, tool=call.tool, stage=stage, message=one_line(message)
        )
        self._write(event)
        return event

    def final(self, answer: str) -> AgentCompleted:
        """Record the reply that ends the turn (``agent_completed``)."""
        self._open("a final answer")
        if self._state.status == "completed":
            raise self._refuse("a final answer", "the turn has its final answer already")
        event = AgentCompleted(answer=answer)
        self._write(event)
        return event

    def halt(self, rule: str, reason: str) -> AgentHalted:
        """End the session (``agent_halted``): a limit of your loop, an error, the user left.

        Rule ``error`` marks the session failed.
        """
        self._open("a halt")
        event = AgentHalted(rule=rule, reason=one_line(reason))
        self._write(event)
        return event

    def fail(self, error: BaseException) -> AgentHalted:
        """Record an exception as a halt with rule ``error`` and its one-line message.

        Its record (`exception_record`) notes where it was raised (`raised_at`: the
        functions and lines of its traceback), which a replay compares nothing of. A
        `HaltSession` is recorded with its own rule and reason.
        """
        if isinstance(error, HaltSession):
            return self.halt(error.rule, error.reason)
        self._open("a halt")
        record = None
        if _recordable(error):
            record = exception_record(error)
            record["raised_at"] = raised_at(error)
        event = AgentHalted(
            rule="error",
            reason=describe_error(error),
            error=None if record is None else _json_object(record, "the error"),
        )
        self._write(event)
        return event

    def _sampling_metadata(self) -> dict[str, JsonValue]:
        sampling = self.destination.sampling
        return {} if sampling is None else {"sampling": sampling.record()}

    def close(self) -> None:
        """The session is over: what it queued is written (sampled: now, if it is kept)."""
        self.output.close(self._state)

    # -- context manager -------------------------------------------------------------

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            if isinstance(exc, (Exception, HaltSession)) and self.started and not self.ended:
                try:
                    self.fail(exc)
                except JournalError as error:  # never hide the loop's own exception
                    exc.add_note(f"agent-journal could not record the halt: {error}")
        finally:
            self.close()
