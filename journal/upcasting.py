"""Schema versions per event type, and upcasters that lift old records to the current version.

A stored record keeps the version it was written at (``v``). Reading it runs the
registered upcasters ``v -> v+1 -> ... -> current`` over the payload before validation, so
the stored bytes never change. A type nobody registered, a version newer than the code,
or an old version with a missing step are errors that name the type and the version.

The project's own steps, registered here:

* ``session_started`` v1 -> v2: the guardrails that v2 added take the values that
  reproduce how a v1 session ran (`PREDATED_SETTINGS`): no limit on identical failures,
  an empty reply taken as the answer, tool results recorded whole. So an old session,
  resumed or replayed, behaves as it did, while new sessions get the new defaults.
  v2 -> v3: no ``client_settings`` (None), and ``model_retries`` 0 (a failed model call
  halted the session).

What a recording holds depends on the version of its ``session_started``: a session
recorded before a fact was journaled (`PREDATED_FACTS`) is judged by what it holds, never
by the absence of what it could not hold. `predates` is that one rule, for every replay:
a v2 session's replay journals no failed model calls (its recording has none: a failure
is raised again from its halt, as it was then) and compares no client settings.
* ``action_failed`` v1 -> v2: ``abandoned`` is False (v1 did not record it); v2 -> v3:
  no ``error`` record (None); v3 -> v4: no ``ran_after`` (None: the order was not told).
* ``action_proposed`` v1 -> v2: each call's ``arguments`` text is written from its
  ``args`` (a v1 record kept only the object, its keys sorted by the canonical bytes);
  ``request`` and ``response`` are absent (None).
* ``agent_halted`` v1 -> v2: no ``error`` record (None).
* ``action_committed`` v1 -> v2: no ``result_text`` (None); v2 -> v3: no ``ran_after``
  (None).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .errors import UnknownEventTypeError, UnknownVersionError
from .events import EVENT_TYPES, arguments_text

__all__ = [
    "PREDATED_FACTS",
    "PREDATED_SETTINGS",
    "Upcaster",
    "current_version",
    "predated_settings",
    "predates",
    "register_upcaster",
    "unregister_upcaster",
    "upcast",
    "upcasters",
]

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]
"""A function from a payload at version ``v`` to the same payload at version ``v + 1``."""

_UPCASTERS: dict[tuple[str, int], Upcaster] = {}


def current_version(event_type: str) -> int:
    """Return the version new events of ``event_type`` are written at."""
    model = EVENT_TYPES.get(event_type)
    if model is None:
        raise UnknownEventTypeError(
            f"unknown event type {event_type!r} (known: {', '.join(sorted(EVENT_TYPES))})"
        )
    return model.VERSION


def register_upcaster(event_type: str, from_version: int) -> Callable[[Upcaster], Upcaster]:
    """Register a function that lifts ``event_type`` payloads from ``from_version`` by one.

    Use as a decorator::

        @register_upcaster("user_input", 0)
        def _rename_message(payload):
            return {**payload, "text": payload.pop("message")}
    """
    current = current_version(event_type)
    if from_version >= current:
        raise UnknownVersionError(
            f"cannot upcast {event_type!r} from v{from_version}: current version is v{current}"
        )

    def decorate(function: Upcaster) -> Upcaster:
        _UPCASTERS[(event_type, from_version)] = function
        return function

    return decorate


def upcasters() -> dict[tuple[str, int], Upcaster]:
    """Return a copy of the registry, keyed by (event type, version it lifts from)."""
    return dict(_UPCASTERS)


def unregister_upcaster(event_type: str, from_version: int) -> None:
    """Remove a registered upcaster (for tests and plugins that unload)."""
    _UPCASTERS.pop((event_type, from_version), None)


def upcast(event_type: str, version: int, payload: dict[str, Any]) -> dict[str, Any]:
    """Return ``payload`` lifted from ``version`` to the current version of ``event_type``."""
    current = current_version(event_type)
    if version == current:
        return payload
    if version > current:
        raise UnknownVersionError(
            f"event type {event_type!r} v{version} is newer than this code (v{current}); "
            "upgrade agent-journal"
        )
    while version < current:
        step = _UPCASTERS.get((event_type, version))
        if step is None:
            raise UnknownVersionError(
                f"event type {event_type!r} v{version} has no upcaster to v{version + 1}"
            )
        payload = step(dict(payload))
        version += 1
    return payload


# -- the project's own upcasters -------------------------------------------------------

PREDATED_SETTINGS: dict[int, dict[str, Any]] = {
    2: {"max_identical_failures": None, "empty_reply_retries": None, "max_result_bytes": None},
    3: {"model_retries": 0},
}
"""Per ``session_started`` version, the guardrails it added, at the values that reproduce
how a session recorded before them ran."""


PREDATED_FACTS: dict[str, int] = {
    "model_call_failed": 3,
    "client_settings": 3,
}
"""Facts a session journals from a version of its ``session_started`` on: failed model calls
(``model_call_failed`` events) and the model client's own settings (``client_settings``)."""


