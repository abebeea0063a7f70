"""Exceptions as recorded facts: what a tool raised, kept as JSON and raised again in a replay.

A tool of the user's own code fails by raising; the code that called it catches by type
(``except (ValueError, LookupError)``). So a recorded failure must come back as an
exception of the same type, or the replay takes another path than the original run.

`exception_record` keeps the exception's type (``module:qualname``), the names of the
classes it derives from (its MRO, up to ``BaseException``), its ``args`` and the instance
attributes that survive JSON (not those that hold a framework's run state: `_RUN_STATE`).
`rebuilt` makes it again:

* the recorded class itself, when its module is already imported (the code that raised it
  imported it; nothing is imported on a journal's say-so, so a journal cannot make a
  replay run a module's top-level code), rebuilt without calling ``__init__`` (its
  ``args`` and attributes set as recorded);
* otherwise a stand-in: a class of the recorded name, derived from the first class of
  the recorded MRO that is loaded (``builtins`` ones always are) and from
  `ReplayedException`, so ``except ValueError`` in the user's code still catches a
  recorded subclass of ``ValueError`` whose module is gone.

Values that are not JSON are kept as their ``repr`` (the record stays JSON; the replayed
exception then holds the text).
"""

from __future__ import annotations

import itertools
import linecache
import sys
from collections.abc import Callable
from types import CodeType
from typing import Any

from .requests import json_value, stable_repr

__all__ = [
    "ReplayedException",
    "exception_record",
    "frame_note",
    "raised_at",
    "rebuilt",
    "restore_with",
]


class ReplayedException(Exception):
    """Base of the stand-ins for recorded exceptions whose class is not loaded."""


