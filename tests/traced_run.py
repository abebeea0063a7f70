"""Run `traced_app` in production, traced by a real instrumentation, exported for real.

``python tests/traced_run.py SHAPE EXPORT MODEL_URL [QUESTION ...]``:

* SHAPE: ``genai`` (openai-v2, semconv 1.37 attributes, content on), ``genai-off`` (content
  off), ``genai-events`` (openai-v2's own legacy path: messages as log records, semconv up
  to 1.36), ``openinference`` (openinference-instrumentation-openai);
* EXPORT: ``json:PATH`` (the SDK's OTLP JSON file exporters, spans and logs to one file),
  ``proto:PATH`` (OTLP protobuf, each request length-prefixed, as the Collector's file
  exporter writes), ``http:URL`` (the SDK's OTLP/HTTP exporters, protobuf).

Each question is one trace (a root span ``answer`` around the loop); with
``SHOP_CONVERSATION=ID`` the questions continue one conversation, each trace's root span
carrying ``session.id=ID``. A process of its own,
so the instrumentations' patches of the openai package never reach the test process.
"""

from __future__ import annotations

import os
import struct
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))


def _proto_file(path: str) -> tuple[Any, Any]:
    from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk._logs.export import LogRecordExporter, LogRecordExportResult
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    def write(message: bytes) -> None:
        with open(path, "ab") as out:
            out.write(struct.pack(">I", len(message)) + message)

    class Spans(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            write(encode_spans(spans).SerializeToString())
            return SpanExportResult.SUCCESS

    class Logs(LogRecordExporter):
        def export(self, batch: Any) -> LogRecordExportResult:
            write(encode_logs(batch).SerializeToString())
            return LogRecordExportResult.SUCCESS

        def shutdown(self) -> None:
            pass

        def force_flush(self, timeout_millis: int = 30_000) -> bool:
            return True

    return Spans(), Logs()


def _exporters(export: str) -> tuple[Any, Any]:
    kind, _, where = export.partition(":")
    if kind == "json":
        from opentelemetry.exporter.otlp.json.file import FileSpanExporter
        from opentelemetry.exporter.otlp.json.file._log_exporter import FileLogExporter

        return FileSpanExporter(where), FileLogExporter(where)
    if kind == "proto":
        return _proto_file(where)
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return (
        OTLPSpanExporter(endpoint=f"{where}/v1/traces"),
        OTLPLogExporter(endpoint=f"{where}/v1/logs"),
    )


def main() -> None:
    shape, export, url, *questions = sys.argv[1:]
    os.environ["SHOP_MODEL_URL"] = url
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    spans, logs = _exporters(export)
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    if shape == "openinference":
        from openinference.instrumentation.openai import OpenAIInstrumentor

        OpenAIInstrumentor().instrument(tracer_provider=tracer_provider)
    else:
        import opentelemetry.instrumentation.openai_v2 as openai_v2

        if shape == "genai-events":
            # the instrumentation's own pre-1.37 path (util-genai 1.1 always reports the
            # experimental mode): messages as log records, content on with "true"
            openai_v2.is_experimental_mode = lambda: False
            os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "true"
        else:
            os.environ["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_latest_experimental"
            content = "NO_CONTENT" if shape == "genai-off" else "SPAN_ONLY"
            os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = content
        openai_v2.OpenAIInstrumentor().instrument(
            tracer_provider=tracer_provider, logger_provider=logger_provider
        )
    import traced_app

    tracer = tracer_provider.get_tracer("shop")
    conversation = os.environ.get("SHOP_CONVERSATION")
    history: list[dict[str, Any]] | None = [] if conversation else None
    for question in questions or ["where is order 7, three of them?"]:
        with tracer.start_as_current_span("answer") as root:
            if conversation:
                root.set_attribute("session.id", conversation)
            print(traced_app.answer(question, history), flush=True)
    tracer_provider.shutdown()
    logger_provider.shutdown()


if __name__ == "__main__":
    main()
