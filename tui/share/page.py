"""Write a shared page: one self-contained HTML file, no network when it is opened.

The template, its style and its script are package data (``page.html``, ``page.css``,
``page.js`` beside this module). The page's data goes into ``<script
type="application/json">`` blocks, never run, with every ``<``, ``>`` and ``&`` written
as a JSON escape, so no text of a session (a ``</script>`` in a tool result, say) can
close the block or be read as markup; the script puts all text on the page with
``textContent``, never as HTML. A Content-Security-Policy allows only the page's own
style and script (by their hashes) and no connection, image, font or frame from
anywhere: the file cannot load or send anything.
"""

from __future__ import annotations

import base64
import hashlib
import html
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import orjson

from journal.formats import write_atomically

from .data import page_data
from .runs import SharedRuns

__all__ = ["json_block", "page_lines", "write_page"]

_ESCAPES = {
    ord("<"): "\\u003c",
    ord(">"): "\\u003e",
    ord("&"): "\\u0026",
    0x2028: "\\u2028",
    0x2029: "\\u2029",
}


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def json_block(element_id: str, value: Any) -> str:
    """``value`` as a JSON data block that no string inside it can end or turn into markup."""
    text = orjson.dumps(value).decode("utf-8").translate(_ESCAPES)
    return f'<script type="application/json" id="{element_id}">{text}</script>'


def _digest(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode()


def page_lines(runs: SharedRuns) -> Iterator[bytes]:
    """The page's HTML, in parts (a large session is never one string)."""
    index, chunks = page_data(runs)
    style, script = _asset("page.css"), _asset("page.js")
    policy = (
        "default-src 'none'; "
        f"style-src '{_digest(style)}'; script-src '{_digest(script)}'; "
        "img-src 'none'; font-src 'none'; connect-src 'none'; frame-src 'none'; "
        "base-uri 'none'; form-action 'none'"
    )
    head, tail = _asset("page.html").split("<!--DATA-->")
    title = f"agent-journal: {runs.session_id}"
    yield (
        head.replace("{{policy}}", html.escape(policy))
        .replace("{{title}}", html.escape(title))
        .replace("{{style}}", style)
        .encode("utf-8")
    )
    yield json_block("aj-index", index).encode("utf-8")
    # the first chunk of each run before the script, the rest after it: the page draws
    # while the parser still reads the later chunks (the script waits for one it needs)
    for run, run_chunks in enumerate(chunks):
        if run_chunks:
            yield json_block(f"aj-{run}-0", run_chunks[0]).encode("utf-8")
    script_part, end = tail.split("</body>")
    yield script_part.replace("{{script}}", script).encode("utf-8")
    for run, run_chunks in enumerate(chunks):
        for number, chunk in enumerate(run_chunks[1:], start=1):
            yield json_block(f"aj-{run}-{number}", chunk).encode("utf-8")
    yield ("</body>" + end).encode("utf-8")


def write_page(runs: SharedRuns, path: str | Path) -> int:
    """Write the page to ``path`` atomically; return its size in bytes."""
    write_atomically(page_lines(runs), path)
    return Path(path).stat().st_size
