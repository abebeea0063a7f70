"""One session of captured code: what its requests brought, its tool calls, their outcomes.

A `CapturedSession` is built by `capture.Capture` for each entry call (or session block);
the wrapped model client and the decorated tools find the one they belong to with
`capture.placement.session_of_call` and journal through it: each request's new user
messages and the tool results it carries, each response beside its request, each tool call
with its arguments exactly as received and its outcome, in the order the model proposed
the calls (`capture.proposal_order`). In a replay its `Player` decides the outcomes.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from journal import ENTRY_INPUTS_KEY, HaltSession, ToolCall, canonical_bytes, json_stand_in
from journal.formats import MODEL_SETTINGS, system_prompt_of

from .clients import anthropic_messages, genai_messages
from .clients.openai_streams import StreamRecording
from .exceptions import rebuilt
from .play import REPLAY_STOPPED, Player, ToolPlay, halt_of, replay_target
from .proposal_order import InProposalOrder
from .recorder import Recorder
from .requests import (
    conversation_turn,
    jsonable,
    proposal_of,
    request_record,
    role_of,
    sent_parameters,
)
from .returns import as_return_type, text_as_return_type

__all__ = [
    "CAPTURED_WITH",
    "RUNNING_TOOL",
    "CapturedSession",
    "ToolInfo",
    "inside_a_tool",
]

ANTHROPIC = "anthropic"
"""The request and response kind of Anthropic's Messages API."""

_READERS: dict[str, Any] = {ANTHROPIC: anthropic_messages, "genai": genai_messages}
"""The module that reads each request kind not in OpenAI's format (its ``start_fields``
and ``turn_of``)."""

CAPTURED_WITH = "entry"
"""The ``captured_with`` metadata of sessions captured around an entry function."""


@dataclass(frozen=True)
class ToolInfo:
    """A decorated tool: its name, and how a replay treats it.

    ``side_effects``: it changes the world (sends, writes, pays): a replay never runs it
    for real unless allowed by name. ``pure``: a function of its arguments alone: a replay
    runs it and compares its outcome with the recorded one, so a fix inside it shows. Any
    other tool (I/O: lookups, fetches) is served from the recording.
    """

    name: str
    side_effects: bool = False
    pure: bool = False


RUNNING_TOOL: ContextVar[str | None] = ContextVar("agent_journal_running_tool", default=None)
"""The decorated tool running for real in this context (its thread, its task and the tasks
it starts): a decorated tool it calls is part of its run (`inside_a_tool`)."""

_UNFINISHED_TURNS = 100
"""Event-loop turns a replayed call the recording never finished waits for the rest of the
code to end the session (a replay serves everything at once: a sibling's recorded failure
ends the entry within a few turns)."""


