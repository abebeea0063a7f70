"""Read OTLP files and request bodies: spans and log records, as plain values with where.

What is read, as the OpenTelemetry exporters write it:

* OTLP/JSON: one ``ExportTraceServiceRequest`` or ``ExportLogsServiceRequest`` object (a
  file, or an OTLP/HTTP body with ``Content-Type: application/json``), or JSON Lines of
  them, one per line (the SDK's ``opentelemetry-exporter-otlp-json-file`` and the
  Collector's ``file`` exporter);
* OTLP protobuf: one binary request (an OTLP/HTTP body), or a file of them, each prefixed
  with its length as a 4-byte big-endian integer (the Collector's ``file`` exporter with
  ``format: proto``). Decoding it needs ``opentelemetry-proto`` (the ``otel`` extra).

Ids are hex (protobuf's own JSON mapping writes them as base64: they are converted).
Attribute values are plain JSON values (``kvlistValue`` as an object, ``arrayValue`` as a
list, ``bytesValue`` as its base64 text). Anything else is an `InvalidInputError` naming
``file:line`` and the span.
"""

from __future__ import annotations

import base64
import binascii
import struct
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ..errors import InvalidInputError

__all__ = ["LogRecord", "OtlpBatch", "Span", "SpanEvent", "read_body", "read_otlp"]

MAX_DEPTH = 64
"""How deep an attribute value may nest (a deeper one is refused, not recursed into)."""


@dataclass(frozen=True)
class SpanEvent:
    """An event recorded on a span (``exception``, or an older GenAI message event)."""

    name: str
    time_ns: int
    attributes: dict[str, Any]


@dataclass(frozen=True)
class Span:
    """One span, its ids in hex, its times in nanoseconds since the epoch."""

    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    kind: int
    start_ns: int
    end_ns: int
    status_code: int
    status_message: str
    attributes: dict[str, Any]
    events: list[SpanEvent]
    where: str
    resource: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class LogRecord:
    """One log record: a GenAI message event up to semconv 1.36 (``gen_ai.user.message``)."""

    trace_id: str | None
    span_id: str | None
    event_name: str
    time_ns: int
    attributes: dict[str, Any]
    body: Any
    where: str


@dataclass
class OtlpBatch:
    """What one file or body held: its spans and its log records, in the order read."""

    spans: list[Span] = field(default_factory=list)
    logs: list[LogRecord] = field(default_factory=list)

    def extend(self, other: OtlpBatch) -> None:
        """Add another batch's spans and records after these."""
        self.spans.extend(other.spans)
        self.logs.extend(other.logs)


def _bad(where: str, what: str) -> InvalidInputError:
    return InvalidInputError(f"{where}: {what}")


