"""An entry whose client is built as the openai docs build it: ``OpenAI()``, its key and
address from the environment (``OPENAI_API_KEY``, ``OPENAI_BASE_URL``), at import."""

from __future__ import annotations

from openai import OpenAI

from capture import Capture
from journal import Journal

capture = Capture(Journal.open(":memory:"))
client = capture.openai(OpenAI(max_retries=0))


@capture.entry
def ask(question: str) -> str:
    reply = client.responses.create(model="fake-1", input=question)
    return str(reply.output[0].type)
