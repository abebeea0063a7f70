"""Reading OpenAI-style transcript files: every accepted shape, with file:line positions.

Accepted shapes (a *conversation* is a list of chat messages, with optional metadata):

* a JSON array of chat messages: one conversation;
* a JSON object with ``messages`` (and any metadata beside it): one conversation;
* a JSON array of such objects (or of message arrays): one conversation each;
* JSONL: one such object (or message array) per line, or one chat message per line (the
  whole file is then one conversation).

Anything else is malformed input: `InvalidInputError` with one line naming ``file:line``.
Positions of conversations and messages are found in the text only when needed (for an
error or a report example), so reading a large file costs one strict JSON parse.
"""

from __future__ import annotations

import functools
import json
import json.decoder
import json.scanner
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..canonical import loads_strict
from ..errors import InvalidInputError
from .jsonl import FORMAT, read_input

__all__ = ["Conversation", "TranscriptFile", "read_transcripts"]

_WHITESPACE = " \t\n\r"
_JSON_DECODER: Any = json.decoder
"""The stdlib JSON internals (untyped in typeshed) the position finders use."""
_JSON_SCANNER: Any = json.scanner


@dataclass(frozen=True)
class Conversation:
    """One conversation of a file: its messages, metadata and where it is.

    ``path`` is the JSON path of the conversation inside its document (empty for the
    document itself); `TranscriptFile.where` turns it into ``file:line``.
    """

    index: int
    messages: list[Any]
    metadata: dict[str, Any]
    extra: dict[str, Any]
    """Top-level fields beside ``messages`` and ``metadata`` (``id``, ``model``, ``tools``)."""
    line: int
    """The line its document starts at (1 for a whole-file JSON document)."""
    path: tuple[str | int, ...]
    messages_key: tuple[str | int, ...]
    """The JSON path of its message list inside the document."""
    message_lines: tuple[int, ...] = ()
    """The line of each message, when each is a JSONL line of its own."""


@dataclass
class TranscriptFile:
    """A parsed transcript file: its conversations and the text to locate positions in."""

    path: str
    conversations: list[Conversation]
    documents: dict[int, str] = field(default_factory=dict)
    """Line number -> the JSON text that starts there (the whole file, or one JSONL line)."""

    def where(self, conversation: Conversation, message: int | None = None) -> str:
        """Name a conversation (or a message of it): ``file:line (conversation C, message M)``."""
        if message is not None and message < len(conversation.message_lines):
            line = conversation.message_lines[message]
        else:
            inside = conversation.path if message is None else (*conversation.messages_key, message)
            text = self.documents.get(conversation.line, "")
            line = conversation.line + _line_offset(text, inside)
        label = f"conversation {conversation.index}" + (
            "" if message is None else f", message {message}"
        )
        return f"{self.path}:{line} ({label})"


