"""A recording HTTP proxy for agents in any language: `ProxyServer` and what it is built of.

An agent's client is pointed at the proxy (``OPENAI_BASE_URL``, ``ANTHROPIC_BASE_URL``);
the proxy forwards each model call to its upstream, streams the answer through as it
arrives, and journals each exchange into the session of its conversation (named by the
``X-Agent-Journal-Session`` header, or found by continuity: `Conversations`). In a replay
(``agent-journal proxy --replay``, `replay.proxy`) the same server answers from the
recording through a `capture.Player` and never reaches an upstream.

The modules: `server` (the HTTP server, `Recording`, `Refusal`), `session` (one
conversation's session), `conversations` (finding a request's conversation), `upstream`
(forwarding), `sse` (reading a stream event by event), and a `Wire` per wire format
(`openai_wire`: chat completions and the Responses API; `anthropic_wire`: messages), each
pure functions over the JSON the format sends.
"""

from .anthropic_wire import MESSAGES
from .conversations import Conversations
from .openai_wire import CHAT, RESPONSES
from .server import (
    METADATA_PREFIX,
    SESSION_HEADER,
    WIRES,
    ProxyServer,
    Recording,
    Refusal,
    SessionSource,
    proxy_metadata,
)
from .session import CAPTURED_WITH, Exchange, ProxySession
from .sse import SseEvent, SseReader
from .upstream import Upstream, UpstreamError
from .wire import StartFields, Turn, Wire

__all__ = [
    "CAPTURED_WITH",
    "CHAT",
    "MESSAGES",
    "METADATA_PREFIX",
    "RESPONSES",
    "SESSION_HEADER",
    "WIRES",
    "Conversations",
    "Exchange",
    "ProxyServer",
    "ProxySession",
    "Recording",
    "Refusal",
    "SessionSource",
    "SseEvent",
    "SseReader",
    "StartFields",
    "Turn",
    "Upstream",
    "UpstreamError",
    "Wire",
    "proxy_metadata",
]