def predates(version: int, fact: str) -> bool:
    """Whether a session whose ``session_started`` is at ``version`` predates ``fact``.

    Such a session holds nothing of it, and a replay of it neither journals nor compares
    it (`PREDATED_FACTS`).
    """
    return version < PREDATED_FACTS[fact]


def predated_settings(version: int) -> dict[str, Any]:
    """The guardrails a ``session_started`` of ``version`` predates, at their old values.

    What a replay of such a session runs with (and compares with) for those settings; empty
    for a current record.
    """
    found: dict[str, Any] = {}
    for added_in, settings in PREDATED_SETTINGS.items():
        if version < added_in:
            found.update(settings)
    return found


def _with_settings(payload: dict[str, Any], settings: dict[str, Any]) -> dict[str, Any]:
    """``payload`` with ``settings`` in its ``config.guardrails`` (nested dicts copied)."""
    config = payload.get("config", {})
    if not isinstance(config, dict):
        return payload  # validation names what is wrong
    guardrails = config.get("guardrails", {})
    if not isinstance(guardrails, dict):
        return payload
    payload["config"] = {**config, "guardrails": {**settings, **guardrails}}
    return payload


@register_upcaster("session_started", 1)
def _session_started_v2(payload: dict[str, Any]) -> dict[str, Any]:
    return _with_settings(payload, PREDATED_SETTINGS[2])


@register_upcaster("session_started", 2)
def _session_started_v3(payload: dict[str, Any]) -> dict[str, Any]:
    payload.setdefault("client_settings", None)
    return _with_settings(payload, PREDATED_SETTINGS[3])


@register_upcaster("action_failed", 1)
def _action_failed_v2(payload: dict[str, Any]) -> dict[str, Any]:
    payload.setdefault("abandoned", False)
    return payload


def _call_with_text(call: Any) -> Any:
    """A v1 call with the text of its arguments written from them (keys sorted, as stored)."""
    if isinstance(call, dict) and "arguments" not in call:
        args = call.get("args", {})
        if isinstance(args, (dict, str)):
            return {**call, "arguments": arguments_text(args)}
    return call


@register_upcaster("action_proposed", 1)
def _action_proposed_v2(payload: dict[str, Any]) -> dict[str, Any]:
    calls = payload.get("calls")
    if isinstance(calls, list):
        payload["calls"] = [_call_with_text(call) for call in calls]
    return payload


@register_upcaster("agent_halted", 1)
@register_upcaster("action_failed", 2)
@register_upcaster("action_failed", 3)
@register_upcaster("action_committed", 1)
@register_upcaster("action_committed", 2)
def _fields_added_empty(payload: dict[str, Any]) -> dict[str, Any]:
    """A step whose new fields are absent: their defaults (None) say "not recorded"."""
    return payload
