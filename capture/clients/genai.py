"""The google-genai client, wrapped: ``generate_content`` and ``generate_content_stream`` journaled.

`captured_genai` (what ``Capture.genai`` returns) stands for a ``genai.Client`` whose
``models.generate_content`` and ``models.generate_content_stream`` (and the same two of
``client.aio.models``, and the chats of ``client.chats`` and ``client.aio.chats``, which call
them) go through the captured session the code runs in, as the openai client's ``create``
does (one `_Create` for each: `capture.clients.calls`). Each call journals its request and
the response:

* the request as the SDK's own types read it, as JSON by their field names (bytes as
  base64): ``model``, ``contents`` (whatever the code passed, a string, parts, dicts, as the
  list of ``Content`` the SDK sends) and the fields of the ``config`` beside them
  (``system_instruction``, ``tools``, ``tool_config``, ``thinking_config``, the generation
  settings, ...), ``stream: true`` for a stream; the config's ``http_options`` change how
  the call is made, not what the model answers, and are left out;
* the response as the ``GenerateContentResponse`` the SDK parsed (thought parts and their
  signatures verbatim; not the HTTP headers of ``sdk_http_response``), a stream as its
  chunks as they pass (journaled once a chunk gives each candidate its ``finish_reason``,
  or the stream ends or is left).

``function_call`` parts are the proposed calls; the ``function_response`` parts of the next
request are their results (when no decorated tool journaled them). What the JSON means:
`capture.clients.genai_messages`. A call that raises (``errors.ClientError`` such as a 429,
``errors.ServerError`` such as a 500 or a 503, a stream that breaks) is journaled as
``model_call_failed`` and raised again as its own class by a replay.

In a replay a recorded body is rebuilt as the SDK's own ``GenerateContentResponse`` with the
function the SDK parses a response with (``parsed`` from the call's ``response_schema``
again), so the code reads what it read. Automatic function calling (Python functions in
``tools``) runs inside one ``generate_content``: it is journaled as one model call (the
final response), the functions' runs are not journaled and a replay does not run them.
Everything else of the client (``files``, ``caches``, ``count_tokens``, ``embed_content``,
``live``, ...) passes through, not journaled. The captured client is a context manager as
the client is (``with``, and ``async with`` its ``aio``), closing the client after.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pydantic
from pydantic_core import to_jsonable_python

from .._extras import missing_extra
from ..requests import stable_repr
from .calls import _Create, _Proxy
from .openai_streams import Kind

try:
    from google.genai import _transformers, chats, types
except ImportError as error:  # pragma: no cover - exercised with the package hidden
    raise missing_extra("google-genai", "genai", error) from error

__all__ = ["KIND", "captured_genai", "request_of"]

KIND: Kind = "genai"
"""The request and response kind of the journaled calls (`CapturedSession.before_model`)."""

_HOW_SENT = frozenset({"http_options"})
"""Config fields that change how the call is made, not what the model answers."""


def _json(value: Any) -> Any:
    """The SDK's objects as JSON by their field names, bytes as base64, Nones left out.

    A pydantic class (a ``response_schema``) as its JSON schema, so that a change to it is
    a change of the request; anything else that is not JSON (a Python function in
    ``tools``) as its repr.
    """
    return to_jsonable_python(
        value, by_alias=False, exclude_none=True, bytes_mode="base64", fallback=_not_json
    )


def _not_json(value: Any) -> Any:
    if isinstance(value, type) and issubclass(value, pydantic.BaseModel):
        return {"pydantic_model": value.__qualname__, "json_schema": value.model_json_schema()}
    return stable_repr(value)


def _config(config: Any) -> Any:
    if config is None:
        return None
    try:
        return types.GenerateContentConfig.model_validate(config)
    except ValueError:  # not a config the SDK takes: it will say so; journaled as given
        return config


def request_of(kwargs: dict[str, Any], *, stream: bool) -> dict[str, Any]:
    """The request a ``generate_content`` call of ``kwargs`` sends, as it is journaled.

    ``contents`` as the list of ``Content`` the SDK makes of what the code passed; the
    fields of ``config`` beside them.
    """
    request: dict[str, Any] = {"model": kwargs.get("model")}
    contents = kwargs.get("contents")
    try:
        request["contents"] = _json(_transformers.t_contents(contents))
    except (ValueError, TypeError):  # contents the SDK refuses: it will say so
        request["contents"] = _json(contents)
    fields = _json(_config(kwargs.get("config")))
    if isinstance(fields, dict):
        request.update({k: v for k, v in fields.items() if k not in _HOW_SENT})
    if stream:
        request["stream"] = True
    return request


def _schema(config: Any) -> dict[str, Any]:
    """The part of a call's config the SDK parses a response with (``parsed``)."""
    names = ("response_schema", "response_json_schema", "include_all_fields")
    if config is None:
        return {}
    get: Callable[[str], Any] = (
        config.get if isinstance(config, dict) else lambda name: getattr(config, name, None)
    )
    return {"config": {name: get(name) for name in names}}