def _object(value: Any, where: str, what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _bad(where, f"{what} is not an object")
    return value


def _list(value: Any, where: str, what: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise _bad(where, f"{what} is not a list")
    return value


def _integer(value: Any, where: str, what: str) -> int:
    if isinstance(value, bool):
        raise _bad(where, f"{what} is not an integer")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit() and len(value) <= 20:
        return int(value)
    if value is None:
        return 0
    raise _bad(where, f"{what} is not an integer: {str(value)[:40]!r}")


def _hex_id(value: Any, size: int, where: str, what: str, *, optional: bool = False) -> str | None:
    if value in (None, "") and optional:
        return None
    if not isinstance(value, str):
        raise _bad(where, f"{what} is not a string")
    text = value.lower()
    if len(text) == size * 2 and all(c in "0123456789abcdef" for c in text):
        return text
    try:  # protobuf's JSON mapping: base64
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) == size:
        return raw.hex()
    raise _bad(where, f"{what} {value[:40]!r} is not a {size}-byte id")


def attribute_value(value: Any, where: str, depth: int = 0) -> Any:
    """A plain JSON value of an OTLP ``AnyValue``."""
    if depth > MAX_DEPTH:
        raise _bad(where, f"an attribute value nests deeper than {MAX_DEPTH}")
    if value is None:
        return None
    value = _object(value, where, "an attribute value")
    if not value:
        return None
    if len(value) != 1:
        raise _bad(where, f"an attribute value has {len(value)} kinds: {sorted(value)}")
    kind, inner = next(iter(value.items()))
    if kind == "stringValue":
        if not isinstance(inner, str):
            raise _bad(where, "a stringValue is not a string")
        return inner
    if kind == "boolValue":
        if not isinstance(inner, bool):
            raise _bad(where, "a boolValue is not a boolean")
        return inner
    if kind == "intValue":
        if isinstance(inner, str) and inner.lstrip("-").isdigit() and len(inner) <= 20:
            number = int(inner)
        elif isinstance(inner, int) and not isinstance(inner, bool):
            number = inner
        else:
            raise _bad(where, f"an intValue is not an integer: {str(inner)[:40]!r}")
        if not -(2**63) <= number < 2**63:
            raise _bad(where, f"an intValue is past 64 bits: {number}")
        return number
    if kind == "doubleValue":
        if isinstance(inner, bool) or not isinstance(inner, (int, float)):
            raise _bad(where, "a doubleValue is not a number")
        return float(inner)
    if kind == "bytesValue":
        if not isinstance(inner, str):
            raise _bad(where, "a bytesValue is not a string")
        return inner
    if kind == "arrayValue":
        items = _list(_object(inner, where, "an arrayValue").get("values"), where, "values")
        return [attribute_value(item, where, depth + 1) for item in items]
    if kind == "kvlistValue":
        pairs = _list(_object(inner, where, "a kvlistValue").get("values"), where, "values")
        return attributes_of(pairs, where, depth + 1)
    raise _bad(where, f"unknown attribute value kind {kind!r}")


def attributes_of(items: Any, where: str, depth: int = 0) -> dict[str, Any]:
    """The ``attributes`` list of OTLP key-values as a dict (a repeated key: the last)."""
    out: dict[str, Any] = {}
    for item in _list(items, where, "attributes"):
        pair = _object(item, where, "an attribute")
        key = pair.get("key")
        if not isinstance(key, str):
            raise _bad(where, "an attribute's key is not a string")
        out[key] = attribute_value(pair.get("value"), f"{where} ({key})", depth)
    return out


def _spans(document: Mapping[str, Any], where: str, batch: OtlpBatch) -> None:
    for resource_spans in _list(document.get("resourceSpans"), where, "resourceSpans"):
        resource_spans = _object(resource_spans, where, "a resourceSpans item")
        resource = _object(resource_spans.get("resource") or {}, where, "resource")
        resource_attributes = attributes_of(resource.get("attributes"), where)
        for scope in _list(resource_spans.get("scopeSpans"), where, "scopeSpans"):
            scope = _object(scope, where, "a scopeSpans item")
            for raw in _list(scope.get("spans"), where, "spans"):
                batch.spans.append(_span(_object(raw, where, "a span"), where, resource_attributes))


def _span(raw: Mapping[str, Any], where: str, resource: dict[str, Any]) -> Span:
    span_id = _hex_id(raw.get("spanId"), 8, where, "spanId")
    at = f"{where}: span {span_id}"
    status = _object(raw.get("status") or {}, at, "status")
    message = status.get("message") or ""
    name = raw.get("name") or ""
    if not isinstance(message, str) or not isinstance(name, str):
        raise _bad(at, "a name or status message is not a string")
    events = []
    for item in _list(raw.get("events"), at, "events"):
        item = _object(item, at, "a span event")
        event_name = item.get("name") or ""
        if not isinstance(event_name, str):
            raise _bad(at, "a span event's name is not a string")
        events.append(
            SpanEvent(
                event_name,
                _integer(item.get("timeUnixNano"), at, "timeUnixNano"),
                attributes_of(item.get("attributes"), at),
            )
        )
    assert span_id is not None
    return Span(
        trace_id=_hex_id(raw.get("traceId"), 16, at, "traceId") or "",
        span_id=span_id,
        parent_id=_hex_id(raw.get("parentSpanId"), 8, at, "parentSpanId", optional=True),
        name=name,
        kind=_integer(raw.get("kind"), at, "kind"),
        start_ns=_integer(raw.get("startTimeUnixNano"), at, "startTimeUnixNano"),
        end_ns=_integer(raw.get("endTimeUnixNano"), at, "endTimeUnixNano"),
        status_code=_integer(status.get("code"), at, "status code"),
        status_message=message,
        attributes=attributes_of(raw.get("attributes"), at),
        events=events,
        where=at,
        resource=resource,
    )


def _logs(document: Mapping[str, Any], where: str, batch: OtlpBatch) -> None:
    for resource_logs in _list(document.get("resourceLogs"), where, "resourceLogs"):
        resource_logs = _object(resource_logs, where, "a resourceLogs item")
        for scope in _list(resource_logs.get("scopeLogs"), where, "scopeLogs"):
            scope = _object(scope, where, "a scopeLogs item")
            for raw in _list(scope.get("logRecords"), where, "logRecords"):
                raw = _object(raw, where, "a log record")
                attributes = attributes_of(raw.get("attributes"), where)
                name = raw.get("eventName") or attributes.get("event.name") or ""
                if not isinstance(name, str):
                    raise _bad(where, "a log record's event name is not a string")
                batch.logs.append(
                    LogRecord(
                        trace_id=_hex_id(raw.get("traceId"), 16, where, "traceId", optional=True),
                        span_id=_hex_id(raw.get("spanId"), 8, where, "spanId", optional=True),
                        event_name=name,
                        time_ns=_integer(
                            raw.get("timeUnixNano") or raw.get("observedTimeUnixNano"),
                            where,
                            "timeUnixNano",
                        ),
                        attributes=attributes,
                        body=attribute_value(raw.get("body"), where),
                        where=where,
                    )
                )


def read_document(document: Any, where: str) -> OtlpBatch:
    """The spans and log records of one OTLP/JSON request object."""
    document = _object(document, where, "an OTLP document")
    if "resourceSpans" not in document and "resourceLogs" not in document:
        raise _bad(where, "not an OTLP request: no resourceSpans or resourceLogs")
    batch = OtlpBatch()
    _spans(document, where, batch)
    _logs(document, where, batch)
    return batch


def _json_documents(data: bytes, name: str) -> Iterator[tuple[Any, str]]:
    try:
        yield orjson.loads(data), f"{name}:1"
        return
    except orjson.JSONDecodeError:
        pass
    for number, line in enumerate(data.split(b"\n"), 1):
        if not line.strip():
            continue
        try:
            yield orjson.loads(line), f"{name}:{number}"
        except orjson.JSONDecodeError as e:
            raise _bad(f"{name}:{number}", f"not JSON ({e})") from None


def _proto_document(message: bytes, where: str, kind: str | None = None) -> dict[str, Any]:
    """One binary OTLP request as its OTLP/JSON object.

    ``kind`` (``traces``, ``logs``) says which request it is (an OTLP/HTTP path does); a
    file's messages are tried as traces first, then as logs: both start with field 1, so a
    logs request read as traces is told apart by its spans' ids, which would not be ids.
    """
    try:
        from google.protobuf import json_format  # type: ignore[import-untyped]
        from google.protobuf.message import DecodeError  # type: ignore[import-untyped]
        from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
    except ImportError:
        raise _bad(
            where,
            "binary OTLP needs opentelemetry-proto: pip install 'agent-journal[otel]'",
        ) from None
    kinds: dict[str, Any] = {
        "traces": trace_service_pb2.ExportTraceServiceRequest,
        "logs": logs_service_pb2.ExportLogsServiceRequest,
    }
    failure = "empty"
    for name in [kind] if kind else ["traces", "logs"]:
        request = kinds[name]()
        try:
            request.ParseFromString(message)
        except (DecodeError, RuntimeError, ValueError) as e:
            failure = str(e)
            continue
        if name == "traces" and not kind and not _ids_fit(request):
            continue
        document: dict[str, Any] = json_format.MessageToDict(request, use_integers_for_enums=True)
        return document
    raise _bad(where, f"not an OTLP protobuf request ({failure})")


def _ids_fit(request: Any) -> bool:
    return all(
        len(span.span_id) == 8 and len(span.trace_id) == 16
        for resource in request.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    ) and all(
        resource.scope_spans or not resource.ListFields() for resource in request.resource_spans
    )


def _proto_messages(data: bytes, name: str) -> Iterator[tuple[bytes, str]]:
    """The messages of a length-prefixed file, or the whole data as one message."""
    messages, offset, index = [], 0, 0
    while offset + 4 <= len(data):
        (size,) = struct.unpack(">I", data[offset : offset + 4])
        if offset + 4 + size > len(data):
            break
        index += 1
        messages.append((data[offset + 4 : offset + 4 + size], f"{name}: message {index}"))
        offset += 4 + size
    if offset == len(data) and messages:
        yield from messages
    else:
        yield data, f"{name}: message 1"


def read_body(
    data: bytes, name: str, *, binary: bool | None = None, kind: str | None = None
) -> OtlpBatch:
    """The spans and records of OTLP bytes: JSON (lines) or protobuf, told apart by content.

    ``binary`` forces protobuf (True) or JSON (False), as an HTTP ``Content-Type`` does;
    ``kind`` (``traces``, ``logs``) says which request a protobuf body is.
    """
    stripped = data.lstrip()
    if binary is None:
        binary = not stripped.startswith((b"{", b"["))
    batch = OtlpBatch()
    if not binary:
        for document, where in _json_documents(data, name):
            batch.extend(read_document(document, where))
        return batch
    for message, where in _proto_messages(data, name):
        batch.extend(read_document(_proto_document(message, where, kind), where))
    return batch


def read_otlp(path: str | Path) -> OtlpBatch:
    """The spans and log records of an OTLP file (see the module for the shapes).

    Raises:
        InvalidInputError: unreadable or malformed, naming ``file:line`` and the span.
    """
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise InvalidInputError(f"{path}: cannot read ({e.strerror or e})") from None
    return read_body(data, str(path))