def _path(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _jsonable(value: object) -> Any:
    """An argument or attribute as JSON; an object with no JSON form as its repr.

    The repr has no memory address: it changes at every run, and a replay would never match.
    """
    return json_value(value, stable_repr)


_RUN_STATE = {"agents.exceptions:AgentsException": ("run_data",)}
"""Attributes in which a framework's exceptions carry the state of the whole run they ended
(the OpenAI Agents SDK: its agent with every tool, the input as the code passed it, usage):
not what the exception says, and not the same in a replay that serves the same facts. By
the class (``module:qualname``) whose subclasses have them. A record leaves them out; a
rebuilt exception holds None there."""


def _run_state(mro: list[str]) -> tuple[str, ...]:
    """The attributes `_RUN_STATE` leaves out of the record of an exception of ``mro``."""
    return tuple(name for path in mro for name in _RUN_STATE.get(path, ()))


_RESTORE: dict[str, Callable[[BaseException], None]] = {}
"""How an exception of a class (by ``module:qualname``, its subclasses too) is made whole
after `rebuilt` set its recorded attributes, for a class whose methods read an attribute
as an object JSON cannot hold (``mcp.MCPError.error``: an ``ErrorData``). Registered by the
wrapper of the package that defines it (`restore_with`)."""


def restore_with(path: str, restore: Callable[[BaseException], None]) -> None:
    """Have `rebuilt` call ``restore`` on each exception of class ``path`` (or a subclass)."""
    _RESTORE[path] = restore


MODEL_CALL = "model_call"
"""The ``raised_by`` of the record of an exception a captured model call raised."""
_RAISED_BY = "_agent_journal_raised_by"


def raised_by_model_call(error: BaseException) -> BaseException:
    """Note on ``error`` that a captured model call raised it, and return it.

    Its record will say so (`exception_record`).
    """
    try:
        setattr(error, _RAISED_BY, MODEL_CALL)
    except (AttributeError, TypeError):  # an exception that takes no attributes
        pass
    return error


def exception_record(error: BaseException) -> dict[str, Any]:
    """The JSON record of an exception: type, MRO, args, attributes and message.

    And ``raised_by``: ``model_call`` when a captured model call raised it (a rate limit
    that ended the session), which lets a replay raise it there again; or raised it while
    the exception was raised (its ``__cause__`` or ``__context__``, as ``raise MyError from
    error`` makes it): ``model_error`` is then the record of the model call's exception,
    the one a replay raises there.
    """
    mro = _mro(type(error))
    left_out = _run_state(mro)
    attributes = {
        name: _jsonable(value)
        for name, value in vars(error).items()
        if not name.startswith("_") and name not in left_out
    }
    record = {
        "type": _path(type(error)),
        "mro": mro,
        "args": [_jsonable(arg) for arg in error.args],
        "attributes": attributes,
        "message": str(error),
    }
    model_error = _model_call_error(error)
    if model_error is not None:
        record["raised_by"] = MODEL_CALL
        if model_error is not error:
            record["model_error"] = exception_record(model_error)
    return record


_FRAMES_KEPT = 64
"""The innermost frames `raised_at` keeps of each traceback."""
_LINE_KEPT = 200
"""The characters `raised_at` keeps of a line (a replay compares them with its own)."""


def frame_note(code: CodeType, line: int, instruction: int) -> list[str]:
    """A frame as `raised_at` notes it: its function, its line and the call it was in.

    The function's name, the text of ``line``, and the text of the expression its
    ``instruction`` (a byte offset, as ``tb_lasti`` and ``f_lasti`` give it) evaluates:
    ``parse(...)`` or ``tools(...)`` of ``parse(tools(...))``.
    """
    text = linecache.getline(code.co_filename, line)
    at = max(instruction, 0) // 2  # (-1: a frame not started)
    position = next(itertools.islice(code.co_positions(), at, None), None)
    call = ""
    if position is not None and None not in position and position[0] == line:
        first, last, start, end = position
        encoded = text.encode("utf-8")
        call = encoded[start : end if last == first else len(encoded)].decode("utf-8", "replace")
    return [code.co_name, text.strip()[:_LINE_KEPT], call.strip()[:_LINE_KEPT]]


def raised_at(error: BaseException) -> list[dict[str, Any]]:
    """Where ``error`` was raised, and the exceptions it came of: one entry each.

    ``error`` first, then those it was raised while handling (its ``__cause__`` or
    ``__context__``), each with its ``frames``: its traceback from the outermost frame (the
    one that caught it) in, each as `frame_note` notes it (its function's name, the text of
    the line it was at and of the call there); the ones after the first with their own
    ``error`` record (`exception_record`).

    A replay of a loop that crashed reads it to raise again, from the call a crash came out
    of, the exception that came out of it (`replay._crashes`): not from the next call of
    code whose own line raised it and raises no more. Names and the code's own lines only,
    no values.
    """
    found: list[dict[str, Any]] = []
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        frames: list[list[str]] = []
        trace = current.__traceback__
        while trace is not None:
            frames.append(frame_note(trace.tb_frame.f_code, trace.tb_lineno, trace.tb_lasti))
            trace = trace.tb_next
        entry: dict[str, Any] = {"frames": frames[-_FRAMES_KEPT:]}
        if current is not error:
            entry["error"] = exception_record(current)
        found.append(entry)
        current = current.__cause__ or current.__context__
    return found


def _model_call_error(error: BaseException) -> BaseException | None:
    """The exception a captured model call raised, if ``error`` is it or came of it.

    That is, ``error`` was raised while handling it: its chain of causes and contexts.
    """
    seen: set[int] = set()
    found: BaseException | None = error
    while found is not None and id(found) not in seen:
        if getattr(found, _RAISED_BY, None) == MODEL_CALL:
            return found
        seen.add(id(found))
        found = found.__cause__ or found.__context__
    return None


def _loaded(path: str) -> type[BaseException] | None:
    """The class ``module:qualname`` names, when its module is loaded; never imports."""
    module_name, _, qualname = path.partition(":")
    found: Any = sys.modules.get(module_name)
    for part in qualname.split("."):
        if found is None or part == "<locals>":
            return None
        found = getattr(found, part, None)
    if isinstance(found, type) and issubclass(found, BaseException):
        return found
    return None


def _mro(cls: type) -> list[str]:
    return [_path(base) for base in cls.__mro__ if issubclass(base, BaseException)]


def _recorded_class(path: str, mro: object) -> type[BaseException] | None:
    """The loaded class a record names: by its ``path``, and with the recorded ``mro``.

    A class whose qualified name is not the name it is bound to (pydantic-ai binds its
    ``ModelServerError`` of HTTP errors to ``_HTTPModelServerError``, beside a public
    ``ModelServerError`` of another lineage) is found among its module's classes by its
    path and lineage.
    """
    found = _loaded(path)
    if found is None or not isinstance(mro, list) or _mro(found) == mro:
        return found
    module = sys.modules.get(path.partition(":")[0])
    for value in vars(module).values() if module is not None else ():
        if isinstance(value, type) and issubclass(value, BaseException) and _mro(value) == mro:
            return value
    return found


def rebuilt(record: dict[str, Any]) -> BaseException:
    """The exception a record describes, rebuilt as the module docstring says."""
    path = str(record.get("type", "builtins:Exception"))
    cls = _recorded_class(path, record.get("mro"))
    if cls is None:
        bases = [_loaded(str(name)) for name in record.get("mro", [])[1:]]
        base = next((b for b in bases if b is not None and issubclass(b, Exception)), Exception)
        name = path.rpartition(":")[2].rpartition(".")[2] or "RecordedError"
        parents = (ReplayedException,) if base is Exception else (ReplayedException, base)
        cls = type(name, parents, {})
        cls.__module__ = path.partition(":")[0]
    error = cls.__new__(cls)
    error.args = tuple(record.get("args", ()))
    attributes = dict.fromkeys(_run_state([str(path) for path in record.get("mro", [])]))
    attributes.update(record.get("attributes", {}))
    for key, value in attributes.items():
        try:
            setattr(error, key, value)
        except (AttributeError, TypeError):  # a read-only attribute: the args carry it
            continue
    for name in [path, *record.get("mro", [])]:
        restore = _RESTORE.get(str(name))
        if restore is not None and isinstance(error, _loaded(str(name)) or ()):
            restore(error)
            break
    return error