@dataclass
class CapturedSession:
    """One session of captured code: its recorder, its requests so far, its tool outcomes.

    Built by `Capture` for each entry call; the wrappers find it with
    `capture.placement.session_of_call`.
    """

    recorder: Recorder
    entry: str | None
    inputs: str
    metadata: dict[str, Any]
    player: Player | None = None
    timer: Callable[[], float] = time.perf_counter
    captured_with: str = CAPTURED_WITH
    """``metadata.captured_with`` of the session: which replay path replays it."""
    _messages: list[Any] = field(default_factory=list)
    _inputs: list[str] = field(default_factory=list)
    _claimed: set[str] = field(default_factory=set)
    _started: set[str] = field(default_factory=set)
    """Proposed calls a tool call was started for (no helper thread's call is theirs)."""
    _last_text: str | None = None
    _lock: threading.RLock = field(default_factory=threading.RLock, repr=False)
    """Held while the session journals: calls may finish on several threads at once."""
    _streams: list[StreamRecording] = field(default_factory=list, repr=False)
    _early: list[Callable[[], None]] = field(default_factory=list, repr=False)
    """The outcomes of early calls made before the session started (`acall_tool`)."""

    def __post_init__(self) -> None:
        self._order = InProposalOrder(self.recorder)

    # -- the session's start and end ---------------------------------------------------

    def start(
        self,
        request: Mapping[str, Any] | None = None,
        client_settings: Mapping[str, Any] | None = None,
    ) -> None:
        """Journal ``session_started`` once, with what the first request says of the model.

        ``client_settings`` are those of the client that makes it (``max_retries``,
        ``timeout``), when the wrapper knows them.
        """
        with self._lock:
            self._start(request or {}, client_settings)

    def _start(
        self,
        request: Mapping[str, Any],
        client_settings: Mapping[str, Any] | None = None,
        kind: str = "chat",
    ) -> None:
        if self.recorder.started:
            return
        reader = _READERS.get(kind)
        if reader is not None:
            fields = reader.start_fields(request)
            prompt: Any = fields.system_prompt
            tools: list[Any] = fields.tools
            settings = fields.model_settings
        else:
            messages = request.get("messages") or []
            chat = [
                {**message, "role": role_of(message)} if isinstance(message, Mapping) else message
                for message in messages
            ]
            prompt = system_prompt_of(chat)[0] if messages else request.get("instructions")
            tools = [tool for tool in request.get("tools") or () if isinstance(tool, Mapping)]
            settings = {k: request[k] for k in MODEL_SETTINGS if k in request}
        self.recorder.start(
            agent=self.entry,
            model=request.get("model"),
            system_prompt=prompt if isinstance(prompt, str) else "",
            tools=tools,
            model_settings={k: json_stand_in(jsonable(v)) for k, v in settings.items()},
            metadata={**self.metadata, ENTRY_INPUTS_KEY: self.inputs},
            captured_with=self.captured_with,
            client_settings=client_settings,
        )
        early, self._early = self._early, []
        for write in early:
            write()

    def settle(self) -> None:
        """Journal every tool outcome still waiting for an earlier call's."""
        with self._lock:
            self._order.flush()

    def finish(self, result: object, *, given: bool = True) -> None:
        """The session's answer is ``result``: journal it as the turn's answer (once).

        ``given=False`` (a scope ending without an answer) ends an open turn with the
        model's last text instead.
        """
        with self._lock:
            if self.recorder.ended or self.recorder.state.status == "completed":
                return
            self._end_streams()
            self.start()
            self.settle()
            if not given:
                result = self._last_text or ""
            if not isinstance(result, str):  # as JSON (NaN, huge integers as strings)
                result = canonical_bytes(json_stand_in(jsonable(result))).decode()
            self.recorder.final(result)

    def hold(self, recording: StreamRecording) -> None:
        """Keep a model stream until it is journaled: one left unclosed is at the end."""
        with self._lock:
            self._streams = [held for held in self._streams if not held.done]
            self._streams.append(recording)

    def _end_streams(self) -> None:
        """Journal what was read of each stream the code left open (the last call's, say)."""
        for recording in self._streams:
            recording.end()
        self._streams.clear()

    def fail(self, error: BaseException) -> None:
        """The entry raised ``error``: journal the halt (rule ``error``, or a `HaltSession`'s).

        A halt inside a group of exceptions (`halt_of`) is that halt.

        The outcomes still waiting for an earlier call's are journaled first, unless a
        replay stopped at that call: the halt then takes its place, naming it, where a
        later call's outcome would have looked like the change.
        """
        error = halt_of(error) or error
        with self._lock:
            if self.recorder.ended:
                return
            self._end_streams()
            self.start()
            if not (isinstance(error, HaltSession) and error.rule == REPLAY_STOPPED):
                self.settle()
            self.recorder.fail(error)

    # -- model calls -------------------------------------------------------------------

    def before_model(
        self,
        kwargs: Mapping[str, Any],
        client_settings: Mapping[str, Any] | None = None,
        *,
        kind: str = "chat",
    ) -> tuple[dict[str, Any], dict[str, Any], int]:
        """Journal what a request brings (the start, results, user input).

        ``kind`` is the request's format: ``anthropic`` reads its ``system``, ``tools`` and
        content blocks as Anthropic's Messages API defines them
        (`capture.clients.anthropic_messages`), ``genai`` its ``system_instruction``,
        ``tools`` and parts as Gemini's (`capture.clients.genai_messages`); any other, as
        OpenAI's (chat, Responses, LangChain's messages). Returns the request's record, the
        request in full, and the seq its response will take.
        """
        with self._lock:
            self.settle()
            kwargs = sent_parameters(kwargs)
            self._start(kwargs, client_settings, kind)
            record, messages = request_record(kwargs, self._messages)
            self._messages = messages
            self._journal_messages(messages, kind)
            whole = {**record["params"], record["messages_key"]: messages}
            return record, whole, self.recorder.next_seq

    def model_failed(
        self,
        record: Mapping[str, Any],
        error: BaseException,
        *,
        latency_ms: float | None = None,
        chunks: list[Any] | None = None,
        recorded: Mapping[str, Any] | None = None,
    ) -> None:
        """The model call of ``record`` raised ``error`` (a rate limit, a 500, a timeout).

        An ``Exception`` is journaled (``model_call_failed``: the request, the exception,
        the ``chunks`` a stream had sent; ``recorded`` is the exception's record when a
        replay raised it again from the recording); a ``BaseException`` (a cancellation,
        Ctrl-C) is not a call's failure but the run's. Either way no response answers its messages,
        so the next request (a retry) records them again, as sent anew. Only while no other
        request was recorded since: concurrent calls keep theirs.
        """
        with self._lock:
            start = record.get("from")
            if isinstance(start, int) and len(self._messages) == start + len(
                record.get("messages") or ()
            ):
                self._messages = self._messages[:start]
            if isinstance(error, Exception) and not self.recorder.ended:
                self.settle()
                self.recorder.model_failure(
                    error, request=record, response=chunks, latency_ms=latency_ms, record=recorded
                )

    def _journal_messages(self, messages: list[Any], kind: str = "chat") -> None:
        """Journal the user's messages since the model's last output.

        Also the results no decorated tool gave: chat ``tool`` messages, Responses
        ``function_call_output`` items and Anthropic ``tool_result`` blocks answering a
        pending call.
        """
        results: list[tuple[Any, str, bool]]
        reader = _READERS.get(kind)
        if reader is not None:
            turn = reader.turn_of(messages)
            inputs, results = turn.inputs, list(turn.results)
        else:
            inputs, results = conversation_turn(messages)
        for call_id, text, failed in results:
            self._tool_result(call_id, text, failed=failed)
        seen = len(self._inputs)
        fresh = inputs[seen:] if inputs[:seen] == self._inputs else inputs
        for text in fresh:
            self.recorder.user_input(text)
        self._inputs = inputs

    def _tool_result(self, call_id: object, text: str, *, failed: bool = False) -> None:
        """Journal the result (or the error) of a pending call that no decorated tool gave."""
        if any(call.call_id == call_id for call in self.recorder.pending):
            if failed:
                self.recorder.tool_failure(str(call_id), text, kind="business")
            else:
                self.recorder.tool_result(str(call_id), text)

    def after_model(
        self,
        kind: str,
        record: dict[str, Any],
        response: Any,
        *,
        stream: bool,
        latency_ms: float | None,
        proposal: Mapping[str, Any] | None = None,
    ) -> None:
        """Journal a response (a body, or a stream's chunk bodies) beside its request.

        ``proposal`` gives the ``action_proposed`` fields of a response of a kind that is
        not the openai client's (``chat``, ``responses``), read by its own wrapper.
        """
        with self._lock:
            if proposal is None:
                output = proposal_of(kind, response, stream=stream, latency_ms=latency_ms)
                self.recorder.model_output(output, request=record, response=response)
                text = output.text
            else:
                written = self.recorder.model_output(**proposal, request=record, response=response)
                text = written.text
            self._last_text = text
            self._inputs = []
            self._claimed = set()
            self._started = set()

    # -- tool calls --------------------------------------------------------------------

    def waits_for(self, tool: str, args: dict[str, Any]) -> bool:
        """Whether the model proposed a call of ``tool`` with ``args`` not started yet."""
        with self._lock:
            return self._waiting(tool, args, same_args=True, skip=self._started) is not None

    def _pair(self, tool: str, args: dict[str, Any]) -> str | None:
        """The waiting call a tool call answers: same tool and arguments, else same tool."""
        found = self._waiting(tool, args, same_args=True) or self._waiting(tool, args)
        if found is None:
            return None
        self._claimed.add(found.call_id)
        return found.call_id

    def _waiting(
        self,
        tool: str,
        args: dict[str, Any],
        *,
        same_args: bool = False,
        skip: Collection[str] = (),
    ) -> ToolCall | None:
        """The first proposed call of ``tool`` not answered yet (with ``args``, if asked)."""
        same = canonical_bytes(args) if same_args else None
        return next(
            (
                call
                for call in self.recorder.pending
                if call.call_id not in self._claimed
                and call.call_id not in skip
                and call.tool == tool
                and (
                    same is None
                    or (isinstance(call.args, dict) and canonical_bytes(call.args) == same)
                )
            ),
            None,
        )

    def _journal_outcome(
        self,
        tool: str,
        args: dict[str, Any],
        *,
        result: Any = None,
        error: BaseException | dict[str, Any] | None = None,
        duration_ms: float | None = None,
        started_after: frozenset[int],
        early: bool = False,
    ) -> None:
        recorder = self.recorder
        # a recorded failure (an `exception_record`) is raised again as its own type
        failure, record = (rebuilt(error), error) if isinstance(error, dict) else (error, None)

        def write(ran_after: tuple[int, ...] | None = None) -> None:
            if failure is None:
                recorder.tool_result(
                    call_id,
                    jsonable(result),
                    tool=tool,
                    args=args,
                    duration_ms=duration_ms,
                    exact=True,
                    ran_after=ran_after,
                )
            else:
                recorder.tool_failure(
                    call_id,
                    failure,
                    tool=tool,
                    args=args,
                    duration_ms=duration_ms,
                    record=record,
                    ran_after=ran_after,
                )

        with self._lock:
            call_id = self._pair(tool, args)
            if call_id is None and early and not recorder.started:
                self._early.append(write)  # journaled right after session_started
            elif call_id is None:  # a call no model output proposed: journaled where it happens
                _warn_unproposed(tool, self.recorder.pending)
                self.settle()
                write()
            else:
                self._order.add(call_id, write, started_after=started_after)

    def call_tool(
        self,
        info: ToolInfo,
        args: dict[str, Any],
        run: Callable[[], Any],
        returns: Callable[[], Any],
    ) -> Any:
        """Run (or replay) one call of a decorated tool, and journal it."""
        after, play = self._begin_call(info, args)
        if play.unfinished is not None:
            raise play.unfinished
        if not play.live:
            return self._served(info, args, play, returns, after)
        self._before_running(info)
        started = self.timer()
        running = RUNNING_TOOL.set(info.name)
        try:
            result = run()
        except Exception as error:
            self._ran(info, args, started, after, error=error)
            raise
        finally:
            RUNNING_TOOL.reset(running)
        self._ran(info, args, started, after, result=result)
        return result

    async def acall_tool(
        self,
        info: ToolInfo,
        args: dict[str, Any],
        run: Callable[[], Any],
        returns: Callable[[], Any],
        *,
        early: bool = False,
    ) -> Any:
        """`call_tool` for a coroutine function.

        ``early`` marks a call code makes before its first model request to build it (an
        MCP session's ``list_tools``): made then, it does not start the session, and its
        outcome is journaled right after ``session_started``, which the first request
        gives its model, prompt and tools.
        """
        after, play = self._begin_call(info, args, early=early)
        if play.unfinished is not None:
            await self._still_running(play.unfinished)
        if not play.live:
            return self._served(info, args, play, returns, after, early=early)
        self._before_running(info)
        started = self.timer()
        running = RUNNING_TOOL.set(info.name)
        try:
            result = await run()
        except Exception as error:
            self._ran(info, args, started, after, error=error, early=early)
            raise
        finally:
            RUNNING_TOOL.reset(running)
        self._ran(info, args, started, after, result=result, early=early)
        return result

    async def _still_running(self, stop: BaseException) -> None:
        """Wait as a call the recording never finished did, while the rest of the code runs.

        Once the session ends it waits until cancelled; ``stop`` is raised when nothing
        else runs (the code now waits on this call, where the recording did not).
        """
        for _ in range(_UNFINISHED_TURNS):
            await asyncio.sleep(0)
            if self.recorder.ended:
                await asyncio.get_running_loop().create_future()  # cancelled with the loop
        raise stop

    def _begin_call(
        self, info: ToolInfo, args: dict[str, Any], *, early: bool = False
    ) -> tuple[frozenset[int], ToolPlay]:
        """At a call's start: the calls finished before it, and what to do with it."""
        with self._lock:
            if not early:
                self.start()
            started = self._waiting(info.name, args, same_args=True, skip=self._started)
            if started is not None:
                self._started.add(started.call_id)
            return self._order.finished(), self._play(info, args)

    def _play(self, info: ToolInfo, args: dict[str, Any]) -> ToolPlay:
        if self.player is None:
            return ToolPlay(live=True)
        return self.player.tool(info.name, args, side_effects=info.side_effects, pure=info.pure)

    def _served(
        self,
        info: ToolInfo,
        args: dict[str, Any],
        play: ToolPlay,
        returns: Callable[[], Any],
        after: frozenset[int],
        *,
        early: bool = False,
    ) -> Any:
        if play.error is not None:
            self._journal_outcome(
                info.name, args, error=play.error, started_after=after, early=early
            )
            raise rebuilt(play.error)
        self._journal_outcome(info.name, args, result=play.result, started_after=after, early=early)
        if play.as_sent:
            return text_as_return_type(play.result, returns())
        return as_return_type(play.result, returns())

    def _before_running(self, info: ToolInfo) -> None:
        """A tool with side effects runs only once the events leading to it are durable."""
        if info.side_effects:
            self.recorder.output.flush()

    def _ran(
        self,
        info: ToolInfo,
        args: dict[str, Any],
        started: float,
        after: frozenset[int],
        *,
        result: Any = None,
        error: BaseException | None = None,
        early: bool = False,
    ) -> None:
        """Journal the outcome of a call that ran for real, started at ``started``."""
        duration_ms = round((self.timer() - started) * 1000, 3)
        self._journal_outcome(
            info.name,
            args,
            result=result,
            error=error,
            duration_ms=duration_ms,
            started_after=after,
            early=early,
        )


