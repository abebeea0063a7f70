"""LiteLLM, captured: ``litellm.completion`` and ``litellm.acompletion`` journaled as called.

LiteLLM is called through its module functions, often from inside a library the user does
not edit (an upstream harness's ``litellm.completion(...)``). So nothing is wrapped by hand:
`Capture.litellm` makes each session of the capture (an entry call, a ``capture.session``
block, and so a replay of either) replace the two functions in the ``litellm`` module with
journaled ones while it is open, and put litellm's own back when no session is open any
more (`LitellmScope`: counted, so nested and concurrent sessions share one patch; the
returned scope patches a ``with`` block of its own as well). Code that calls
``litellm.completion`` finds the journaled one wherever it is; a name bound before the patch
(``from litellm import completion`` at import time) keeps litellm's own and is not journaled.

A call is journaled as the openai client's ``chat.completions.create`` is (one `_Create`:
`capture.clients.calls`), since litellm takes and returns OpenAI's chat format: the request
(the ``model`` string as given, ``openai/gpt-4o`` or ``anthropic/claude-...``, the messages,
tools and every other parameter but the connection's: `CONNECTION`, keys and addresses are
never recorded) with the provider litellm routes it to (``provider``: its
``custom_llm_provider``) beside the response body (a ``ModelResponse``'s, or each streamed
``ModelResponseStream`` chunk's as it passes through litellm's ``CustomStreamWrapper``).
LiteLLM's own exceptions (``litellm.RateLimitError``, ``InternalServerError``,
``APIConnectionError``, a stream's ``MidStreamFallbackError``, ...) are journaled as
``model_call_failed`` and raised again as themselves by a replay, so ``except
litellm.RateLimitError`` and the code's retries run as they did. LiteLLM's own retries and
fallbacks (``num_retries``, ``fallbacks``) happen inside the one journaled call: its outcome
stands for them (a litellm call made while another runs is part of it, not journaled).

In a replay the recorded bodies come back as litellm's own ``ModelResponse`` and
``ModelResponseStream`` objects, and no provider is called.
"""

from __future__ import annotations

import copy
import functools
import inspect
import threading
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Any

from .._extras import missing_extra
from ..requests import jsonable
from ..session import CapturedSession
from .calls import _Create
from .openai_streams import Kind

try:
    import litellm
    from litellm import ModelResponse, ModelResponseStream
except ImportError as error:  # pragma: no cover - exercised with the package hidden
    raise missing_extra("litellm", "litellm", error) from error

__all__ = ["CONNECTION", "FUNCTIONS", "KIND", "LitellmScope", "patched", "provider_of"]

KIND: Kind = "chat"
"""LiteLLM's requests and responses are OpenAI's chat completions."""

FUNCTIONS = ("completion", "acompletion")
"""The ``litellm`` module functions a session journals."""

CONNECTION = frozenset(
    {
        "api_key",
        "api_base",
        "base_url",
        "organization",
        "headers",
        "extra_headers",
        "timeout",
        "client",
        "azure_ad_token_provider",
    }
)
"""Parameters of a call that say how to reach the provider, not what it is asked: never
recorded, never compared (a key must not reach the journal, and a replay on a laptop reaches
no provider at all). So is any parameter whose name ends in `_SECRET_ENDINGS`."""

_SECRET_ENDINGS = ("_key", "_secret", "_token", "_credentials", "_password")
"""How the names of litellm's other credentials end (``aws_secret_access_key``,
``aws_session_token``, ``azure_ad_token``, ``vertex_credentials``)."""

_INSIDE: ContextVar[bool] = ContextVar("agent_journal_inside_litellm", default=False)
"""True while a journaled litellm call runs: litellm's own calls of ``litellm.acompletion``
then (its fallbacks) are part of that call, not calls of their own."""

_LOCK = threading.Lock()
_HELD = 0
"""How many scopes (sessions, ``with`` blocks) hold the patch now."""
_ORIGINALS: dict[str, Any] = {}
_PATCHED: dict[str, Any] = {}


def provider_of(kwargs: Mapping[str, Any]) -> str | None:
    """The provider litellm routes a call to (its ``custom_llm_provider``), None if unknown."""
    try:
        _, provider, _, _ = litellm.get_llm_provider(
            model=str(kwargs.get("model")),
            custom_llm_provider=kwargs.get("custom_llm_provider"),
            api_base=kwargs.get("api_base"),
        )
    except Exception:  # a model litellm cannot route: the call itself says why
        return None
    return provider if isinstance(provider, str) else None


