"""One conversation through the proxy: its exchanges journaled as one session.

A `ProxySession` journals what each request brings (on the first, ``session_started``;
then the tool results answering the model's calls and the user's new messages), each
response beside its request (``action_proposed``, with the request's record and the raw
body or chunk bodies), and each failed call (``model_call_failed``). A response without
tool calls is the turn's answer: it is journaled (``agent_completed``) when the turn is
over, that is when the next request brings a new user message or the session is closed,
so an agent that asks again without one (a second sample) records a second response, not
an error.

It also keeps what the proxy finds a conversation by (`capture.proxy.conversations`):
the messages of its last request, the ids of its responses, the key of the model's last
reply. In a replay its ``player`` (`capture.Player`) answers instead of the upstream.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from journal import HaltSession, canonical_bytes, json_stand_in

from ..play import Player
from ..recorder import Recorder
from ..requests import request_record
from .wire import ReplyKey, Wire, proposal_key

__all__ = ["CAPTURED_WITH", "Exchange", "ProxySession"]

CAPTURED_WITH = "proxy"
"""The ``captured_with`` of sessions the proxy recorded."""


@dataclass(frozen=True)
class Exchange:
    """One request as its session journaled it: its record, itself in full, its seq."""

    record: dict[str, Any]
    whole: dict[str, Any]
    seq: int
    """Where its response (or failure) is journaled."""
    started: float = field(default_factory=time.perf_counter)


@dataclass
class ProxySession:
    """One conversation's session; see the module."""

    recorder: Recorder
    wire: Wire
    metadata: dict[str, Any]
    """Kept in ``session_started`` (the proxy's own and the request headers')."""
    name: str | None = None
    """The name the conversation's requests give (``X-Agent-Journal-Session``)."""
    player: Player | None = None
    last_messages: tuple[bytes, ...] = ()
    """The canonical bytes of each message of the last request."""
    last_failed: bool = False
    reply: ReplyKey | None = None
    """The key of the model's last reply."""
    response_ids: set[str] = field(default_factory=set)
    touched: float = field(default_factory=time.monotonic)
    """When its last exchange began or ended (its idle time counts from there)."""
    busy: int = 0
    """Its exchanges under way: an idle expiry never closes it while one is."""
    closed: bool = False
    _messages: list[Any] = field(default_factory=list)
    _inputs: list[str] = field(default_factory=list)
    _answer: str | None = None
    """The text of the last response, when it called no tool: the turn's answer."""
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False)

    @property
    def session_id(self) -> str:
        """The session's id."""
        return self.recorder.session_id

    def claim(self, messages: tuple[bytes, ...]) -> None:
        """Take a request of the conversation: it is now its last (see `conversations`)."""
        with self.lock:
            self.last_messages = messages
            self.last_failed = False
            self.busy += 1
            self.touched = time.monotonic()

    def done(self) -> None:
        """An exchange `claim` took is over (answered, failed or refused)."""
        with self.lock:
            self.busy -= 1
            self.touched = time.monotonic()

    def begin(self, request: Mapping[str, Any]) -> Exchange:
        """Journal what ``request`` brings; return its `Exchange`.

        Raises:
            HaltSession: the session ended (its replay stopped): it takes no request.
        """
        with self.lock:
            recorder = self.recorder
            if recorder.ended or self.closed:
                state = recorder.state
                raise HaltSession(
                    str(state.halt_rule or "closed"),
                    f"session {self.session_id} ended at seq {state.last_seq}"
                    + (f": {state.halt_reason}" if state.halt_reason else ""),
                )
            if not recorder.started:
                fields = self.wire.start(request)
                recorder.start(
                    model=fields.model,
                    system_prompt=fields.system_prompt,
                    tools=fields.tools,
                    model_settings=json_stand_in(fields.model_settings),
                    metadata=self.metadata,
                    captured_with=CAPTURED_WITH,
                )
            record, messages = request_record(request, self._messages)
            self._messages = messages
            turn = self.wire.turn(messages)
            for call_id, text, is_error in turn.results:
                if any(call.call_id == call_id for call in recorder.pending):
                    if is_error:
                        recorder.tool_failure(call_id, text, kind="business")
                    else:
                        recorder.tool_result(call_id, text)
            seen = len(self._inputs)
            fresh = turn.inputs[seen:] if turn.inputs[:seen] == self._inputs else turn.inputs
            if fresh:
                self._end_turn()
            for text in fresh:
                recorder.user_input(text)
            self._inputs = turn.inputs
            whole = {**record["params"], record["messages_key"]: messages}
            return Exchange(record, whole, recorder.next_seq)

    def answered(self, exchange: Exchange, response: Any, *, stream: bool) -> None:
        """Journal the response to ``exchange`` (a body, or a stream's chunk bodies)."""
        latency = round((time.perf_counter() - exchange.started) * 1000, 3)
        proposal = self.wire.proposal(response, stream, latency)
        with self.lock:
            self.recorder.model_output(proposal, request=exchange.record, response=response)
            self._inputs = []
            self._answer = None if proposal.calls else proposal.text or ""
            self.reply = proposal_key(proposal)
            found = _response_id(response, stream)
            if found is not None:
                self.response_ids.add(found)

    def failed(
        self,
        exchange: Exchange,
        error: Exception,
        *,
        chunks: list[Any] | None = None,
        recorded: Mapping[str, Any] | None = None,
    ) -> None:
        """Journal that the call of ``exchange`` failed (``model_call_failed``).

        No response answers its messages, so the next request (a retry) journals them
        again, as sent anew. ``recorded`` is the error's record when a replay gives it.
        """
        latency = round((time.perf_counter() - exchange.started) * 1000, 3)
        with self.lock:
            record = exchange.record
            start = record.get("from")
            if isinstance(start, int) and len(self._messages) == start + len(
                record.get("messages") or ()
            ):
                self._messages = self._messages[:start]
            self.last_failed = True
            self.recorder.model_failure(
                error, request=record, response=chunks, latency_ms=latency, record=recorded
            )

    def stopped(self, halt: HaltSession) -> None:
        """A replay stopped here: journal the halt (its rule and reason)."""
        with self.lock:
            if not self.recorder.ended:
                self.recorder.fail(halt)

    def close(self) -> None:
        """The conversation is over: journal its answer, write it if sampled (once)."""
        with self.lock:
            if self.closed:
                return
            self.closed = True
            if self.recorder.started and not self.recorder.ended:
                self._end_turn()
            self.recorder.close()

    def _end_turn(self) -> None:
        if self._answer is not None and self.recorder.state.status != "completed":
            self.recorder.final(self._answer)
        self._answer = None


def _response_id(response: Any, stream: bool) -> str | None:
    """The id of a response (the Responses API's ``previous_response_id`` names it)."""
    if stream and isinstance(response, list):
        for chunk in reversed(response):
            inner = chunk.get("response") if isinstance(chunk, Mapping) else None
            if isinstance(inner, Mapping) and isinstance(inner.get("id"), str):
                return str(inner["id"])
        return None
    found = response.get("id") if isinstance(response, Mapping) else None
    return found if isinstance(found, str) else None


def message_keys(messages: object) -> tuple[bytes, ...]:
    """The canonical bytes of each message of a request (a bare string: one message)."""
    items = messages if isinstance(messages, list) else [] if messages is None else [messages]
    return tuple(canonical_bytes(json_stand_in(item)) for item in items)
