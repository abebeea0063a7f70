"""Which conversation a request belongs to: named by a header, or found by continuity.

An agent that can send a header names its conversation (``X-Agent-Journal-Session``):
every request with that name is one session. Otherwise a request belongs to the
conversation it continues:

* a Responses API request with ``previous_response_id`` continues the one that response
  was sent in;
* else one whose last request's messages begin the new request's (the new one has more:
  the model's reply, a tool's result, the user's next message); a request equal to a
  conversation's last request continues it only when that request failed (a retry). Of
  several, the one whose last reply is the message that follows the shared part wins
  (it was that conversation's answer), then the one with the most messages in common,
  then the one touched last;
* else it begins a new conversation.

Finding and claiming happen under one lock, so two requests never continue the same
request of a conversation: identical requests of two agents that run at once get a
session each. (Two concurrent requests of one conversation, where an agent asks the
model twice at once, need the header: the second would begin a conversation of its own.)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from .session import ProxySession, message_keys
from .wire import ReplyKey, Wire

__all__ = ["Conversations", "FoundBy", "messages_of"]

FoundBy = str
"""How a conversation was found: ``header`` or ``continuity``."""


def messages_of(request: Mapping[str, Any]) -> Any:
    """A request's conversation: ``messages``, or the Responses API's ``input``."""
    return (
        request.get("input")
        if "input" in request and "messages" not in request
        else (request.get("messages"))
    )


def _follows(reply: ReplyKey | None, message: ReplyKey | None) -> bool:
    """Whether a message carried back is the reply a conversation got last."""
    if reply is None or message is None:
        return False
    if reply[1] or message[1]:
        return bool(set(reply[1]) & set(message[1]))
    return reply[0] == message[0]


class Conversations:
    """The open conversations of one proxy; see the module."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sessions: list[ProxySession] = []

    def take(
        self,
        wire: Wire,
        request: Mapping[str, Any],
        name: str | None,
        open_new: Callable[[FoundBy], ProxySession | str],
    ) -> ProxySession | str:
        """The conversation ``request`` belongs to, claimed; or a new one ``open_new`` gives.

        ``open_new`` may refuse (a replay with no recorded session left for it): its
        reason is returned.
        """
        messages = messages_of(request)
        keys = message_keys(messages)
        with self._lock:
            found = self._find(wire, request, name, keys, messages)
            if found is None:
                opened = open_new("header" if name else "continuity")
                if isinstance(opened, str):
                    return opened
                self._sessions.append(opened)
                found = opened
            found.claim(keys)
            return found

    def _find(
        self,
        wire: Wire,
        request: Mapping[str, Any],
        name: str | None,
        keys: tuple[bytes, ...],
        messages: Any,
    ) -> ProxySession | None:
        if name is not None:
            named = [s for s in self._sessions if s.name == name and not s.closed]
            return named[-1] if named else None
        previous = request.get("previous_response_id")
        if isinstance(previous, str):
            return next((s for s in self._sessions if previous in s.response_ids), None)
        best: tuple[bool, int, float] | None = None
        found = None
        for session in self._sessions:
            last = session.last_messages
            if session.name is not None or session.closed or session.wire is not wire:
                continue
            if len(last) < len(keys) and keys[: len(last)] == last:
                following = messages[len(last)] if isinstance(messages, list) else None
                score = (
                    _follows(session.reply, wire.reply_key(following)),
                    len(last),
                    session.touched,
                )
            elif last == keys and session.last_failed:
                score = (True, len(last), session.touched)
            else:
                continue
            if best is None or score > best:
                best, found = score, session
        return found

    def sessions(self) -> list[ProxySession]:
        """Every conversation still open."""
        with self._lock:
            return list(self._sessions)

    def expire(self, idle_seconds: float) -> list[ProxySession]:
        """Forget the conversations untouched for ``idle_seconds``; return them to close.

        One with an exchange under way is never idle, however long the exchange lasts.
        """
        now = time.monotonic()
        with self._lock:
            idle = [s for s in self._sessions if not s.busy and now - s.touched > idle_seconds]
            self._sessions = [s for s in self._sessions if s not in idle]
        return idle