def _skip(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in _WHITESPACE:
        pos += 1
    return pos


_DECODER = json.JSONDecoder()


def _offset(text: str, path: Sequence[str | int]) -> int:
    """The character offset where the value at ``path`` starts in JSON ``text``."""
    pos = _skip(text, 0)
    for step in path:
        if pos >= len(text):
            return pos
        opener = text[pos]
        pos = _skip(text, pos + 1)
        if opener == "[" and isinstance(step, int):
            for _ in range(step):
                _, pos = _DECODER.raw_decode(text, pos)
                pos = _skip(text, _skip(text, pos) + 1)  # past the comma
        elif opener == "{" and isinstance(step, str):
            while pos < len(text) and text[pos] == '"':
                key, pos = _JSON_DECODER.scanstring(text, pos + 1)
                pos = _skip(text, _skip(text, pos) + 1)  # past the colon
                if key == step:
                    break
                _, pos = _DECODER.raw_decode(text, pos)
                pos = _skip(text, _skip(text, pos) + 1)  # past the comma
        else:
            return pos
    return pos


def _line_offset(text: str, path: Sequence[str | int]) -> int:
    try:
        return text.count("\n", 0, _offset(text, path))
    except (ValueError, IndexError):
        return 0


def _locate_semantic_error(text: str) -> int | None:
    """Find the line of a strict-parse error that `json` reports without a position.

    Duplicate keys, out-of-range integers and non-finite numbers are rejected by hooks
    that do not know where they are; this re-parse (pure Python, only on that error path)
    names the line of the innermost object around the offending value.
    """
    decoder: Any = json.JSONDecoder(object_pairs_hook=lambda pairs: pairs)
    strict = loads_strict

    def parse_object(s_and_end: tuple[str, int], *args: Any) -> tuple[Any, int]:
        value, end = _JSON_DECODER.JSONObject(s_and_end, *args)
        try:
            strict(s_and_end[0][s_and_end[1] - 1 : end])
        except ValueError as e:
            raise _Located(s_and_end[1] - 1) from e
        return value, end

    decoder.parse_object = parse_object
    decoder.scan_once = _JSON_SCANNER.py_make_scanner(decoder)
    try:
        decoder.decode(text)
    except _Located as found:
        return text.count("\n", 0, found.position) + 1
    except (ValueError, RecursionError):
        return None
    return None


class _Located(Exception):
    def __init__(self, position: int) -> None:
        super().__init__(position)
        self.position = position


def _parse(text: str, name: str, first_line: int) -> Any:
    """Parse strict JSON, turning any error into one line naming ``file:line``."""
    try:
        return loads_strict(text)
    except json.JSONDecodeError as e:
        raise InvalidInputError(
            f"{name}:{first_line + e.lineno - 1}: not valid JSON: {e.msg} (column {e.colno})"
        ) from e
    except (ValueError, RecursionError) as e:
        line = _locate_semantic_error(text) if first_line == 1 else None
        raise InvalidInputError(
            f"{name}:{first_line + (line or 1) - 1}: not valid JSON: {e}"
        ) from e


def _is_message(value: Any) -> bool:
    """A chat message (or something meant as one): an object that is not a conversation."""
    return isinstance(value, dict) and "messages" not in value


def _conversation(
    value: Any,
    index: int,
    line: int,
    path: tuple[str | int, ...],
    at: Callable[[tuple[str | int, ...]], str],
) -> Conversation:
    """Make a conversation of an object with ``messages`` or an array of messages."""
    if isinstance(value, list):
        messages, metadata, extra, key = value, {}, {}, path
    elif isinstance(value, dict) and "messages" in value:
        messages = value["messages"]
        if not isinstance(messages, list):
            raise InvalidInputError(
                f'{at(path)}: "messages" is {type(messages).__name__}, expected an array of '
                "chat messages"
            )
        raw_meta = value.get("metadata", {})
        if not isinstance(raw_meta, dict):
            raise InvalidInputError(
                f'{at(path)}: "metadata" is {type(raw_meta).__name__}, expected an object'
            )
        metadata = raw_meta
        extra = {k: v for k, v in value.items() if k not in ("messages", "metadata")}
        key = (*path, "messages")
    else:
        kind = 'an object without "messages"' if isinstance(value, dict) else type(value).__name__
        raise InvalidInputError(
            f'{at(path)}: expected a conversation (an object with "messages", or an array of '
            f"chat messages), got {kind}"
        )
    for number, message in enumerate(messages):
        if not isinstance(message, dict):
            raise InvalidInputError(
                f"{at((*key, number))}: message {number} is {type(message).__name__}, "
                'expected an object with a "role"'
            )
        role = message.get("role")
        if not isinstance(role, str) or not role:
            ours = message.get("format") == FORMAT  # an export's header line
            hint = " (an agent-journal file: import it without --format openai)" * ours
            raise InvalidInputError(f'{at((*key, number))}: message {number} has no "role"{hint}')
    return Conversation(index, messages, metadata, extra, line, path, key)


def _read_text(path: str | Path) -> tuple[str, str]:
    name = str(path)
    data = read_input(path, "a transcript file")
    try:
        return name, data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise InvalidInputError(f"{name}:{line}: not valid UTF-8 (byte {e.start})") from e


def _first_line_is_document(text: str) -> bool:
    """Tell JSONL from one JSON document: the first non-empty line parses on its own."""
    for raw in text.split("\n"):
        if raw.strip():
            try:
                json.loads(raw)
            except (ValueError, RecursionError):
                return False
            return raw.strip() != text.strip()
    return False


def read_transcripts(path: str | Path) -> TranscriptFile:
    """Read a transcript file in any accepted shape.

    Raises:
        InvalidInputError: unreadable, not UTF-8, not JSON or JSONL, or not one of the
            accepted shapes; the message names ``file:line``.
    """
    name, text = _read_text(path)
    if not text.strip():
        raise InvalidInputError(f"{name}:1: empty file, expected OpenAI chat transcripts")
    if _first_line_is_document(text):
        return _read_jsonl(name, text)
    value = _parse(text, name, 1)
    parsed = TranscriptFile(name, [], {1: text})

    def at(where: tuple[str | int, ...]) -> str:
        return f"{name}:{1 + _line_offset(text, where)}"

    if isinstance(value, list):
        if not value:
            raise InvalidInputError(f"{name}:1: an empty array, no conversations")
        if all(_is_message(item) for item in value):
            parsed.conversations.append(_conversation(value, 0, 1, (), at))
        else:
            parsed.conversations.extend(
                _conversation(item, index, 1, (index,), at) for index, item in enumerate(value)
            )
    elif _is_message(value):
        parsed.conversations.append(_conversation([value], 0, 1, (), at))
    else:
        parsed.conversations.append(_conversation(value, 0, 1, (), at))
    return parsed


def _same_line(name: str, line: int, where: tuple[str | int, ...]) -> str:
    del where  # a JSONL line holds the whole conversation
    return f"{name}:{line}"


def _read_jsonl(name: str, text: str) -> TranscriptFile:
    parsed = TranscriptFile(name, [])
    values: list[tuple[int, Any]] = []
    for number, raw in enumerate(text.split("\n"), start=1):
        if raw.strip():
            values.append((number, _parse(raw, name, number)))
            parsed.documents[number] = raw
    if all(_is_message(value) for _, value in values):
        lines = tuple(number for number, _ in values)

        def line_of(where: tuple[str | int, ...]) -> str:
            last = where[-1] if where else 0
            return f"{name}:{lines[last] if isinstance(last, int) else lines[0]}"

        conversation = _conversation([value for _, value in values], 0, lines[0], (), line_of)
        parsed.conversations.append(replace(conversation, message_lines=lines))
        return parsed
    for index, (number, value) in enumerate(values):
        if _is_message(value):
            raise InvalidInputError(
                f"{name}:{number}: a chat message among conversations; put one conversation "
                "per line, or one message per line, not both"
            )
        parsed.conversations.append(
            _conversation(value, index, number, (), functools.partial(_same_line, name, number))
        )
    return parsed
