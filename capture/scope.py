"""Capture of the user's own code: an entry function, its model client and its tools.

Three wrappers, and the code between them stays as it is::

    from openai import OpenAI
    from capture import Capture

    capture = Capture("agent-journal.db")
    client = capture.openai(OpenAI())          # chat.completions.create, responses.create

    @capture.tool
    def lookup_order(order_id: str) -> dict: ...

    @capture.tool(side_effects=True)           # never run by a replay unless allowed
    def send_email(to: str, body: str) -> str: ...

    @capture.entry                             # each call is one session
    def answer(question: str) -> str:
        ...  # the loop you already have: client.chat.completions.create, your tools

A call of ``answer(...)`` is one session, whose ``session_started`` names the entry
(``module:qualname``, what ``agent-journal replay`` calls again, under the trust list) and
keeps its arguments. Inside it, each model call is journaled as ``action_proposed`` with
the request beside the raw response (`capture.requests`), the user messages a
request brings as ``user_input``, each decorated tool's call with its arguments exactly as
received and its outcome (the value, or the exception with its type: `exception_record`),
in the order the model proposed the calls; the entry's return value ends the turn
(``agent_completed``) and an exception escaping it fails the session (``agent_halted``,
rule ``error``) before it propagates. Outside an entry the wrappers call straight through.
`Capture.session` is the same scope around any block (the entry decorator uses it), with
metadata and tags given at open.

Where the events go, and how (fail open to a spool, redaction, tail sampling), is the
capture's `Destination` (`capture.output`).

Inside `capture.replaying` (what a replay sets up), the same calls are journaled
the same way, but their outcomes come from the replay's `Player`.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import sys
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, overload

from journal import ENTRY_INPUTS_KEY, HaltSession, Journal, ToolCall, canonical_bytes, json_stand_in
from journal.formats import MODEL_SETTINGS, Redactor, content_text, system_prompt_of

from .clients.openai_streams import StreamRecording
from .exceptions import rebuilt
from .order import InProposalOrder
from .output import Destination, Sampling
from .placement import current_session, opened, session_of_call
from .play import REPLAY_STOPPED, Player, ToolPlay, replay_target
from .recorder import Recorder
from .requests import jsonable, proposal_of, request_record, sent_parameters
from .returns import as_return_type, return_type, text_as_return_type
from .spool import Spool

__all__ = [
    "CAPTURED_WITH",
    "Capture",
    "CapturedSession",
    "ToolInfo",
    "reference_of",
]

CAPTURED_WITH = "entry"
"""The ``captured_with`` metadata of sessions captured around an entry function."""

F = TypeVar("F", bound=Callable[..., Any])


def reference_of(function: Callable[..., Any]) -> str:
    """``module:qualname`` of a function, with ``__main__`` named as the file it runs from.

    A file run as a script inside a package (``python pkg/app.py``) is named as its package
    imports it (``pkg.app``): the folders up to the first without an ``__init__.py``.
    """
    module = function.__module__
    if module == "__main__":
        main = sys.modules.get("__main__")
        spec = getattr(main, "__spec__", None)
        if spec is not None and spec.name:
            module = spec.name
        elif getattr(main, "__file__", None):
            module = _module_of(Path(str(getattr(main, "__file__", ""))).resolve())
    return f"{module}:{function.__qualname__}"


def is_method(function: Callable[..., Any]) -> bool:
    """Whether ``function`` is a method: defined in a class, taking ``self`` or ``cls`` first.

    Its receiver is no JSON value: a tool's is left out of its recorded arguments, and a
    method entry cannot be replayed.
    """
    owner = getattr(function, "__qualname__", "").rpartition(".")[0]
    if not owner or owner.endswith("<locals>"):
        return False
    try:
        first = next(iter(inspect.signature(function).parameters), None)
    except (TypeError, ValueError):
        return False
    return first in ("self", "cls")


def _module_of(path: Path) -> str:
    names = [path.stem]
    folder = path.parent
    while (folder / "__init__.py").is_file() and folder.parent != folder:
        names.append(folder.name)
        folder = folder.parent
    return ".".join(reversed(names))


@dataclass(frozen=True)
class ToolInfo:
    """A decorated tool: its name and whether running it touches the world."""

    name: str
    side_effects: bool


_MODEL_ITEM_TYPES = frozenset({"function_call", "reasoning", "custom_tool_call"})

_RUNNING: ContextVar[str | None] = ContextVar("agent_journal_running_tool", default=None)
"""The decorated tool running for real in this context (its thread, its task and the tasks
it starts): a decorated tool it calls is part of its run (`inside_a_tool`)."""

_UNFINISHED_TURNS = 100
"""Event-loop turns a replayed call the recording never finished waits for the rest of the
code to end the session (a replay serves everything at once: a sibling's recorded failure
ends the entry within a few turns)."""


def _from_model(item: Any) -> bool:
    """Whether a conversation item is the model's own output (chat or Responses API)."""
    if not isinstance(item, dict):
        return False
    return item.get("role") == "assistant" or item.get("type") in _MODEL_ITEM_TYPES


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
    _messages: list[Any] = field(default_factory=list)
    _inputs: list[str] = field(default_factory=list)
    _claimed: set[str] = field(default_factory=set)
    _started: set[str] = field(default_factory=set)
    """Proposed calls a tool call was started for (no helper thread's call is theirs)."""
    _last_text: str | None = None
    _lock: threading.RLock = field(default_factory=threading.RLock, repr=False)
    """Held while the session journals: calls may finish on several threads at once."""
    _streams: list[StreamRecording] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        self._order = InProposalOrder(self.recorder)

    # -- the session's start and end ---------------------------------------------------

    def start(self, request: Mapping[str, Any] | None = None) -> None:
        """Journal ``session_started`` once, with what the first request says of the model."""
        with self._lock:
            self._start(request or {})

    def _start(self, request: Mapping[str, Any]) -> None:
        if self.recorder.started:
            return
        messages = request.get("messages") or []
        prompt = system_prompt_of(messages)[0] if messages else request.get("instructions")
        self.recorder.start(
            agent=self.entry,
            model=request.get("model"),
            system_prompt=prompt if isinstance(prompt, str) else "",
            tools=[tool for tool in request.get("tools") or () if isinstance(tool, Mapping)],
            model_settings={
                k: json_stand_in(jsonable(request[k])) for k in MODEL_SETTINGS if k in request
            },
            metadata={**self.metadata, ENTRY_INPUTS_KEY: self.inputs},
            captured_with=CAPTURED_WITH,
        )

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

        The outcomes still waiting for an earlier call's are journaled first, unless a
        replay stopped at that call: the halt then takes its place, naming it, where a
        later call's outcome would have looked like the change.
        """
        with self._lock:
            if self.recorder.ended:
                return
            self._end_streams()
            self.start()
            if not (isinstance(error, HaltSession) and error.rule == REPLAY_STOPPED):
                self.settle()
            self.recorder.fail(error)

    # -- model calls -------------------------------------------------------------------

    def before_model(self, kwargs: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any], int]:
        """Journal what a request brings (the start, results, user input).

        Returns the request's record, the request in full, and the seq its response will
        take.
        """
        with self._lock:
            self.settle()
            kwargs = sent_parameters(kwargs)
            self.start(kwargs)
            record, messages = request_record(kwargs, self._messages)
            self._messages = messages
            self._journal_messages(messages)
            whole = {**record["params"], record["messages_key"]: messages}
            return record, whole, self.recorder.next_seq

    def model_failed(self, record: Mapping[str, Any]) -> None:
        """The model call of ``record`` raised (a rate limit, a timeout).

        No response answers its messages, so the next request (a retry) records them again,
        as sent anew. Only while no other request was recorded since: concurrent calls keep theirs.
        """
        with self._lock:
            start = record.get("from")
            if isinstance(start, int) and len(self._messages) == start + len(
                record.get("messages") or ()
            ):
                self._messages = self._messages[:start]

    def _journal_messages(self, messages: list[Any]) -> None:
        """Journal the user's messages since the model's last output.

        Also the results no decorated tool gave: chat ``tool`` messages and Responses
        ``function_call_output`` items answering a pending call.
        """
        last = max((i for i, item in enumerate(messages) if _from_model(item)), default=-1)
        inputs: list[str] = []
        for message in messages[last + 1 :]:
            if isinstance(message, str):
                inputs.append(message)
                continue
            if not isinstance(message, dict):
                continue
            text, _ = content_text(message.get("content"))
            if message.get("role") == "user":
                inputs.append(text)
            elif message.get("role") == "tool":
                self._tool_result(message.get("tool_call_id"), text)
            elif message.get("type") == "function_call_output":
                output = message.get("output")
                self._tool_result(
                    message.get("call_id"),
                    output if isinstance(output, str) else content_text(output)[0],
                )
        seen = len(self._inputs)
        fresh = inputs[seen:] if inputs[:seen] == self._inputs else inputs
        for text in fresh:
            self.recorder.user_input(text)
        self._inputs = inputs

    def _tool_result(self, call_id: object, text: str) -> None:
        """Journal the result of a pending call that no decorated tool gave."""
        if any(call.call_id == call_id for call in self.recorder.pending):
            self.recorder.tool_result(str(call_id), text)

    def after_model(
        self,
        kind: str,
        record: dict[str, Any],
        response: Any,
        *,
        stream: bool,
        latency_ms: float | None,
    ) -> None:
        """Journal a response (a body, or a stream's chunk bodies) beside its request."""
        proposal = proposal_of(kind, response, stream=stream, latency_ms=latency_ms)
        with self._lock:
            self.recorder.model_output(proposal, request=record, response=response)
            self._last_text = proposal.text
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
            if call_id is None:  # a call no model output proposed: journaled where it happens
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
        started = self.timer()
        running = _RUNNING.set(info.name)
        try:
            result = run()
        except Exception as error:
            self._ran(info, args, started, after, error=error)
            raise
        finally:
            _RUNNING.reset(running)
        self._ran(info, args, started, after, result=result)
        return result

    async def acall_tool(
        self,
        info: ToolInfo,
        args: dict[str, Any],
        run: Callable[[], Any],
        returns: Callable[[], Any],
    ) -> Any:
        """`call_tool` for a coroutine function."""
        after, play = self._begin_call(info, args)
        if play.unfinished is not None:
            await self._still_running(play.unfinished)
        if not play.live:
            return self._served(info, args, play, returns, after)
        started = self.timer()
        running = _RUNNING.set(info.name)
        try:
            result = await run()
        except Exception as error:
            self._ran(info, args, started, after, error=error)
            raise
        finally:
            _RUNNING.reset(running)
        self._ran(info, args, started, after, result=result)
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

    def _begin_call(self, info: ToolInfo, args: dict[str, Any]) -> tuple[frozenset[int], ToolPlay]:
        """At a call's start: the calls finished before it, and what to do with it."""
        with self._lock:
            self.start()
            started = self._waiting(info.name, args, same_args=True, skip=self._started)
            if started is not None:
                self._started.add(started.call_id)
            return self._order.finished(), self._play(info, args)

    def _play(self, info: ToolInfo, args: dict[str, Any]) -> ToolPlay:
        if self.player is None:
            return ToolPlay(live=True)
        return self.player.tool(info.name, args, side_effects=info.side_effects)

    def _served(
        self,
        info: ToolInfo,
        args: dict[str, Any],
        play: ToolPlay,
        returns: Callable[[], Any],
        after: frozenset[int],
    ) -> Any:
        if play.error is not None:
            self._journal_outcome(info.name, args, error=play.error, started_after=after)
            raise rebuilt(play.error)
        self._journal_outcome(info.name, args, result=play.result, started_after=after)
        if play.as_sent:
            return text_as_return_type(play.result, returns())
        return as_return_type(play.result, returns())

    def _ran(
        self,
        info: ToolInfo,
        args: dict[str, Any],
        started: float,
        after: frozenset[int],
        *,
        result: Any = None,
        error: BaseException | None = None,
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
    outer = _RUNNING.get()
    if outer is not None:
        target = replay_target()
        if target is not None:
            target.player.nested(tool, outer, side_effects=side_effects)
    return outer


def _joins_a_session() -> bool:
    """Whether an entry or session block starting here is part of the current session.

    It is when there is one, and no decorated tool runs for real here outside a replay
    (`Capture.session`).
    """
    return current_session() is not None and (_RUNNING.get() is None or replay_target() is not None)


class Capture:
    """Captures entry functions, a model client and tools into a journal.

    Args:
        journal: a `Journal`, or where to open one (a path or a ``postgresql://`` URL),
            opened at the first write.
        metadata: kept in every session's ``session_started``.
        fail_open: when the journal cannot take a write, spool the session and let the
            call go on (default); False raises the journal's error instead.
        spool: where spooled sessions go (default: beside the journal; see
            `capture.output.Destination`).
        redactor: redact every event before it is written (`journal.formats.Redactor`).
        sampling: tail sampling (`Sampling`); its share and rule go into each session's
            metadata (``sampling``).
    """

    def __init__(
        self,
        journal: Journal | str | Path,
        *,
        metadata: Mapping[str, Any] | None = None,
        fail_open: bool = True,
        spool: Spool | str | Path | None = None,
        redactor: Redactor | None = None,
        sampling: Sampling | None = None,
    ) -> None:
        self.destination = Destination(
            journal, fail_open=fail_open, spool=spool, redactor=redactor, sampling=sampling
        )
        """Where sessions go, and how (redaction, sampling, the spool)."""
        self.metadata = dict(metadata or {})
        if sampling is not None:  # given to a replay too, so its metadata matches
            self.metadata["sampling"] = sampling.record()
        self.tools: dict[str, ToolInfo] = {}
        """The decorated tools by name (a replay checks its live tools against them)."""

    @property
    def journal(self) -> Journal:
        """The journal sessions go to (opened on first use)."""
        return self.destination.journal

    @journal.setter
    def journal(self, journal: Journal) -> None:
        self.destination.journal = journal

    def openai(self, client: F) -> F:
        """The openai client (``OpenAI`` or ``AsyncOpenAI``), journaling inside sessions."""
        from .clients.openai import captured_client

        wrapped: F = captured_client(client)
        return wrapped

    # -- tools -------------------------------------------------------------------------

    @overload
    def tool(self, function: F, /) -> F: ...

    @overload
    def tool(
        self, function: None = None, /, *, name: str | None = None, side_effects: bool = False
    ) -> Callable[[F], F]: ...

    def tool(
        self, function: Any = None, /, *, name: str | None = None, side_effects: bool = False
    ) -> Any:
        """Decorate a tool: journal its calls inside sessions, replay them from the record.

        ``side_effects=True`` marks a tool that changes the world (sends, writes, pays): a
        replay never runs it for real unless allowed by name.
        """

        def decorate(function: F) -> F:
            info = ToolInfo(name or function.__name__, side_effects)
            self.tools[info.name] = info
            signature = inspect.signature(function)
            # resolved at the first served result: a later class may be named before it exists
            returns = functools.cache(functools.partial(return_type, function))
            receiver = next(iter(signature.parameters)) if is_method(function) else None

            def arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
                bound = signature.bind(*args, **kwargs)
                # (NaN or an integer past 64 bits, as a model may send, as strings: the
                # call goes on, and pairs with its recorded outcome in a replay)
                return {
                    key: json_stand_in(jsonable(value))
                    for key, value in bound.arguments.items()
                    if key != receiver
                }

            if inspect.iscoroutinefunction(function):

                @functools.wraps(function)
                async def arun(*args: Any, **kwargs: Any) -> Any:
                    if inside_a_tool(info.name, side_effects=info.side_effects):
                        return await function(*args, **kwargs)
                    session = session_of_call(
                        f"tool {info.name}", lambda: (info.name, arguments(args, kwargs))
                    )
                    if session is None:
                        return await function(*args, **kwargs)
                    return await session.acall_tool(
                        info, arguments(args, kwargs), lambda: function(*args, **kwargs), returns
                    )

                return arun  # type: ignore[return-value]

            @functools.wraps(function)
            def run(*args: Any, **kwargs: Any) -> Any:
                if inside_a_tool(info.name, side_effects=info.side_effects):
                    return function(*args, **kwargs)
                session = session_of_call(
                    f"tool {info.name}", lambda: (info.name, arguments(args, kwargs))
                )
                if session is None:
                    return function(*args, **kwargs)
                return session.call_tool(
                    info, arguments(args, kwargs), lambda: function(*args, **kwargs), returns
                )

            return run  # type: ignore[return-value]

        return decorate if function is None else decorate(function)

    # -- entries -----------------------------------------------------------------------

    @overload
    def entry(self, function: F, /) -> F: ...

    @overload
    def entry(self, function: None = None, /, *, name: str | None = None) -> Callable[[F], F]: ...

    def entry(self, function: Any = None, /, *, name: str | None = None) -> Any:
        """Decorate the function that runs one session (one call, one session).

        ``name`` overrides the recorded reference (``module:qualname``); a replay calls
        what it names, with the recorded arguments (so they should be JSON values).
        """

        def decorate(function: F) -> F:
            reference = name or reference_of(function)

            def inputs(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
                # as text: a replay passes dicts back with their keys in their own order
                given = {"args": jsonable(list(args)), "kwargs": jsonable(kwargs)}
                return json.dumps(given, ensure_ascii=False)

            if inspect.iscoroutinefunction(function):

                @functools.wraps(function)
                async def arun(*args: Any, **kwargs: Any) -> Any:
                    if _joins_a_session():
                        return await function(*args, **kwargs)
                    with self.session(entry=reference, inputs=inputs(args, kwargs)) as session:
                        result = await function(*args, **kwargs)
                        session.finish(result)
                        return result

                arun.__capture__ = self  # type: ignore[attr-defined]
                return arun  # type: ignore[return-value]

            @functools.wraps(function)
            def run(*args: Any, **kwargs: Any) -> Any:
                if _joins_a_session():
                    return function(*args, **kwargs)
                with self.session(entry=reference, inputs=inputs(args, kwargs)) as session:
                    result = function(*args, **kwargs)
                    session.finish(result)
                    return result

            run.__capture__ = self  # type: ignore[attr-defined]
            return run  # type: ignore[return-value]

        return decorate if function is None else decorate(function)

    @contextmanager
    def session(
        self,
        *,
        entry: str | None = None,
        inputs: Any = None,
        metadata: Mapping[str, Any] | None = None,
        tags: Sequence[str] = (),
    ) -> Iterator[CapturedSession]:
        """One session around a block: the wrapped client and tools journal into it.

        What `entry` does for a function, for any block of code::

            with capture.session(metadata={"customer": "c-42"}, tags=["beta"]) as session:
                ...  # client.chat.completions.create, decorated tools
                session.finish(answer)  # optional: else the model's last text ends the turn

        An exception escaping the block (a cancellation too) ends the session as failed
        (``agent_halted``, rule ``error``, with the exception's record) and propagates.
        ``metadata`` and ``tags`` (as ``metadata.tags``) join the capture's metadata in
        ``session_started``; ``entry`` is the ``module:qualname`` a replay calls with
        ``inputs``, which are recorded as ``metadata.entry_inputs`` (JSON text; a string is
        kept as it is). In a replay (inside `replaying`) the session is the replay's. Inside
        a session already, the block is part of that one; but inside a decorated tool that
        runs for real (an agent used as a tool), outside a replay, it is a session of its
        own, replayable on its own: the outer session records the tool's outcome.
        """
        outer = current_session()
        target = replay_target()
        if outer is not None and _joins_a_session():
            yield outer  # inside a session already: the block is part of it
            return
        if target is None:
            recorder = Recorder(self.destination)
            player = None
        else:
            recorder = Recorder(
                target.journal,
                target.session_id,
                clock=target.clock,
                replay_of=target.replay_of,
                order=target.order,
            )
            player = target.player
        given = {**self.metadata, **dict(metadata or {})}
        if tags:
            given["tags"] = list(tags)
        session = CapturedSession(
            recorder,
            entry=entry,
            inputs=inputs if isinstance(inputs, str) else json.dumps(jsonable(inputs)),
            metadata=given,
            player=player,
        )
        running = _RUNNING.set(None)  # its tools are its own, not part of an outer tool
        try:
            with opened(session):
                yield session
                session.finish(None, given=False)
        except GeneratorExit:
            raise
        except BaseException as error:  # a cancellation, a Ctrl-C end it as failed too
            session.fail(error)
            raise
        finally:
            _RUNNING.reset(running)
            recorder.close()
