"""The journal's adapters to other formats: JSONL in and out, OpenAI-style transcripts in,
OpenTelemetry traces in and out, ATIF trajectories in and out, copies between journals, and
format-keeping redaction.

Each reads or writes the record through `journal.Journal` and the canonical bytes; none is
needed to append, read, fold or verify a journal.
"""

from .atif_export import atif_json, atif_trajectory
from .atif_import import convert_atif
from .jsonl import (
    FORMAT,
    FORMAT_VERSION,
    ImportResult,
    JsonlFile,
    export_lines,
    export_session,
    header_for,
    import_file,
    read_input,
    read_jsonl,
    write_atomically,
    write_jsonl,
)
from .openai_import import ImportReport, convert_files, import_converted, import_openai
from .openai_messages import (
    MODEL_SETTINGS,
    content_text,
    parse_arguments,
    proposal_from_completion,
    proposal_from_response,
    response_body,
    system_prompt_of,
    tool_specs_of,
)
from .otlp import otlp_document, otlp_json
from .otlp_collect import TraceCollector
from .otlp_import import CONTENT_SETTINGS, convert_batch, convert_otlp, request_digest
from .otlp_messages import projection as message_projection
from .otlp_read import OtlpBatch, read_body, read_otlp
from .redact import Redactor, rechain
from .transfer import CopyResult, copy_session, copy_sessions, select_sessions

__all__ = [
    "CONTENT_SETTINGS",
    "FORMAT",
    "FORMAT_VERSION",
    "MODEL_SETTINGS",
    "CopyResult",
    "ImportReport",
    "ImportResult",
    "JsonlFile",
    "OtlpBatch",
    "Redactor",
    "TraceCollector",
    "atif_json",
    "atif_trajectory",
    "content_text",
    "convert_atif",
    "convert_batch",
    "convert_files",
    "convert_otlp",
    "copy_session",
    "copy_sessions",
    "export_lines",
    "export_session",
    "header_for",
    "import_converted",
    "import_file",
    "import_openai",
    "message_projection",
    "otlp_document",
    "otlp_json",
    "parse_arguments",
    "proposal_from_completion",
    "proposal_from_response",
    "read_body",
    "read_input",
    "read_jsonl",
    "read_otlp",
    "rechain",
    "request_digest",
    "response_body",
    "select_sessions",
    "system_prompt_of",
    "tool_specs_of",
    "write_atomically",
    "write_jsonl",
]
