"""The loop: Observe → Propose → Verify → Commit, journaling every fact before acting on it.

State diagram of a session's phase (`Phase`); any other change raises
`IllegalTransitionError`, because it is a bug in the loop::

    idle ──► observe ──► propose ──► verify ◄──► commit
                ▲           │          │  │         │
                └───────────┼──────────┘  └─────────┤  (all calls of a response handled)
                            ▼                       ▼
                        completed ──► observe   halted (also from any phase: a rule or an error)
                        (next turn)

* Observe: the state is the fold of the session's own journal (kept incrementally, one
  `journal.apply` per event written) and the context is built from the same events;
  compactions are decided here and journaled.
* Propose: one model call through the `LLMProvider` port; the whole output is journaled
  as ``action_proposed`` before anything acts on it; repairs follow as events.
* Verify: the gate (`agentloop.gate.verify_call`) decides each call, in proposal order.
* Commit: accepted calls run through the `ToolExecutor` port (parallel-safe ones
  concurrently, at most ``max_parallel`` at once) and their outcomes are journaled in the
  order the model proposed them, whatever order they finished in.

A response without calls ends the turn (``agent_completed``), unless it is empty (no text,
no calls): then it is rejected at Verify (``verification_failed``, stage ``empty_reply``,
saying what to change) and the model is asked again, ``empty_reply_retries`` times per
turn (propose ──► verify ──► observe). A rule or an error ends the session
(``agent_halted``); an exception in agent code (the model port, a guard) is rule
``error``, a failed session. After each failure the loop looks at the fold's counters:
``max_consecutive_failures`` in a row, or one call failing the same way
``max_identical_failures`` times across turns (rule ``identical_failures``), halt it.

A tool result larger than ``max_result_bytes`` is recorded compacted
(`agentloop.context.compact_result`), so it stays under the journal's event size limit;
a call the executor gave up on at its timeout is recorded as ``abandoned``.

The settings added with ``session_started`` v2 (``max_identical_failures``,
``empty_reply_retries``, ``max_result_bytes``) are read from the session's folded state,
the configuration its ``session_started`` records: a session recorded before them
continues as it ran (see `journal.upcasting`).

Two changes come from outside the loop: `AgentRuntime.greet` journals a greeting before
the first user input (idle ──► completed, no model call), and `AgentRuntime.stop` ends a
session the user left or an operator stopped (idle or completed ──► halted, optionally
after a last user input the agent never answered).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from pydantic_core import to_jsonable_python

from journal import (
    ActionCommitted,
    ActionFailed,
    ActionProposed,
    AgentCompleted,
    AgentEvent,
    AgentHalted,
    CircuitOpened,
    FallbackInvoked,
    HaltSession,
    InvalidEventError,
    Journal,
    ModelCallFailed,
    RecordedEvent,
    RepairApplied,
    SessionNotFoundError,
    SessionStarted,
    SessionState,
    ToolCall,
    UserInput,
    VerificationFailed,
    apply,
    check_json,
    describe_error,
    failure_kind,
    failure_message,
    format_ts,
    loads_strict,
    sets_ordered,
    status_code_of,
)

from .agent import Agent, default_code_version
from .context import Context, compact_result, plan_compaction, prefix_hash
from .errors import IllegalTransitionError, SessionEndedError
from .gate import Accepted, Plan, Rejected, guard_error_message, verify_call, verify_reply
from .ports import (
    Clock,
    IdSource,
    LiveToolExecutor,
    LLMProvider,
    ModelRequest,
    ModelResponse,
    ToolExecutor,
    ToolOutcome,
    system_clock,
    uuid_ids,
)
from .recovery import repair_truncated_json, scavenge_calls
from .schemas import is_flattened, unflatten_args

__all__ = ["TRANSITIONS", "AgentRuntime", "Phase", "TurnResult"]


class Phase(StrEnum):
    """Where a session's loop is."""

    IDLE = "idle"
    OBSERVE = "observe"
    PROPOSE = "propose"
    VERIFY = "verify"
    COMMIT = "commit"
    COMPLETED = "completed"
    HALTED = "halted"