def _parsed(body: Any, kwargs: dict[str, Any]) -> Any:
    """The ``GenerateContentResponse`` of a recorded body, parsed as the SDK parses one.

    ``GenerateContentResponse._from_response``, given the part of the call's config it reads
    (a ``response_schema`` makes ``parsed`` again).
    """
    response = copy.deepcopy(body) if isinstance(body, dict) else {}
    response.pop("parsed", None)  # (journaled as JSON; the SDK makes it again, typed)
    return types.GenerateContentResponse._from_response(
        response=response, kwargs=_schema(kwargs.get("config"))
    )


class _GenerateContent(_Create):
    """``generate_content`` (``streaming=False``) or ``generate_content_stream``, journaled."""

    def __init__(
        self, create: Callable[..., Any], settings: dict[str, Any] | None, *, streaming: bool
    ) -> None:
        super().__init__(KIND, create, settings, lambda kind, body, chunk: _parsed(body, {}))
        self.streaming = streaming

    def request_of(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """The request as `request_of` journals it."""
        return request_of(kwargs, stream=self.streaming)

    def streams(self, kwargs: dict[str, Any]) -> bool:
        """Whether this is ``generate_content_stream``."""
        return self.streaming

    def rebuilt(self, body: Any, chunk: bool, kwargs: dict[str, Any]) -> Any:
        """The ``GenerateContentResponse`` of a recorded body (`_parsed`), for this call."""
        del chunk
        return _parsed(body, kwargs)


def client_settings(client: Any) -> dict[str, Any] | None:
    """The client's settings that shape a call beyond its request.

    Its ``http_options``' ``timeout`` and ``retry_options`` (the SDK retries a 429 or a 5xx
    itself when they are set, before the code sees it).
    """
    options = getattr(getattr(client, "_api_client", None), "_http_options", None)
    if options is None:
        return None
    return {
        "timeout": getattr(options, "timeout", None),
        "retry_options": _json(getattr(options, "retry_options", None)),
    }


def _models(models: Any, settings: dict[str, Any] | None) -> Any:
    return _Proxy(
        models,
        generate_content=_GenerateContent(models.generate_content, settings, streaming=False),
        generate_content_stream=_GenerateContent(
            models.generate_content_stream, settings, streaming=True
        ),
    )


class _Client(_Proxy):
    """The captured ``Client``: a context manager as the client is (``with``: closed after)."""

    def __enter__(self) -> _Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self._wrapped.__exit__(*exc)


class _AsyncClient(_Proxy):
    """The captured ``client.aio``: ``async with`` as the client's (closed after)."""

    async def __aenter__(self) -> _AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._wrapped.__aexit__(*exc)


def captured_genai(client: Any) -> Any:
    """``client`` (a ``genai.Client``) with its content generation journaled; see the module."""
    settings = client_settings(client)
    models = _models(client.models, settings)
    own: dict[str, Any] = {"models": models, "chats": chats.Chats(modules=models)}
    aio = getattr(client, "aio", None)
    if aio is not None:
        async_models = _models(aio.models, settings)
        async_chats = chats.AsyncChats(modules=async_models)
        own["aio"] = _AsyncClient(aio, models=async_models, chats=async_chats)
    return _Client(client, **own)