def _recorded_parameter(name: str) -> bool:
    return name not in CONNECTION and not name.endswith(_SECRET_ENDINGS)


def _rebuilt(kind: Kind, body: Any, chunk: bool) -> Any:
    """The litellm object a recorded body was read from (a copy: litellm edits what it is given)."""
    del kind
    given = copy.deepcopy(body)
    return ModelResponseStream(**given) if chunk else ModelResponse(**given)


def _settings() -> dict[str, Any]:
    """LiteLLM's module settings that shape every call beyond its request."""
    return {
        name: jsonable(getattr(litellm, name, None))
        for name in ("num_retries", "request_timeout", "drop_params")
    }


class _Call(_Create):
    """One of litellm's functions, journaled: its request without `CONNECTION`, its provider."""

    def request_of(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """The call's parameters but its connection and credentials (`CONNECTION`)."""
        return {key: value for key, value in kwargs.items() if _recorded_parameter(key)}

    def _recorded(
        self, session: CapturedSession, kwargs: dict[str, Any]
    ) -> tuple[dict[str, Any], dict[str, Any], int]:
        record, whole, seq = super()._recorded(session, kwargs)
        record["provider"] = provider_of(kwargs)
        return record, whole, seq


def _keywords(signature: inspect.Signature, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The call's arguments by name (``completion("openai/gpt-4o", messages)``), or None."""
    if not args:
        return kwargs
    try:
        bound = signature.bind_partial(*args, **kwargs)
    except TypeError:  # litellm raises it itself, as it would have
        return None
    named: dict[str, Any] = {}
    for name, value in bound.arguments.items():
        kind = signature.parameters[name].kind
        if kind is inspect.Parameter.VAR_POSITIONAL:
            if value:
                return None
        elif kind is inspect.Parameter.VAR_KEYWORD:
            named.update(value)
        else:
            named[name] = value
    return named


def _journaled(original: Callable[..., Any], settings: dict[str, Any]) -> Callable[..., Any]:
    """``original`` (``litellm.completion`` or ``acompletion``), journaled in sessions."""
    create = _Call(KIND, original, settings, _rebuilt)
    signature = inspect.signature(original)
    journaled: Callable[..., Any]

    if create.is_async:

        @functools.wraps(original)
        async def ajournaled(*args: Any, **kwargs: Any) -> Any:
            named = None if _INSIDE.get() else _keywords(signature, args, kwargs)
            if named is None:
                return await original(*args, **kwargs)
            inside = _INSIDE.set(True)
            try:
                return await create(**named)
            finally:
                _INSIDE.reset(inside)

        journaled = ajournaled
    else:

        @functools.wraps(original)
        def sjournaled(*args: Any, **kwargs: Any) -> Any:
            named = None if _INSIDE.get() else _keywords(signature, args, kwargs)
            if named is None:
                return original(*args, **kwargs)
            inside = _INSIDE.set(True)
            try:
                return create(**named)
            finally:
                _INSIDE.reset(inside)

        journaled = sjournaled
    return journaled


def _hold() -> None:
    """Patch the module functions (the first scope to open does)."""
    global _HELD
    with _LOCK:
        if _HELD == 0:
            settings = _settings()
            for name in FUNCTIONS:
                original = getattr(litellm, name)
                _ORIGINALS[name] = original
                _PATCHED[name] = _journaled(original, settings)
                setattr(litellm, name, _PATCHED[name])
        _HELD += 1


def _release() -> None:
    """Put litellm's own functions back (the last scope to close does).

    Unless something else replaced ours meanwhile: what it put there stays.
    """
    global _HELD
    with _LOCK:
        _HELD -= 1
        if _HELD > 0:
            return
        for name in FUNCTIONS:
            if getattr(litellm, name, None) is _PATCHED.get(name):
                setattr(litellm, name, _ORIGINALS[name])
        _ORIGINALS.clear()
        _PATCHED.clear()


def patched() -> bool:
    """Whether ``litellm.completion`` and ``acompletion`` are the journaled ones now."""
    with _LOCK:
        return _HELD > 0


class LitellmScope:
    """``litellm.completion`` and ``litellm.acompletion`` journaled while a scope is open.

    What `Capture.litellm` returns, and what each of that capture's sessions opens. Open as
    a ``with`` block (sync code or async), it holds the patch for the block too. Scopes
    are counted across threads and tasks: the functions are litellm's own again once the
    last one closes.
    """

    def __enter__(self) -> LitellmScope:
        _hold()
        return self

    def __exit__(self, *exc: object) -> None:
        _release()