TRANSITIONS: dict[Phase, frozenset[Phase]] = {
    Phase.IDLE: frozenset({Phase.OBSERVE, Phase.COMPLETED, Phase.HALTED}),
    Phase.OBSERVE: frozenset({Phase.PROPOSE, Phase.HALTED}),
    Phase.PROPOSE: frozenset({Phase.VERIFY, Phase.COMPLETED, Phase.HALTED}),
    Phase.VERIFY: frozenset({Phase.VERIFY, Phase.COMMIT, Phase.OBSERVE, Phase.HALTED}),
    Phase.COMMIT: frozenset({Phase.VERIFY, Phase.COMMIT, Phase.OBSERVE, Phase.HALTED}),
    Phase.COMPLETED: frozenset({Phase.OBSERVE, Phase.HALTED}),
    Phase.HALTED: frozenset(),
}
"""The allowed phase changes; the diagram in the module docstring."""


@dataclass(frozen=True)
class TurnResult:
    """How a turn ended: the reply, or the rule that halted the session."""

    session_id: str
    status: str
    answer: str | None
    halt_rule: str | None
    halt_reason: str | None
    last_seq: int
    state: SessionState


@dataclass(frozen=True)
class _Crashed:
    """A decision that could not be made: the guard (agent code) raised."""

    reason: str


@dataclass
class _Session:
    session_id: str
    state: SessionState
    context: Context = field(default_factory=Context)
    phase: Phase = Phase.IDLE

    def move(self, to: Phase) -> None:
        if to not in TRANSITIONS[self.phase]:
            raise IllegalTransitionError(
                f"session {self.session_id}: illegal phase change {self.phase} -> {to}"
            )
        self.phase = to


def _phase_of(state: SessionState) -> Phase:
    if state.ended_session:
        return Phase.HALTED
    return Phase.COMPLETED if state.status == "completed" else Phase.IDLE


