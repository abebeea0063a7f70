"""A recorded tool result handed back as the type the tool declares it returns.

A replay serves a tool's recorded result, which the journal keeps as JSON; the code that
called the tool gets it back as the tool's declared return type (a pydantic model, a
dataclass, a TypedDict), as the tool itself would have returned it, so that what the code
does with it (``str()`` of it into a prompt, an attribute read) is what it did.
"""

from __future__ import annotations

import inspect
import json
import typing
from collections.abc import Callable
from typing import Any

from pydantic import PydanticUserError, TypeAdapter, ValidationError

__all__ = ["as_return_type", "return_type", "text_as_return_type"]


def return_type(function: Callable[..., Any]) -> Any:
    """A function's declared return type, a string annotation resolved in its module.

    ``inspect.Signature.empty`` when it declares none. ``from __future__ import
    annotations`` makes every annotation a string; one that does not resolve (a name
    defined nowhere) counts as none.
    """
    try:
        return typing.get_type_hints(function).get("return", inspect.Signature.empty)
    except Exception:  # a name not defined, an annotation that is not a type
        return inspect.Signature.empty


def as_return_type(value: Any, returns: Any) -> Any:
    """A recorded result as the declared return type ``returns``, when it validates as one.

    Otherwise (no declared type, ``Any``, a value that does not validate) the value itself.
    """
    if returns is inspect.Signature.empty or returns is Any:
        return value
    try:
        return TypeAdapter(returns).validate_python(value)
    except (ValidationError, PydanticUserError, TypeError, NameError):
        return value


def text_as_return_type(text: Any, returns: Any) -> Any:
    """A result recorded as the text the code sent the model, as the declared type.

    The text is decoded as JSON (the code sent ``json.dumps`` of the value) when the tool
    declares a type that is not text and the decoded value validates as it; otherwise the
    text is the value, as `as_return_type` makes it (a tool with no declared type gets the
    text).
    """
    if isinstance(text, str) and returns not in (str, Any, inspect.Signature.empty):
        try:
            return TypeAdapter(returns).validate_python(json.loads(text))
        except (ValueError, PydanticUserError, TypeError, NameError):  # ValidationError too
            pass
    return as_return_type(text, returns)
