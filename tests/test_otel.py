"""OpenTelemetry export: OTLP/JSON with the GenAI semantic conventions, parsed by the protos."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from journal import Journal, import_openai, otlp_document, parse_ts
from journal.formats.otlp import otlp_json, span_id, trace_id

from .helpers import TickingClock, one_error_line, run_cli, sample_session, short_session
from .openai_helpers import SAMPLE


def _journal(path: Path) -> Path:
    """A journal with the sample session (every event type) and a short one, an append each."""
    with Journal.open(path, clock=TickingClock()) as journal:
        for session_id, events in (("full", sample_session()), ("short", short_session())):
            for event in events:
                journal.append(session_id, [event])  # type: ignore[list-item]
    return path


def _attributes(span: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in span.get("attributes", []):
        value = item["value"]
        [(kind, raw)] = value.items()
        if kind == "intValue":
            raw = int(raw)
        elif kind == "arrayValue":
            raw = [next(iter(v.values())) for v in raw["values"]]
        out[item["key"]] = raw
    return out


def _spans(document: dict[str, Any]) -> list[dict[str, Any]]:
    [resource] = document["resourceSpans"]
    [scope] = resource["scopeSpans"]
    assert scope["scope"]["name"] == "agent-journal"
    spans: list[dict[str, Any]] = scope["spans"]
    return spans


def test_spans_follow_the_genai_conventions(tmp_path: Path) -> None:
    with Journal.open(_journal(tmp_path / "j.db")) as journal:
        document = otlp_document(journal, ["full"])
        records = list(journal.events("full"))
    spans = _spans(document)
    names = [span["name"] for span in spans]
    assert names == [
        "invoke_agent tests.agents:build",
        "chat model-1",
        "execute_tool search",
        "chat model-1",
        "execute_tool refund",
    ]
    root, chat, search, chat2, refund = spans
    assert {span["traceId"] for span in spans} == {trace_id("full")}
    assert len(trace_id("full")) == 32 and len(root["spanId"]) == 16
    assert "parentSpanId" not in root
    assert all(span["parentSpanId"] == root["spanId"] for span in spans[1:])
    assert [span["kind"] for span in spans] == [1, 3, 1, 3, 1]  # INTERNAL, CLIENT, ...
    assert chat["spanId"] == span_id("full", 2) and search["spanId"] == span_id("full", 3)

    attributes = _attributes(root)
    assert attributes["gen_ai.operation.name"] == "invoke_agent"
    assert attributes["gen_ai.agent.name"] == "tests.agents:build"
    assert attributes["gen_ai.conversation.id"] == "full"
    assert attributes["gen_ai.request.model"] == "model-1"
    assert (attributes["gen_ai.usage.input_tokens"], attributes["gen_ai.usage.output_tokens"]) == (
        220,
        30,
    )
    assert root["status"]["code"] == 2 and attributes["error.type"] == "error"
    events = [event["name"] for event in root["events"]]
    assert events == [
        "agent_journal.turn",
        "agent_journal.circuit_opened",
        "agent_journal.fallback_invoked",
        "agent_journal.context_compacted",
        "agent_journal.agent_completed",
        "agent_journal.turn",
        "agent_journal.agent_halted",
    ]

    attributes = _attributes(chat)
    assert attributes["gen_ai.operation.name"] == "chat"
    assert (attributes["gen_ai.usage.input_tokens"], attributes["gen_ai.usage.output_tokens"]) == (
        100,
        20,
    )
    assert attributes["gen_ai.usage.cache_read.input_tokens"] == 50
    assert attributes["gen_ai.response.finish_reasons"] == ["tool_calls"]
    # the gate's verdict on the proposal's second call is an event of its chat span
    [verdict] = chat["events"]
    assert verdict["name"] == "agent_journal.verification_failed"
    assert _attributes(verdict)["agent_journal.stage"] == "guard"
    assert [e["name"] for e in chat2["events"]] == ["agent_journal.repair_applied"]

    attributes = _attributes(search)
    assert attributes["gen_ai.operation.name"] == "execute_tool"
    assert (attributes["gen_ai.tool.name"], attributes["gen_ai.tool.call.id"]) == ("search", "c1")
    assert "status" not in search
    assert refund["status"] == {"code": 2, "message": "infrastructure"}
    assert _attributes(refund)["error.type"] == "infrastructure"

    # times come from ts: a chat span ends at its event and starts latency_ms earlier
    def nanos(seq: int) -> int:
        moment = parse_ts(records[seq].ts)
        return int(moment.timestamp()) * 10**9 + moment.microsecond * 1000

    assert int(chat["endTimeUnixNano"]) == nanos(2)
    assert int(chat["startTimeUnixNano"]) == max(nanos(2) - 120_000_000, nanos(0))
    assert int(search["startTimeUnixNano"]) == nanos(2)  # no duration: from its proposal
    assert int(root["startTimeUnixNano"]) == nanos(0)
    assert int(root["endTimeUnixNano"]) == nanos(len(records) - 1)


def test_content_is_opt_in(tmp_path: Path) -> None:
    with Journal.open(_journal(tmp_path / "j.db")) as journal:
        plain = otlp_json(otlp_document(journal, ["full", "short"]))
        rich = otlp_document(journal, ["full", "short"], content=True)
    for secret in (b"refund order 7", b"order 7", b"Refund queued", b"payments API"):
        assert secret not in plain
    spans = _spans(rich)
    root = _attributes(spans[0])
    assert json.loads(root["gen_ai.input.messages"])[0] == {
        "role": "user",
        "parts": [{"type": "text", "content": "refund order 7"}],
    }
    assert root["gen_ai.system_instructions"] == json.dumps(
        [{"content": "You are a refunds agent.", "type": "text"}], separators=(",", ":")
    )
    output = json.loads(_attributes(spans[1])["gen_ai.output.messages"])
    assert output[0]["parts"][0] == {
        "type": "tool_call",
        "id": "c1",
        "name": "search",
        "arguments": {"q": "order 7"},
    }
    tool = _attributes(spans[2])
    assert (tool["gen_ai.tool.call.arguments"], tool["gen_ai.tool.call.result"]) == (
        '{"q":"order 7"}',
        '{"total":100}',
    )
    assert spans[4]["status"]["message"] == "payments API unreachable"
    assert {span["traceId"] for span in spans} == {trace_id("full"), trace_id("short")}


def test_the_export_is_deterministic(tmp_path: Path) -> None:
    with Journal.open(_journal(tmp_path / "j.db")) as journal:
        first = otlp_json(otlp_document(journal, ["full", "short"], content=True))
        second = otlp_json(otlp_document(journal, ["full", "short"], content=True))
    assert first == second


def _to_protobuf_json(document: dict[str, Any]) -> dict[str, Any]:
    """OTLP/JSON writes ids as hex; protobuf's JSON parser reads bytes as base64."""

    def convert(value: Any) -> Any:
        if isinstance(value, dict):
            return {
                key: base64.b64encode(bytes.fromhex(item)).decode()
                if key in ("traceId", "spanId", "parentSpanId")
                else convert(item)
                for key, item in value.items()
            }
        if isinstance(value, list):
            return [convert(item) for item in value]
        return value

    converted: dict[str, Any] = convert(document)
    return converted