class AgentRuntime:
    """Runs an agent's sessions against a journal through injected ports.

    Args:
        agent: what to run.
        journal: where every event goes (and where a session's state comes from).
        llm: the model port (default: the agent's own).
        tools: the tool port (default: run the tools for real).
        clock: the time of each event (default: the system clock).
        ids: fresh ids (default: random).
        model_failures: journal each failed model call (``model_call_failed``) and ask
            again up to the guardrail ``model_retries``; a replay of a session recorded
            before failed calls were journaled turns it off.
    """

    def __init__(
        self,
        agent: Agent,
        journal: Journal,
        *,
        llm: LLMProvider | None = None,
        tools: ToolExecutor | None = None,
        clock: Clock = system_clock,
        ids: IdSource = uuid_ids,
        model_failures: bool = True,
    ) -> None:
        provider = llm or agent.llm
        if provider is None:
            raise ValueError(f"agent {agent.name} has no model: pass llm= or set agent.llm")
        self.agent = agent
        self.journal = journal
        self.llm: LLMProvider = provider
        self.tools: ToolExecutor = tools or LiveToolExecutor()
        self.clock = clock
        self.ids = ids
        self.model_failures = model_failures
        """Journal failed model calls (``model_call_failed``); a replay of a session
        recorded before they were journaled turns it off (`journal.predates`)."""
        self._tools = agent.tool_map
        rails = agent.guardrails
        self._model_tools = [
            tool.model_spec(max_leaves=rails.flatten_leaves, max_depth=rails.flatten_depth)
            for tool in agent.tools
        ]
        self._sessions: dict[str, _Session] = {}

    # -- sessions --------------------------------------------------------------------

    def start(
        self,
        session_id: str | None = None,
        *,
        metadata: dict[str, Any] | None = None,
        replay_of: str | None = None,
        forked_from: str | None = None,
        fork_seq: int | None = None,
    ) -> str:
        """Journal ``session_started`` for a new session and return its id."""
        session_id = session_id or self.ids("session")
        agent = self.agent
        started = SessionStarted(
            agent=agent.reference,
            config=agent.config(),
            system_prompt=agent.system_prompt,
            system_prompt_hash=prefix_hash(agent.system_prompt, self._model_tools),
            model=agent.model,
            model_settings=agent.model_settings,
            code_version=agent.code_version or default_code_version(),
            metadata=metadata or {},
            replay_of=replay_of,
            forked_from=forked_from,
            fork_seq=fork_seq,
        )
        session = _Session(session_id, SessionState())
        self._append(session, [started])
        self._sessions[session_id] = session
        return session_id

    def resume(self, session_id: str) -> SessionState:
        """Load a session written earlier (by this or another process) and return its state."""
        session = _Session(session_id, SessionState())
        for recorded in self.journal.events(session_id):
            session.state = apply(session.state, recorded)
            session.context.add(recorded.seq, recorded.event)
        if session.state.events == 0:
            self.journal.require(session_id)
        session.phase = _phase_of(session.state)
        self._sessions[session_id] = session
        return session.state

    def _session(self, session_id: str) -> _Session:
        session = self._sessions.get(session_id)
        if session is None or session.state.last_seq != self.journal.last_seq(session_id):
            if self.journal.summary(session_id) is None:
                self.start(session_id)
            else:
                self.resume(session_id)
            session = self._sessions[session_id]
        return session

    async def run_turn(self, session_id: str, text: str) -> TurnResult:
        """Continue a session (starting it if new) with the next user input; run to the reply.

        Raises:
            SessionEndedError: the session is halted or failed.
        """
        session = self._session(session_id)
        if session.phase is Phase.HALTED:
            raise SessionEndedError(
                f"session {session_id}: {session.state.status} by rule "
                f"{session.state.halt_rule}; it takes no further turns"
            )
        try:
            self._close_interrupted(session)
            session.move(Phase.OBSERVE)
            self._append(session, [UserInput(text=text)])
            await self._drive(session)
        except BaseException:
            # The journal refused a write, the turn was cancelled, or the loop has a bug: what
            # the journal holds is the truth, so the next turn resumes from it instead of
            # from a loop cut mid-phase.
            self._sessions.pop(session_id, None)
            raise
        return self._result(session)

    async def continue_turn(self, session_id: str, *, decide_pending: bool = False) -> TurnResult:
        """Drive a session whose last turn has no ending yet (a fork, a crash) to its reply.

        Calls proposed but never decided are answered first: after a crash as interrupted
        (see `_close_interrupted`); with ``decide_pending`` (a fork at a proposal: nothing
        ran them in this session) verified and run as the loop runs a proposal's calls.
        A session that is completed or halted is returned as it is.
        """
        session = self._session(session_id)
        if session.phase is Phase.IDLE and session.state.turns > 0:
            try:
                pending = list(session.state.pending_calls)
                if decide_pending and pending:
                    for phase in (Phase.OBSERVE, Phase.PROPOSE):  # the proposal is journaled
                        session.move(phase)
                    if await self._verify_and_commit(session, pending):
                        return self._result(session)
                else:
                    self._close_interrupted(session)
                    session.move(Phase.OBSERVE)
                await self._drive(session)
            except BaseException:
                self._sessions.pop(session_id, None)
                raise
        return self._result(session)

    def _close_interrupted(self, session: _Session) -> None:
        """Answer calls proposed but never decided (a crash, a fork inside a proposal).

        Whether such a call ran before the interruption is unknown, so it is not run
        again (no duplicated side effects): it is journaled as an infrastructure failure
        saying so, and the model sees that answer instead of a dangling call.
        """
        pending = session.state.pending_calls
        if not pending or session.phase is Phase.HALTED:
            return
        self._append(
            session,
            [
                ActionFailed(
                    call_id=call.call_id,
                    tool=call.tool,
                    kind="infrastructure",
                    message="interrupted before its outcome was journaled; not run again, "
                    "its effect is unknown",
                    args=call.args if isinstance(call.args, dict) else {},
                )
                for call in pending
            ],
        )

    def greet(self, session_id: str, text: str) -> TurnResult:
        """Journal the agent's greeting: a reply before the first user input, no model call.

        It is ``agent_completed`` with ``text`` as the answer (a replay serves a recorded
        greeting through this, as it was).

        Raises:
            IllegalTransitionError: the session has had a user input already.
        """
        session = self._session(session_id)
        if session.state.turns or session.phase not in (Phase.IDLE, Phase.COMPLETED):
            raise IllegalTransitionError(
                f"session {session_id}: a greeting comes before the first user input"
            )
        self._append(session, [AgentCompleted(answer=text)])
        if session.phase is Phase.IDLE:
            session.move(Phase.COMPLETED)
        return self._result(session)

    def stop(
        self, session_id: str, rule: str, reason: str, *, last_input: str | None = None
    ) -> TurnResult:
        """End a session from outside the loop: the user left, an operator or a harness stopped it.

        ``last_input`` is a user message the agent never got to answer; it is journaled
        before the ``agent_halted`` with ``rule`` (rule ``error`` marks a failed session).

        Raises:
            SessionNotFoundError: no such session (a stop never starts one).
            SessionEndedError: the session is halted or failed already.
        """
        if session_id not in self._sessions and self.journal.summary(session_id) is None:
            raise SessionNotFoundError(f"session {session_id}: no such session to stop")
        session = self._session(session_id)
        if session.phase is Phase.HALTED:
            raise SessionEndedError(f"session {session_id}: {session.state.status} already")
        before: list[AgentEvent] = []
        if last_input is not None:
            session.move(Phase.OBSERVE)
            before.append(UserInput(text=last_input))
        self._halt(session, rule, reason, before=before)
        return self._result(session)

    def run(self, text: str, *, session_id: str | None = None) -> TurnResult:
        """Synchronous `run_turn` for plain scripts (starts a new session by default)."""
        return asyncio.run(self.run_turn(session_id or self.start(), text))

    def _result(self, session: _Session) -> TurnResult:
        state = self.journal.state(session.session_id)
        return TurnResult(
            session_id=session.session_id,
            status=state.status,
            answer=state.answer if state.status == "completed" else None,
            halt_rule=state.halt_rule,
            halt_reason=state.halt_reason,
            last_seq=state.last_seq,
            state=state,
        )

    # -- journaling ------------------------------------------------------------------

    def _append(self, session: _Session, events: Sequence[AgentEvent]) -> None:
        seq = session.state.last_seq + 1
        when = self.clock(seq)
        last = self.journal.append(session.session_id, events, expected_seq=seq, ts=when)
        for offset, event in enumerate(events):
            session.context.add(seq + offset, event)
        # The journal's own fold of what it wrote, when it has it at hand; else folded here
        # as the journal records it (seq, ts), so the state equals the fold of the stored
        # events (the hash is not needed by the fold).
        state = self.journal._state_after(session.session_id, last)
        if state is None:
            state, ts = session.state, format_ts(when)
            for offset, event in enumerate(events):
                recorded = RecordedEvent(
                    session.session_id, seq + offset, ts, event.VERSION, "", event
                )
                state = apply(state, recorded)
        session.state = state

    def _halt(
        self, session: _Session, rule: str, reason: str, before: Sequence[AgentEvent] = ()
    ) -> None:
        self._append(session, [*before, AgentHalted(rule=rule, reason=reason)])
        session.move(Phase.HALTED)

    # -- the loop --------------------------------------------------------------------

    async def _drive(self, session: _Session) -> None:
        while True:
            if session.phase is not Phase.OBSERVE:
                session.move(Phase.OBSERVE)
            self._observe(session)
            session.move(Phase.PROPOSE)
            proposed = await self._propose(session)
            if proposed is None:
                return
            response, proposal = proposed
            calls, repairs = self._recover(session, response)
            # (the proposal and its repairs change nothing verify_reply reads)
            refusal = None if calls else verify_reply(response.text, session.state)
            # The proposal, its repairs and (without calls) the answer go in one transaction:
            # nothing acts between them, and every tool runs after they are committed.
            answer = [] if calls or refusal else [AgentCompleted(answer=response.text or "")]
            try:
                self._append(session, [proposal, *repairs, *answer])
            except InvalidEventError as error:
                self._halt(session, "error", f"the model's output cannot be recorded: {error}")
                return
            if refusal is not None:
                session.move(Phase.VERIFY)
                if await self._reject(session, refusal, Plan()):
                    return
                continue
            if not calls:
                session.move(Phase.COMPLETED)
                return
            if await self._verify_and_commit(session, calls):
                return

    def _observe(self, session: _Session) -> None:
        compaction = plan_compaction(
            session.context, self.agent.guardrails, self.agent.context_window
        )
        if compaction is not None:
            self._append(session, [compaction])

    async def _propose(self, session: _Session) -> tuple[ModelResponse, ActionProposed] | None:
        """Ask the model; return its response and the proposal to record (None: halted)."""
        while True:
            request = ModelRequest(
                session_id=session.session_id,
                seq=session.state.last_seq + 1,
                system_prompt=self.agent.system_prompt,
                tools=self._model_tools,
                messages=session.context.chat(),
                model=self.agent.model,
                settings=self.agent.model_settings,
            )
            try:
                response = await self.llm.complete(request)
                proposal = response.as_proposal(self.agent.model)
            except HaltSession as stop:  # the port ends the session by a rule of its own
                self._halt(session, stop.rule, stop.reason)
                return None
            except Exception as error:
                if self._model_failed(session, error):
                    continue  # asked again (guardrail model_retries)
                return None
            return response, proposal

    def _model_failed(self, session: _Session, error: Exception) -> bool:
        """Journal a model call that raised; True to ask again, False when it halted.

        The failure is a ``model_call_failed``; past the guardrail ``model_retries`` (in a
        row) the session halts with rule ``error``. A runtime that journals no failed calls
        (a replay of a session that predates them) halts at once, as that session did.
        """
        reason = f"the model call failed: {failure_message(error)}"
        if not self.model_failures:
            self._halt(session, "error", reason)
            return False
        failed = ModelCallFailed(
            message=describe_error(error),
            kind=failure_kind(error),
            status_code=status_code_of(error),
            model=self.agent.model,
        )
        if session.state.model_failures_in_row >= self.agent.guardrails.model_retries:
            self._halt(session, "error", reason, before=[failed])
            return False
        self._append(session, [failed])
        return True

    def _recover(
        self, session: _Session, response: ModelResponse
    ) -> tuple[list[ToolCall], list[AgentEvent]]:
        """The calls to verify (repaired) and the repairs to record after the proposal."""
        proposal_seq = session.state.last_seq + 1
        calls = list(response.calls)
        repairs: list[AgentEvent] = []
        if not calls:
            calls = scavenge_calls(
                [response.reasoning, response.text],
                [name for name, tool in self._tools.items() if tool.scavengeable],
                f"scavenged-{proposal_seq}",
            )
            if calls:
                repairs.append(
                    RepairApplied(
                        level="scavenge",
                        detail=f"{len(calls)} tool call(s) written out in the response "
                        "were taken as calls",
                        after=[call.model_dump(mode="json", exclude_none=True) for call in calls],
                    )
                )
        rails = self.agent.guardrails
        fixed: list[ToolCall] = []
        for call in calls:
            args = call.as_given  # the model's text, its key order and number forms kept
            if isinstance(args, str):
                args = self._parse_or_repair(call, args, repairs)
            tool = self._tools.get(call.tool)
            if (
                tool is not None
                and isinstance(args, dict)
                and is_flattened(args)
                and tool.flattened_for(
                    max_leaves=rails.flatten_leaves, max_depth=rails.flatten_depth
                )
            ):
                nested = unflatten_args(args)
                if nested is None:
                    fixed.append(
                        call if args is call.args else call.model_copy(update={"args": args})
                    )
                    continue
                repairs.append(
                    RepairApplied(
                        level="flatten",
                        call_id=call.call_id,
                        tool=call.tool,
                        detail=f"nested {len(args)} flattened arguments of {call.tool}",
                        before=args,
                        after=nested,
                    )
                )
                args = nested
            fixed.append(
                call
                if args is call.args
                else ToolCall(call_id=call.call_id, tool=call.tool, args=args)
            )
        return fixed, repairs

    @staticmethod
    def _parse_or_repair(
        call: ToolCall, raw: str, repairs: list[AgentEvent]
    ) -> dict[str, Any] | str:
        try:
            parsed = loads_strict(raw)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            return parsed
        repaired = repair_truncated_json(raw)
        if repaired is None:
            return raw
        repairs.append(
            RepairApplied(
                level="truncation",
                call_id=call.call_id,
                tool=call.tool,
                detail=f"closed the JSON arguments of {call.tool}, cut off mid-way",
                before=raw,
                after=repaired,
            )
        )
        return repaired

    async def _verify_and_commit(self, session: _Session, calls: list[ToolCall]) -> bool:
        """Handle every call of one response; return True when the session halted.

        Accepted parallel-safe calls gather into a batch. Any other decision (a serial
        call, a rejection, a guard that raised) is a barrier: the batch runs and is
        journaled first, then the call is decided again on the state that now holds those
        outcomes, so every journaled decision is one the fold of the events before it
        supports, and serial and parallel dispatch decide alike.
        """
        rails = self.agent.guardrails
        plan = Plan(storms_before=session.state.storms)
        batch: list[Accepted] = []
        for call in calls:
            while True:
                session.move(Phase.VERIFY)
                decision = self._decide(session, call, plan)
                if (
                    isinstance(decision, Accepted)
                    and decision.tool.parallel_safe
                    and not rails.serial
                ):
                    batch.append(decision)
                    plan.add(decision, rails.storm_window)
                    break
                if batch:
                    if await self._flush(session, batch, plan):
                        return True
                    continue
                if await self._settle(session, decision, plan):
                    return True
                break
        halted = await self._flush(session, batch, plan)
        if not halted:
            session.move(Phase.OBSERVE)
        return halted

    def _decide(
        self, session: _Session, call: ToolCall, plan: Plan, *, reroute: bool = True
    ) -> Accepted | Rejected | _Crashed:
        try:
            return verify_call(
                call, tools=self._tools, state=session.state, plan=plan, reroute=reroute
            )
        except Exception as error:
            return _Crashed(guard_error_message(self._tools[call.tool], error))

    async def _settle(
        self, session: _Session, decision: Accepted | Rejected | _Crashed, plan: Plan
    ) -> bool:
        """Run or journal one decision on its own; return True when the session halted."""
        if isinstance(decision, _Crashed):
            self._halt(session, "error", decision.reason)
            return True
        if isinstance(decision, Accepted):
            plan.add(decision, self.agent.guardrails.storm_window)
            return await self._flush(session, [decision], plan)
        return await self._reject(session, decision, plan)

    async def _reject(self, session: _Session, decision: Rejected, plan: Plan) -> bool:
        call = decision.call
        if decision.suppress:
            first: AgentEvent = RepairApplied(
                level="storm", call_id=call.call_id, tool=call.tool, detail=decision.message
            )
        else:
            first = VerificationFailed(
                call_id=call.call_id, tool=call.tool, stage=decision.stage, message=decision.message
            )
        if decision.halt is not None:
            self._halt(session, decision.halt, decision.message, before=[first])
            return True
        self._append(session, [first])
        if decision.fallback is not None:
            self._append(
                session,
                [
                    FallbackInvoked(
                        tool=call.tool, fallback=decision.fallback.name, call_id=call.call_id
                    )
                ],
            )
            rerouted = ToolCall(call_id=call.call_id, tool=decision.fallback.name, args=call.args)
            routed = self._decide(session, rerouted, plan, reroute=False)
            # the rejection counted as a failure: a fallback that commits clears it, but one
            # suppressed (a duplicate of an earlier call) leaves it standing
            return await self._settle(session, routed, plan) or self._check_failures(session)
        return not decision.suppress and self._check_failures(session)

    async def _flush(self, session: _Session, batch: list[Accepted], plan: Plan) -> bool:
        """Run accepted calls (concurrently up to max_parallel), journal outcomes in order."""
        if not batch:
            return False
        accepted_calls = list(batch)
        batch.clear()
        if len(accepted_calls) == 1:  # the common case: no tasks to gather, no semaphore
            outcomes = [await self._run(accepted_calls[0], session.state)]
        else:
            outcomes = await self._run_all(accepted_calls, session.state)
        plan.flushed()
        session.move(Phase.COMMIT)
        max_result_bytes = session.state.guardrails.max_result_bytes
        for accepted, outcome in zip(accepted_calls, outcomes, strict=True):
            event = _outcome_event(accepted, outcome, max_result_bytes)
            self._append(session, [event])
            if isinstance(event, ActionFailed) and event.kind != "business":
                self._check_breaker(session, event.tool)
        return self._check_failures(session)

    def _run(self, accepted: Accepted, state: SessionState) -> Awaitable[ToolOutcome]:
        """Run one accepted call through the tool port, with its timeout."""
        timeout = accepted.tool.timeout_s or self.agent.guardrails.tool_timeout_s
        return self.tools.execute(accepted.tool, accepted.call, accepted.fn_args, state, timeout)

    async def _run_all(self, batch: list[Accepted], state: SessionState) -> list[ToolOutcome]:
        """Run accepted calls concurrently, at most ``max_parallel`` at once; outcomes in order."""
        rails = self.agent.guardrails
        limit = asyncio.Semaphore(1 if rails.serial else rails.max_parallel)

        async def run(accepted: Accepted) -> ToolOutcome:
            async with limit:
                return await self._run(accepted, state)

        return await asyncio.gather(*(run(accepted) for accepted in batch))

    def _check_breaker(self, session: _Session, tool: str) -> None:
        failures = session.state.tool_failures.get(tool, 0)
        threshold = self.agent.guardrails.breaker_threshold
        if failures >= threshold and tool not in session.state.open_breakers:
            self._append(session, [CircuitOpened(tool=tool, failures=failures)])

    def _check_failures(self, session: _Session) -> bool:
        """After a failure: halt on the fold's failure counters; return True when halted.

        Consecutive failures first; identical failures (`SessionState.identical_failures`)
        catch the streaks the consecutive count cannot see, spread over turns and answers.
        """
        state = session.state
        limit = self.agent.guardrails.max_consecutive_failures
        if state.consecutive_failures >= limit:
            self._halt(
                session,
                "consecutive_failures",
                f"{state.consecutive_failures} failures in a row (limit {limit}); "
                f"last: {state.last_error}",
            )
            return True
        identical = state.guardrails.max_identical_failures
        if identical is None:
            return False
        for key, (reading, count) in state.identical_failures.items():
            if count >= identical:
                self._halt(
                    session,
                    "identical_failures",
                    f"{key.rpartition(':')[0]} failed {count} times with the same arguments "
                    f"and the same error, counted across turns (limit {identical}); {reading}",
                )
                return True
        return False


def _outcome_event(
    accepted: Accepted, outcome: ToolOutcome, max_result_bytes: int | None
) -> ActionCommitted | ActionFailed:
    call = accepted.call
    if outcome.ok:
        try:
            result = to_jsonable_python(sets_ordered(outcome.result))
            check_json(result)
            result = compact_result(result, max_result_bytes)
        except (InvalidEventError, ValueError, TypeError) as error:
            return ActionFailed(
                call_id=call.call_id,
                tool=call.tool,
                kind="infrastructure",
                message=f"the result of {call.tool} is not JSON: {failure_message(error)}",
                args=accepted.args,
                duration_ms=outcome.duration_ms,
            )
        return ActionCommitted(
            call_id=call.call_id,
            tool=call.tool,
            args=accepted.args,
            result=result,
            duration_ms=outcome.duration_ms,
        )
    return ActionFailed(
        call_id=call.call_id,
        tool=call.tool,
        kind=outcome.kind or "infrastructure",
        message=outcome.message,
        args=accepted.args,
        duration_ms=outcome.duration_ms,
        abandoned=outcome.abandoned,
    )