_WARNED: set[str] = set()
_WARNED_LOCK = threading.Lock()
log = logging.getLogger("capture")


def _warn_unproposed(tool: str, pending: Sequence[ToolCall]) -> None:
    """Warn once (per tool, per process) of a decorated tool called while others wait.

    The model's calls of other tools wait for their results: this tool's name is most
    likely not the one the model uses, so its outcome answers none of them, and a replay
    diverges there with no other hint.
    """
    waiting = sorted({call.tool for call in pending})
    if not waiting or tool in waiting:
        return
    with _WARNED_LOCK:
        if tool in _WARNED:
            return
        _WARNED.add(tool)
    log.warning(
        "agent-journal: tool %s ran while the model's calls of %s wait for their results, and "
        "the model proposed no call named %s: its outcome is journaled as a call of the code's "
        "own. If it is the tool the model calls %s, register it under that name "
        "(@capture.tool(name=%r))",
        tool,
        ", ".join(waiting),
        tool,
        waiting[0],
        waiting[0],
    )


def inside_a_tool(tool: str | None, *, side_effects: bool = False) -> str | None:
    """The decorated tool whose run a call is part of, if any.

    The call is of the decorated tool ``tool``, or of the model (None); a decorated tool
    that runs for real in this context makes it part of its run, and it runs as it is. It
    is not journaled on its own: in a replay the outer tool's recorded outcome stands for
    both, and the inner call never happens. When the outer tool runs for real in a replay,
    the inner call runs too, unless it is a tool with side effects that were not allowed or
    the model without a live model (`Player.nested`). (An entry called there opens a session
    of its own: `Capture.session`.)
    """
    outer = RUNNING_TOOL.get()
    if outer is not None:
        target = replay_target()
        if target is not None:
            target.player.nested(tool, outer, side_effects=side_effects)
    return outer