def test_the_output_parses_into_the_protobuf_message(tmp_path: Path) -> None:
    json_format = pytest.importorskip("google.protobuf.json_format")
    service = pytest.importorskip("opentelemetry.proto.collector.trace.v1.trace_service_pb2")
    with Journal.open(_journal(tmp_path / "j.db")) as journal:
        import_openai(journal, [SAMPLE], error_prefix="Error:")
        sessions = ["full", "short", "airline-task-0", "airline-task-48"]
        document = json.loads(otlp_json(otlp_document(journal, sessions, content=True)))
    request = service.ExportTraceServiceRequest()
    json_format.ParseDict(_to_protobuf_json(document), request)
    spans = request.resource_spans[0].scope_spans[0].spans
    assert len(spans) == len(_spans(document))
    root = spans[0]
    assert root.trace_id.hex() == trace_id("full")
    assert root.kind == 1 and root.status.code == 2
    assert root.start_time_unix_nano > 0
    imported = [span for span in spans if span.trace_id.hex() == trace_id("airline-task-48")]
    failed = [
        s
        for s in imported
        if s.name == "execute_tool get_reservation_details" and s.status.code == 2
    ]
    assert len(failed) == 1
    assert failed[0].status.message == "Error: Reservation anya_garcia_5901 not found"
    provider = {a.key: a.value.string_value for a in imported[0].attributes}
    assert provider["gen_ai.provider.name"] == "openai"


def test_cli_export_otlp(tmp_path: Path) -> None:
    db = _journal(tmp_path / "j.db")
    out = tmp_path / "traces.json"
    result = run_cli("export", "full", "short", "--format", "otlp", "-o", out, "--db", db)
    assert result.exit_code == 0, result.stderr
    assert "exported 2 session(s): 8 spans" in result.stdout
    document = json.loads(out.read_text())
    assert len(_spans(document)) == 8
    alias = run_cli("export", "short", "--format", "otel", "--db", db)
    assert alias.exit_code == 0
    assert _spans(json.loads(alias.stdout))[0]["name"] == "invoke_agent tests.agents:short"
    assert "gen_ai.tool.call.result" not in alias.stdout
    rich = run_cli("export", "short", "--format", "otel", "--content", "--db", db)
    assert "gen_ai.tool.call.result" in rich.stdout


def test_cli_export_usage_and_missing_sessions(tmp_path: Path) -> None:
    db = _journal(tmp_path / "j.db")
    two = run_cli("export", "full", "short", "--db", db)
    assert two.exit_code == 2 and "exactly one session" in two.stderr
    line = one_error_line(
        run_cli("export", "full", "nope", "--format", "otlp", "-o", tmp_path / "x.json", "--db", db)
    )
    assert "nope" in line
    assert not (tmp_path / "x.json").exists()
