"""An OpenAI-compatible server whose policy makes parallel tool calls, for `shop`.

After the last user message (``order 12 and order 34``): one ``lookup_order`` per order, in
one response; then one ``check_stock`` per order, in one response; then ``send_email``;
then the answer. The react agent's conversations (one order) go to `tests.fake_openai`'s
policy. Every request is counted (`Counting.requests`), so a test knows what reached it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tests.fake_openai import Handler, _digest, chat_chunks, chat_completion


def _text(content: Any) -> str:
    if isinstance(content, list):
        return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return str(content or "")


def shop_message(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The assistant message the policy answers ``messages`` with.

    By what the model called last since the last user message: nothing yet, the lookups
    (one per order), the stock checks (one per order found), the e-mail.
    """
    last_user = max(i for i, m in enumerate(messages) if m.get("role") == "user")
    orders = re.findall(r"order (\d+)", _text(messages[last_user].get("content")))
    since = messages[last_user:]
    asked = [m for m in since if m.get("role") == "assistant" and m.get("tool_calls")]
    last = asked[-1]["tool_calls"][0]["function"]["name"] if asked else None
    results = [_text(m.get("content")) for m in since if m.get("role") == "tool"]
    calls: list[tuple[str, dict[str, Any]]] = []
    if last is None:
        calls = [("lookup_order", {"order_id": order}) for order in orders]
    elif last == "lookup_order":
        found = [json.loads(r) for r in results if r.startswith("{")]
        calls = [("check_stock", {"sku": f["sku"], "quantity": 1}) for f in found]
    elif last == "check_stock":
        calls = [("send_email", {"to": "customer@example.com", "body": " ".join(orders)})]
    if not calls:
        said = results[-1] if results else ""
        return {"role": "assistant", "content": f"Orders {', '.join(orders)}: {said}"}
    digest = _digest(messages)
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": f"call_{digest}_{index}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
            for index, (name, arguments) in enumerate(calls)
        ],
    }


class Counting(Handler):
    """The shop policy for conversations about several orders, the fake one's otherwise
    (and for a stream)."""

    requests: list[dict[str, Any]] = []

    def do_POST(self) -> None:  # noqa: N802 - the http.server API
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        self.requests.append(body)
        messages = body["messages"]
        question = " ".join(_text(m.get("content")) for m in messages if m.get("role") == "user")
        if body.get("stream"):  # (the one-order policy only)
            self._events([json.dumps(chunk) for chunk in chat_chunks(body)] + ["[DONE]"])
            return
        whole = chat_completion(body)
        if " and order " in question:
            message = shop_message(messages)
            whole["choices"][0]["message"] = message
            whole["choices"][0]["finish_reason"] = (
                "tool_calls" if message.get("tool_calls") else "stop"
            )
        self._json(whole)
